//! The in-place update annotations, with the exact JSON Kruise writes (`apis/apps/pub/inplace_update.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

/// `apps.kruise.io/inplace-update-state`. Field order = Go struct order, so our JSON is byte-identical.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateState {
    /// Target revision name.
    pub revision: String,
    /// When the in-place update started (grace period counts from here).
    pub update_timestamp: Time,
    /// imageIDs before the update, only for containers whose image changes. Kruise: not omitempty,
    /// so it serialises as `null` while the grace period runs.
    pub last_container_statuses: Option<BTreeMap<String, InPlaceUpdateContainerStatus>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_env_from_metadata: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_resources: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_images: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_images: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_ref_metadata: BTreeMap<String, ContainerRefMetadata>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_resources: BTreeMap<String, ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_check_before_next: Option<InPlaceUpdatePreCheckBeforeNext>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_batches_record: Vec<InPlaceUpdateContainerBatch>,
}

/// The labels/annotations one container reads through the downward API that change with the update
/// (Kruise `containerRefMetadata[name]`, a `metav1.ObjectMeta`; Go never omits its `creationTimestamp`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRefMetadata {
    #[serde(default)]
    pub creation_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `lastContainerStatuses[name]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateContainerStatus {
    #[serde(default, rename = "imageID", skip_serializing_if = "String::is_empty")]
    pub image_id: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdatePreCheckBeforeNext {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers_required_ready: Vec<String>,
}

/// One patched batch of containers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateContainerBatch {
    pub timestamp: Time,
    pub containers: Vec<String>,
}

/// `apps.kruise.io/inplace-update-grace`: the pending spec while the grace period runs
/// (Kruise `inplaceupdate.UpdateSpec`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSpec {
    pub revision: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_images: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_ref_metadata: BTreeMap<String, ContainerRefMetadata>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_resources: BTreeMap<String, ResourceRequirements>,
    /// Strategic-merge patch of pod metadata; a Go `[]byte`, so base64 text in JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_data_patch: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_env_from_metadata: bool,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grace_seconds: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

fn epoch() -> Time {
    Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

impl Default for InPlaceUpdateState {
    fn default() -> Self {
        Self {
            revision: String::new(),
            update_timestamp: epoch(),
            last_container_statuses: None,
            update_env_from_metadata: false,
            update_resources: false,
            update_images: false,
            next_container_images: BTreeMap::new(),
            next_container_ref_metadata: BTreeMap::new(),
            next_container_resources: BTreeMap::new(),
            pre_check_before_next: None,
            container_batches_record: Vec::new(),
        }
    }
}

impl Default for InPlaceUpdateContainerBatch {
    fn default() -> Self {
        Self {
            timestamp: epoch(),
            containers: Vec::new(),
        }
    }
}

impl InPlaceUpdateState {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl UpdateSpec {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_json_matches_kruise_bytes() {
        let t: Time = serde_json::from_str("\"2026-11-30T10:00:00Z\"").unwrap();
        let mut last = BTreeMap::new();
        last.insert(
            "c1".to_string(),
            InPlaceUpdateContainerStatus {
                image_id: "image-id-xyz".into(),
            },
        );
        let s = InPlaceUpdateState {
            revision: "rev_new".into(),
            update_timestamp: t.clone(),
            last_container_statuses: Some(last),
            update_images: true,
            container_batches_record: vec![InPlaceUpdateContainerBatch {
                timestamp: t,
                containers: vec!["c1".into()],
            }],
            ..Default::default()
        };
        assert_eq!(
            s.to_json(),
            r#"{"revision":"rev_new","updateTimestamp":"2026-11-30T10:00:00Z","lastContainerStatuses":{"c1":{"imageID":"image-id-xyz"}},"updateImages":true,"containerBatchesRecord":[{"timestamp":"2026-11-30T10:00:00Z","containers":["c1"]}]}"#
        );
    }

    #[test]
    fn state_in_grace_has_null_last_statuses() {
        let t: Time = serde_json::from_str("\"2026-11-30T10:00:00Z\"").unwrap();
        let s = InPlaceUpdateState {
            revision: "r".into(),
            update_timestamp: t,
            update_images: true,
            ..Default::default()
        };
        assert_eq!(
            s.to_json(),
            r#"{"revision":"r","updateTimestamp":"2026-11-30T10:00:00Z","lastContainerStatuses":null,"updateImages":true}"#
        );
    }

    #[test]
    fn ref_metadata_json_is_go_object_meta() {
        let m = ContainerRefMetadata {
            labels: [("k".to_string(), "v2".to_string())].into(),
            ..Default::default()
        };
        let mut g = UpdateSpec {
            revision: "r".into(),
            update_env_from_metadata: true,
            ..Default::default()
        };
        g.container_ref_metadata.insert("c1".into(), m);
        assert_eq!(
            g.to_json(),
            r#"{"revision":"r","containerRefMetadata":{"c1":{"creationTimestamp":null,"labels":{"k":"v2"}}},"updateEnvFromMetadata":true}"#
        );
    }

    #[test]
    fn grace_json_matches_kruise_bytes() {
        let mut images = BTreeMap::new();
        images.insert("c1".to_string(), "foo2".to_string());
        let g = UpdateSpec {
            revision: "rev_new".into(),
            container_images: images,
            grace_seconds: 3630,
            ..Default::default()
        };
        assert_eq!(
            g.to_json(),
            r#"{"revision":"rev_new","containerImages":{"c1":"foo2"},"graceSeconds":3630}"#
        );
    }
}
