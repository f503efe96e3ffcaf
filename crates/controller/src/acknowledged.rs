//! The answer to a write read for its status only: the returned object is skipped, not decoded.
//!
//! kube's `Api::patch`/`patch_status` decode the object the apiserver returns. A CloneSet may nest as deep as
//! Kubernetes allows (10,000 levels, under preserved unknown fields, mirrored by its managedFields), past
//! serde_json's 128: the write would succeed and then read as failed, and be retried for ever. The controller
//! never uses these answers, so this type skips them (serde_json skips without recursing, at any depth) and
//! costs no allocation either.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::ApiResource;
use kube::core::DynamicResourceScope;
use serde::{Deserialize, Deserializer};

/// Any object, acknowledged and not read; addressed by an `ApiResource` (`Api::namespaced_with`).
#[derive(Clone, Debug, Default)]
pub struct Acknowledged {
    metadata: ObjectMeta,
}

impl<'de> Deserialize<'de> for Acknowledged {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Self::default())
    }
}

impl Resource for Acknowledged {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
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
    fn an_answer_of_any_depth_is_acknowledged() {
        use insitu_api::jsondepth::{MAX_DEPTH, nested_objects};
        let answer = |depth: usize| {
            format!(
                r#"{{"apiVersion":"apps.kruise.io/v1beta1","kind":"CloneSet","metadata":{{"name":"x","managedFields":[{{"manager":"m","fieldsType":"FieldsV1","fieldsV1":{}}}]}},"spec":{{"replicas":1}}}}"#,
                nested_objects(depth)
            )
        };
        // What kube would have decoded the answer as fails past 128 levels.
        assert!(serde_json::from_str::<insitu_api::v1beta1::CloneSet>(&answer(200)).is_err());
        assert!(serde_json::from_str::<Acknowledged>(&answer(200)).is_ok());
        assert!(serde_json::from_str::<Acknowledged>(&answer(MAX_DEPTH)).is_ok());
        let ar = ApiResource::erase::<insitu_api::CloneSet>(&());
        assert_eq!(Acknowledged::plural(&ar), "clonesets");
        assert_eq!(Acknowledged::api_version(&ar), "apps.kruise.io/v1alpha1");
    }
}
