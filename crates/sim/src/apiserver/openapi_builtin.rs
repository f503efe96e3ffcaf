//! OpenAPI v3 for the built-in kinds the simulated apiserver serves (`/openapi/v3/api/v1`,
//! `/openapi/v3/apis/apps/v1`, …), in kube-apiserver's shape: `components.schemas` keyed by definition name
//! (`io.k8s.api.core.v1.Pod`), the kinds tagged `x-kubernetes-group-version-kind`, `paths` with an operation per
//! resource. Generated from k8s-openapi's schemars schemas on the first request of a group-version and cached
//! (a few hundred KiB per group-version, built once): what `kubectl explain pod.spec` reads.

use std::sync::OnceLock;

use k8s_openapi::api::{admissionregistration, apps, coordination, core, events};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// One served kind of a group-version: its resource (plural), whether namespaced, and its schema's adder.
struct Kind {
    kind: &'static str,
    resource: &'static str,
    namespaced: bool,
    add: fn(&mut schemars::SchemaGenerator) -> String,
}

fn add<T: JsonSchema>(g: &mut schemars::SchemaGenerator) -> String {
    g.subschema_for::<T>();
    T::schema_name().into_owned()
}

const fn kind(
    kind: &'static str,
    resource: &'static str,
    namespaced: bool,
    add: fn(&mut schemars::SchemaGenerator) -> String,
) -> Kind {
    Kind {
        kind,
        resource,
        namespaced,
        add,
    }
}

/// The built-in group-versions: (group, version, kinds). Mirrors the resources table of the apiserver.
fn group_versions() -> &'static [(&'static str, &'static str, &'static [Kind])] {
    const CORE: &[Kind] = &[
        kind("Pod", "pods", true, add::<core::v1::Pod>),
        kind("Namespace", "namespaces", false, add::<core::v1::Namespace>),
        kind("Node", "nodes", false, add::<core::v1::Node>),
        kind("Event", "events", true, add::<core::v1::Event>),
        kind(
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
            add::<core::v1::PersistentVolumeClaim>,
        ),
        kind("ConfigMap", "configmaps", true, add::<core::v1::ConfigMap>),
        kind("Secret", "secrets", true, add::<core::v1::Secret>),
    ];
    const APPS: &[Kind] = &[kind(
        "ControllerRevision",
        "controllerrevisions",
        true,
        add::<apps::v1::ControllerRevision>,
    )];
    const COORD: &[Kind] = &[kind("Lease", "leases", true, add::<coordination::v1::Lease>)];
    const EVENTS: &[Kind] = &[kind("Event", "events", true, add::<events::v1::Event>)];
    const APIEXT: &[Kind] = &[kind(
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        add::<apiext::CustomResourceDefinition>,
    )];
    const ADMISSION: &[Kind] = &[
        kind(
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            false,
            add::<admissionregistration::v1::MutatingWebhookConfiguration>,
        ),
        kind(
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
            add::<admissionregistration::v1::ValidatingWebhookConfiguration>,
        ),
    ];
    &[
        ("", "v1", CORE),
        ("apps", "v1", APPS),
        ("coordination.k8s.io", "v1", COORD),
        ("events.k8s.io", "v1", EVENTS),
        ("apiextensions.k8s.io", "v1", APIEXT),
        ("admissionregistration.k8s.io", "v1", ADMISSION),
    ]
}

/// `api/v1` or `apis/<group>/<version>`: the key of the discovery document's `paths`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The discovery keys of the built-in group-versions.
pub(super) fn paths() -> impl Iterator<Item = String> {
    group_versions().iter().map(|(g, v, _)| gv_path(g, v))
}

/// The document of one group-version (`api/v1`, `apis/apps/v1`), built on first use.
pub(super) fn document(path: &str) -> Option<&'static Value> {
    static DOCS: OnceLock<Vec<OnceLock<Value>>> = OnceLock::new();
    let gvs = group_versions();
    let docs = DOCS.get_or_init(|| gvs.iter().map(|_| OnceLock::new()).collect());
    let i = gvs.iter().position(|(g, v, _)| gv_path(g, v) == path)?;
    let (group, version, kinds) = gvs[i];
    Some(docs[i].get_or_init(|| build(group, version, kinds)))
}

fn build(group: &str, version: &str, kinds: &[Kind]) -> Value {
    let mut g = SchemaSettings::openapi3().into_generator();
    let names: Vec<String> = kinds.iter().map(|k| (k.add)(&mut g)).collect();
    let mut schemas = g.take_definitions(true);
    let mut paths = Map::new();
    let prefix = format!("/{}", gv_path(group, version));
    for (k, name) in kinds.iter().zip(&names) {
        let gvk = json!({"group": group, "kind": k.kind, "version": version});
        if let Some(Value::Object(s)) = schemas.get_mut(name) {
            s.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
        }
        let list = if k.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", k.resource)
        } else {
            format!("{prefix}/{}", k.resource)
        };
        let op = |verb: &str, op: &str| {
            json!({"operationId": format!("{op}{}", k.kind), "x-kubernetes-action": verb,
                   "x-kubernetes-group-version-kind": gvk, "responses": {"200": {"description": "OK",
                   "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}}}})
        };
        paths.insert(format!("{list}/{{name}}"), json!({"get": op("get", "read")}));
        paths.insert(list, json!({"get": op("list", "list")}));
    }
    for s in schemas.values_mut() {
        strip_schema_keyword(s);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// schemars writes `$schema` on roots; OpenAPI component schemas have none.
fn strip_schema_keyword(s: &mut Value) {
    if let Value::Object(m) = s {
        m.remove("$schema");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_document_in_kube_apiserver_shape() {
        let doc = document("api/v1").expect("api/v1");
        let schemas = &doc["components"]["schemas"];
        let pod = &schemas["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );
        assert!(
            pod["properties"]["spec"]
                .to_string()
                .contains("#/components/schemas/io.k8s.api.core.v1.PodSpec")
        );
        let spec = &schemas["io.k8s.api.core.v1.PodSpec"];
        assert!(spec["properties"]["containers"].is_object(), "{spec}");
        assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
        assert!(doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["get"].is_object());
        assert!(
            doc["paths"]["/api/v1/namespaces/{name}"]["get"].is_object(),
            "cluster-scoped"
        );
        assert!(doc["paths"]["/api/v1/namespaces"]["get"].is_object());
        assert!(document("apis/apps/v1").is_some_and(|d| {
            d["components"]["schemas"]["io.k8s.api.apps.v1.ControllerRevision"].is_object()
        }));
        assert!(document("apis/batch/v1").is_none());
        // Built once: the same document on the next request.
        assert!(std::ptr::eq(doc, document("api/v1").expect("cached")));
    }
}
