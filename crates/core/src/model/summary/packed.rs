//! `PackedPod`: a pod kept as its metadata plus the JSON of its spec and status, compressed, decoded only when read whole.
//!
//! As `k8s-openapi` structs a pod costs ~11 KiB in a cache (a `Pod` shell is 2,440 bytes and each `Container`
//! 2,144 before any string, map or condition is allocated); the same spec and status are ~2 KiB of JSON. A
//! controller's cache reads the metadata of every pod (names, labels, owners, resourceVersions) and its
//! summary facts (made once, when the pod is packed), but the spec and status only of a pod that a plan acts
//! on or the executor writes. Lossless: `unpack` gives back the pod that was packed (without `managedFields`,
//! which no controller here reads).
//!
//! The JSON is kept LZ4-compressed against a reference body: the body of the first pod seen with the same
//! controller (`ReferenceBodies`). Pods of one CloneSet differ in a few values (node, IPs, times, container
//! IDs), so a 2 KiB body packs into ~200 bytes, and a 10 KiB spec of many env vars and sidecars gains the
//! most. A pod without a controller is compressed against a built-in typical pod body.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Intrinsics;
use crate::util::strmap::{Entries, StrMap};

/// A pod: metadata as a struct (read on every plan) but with labels and annotations kept compactly,
/// `spec.nodeName` (read by the scale-down ranker), and the rest of spec and status as compressed JSON.
#[derive(Clone, Debug)]
pub struct PackedPod {
    /// The metadata without `labels` and `annotations` (always `None` here: see `labels()`,
    /// `annotations()`) and without `managedFields`.
    metadata: ObjectMeta,
    labels: Option<StrMap>,
    annotations: Option<StrMap>,
    /// The pod's summary facts, made when it was packed (then summarising it decodes nothing).
    pub(crate) intrinsics: Intrinsics,
    node_name: Option<Box<str>>,
    /// `{"spec":…,"status":…}`, LZ4 block format with its length prepended, compressed against `reference`.
    body: Box<[u8]>,
    /// The dictionary `body` was compressed against (shared by the pods of one controller).
    reference: Arc<[u8]>,
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
        let running = is_running(&pod);
        let Pod {
            mut metadata,
            spec,
            status,
        } = pod;
        metadata.managed_fields = None;
        let labels = compact(&mut metadata.labels);
        let annotations = compact(&mut metadata.annotations);
        let node_name = spec.as_ref().and_then(|s| s.node_name.as_deref()).map(Box::from);
        // Serialising a `PodSpec`/`PodStatus` cannot fail (string keys, no foreign types).
        let json = serde_json::to_vec(&Body { spec, status }).unwrap_or_default();
        let reference = REFERENCES.for_pod(&metadata, &json, running);
        let body = lz4_flex::block::compress_prepend_size_with_dict(&json, &reference).into_boxed_slice();
        PackedPod {
            metadata,
            labels,
            annotations,
            intrinsics,
            node_name,
            body,
            reference,
        }
    }

    /// The pod, whole.
    pub fn unpack(&self) -> Pod {
        // What `pack` wrote reads back; an empty body (never written) is a pod without spec and status.
        let json = lz4_flex::block::decompress_size_prepended_with_dict(&self.body, &self.reference)
            .unwrap_or_default();
        let body: Body = serde_json::from_slice(&json).unwrap_or_default();
        Pod {
            metadata: self.meta_whole(),
            spec: body.spec,
            status: body.status,
        }
    }

    /// The metadata without labels and annotations (read those with `labels()` and `annotations()`).
    pub fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    /// The metadata whole (labels and annotations copied back in).
    pub(crate) fn meta_whole(&self) -> ObjectMeta {
        ObjectMeta {
            labels: self.labels.as_ref().map(StrMap::to_map),
            annotations: self.annotations.as_ref().map(StrMap::to_map),
            ..self.metadata.clone()
        }
    }

    pub fn labels(&self) -> Entries<'_> {
        Entries::Packed(self.labels.as_ref())
    }

    pub fn annotations(&self) -> Entries<'_> {
        Entries::Packed(self.annotations.as_ref())
    }

    /// `spec.nodeName`, without unpacking.
    pub fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }

    /// Bytes this pod's spec and status take in the cache (the shared reference not counted).
    pub fn packed_len(&self) -> usize {
        self.body.len()
    }
}

