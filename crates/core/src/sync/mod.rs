//! `plan()`: one Kruise reconcile (`cloneset_controller.go`, `doReconcile`, and its `sync/` package) as a pure
//! function: revisions → scale or update → status.

pub mod budget;
mod refresh;
mod scale;
pub(crate) mod sort;
pub(crate) mod status;
mod steps;
mod update;

use std::borrow::Cow;
use std::cell::OnceCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use insitu_api::validation::format_selector;
use insitu_api::{CloneSet, CloneSetUpdateStrategy, keys};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::lifecycle;
use crate::model::claim::{self, Claim, Claimer};
use crate::model::plan::{Action, Budget, Plan, PodMutation, UpdateReason, Warning};
use crate::model::pods::{self, FactsContext, Lc, PodFacts};
use crate::model::summary::{self, PodSummary, RevisionKey};
use crate::revision::{self, short_hash};
use crate::sync::budget::DiffPod;
use crate::sync::status::StatusInput;
use crate::util::selector::Selector;
use crate::{FeatureGates, Snapshot};

/// Pods created per round at most. Kruise creates every missing pod in one round (in slow-start batches);
/// the bound keeps one plan's time and memory independent of `spec.replicas` (a plan holds each pod it
/// creates), and the pods' creation triggers the next round, which plans the next batch.
pub const MAX_CREATES_PER_ROUND: usize = 1000;

/// Plans the next round for one CloneSet. Pure and deterministic: same snapshot → same plan.
pub fn plan(s: &Snapshot) -> Plan {
    Planner::new(s).run()
}

struct Planner<'a> {
    s: &'a Snapshot,
    cs: &'a CloneSet,
    gates: &'a FeatureGates,
    plan: Plan,
    requeue: Option<Duration>,
    failed_scale: Option<String>,
    failed_update: Option<String>,
    /// `now` as RFC3339, formatted on first use: every lifecycle patch carries it.
    now_rfc3339: OnceCell<String>,
    /// The last `budget::calculate` and its inputs (PreparingUpdate counted as updated, exclude
    /// PreparingDelete; the pods are fixed for the plan): scale and update usually ask for the same
    /// numbers, and each computation walks every pod.
    budget_memo: Option<((bool, bool), Budget)>,
    /// Some lifecycle hook has `markPodNotReady` (KruisePodReady bookkeeping needed even without a condition).
    mark_not_ready: bool,
    /// The owned PVCs scale works with: no deletionTimestamp, and with disablePVCReuse only those of active
    /// pods (Kruise: the list `cleanupPVCs` returns).
    pvcs: Vec<&'a PersistentVolumeClaim>,
}

fn lifecycle_patch(f: &PodFacts, state: &str, now_rfc3339: &str) -> Action {
    let mut labels = BTreeMap::new();
    labels.insert(keys::LIFECYCLE_STATE_LABEL.to_string(), Some(state.to_string()));
    let mut annotations = BTreeMap::new();
    annotations.insert(
        keys::LIFECYCLE_TIMESTAMP_ANNOTATION.to_string(),
        Some(now_rfc3339.to_string()),
    );
    Action::PatchPodMetadata {
        pod: f.name().to_string(),
        uid: f.uid().to_string(),
        labels,
        annotations,
        reason: UpdateReason::Lifecycle,
    }
}

impl<'a> Planner<'a> {
    fn new(s: &'a Snapshot) -> Self {
        Planner {
            s,
            cs: &s.cloneset,
            gates: &s.gates,
            plan: Plan::default(),
            requeue: None,
            failed_scale: None,
            failed_update: None,
            now_rfc3339: OnceCell::new(),
            budget_memo: None,
            mark_not_ready: lifecycle::wants_gate(&s.cloneset),
            pvcs: Vec::new(),
        }
    }

