//! Patch formats: JSON patch, JSON merge patch, a practical strategic-merge-patch subset, and apply (≈ merge).

use serde_json::{Map, Value};

use super::errors::ApiError;

/// `validateAndTranscodePatch`'s answer to a JSON, merge or strategic merge patch that is not valid JSON.
pub(super) const INVALID_PATCH: &str = "invalid JSON patch";

/// The patch media types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchKind {
    /// From a Content-Type header (parameters ignored).
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match base.as_str() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Media types accepted for patches of a resource (the 415 message lists them).
pub fn accepted(smp: bool) -> Vec<&'static str> {
    let mut v = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if smp {
        v.push("application/strategic-merge-patch+json");
    }
    v
}

/// Parses a JSON (or, for apply, YAML) body into a JSON value.
pub fn parse_body(body: &[u8], yaml_ok: bool) -> Result<Value, ApiError> {
    // Nested at most `deep::MAX_DEPTH` (checked at dispatch), and parsed on a deep stack past `deep::SHALLOW`.
    match crate::deep::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(e) if yaml_ok => {
            let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("body is not UTF-8"))?;
            // Repeated keys: the last wins, as sigs.k8s.io/yaml's non-strict decoder does (fieldValidation
            // reports them, see duplicates.rs).
            let options = serde_saphyr::options! {
                duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::LastWins,
            };
            serde_saphyr::from_str_with_options::<Value>(text, options)
                .map_err(|ye| ApiError::bad_request(format!("error decoding YAML: {ye} (as JSON: {e})")))
        }
        Err(e) => Err(ApiError::bad_request(format!("error decoding patch: {e}"))),
    }
}

/// Applies a patch of the given kind to `doc` in place.
pub fn apply(kind: PatchKind, doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    // `validateAndTranscodePatch` (endpoints/handlers/patch.go): a JSON, merge or strategic merge patch that is
    // not valid JSON (`json.Valid`) is refused before anything decodes it.
    if kind != PatchKind::Apply && crate::deep::from_slice::<serde::de::IgnoredAny>(body).is_err() {
        return Err(ApiError::bad_request(INVALID_PATCH));
    }
    match kind {
        PatchKind::Json => {
            let patch: json_patch::Patch = crate::deep::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            super::limits::apply_json_patch(doc, &patch.0)?;
            super::limits::check_patched(doc)
        }
        PatchKind::Merge | PatchKind::Apply => {
            let patch = parse_body(body, kind == PatchKind::Apply)?;
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: the patch must be a JSON object",
                ));
            }
            json_patch::merge(doc, &patch);
            Ok(())
        }
        PatchKind::Strategic => {
            let patch = parse_body(body, false)?;
            let Value::Object(p) = patch else {
                return Err(ApiError::bad_request(
                    "error decoding patch: the patch must be a JSON object",
                ));
            };
            if !doc.is_object() {
                *doc = Value::Object(Map::new());
            }
            if let Value::Object(d) = doc {
                smp_map(d, &p, "")?;
            }
            Ok(())
        }
    }
}

/// How a list field merges under SMP.
enum ListStrategy {
    Replace,
    MergeKey(&'static str),
    /// Primitive list with `patchStrategy:merge` (union), e.g. `finalizers`.
    Union,
}

fn list_strategy(field: &str, items: &[Value]) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "schedulingGates"
        | "resourceClaims" => ListStrategy::MergeKey("name"),
        "containerStatuses" | "initContainerStatuses" | "ephemeralContainerStatuses" => {
            ListStrategy::MergeKey("name")
        }
        "volumeMounts" => ListStrategy::MergeKey("mountPath"),
        "volumeDevices" => ListStrategy::MergeKey("devicePath"),
        "ports" => {
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                ListStrategy::MergeKey("containerPort")
            } else {
                ListStrategy::MergeKey("port")
            }
        }
        "conditions" => ListStrategy::MergeKey("type"),
        "readinessGates" => ListStrategy::MergeKey("conditionType"),
        "ownerReferences" => ListStrategy::MergeKey("uid"),
        "podIPs" | "hostIPs" | "hostAliases" => ListStrategy::MergeKey("ip"),
        "addresses" => ListStrategy::MergeKey("type"),
        "topologySpreadConstraints" => ListStrategy::MergeKey("topologyKey"),
        "finalizers" => ListStrategy::Union,
        _ => ListStrategy::Replace,
    }
}

fn directive(v: &Value) -> Option<&str> {
    v.get("$patch").and_then(Value::as_str)
}

fn strip_directives(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Recursively removes `$`-directives and nulls from a value being inserted wholesale.
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().filter(|i| directive(i).is_none()).map(clean).collect()),
        other => other.clone(),
    }
}