/// Takes a map out of the metadata, compacted (a map of 4 GiB or more, which no apiserver accepts, stays).
fn compact(map: &mut Option<BTreeMap<String, String>>) -> Option<StrMap> {
    let packed = StrMap::new(map.as_ref()?)?;
    *map = None;
    Some(packed)
}

/// Equal when they hold the same pod (bodies compressed against different references compare decoded).
impl PartialEq for PackedPod {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata
            && self.labels == other.labels
            && self.annotations == other.annotations
            && self.intrinsics == other.intrinsics
            && self.node_name == other.node_name
            && (Arc::ptr_eq(&self.reference, &other.reference) && self.body == other.body
                || self.unpack() == other.unpack())
    }
}

/// Whether the pod runs with its containers reported (phase Running, container statuses present): the
/// status every pod of a controller spends most of its life in, so the best reference for the others.
fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Running") && s.container_statuses.as_ref().is_some_and(|c| !c.is_empty())
    })
}

/// The reference bodies, one per controller UID, shared by every `PackedPod` of the process. The map holds
/// them weakly: a reference lives as long as a pod packed against it, and dead entries are dropped when the
/// map has doubled since the last sweep, so it stays proportional to the controllers with cached pods.
///
/// The first pod a controller's cache sees is usually one it has just created: no node, no status. Against
/// that body a running pod's status (conditions, container statuses, IPs) does not compress, ~1.2 KB a pod
/// (the session-15 heap profile of the controller at 10k pods). So a reference made from a pod that was not
/// running is replaced once by the first running pod's body; pods packed against the old one keep it until
/// they change. Later revisions of a template differ from a running pod's body in a few values (an image, a
/// container ID), which costs a few bytes per pod, so a running reference is kept while pods hold it.
struct ReferenceBodies {
    /// Controller UID → its reference, and the map size at which dead entries are next swept.
    by_owner: Mutex<(OwnerReferences, usize)>,
}

/// Controller UID → its reference, and whether it was made from a running pod.
type OwnerReferences = HashMap<Box<str>, (Weak<[u8]>, bool)>;

static REFERENCES: LazyLock<ReferenceBodies> = LazyLock::new(|| ReferenceBodies {
    by_owner: Mutex::new((HashMap::new(), 64)),
});

/// For pods without a controller: a typical body (the defaults kube-apiserver fills in, the conditions and
/// container status fields a kubelet reports), so even those compress ~5×.
static TYPICAL: LazyLock<Arc<[u8]>> = LazyLock::new(|| Arc::from(TYPICAL_BODY.as_bytes()));

const TYPICAL_BODY: &str = concat!(
    r#"{"spec":{"containers":[{"image":"","imagePullPolicy":"IfNotPresent","name":"","resources":{},"#,
    r#""terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","volumeMounts":[{"#,
    r#""mountPath":"/var/run/secrets/kubernetes.io/serviceaccount","name":"kube-api-access-","readOnly":true}]}],"#,
    r#""dnsPolicy":"ClusterFirst","enableServiceLinks":true,"nodeName":"","preemptionPolicy":"PreemptLowerPriority","#,
    r#""priority":0,"readinessGates":[{"conditionType":"InPlaceUpdateReady"}],"restartPolicy":"Always","#,
    r#""schedulerName":"default-scheduler","securityContext":{},"serviceAccount":"default","#,
    r#""serviceAccountName":"default","terminationGracePeriodSeconds":30,"tolerations":[{"effect":"NoExecute","#,
    r#""key":"node.kubernetes.io/not-ready","operator":"Exists","tolerationSeconds":300},{"effect":"NoExecute","#,
    r#""key":"node.kubernetes.io/unreachable","operator":"Exists","tolerationSeconds":300}]},"status":{"#,
    r#""conditions":[{"lastTransitionTime":"2026-01-01T00:00:00Z","status":"True","type":"InPlaceUpdateReady"},"#,
    r#"{"lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1,"status":"True","#,
    r#""type":"PodReadyToStartContainers"},{"lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1,"#,
    r#""status":"True","type":"Initialized"},{"lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1,"#,
    r#""status":"True","type":"Ready"},{"lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1,"#,
    r#""status":"True","type":"ContainersReady"},{"lastTransitionTime":"2026-01-01T00:00:00Z","#,
    r#""observedGeneration":1,"status":"True","type":"PodScheduled"}],"containerStatuses":[{"#,
    r#""containerID":"containerd://","image":"docker.io/library/","imageID":"docker.io/library/@sha256:","#,
    r#""lastState":{},"name":"","ready":true,"resources":{},"restartCount":0,"started":true,"#,
    r#""state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}],"hostIP":"","hostIPs":[{"ip":""}],"#,
    r#""observedGeneration":1,"phase":"Running","podIP":"","podIPs":[{"ip":""}],"qosClass":"BestEffort","#,
    r#""startTime":"2026-01-01T00:00:00Z"}}"#
);

