//! v1alpha1's spelling of the rolling-update fields, written to v1beta1, moved to where v1beta1 keeps them.
//!
//! kubectl sends `kubectl patch cloneset …` to the CRD's preferred version, v1beta1, where `partition`, `paused`,
//! `maxUnavailable`, `maxSurge`, the priority and scatter strategies and `inPlaceUpdateStrategy` live under
//! `updateStrategy.rollingUpdate`, and v1alpha1's `type: InPlaceIfPossible` is `type: RollingUpdate` with
//! `rollingUpdate.podUpdatePolicy: InPlaceIfPossible`. Kruise's v1beta1 schema prunes the v1alpha1 spelling with
//! a warning, so a tutorial's `{"spec":{"updateStrategy":{"paused":true}}}` is answered "patched" and pauses
//! nothing. insitu's v1beta1 schema accepts the old spelling (`crd.rs`, without defaults) and this step, run by
//! the defaulting webhook before Kruise's defaults, moves it; a CEL rule refuses it if the webhook did not run, so
//! a stored object never keeps it (docs/seed-tutorial.md).
//!
//! A request that sets both spellings to different values is refused naming both fields. "Sets" means: on
//! UPDATE, the `rollingUpdate` field differs from the old object's (a merge patch of `partition` alone leaves the
//! stored `rollingUpdate.partition` as it was, and the old spelling wins); on CREATE, the field is present with a
//! value other than the schema default (the apiserver fills `rollingUpdate`'s defaults before admission, so a
//! default value cannot be told from one the client wrote).

use serde_json::{Map, Value, json};

use crate::conversion::V1BETA1;
use crate::validation::{FieldError, invalid};

/// The fields whose v1alpha1 spelling (`spec.updateStrategy.X`) is moved to `spec.updateStrategy.rollingUpdate.X`
/// as they are.
pub const MOVED_FIELDS: [&str; 6] = crate::conversion::ROLLING_FIELDS;

/// v1alpha1's `updateStrategy.type` values that are a v1beta1 `rollingUpdate.podUpdatePolicy`.
pub const POD_UPDATE_POLICIES: [&str; 3] = ["ReCreate", "InPlaceIfPossible", "InPlaceOnly"];

const US: &str = "spec.updateStrategy";
const RU: &str = "spec.updateStrategy.rollingUpdate";

/// Whether a v1beta1 `updateStrategy` holds any field in its v1alpha1 spelling (what the CRD's CEL rule refuses
/// once admission is done).
pub fn has_legacy(update_strategy: &Map<String, Value>) -> bool {
    MOVED_FIELDS.iter().any(|k| update_strategy.contains_key(*k))
        || update_strategy.contains_key("inPlaceUpdateStrategy")
        || legacy_type(update_strategy).is_some()
}

fn legacy_type(us: &Map<String, Value>) -> Option<&str> {
    us.get("type")
        .and_then(Value::as_str)
        .filter(|t| POD_UPDATE_POLICIES.contains(t))
}

/// What the request's `rollingUpdate` is compared with to tell whether the request set a field there.
#[derive(Clone, Copy)]
enum Baseline<'a> {
    /// CREATE: a field counts as set when present with a non-default value.
    Create,
    /// UPDATE: a field counts as set when it differs from the old object's (`None`: the old object had no
    /// such object).
    Update(Option<&'a Map<String, Value>>),
}

impl<'a> Baseline<'a> {
    fn child(self, key: &str) -> Baseline<'a> {
        match self {
            Baseline::Create => Baseline::Create,
            Baseline::Update(old) => {
                Baseline::Update(old.and_then(|m| m.get(key)).and_then(Value::as_object))
            }
        }
    }

    fn set_by_request(self, key: &str, current: Option<&Value>) -> bool {
        let current = current.filter(|v| !v.is_null());
        match self {
            Baseline::Create => current.is_some_and(|v| !is_schema_default(key, v)),
            Baseline::Update(old) => current != old.and_then(|m| m.get(key)).filter(|v| !v.is_null()),
        }
    }
}

/// The v1beta1 schema's defaults under `rollingUpdate` (`crd.rs`), and `paused`'s zero value.
fn is_schema_default(key: &str, v: &Value) -> bool {
    match key {
        "partition" | "maxSurge" => v == &json!(0),
        "maxUnavailable" => v == &json!("20%"),
        "podUpdatePolicy" => v == &json!("ReCreate"),
        "paused" => v == &json!(false),
        _ => false,
    }
}

