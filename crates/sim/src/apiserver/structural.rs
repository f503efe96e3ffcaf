//! Structural-schema pruning, null-dropping and defaulting for the CloneSet and Advanced StatefulSet CRs, as the
//! CRD handler does.

use std::sync::OnceLock;

use serde_json::{Map, Value};

/// The `openAPIV3Schema` of each served version of one CRD.
fn version_schemas(crd: &impl serde::Serialize) -> (Value, Value) {
    let crd = serde_json::to_value(crd).unwrap_or(Value::Null);
    let of = |name: &str| {
        crd.pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|vs| vs.iter().find(|v| v["name"] == name))
            .and_then(|v| v.pointer("/schema/openAPIV3Schema").cloned())
            .unwrap_or(Value::Null)
    };
    (of("v1alpha1"), of("v1beta1"))
}

/// The `openAPIV3Schema` of a served version of the CloneSet or (`kind` `StatefulSet`) the Advanced StatefulSet,
/// computed once.
pub(super) fn schema(kind: &str, api_version: &str) -> &'static Value {
    static CLONESET: OnceLock<(Value, Value)> = OnceLock::new();
    static STATEFULSET: OnceLock<(Value, Value)> = OnceLock::new();
    let (alpha, beta) = if kind == "StatefulSet" {
        STATEFULSET.get_or_init(|| version_schemas(&insitu_api::statefulset::crd::crd()))
    } else {
        CLONESET.get_or_init(|| version_schemas(&insitu_api::crd::crd()))
    };
    if api_version == insitu_api::conversion::V1BETA1 {
        beta
    } else {
        alpha
    }
}

/// Prunes unknown fields, drops non-nullable nulls and applies defaults (on the whole object), with the schema
/// of the object's own version.
pub fn apply(obj: &mut Value) {
    let version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let schema = schema(kind, &version);
    if schema.is_null() {
        return;
    }
    let Some(m) = obj.as_object_mut() else { return };
    let props = schema.get("properties").and_then(Value::as_object);
    m.retain(|k, _| {
        matches!(k.as_str(), "apiVersion" | "kind" | "metadata") || props.is_some_and(|p| p.contains_key(k))
    });
    if let Some(props) = props {
        for (k, sub) in props {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            visit_field(m, k, sub);
        }
    }
}

fn preserves(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

/// Handles one property of an object: null-dropping, defaulting, recursion.
fn visit_field(parent: &mut Map<String, Value>, key: &str, schema: &Value) {
    let nullable = schema.get("nullable").and_then(Value::as_bool) == Some(true);
    if parent.get(key).is_some_and(Value::is_null) && !nullable {
        parent.remove(key);
    }
    if !parent.contains_key(key)
        && let Some(d) = schema.get("default")
    {
        parent.insert(key.to_string(), d.clone());
    }
    if let Some(v) = parent.get_mut(key) {
        visit(v, schema);
    }
}

fn visit(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                if !preserves(schema) {
                    m.retain(|k, _| props.contains_key(k));
                }
                for (k, sub) in props {
                    visit_field(m, k, sub);
                }
            } else if let Some(add) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for item in m.values_mut() {
                    visit(item, add);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items.iter_mut() {
                    visit(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// The fields the schema requires that `obj` (in its own version) lacks, as kube-apiserver's schema validation
/// reports them (`spec.selector: Required value`), walking only objects that are present.
pub fn missing_required(obj: &Value) -> Vec<String> {
    let version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let mut out = Vec::new();
    required_in(obj, schema(kind, version), "", &mut out);
    out
}

fn required_in(v: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    let Some(m) = v.as_object() else { return };
    for key in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(key) = key.as_str() else { continue };
        if m.get(key).is_none_or(Value::is_null) {
            out.push(if path.is_empty() {
                key.to_string()
            } else {
                format!("{path}.{key}")
            });
        }
    }
    for (k, sub) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(child) = m.get(k).filter(|c| c.is_object()) {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            required_in(child, sub, &p, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prunes_and_defaults() {
        let mut cs = json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "x"},
            "bogus": 1,
            "spec": {"replicas": 1, "unknown": true, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"anything": "kept"}}},
            "status": {"replicas": 2, "labelSelector": null, "extra": 1}
        });
        apply(&mut cs);
        assert!(cs.get("bogus").is_none());
        assert!(cs["spec"].get("unknown").is_none());
        assert_eq!(cs["spec"]["template"]["spec"]["anything"], "kept");
        assert_eq!(cs["status"]["replicas"], 2);
        assert_eq!(cs["status"]["readyReplicas"], 0);
        assert!(cs["status"].get("extra").is_none());
        assert!(cs["status"].get("labelSelector").is_none());
    }
}
