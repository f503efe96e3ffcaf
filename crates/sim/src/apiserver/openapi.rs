//! OpenAPI v3 (`/openapi/v3` and the per-group-version documents): the CloneSet's built from the CRD's
//! structural schemas as kube-apiserver publishes a CRD's (what `kubectl explain cloneset.spec.updateStrategy`
//! reads), the served built-in kinds' from k8s-openapi's schemas (`openapi_builtin.rs`).

use std::sync::OnceLock;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::errors::ApiError;

const GROUP: &str = "apps.kruise.io";

/// The served CloneSet versions and their `openAPIV3Schema`.
fn versions() -> &'static Vec<(String, Value)> {
    static V: OnceLock<Vec<(String, Value)>> = OnceLock::new();
    V.get_or_init(|| {
        let crd = serde_json::to_value(insitu_api::crd::crd()).unwrap_or(Value::Null);
        crd.pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| {
                        let name = v.get("name")?.as_str()?.to_string();
                        let schema = v.pointer("/schema/openAPIV3Schema")?.clone();
                        Some((name, schema))
                    })
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// `io.kruise.apps.v1beta1.CloneSet`: the definition name kube-apiserver gives a CRD kind (group reversed).
fn definition_name(version: &str) -> String {
    let reversed: Vec<&str> = GROUP.split('.').rev().collect();
    format!("{}.{version}.CloneSet", reversed.join("."))
}

fn document(version: &str, schema: &Value) -> Value {
    let mut s = schema.clone();
    s["x-kubernetes-group-version-kind"] = json!([{"group": GROUP, "kind": "CloneSet", "version": version}]);
    // kubectl explain finds the kind through an operation of the resource's path.
    let gvk = json!({"group": GROUP, "kind": "CloneSet", "version": version});
    let item = format!("/apis/{GROUP}/{version}/namespaces/{{namespace}}/clonesets/{{name}}");
    let list = format!("/apis/{GROUP}/{version}/namespaces/{{namespace}}/clonesets");
    let op = |verb: &str| json!({"operationId": format!("{verb}CloneSet"), "x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk});
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": {
            item: {"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")},
            list: {"get": op("list"), "post": op("post")},
        },
        "components": {"schemas": {definition_name(version): s}},
    })
}

/// A stable tag for a document's URL (clients cache by it).
fn hash(v: &Value) -> String {
    let text = v.to_string();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

fn json_ok(v: &Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// Answers `/openapi/v3[/apis/apps.kruise.io/<version>]`.
pub(super) fn serve(rest: &[&str]) -> Response {
    match rest {
        [] => {
            let mut paths = serde_json::Map::new();
            for (v, schema) in versions() {
                let doc = document(v, schema);
                paths.insert(
                    format!("apis/{GROUP}/{v}"),
                    json!({"serverRelativeURL": format!("/openapi/v3/apis/{GROUP}/{v}?hash={}", hash(&doc))}),
                );
            }
            for p in super::openapi_builtin::paths() {
                // The built-in documents change only with the binary: tag them without building them.
                let tag = hash(&json!([p, env!("CARGO_PKG_VERSION"), "k8s-openapi v1_35"]));
                let url = format!("/openapi/v3/{p}?hash={tag}");
                paths.insert(p, json!({ "serverRelativeURL": url }));
            }
            json_ok(&json!({"paths": paths}))
        }
        ["api", v] => builtin(&format!("api/{v}")),
        ["apis", g, v] if *g != GROUP => builtin(&format!("apis/{g}/{v}")),
        ["apis", g, v] if *g == GROUP => match versions().iter().find(|(name, _)| name == v) {
            Some((name, schema)) => json_ok(&document(name, schema)),
            None => ApiError::no_route().into_response(),
        },
        _ => ApiError::no_route().into_response(),
    }
}

fn builtin(path: &str) -> Response {
    match super::openapi_builtin::document(path) {
        Some(doc) => json_ok(doc),
        None => ApiError::no_route().into_response(),
    }
}
