//! The CloneSet resource (`apps.kruise.io/v1alpha1`), field for field as Kruise's `cloneset_types.go`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a CloneSet.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
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
    /// Pod template. Stored schemaless, as Kruise's CRD does (validated by the controller rules).
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
    /// Deadline for a rollout to make progress (Kruise v1.9+). Unset or MaxInt32 disables it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
}

/// `spec.scaleStrategy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetScaleStrategy {
    /// Pod names to delete; names of pods that no longer exist are removed by the controller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_to_delete: Vec<String>,
    /// Limits scale-up: at most this many unavailable pods while creating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Do not reuse PVCs of gone pods.
    // Kruise spells it `disablePVCReuse`, not the camelCase default `disablePvcReuse`.
    #[serde(
        rename = "disablePVCReuse",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub disable_pvc_reuse: bool,
}

/// `spec.updateStrategy.type`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CloneSetUpdateStrategyType {
    /// Delete and recreate pods (default).
    #[default]
    ReCreate,
    /// Update in place when only images/metadata change, otherwise recreate.
    InPlaceIfPossible,
    /// Only update in place; refuse other changes.
    InPlaceOnly,
    /// Pods take the update revision only when deleted (v1beta1 `type: OnDelete`, Kruise v1.9+). v1alpha1 has
    /// the constant but Kruise's v1alpha1 webhook rejects it: it reaches v1alpha1 only by conversion.
    OnDelete,
}

impl CloneSetUpdateStrategyType {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ReCreate => "ReCreate",
            Self::InPlaceIfPossible => "InPlaceIfPossible",
            Self::InPlaceOnly => "InPlaceOnly",
            Self::OnDelete => "OnDelete",
        }
    }
}

/// `spec.updateStrategy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetUpdateStrategy {
    /// `ReCreate` (default), `InPlaceIfPossible` or `InPlaceOnly`. Kept as a string so that a bad value
    /// reaches validation (and gets a clear message) instead of failing deserialisation.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Number or percent of pods kept at the current (old) revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Max pods unavailable during the update. Defaults to 20%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Max pods above replicas during the update. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
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

impl CloneSetUpdateStrategy {
    /// The strategy type, defaulted to `ReCreate`; `None` if the value is not one of the three.
    pub fn strategy_type(&self) -> Option<CloneSetUpdateStrategyType> {
        match self.type_.as_deref() {
            None | Some("") | Some("ReCreate") => Some(CloneSetUpdateStrategyType::ReCreate),
            Some("InPlaceIfPossible") => Some(CloneSetUpdateStrategyType::InPlaceIfPossible),
            Some("InPlaceOnly") => Some(CloneSetUpdateStrategyType::InPlaceOnly),
            Some("OnDelete") => Some(CloneSetUpdateStrategyType::OnDelete),
            Some(_) => None,
        }
    }

    /// Whether v1beta1 would have a `rollingUpdate` here: always, except an `OnDelete` strategy with none of
    /// the rolling fields (Kruise then uses partition 0, maxSurge 0 and maxUnavailable 20% rounded down).
    pub fn has_rolling_update(&self) -> bool {
        self.strategy_type() != Some(CloneSetUpdateStrategyType::OnDelete)
            || self.partition.is_some()
            || self.max_unavailable.is_some()
            || self.max_surge.is_some()
            || self.paused
            || self.priority_strategy.is_some()
            || !self.scatter_strategy.is_empty()
            || self.in_place_update_strategy.is_some()
    }
}

/// `updateStrategy.inPlaceUpdateStrategy` (`apis/apps/pub/inplace_update.go`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateStrategy {
    /// Seconds between marking the pod not-ready and patching its spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i32>,
}

/// `updateStrategy.priorityStrategy` (`apis/apps/pub/update_priority.go`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityStrategy {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weight_priority: Vec<UpdatePriorityWeightTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order_priority: Vec<UpdatePriorityOrderTerm>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityWeightTerm {
    pub weight: i32,
    pub match_selector: LabelSelector,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityOrderTerm {
    pub ordered_key: String,
}

/// `updateStrategy.scatterStrategy[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct UpdateScatterTerm {
    pub key: String,
    pub value: String,
}

/// `spec.lifecycle` (`apis/apps/pub/lifecycle.go`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_delete: Option<LifecycleHook>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update: Option<LifecycleHook>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_normal: Option<LifecycleHook>,
}

/// A lifecycle hook: labels/finalizers that block a transition while present.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleHook {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels_handler: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers_handler: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mark_pod_not_ready: bool,
}

/// Observed state of a CloneSet (`cloneset_status.go`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetStatus {
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default)]
    pub available_replicas: i32,
    #[serde(default)]
    pub updated_replicas: i32,
    #[serde(default)]
    pub updated_ready_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub updated_available_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub expected_updated_replicas: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CloneSetCondition>,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}
fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

/// A CloneSet condition (`FailedScale`, `FailedUpdate`, `Progressing`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Effective values after Kruise's webhook defaults (§1.5), for code that reads the spec.
impl CloneSetSpec {
    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }
    pub fn update_strategy(&self) -> CloneSetUpdateStrategy {
        self.update_strategy.clone().unwrap_or_default()
    }
    pub fn revision_history_limit(&self) -> i32 {
        self.revision_history_limit.unwrap_or(10)
    }
    pub fn min_ready_seconds(&self) -> i32 {
        self.min_ready_seconds.unwrap_or(0)
    }
}