/// The shortest body taken as a controller's reference (a pod's spec alone is longer).
const MIN_REFERENCE: usize = 64;

impl ReferenceBodies {
    /// The reference for a pod: its controller's (this body becomes it if there is none yet, or if this pod
    /// runs and the reference's did not), else the typical body.
    fn for_pod(&self, meta: &ObjectMeta, body: &[u8], running: bool) -> Arc<[u8]> {
        let owner = meta
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true));
        // A body without a spec (a placeholder for an undecodable pod) would be a poor reference for the rest.
        let Some(owner) = owner.filter(|_| body.len() >= MIN_REFERENCE) else {
            return TYPICAL.clone();
        };
        // A poisoned lock only means another thread panicked mid-insert; the map is still usable.
        let mut guard = self.by_owner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, sweep_at) = &mut *guard;
        if let Some((weak, made_running)) = map.get(owner.uid.as_str())
            && (*made_running || !running)
            && let Some(found) = weak.upgrade()
        {
            return found;
        }
        let reference: Arc<[u8]> = Arc::from(body);
        map.insert(owner.uid.as_str().into(), (Arc::downgrade(&reference), running));
        if map.len() >= *sweep_at {
            map.retain(|_, (w, _)| w.strong_count() > 0);
            *sweep_at = (map.len() * 2).max(64);
        }
        reference
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

