//! The CloneSet resource at `apps.kruise.io/v1beta1`, field for field as Kruise master's `apis/apps/v1beta1`.
//!
//! v1beta1 is Kruise master's storage version. It differs from v1alpha1 (`crate::cloneset`) only in the two
//! strategies: `updateStrategy.type` is `RollingUpdate` or `OnDelete` and the rolling parameters (with the pod
//! policy `podUpdatePolicy`, v1alpha1's `type`) move under `updateStrategy.rollingUpdate`; `enablePVCReuse`
//! inverts v1alpha1's `disablePVCReuse` (CRD default `false`: no reuse); `excludePreparingDelete` replaces
//! v1alpha1's CloneSet label; and image pre-download moves from annotations into `inPlaceUpdateStrategy`.
//! Conversion between the two is `crate::conversion`.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::cloneset::{
    CloneSetCondition, CloneSetStatus, Lifecycle, LifecycleHook, UpdatePriorityOrderTerm,
    UpdatePriorityStrategy, UpdatePriorityWeightTerm, UpdateScatterTerm,
};

/// `apps.kruise.io/v1beta1`.
pub const API_VERSION: &str = "apps.kruise.io/v1beta1";

/// Desired state of a v1beta1 CloneSet.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "CloneSet",
    plural = "clonesets",
    singular = "cloneset",
    shortname = "clone",
    namespaced,
    status = "CloneSetStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn = r#"{"name":"DESIRED","type":"integer","jsonPath":".spec.replicas","description":"The desired number of pods."}"#,
    printcolumn = r#"{"name":"UPDATED","type":"integer","jsonPath":".status.updatedReplicas","description":"The number of pods updated."}"#,
    printcolumn = r#"{"name":"UPDATED_READY","type":"integer","jsonPath":".status.updatedReadyReplicas","description":"The number of pods updated and ready."}"#,
    printcolumn = r#"{"name":"UPDATED_AVAILABLE","type":"integer","jsonPath":".status.updatedAvailableReplicas","description":"The number of pods updated and available."}"#,
    printcolumn = r#"{"name":"READY","type":"integer","jsonPath":".status.readyReplicas","description":"The number of pods ready."}"#,
    printcolumn = r#"{"name":"TOTAL","type":"integer","jsonPath":".status.replicas","description":"The number of currently all pods."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp","description":"CreationTimestamp is a timestamp representing the server time when this object was created."}"#,
    printcolumn = r#"{"name":"CONTAINERS","type":"string","jsonPath":".spec.template.spec.containers[*].name","priority":1,"description":"The containers of currently cloneset."}"#,
    printcolumn = r#"{"name":"IMAGES","type":"string","jsonPath":".spec.template.spec.containers[*].image","priority":1,"description":"The images of currently cloneset."}"#,
    printcolumn = r#"{"name":"SELECTOR","type":"string","jsonPath":".status.labelSelector","priority":1,"description":"The selector of currently cloneset."}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetSpec {
    /// Desired number of pods. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label query over pods; must match the template's labels.
    pub selector: LabelSelector,
    /// Pod template. Stored schemaless, as Kruise's CRD does.
    #[schemars(schema_with = "crate::crd::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// One PVC per template per pod, named `<vct>-<cloneset>-<instance-id>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::crd::preserve_unknown_array")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<CloneSetScaleStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<CloneSetUpdateStrategy>,
    /// Non-live revisions kept. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Seconds a pod must be ready before it counts as available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// Deadline for a rollout to make progress. Unset or MaxInt32 disables it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
}

/// `spec.scaleStrategy` (v1beta1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetScaleStrategy {
    /// Pod names to delete; names of pods that no longer exist are removed by the controller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_to_delete: Vec<String>,
    /// Limits scale-up: at most this many unavailable pods while creating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Reuse the PVCs of gone pods (v1alpha1's `disablePVCReuse`, inverted). The CRD defaults it to `false`.
    #[serde(rename = "enablePVCReuse", default, skip_serializing_if = "Option::is_none")]
    pub enable_pvc_reuse: Option<bool>,
    /// Count scale without pods in `PreparingDelete` (v1alpha1: the CloneSet label
    /// `apps.kruise.io/cloneset-scaling-exclude-preparing-delete: "true"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_preparing_delete: Option<bool>,
}

/// `spec.updateStrategy` (v1beta1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetUpdateStrategy {
    /// `RollingUpdate` (default) or `OnDelete` (pods take the new revision only when deleted). A string so a bad
    /// value reaches validation.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateCloneSetStrategy>,
}

/// `spec.updateStrategy.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloneSetUpdateStrategyType {
    RollingUpdate,
    OnDelete,
}

impl CloneSetUpdateStrategy {
    /// The type, defaulted to `RollingUpdate`; `None` for a value that is neither.
    pub fn strategy_type(&self) -> Option<CloneSetUpdateStrategyType> {
        match self.type_.as_deref() {
            None | Some("") | Some("RollingUpdate") => Some(CloneSetUpdateStrategyType::RollingUpdate),
            Some("OnDelete") => Some(CloneSetUpdateStrategyType::OnDelete),
            Some(_) => None,
        }
    }
}

/// `spec.updateStrategy.rollingUpdate`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateCloneSetStrategy {
    /// Number or percent of pods kept at the current (old) revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Max pods unavailable during the update. Defaults to 20%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Max pods above replicas during the update. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// `ReCreate` (default), `InPlaceIfPossible` or `InPlaceOnly` (v1alpha1's `updateStrategy.type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_update_policy: Option<String>,
    /// Stop updating pods (scaling continues).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: Vec<UpdateScatterTerm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,
}

/// `rollingUpdate.inPlaceUpdateStrategy` (`apis/apps/pub/inplace_update.go`, with v1beta1's pre-download fields).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateStrategy {
    /// Seconds between marking the pod not-ready and patching its spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i32>,
    /// ImagePullJob parallelism (a non-negative integer; v1alpha1: annotation
    /// `apps.kruise.io/image-predownload-parallelism`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_parallelism: Option<IntOrString>,
    /// ImagePullJob timeout (v1alpha1: `apps.kruise.io/image-predownload-timeout-seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_timeout_seconds: Option<i32>,
    /// Updated ready pods needed before pre-downloading for the next batch (v1alpha1:
    /// `apps.kruise.io/image-predownload-min-updated-ready-pods`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_min_updated_ready_pods: Option<i32>,
}
