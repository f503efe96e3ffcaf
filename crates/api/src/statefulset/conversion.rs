//! Lossless conversion between `apps.kruise.io/v1alpha1` and `v1beta1` Advanced StatefulSets, on JSON.
//!
//! Kruise's mapping (`apis/apps/v1alpha1/statefulset_conversion.go`, `ConvertTo`/`ConvertFrom`) copies every
//! field v1alpha1 has, unchanged, and drops what only v1beta1 has. Here, as for CloneSets
//! (`crate::conversion`), what v1alpha1 cannot hold is kept in the annotation
//! [`crate::conversion::PRESERVED_ANNOTATION`] of the v1alpha1 object (`{"apiVersion": v1beta1, "spec": {...},
//! "status": {...}}`) and put back on the way to v1beta1, so both round trips are the identity. A spec or
//! status field v1alpha1 does not know (v1beta1's, or any other) is moved, so nothing the apiserver stored is
//! pruned by a conversion. One exception keeps defaulted objects free of the annotation: the default
//! `persistentVolumeClaimRetentionPolicy` (`Retain`/`Retain`, which v1beta1 always has) is implied, dropped on the
//! way to v1alpha1 and written on the way back.

use serde_json::{Map, Value, json};

use crate::conversion::{ConversionError, PRESERVED_ANNOTATION, V1ALPHA1, V1BETA1};

/// The spec fields of v1alpha1 (`StatefulSetSpec`); every other spec field is v1beta1's only.
pub const V1ALPHA1_SPEC_FIELDS: [&str; 8] = [
    "replicas",
    "selector",
    "template",
    "volumeClaimTemplates",
    "serviceName",
    "podManagementPolicy",
    "updateStrategy",
    "revisionHistoryLimit",
];

/// The status fields of v1alpha1 (`StatefulSetStatus`).
pub const V1ALPHA1_STATUS_FIELDS: [&str; 11] = [
    "observedGeneration",
    "replicas",
    "readyReplicas",
    "availableReplicas",
    "currentReplicas",
    "updatedReplicas",
    "currentRevision",
    "updateRevision",
    "collisionCount",
    "conditions",
    "labelSelector",
];

/// Converts an Advanced StatefulSet (JSON) to `desired_api_version`; the same version in and out is the object.
pub fn convert(obj: &Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    let from = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or(ConversionError::NotAnObject)?;
    for v in [from, desired_api_version] {
        if v != V1ALPHA1 && v != V1BETA1 {
            return Err(ConversionError::UnknownVersion(v.to_string()));
        }
    }
    if from == desired_api_version {
        return Ok(obj.clone());
    }
    let mut out = obj.clone();
    out["apiVersion"] = json!(desired_api_version);
    if desired_api_version == V1ALPHA1 {
        to_alpha(&mut out);
    } else {
        to_beta(&mut out);
    }
    Ok(out)
}

/// v1alpha1 (or v1beta1, returned as is) → v1beta1.
pub fn to_v1beta1(obj: &Value) -> Result<Value, ConversionError> {
    convert(obj, V1BETA1)
}

/// v1beta1 (or v1alpha1, returned as is) → v1alpha1.
pub fn to_v1alpha1(obj: &Value) -> Result<Value, ConversionError> {
    convert(obj, V1ALPHA1)
}

/// Typed v1alpha1 → v1beta1.
pub fn statefulset_to_v1beta1(s: &super::v1alpha1::StatefulSet) -> Result<super::StatefulSet, String> {
    let v = serde_json::to_value(s).map_err(|e| e.to_string())?;
    let out = to_v1beta1(&v).map_err(|e| e.to_string())?;
    serde_json::from_value(out).map_err(|e| e.to_string())
}

/// Typed v1beta1 → v1alpha1 (v1beta1's own fields land in the preserved annotation).
pub fn statefulset_to_v1alpha1(s: &super::StatefulSet) -> Result<super::v1alpha1::StatefulSet, String> {
    let v = serde_json::to_value(s).map_err(|e| e.to_string())?;
    let out = to_v1alpha1(&v).map_err(|e| e.to_string())?;
    serde_json::from_value(out).map_err(|e| e.to_string())
}

/// Moves the fields of `section` that v1alpha1 lacks out of the object.
fn take_extra(obj: &mut Value, section: &str, known: &[&str]) -> Option<Map<String, Value>> {
    let m = obj.get_mut(section)?.as_object_mut()?;
    let extra: Vec<String> = m
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    let moved: Map<String, Value> = extra
        .into_iter()
        .filter_map(|k| m.remove(&k).map(|v| (k, v)))
        .collect();
    (!moved.is_empty()).then_some(moved)
}

