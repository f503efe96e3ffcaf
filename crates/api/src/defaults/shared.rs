//! The defaulting steps CloneSet's and Advanced StatefulSet's webhooks share (a leaf: both workloads' defaults
//! import it, it imports neither).

use serde_json::{Map, Value, json};

use super::pod;

/// `replicas: 1`, `revisionHistoryLimit: 10`, and (when `template`) the pod template's and the claim templates'
/// defaults; every quantity of both canonical. CloneSet's and Advanced StatefulSet's defaulting share this.
pub(crate) fn replicas_and_template(spec: &mut Map<String, Value>, template: bool) {
    set(spec, "replicas", json!(1));
    set(spec, "revisionHistoryLimit", json!(10));
    if template {
        if let Some(s) = spec
            .get_mut("template")
            .and_then(Value::as_object_mut)
            .and_then(|t| t.get_mut("spec"))
            .and_then(Value::as_object_mut)
        {
            pod::pod_spec(s);
        }
        for vct in spec
            .get_mut("volumeClaimTemplates")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            // `SetDefaults_PersistentVolumeClaim` (not `...ClaimSpec`: Kruise does not default volumeMode).
            set(entry_obj(vct, "status"), "phase", json!("Pending"));
        }
    }
    // Kruise answers with a patch from the request to its Go-marshalled object: every quantity of the
    // template and the claim templates comes back canonical (`0.5` → `500m`), on every CREATE and UPDATE.
    for key in ["template", "volumeClaimTemplates"] {
        if let Some(v) = spec.get_mut(key) {
            crate::quantity::canonicalize_in(v);
        }
    }
}

pub(crate) fn set(m: &mut Map<String, Value>, key: &str, v: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), v);
    }
}

/// The object at `key`, created (or replacing a null/non-object) if needed.
pub(crate) fn entry_obj<'a>(m: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let v = m.entry(key.to_string()).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    match v {
        Value::Object(o) => o,
        _ => unreachable!("just made an object"),
    }
}
