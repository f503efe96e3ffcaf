//! Lossless conversion between `apps.kruise.io/v1alpha1` and `v1beta1` CloneSets, as pure functions on JSON.
//!
//! The mapping is Kruise's (`apis/apps/v1alpha1/cloneset_conversion.go`): the v1alpha1 `updateStrategy.type`
//! becomes `type: RollingUpdate` + `rollingUpdate.podUpdatePolicy` (or `type: OnDelete`), the rolling fields move
//! under `rollingUpdate`, `disablePVCReuse` inverts into `enablePVCReuse`, the CloneSet label
//! `apps.kruise.io/cloneset-scaling-exclude-preparing-delete: "true"` becomes `scaleStrategy.excludePreparingDelete`,
//! and the `apps.kruise.io/image-predownload-*` annotations become `inPlaceUpdateStrategy.imagePreDownload*`.
//!
//! Kruise's conversion loses what the other version cannot say (an explicit `podUpdatePolicy` under `OnDelete`,
//! an empty `inPlaceUpdateStrategy`, `excludePreparingDelete` on the way back, an unset `type`...). Here, as in
//! Kubernetes' own conversions, whatever a round trip would not give back is kept in the annotation
//! [`PRESERVED_ANNOTATION`] of the converted object and restored on the way back, so v1alpha1 → v1beta1 →
//! v1alpha1 (and the reverse) is the identity. The object is converted in two parts (the update part: the update
//! strategy with the pre-download annotations; the scale part: the scale strategy with the exclude label), and a
//! kept part is restored only if it still converts to what the object now says: an edit made through the other
//! version wins over the kept spelling.
//!
//! Everything else (metadata, template, volumeClaimTemplates, status) is carried over verbatim, fields this code
//! does not know included, so a conversion never prunes what the apiserver stored.

use serde_json::{Map, Value, json};

use crate::keys;

pub const V1ALPHA1: &str = "apps.kruise.io/v1alpha1";
pub const V1BETA1: &str = "apps.kruise.io/v1beta1";

/// Annotation holding what the other version cannot express (JSON: `{"apiVersion", "update"?, "scale"?}`).
pub const PRESERVED_ANNOTATION: &str = "insitu/conversion-preserved";

/// v1alpha1 CloneSet annotations for image pre-download (v1beta1: fields of `inPlaceUpdateStrategy`).
pub const PREDOWNLOAD_PARALLELISM: &str = "apps.kruise.io/image-predownload-parallelism";
pub const PREDOWNLOAD_TIMEOUT_SECONDS: &str = "apps.kruise.io/image-predownload-timeout-seconds";
pub const PREDOWNLOAD_MIN_UPDATED_READY_PODS: &str =
    "apps.kruise.io/image-predownload-min-updated-ready-pods";
const PREDOWNLOAD_KEYS: [&str; 3] = [
    PREDOWNLOAD_PARALLELISM,
    PREDOWNLOAD_TIMEOUT_SECONDS,
    PREDOWNLOAD_MIN_UPDATED_READY_PODS,
];

/// Why an object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    #[error("conversion: the object is not a JSON object")]
    NotAnObject,
    #[error(
        "conversion: apiVersion {0:?} is not a served version (use apps.kruise.io/v1alpha1 or apps.kruise.io/v1beta1)"
    )]
    UnknownVersion(String),
}

/// Converts a CloneSet (JSON) to `desired_api_version`. Same version in and out returns the object unchanged.
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
    if !obj.is_object() {
        return Err(ConversionError::NotAnObject);
    }
    if from == desired_api_version {
        return Ok(obj.clone());
    }
    Ok(if desired_api_version == V1BETA1 {
        convert_with(obj, V1BETA1, &Direction::ToBeta)
    } else {
        convert_with(obj, V1ALPHA1, &Direction::ToAlpha)
    })
}

/// v1alpha1 (or v1beta1, returned as is) → v1beta1.
pub fn to_v1beta1(obj: &Value) -> Result<Value, ConversionError> {
    convert(obj, V1BETA1)
}

/// v1beta1 (or v1alpha1, returned as is) → v1alpha1.
pub fn to_v1alpha1(obj: &Value) -> Result<Value, ConversionError> {
    convert(obj, V1ALPHA1)
}

/// Typed v1alpha1 → v1beta1 (through JSON, with the same rules).
pub fn cloneset_to_v1beta1(cs: &crate::CloneSet) -> Result<crate::v1beta1::CloneSet, String> {
    let v = serde_json::to_value(cs).map_err(|e| e.to_string())?;
    let out = to_v1beta1(&v).map_err(|e| e.to_string())?;
    serde_json::from_value(out).map_err(|e| e.to_string())
}

