//! Kruise's Advanced StatefulSet defaults (its mutating webhook, `pkg/webhook/statefulset/mutating`,
//! `apis/apps/defaults/v1beta1.go` `SetDefaultsStatefulSet`), as pure functions on JSON.
//!
//! Kruise decodes either version into v1beta1, defaults it and writes it back in the request's version. Here
//! the defaults are applied to the request's own spelling (both versions spell these fields alike), with
//! one difference in outcome Kruise has too: `persistentVolumeClaimRetentionPolicy` (v1beta1 only, feature gate
//! `StatefulSetAutoDeletePVC`, on by default) is not written into a v1alpha1 object, since Kruise's `ConvertFrom`
//! drops it. The `StatefulSetAutoResizePVCGate` gate (off by default) is not offered, so
//! `volumeClaimUpdateStrategy` is left as written. Kruise also zeroes `status`; the apiserver ignores the status
//! of a write to a resource with a status subresource, so that is not repeated here.

use serde_json::{Map, Value, json};

use crate::conversion::{V1ALPHA1, V1BETA1};
use crate::defaults::shared::{entry_obj, replicas_and_template, set};

/// The kind these defaults apply to.
pub const KIND: &str = "StatefulSet";

/// `SetDefaultsStatefulSet` on an Advanced StatefulSet of either version (anything else is returned unchanged).
/// `template` says whether the pod template and volumeClaimTemplates are defaulted too.
pub fn statefulset(obj: &mut Value, template: bool) {
    let version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if (version != V1ALPHA1 && version != V1BETA1) || obj.get("kind").and_then(Value::as_str) != Some(KIND) {
        return;
    }
    let Some(root) = obj.as_object_mut() else { return };
    let spec = entry_obj(root, "spec");
    set_str(spec, "podManagementPolicy", json!("OrderedReady"));
    let strategy = entry_obj(spec, "updateStrategy");
    set_str(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let rolling = entry_obj(strategy, "rollingUpdate");
        set(rolling, "partition", json!(0));
        set(rolling, "maxUnavailable", json!(1));
        set_str(rolling, "podUpdatePolicy", json!("ReCreate"));
        set(rolling, "minReadySeconds", json!(0));
    }
    if version == V1BETA1 {
        let policy = entry_obj(spec, "persistentVolumeClaimRetentionPolicy");
        set_str(policy, "whenDeleted", json!("Retain"));
        set_str(policy, "whenScaled", json!("Retain"));
    }
    replicas_and_template(spec, template);
}

/// The webhook's decision for a CREATE (`old` = None) or an UPDATE: the template is defaulted on CREATE, and on
/// UPDATE only when `spec.template` changed (Kruise's handler, `TemplateNoDefaults` off).
pub fn admit(obj: &Value, old: Option<&Value>) -> Value {
    let template = |v: &Value| v.pointer("/spec/template").cloned();
    let inject = old.is_none_or(|o| template(o) != template(obj));
    let mut out = obj.clone();
    statefulset(&mut out, inject);
    out
}

/// Whether `obj` is an Advanced StatefulSet (either served version).
pub fn is_statefulset(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some(KIND)
        && matches!(
            obj.get("apiVersion").and_then(Value::as_str),
            Some(V1ALPHA1 | V1BETA1)
        )
}

/// Go's `len(s) == 0` test: an absent, null or empty string gets the default.
fn set_str(m: &mut Map<String, Value>, key: &str, v: Value) {
    if m.get(key).is_none_or(|x| x.is_null() || x.as_str() == Some("")) {
        m.insert(key.to_string(), v);
    }
}