    /// Kruise markPodNotReady on a move to a Preparing state: KruisePodReady False first, then the label.
    fn mark_not_ready(&mut self, f: &PodFacts, to: Lc) {
        if let Some(a) = lifecycle::reconcile(self.cs, &f.pod(), f.name(), f.uid(), to) {
            self.plan.actions.push(a);
        }
    }

    /// Kruise `getOwnedPVCs` + `cleanupPVCs` (`cloneset_controller.go`). With PVC reuse (the default) every
    /// owned PVC stays in play, so a pod that vanished gets its claims back. With `disablePVCReuse`, a PVC of
    /// an inactive pod (Succeeded, Failed or deleting) is handed over to that pod, so it goes away with it,
    /// and a PVC of no pod at all is deleted; only PVCs of active pods stay in play.
    fn pvcs_in_play(&mut self, all: &[PodSummary]) {
        let live: Vec<&'a PersistentVolumeClaim> = self
            .s
            .pvcs
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| &**p)
            .collect();
        let reuse = !self
            .cs
            .spec
            .scale_strategy
            .as_ref()
            .is_some_and(|s| s.disable_pvc_reuse);
        if reuse || live.is_empty() {
            self.pvcs = live;
            return;
        }
        // Kruise looks at every owned pod here, before claimPods drops those the selector no longer matches.
        let mut active: HashSet<&str> = HashSet::new();
        let mut inactive: HashMap<&str, &ObjectMeta> = HashMap::new();
        for p in all {
            let id = pods::instance_id(p.labels());
            if id.is_empty() {
                continue;
            }
            if p.active() {
                active.insert(id);
            } else {
                inactive.insert(id, p.meta());
            }
        }
        let mut live = live;
        live.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut kept = Vec::with_capacity(live.len());
        for pvc in live {
            let id = pods::instance_id(&pvc.metadata.labels);
            let name = pvc.metadata.name.clone().unwrap_or_default();
            let uid = pvc.metadata.uid.clone().unwrap_or_default();
            if active.contains(id) {
                kept.push(pvc);
            } else if let Some(pod) = inactive.get(id) {
                let pod_name = pod.name.clone().unwrap_or_default();
                self.why(format!(
                    "disablePVCReuse: PVC {name} belongs to inactive pod {pod_name} → owned by that pod from now on"
                ));
                self.plan.actions.push(Action::ReleasePvc {
                    name,
                    uid,
                    pod: pod_name,
                    pod_uid: pod.uid.clone().unwrap_or_default(),
                });
            } else {
                self.why(format!("disablePVCReuse: PVC {name} has no pod → delete"));
                self.plan.actions.push(Action::DeletePvc {
                    name,
                    uid,
                    pod: None,
                    reason: "disablePVCReuse: no pod with its instance-id".into(),
                });
            }
        }
        self.pvcs = kept;
    }

    /// A lifecycle label transition stamped with `now`.
    fn lifecycle_patch(&self, f: &PodFacts, state: &str) -> Action {
        let now = self.now_rfc3339.get_or_init(|| pods::rfc3339(self.s.now));
        lifecycle_patch(f, state, now)
    }

    /// Kruise `calculateDiffsWithExpectation` over the plan's active pods (`facts`, the same slice for
    /// scale and update). `count_preparing_update`: the PreparingUpdateAsUpdate gate, for scale only.
    /// Memoised (see `budget_memo`).
    fn budget(&mut self, facts: &[PodFacts], count_preparing_update: bool, exclude_pd: bool) -> Budget {
        let inputs = (count_preparing_update, exclude_pd);
        if let Some((memo_inputs, b)) = &self.budget_memo
            && *memo_inputs == inputs
        {
            return b.clone();
        }
        let diff: Vec<DiffPod> = facts
            .iter()
            .map(|f| DiffPod {
                updated: f.updated || (count_preparing_update && f.lc == Lc::PreparingUpdate),
                preparing_delete: f.preparing_delete(),
                to_delete: f.specified_delete,
                available: f.available,
            })
            .collect();
        let allow_rollback =
            self.gates.cloneset_partition_rollback && self.plan.current_revision != self.plan.update_revision;
        let b = budget::calculate(&self.cs.spec, &diff, allow_rollback, exclude_pd);
        self.budget_memo = Some((inputs, b.clone()));
        b
    }

    fn why(&mut self, line: impl Into<String>) {
        self.plan.explanation.push(line.into());
    }

    fn requeue_after(&mut self, d: Duration) {
        if d > Duration::ZERO {
            self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
        }
    }

    /// One Kruise reconcile (`syncCloneSet`), step by step.
    fn run(mut self) -> Plan {
        let cs = self.cs;
        let summariser = summary::Summariser::for_cloneset(cs);
        let summaries = self.summaries(&summariser);
        // The launch-priority barrier: Kruise's own controller, independent of this CloneSet's round.
        self.launch_barriers(&summaries);
        // PVCs first, as Kruise cleans them up before it looks at revisions.
        self.pvcs_in_play(&summaries);
        let revs = self.revisions();
        let pods_to_delete: HashSet<&str> = cs
            .spec
            .scale_strategy
            .as_ref()
            .map(|s| s.pods_to_delete.iter().map(String::as_str).collect())
            .unwrap_or_default();
        let update_name = self.plan.update_revision.clone();
        let ctx = FactsContext {
            now: self.s.now,
            min_ready_seconds: cs.spec.min_ready_seconds(),
            pods_to_delete: &pods_to_delete,
            update: RevisionKey::new(&update_name),
        };
        let facts = self.claim_pods(&summaries, &summariser, &ctx);
        let strategy = cs.spec.update_strategy.clone().unwrap_or_default();
        self.scale_or_update(&summaries, &facts, &revs, &strategy);
        self.status(&facts, &revs, &strategy);
        self.truncate_pods_to_delete(&facts, &pods_to_delete);
        self.truncate_history(&revs, &summaries);
        self.plan.requeue_after = self.requeue;
        self.plan
    }

    /// The caller's summaries when they are the pods (`pods` empty) or those of `pods` (see
    /// `Snapshot::summaries`), else made here (one pass per pod: summary and selector check together, see
    /// PodSummary::build). Summaries the controller made for this CloneSet answer the selector and owner
    /// questions (see `Summariser::for_cloneset`).
    fn summaries(&self, summariser: &summary::Summariser<'_>) -> Cow<'a, [PodSummary]> {
        match self.s.summaries.as_deref() {
            Some(v) if self.s.pods.is_empty() => Cow::Borrowed(v.as_slice()),
            Some(v)
                if v.len() == self.s.pods.len()
                    && v.iter().zip(&self.s.pods).all(|(s, p)| s.pod_ref().is(p)) =>
            {
                Cow::Borrowed(v.as_slice())
            }
            _ => Cow::Owned(
                self.s
                    .pods
                    .iter()
                    .map(|p| summariser.summarise(p.clone()))
                    .collect(),
            ),
        }
    }

    /// Revisions (Kruise `getActiveRevisions`), then the pre-download step for them.
    fn revisions(&mut self) -> revision::ActiveRevisions {
        let revs = revision::active_revisions(self.cs, &self.s.revisions);
        self.plan.actions.extend(revs.actions.iter().cloned());
        self.plan.explanation.extend(revs.explanation.iter().cloned());
        self.plan.update_revision = revs.update.metadata.name.clone().unwrap_or_default();
        self.plan.current_revision = revs.current.metadata.name.clone().unwrap_or_default();
        self.predownload(&revs.current, &revs.update);
        revs
    }

    /// Kruise `claimPods`: the active pods whose labels still match the selector, adopting orphans that match
    /// and releasing owned pods that do not; their facts, in name order.
    fn claim_pods<'s>(
        &mut self,
        summaries: &'s [PodSummary],
        summariser: &summary::Summariser<'_>,
        ctx: &FactsContext<'_>,
    ) -> Vec<PodFacts<'s>> {
        let cs = self.cs;
        let selector = Selector::new(&cs.spec.selector);
        let fingerprint = summariser.fingerprint();
        let mut facts: Vec<PodFacts> = Vec::with_capacity(summaries.len());
        let (mut released, mut sorted) = (Vec::new(), true);
        let claimer = Claimer::new(cs);
        let cs_deleting = cs.metadata.deletion_timestamp.is_some();
        for sm in summaries {
            if !sm.active {
                continue;
            }
            // A summary made for another selector (or none) cannot say: read the labels.
            let selected = sm
                .selected_by(fingerprint)
                .unwrap_or_else(|| selector.matches(sm.labels()));
            let owner = sm
                .owner_by(fingerprint)
                .unwrap_or_else(|| claimer.owner(sm.meta()));
            match claim::claim(owner, selected, cs_deleting, sm.deleting()) {
                Claim::Keep => {}
                Claim::Ignore => continue,
                Claim::Release => {
                    released.push(sm.name());
                    self.plan.actions.push(Action::ReleasePod {
                        pod: sm.name().to_string(),
                        uid: sm.uid().to_string(),
                    });
                    continue;
                }
                Claim::Adopt => {
                    self.why(format!(
                        "pod {} references this CloneSet without a controller and matches the selector: adopt",
                        sm.name()
                    ));
                    self.plan.actions.push(Action::AdoptPod {
                        pod: sm.name().to_string(),
                        uid: sm.uid().to_string(),
                    });
                }
            }
            let f = PodFacts::with_context(sm, ctx);
            // Order checked here, while this pod is being read, not in a second walk over every name.
            sorted &= facts
                .last()
                .is_none_or(|last| last.name_cmp(&f) != Ordering::Greater);
            facts.push(f);
        }
        if !released.is_empty() {
            self.why(format!(
                "{} owned pod(s) no longer match the selector: release (remove the ownerReference): {}",
                released.len(),
                released.join(", ")
            ));
        }
        // Deterministic whatever order the cache lists pods in.
        if !sorted {
            facts.sort_unstable_by(|a, b| a.name_cmp(b));
        }
        facts
    }

    /// Kruise: scale when the pod count is off, else update; never both in one round; neither while deleting.
    fn scale_or_update(
        &mut self,
        summaries: &[PodSummary],
        facts: &[PodFacts],
        revs: &revision::ActiveRevisions,
        strategy: &CloneSetUpdateStrategy,
    ) {
        if self.cs.metadata.deletion_timestamp.is_some() {
            self.why("CloneSet is being deleted: no scale, no update");
            return;
        }
        let (current_name, update_name) = (
            self.plan.current_revision.clone(),
            self.plan.update_revision.clone(),
        );
        if self.scale(
            summaries,
            facts,
            &revs.current,
            &revs.update,
            &current_name,
            &update_name,
        ) {
            self.why("scaling this round: update waits for the next round (Kruise: never both)");
            return;
        }
        let rev_by_hash: HashMap<&str, &Arc<ControllerRevision>> = revs
            .all
            .iter()
            .filter_map(|r| r.metadata.name.as_deref().map(|n| (short_hash(n), r)))
            .collect();
        match strategy.strategy_type() {
            Some(t) => self.update(facts, t, &revs.current, &revs.update, &rev_by_hash),
            None => self.why(format!(
                "spec.updateStrategy.type {:?} is not ReCreate, InPlaceIfPossible, InPlaceOnly or OnDelete: no update",
                strategy.type_.as_deref().unwrap_or("")
            )),
        }
    }

    /// Status (Kruise `calculateStatus` + `inconsistentStatus`): written only when it changed.
    fn status(
        &mut self,
        facts: &[PodFacts],
        revs: &revision::ActiveRevisions,
        strategy: &CloneSetUpdateStrategy,
    ) {
        let spec = &self.cs.spec;
        let partition = budget::partition(strategy.partition.as_ref(), spec.replicas());
        let input = StatusInput {
            update_revision: &self.plan.update_revision,
            current_revision: &self.plan.current_revision,
            collision_count: revs.collision_count,
            expected_updated: spec.replicas() - partition,
            label_selector: format_selector(&spec.selector),
            failed_scale: self.failed_scale.take(),
            failed_update: self.failed_update.take(),
        };
        let (st, rq) = status::compute(self.cs, facts, &input, self.s.now);
        if let Some(d) = rq {
            self.requeue_after(d);
        }
        if status::inconsistent(self.cs.status.as_ref(), &st) {
            self.plan.status = Some(st);
        }
    }

    /// Kruise `truncatePodsToDelete`: names of pods that do not exist any more.
    fn truncate_pods_to_delete(&mut self, facts: &[PodFacts], pods_to_delete: &HashSet<&str>) {
        if pods_to_delete.is_empty() {
            return;
        }
        let names: HashSet<&str> = facts.iter().map(|f| f.name()).collect();
        let mut remove: Vec<String> = pods_to_delete
            .iter()
            .filter(|n| !names.contains(**n))
            .map(|n| (*n).to_string())
            .collect();
        if remove.is_empty() {
            return;
        }
        remove.sort();
        self.why(format!(
            "podsToDelete names no existing pod: remove {}",
            remove.join(", ")
        ));
        self.plan.actions.push(Action::TruncatePodsToDelete { remove });
    }

    /// Kruise `truncateHistory`.
    fn truncate_history(&mut self, revs: &revision::ActiveRevisions, summaries: &[PodSummary]) {
        let limit = self.cs.spec.revision_history_limit();
        let hist = revision::truncate_history(
            &revs.all,
            summaries.iter().map(PodSummary::meta),
            &self.plan.current_revision,
            &self.plan.update_revision,
            limit,
        );
        if !hist.is_empty() {
            self.why(format!(
                "{} non-live revision(s) beyond revisionHistoryLimit {limit}: delete",
                hist.len()
            ));
            self.plan.actions.extend(hist);
        }
    }

    fn template_of(&self, rev: &ControllerRevision, update: &ControllerRevision) -> PodTemplateSpec {
        if std::ptr::eq(rev, update) || rev.metadata.name == update.metadata.name {
            return self.cs.spec.template.clone();
        }
        revision::template_of(rev).unwrap_or_else(|| self.cs.spec.template.clone())
    }

    fn explain_budget(&mut self, b: &Budget, phase: &str) {
        self.why(format!(
            "{phase} budget: partition={} maxSurge={} maxUnavailable={} scaleUp={} (old {}) limit={} scaleDown={} (old {}) deleteReadyLimit={} useSurge={} (old {}) updateNum={} updateMaxUnavailable={}",
            b.partition,
            b.max_surge,
            b.max_unavailable,
            b.scale_up_num,
            b.scale_up_num_old_revision,
            b.scale_up_limit,
            b.scale_down_num,
            b.scale_down_num_old_revision,
            b.delete_ready_limit,
            b.use_surge,
            b.use_surge_old_revision,
            b.update_num,
            b.update_max_unavailable
        ));
    }

    /// A Warning event and the FailedScale condition: the spec asks for something the controller cannot do.
    fn warn(&mut self, reason: &str, message: String) {
        self.why(format!("{reason}: {message}"));
        self.failed_scale = Some(message.clone());
        self.plan.warnings.push(Warning {
            reason: reason.to_string(),
            message,
        });
    }

    fn push_update(&mut self, f: &PodFacts, mutation: PodMutation, reason: UpdateReason) {
        self.plan.actions.push(Action::UpdatePod {
            pod: f.name().to_string(),
            uid: f.uid().to_string(),
            mutation,
            reason,
        });
    }
}