/// Moves the v1alpha1 spelling of a v1beta1 CloneSet's rolling-update fields into `rollingUpdate` (`old`: the
/// stored object, in the same version, on UPDATE). `Ok(None)`: nothing to move (any other object, or version).
pub fn lift(obj: &Value, old: Option<&Value>) -> Result<Option<Value>, Vec<FieldError>> {
    if obj.get("apiVersion").and_then(Value::as_str) != Some(V1BETA1) {
        return Ok(None);
    }
    let Some(us) = obj.pointer("/spec/updateStrategy").and_then(Value::as_object) else {
        return Ok(None);
    };
    if !has_legacy(us) {
        return Ok(None);
    }
    let baseline = match old {
        None => Baseline::Create,
        Some(o) => Baseline::Update(
            o.pointer("/spec/updateStrategy/rollingUpdate")
                .and_then(Value::as_object),
        ),
    };
    let mut us = us.clone();
    let mut ru = match us.remove("rollingUpdate") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut errs = Vec::new();
    for key in MOVED_FIELDS {
        if let Some(v) = us.remove(key).filter(|v| !v.is_null()) {
            place(&mut ru, baseline, key, v, "", &mut errs);
        }
    }
    if let Some(policy) = legacy_type(&us).map(str::to_string) {
        us.insert("type".into(), json!("RollingUpdate"));
        place_type(&mut ru, baseline, &policy, &mut errs);
    }
    match us.remove("inPlaceUpdateStrategy") {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) => {
            let target = super::entry_obj(&mut ru, "inPlaceUpdateStrategy");
            let inner = baseline.child("inPlaceUpdateStrategy");
            for (key, v) in fields.into_iter().filter(|(_, v)| !v.is_null()) {
                place(target, inner, &key, v, "inPlaceUpdateStrategy.", &mut errs);
            }
        }
        Some(other) => errs.push(invalid(
            &format!("{US}.inPlaceUpdateStrategy"),
            other,
            "must be an object; in apps.kruise.io/v1beta1 it is spec.updateStrategy.rollingUpdate.inPlaceUpdateStrategy",
        )),
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    us.insert("rollingUpdate".into(), Value::Object(ru));
    let mut out = obj.clone();
    out["spec"]["updateStrategy"] = Value::Object(us);
    Ok(Some(out))
}

/// Writes the old spelling's value at `key` of `target`, unless the request also set `key` there to another
/// value.
fn place(
    target: &mut Map<String, Value>,
    baseline: Baseline<'_>,
    key: &str,
    value: Value,
    prefix: &str,
    errs: &mut Vec<FieldError>,
) {
    let current = target.get(key);
    if baseline.set_by_request(key, current) && current != Some(&value) {
        let legacy = format!("{US}.{prefix}{key}");
        let new = format!("{RU}.{prefix}{key}");
        let detail = format!(
            "conflicts with {new} ({}) set in the same request: {legacy} is the apps.kruise.io/v1alpha1 spelling of \
             {new}; set only one of them",
            render(current)
        );
        errs.push(invalid(&legacy, render(Some(&value)), detail));
        return;
    }
    target.insert(key.to_string(), value);
}

/// v1alpha1's `type: ReCreate | InPlaceIfPossible | InPlaceOnly` → `rollingUpdate.podUpdatePolicy`.
fn place_type(ru: &mut Map<String, Value>, baseline: Baseline<'_>, policy: &str, errs: &mut Vec<FieldError>) {
    let current = ru.get("podUpdatePolicy");
    if baseline.set_by_request("podUpdatePolicy", current) && current != Some(&json!(policy)) {
        let detail = format!(
            "conflicts with {RU}.podUpdatePolicy ({}) set in the same request: in apps.kruise.io/v1beta1 the \
             apps.kruise.io/v1alpha1 type {policy} is {US}.type RollingUpdate with {RU}.podUpdatePolicy {policy}; \
             set only one of them",
            render(current)
        );
        errs.push(invalid(
            &format!("{US}.type"),
            render(Some(&json!(policy))),
            detail,
        ));
        return;
    }
    ru.insert("podUpdatePolicy".into(), json!(policy));
}