/// Typed v1beta1 → v1alpha1 (through JSON, with the same rules).
pub fn cloneset_to_v1alpha1(cs: &crate::v1beta1::CloneSet) -> Result<crate::CloneSet, String> {
    let v = serde_json::to_value(cs).map_err(|e| e.to_string())?;
    let out = to_v1alpha1(&v).map_err(|e| e.to_string())?;
    serde_json::from_value(out).map_err(|e| e.to_string())
}

enum Direction {
    ToBeta,
    ToAlpha,
}

/// The two converted parts of an object, each as `{"strategy": <value or null>, "<map>": {key: value}}`.
#[derive(Clone, Copy)]
enum Part {
    Update,
    Scale,
}

impl Part {
    const ALL: [Part; 2] = [Part::Update, Part::Scale];
    fn name(self) -> &'static str {
        match self {
            Part::Update => "update",
            Part::Scale => "scale",
        }
    }
    fn field(self) -> &'static str {
        match self {
            Part::Update => "updateStrategy",
            Part::Scale => "scaleStrategy",
        }
    }
    fn meta_map(self) -> &'static str {
        match self {
            Part::Update => "annotations",
            Part::Scale => "labels",
        }
    }
    fn keys(self) -> &'static [&'static str] {
        match self {
            Part::Update => &PREDOWNLOAD_KEYS,
            Part::Scale => &[keys::SCALING_EXCLUDE_PREPARING_DELETE_LABEL],
        }
    }

    /// Reads this part out of an object.
    fn extract(self, obj: &Value) -> Value {
        let strategy = obj
            .get("spec")
            .and_then(|s| s.get(self.field()))
            .cloned()
            .unwrap_or(Value::Null);
        let mut meta = Map::new();
        if let Some(m) = obj
            .pointer(&format!("/metadata/{}", self.meta_map()))
            .and_then(Value::as_object)
        {
            for k in self.keys() {
                if let Some(v) = m.get(*k) {
                    meta.insert((*k).to_string(), v.clone());
                }
            }
        }
        json!({ "strategy": strategy, self.meta_map(): meta })
    }

    /// Writes this part into an object (replacing what it held of the part).
    fn apply(self, obj: &mut Value, part: &Value) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            match part.get("strategy") {
                Some(Value::Null) | None => {
                    spec.remove(self.field());
                }
                Some(s) => {
                    spec.insert(self.field().to_string(), s.clone());
                }
            }
        }
        let wanted = part.get(self.meta_map()).and_then(Value::as_object);
        let keys = self.keys();
        set_meta_keys(obj, self.meta_map(), keys, wanted);
    }

    /// The forward conversion of this part (Kruise's rules).
    fn forward(self, dir: &Direction, part: &Value) -> Value {
        match (self, dir) {
            (Part::Update, Direction::ToBeta) => update_to_beta(part),
            (Part::Update, Direction::ToAlpha) => update_to_alpha(part),
            (Part::Scale, Direction::ToBeta) => scale_to_beta(part),
            (Part::Scale, Direction::ToAlpha) => scale_to_alpha(part),
        }
    }
}

impl Direction {
    fn reverse(&self) -> Direction {
        match self {
            Direction::ToBeta => Direction::ToAlpha,
            Direction::ToAlpha => Direction::ToBeta,
        }
    }
}

/// Sets exactly the given `keys` of `metadata.<map>` to `wanted` (absent there = removed). An emptied map goes.
fn set_meta_keys(obj: &mut Value, map: &str, keys: &[&str], wanted: Option<&Map<String, Value>>) {
    let current: Vec<(String, Option<Value>)> = keys
        .iter()
        .map(|k| {
            (
                k.to_string(),
                obj.pointer(&format!("/metadata/{map}/{}", escape(k))).cloned(),
            )
        })
        .collect();
    let desired: Vec<(String, Option<Value>)> = keys
        .iter()
        .map(|k| (k.to_string(), wanted.and_then(|w| w.get(*k)).cloned()))
        .collect();
    if current == desired {
        return;
    }
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let m = meta.entry(map.to_string()).or_insert_with(|| json!({}));
    let Some(m) = m.as_object_mut() else {
        return;
    };
    for (k, v) in desired {
        match v {
            Some(v) => {
                m.insert(k, v);
            }
            None => {
                m.remove(&k);
            }
        }
    }
    if m.is_empty() {
        meta.remove(map);
    }
}

