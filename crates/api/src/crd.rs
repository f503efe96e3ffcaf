//! CRD generation: the CloneSet CustomResourceDefinition as YAML, with schemaless template fields as Kruise's.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use schemars::{Schema, SchemaGenerator, json_schema};

use crate::CloneSet;

/// Schema for `template`: Kruise stores it schemaless (`x-kubernetes-preserve-unknown-fields`).
pub fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Schema for `volumeClaimTemplates`: a list of schemaless objects.
pub fn preserve_unknown_array(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// The CloneSet CRD as served to a real apiserver.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = CloneSet::crd();
    crate::validation::cel::attach(&mut crd);
    crd
}

/// The CRD rendered as YAML (what `insitu crd` prints and `deploy/crd.yaml` holds).
pub fn crd_yaml() -> String {
    serde_saphyr::to_string(&crd()).unwrap_or_default()
}
