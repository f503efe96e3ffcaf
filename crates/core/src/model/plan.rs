//! The planner's output: verbs for the controller to execute, the status to write, and when to look again.

use std::collections::BTreeMap;
use std::time::Duration;

use insitu_api::CloneSetStatus;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde::{Deserialize, Serialize};

pub(crate) use crate::model::mutation::PodMutation;
use crate::model::summary::PackedPod;

/// What the controller should do next for one CloneSet. Actions run in order; any failure ends the round.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub current_revision: String,
    pub update_revision: String,
    pub budget: Budget,
    pub actions: Vec<Action>,
    /// The status to write through `/status`, only when it differs from the stored one (Kruise: inconsistentStatus).
    pub status: Option<CloneSetStatus>,
    /// Look again after this long even if nothing changes (grace period end, minReadySeconds, deadline).
    #[serde(rename = "requeueAfterSeconds", serialize_with = "ser_secs")]
    pub requeue_after: Option<Duration>,
    /// One line per decision, for `insitu plan`, events and logs.
    pub explanation: Vec<String>,
    /// Conditions the user must act on; the controller emits each reason once per CloneSet as a Warning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// Pods this round recreates (or, under InPlaceOnly, refuses to update) because their change cannot go in
    /// place, with the fields that forced it: the controller's Warning events and `insitu_recreate_total`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<PodRefusal>,
    /// In-place resizes whose outcome on the node this round saw (`insitu_resize_total{outcome}`): done,
    /// or held by the kubelet's `PodResizePending`. Seen again each round until the pod moves on, so the
    /// controller counts each (pod, update, outcome) once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resizes: Vec<ResizeSeen>,
    /// Some template of this CloneSet (its own or an owned revision's) asks for container launch priority: the
    /// controller runs this plan's [`Action::LaunchBarrier`] steps even in a round that then waits for its
    /// cache (Kruise runs them in their own controller, outside the CloneSet's expectations).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub launch_priority: bool,
}

/// One pod's in-place resize outcome, as the planner saw it on the pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResizeSeen {
    pub pod: String,
    pub uid: String,
    /// Which in-place update of the pod: the state annotation's `revision@updateTimestamp`.
    pub update: String,
    pub outcome: ResizeOutcome,
}

/// What became of a resize on the node. The names are the kubelet's (`PodResizePending` reasons) and the
/// completion Kruise's `IsUpdateCompleted` checks (every container status reports the spec's resources).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ResizeOutcome {
    /// The container statuses report the spec's cpu/memory (the in-place update's resize is done).
    Completed,
    /// `PodResizePending` reason `Deferred`: the node has no room now; the kubelet retries.
    Deferred,
    /// `PodResizePending` reason `Infeasible`: the node can never fit it; it waits until the spec changes.
    Infeasible,
}

impl ResizeOutcome {
    /// The `outcome` label value.
    pub fn label(self) -> &'static str {
        match self {
            ResizeOutcome::Completed => "completed",
            ResizeOutcome::Deferred => "deferred",
            ResizeOutcome::Infeasible => "infeasible",
        }
    }
}

/// One pod whose update cannot go in place, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRefusal {
    pub pod: String,
    /// Under InPlaceOnly the pod is left alone (FailedUpdate); otherwise it is marked for recreation.
    pub in_place_only: bool,
    pub refusal: crate::recreate::Refusal,
}

/// Event reason: an env-from-metadata update waits for a node agent that does not run on the pod's node.
pub(crate) const NO_NODE_AGENT: &str = "EnvFromMetadataWithoutNodeAgent";

/// A Warning the plan asks the controller to report (once per CloneSet and reason).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub reason: String,
    pub message: String,
}

fn ser_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Kruise's `expectationDiffs` (`calculateDiffsWithExpectation`), names as in Kruise.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    pub partition: i32,
    pub max_surge: i32,
    pub max_unavailable: i32,
    pub scale_up_num: i32,
    pub scale_up_num_old_revision: i32,
    pub scale_down_num: i32,
    pub scale_down_num_old_revision: i32,
    pub scale_up_limit: i32,
    pub delete_ready_limit: i32,
    pub use_surge: i32,
    pub use_surge_old_revision: i32,
    pub update_num: i32,
    pub update_max_unavailable: i32,
}