fn smp_map(doc: &mut Map<String, Value>, patch: &Map<String, Value>, path: &str) -> Result<(), ApiError> {
    match directive(&Value::Object(patch.clone())) {
        Some("replace") => {
            *doc = strip_directives(patch)
                .iter()
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect();
            return Ok(());
        }
        Some("delete") => {
            doc.clear();
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type: {other} in map: {path}"
            )));
        }
    }
    for (key, pv) in patch {
        if key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Value::Array(del)) = (doc.get_mut(field), pv) {
                cur.retain(|v| !del.contains(v));
            }
            continue;
        }
        let child_path = format!("{path}.{key}");
        match pv {
            Value::Null => {
                doc.remove(key);
            }
            Value::Object(pm) => {
                if directive(pv) == Some("delete") {
                    doc.remove(key);
                    continue;
                }
                match doc.get_mut(key) {
                    Some(Value::Object(dm)) => smp_map(dm, pm, &child_path)?,
                    _ => {
                        let mut fresh = Map::new();
                        smp_map(&mut fresh, pm, &child_path)?;
                        doc.insert(key.clone(), Value::Object(fresh));
                    }
                }
            }
            Value::Array(items) => {
                let merged = smp_list(key, doc.get(key), items, &child_path)?;
                doc.insert(key.clone(), merged);
            }
            other => {
                doc.insert(key.clone(), other.clone());
            }
        }
    }
    Ok(())
}

fn smp_list(field: &str, current: Option<&Value>, items: &[Value], path: &str) -> Result<Value, ApiError> {
    // A `{"$patch": "replace"}` element replaces the whole list with the other elements.
    if items
        .iter()
        .any(|i| directive(i) == Some("replace") && i.as_object().is_some_and(|m| m.len() == 1))
    {
        return Ok(Value::Array(
            items
                .iter()
                .filter(|i| directive(i).is_none())
                .map(clean)
                .collect(),
        ));
    }
    let cur: Vec<Value> = match current {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    match list_strategy(field, items) {
        ListStrategy::Replace => Ok(Value::Array(items.iter().map(clean).collect())),
        ListStrategy::Union => {
            let mut out = cur;
            for i in items {
                if !out.contains(i) {
                    out.push(i.clone());
                }
            }
            Ok(Value::Array(out))
        }
        ListStrategy::MergeKey(mk) => {
            let mut out = cur;
            for item in items {
                let Some(pm) = item.as_object() else {
                    return Err(ApiError::bad_request(format!(
                        "{path}: list element is not an object"
                    )));
                };
                let Some(key) = pm.get(mk) else {
                    return Err(ApiError::bad_request(format!(
                        "map: {} does not contain declared merge key: {mk}",
                        Value::Object(pm.clone())
                    )));
                };
                let pos = out.iter().position(|e| e.get(mk) == Some(key));
                match (directive(item), pos) {
                    (Some("delete"), Some(p)) => {
                        out.remove(p);
                    }
                    (Some("delete"), None) => {}
                    (Some("replace"), Some(p)) => out[p] = clean(item),
                    (_, Some(p)) => {
                        if let Value::Object(em) = &mut out[p] {
                            smp_map(em, pm, path)?;
                        }
                    }
                    (_, None) => {
                        let mut fresh = Map::new();
                        smp_map(&mut fresh, pm, path)?;
                        out.push(Value::Object(fresh));
                    }
                }
            }
            Ok(Value::Array(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(doc: Value, patch: Value) -> Value {
        let mut d = doc;
        let body = serde_json::to_vec(&patch).unwrap_or_default();
        assert!(apply(PatchKind::Strategic, &mut d, &body).is_ok());
        d
    }

    #[test]
    fn strategic_merges_by_key() {
        let doc = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
                          "tolerations": [{"key": "t"}]},
                         "metadata": {"finalizers": ["f1"], "labels": {"k": "v", "gone": "1"}}});
        let out = smp(
            doc,
            json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}],
                            "tolerations": [{"key": "u"}]},
                   "metadata": {"finalizers": ["f2"], "labels": {"gone": null}}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "z"}, {"name": "c", "image": "w"}],
                            "tolerations": [{"key": "u"}]},
                   "metadata": {"finalizers": ["f1", "f2"], "labels": {"k": "v"}}})
        );
    }

    #[test]
    fn strategic_directives() {
        let doc = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}], "template": {"a": 1, "b": 2}},
                         "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let out = smp(
            doc,
            json!({"spec": {"containers": [{"name": "b", "$patch": "delete"}], "template": {"$patch": "replace", "c": 3}},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}],
                              "$setElementOrder/conditions": [{"type": "Ready"}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"containers": [{"name": "a", "image": "x"}], "template": {"c": 3}},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]}})
        );
    }
}
