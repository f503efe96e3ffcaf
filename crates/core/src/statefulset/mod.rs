//! Pure planning for Kruise's Advanced StatefulSet (`statefulsets.apps.kruise.io`): a snapshot in, a plan
//! out, as Kruise's `pkg/controller/statefulset/stateful_set_control.go` `UpdateStatefulSet` decides it:
//! revisions, then each replica in ordinal order (create, wait, refresh), then condemned pods (scale down,
//! highest ordinal first), then the rolling update (highest ordinal first, `partition`, `maxUnavailable`,
//! in place through the engine CloneSet uses, `inplaceupdate`), and the status.
//!
//! Unlike CloneSet, Kruise's StatefulSet scales and updates in the same round; the plan says both.

mod identity;
mod podstate;
mod refresh;
mod scale;
mod status;
mod update;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use insitu_api::keys;
use insitu_api::statefulset::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::model::gates::FeatureGates;
use crate::model::plan::{Action, PodRefusal, UpdateReason};
use crate::revision::{self, RevisionOwner};

pub use identity::{
    OrdinalRange, POD_INDEX_LABEL, POD_NAME_LABEL, claims, controller_ref, new_pod, ordinal, pod_name,
    pvc_name,
};

/// One Advanced StatefulSet (v1beta1, the stored version) and what it owns, at one instant.
#[derive(Clone, Debug)]
pub struct StatefulSetSnapshot {
    pub set: Arc<StatefulSet>,
    /// Pods whose controller ownerReference is this set.
    pub pods: Vec<Arc<Pod>>,
    /// ControllerRevisions owned by this set.
    pub revisions: Vec<Arc<ControllerRevision>>,
    /// PersistentVolumeClaims of the set's namespace that its pods' claims could be (looked up by name).
    pub pvcs: Vec<Arc<PersistentVolumeClaim>>,
    pub now: Timestamp,
    pub gates: FeatureGates,
}

/// What the controller should do next for one Advanced StatefulSet: the same actions a CloneSet plan
/// carries (the executor is shared), the StatefulSet's own status.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetPlan {
    pub current_revision: String,
    pub update_revision: String,
    pub actions: Vec<Action>,
    /// The status to write through `/status`, only when it differs from the stored one (Kruise
    /// `inconsistentStatus`).
    pub status: Option<StatefulSetStatus>,
    #[serde(skip)]
    pub requeue_after: Option<Duration>,
    pub explanation: Vec<String>,
    /// Pods whose update cannot go in place (recreated, or refused under InPlaceOnly).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<PodRefusal>,
    /// Kruise returns an error from `updateStatefulSet` (e.g. InPlaceOnly refused): the controller reports it
    /// and retries with back-off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The `podManagementPolicy` Kruise calls monotonic (`!allowsBurst`): everything but `Parallel`.
fn monotonic(set: &StatefulSet) -> bool {
    set.spec.pod_management_policy.as_deref() != Some("Parallel")
}

/// Kruise `getMinReadySeconds`.
fn min_ready_seconds(set: &StatefulSet) -> i32 {
    rolling(set).and_then(|r| r.min_ready_seconds).unwrap_or(0)
}

fn rolling(set: &StatefulSet) -> Option<&insitu_api::statefulset::v1beta1::RollingUpdateStatefulSetStrategy> {
    set.spec.update_strategy.as_ref()?.rolling_update.as_ref()
}

fn strategy_type(set: &StatefulSet) -> &str {
    set.spec
        .update_strategy
        .as_ref()
        .and_then(|u| u.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

/// One ordinal of `[start, end)`: reserved, not there yet, or its pod.
#[derive(Clone, Debug)]
enum Slot<'a> {
    Reserved,
    Missing(i32),
    Pod(&'a Arc<Pod>),
}

/// What a step tells the round (Kruise `processReplica`'s shouldExit / shouldBreak).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Next,
    /// Stop the loop, go on to the update (Kruise: break).
    Break,
    /// End the round after the status (Kruise: exit).
    Exit,
}

/// The round's planner: the snapshot, the plan being written, what the status steps adjust.
struct Sts<'a> {
    s: &'a StatefulSetSnapshot,
    set: &'a StatefulSet,
    plan: StatefulSetPlan,
    now_rfc3339: String,
    /// Pods already refreshed this round, and whether a lifecycle transition was planned for them.
    refreshed: HashMap<&'a str, bool>,
    /// Kruise decrements `status.currentReplicas` / `updatedReplicas` for pods it updates or deletes.
    current_delta: i32,
    updated_delta: i32,
}

impl<'a> Sts<'a> {
    fn why(&mut self, line: impl Into<String>) {
        self.plan.explanation.push(line.into());
    }

    fn requeue_after(&mut self, d: Duration) {
        self.plan.requeue_after = Some(self.plan.requeue_after.map_or(d, |r| r.min(d)));
    }

    fn lifecycle_patch(&self, pod: &Pod, state: &str) -> Action {
        let mut labels = BTreeMap::new();
        labels.insert(keys::LIFECYCLE_STATE_LABEL.to_string(), Some(state.to_string()));
        let mut annotations = BTreeMap::new();
        annotations.insert(
            keys::LIFECYCLE_TIMESTAMP_ANNOTATION.to_string(),
            Some(self.now_rfc3339.clone()),
        );
        Action::PatchPodMetadata {
            pod: podstate::name(pod).to_string(),
            uid: podstate::uid(pod).to_string(),
            labels,
            annotations,
            reason: UpdateReason::Lifecycle,
        }
    }

