//! Kruise's CloneSet defaults (its mutating webhook `/mutate-apps-kruise-io-cloneset`), as pure functions on JSON.
//!
//! Kruise (`pkg/webhook/cloneset/mutating`, `apis/apps/defaults` `SetDefaultsCloneSet[V1beta1]`)
//! defaults the spec (`replicas: 1`, `revisionHistoryLimit: 10`, the update strategy) on every CREATE and UPDATE,
//! and the pod template ([`pod::pod_spec`]) and volumeClaimTemplates on CREATE, and on UPDATE only when the
//! template changed. The stored template therefore carries Kubernetes' scheme defaults (and
//! `imagePullPolicy: Always`), which is what the revision hash is computed from: the same YAML gives the same
//! ControllerRevision name under Kruise and insitu only if both default it alike.
//!
//! `insitu run` serves [`admit`] as a mutating webhook (a JSON patch from [`json_patch`]); the embedded cluster
//! calls [`admit`] in-process where a real apiserver would call the webhook. Kruise's `TemplateNoDefaults`
//! gate (off by default) is not offered.

pub mod legacy;
pub mod patch;
pub mod pod;
pub(crate) mod shared;
pub mod warnings;

pub use patch::json_patch;

use serde_json::{Map, Value, json};

use crate::conversion::{V1ALPHA1, V1BETA1};
pub(crate) use shared::{entry_obj, replicas_and_template, set};

/// `SetDefaultsCloneSet` / `SetDefaultsCloneSetV1beta1` on a CloneSet of either version (by its `apiVersion`;
/// anything else is returned unchanged). `template` says whether the template defaults are injected.
pub fn cloneset(obj: &mut Value, template: bool) {
    let version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if version != V1ALPHA1 && version != V1BETA1 {
        return;
    }
    let Some(root) = obj.as_object_mut() else { return };
    let spec = entry_obj(root, "spec");
    replicas_and_template(spec, template);
    let strategy = entry_obj(spec, "updateStrategy");
    if version == V1ALPHA1 {
        set(strategy, "type", json!("ReCreate"));
        let kind = strategy.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind == "InPlaceIfPossible" || kind == "InPlaceOnly" {
            set(strategy, "inPlaceUpdateStrategy", json!({}));
        }
        rolling_numbers(strategy);
    } else {
        set(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            let rolling = entry_obj(strategy, "rollingUpdate");
            set(rolling, "podUpdatePolicy", json!("ReCreate"));
            let policy = rolling
                .get("podUpdatePolicy")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if policy == "InPlaceIfPossible" || policy == "InPlaceOnly" {
                set(rolling, "inPlaceUpdateStrategy", json!({}));
            }
            rolling_numbers(rolling);
        }
    }
}

/// `partition: 0`, `maxUnavailable: "20%"`, `maxSurge: 0`.
fn rolling_numbers(m: &mut Map<String, Value>) {
    set(m, "partition", json!(0));
    set(m, "maxUnavailable", json!("20%"));
    set(m, "maxSurge", json!(0));
}

/// The webhook's decision: `obj` defaulted as Kruise's handler does for a CREATE (`old` = None) or an UPDATE
/// (template defaults only if `spec.template` differs from the old object's).
pub fn admit(obj: &Value, old: Option<&Value>) -> Value {
    let template = |v: &Value| v.pointer("/spec/template").cloned();
    let inject = old.is_none_or(|o| template(o) != template(obj));
    let mut out = obj.clone();
    cloneset(&mut out, inject);
    out
}

/// What the defaulting webhook answers an admitted CREATE or UPDATE with.
#[derive(Clone, Debug, PartialEq)]
pub struct Admitted {
    /// The object, defaulted.
    pub object: Value,
    /// `Warning`s for the client ([`warnings::template_warnings`]).
    pub warnings: Vec<String>,
}

/// The defaulting webhook's whole answer for a CREATE or UPDATE (an Advanced StatefulSet gets
/// `crate::statefulset::defaults::admit`): the v1alpha1 spelling of v1beta1's rolling-update
/// fields moved ([`legacy::lift`]; `Err` when the request sets both spellings differently), then [`admit`], and
/// the warnings for an update that will recreate pods the writer likely meant to update in place.
pub fn admit_request(
    obj: &Value,
    old: Option<&Value>,
) -> Result<Admitted, Vec<crate::validation::FieldError>> {
    if crate::statefulset::defaults::is_statefulset(obj) {
        // Advanced StatefulSets share the webhook (`crate::crd::mutating_webhook_configuration`): Kruise's
        // `SetDefaultsStatefulSet`, no legacy spelling to move, no template warnings.
        let object = crate::statefulset::defaults::admit(obj, old);
        return Ok(Admitted {
            object,
            warnings: Vec::new(),
        });
    }
    let lifted = legacy::lift(obj, old)?;
    let object = admit(lifted.as_ref().unwrap_or(obj), old);
    let warnings = old.map_or_else(Vec::new, |o| warnings::template_warnings(&object, o));
    Ok(Admitted { object, warnings })
}
