//! CloneSets watched at `apps.kruise.io/v1beta1`, the CRD's storage version, and converted in-process.
//!
//! Every CloneSet watch event the apiserver sends in a version other than the stored one goes through the
//! conversion webhook first, a round trip into this very process. On a loaded 2-core machine that round trip
//! took 0.3–0.5 s, so a new CloneSet reached the controller that much later, and each of the controller's own
//! status writes came back as a delayed event too: Kruise's specs that give `status.replicas` 3 s from the
//! create missed it in the start burst. Kruise master's controller works on v1beta1 for the same reason (no
//! conversion on its reads). The objects are converted to v1alpha1 (what the planner reads) by the same code
//! the conversion webhook runs, so the cache holds exactly what a v1alpha1 watch would have delivered.

use std::borrow::Cow;

use insitu_api::CloneSet;
use insitu_api::conversion::cloneset_to_v1alpha1;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};

/// A CloneSet read as v1beta1, held as v1alpha1.
#[derive(Clone, Debug)]
pub struct StoredCloneSet(pub CloneSet);

impl Resource for StoredCloneSet {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        insitu_api::v1beta1::CloneSet::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        insitu_api::v1beta1::CloneSet::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        insitu_api::v1beta1::CloneSet::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        insitu_api::v1beta1::CloneSet::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// Decodes v1beta1 and converts; a conversion error is a decode error (the object is set aside as
/// undecodable, with the reason, like any other object the controller cannot read).
impl<'de> Deserialize<'de> for StoredCloneSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let beta = insitu_api::v1beta1::CloneSet::deserialize(d)?;
        cloneset_to_v1alpha1(&beta)
            .map(StoredCloneSet)
            .map_err(|e| serde::de::Error::custom(format!("v1beta1 → v1alpha1: {e}")))
    }
}

impl crate::lenient::Placeholder for StoredCloneSet {
    fn placeholder(metadata: ObjectMeta) -> Self {
        StoredCloneSet(<CloneSet as crate::lenient::Placeholder>::placeholder(metadata))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1beta1_object_reads_as_its_v1alpha1_conversion() {
        let beta = serde_json::json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "cs", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "a"}},
                     "template": {"metadata": {"labels": {"app": "a"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                     "updateStrategy": {"type": "RollingUpdate",
                                        "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly", "partition": 1}}},
            "status": {"replicas": 2, "observedGeneration": 1}
        });
        let got: StoredCloneSet = serde_json::from_value(beta.clone()).unwrap();
        let want = insitu_api::conversion::to_v1alpha1(&beta).unwrap();
        assert_eq!(serde_json::to_value(&got.0).unwrap()["spec"], want["spec"]);
        assert_eq!(got.0.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(got.0.status.as_ref().map(|s| s.replicas), Some(2));
        assert_eq!(
            StoredCloneSet::api_version(&()),
            "apps.kruise.io/v1beta1",
            "watched at the storage version"
        );
    }

    #[test]
    fn an_unconvertible_object_is_a_decode_error() {
        let bad = serde_json::json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                                     "metadata": {"name": "cs"}, "spec": {"replicas": "three"}});
        assert!(serde_json::from_value::<StoredCloneSet>(bad).is_err());
    }
}
