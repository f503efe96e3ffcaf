//! A pod as watchers of bound pods read it: identity, node and phase, the rest skipped unparsed.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// What the scheduler and PodGC read of an assigned pod: identity, node and phase. The rest of the pod is skipped
/// while parsing, so following every status write of every bound pod (or listing them all) stays cheap.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(crate) struct BoundPod {
    #[serde(default, deserialize_with = "identity_only")]
    pub(crate) metadata: ObjectMeta,
    #[serde(default)]
    pub(crate) spec: Option<BoundSpec>,
    #[serde(default)]
    pub(crate) status: Option<BoundStatus>,
}

/// The metadata a watcher of bound pods needs: name, namespace, uid and resourceVersion. Labels, annotations and
/// owner references are skipped unparsed (each status write of every bound pod reaches this watch).
fn identity_only<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Identity {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
    }
    let id = <Identity as serde::Deserialize>::deserialize(d)?;
    Ok(ObjectMeta {
        name: id.name,
        namespace: id.namespace,
        uid: id.uid,
        resource_version: id.resource_version,
        ..Default::default()
    })
}

#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BoundSpec {
    #[serde(default)]
    pub(crate) node_name: Option<String>,
}

#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(crate) struct BoundStatus {
    #[serde(default)]
    pub(crate) phase: Option<String>,
}

impl kube::Resource for BoundPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_pod_keeps_its_identity_node_and_phase_only() {
        let p: BoundPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
                "labels": {"app": "x"}, "annotations": {"k": "v"},
                "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "c", "uid": "u0"}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"},
        }))
        .unwrap();
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(p.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(p.metadata.resource_version.as_deref(), Some("42"));
        assert!(p.metadata.labels.is_none() && p.metadata.annotations.is_none());
        assert!(p.metadata.owner_references.is_none());
        assert_eq!(p.spec.and_then(|s| s.node_name).as_deref(), Some("n1"));
        assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    }
}
