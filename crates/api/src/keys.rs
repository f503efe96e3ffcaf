//! Well-known label, annotation, condition and event names, byte-for-byte as Kruise writes them.

/// Pod + PVC label: the 5-character instance id of a CloneSet pod.
pub const INSTANCE_ID_LABEL: &str = "apps.kruise.io/cloneset-instance-id";
/// Pod label: the full ControllerRevision name the pod was built from.
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// Pod label: the short hash (last `-` segment of the revision name).
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// Pod label: presence means "delete this pod" (recreate update, user-specified delete).
pub const SPECIFIED_DELETE_LABEL: &str = "apps.kruise.io/specified-delete";
/// Pod label: Kruise lifecycle state.
pub const LIFECYCLE_STATE_LABEL: &str = "lifecycle.apps.kruise.io/state";
/// Pod annotation: RFC3339 time of the last lifecycle change.
pub const LIFECYCLE_TIMESTAMP_ANNOTATION: &str = "lifecycle.apps.kruise.io/timestamp";
/// Pod annotation: JSON `InPlaceUpdateState`.
pub const INPLACE_UPDATE_STATE_ANNOTATION: &str = "apps.kruise.io/inplace-update-state";
/// Legacy key of the state annotation, removed when the new one is written.
pub const INPLACE_UPDATE_STATE_ANNOTATION_OLD: &str = "inplace-update-state";
/// Pod annotation: JSON `UpdateSpec` while the grace period runs.
pub const INPLACE_UPDATE_GRACE_ANNOTATION: &str = "apps.kruise.io/inplace-update-grace";
/// Legacy key of the grace annotation.
pub const INPLACE_UPDATE_GRACE_ANNOTATION_OLD: &str = "inplace-update-grace";
/// Pod annotation (insitu's own, beside Kruise's state): JSON map container name → `{containerId, images}`,
/// what the kubelet was still doing when this in-place batch was written: the container it was replacing and
/// the overwritten spec's images it may still start. The update is not complete while the status shows either:
/// a rollback written mid-restart would otherwise pass Kruise's imageID rule before the kubelet's restart
/// happens (`core::inplaceupdate::restart`).
pub const INPLACE_UPDATE_RESTARTING_ANNOTATION: &str = "insitu/inplace-update-restarting";
/// Readiness gate and pod condition type used to take a pod out of service during an in-place update.
pub const INPLACE_UPDATE_READY: &str = "InPlaceUpdateReady";
/// Reason of the `InPlaceUpdateReady=False` condition.
pub const INPLACE_UPDATE_READY_REASON: &str = "StartInPlaceUpdate";
/// Readiness gate and pod condition type of Kruise's pod readiness: lifecycle `markPodNotReady` sets it False
/// while a pod waits in PreparingUpdate/PreparingDelete (Kruise `pkg/util/podreadiness`).
pub const KRUISE_POD_READY: &str = "KruisePodReady";
/// `userAgent` of the lifecycle's entries in the `KruisePodReady` condition message.
pub const READINESS_USER_AGENT_LIFECYCLE: &str = "Lifecycle";
/// `key` of the lifecycle's `KruisePodReady` entry while the preUpdate (inPlaceUpdate) hook holds the pod.
pub const READINESS_KEY_PRE_UPDATE: &str = "preUpdateHook";
/// `key` of the lifecycle's `KruisePodReady` entry while the preDelete hook holds the pod.
pub const READINESS_KEY_PRE_DELETE: &str = "preDeleteHook";
/// ControllerRevision label holding the revision hash.
pub const CONTROLLER_REVISION_HASH_KEY: &str = "controller.kubernetes.io/hash";
/// ControllerRevision annotation: FNV-32a of the volumeClaimTemplates.
pub const VCT_HASH_ANNOTATION: &str = "kruise.io/cloneset-volumeclaimtemplate-hash";
/// Pod annotation: lower cost pods are deleted first.
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";
/// CloneSet label: exclude PreparingDelete pods from scale accounting.
pub const SCALING_EXCLUDE_PREPARING_DELETE_LABEL: &str =
    "apps.kruise.io/cloneset-scaling-exclude-preparing-delete";

/// Name of the MutatingWebhookConfiguration for CloneSet defaults (`deploy/webhook.yaml`).
pub const MUTATING_CONFIG_NAME: &str = "insitu-cloneset-defaults";

/// Lifecycle states (label `lifecycle.apps.kruise.io/state`).
pub mod lifecycle {
    pub const PREPARING_NORMAL: &str = "PreparingNormal";
    pub const NORMAL: &str = "Normal";
    pub const PREPARING_UPDATE: &str = "PreparingUpdate";
    pub const UPDATING: &str = "Updating";
    pub const UPDATED: &str = "Updated";
    pub const PREPARING_DELETE: &str = "PreparingDelete";
}

/// CloneSet condition types.
pub mod conditions {
    pub const FAILED_SCALE: &str = "FailedScale";
    pub const FAILED_UPDATE: &str = "FailedUpdate";
    pub const PROGRESSING: &str = "Progressing";
}

/// Event reasons (Kruise `pkg/controller/cloneset`).
pub mod events {
    pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
    pub const FAILED_CREATE: &str = "FailedCreate";
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
    pub const FAILED_DELETE: &str = "FailedDelete";
    /// A PVC could not be handed over to its pod (Kruise `updateOnePVC`).
    pub const FAILED_UPDATE: &str = "FailedUpdate";
    pub const SCALE_UP_LIMITED: &str = "ScaleUpLimited";
    pub const SUCCESSFUL_UPDATE_POD_IN_PLACE: &str = "SuccessfulUpdatePodInPlace";
    pub const FAILED_UPDATE_POD_IN_PLACE: &str = "FailedUpdatePodInPlace";
    pub const SUCCESSFUL_UPDATE_POD_RECREATE: &str = "SuccessfulUpdatePodReCreate";
    pub const FAILED_UPDATE_POD_RECREATE: &str = "FailedUpdatePodReCreate";
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// insitu: `spec.replicas` beyond the instance-id space, or no free id left (Warning).
    pub const INSTANCE_IDS_EXHAUSTED: &str = "InstanceIdsExhausted";
    /// insitu: an in-place grace annotation without its state annotation, finished at once (Warning).
    pub const STALE_INPLACE_UPDATE_GRACE: &str = "StaleInPlaceUpdateGrace";
    /// insitu: a pod is recreated because its change cannot go in place; the message names the fields (Warning).
    pub const RECREATE_FOR_UPDATE: &str = "RecreateForUpdate";
    /// insitu: under InPlaceOnly, pods whose change cannot go in place are left alone; names the fields (Warning).
    pub const IN_PLACE_ONLY_REFUSED: &str = "InPlaceOnlyRefused";
    /// Event source component, as Kruise.
    pub const COMPONENT: &str = "cloneset-controller";
}
