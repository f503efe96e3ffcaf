//! `plan()`: one Kruise reconcile (research §3.2) as a pure function: revisions → scale or update → status.

use std::cell::OnceCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use insitu_api::validation::format_selector;
use insitu_api::{CloneSet, CloneSetUpdateStrategyType, LifecycleHook, keys};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::budget::{self, DiffPod, Unavailable};
use crate::claim::{self, Claim, Claimer};
use crate::inplace::{self, Grace, StartTemplate};
use crate::plan::{Action, Budget, Plan, PodMutation, PodRefusal, UpdateReason, Warning};
use crate::pods::{self, FactsContext, Lc, PodFacts};
use crate::readiness;
use crate::recreate::Refusal;
use crate::revision::{self, short_hash};
use crate::selector::Selector;
use crate::sort;
use crate::status::{self, StatusInput};
use crate::summary::{self, InFlight, PodSummary, RevisionKey};
use crate::{FeatureGates, PackedPod, Snapshot};

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

/// Kruise `lifecycle.IsPodHooked`: any hook label (k=v) or finalizer present.
pub fn is_hooked(hook: Option<&LifecycleHook>, pod: &ObjectMeta) -> bool {
    let Some(h) = hook else { return false };
    let labels = pod.labels.as_ref();
    let fins = pod.finalizers.as_deref().unwrap_or_default();
    h.finalizers_handler.iter().any(|f| fins.contains(f))
        || h.labels_handler
            .iter()
            .any(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// Kruise `lifecycle.IsPodAllHooked`: every hook label and finalizer present (false without a hook).
pub fn is_all_hooked(hook: Option<&LifecycleHook>, pod: &ObjectMeta) -> bool {
    let Some(h) = hook else { return false };
    let labels = pod.labels.as_ref();
    let fins = pod.finalizers.as_deref().unwrap_or_default();
    h.finalizers_handler.iter().all(|f| fins.contains(f))
        && h.labels_handler
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
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
            mark_not_ready: readiness::wants_gate(&s.cloneset),
            pvcs: Vec::new(),
        }
    }

    /// Kruise markPodNotReady on a move to a Preparing state: KruisePodReady False first, then the label.
    fn mark_not_ready(&mut self, f: &PodFacts, to: Lc) {
        if let Some(a) = readiness::reconcile(self.cs, &f.pod(), f.name(), f.uid(), to) {
            self.plan.actions.push(a);
        }
    }

    /// Kruise `getOwnedPVCs` + `cleanupPVCs` (research §3.2 steps 5–6). With PVC reuse (the default) every
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
            let id = pods::instance_id(p.meta());
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
            let id = pods::instance_id(&pvc.metadata);
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

    fn run(mut self) -> Plan {
        let cs = self.cs;
        let spec = &cs.spec;
        let now = self.s.now;

        let selector = Selector::new(&spec.selector);
        let fingerprint = summary::selector_fingerprint(&spec.selector);
        // The caller's summaries when they are the pods (`pods` empty) or those of `pods` (see
        // `Snapshot::summaries`), else made here (one pass per pod: summary and selector check together,
        // see PodSummary::build).
        let made: Vec<PodSummary>;
        let summaries: &[PodSummary] = match self.s.summaries.as_deref() {
            Some(v) if self.s.pods.is_empty() => v,
            Some(v)
                if v.len() == self.s.pods.len()
                    && v.iter().zip(&self.s.pods).all(|(s, p)| s.pod_ref().is(p)) =>
            {
                v
            }
            _ => {
                made = self
                    .s
                    .pods
                    .iter()
                    .map(|p| PodSummary::build(p.clone().into(), Some((&selector, fingerprint))))
                    .collect();
                &made
            }
        };
        // PVCs first, as Kruise cleans them up before it looks at revisions.
        self.pvcs_in_play(summaries);

        // Revisions (Kruise getActiveRevisions).
        let revs = revision::active_revisions(cs, &self.s.revisions);
        self.plan.actions.extend(revs.actions.iter().cloned());
        self.plan.explanation.extend(revs.explanation.iter().cloned());
        let update_name = revs.update.metadata.name.clone().unwrap_or_default();
        let current_name = revs.current.metadata.name.clone().unwrap_or_default();
        self.plan.update_revision = update_name.clone();
        self.plan.current_revision = current_name.clone();

        // Pods: active ones whose labels still match the selector (Kruise claimPods releases the others).
        let pods_to_delete: HashSet<&str> = spec
            .scale_strategy
            .as_ref()
            .map(|s| s.pods_to_delete.iter().map(String::as_str).collect())
            .unwrap_or_default();
        let ctx = FactsContext {
            now,
            min_ready_seconds: spec.min_ready_seconds(),
            pods_to_delete: &pods_to_delete,
            update: RevisionKey::new(&update_name),
        };
        let mut facts: Vec<PodFacts> = Vec::with_capacity(summaries.len());
        let (mut released, mut sorted) = (Vec::new(), true);
        let claimer = Claimer::new(cs);
        let cs_deleting = cs.metadata.deletion_timestamp.is_some();
        for sm in summaries {
            if !sm.active {
                continue;
            }
            // Kruise claimPods. A summary made for another selector (or none) cannot say: read the labels.
            let selected = sm
                .selected_by(fingerprint)
                .unwrap_or_else(|| selector.matches(sm.meta().labels.as_ref()));
            let pod_deleting = sm.meta().deletion_timestamp.is_some();
            match claim::claim(claimer.owner(sm.meta()), selected, cs_deleting, pod_deleting) {
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
            let f = PodFacts::with_context(sm, &ctx);
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

        let strategy = spec.update_strategy.clone().unwrap_or_default();
        let stype = strategy.strategy_type();
        let deleting = cs.metadata.deletion_timestamp.is_some();
        let rev_by_hash: HashMap<&str, &Arc<ControllerRevision>> = revs
            .all
            .iter()
            .filter_map(|r| r.metadata.name.as_deref().map(|n| (short_hash(n), r)))
            .collect();

        if deleting {
            self.why("CloneSet is being deleted: no scale, no update");
        } else {
            let scaled = self.scale(
                summaries,
                &facts,
                &revs.current,
                &revs.update,
                &current_name,
                &update_name,
            );
            if scaled {
                self.why("scaling this round: update waits for the next round (Kruise: never both)");
            } else {
                match stype {
                    Some(t) => self.update(&facts, t, &revs.current, &revs.update, &rev_by_hash),
                    None => self.why(format!(
                        "spec.updateStrategy.type {:?} is not ReCreate, InPlaceIfPossible, InPlaceOnly or OnDelete: no update",
                        strategy.type_.as_deref().unwrap_or("")
                    )),
                }
            }
        }

        // Status (Kruise calculateStatus + inconsistentStatus).
        let partition = budget::partition(strategy.partition.as_ref(), spec.replicas());
        let input = StatusInput {
            update_revision: &update_name,
            current_revision: &current_name,
            collision_count: revs.collision_count,
            expected_updated: spec.replicas() - partition,
            label_selector: format_selector(&spec.selector),
            failed_scale: self.failed_scale.take(),
            failed_update: self.failed_update.take(),
        };
        let (st, rq) = status::compute(cs, &facts, &input, now);
        if let Some(d) = rq {
            self.requeue_after(d);
        }
        if status::inconsistent(cs.status.as_ref(), &st) {
            self.plan.status = Some(st);
        }

        // Kruise truncatePodsToDelete: names of pods that do not exist any more.
        let remove: Vec<String> = if pods_to_delete.is_empty() {
            Vec::new()
        } else {
            let names: HashSet<&str> = facts.iter().map(|f| f.name()).collect();
            pods_to_delete
                .iter()
                .filter(|n| !names.contains(**n))
                .map(|n| (*n).to_string())
                .collect()
        };
        if !remove.is_empty() {
            let mut remove = remove;
            remove.sort();
            self.why(format!(
                "podsToDelete names no existing pod: remove {}",
                remove.join(", ")
            ));
            self.plan.actions.push(Action::TruncatePodsToDelete { remove });
        }
        // Kruise truncateHistory.
        let hist = revision::truncate_history(
            &revs.all,
            summaries.iter().map(PodSummary::meta),
            &current_name,
            &update_name,
            spec.revision_history_limit(),
        );
        if !hist.is_empty() {
            self.why(format!(
                "{} non-live revision(s) beyond revisionHistoryLimit {}: delete",
                hist.len(),
                spec.revision_history_limit()
            ));
            self.plan.actions.extend(hist);
        }
        self.plan.requeue_after = self.requeue;
        self.plan
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

    /// Kruise `deletePods`: a pod with the preDelete hook goes to PreparingDelete; others are deleted.
    fn delete_pods(&mut self, victims: &[&PodFacts], why: &str) -> bool {
        let hook = self
            .cs
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_delete.as_ref());
        let mut modified = false;
        for f in victims {
            if is_hooked(hook, f.meta()) {
                if f.lc != Lc::PreparingDelete {
                    self.why(format!(
                        "pod {}: preDelete hook present → PreparingDelete ({why})",
                        f.name()
                    ));
                    self.mark_not_ready(f, Lc::PreparingDelete);
                    let patch = self.lifecycle_patch(f, keys::lifecycle::PREPARING_DELETE);
                    self.plan.actions.push(patch);
                    modified = true;
                }
                continue;
            }
            self.why(format!("delete pod {} ({why})", f.name()));
            self.plan.actions.push(Action::DeletePod {
                pod: f.name().to_string(),
                uid: f.uid().to_string(),
                reason: why.to_string(),
            });
            modified = true;
            // Kruise deletePods: the pod's PVCs (same instance-id) go with it.
            let id = pods::instance_id(f.meta());
            if id.is_empty() {
                continue;
            }
            for pvc in &self.pvcs {
                if pods::instance_id(&pvc.metadata) != id {
                    continue;
                }
                let name = pvc.metadata.name.clone().unwrap_or_default();
                self.plan
                    .explanation
                    .push(format!("delete PVC {name} with pod {}", f.name()));
                self.plan.actions.push(Action::DeletePvc {
                    name,
                    uid: pvc.metadata.uid.clone().unwrap_or_default(),
                    pod: Some(f.name().to_string()),
                    reason: why.to_string(),
                });
            }
        }
        modified
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

    /// `spec.replicas` beyond the instance-id space can never be reached: say so (the pods that fit are
    /// still created).
    fn id_space_check(&mut self, replicas: i32, pods: usize) {
        if u64::try_from(replicas).unwrap_or(0) > pods::ID_SPACE {
            self.warn(
                keys::events::INSTANCE_IDS_EXHAUSTED,
                format!(
                    "spec.replicas {replicas} exceeds the {} instance ids (5 characters of 27): at most {} pods can exist, {pods} do; lower spec.replicas",
                    pods::ID_SPACE,
                    pods::ID_SPACE
                ),
            );
        }
    }

    /// Fewer fresh instance ids than pods to create: the id space is (nearly) full.
    fn ids_exhausted(&mut self, missing: usize, taken: usize) {
        self.warn(
            keys::events::INSTANCE_IDS_EXHAUSTED,
            format!(
                "no free instance id for {missing} pod(s): {taken} of the {} ids are taken; lower spec.replicas or delete pods",
                pods::ID_SPACE
            ),
        );
    }

    /// Kruise `Scale` (research §3.6). Returns true when it planned any write.
    fn scale(
        &mut self,
        all: &[PodSummary],
        facts: &[PodFacts],
        current: &ControllerRevision,
        update: &ControllerRevision,
        current_name: &str,
        update_name: &str,
    ) -> bool {
        let cs = self.cs;
        let spec = &cs.spec;
        let replicas = spec.replicas();
        // One pass: pods specified for deletion, pods in PreparingDelete (usually none of either).
        let (mut specified, mut pre_delete, mut num_to_delete) = (Vec::new(), Vec::new(), 0usize);
        for f in facts {
            if f.specified_delete {
                specified.push(f);
            }
            if f.preparing_delete() {
                pre_delete.push(f);
            }
            num_to_delete += usize::from(f.specified_delete || f.preparing_delete());
        }

        // Kruise managePreparingDelete: pods waiting in PreparingDelete come back when replicas need them,
        // unless a preDelete/inPlaceUpdate hook marks pods not ready (no regret then).
        let lc = spec.lifecycle.as_ref();
        let mark = lc.is_some_and(|l| {
            [&l.pre_delete, &l.in_place_update]
                .iter()
                .any(|h| h.as_ref().is_some_and(|h| h.mark_pod_not_ready))
        });
        if !mark {
            let mut diff = i64::from(replicas) - facts.len() as i64 + num_to_delete as i64;
            let mut modified = false;
            for f in &pre_delete {
                if diff <= 0 {
                    break;
                }
                if f.specified_delete {
                    continue;
                }
                self.why(format!(
                    "pod {}: deletion cancelled, replicas need it → PreparingNormal",
                    f.name()
                ));
                let patch = self.lifecycle_patch(f, keys::lifecycle::PREPARING_NORMAL);
                self.plan.actions.push(patch);
                modified = true;
                diff -= 1;
            }
            if modified {
                return true;
            }
        }

        let exclude_pd = self.gates.exclude_preparing_delete
            || cs
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(keys::SCALING_EXCLUDE_PREPARING_DELETE_LABEL))
                == Some(&"true".to_string());
        let b = self.budget(facts, self.gates.preparing_update_as_update, exclude_pd);
        self.plan.budget = b.clone();
        self.explain_budget(&b, "scale");
        if b.scale_up_num > b.scale_up_limit {
            self.why(format!(
                "{}: scaleUp is limited because of scaleStrategy.maxUnavailable, limit: {}",
                keys::events::SCALE_UP_LIMITED,
                b.scale_up_limit
            ));
        }

        if b.scale_up_num > 0 {
            let wanted = usize::try_from(b.scale_up_limit).unwrap_or(0);
            if wanted == 0 {
                self.why(format!(
                    "need {} more pod(s) but the scale-up limit is 0: wait",
                    b.scale_up_num
                ));
                return false;
            }
            self.id_space_check(replicas, all.len());
            // Bounded work per round whatever `replicas` says: Kruise creates in slow-start batches anyway,
            // and the next round (triggered by the created pods) plans the next batch.
            let n = wanted.min(MAX_CREATES_PER_ROUND);
            if n < wanted {
                self.why(format!(
                    "need {wanted} more pod(s): create {n} this round (at most {MAX_CREATES_PER_ROUND} per round), the rest next rounds"
                ));
            }
            let n_current = usize::try_from(b.scale_up_num_old_revision).unwrap_or(0).min(n);
            let taken: HashSet<String> = all
                .iter()
                .filter_map(|p| pods::label(p.meta(), keys::INSTANCE_ID_LABEL).map(str::to_string))
                .chain(all.iter().filter_map(|p| {
                    let name = p.meta().name.as_deref()?;
                    let cs_name = cs.metadata.name.as_deref()?;
                    name.strip_prefix(cs_name)?.strip_prefix('-').map(str::to_string)
                }))
                .collect();
            let seed = format!(
                "{}/{}/{}/{}",
                cs.metadata.uid.as_deref().unwrap_or_default(),
                cs.metadata.name.as_deref().unwrap_or_default(),
                self.s.now.as_nanosecond(),
                all.len()
            );
            // Kruise getOrGenAvailableIDs: ids of PVCs no active pod uses come back first.
            let active_ids: HashSet<&str> = facts.iter().map(|f| pods::instance_id(f.meta())).collect();
            let pvc_ids: BTreeSet<&str> = self
                .pvcs
                .iter()
                .map(|p| pods::instance_id(&p.metadata))
                .filter(|id| !id.is_empty())
                .collect();
            // A reused id names the pod `<cs>-<id>` again. While an old pod of that name still exists
            // (terminating, Succeeded/Failed) the create can only fail with AlreadyExists, as Kruise's does
            // until the old pod is gone: such ids go last, and wait rather than fail (the old pod's removal
            // triggers the next round).
            let cs_name = cs.metadata.name.as_deref().unwrap_or_default();
            let busy: HashSet<&str> = if pvc_ids.iter().any(|id| !active_ids.contains(id)) {
                let names: HashSet<&str> = all.iter().map(PodSummary::name).collect();
                pvc_ids
                    .iter()
                    .copied()
                    .filter(|id| names.contains(format!("{cs_name}-{id}").as_str()))
                    .collect()
            } else {
                HashSet::new()
            };
            let mut reusable: Vec<&str> = pvc_ids.iter().copied().collect();
            reusable.sort_by_key(|id| busy.contains(id));
            let mut ids = pods::available_ids(&seed, n, &reusable, &active_ids, &taken);
            if ids.len() < n {
                self.ids_exhausted(n - ids.len(), taken.len());
            }
            let reused: Vec<&str> = ids
                .iter()
                .map(String::as_str)
                .filter(|id| pvc_ids.contains(id))
                .collect();
            if !reused.is_empty() {
                self.why(format!(
                    "reuse instance id(s) {} of PVC(s) without an active pod",
                    reused.join(", ")
                ));
            }
            let mut waiting = Vec::new();
            ids.retain(|id| {
                let wait = busy.contains(id.as_str());
                if wait {
                    waiting.push(format!("{cs_name}-{id}"));
                }
                !wait
            });
            if !waiting.is_empty() {
                self.why(format!(
                    "pod(s) {} still exist: their replacements with the same name and PVCs wait",
                    waiting.join(", ")
                ));
            }
            if ids.is_empty() {
                return true;
            }
            let n = ids.len();
            let n_current = n_current.min(n);
            let existing: HashSet<&str> = self
                .pvcs
                .iter()
                .filter_map(|p| p.metadata.name.as_deref())
                .collect();
            let cur_tpl = self.template_of(current, update);
            let upd_tpl = &cs.spec.template;
            let mut pvcs_created = 0usize;
            for (i, id) in ids.iter().enumerate() {
                let (tpl, rev) = if i < n_current {
                    (&cur_tpl, current_name)
                } else {
                    (upd_tpl, update_name)
                };
                // Kruise createOnePod: the pod's missing PVCs are created before it.
                for vct in &cs.spec.volume_claim_templates {
                    if vct.metadata.name.as_deref().is_none_or(str::is_empty) {
                        continue;
                    }
                    let pvc = pods::new_pvc(cs, vct, id);
                    if existing.contains(pvc.metadata.name.as_deref().unwrap_or_default()) {
                        continue;
                    }
                    pvcs_created += 1;
                    self.plan.actions.push(Action::CreatePvc { pvc: Box::new(pvc) });
                }
                let pod = pods::new_pod(cs, tpl, rev, id, self.s.now, self.gates.cloneset_short_hash);
                self.plan.actions.push(Action::CreatePod {
                    pod: Box::new(PackedPod::pack(pod)),
                    revision: rev.to_string(),
                });
            }
            self.why(format!(
                "create {n} pod(s): {n_current} at current revision {current_name}, {} at update revision {update_name}",
                n - n_current
            ));
            if pvcs_created > 0 {
                self.why(format!(
                    "create {pvcs_created} PVC(s) from volumeClaimTemplates, each before its pod"
                ));
            }
            return true;
        }

        if !pre_delete.is_empty() && self.delete_pods(&pre_delete, "PreparingDelete and no longer hooked") {
            return true;
        }

        let specified: Vec<&PodFacts> = specified.into_iter().filter(|f| !f.preparing_delete()).collect();
        if !specified.is_empty() {
            let mut ready = 0i32;
            let mut victims = Vec::new();
            for f in &specified {
                if !f.normal_ready {
                    victims.push(*f);
                } else if ready < b.delete_ready_limit {
                    ready += 1;
                    victims.push(*f);
                }
            }
            if victims.len() < specified.len() {
                self.why(format!(
                    "{} ready pod(s) specified for deletion wait: deleteReadyLimit {}",
                    specified.len() - victims.len(),
                    b.delete_ready_limit
                ));
            }
            if self.delete_pods(&victims, "specified delete") {
                return true;
            }
        }

        if b.scale_down_num > 0 {
            if num_to_delete > 0 {
                self.why("scale down skipped while pods are specified for deletion or in PreparingDelete");
                return false;
            }
            let (mut upd, mut old): (Vec<&PodFacts>, Vec<&PodFacts>) = facts.iter().partition(|f| f.updated);
            let total = usize::try_from(b.scale_down_num).unwrap_or(0);
            let old_n = usize::try_from(b.scale_down_num_old_revision).unwrap_or(0);
            // Kruise: the spread ranker when the template has topologySpreadConstraints.
            let keys: Vec<&str> = cs
                .spec
                .template
                .spec
                .as_ref()
                .and_then(|s| s.topology_spread_constraints.as_ref())
                .map(|c| c.iter().map(|c| c.topology_key.as_str()).collect())
                .unwrap_or_default();
            let topology = (!keys.is_empty()).then_some(sort::Topology {
                keys: &keys,
                nodes: &self.s.nodes,
            });
            fn choose<'p, 'f>(
                v: &mut [&'p PodFacts<'f>],
                n: usize,
                topology: Option<sort::Topology>,
            ) -> Vec<&'p PodFacts<'f>> {
                if n < v.len() {
                    // Only the first n victims are needed in order.
                    sort::scale_down_prefix(v, n, topology);
                }
                v.iter().take(n).copied().collect()
            }
            let mut chosen: Vec<&PodFacts> = if old_n >= total {
                choose(&mut old, total, topology)
            } else if old_n > 0 {
                let mut c = choose(&mut old, old_n, topology);
                c.extend(choose(&mut upd, total - old_n, topology));
                c
            } else {
                choose(&mut upd, total, topology)
            };
            let mut ready = 0i32;
            chosen.retain(|f| {
                if !f.normal_ready {
                    true
                } else if ready < b.delete_ready_limit {
                    ready += 1;
                    true
                } else {
                    false
                }
            });
            if chosen.len() < total {
                self.why(format!(
                    "scale down {total}: {} ready pod(s) kept by deleteReadyLimit {}",
                    total - chosen.len(),
                    b.delete_ready_limit
                ));
            }
            return self.delete_pods(&chosen, "scale down");
        }
        false
    }

    /// Kruise `refreshPodState` (in-place Refresh, lifecycle transitions, hash backfill) for one pod.
    /// Hot path: allocates and parses the state annotation only when something can change.
    fn refresh(&mut self, f: &PodFacts) -> bool {
        let now = self.s.now;
        let before = self.plan.actions.len();
        let ipu_true = f.ipu_true();
        // In-place Refresh (research §2.5).
        let mut containers_done = true;
        // Whether the containers are done, for the Updating → Normal check (None: not looked at).
        let mut completed: Option<bool> = None;
        if let Some(g) = f.grace() {
            containers_done = false;
            match inplace::finish_grace(&f.pod(), f.revision(), g, f.state(), now) {
                Grace::Wait(d) => self.requeue_after(d),
                Grace::Finish(m) => {
                    self.why(format!(
                        "pod {}: grace period over → patch images {:?}{}",
                        f.name(),
                        m.container_images,
                        if m.container_resources.is_empty() {
                            String::new()
                        } else {
                            format!(", resize {}", crate::vertical::describe(&m.container_resources))
                        }
                    ));
                    self.push_update(f, m, UpdateReason::FinishGracePeriod);
                }
                Grace::Abandon(m) => {
                    self.why(format!(
                        "pod {}: template changed during the grace period → drop it",
                        f.name()
                    ));
                    self.push_update(f, m, UpdateReason::AbandonGracePeriod);
                }
                Grace::Invalid(e) => self.why(format!("pod {}: {e}", f.name())),
                Grace::Stale(m, why) => {
                    self.plan.warnings.push(Warning {
                        reason: keys::events::STALE_INPLACE_UPDATE_GRACE.to_string(),
                        message: format!("pod {}: {why}", f.name()),
                    });
                    self.why(format!("pod {}: {why}", f.name()));
                    self.push_update(f, m, UpdateReason::FinishGracePeriod);
                }
            }
        } else if f.has_state && (f.lc == Lc::Updating || !ipu_true) {
            // Pending batches only exist while InPlaceUpdateReady is not True (Kruise sets it True once
            // every batch is done), so a ready pod outside `Updating` needs no look at the state. For exactly
            // these pods the summary made the completion check, once per pod version (`InFlight`).
            match f.in_flight {
                InFlight::Unchecked => {}
                InFlight::Done => completed = Some(true),
                InFlight::Waiting | InFlight::Invalid => {
                    containers_done = false;
                    completed = Some(false);
                }
                InFlight::NoNodeAgent => {
                    containers_done = false;
                    completed = Some(false);
                    let msg = format!(
                        "pod {}: a container's env reads a changed label/annotation (env from metadata) and needs a node agent (kruise-daemon) to restart it, but the pod has no {}: nothing will restart it, the update waits; run kruise-daemon (or `insitu nodes`) on the node, or recreate the pod",
                        f.name(),
                        insitu_api::containermeta::RUNTIME_CONTAINERS_META_ANNOTATION
                    );
                    self.why(msg.clone());
                    self.plan.warnings.push(crate::plan::Warning {
                        reason: crate::plan::NO_NODE_AGENT.into(),
                        message: msg,
                    });
                }
                InFlight::ResizePending => {
                    containers_done = false;
                    completed = Some(false);
                    // Kruise keeps waiting for the status to report the resources; say why.
                    if let Some((reason, message)) = crate::vertical::resize_pending(&f.pod()) {
                        self.why(format!(
                            "pod {}: resize pending on its node ({reason}: {message}); the update completes once the kubelet applies it",
                            f.name()
                        ));
                    }
                }
                InFlight::NextBatch => {
                    containers_done = false;
                    completed = Some(false);
                    // Rare (multi-container batches), so the state is parsed again here.
                    let state = f.state().unwrap_or_default();
                    match inplace::parse_state(state).and_then(|st| inplace::next_batch(&f.pod(), st, now)) {
                        Ok(m) => {
                            self.why(format!(
                                "pod {}: previous batch done → next container batch",
                                f.name()
                            ));
                            self.push_update(f, m, UpdateReason::NextBatch);
                        }
                        Err(e) => self.why(format!("pod {}: next batch waits: {e}", f.name())),
                    }
                }
            }
        }
        if containers_done && !ipu_true && f.has_gate() {
            self.plan.actions.push(Action::SetInPlaceUpdateReady {
                pod: f.name().to_string(),
                uid: f.uid().to_string(),
                ready: true,
            });
        }

        // Lifecycle transitions (research §3.8).
        let lc = self.cs.spec.lifecycle.as_ref();
        let ipu_hook = lc.and_then(|l| l.in_place_update.as_ref());
        let updated_or_normal = || {
            if lc.is_some() && !is_all_hooked(ipu_hook, f.meta()) {
                keys::lifecycle::UPDATED
            } else {
                keys::lifecycle::NORMAL
            }
        };
        let next_state = match f.lc {
            Lc::PreparingNormal => {
                // Kruise v1.9 (#1485): without a preNormal hook, wait until the pod is scheduled.
                let ok = match lc.and_then(|l| l.pre_normal.as_ref()) {
                    Some(h) => is_all_hooked(Some(h), f.meta()),
                    None => f.node_assigned,
                };
                ok.then_some(keys::lifecycle::NORMAL)
            }
            // Kruise EqualToRevisionHash(pod, updateRevision), which is what `updated` is.
            Lc::PreparingUpdate => f.updated.then(updated_or_normal),
            Lc::Updating => {
                // Kruise DefaultCheckInPlaceUpdateCompleted: no grace, no pending batch, containers done.
                let ok = f.grace().is_none() && completed.is_none_or(|done| done);
                ok.then(updated_or_normal)
            }
            Lc::Updated => {
                (ipu_hook.is_none() || is_all_hooked(ipu_hook, f.meta())).then_some(keys::lifecycle::NORMAL)
            }
            _ => None,
        };
        // Lifecycle markPodNotReady: KruisePodReady follows the state the pod is in or moves to.
        // (`readiness::reconcile` does nothing for a pod without the KruisePodReady gate.)
        if (f.has_kruise_ready || self.mark_not_ready) && f.has_kruise_gate {
            let target = next_state.map_or(f.lc, Lc::parse);
            // A True condition without entries stays so outside the Preparing states: no need to decode
            // the pod to find that out (this runs for every gated pod of every plan).
            let settled = f.kruise_ready_clean && !readiness::clean_may_change(target);
            if !settled && let Some(a) = readiness::reconcile(self.cs, &f.pod(), f.name(), f.uid(), target) {
                self.why(format!(
                    "pod {}: KruisePodReady follows lifecycle {target:?}",
                    f.name()
                ));
                self.plan.actions.push(a);
            }
        }
        if let Some(st) = next_state {
            self.why(format!("pod {}: lifecycle {} → {st}", f.name(), f.lifecycle()));
            let patch = self.lifecycle_patch(f, st);
            self.plan.actions.push(patch);
        }

        // Kruise fixPodTemplateHashLabel.
        if f.has_revision && !f.has_template_hash {
            let mut labels = BTreeMap::new();
            labels.insert(
                keys::POD_TEMPLATE_HASH_LABEL.to_string(),
                Some(short_hash(f.revision()).to_string()),
            );
            self.plan.actions.push(Action::PatchPodMetadata {
                pod: f.name().to_string(),
                uid: f.uid().to_string(),
                labels,
                annotations: BTreeMap::new(),
                reason: UpdateReason::BackfillHash,
            });
        }
        self.plan.actions.len() > before
    }

    fn push_update(&mut self, f: &PodFacts, mutation: PodMutation, reason: UpdateReason) {
        self.plan.actions.push(Action::UpdatePod {
            pod: f.name().to_string(),
            uid: f.uid().to_string(),
            mutation,
            reason,
        });
    }

    /// Kruise `Update` (research §3.7).
    fn update(
        &mut self,
        facts: &[PodFacts],
        stype: CloneSetUpdateStrategyType,
        current: &Arc<ControllerRevision>,
        update: &Arc<ControllerRevision>,
        rev_by_hash: &HashMap<&str, &Arc<ControllerRevision>>,
    ) {
        let update_name = update.metadata.name.clone().unwrap_or_default();
        let current_name = current.metadata.name.clone().unwrap_or_default();
        let mut refreshed = 0usize;
        for f in facts {
            if self.refresh(f) {
                refreshed += 1;
            }
        }
        if refreshed > 0 {
            self.why(format!(
                "refreshed {refreshed} pod(s): update waits for the next round"
            ));
            return;
        }
        if stype == CloneSetUpdateStrategyType::OnDelete {
            // Kruise: after the refresh (58a5d52fb), OnDelete updates nothing; deleted pods come back at the
            // update revision through scale.
            self.why("updateStrategy.type OnDelete: pods take the update revision only when deleted");
            return;
        }
        let spec = &self.cs.spec;
        let strategy = spec.update_strategy.clone().unwrap_or_default();
        if strategy.paused {
            self.why("updateStrategy.paused: no pod is updated");
            return;
        }
        let b = self.budget(facts, false, self.gates.exclude_preparing_delete);
        self.plan.budget = b.clone();
        self.explain_budget(&b, "update");
        if b.update_num == 0 {
            return;
        }
        let forward = b.update_num > 0;
        let (target, target_name) = if forward {
            (update, &update_name)
        } else {
            (current, &current_name)
        };
        let mut cand: Vec<usize> = Vec::new();
        for (i, f) in facts.iter().enumerate() {
            // Forward: pods not at the update revision; rollback: pods at it.
            if f.updated == forward {
                continue;
            }
            let can = match f.lc {
                Lc::PreparingDelete => false,
                Lc::Updated => true,
                _ => !f.has_grace,
            };
            if can {
                cand.push(i);
            }
        }
        let target_key = RevisionKey::new(target_name);
        let at_target = |f: &PodFacts| {
            if forward {
                f.updated
            } else {
                f.at_revision(&target_key)
            }
        };
        // Kruise limitUpdateIndexes looks at no more than `bound` candidates, so only those are ordered:
        // O(candidates + bound·log bound) instead of sorting every candidate.
        let unavailable = Unavailable::count(facts.iter().map(|f| (f.available, at_target(f))));
        let bound = unavailable.scan_bound(&b, cand.len());
        sort::update_candidates_prefix(
            facts,
            &mut cand,
            strategy.priority_strategy.as_ref(),
            &strategy.scatter_strategy,
            bound,
        );
        let avail: Vec<bool> = cand[..bound].iter().map(|&i| facts[i].available).collect();
        let n = unavailable.admit(&b, &avail);
        self.why(format!(
            "{} candidate(s) for revision {target_name}; {n} may update now (updateMaxUnavailable {})",
            cand.len(),
            b.update_max_unavailable
        ));
        let grace = strategy
            .in_place_update_strategy
            .as_ref()
            .and_then(|s| s.grace_period_seconds)
            .unwrap_or(0);
        let label = if self.gates.cloneset_short_hash {
            short_hash(target_name).to_string()
        } else {
            target_name.to_string()
        };
        let mut ctx = UpdateCtx {
            stype,
            target_name,
            target_vct: self
                .gates
                .recreate_pod_when_change_vct
                .then(|| revision::vct_hash_of(target))
                .flatten(),
            target_tpl: revision::template_value(target),
            rev_by_hash,
            grace,
            label,
            cache: Vec::new(),
            in_place: Vec::new(),
            recreate: Vec::new(),
        };
        let mut errors = Vec::new();
        for &i in cand.iter().take(n) {
            if let Err(e) = self.update_pod(&facts[i], &mut ctx) {
                self.why(e.clone());
                errors.push(e);
            }
        }
        if !ctx.in_place.is_empty() {
            let images = ctx.cache.iter().find_map(|(_, c)| c.as_ref().ok()).map(|s| {
                let r = &s.tpl.spec.resources;
                if r.is_empty() {
                    format!("{:?}", s.tpl.spec.images)
                } else {
                    format!("{:?}, resize {}", s.tpl.spec.images, crate::vertical::describe(r))
                }
            });
            self.why(format!(
                "in-place update to {target_name} (images {}{}): {}",
                images.unwrap_or_default(),
                if grace > 0 {
                    format!(", grace {grace}s")
                } else {
                    String::new()
                },
                ctx.in_place.join(", ")
            ));
            if grace > 0 {
                self.requeue_after(Duration::from_secs(u64::try_from(grace).unwrap_or(0)));
            }
        }
        if !ctx.recreate.is_empty() {
            self.why(format!(
                "recreate for {target_name} (label specified-delete): {}",
                ctx.recreate.join(", ")
            ));
        }
        if !errors.is_empty() {
            self.failed_update = Some(errors.join("; "));
        }
    }

    /// Kruise `updatePod` for one selected pod.
    fn update_pod<'c>(&mut self, f: &PodFacts<'c>, ctx: &mut UpdateCtx<'c>) -> Result<(), String> {
        let now = self.s.now;
        if ctx.stype != CloneSetUpdateStrategyType::ReCreate {
            let old = if f.revision().is_empty() {
                None
            } else {
                ctx.rev_by_hash.get(short_hash(f.revision()))
            };
            let key = old.map_or("", |o| short_hash(o.metadata.name.as_deref().unwrap_or_default()));
            let cached = match ctx.cache.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    let vertical = self.gates.in_place_workload_vertical_scaling;
                    let t = match (old, ctx.target_tpl) {
                        (Some(old), Some(t)) => match revision::template_value(old) {
                            Some(o) => vct_check(old, ctx.target_vct, ctx.stype)
                                .map_err(Refusal::volume_claim_templates)
                                .and_then(|()| {
                                    inplace::calculate(o, t, vertical)
                                        .map_err(|m| Refusal::from_templates(m, o, t, vertical))
                                }),
                            None => Err(Refusal::other("old revision has no template".into())),
                        },
                        (None, _) => Err(Refusal::other(format!(
                            "old revision {:?} of the pod not found",
                            f.revision()
                        ))),
                        (_, None) => Err(Refusal::other("target revision has no template".into())),
                    };
                    let t = t.map(|spec| {
                        let tpl = StartTemplate::new(spec, ctx.target_name, &ctx.label, ctx.grace, now);
                        let shared = tpl.same_for_every_pod().then(|| tpl.mutation(&f.pod()));
                        Start { tpl, shared }
                    });
                    ctx.cache.push((key, t));
                    ctx.cache.len() - 1
                }
            };
            match &ctx.cache[cached].1 {
                Ok(start) => {
                    let lc = self.cs.spec.lifecycle.as_ref();
                    let hook = lc.and_then(|l| l.in_place_update.as_ref());
                    match f.lc {
                        Lc::None | Lc::PreparingNormal | Lc::Normal => {
                            if is_hooked(hook, f.meta()) {
                                self.why(format!(
                                    "pod {}: inPlaceUpdate hook present → PreparingUpdate",
                                    f.name()
                                ));
                                self.mark_not_ready(f, Lc::PreparingUpdate);
                                let patch = self.lifecycle_patch(f, keys::lifecycle::PREPARING_UPDATE);
                                self.plan.actions.push(patch);
                                return Ok(());
                            }
                        }
                        Lc::Updated => {
                            // Kruise UpdatePodLifecycleWithHandler: re-apply the hook labels.
                            let mut a = self.lifecycle_patch(f, keys::lifecycle::PREPARING_UPDATE);
                            if let (Action::PatchPodMetadata { labels, .. }, Some(h)) = (&mut a, hook) {
                                for (k, v) in &h.labels_handler {
                                    labels.insert(k.clone(), Some(v.clone()));
                                }
                            }
                            self.why(format!(
                                "pod {}: Updated → PreparingUpdate (hook re-applied)",
                                f.name()
                            ));
                            self.mark_not_ready(f, Lc::PreparingUpdate);
                            self.plan.actions.push(a);
                            return Ok(());
                        }
                        Lc::PreparingUpdate => {
                            if is_hooked(hook, f.meta()) {
                                self.why(format!(
                                    "pod {}: PreparingUpdate, waiting for the inPlaceUpdate hook",
                                    f.name()
                                ));
                                return Ok(());
                            }
                        }
                        Lc::Updating => {}
                        Lc::PreparingDelete | Lc::Other => {
                            let (n, st) = (f.name(), f.lifecycle());
                            return Err(format!("not allowed to in-place update pod {n} in state {st}"));
                        }
                    }
                    let m = match &start.shared {
                        Some(m) => m.clone(),
                        None => start.tpl.mutation(&f.pod()),
                    };
                    // Kruise CheckPodNeedsBeUnready: a resize without RestartContainer keeps serving.
                    if f.has_gate() && start.tpl.spec.needs_unready(&f.pod()) {
                        self.plan.actions.push(Action::SetInPlaceUpdateReady {
                            pod: f.name().to_string(),
                            uid: f.uid().to_string(),
                            ready: false,
                        });
                    }
                    self.push_update(f, m, UpdateReason::StartInPlaceUpdate);
                    ctx.in_place.push(f.name());
                    return Ok(());
                }
                Err(refusal) => {
                    let why = &refusal.message;
                    let refusal = refusal.clone();
                    if ctx.stype == CloneSetUpdateStrategyType::InPlaceOnly {
                        self.plan.refusals.push(PodRefusal {
                            pod: f.name().to_string(),
                            in_place_only: true,
                            refusal,
                        });
                        return Err(format!(
                            "find Pod {} update strategy is InPlaceOnly but can not update in-place ({why})",
                            f.name()
                        ));
                    }
                    self.why(format!(
                        "pod {}: cannot update in place ({}) → recreate",
                        f.name(),
                        refusal.describe()
                    ));
                    if pods::label(f.meta(), keys::SPECIFIED_DELETE_LABEL) != Some("true") {
                        self.plan.refusals.push(PodRefusal {
                            pod: f.name().to_string(),
                            in_place_only: false,
                            refusal,
                        });
                    }
                }
            }
        }
        if pods::label(f.meta(), keys::SPECIFIED_DELETE_LABEL) == Some("true") {
            return Ok(());
        }
        ctx.recreate.push(f.name());
        let mut labels = BTreeMap::new();
        labels.insert(keys::SPECIFIED_DELETE_LABEL.to_string(), Some("true".to_string()));
        self.plan.actions.push(Action::PatchPodMetadata {
            pod: f.name().to_string(),
            uid: f.uid().to_string(),
            labels,
            annotations: BTreeMap::new(),
            reason: UpdateReason::Recreate,
        });
        Ok(())
    }
}