/// JSON-pointer escaping of one segment.
fn escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn convert_with(obj: &Value, api_version: &str, dir: &Direction) -> Value {
    let mut out = obj.clone();
    let from = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kept = take_preserved(&mut out);
    let source = out.clone();
    out["apiVersion"] = json!(api_version);
    if !out.get("spec").is_some_and(Value::is_object) {
        // Nothing to convert (a malformed object is passed on for validation to report).
        return out;
    }
    let mut preserve = Map::new();
    for part in Part::ALL {
        let src = part.extract(&source);
        let candidate = kept
            .as_ref()
            .filter(|k| k.get("apiVersion").and_then(Value::as_str) == Some(api_version))
            .and_then(|k| k.get(part.name()));
        // A kept spelling is used only if it still stands for what the source says now.
        let converted = match candidate {
            Some(c) if part.forward(&dir.reverse(), c) == src => c.clone(),
            _ => part.forward(dir, &src),
        };
        part.apply(&mut out, &converted);
        if part.forward(&dir.reverse(), &converted) != src {
            preserve.insert(part.name().to_string(), src);
        }
    }
    if !preserve.is_empty() {
        preserve.insert("apiVersion".to_string(), json!(from));
        let text = Value::Object(preserve).to_string();
        if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
            let anns = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = anns.as_object_mut() {
                a.insert(PRESERVED_ANNOTATION.to_string(), json!(text));
            }
        }
    }
    out
}

/// Removes the preserved-fields annotation from `obj`, returning its parsed content.
fn take_preserved(obj: &mut Value) -> Option<Value> {
    let meta = obj.get_mut("metadata")?.as_object_mut()?;
    let anns = meta.get_mut("annotations")?.as_object_mut()?;
    let raw = anns.remove(PRESERVED_ANNOTATION)?;
    if anns.is_empty() {
        meta.remove("annotations");
    }
    raw.as_str().and_then(|s| serde_json::from_str(s).ok())
}

fn obj_of(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

fn str_of(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or_default()
}

/// Copies `keys` present in `from` into `to`, verbatim.
fn copy_keys(from: &Map<String, Value>, to: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(*k) {
            to.insert((*k).to_string(), v.clone());
        }
    }
}

/// The rolling-update fields v1alpha1 keeps in `updateStrategy` and v1beta1 under `updateStrategy.rollingUpdate`.
pub const ROLLING_FIELDS: [&str; 6] = [
    "partition",
    "maxUnavailable",
    "maxSurge",
    "paused",
    "priorityStrategy",
    "scatterStrategy",
];

/// Kruise `ConvertTo` for the update strategy (v1alpha1 → v1beta1).
fn update_to_beta(part: &Value) -> Value {
    let us = obj_of(part.get("strategy"));
    let anns = obj_of(part.get("annotations"));
    let mut out = Map::new();
    let alpha_type = str_of(us.get("type"));
    if alpha_type == "OnDelete" {
        out.insert("type".into(), json!("OnDelete"));
    } else {
        out.insert("type".into(), json!("RollingUpdate"));
        let policy = match alpha_type {
            "InPlaceIfPossible" | "InPlaceOnly" => alpha_type,
            _ => "ReCreate",
        };
        let mut ru = Map::new();
        copy_keys(&us, &mut ru, &ROLLING_FIELDS);
        ru.insert("podUpdatePolicy".into(), json!(policy));
        if let Some(ips) = in_place_to_beta(us.get("inPlaceUpdateStrategy"), &anns) {
            ru.insert("inPlaceUpdateStrategy".into(), ips);
        }
        out.insert("rollingUpdate".into(), Value::Object(ru));
    }
    // Kruise copies the object's metadata, so the pre-download annotations stay as they were.
    json!({ "strategy": out, "annotations": anns })
}

/// `convertInPlaceUpdateStrategyToV1beta1`: the grace period plus the pre-download annotations as fields.
fn in_place_to_beta(ips: Option<&Value>, anns: &Map<String, Value>) -> Option<Value> {
    let has_annotations = PREDOWNLOAD_KEYS.iter().any(|k| !str_of(anns.get(*k)).is_empty());
    if ips.is_none() && !has_annotations {
        return None;
    }
    let mut dst = Map::new();
    if let Some(g) = ips.and_then(|i| i.get("gracePeriodSeconds")) {
        dst.insert("gracePeriodSeconds".into(), g.clone());
    }
    let parallelism = str_of(anns.get(PREDOWNLOAD_PARALLELISM));
    if !parallelism.is_empty() {
        // intstr.Parse: an integer if it parses as one, else the string.
        let v = parallelism
            .parse::<i32>()
            .map_or_else(|_| json!(parallelism), |i| json!(i));
        dst.insert("imagePreDownloadParallelism".into(), v);
    }
    for (key, field) in [
        (PREDOWNLOAD_TIMEOUT_SECONDS, "imagePreDownloadTimeoutSeconds"),
        (
            PREDOWNLOAD_MIN_UPDATED_READY_PODS,
            "imagePreDownloadMinUpdatedReadyPods",
        ),
    ] {
        if let Ok(n) = str_of(anns.get(key)).parse::<i32>() {
            dst.insert(field.into(), json!(n));
        }
    }
    Some(Value::Object(dst))
}