/// A single write the controller performs. Names are verbs; pods are addressed by name (+uid to guard
/// against a same-name replacement).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum Action {
    /// Create a ControllerRevision for a new template.
    #[serde(rename_all = "camelCase")]
    CreateRevision { revision: Box<ControllerRevision> },
    /// Re-use an older equal revision by bumping its `.revision` number (rollback).
    #[serde(rename_all = "camelCase")]
    BumpRevision {
        name: String,
        revision: i64,
        /// The new `kruise.io/cloneset-volumeclaimtemplate-hash`, when it changes with the bump.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vct_hash: Option<String>,
    },
    /// Delete an old revision beyond revisionHistoryLimit.
    #[serde(rename_all = "camelCase")]
    DeleteRevision { name: String },
    /// Create a pod (already named `<cs>-<instance-id>`, labelled, with the readiness gate).
    #[serde(rename_all = "camelCase")]
    /// The pod is packed (a scale-up plan may hold thousands); it serialises as the whole pod.
    CreatePod { pod: Box<PackedPod>, revision: String },
    /// Delete a pod (scale down, specified delete, recreate update).
    #[serde(rename_all = "camelCase")]
    DeletePod {
        pod: String,
        uid: String,
        reason: String,
    },
    /// Create the PVC of one volumeClaimTemplate for the pod created next (Kruise createOnePod: PVCs first,
    /// so the pod never waits on a missing claim). An existing PVC of that name counts as created.
    #[serde(rename_all = "camelCase")]
    CreatePvc { pvc: Box<PersistentVolumeClaim> },
    /// Delete a PVC. `pod` is set when it goes with that pod (Kruise deletePods: same instance-id);
    /// `None` is the disablePVCReuse cleanup of a PVC whose pod is gone (Kruise cleanupPVCs).
    #[serde(rename_all = "camelCase")]
    DeletePvc {
        name: String,
        uid: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pod: Option<String>,
        reason: String,
    },
    /// disablePVCReuse: move the PVC's ownerReference from the CloneSet to its inactive pod, so the PVC goes
    /// with that pod instead of being reused (Kruise cleanupPVCs / updateClaimOwnerRefToPod).
    #[serde(rename_all = "camelCase")]
    ReleasePvc {
        name: String,
        uid: String,
        pod: String,
        pod_uid: String,
    },
    /// Write the `InPlaceUpdateReady` condition through `pods/status`. When `ready` is false the pod's `Ready`
    /// condition is recomputed False in the same write (Kruise: SetPodReadyCondition), so endpoints drop it now.
    #[serde(rename_all = "camelCase")]
    SetInPlaceUpdateReady { pod: String, uid: String, ready: bool },
    /// Write the `KruisePodReady` condition through `pods/status` (lifecycle `markPodNotReady`): False with
    /// `messages` as its message while any entry remains, True when empty. Like `SetInPlaceUpdateReady`
    /// going False, it also drops `Ready` at once.
    #[serde(rename_all = "camelCase")]
    SetKruisePodReady {
        pod: String,
        uid: String,
        messages: Vec<ReadinessMessage>,
    },
    /// Read-modify-write of the pod (GET, apply the mutation, PUT with resourceVersion, retry on conflict),
    /// as Kruise's `updatePodInPlace`. Used to start an in-place update and to finish its grace period.
    #[serde(rename_all = "camelCase")]
    UpdatePod {
        pod: String,
        uid: String,
        mutation: PodMutation,
        reason: UpdateReason,
    },
    /// Merge-patch pod labels/annotations (lifecycle transitions, specified-delete, hash-label backfill).
    #[serde(rename_all = "camelCase")]
    PatchPodMetadata {
        pod: String,
        uid: String,
        /// `None` removes the key.
        labels: BTreeMap<String, Option<String>>,
        annotations: BTreeMap<String, Option<String>>,
        reason: UpdateReason,
    },
    /// Kruise claimPods release: the pod no longer matches the selector, so our ownerReference is removed
    /// (strategic merge patch with the pod's uid as precondition, as Kubernetes' ControllerRefManager).
    #[serde(rename_all = "camelCase")]
    ReleasePod { pod: String, uid: String },
    /// Kruise claimPods adoption: the pod references the CloneSet without a controller and matches the
    /// selector; the CloneSet becomes its controller (after a fresh read shows the CloneSet is not deleting).
    #[serde(rename_all = "camelCase")]
    AdoptPod { pod: String, uid: String },
    /// Remove names of pods that no longer exist from `spec.scaleStrategy.podsToDelete`.
    #[serde(rename_all = "camelCase")]
    TruncatePodsToDelete { remove: Vec<String> },
    /// Kruise's container-launch-priority controller for one launching pod: make sure `key` is in the pod's
    /// barrier ConfigMap `barrier` (creating it, owned by the pod, when missing), then, when `complete`, mark the
    /// pod `apps.kruise.io/container-launch-priority-completed`. Not subject to the CloneSet's expectations.
    #[serde(rename_all = "camelCase")]
    LaunchBarrier {
        pod: String,
        uid: String,
        barrier: String,
        key: String,
        complete: bool,
    },
    /// Image pre-download: create this ImagePullJob (`apps.kruise.io/v1beta1`, owned by the CloneSet). A
    /// failure is an event, never a failed round (Kruise `createImagePullJobsForInPlaceUpdate`).
    #[serde(rename_all = "camelCase")]
    CreateImagePullJob {
        name: String,
        image: String,
        job: Box<serde_json::Value>,
    },
    /// Image pre-download: label the update revision `label=true` (its jobs are created, or it is ignored).
    #[serde(rename_all = "camelCase")]
    LabelRevision { name: String, label: String },
    /// Image pre-download: delete an owned ImagePullJob, the revisions agreeing again (Kruise
    /// `DeleteJobsForWorkload`).
    #[serde(rename_all = "camelCase")]
    DeleteImagePullJob { name: String },
}

/// Why a pod write happens; drives events and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum UpdateReason {
    /// Start an in-place update (state annotation, labels; image too when there is no grace period).
    StartInPlaceUpdate,
    /// Grace period over: patch the containers.
    FinishGracePeriod,
    /// The template changed again during the grace period: drop the grace annotation.
    AbandonGracePeriod,
    /// Mark a pod for recreation (`apps.kruise.io/specified-delete`).
    Recreate,
    /// Lifecycle label transition.
    Lifecycle,
    /// Backfill of `pod-template-hash`.
    BackfillHash,
    /// Patch the next batch of containers (container launch priority).
    NextBatch,
}

impl Plan {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty() && self.status.is_none()
    }
}

/// One entry of the `KruisePodReady` message (Kruise `podreadiness.Message`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessMessage {
    pub user_agent: String,
    pub key: String,
}
