//! `PackedPod`: a pod kept as its metadata plus the JSON of its spec and status, decoded only when read whole.
//!
//! As `k8s-openapi` structs a pod costs ~11 KiB in a cache (a `Pod` shell is 2,440 bytes and each `Container`
//! 2,144 before any string, map or condition is allocated); the same spec and status are ~2 KiB of JSON. A
//! controller's cache reads the metadata of every pod (names, labels, owners, resourceVersions) and its
//! summary facts (made once, when the pod is packed), but the spec and status only of a pod that a plan acts
//! on or the executor writes. Lossless: `unpack` gives back the pod that was packed (without `managedFields`,
//! which no controller here reads).

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::summary::Intrinsics;

/// A pod: metadata as a struct (read on every plan), `spec.nodeName` (read by the scale-down ranker), and
/// the rest of spec and status as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedPod {
    /// Labels and annotations must not be changed in place: `intrinsics` were made from them.
    pub metadata: ObjectMeta,
    /// The pod's summary facts, made when it was packed (then summarising it decodes nothing).
    pub(crate) intrinsics: Intrinsics,
    node_name: Option<Box<str>>,
    /// `{"spec":…,"status":…}`.
    body: Box<str>,
}

#[derive(Default, Serialize, Deserialize)]
struct Body {
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<PodSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<PodStatus>,
}

impl PackedPod {
    pub fn pack(pod: Pod) -> PackedPod {
        let intrinsics = Intrinsics::of(&pod);
        let Pod {
            mut metadata,
            spec,
            status,
        } = pod;
        metadata.managed_fields = None;
        let node_name = spec.as_ref().and_then(|s| s.node_name.as_deref()).map(Box::from);
        let body = Body { spec, status };
        // Serialising a `PodSpec`/`PodStatus` to a string cannot fail (string keys, no foreign types).
        let body = serde_json::to_string(&body).unwrap_or_default().into_boxed_str();
        PackedPod {
            metadata,
            intrinsics,
            node_name,
            body,
        }
    }

    /// The pod, whole.
    pub fn unpack(&self) -> Pod {
        // What `pack` wrote reads back; an empty body (never written) is a pod without spec and status.
        let body: Body = serde_json::from_str(&self.body).unwrap_or_default();
        Pod {
            metadata: self.metadata.clone(),
            spec: body.spec,
            status: body.status,
        }
    }

    /// `spec.nodeName`, without unpacking.
    pub fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }
}

/// Read as a `Pod` (what the apiserver sends), then packed: a cache of `PackedPod` fills straight from a
/// pod watch.
impl<'de> Deserialize<'de> for PackedPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Pod::deserialize(d).map(PackedPod::pack)
    }
}

impl Serialize for PackedPod {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.unpack().serialize(s)
    }
}

// The API identity of a `Pod`, so that a kube reflector can cache `PackedPod`s from a pod watch.
impl k8s_openapi::Resource for PackedPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for PackedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpack_gives_back_the_pod() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-0", "namespace": "default", "uid": "u0", "resourceVersion": "7",
                "labels": {"app": "web"}, "annotations": {"a": "{\"x\":1}"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                    "uid": "cs", "controller": true}]},
            "spec": {"nodeName": "node-1", "containers": [{"name": "web", "image": "nginx:1",
                "env": [{"name": "A", "value": "b"}], "resources": {"limits": {"cpu": "500m"}}}],
                "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                "tolerations": [{"key": "k", "operator": "Exists"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "containerStatuses": [{"name": "web", "image": "nginx:1", "imageID": "id1", "ready": true,
                    "restartCount": 2, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
        }))
        .unwrap();
        let packed = PackedPod::pack(pod.clone());
        assert_eq!(packed.node_name(), Some("node-1"));
        let mut want = pod;
        want.metadata.managed_fields = None;
        assert_eq!(packed.unpack(), want);
        // Through JSON, as a watch delivers it.
        let json = serde_json::to_string(&want).unwrap();
        let from_watch: PackedPod = serde_json::from_str(&json).unwrap();
        assert_eq!(from_watch, packed);
        assert_eq!(
            serde_json::to_value(&from_watch).unwrap(),
            serde_json::to_value(&want).unwrap()
        );
    }

    #[test]
    fn a_pod_without_spec_or_status() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("x".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let packed = PackedPod::pack(pod.clone());
        assert_eq!(packed.node_name(), None);
        assert_eq!(packed.unpack(), pod);
    }
}