/// Kruise `CanVCTemplateInplaceUpdate` under `RecreatePodWhenChangeVCTInCloneSetGate` (research §2.3 step 3):
/// both revisions carry the volumeClaimTemplates hash and they differ → not in place. InPlaceOnly ignores it
/// (Kruise `IgnoreVolumeClaimTemplatesHashDiff`).
fn vct_check(
    old: &ControllerRevision,
    target_vct: Option<&str>,
    stype: CloneSetUpdateStrategyType,
) -> Result<(), String> {
    let (Some(new), Some(old_hash)) = (target_vct, revision::vct_hash_of(old)) else {
        return Ok(());
    };
    if stype == CloneSetUpdateStrategyType::InPlaceOnly || new == old_hash {
        return Ok(());
    }
    Err(format!(
        "spec.volumeClaimTemplates changed (annotation {} {old_hash:?} → {new:?}) and RecreatePodWhenChangeVCTInCloneSetGate is on: new PVCs need a new pod",
        keys::VCT_HASH_ANNOTATION
    ))
}

/// Per-round state of the update step: the in-place start templates cached per old revision.
struct UpdateCtx<'a> {
    stype: CloneSetUpdateStrategyType,
    target_name: &'a str,
    /// The target revision's volumeClaimTemplates hash, when `RecreatePodWhenChangeVCTInCloneSetGate` is on.
    target_vct: Option<&'a str>,
    target_tpl: Option<&'a Value>,
    rev_by_hash: &'a HashMap<&'a str, &'a Arc<ControllerRevision>>,
    grace: i32,
    label: String,
    /// Keyed by the old revision's short hash, in first-use order (pods come from a handful of revisions,
    /// so a scan beats hashing, and the first template explains the round deterministically).
    cache: Vec<(&'a str, Result<Start, Refusal>)>,
    in_place: Vec<&'a str>,
    recreate: Vec<&'a str>,
}

/// An in-place start from one old revision, and its pod write when that is the same for every pod.
struct Start {
    tpl: StartTemplate,
    shared: Option<PodMutation>,
}