/// v1beta1's `persistentVolumeClaimRetentionPolicy`, which the CRD's v1beta1 schema defaults (Kruise's
/// `SetDefaultsStatefulSet` with `StatefulSetAutoDeletePVC`, on by default) to [`default_retention_policy`].
const POLICY: &str = "persistentVolumeClaimRetentionPolicy";

/// `{"whenDeleted": "Retain", "whenScaled": "Retain"}`.
pub fn default_retention_policy() -> Value {
    json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
}

/// The default retention policy is implied, not kept: v1beta1 → v1alpha1 drops it silently and v1alpha1 →
/// v1beta1 writes it unless the v1beta1 object had another one (kept) or none (kept as `null`). Without this,
/// every defaulted v1beta1 object would read as v1alpha1 with a preserved annotation.
fn drop_default_policy(obj: &mut Value) -> bool {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return false;
    };
    match spec.get(POLICY) {
        Some(p) if *p == default_retention_policy() => {
            spec.remove(POLICY);
            false
        }
        None => true,
        Some(_) => false,
    }
}

fn to_alpha(obj: &mut Value) {
    // A preserved annotation on a v1beta1 object is stale (written by hand or copied): it is dropped, as the
    // fields it would describe are in the object itself.
    let had_annotations = obj.pointer("/metadata/annotations").is_some();
    let had_metadata = obj.get("metadata").is_some();
    if let Some(a) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(PRESERVED_ANNOTATION);
    }
    let policy_absent = drop_default_policy(obj);
    let mut kept = Map::new();
    for (section, known) in [
        ("spec", &V1ALPHA1_SPEC_FIELDS[..]),
        ("status", &V1ALPHA1_STATUS_FIELDS[..]),
    ] {
        if let Some(moved) = take_extra(obj, section, known) {
            kept.insert(section.to_string(), Value::Object(moved));
        }
    }
    if policy_absent && let Some(spec) = kept.entry("spec").or_insert_with(|| json!({})).as_object_mut() {
        spec.insert(POLICY.into(), Value::Null);
    }
    if kept.is_empty() || !obj.is_object() {
        return;
    }
    kept.insert("apiVersion".into(), json!(V1BETA1));
    // Remember what the annotation's map had to be created for, so the way back removes exactly that.
    if !had_metadata {
        kept.insert("created".into(), json!("metadata"));
    } else if !had_annotations {
        kept.insert("created".into(), json!("annotations"));
    }
    let meta = obj
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})));
    let Some(meta) = meta.and_then(Value::as_object_mut) else {
        return;
    };
    let anns = meta.entry("annotations").or_insert_with(|| json!({}));
    if let Some(a) = anns.as_object_mut() {
        a.insert(
            PRESERVED_ANNOTATION.into(),
            json!(Value::Object(kept).to_string()),
        );
    }
}

fn to_beta(obj: &mut Value) {
    let kept = take_preserved(obj).unwrap_or_default();
    let policy_kept = kept
        .get("spec")
        .and_then(Value::as_object)
        .is_some_and(|s| s.contains_key(POLICY));
    if !policy_kept && let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry(POLICY).or_insert_with(default_retention_policy);
    }
    for section in ["spec", "status"] {
        let Some(fields) = kept.get(section).and_then(Value::as_object) else {
            continue;
        };
        let Some(root) = obj.as_object_mut() else { return };
        let target = root.entry(section).or_insert_with(|| json!({}));
        let Some(target) = target.as_object_mut() else {
            continue;
        };
        for (k, v) in fields.iter().filter(|(_, v)| !v.is_null()) {
            // A field the v1alpha1 object itself carries wins over the kept one.
            target.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// Removes a v1beta1-preserving annotation from `obj` and returns its content; an annotation that is not one
/// (another version's, or not JSON) stays where it is.
fn take_preserved(obj: &mut Value) -> Option<Map<String, Value>> {
    let text = obj
        .pointer(&format!(
            "/metadata/annotations/{}",
            PRESERVED_ANNOTATION.replace('/', "~1")
        ))?
        .as_str()?;
    let kept: Map<String, Value> = serde_json::from_str(text).ok()?;
    if kept.get("apiVersion").and_then(Value::as_str) != Some(V1BETA1) {
        return None;
    }
    let meta = obj.get_mut("metadata")?.as_object_mut()?;
    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        a.remove(PRESERVED_ANNOTATION);
        let empty = a.is_empty();
        match kept.get("created").and_then(Value::as_str) {
            Some("annotations") if empty => {
                meta.remove("annotations");
            }
            Some("metadata") if empty && meta.len() == 1 => {
                if let Some(root) = obj.as_object_mut() {
                    root.remove("metadata");
                }
            }
            _ => {}
        }
    }
    Some(kept)
}