/// Kruise `ConvertFrom` for the update strategy (v1beta1 → v1alpha1).
fn update_to_alpha(part: &Value) -> Value {
    let us = obj_of(part.get("strategy"));
    let mut anns = obj_of(part.get("annotations"));
    let ru = us.get("rollingUpdate").and_then(Value::as_object);
    let alpha_type = if str_of(us.get("type")) == "OnDelete" {
        "OnDelete"
    } else {
        let policy = ru.map_or("", |r| str_of(r.get("podUpdatePolicy")));
        if matches!(policy, "InPlaceIfPossible" | "InPlaceOnly") {
            policy
        } else {
            "ReCreate"
        }
    };
    let mut out = Map::new();
    out.insert("type".into(), json!(alpha_type));
    if let Some(ru) = ru {
        copy_keys(ru, &mut out, &ROLLING_FIELDS);
        if let Some(ips) = in_place_to_alpha(ru.get("inPlaceUpdateStrategy"), &mut anns) {
            out.insert("inPlaceUpdateStrategy".into(), ips);
        }
    }
    json!({ "strategy": out, "annotations": anns })
}

/// `convertInPlaceUpdateStrategyFromV1beta1`: the grace period stays, the pre-download fields become annotations;
/// a strategy with nothing set is dropped.
fn in_place_to_alpha(ips: Option<&Value>, anns: &mut Map<String, Value>) -> Option<Value> {
    let ips = ips?.as_object()?;
    let grace = ips.get("gracePeriodSeconds");
    let fields = [
        ("imagePreDownloadParallelism", PREDOWNLOAD_PARALLELISM),
        ("imagePreDownloadTimeoutSeconds", PREDOWNLOAD_TIMEOUT_SECONDS),
        (
            "imagePreDownloadMinUpdatedReadyPods",
            PREDOWNLOAD_MIN_UPDATED_READY_PODS,
        ),
    ];
    let has_content = grace.is_some_and(|g| g.as_i64() != Some(0))
        || fields
            .iter()
            .any(|(f, _)| ips.get(*f).is_some_and(|v| !v.is_null()));
    if !has_content {
        return None;
    }
    for (field, key) in fields {
        match ips.get(field) {
            Some(Value::String(s)) => {
                anns.insert(key.into(), json!(s));
            }
            Some(v @ Value::Number(_)) => {
                anns.insert(key.into(), json!(v.to_string()));
            }
            _ => {}
        }
    }
    let mut dst = Map::new();
    if let Some(g) = grace {
        dst.insert("gracePeriodSeconds".into(), g.clone());
    }
    Some(Value::Object(dst))
}

/// v1alpha1 → v1beta1 scale strategy: `enablePVCReuse = !disablePVCReuse` (always written, as the v1beta1 CRD
/// defaults it), `excludePreparingDelete` from the CloneSet label.
fn scale_to_beta(part: &Value) -> Value {
    let ss = obj_of(part.get("strategy"));
    let labels = obj_of(part.get("labels"));
    let mut out = Map::new();
    copy_keys(&ss, &mut out, &["podsToDelete", "maxUnavailable"]);
    let disable = ss
        .get("disablePVCReuse")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    out.insert("enablePVCReuse".into(), json!(!disable));
    if str_of(labels.get(keys::SCALING_EXCLUDE_PREPARING_DELETE_LABEL)) == "true" {
        out.insert("excludePreparingDelete".into(), json!(true));
    }
    json!({ "strategy": out, "labels": labels })
}

/// v1beta1 → v1alpha1 scale strategy: `disablePVCReuse` written only when true (Go `omitempty`);
/// `excludePreparingDelete: true` becomes the CloneSet label v1alpha1 reads it from. An empty strategy is dropped.
fn scale_to_alpha(part: &Value) -> Value {
    let ss = obj_of(part.get("strategy"));
    let mut labels = obj_of(part.get("labels"));
    let mut out = Map::new();
    copy_keys(&ss, &mut out, &["podsToDelete", "maxUnavailable"]);
    if !ss.get("enablePVCReuse").and_then(Value::as_bool).unwrap_or(false) {
        out.insert("disablePVCReuse".into(), json!(true));
    }
    if ss.get("excludePreparingDelete").and_then(Value::as_bool) == Some(true) {
        labels.insert(keys::SCALING_EXCLUDE_PREPARING_DELETE_LABEL.into(), json!("true"));
    }
    let strategy = if out.is_empty() {
        Value::Null
    } else {
        Value::Object(out)
    };
    json!({ "strategy": strategy, "labels": labels })
}