/// kube's reflector reads the name, namespace and resourceVersion through this; labels and annotations are
/// not in it (`PackedPod::labels`, `annotations`).
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
        // Labels and annotations are read from their compact form, not from the metadata.
        assert_eq!(
            (packed.meta().labels.as_ref(), packed.meta().annotations.as_ref()),
            (None, None)
        );
        assert_eq!(packed.labels().get("app"), Some("web"));
        assert_eq!(packed.annotations().get("a"), Some("{\"x\":1}"));
        assert_eq!(packed.meta_whole().labels, pod.metadata.labels);
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

    fn owned_pod(owner: &str, name: &str, node: &str, ip: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                    "uid": owner, "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "web", "image": "nginx:1",
                "env": (0..40).map(|i| serde_json::json!({"name": format!("VAR_{i}"), "value": format!("value {i}")}))
                    .collect::<Vec<_>>()}]},
            "status": {"phase": "Running", "podIP": ip, "hostIP": "172.16.0.1"}
        }))
        .unwrap()
    }

    #[test]
    fn pods_of_one_controller_share_a_reference_and_pack_small() {
        let owner = "shared-owner-uid";
        let first = PackedPod::pack(owned_pod(owner, "web-0", "node-0", "10.0.0.1"));
        let pod = owned_pod(owner, "web-1", "node-1", "10.0.0.2");
        let json_len = serde_json::to_vec(&serde_json::json!({"spec": pod.spec, "status": pod.status}))
            .unwrap()
            .len();
        let second = PackedPod::pack(pod.clone());
        assert!(Arc::ptr_eq(&first.reference, &second.reference));
        // The spec alone is ~1.3 KiB of env; against the first pod's body only the node and IP differ.
        assert!(json_len > 1000, "{json_len}");
        assert!(
            second.packed_len() < json_len / 8,
            "{} of {json_len}",
            second.packed_len()
        );
        assert_eq!(second.unpack(), pod);
    }

    /// A running pod as a kubelet reports it: conditions, container statuses, IPs.
    fn running_pod(owner: &str, name: &str, node: &str, ip: &str) -> Pod {
        let mut pod = owned_pod(owner, name, node, ip);
        let status = serde_json::json!({"phase": "Running", "podIP": ip, "hostIP": "172.16.0.1",
            "podIPs": [{"ip": ip}], "startTime": "2026-01-01T00:00:00Z", "qosClass": "BestEffort",
            "conditions": (["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
                .iter().map(|t| serde_json::json!({"type": t, "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"})).collect::<Vec<_>>()),
            "containerStatuses": [{"name": "web", "image": "nginx:1", "imageID": "docker.io/library/nginx@sha256:0",
                "containerID": format!("containerd://{name}"), "ready": true, "started": true, "restartCount": 0,
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]});
        pod.status = Some(serde_json::from_value(status).unwrap());
        pod
    }

    #[test]
    fn the_first_running_pod_replaces_a_reference_made_before_pods_ran() {
        let owner = "reference-upgrade-owner";
        let mut created = owned_pod(owner, "web-0", "", "");
        created.status = None;
        let first = PackedPod::pack(created.clone());
        let second = PackedPod::pack(running_pod(owner, "web-1", "node-1", "10.0.0.2"));
        assert!(!Arc::ptr_eq(&first.reference, &second.reference));
        let third_pod = running_pod(owner, "web-2", "node-2", "10.0.0.3");
        let third = PackedPod::pack(third_pod.clone());
        assert!(Arc::ptr_eq(&second.reference, &third.reference));
        // Against the created pod's body, the same running pod packs several times larger.
        let json = serde_json::to_vec(&Body {
            spec: third_pod.spec.clone(),
            status: third_pod.status.clone(),
        })
        .unwrap();
        let against_created = lz4_flex::block::compress_prepend_size_with_dict(&json, &first.reference);
        assert!(
            third.packed_len() * 2 < against_created.len(),
            "{} vs {}",
            third.packed_len(),
            against_created.len()
        );
        // A later pod that is not running does not take the reference back; every pod still unpacks.
        let fourth = PackedPod::pack(owned_pod(owner, "web-3", "node-3", "10.0.0.4"));
        assert!(Arc::ptr_eq(&second.reference, &fourth.reference));
        assert_eq!(first.unpack(), created);
        assert_eq!(third.unpack(), third_pod);
    }

    #[test]
    fn a_pod_without_a_controller_packs_against_the_typical_body() {
        let mut pod = owned_pod("x", "lone", "node-0", "10.0.0.9");
        pod.metadata.owner_references = None;
        let packed = PackedPod::pack(pod.clone());
        assert!(Arc::ptr_eq(&packed.reference, &TYPICAL));
        assert_eq!(packed.unpack(), pod);
    }

    #[test]
    fn equal_pods_packed_against_different_references_are_equal() {
        let pod = owned_pod("owner-a", "web-0", "node-0", "10.0.0.1");
        let a = PackedPod::pack(pod.clone());
        let mut b = a.clone();
        b.reference = TYPICAL.clone();
        b.body = lz4_flex::block::compress_prepend_size_with_dict(
            &serde_json::to_vec(&Body {
                spec: pod.spec.clone(),
                status: pod.status.clone(),
            })
            .unwrap(),
            &b.reference,
        )
        .into_boxed_slice();
        assert_eq!(a, b);
        let other = PackedPod::pack(owned_pod("owner-a", "web-0", "node-9", "10.0.0.1"));
        assert_ne!(a, other);
    }

    #[test]
    fn a_reference_goes_when_its_last_pod_does() {
        let owner = "short-lived-owner";
        let packed = PackedPod::pack(owned_pod(owner, "web-0", "node-0", "10.0.0.1"));
        let weak = Arc::downgrade(&packed.reference);
        drop(packed);
        assert!(weak.upgrade().is_none());
        // The next pod of that owner starts a new reference, and still unpacks.
        let pod = owned_pod(owner, "web-1", "node-0", "10.0.0.2");
        assert_eq!(PackedPod::pack(pod.clone()).unpack(), pod);
    }
}