fn render(v: Option<&Value>) -> String {
    v.map_or_else(|| "null".into(), Value::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beta(us: Value) -> Value {
        json!({"apiVersion": V1BETA1, "kind": "CloneSet", "metadata": {"name": "x"},
               "spec": {"replicas": 10, "updateStrategy": us}})
    }

    fn stored() -> Value {
        beta(json!({"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "partition": 0, "maxUnavailable": 1, "maxSurge": 0,
            "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}}}))
    }

    fn with(mut obj: Value, key: &str, v: Value) -> Value {
        obj["spec"]["updateStrategy"][key] = v;
        obj
    }

    #[test]
    fn a_merge_patch_of_the_old_spelling_lands_in_rolling_update() {
        let old = stored();
        for (key, v) in [
            ("partition", json!(8)),
            ("paused", json!(true)),
            ("maxUnavailable", json!("20%")),
            ("maxSurge", json!(2)),
            ("scatterStrategy", json!([{"key": "a", "value": "b"}])),
            ("priorityStrategy", json!({"weightPriority": []})),
        ] {
            let out = lift(&with(old.clone(), key, v.clone()), Some(&old))
                .unwrap()
                .unwrap();
            let us = &out["spec"]["updateStrategy"];
            assert_eq!(us["rollingUpdate"][key], v, "{key}");
            assert!(us.get(key).is_none(), "{key} left in the old spelling");
            assert_eq!(us["rollingUpdate"]["podUpdatePolicy"], "InPlaceIfPossible");
        }
    }

    #[test]
    fn the_old_type_becomes_the_pod_update_policy() {
        let old = stored();
        let out = lift(&with(old.clone(), "type", json!("ReCreate")), Some(&old))
            .unwrap()
            .unwrap();
        assert_eq!(out["spec"]["updateStrategy"]["type"], "RollingUpdate");
        assert_eq!(
            out["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"],
            "ReCreate"
        );
        // RollingUpdate and OnDelete are v1beta1 types: nothing to move.
        for t in ["RollingUpdate", "OnDelete"] {
            assert_eq!(lift(&with(old.clone(), "type", json!(t)), Some(&old)), Ok(None));
        }
    }

    #[test]
    fn the_grace_period_merges_into_the_in_place_strategy() {
        let mut old = stored();
        old["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"]["imagePreDownloadParallelism"] =
            json!(3);
        let new = with(
            old.clone(),
            "inPlaceUpdateStrategy",
            json!({"gracePeriodSeconds": 30}),
        );
        let out = lift(&new, Some(&old)).unwrap().unwrap();
        assert_eq!(
            out["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"],
            json!({"gracePeriodSeconds": 30, "imagePreDownloadParallelism": 3})
        );
    }

    #[test]
    fn a_create_in_the_old_spelling_builds_rolling_update() {
        let cs = beta(
            json!({"type": "InPlaceIfPossible", "partition": 8, "maxUnavailable": 1,
                             "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}}),
        );
        let out = lift(&cs, None).unwrap().unwrap();
        assert_eq!(
            out["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 8, "maxUnavailable": 1,
                   "podUpdatePolicy": "InPlaceIfPossible", "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}}})
        );
        // The apiserver's defaults in rollingUpdate do not count as the client's.
        let mut defaulted = cs.clone();
        defaulted["spec"]["updateStrategy"]["rollingUpdate"] =
            json!({"partition": 0, "maxUnavailable": "20%", "maxSurge": 0, "podUpdatePolicy": "ReCreate"});
        let out = lift(&defaulted, None).unwrap().unwrap();
        assert_eq!(out["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 8);
        assert_eq!(
            out["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"],
            "InPlaceIfPossible"
        );
    }

    #[test]
    fn both_spellings_with_different_values_are_refused_naming_both() {
        let old = stored();
        let mut new = with(old.clone(), "partition", json!(8));
        new["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = json!(5);
        let errs = lift(&new, Some(&old)).unwrap_err();
        let text = errs[0].to_string();
        assert!(
            text.starts_with("spec.updateStrategy.partition: Invalid value: 8: conflicts with spec.updateStrategy.rollingUpdate.partition (5)"),
            "{text}"
        );
        // Both spellings with the same value: fine.
        new["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = json!(8);
        let out = lift(&new, Some(&old)).unwrap().unwrap();
        assert_eq!(out["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 8);
        // A type that contradicts a podUpdatePolicy set in the same CREATE.
        let cs =
            beta(json!({"type": "InPlaceOnly", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}));
        let text = lift(&cs, None).unwrap_err()[0].to_string();
        assert!(
            text.contains("spec.updateStrategy.type: Invalid value: \"InPlaceOnly\"")
                && text.contains("spec.updateStrategy.rollingUpdate.podUpdatePolicy (\"InPlaceIfPossible\")"),
            "{text}"
        );
    }

    #[test]
    fn v1alpha1_and_clean_v1beta1_objects_are_untouched() {
        let old = stored();
        assert_eq!(lift(&old, None), Ok(None));
        let mut alpha = with(old.clone(), "partition", json!(3));
        alpha["apiVersion"] = json!(crate::conversion::V1ALPHA1);
        assert_eq!(lift(&alpha, None), Ok(None));
        // A null in the old spelling (a merge patch deleting it) moves nothing but is removed.
        let out = lift(&with(old.clone(), "partition", Value::Null), Some(&old))
            .unwrap()
            .unwrap();
        assert_eq!(out["spec"]["updateStrategy"], old["spec"]["updateStrategy"]);
    }
}