    /// Kruise `deletePod`: a pod with a preDelete hook goes to `PreparingDelete` first (and stays until the
    /// hook is gone); others are deleted. Returns (modified, actually deleting).
    fn delete_pod(&mut self, pod: &Pod, why: &str) -> (bool, bool) {
        let hook = self
            .set
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_delete.as_ref());
        let labels = &pod.metadata.labels;
        if crate::lifecycle::is_hooked(hook, labels.into(), &pod.metadata) {
            if podstate::lifecycle(pod) == keys::lifecycle::PREPARING_DELETE {
                self.why(format!(
                    "pod {}: PreparingDelete, waiting for the preDelete hook",
                    podstate::name(pod)
                ));
                return (false, false);
            }
            self.why(format!(
                "pod {}: preDelete hook present → PreparingDelete ({why})",
                podstate::name(pod)
            ));
            let a = self.lifecycle_patch(pod, keys::lifecycle::PREPARING_DELETE);
            self.plan.actions.push(a);
            return (true, false);
        }
        self.why(format!("delete pod {} ({why})", podstate::name(pod)));
        self.plan.actions.push(Action::DeletePod {
            pod: podstate::name(pod).to_string(),
            uid: podstate::uid(pod).to_string(),
            reason: why.to_string(),
        });
        (true, true)
    }
}

/// One round of Kruise `UpdateStatefulSet` for one Advanced StatefulSet.
pub fn plan(s: &StatefulSetSnapshot) -> StatefulSetPlan {
    let set = &*s.set;
    let set_name = set.metadata.name.as_deref().unwrap_or_default();
    let status = set.status.clone().unwrap_or_default();
    let owner = RevisionOwner {
        name: set_name,
        namespace: set.metadata.namespace.as_ref(),
        template: &set.spec.template,
        annotations: set.metadata.annotations.as_ref(),
        controller_ref: controller_ref(set),
        vct_hash: None,
        current_revision: &status.current_revision,
        collision_count: status.collision_count.unwrap_or(0),
    };
    let revs = revision::active_revisions_of(&owner, &s.revisions);
    let mut p = Sts {
        s,
        set,
        plan: StatefulSetPlan::default(),
        now_rfc3339: crate::model::podmeta::rfc3339(s.now),
        refreshed: HashMap::new(),
        current_delta: 0,
        updated_delta: 0,
    };
    p.plan.current_revision = revs.current.metadata.name.clone().unwrap_or_default();
    p.plan.update_revision = revs.update.metadata.name.clone().unwrap_or_default();
    p.plan.actions.extend(revs.actions.iter().cloned());
    p.plan.explanation.extend(revs.explanation.iter().cloned());

    let range = OrdinalRange::of(set);
    let (slots, condemned) = partition(s, &range);
    if set.metadata.deletion_timestamp.is_some() {
        p.why("the StatefulSet is being deleted: status only");
    } else {
        p.reconcile(&slots, &condemned, &revs);
    }
    let limit = set.spec.revision_history_limit.unwrap_or(10);
    let truncate = revision::truncate_history(
        &revs.all,
        s.pods.iter().map(|p| &p.metadata),
        &p.plan.current_revision,
        &p.plan.update_revision,
        limit,
    );
    p.plan.actions.extend(truncate);
    let st = p.status(&revs, revs.collision_count);
    p.plan.status = status::inconsistent(set.status.as_ref(), &st).then_some(st);
    p.plan
}

/// Pods in `[start, end)` and not reserved go to their slot; other pods with an ordinal are condemned
/// (highest ordinal first); pods without one are ignored, as in Kruise `updateStatefulSet`.
fn partition<'a>(s: &'a StatefulSetSnapshot, range: &OrdinalRange) -> (Vec<Slot<'a>>, Vec<&'a Arc<Pod>>) {
    let width = usize::try_from(range.end.saturating_sub(range.start)).unwrap_or(0);
    let mut slots: Vec<Slot> = (0..width)
        .map(|i| {
            let ord = range.start.saturating_add(i32::try_from(i).unwrap_or(i32::MAX));
            if range.reserved.contains(&ord) {
                Slot::Reserved
            } else {
                Slot::Missing(ord)
            }
        })
        .collect();
    let mut condemned = Vec::new();
    for pod in &s.pods {
        let Some(ord) = ordinal(podstate::name(pod)) else {
            continue;
        };
        if range.holds(ord) {
            let i = usize::try_from(ord - range.start).unwrap_or(0);
            slots[i] = Slot::Pod(pod);
        } else {
            condemned.push(pod);
        }
    }
    condemned.sort_by_key(|p| std::cmp::Reverse(ordinal(podstate::name(p)).unwrap_or(-1)));
    (slots, condemned)
}

impl<'a> Sts<'a> {
    /// Kruise `updateStatefulSet` after the status is started: replicas, condemned, rolling update.
    fn reconcile(
        &mut self,
        slots: &[Slot<'a>],
        condemned: &[&'a Arc<Pod>],
        revs: &revision::ActiveRevisions,
    ) {
        if self.replicas(slots, revs) == Flow::Exit {
            return;
        }
        if self.condemned(slots, condemned) == Flow::Exit {
            return;
        }
        if strategy_type(self.set) == "OnDelete" {
            self.why("updateStrategy.type OnDelete: pods take the update revision only when deleted");
            return;
        }
        self.rolling_update(slots, condemned, revs);
    }
}
