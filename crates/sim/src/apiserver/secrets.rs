//! core/v1 Secrets as kube-apiserver serves them: `data` is base64 (decoded into `[]byte`, so bad base64 is
//! the decoder's 400), `stringData` is merged into `data` on every write and never stored, `type` defaults to
//! `Opaque`, and `ValidateSecret`/`ValidateSecretUpdate` (key names, 1 MiB, per-type keys, immutability).

use base64::Engine;
use serde_json::{Map, Value, json};

use super::errors::{FieldErr, quote};

/// `TotalSecretSize`'s limit (`MaxSecretSize`, 1 MiB of decoded data).
const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// The strict JSON decoder's error for a `data` value that is not base64 (Go's `[]byte` decoding:
/// `illegal base64 data at input byte N`), if any.
pub(super) fn base64_error(obj: &Value) -> Option<String> {
    let data = obj.get("data")?.as_object()?;
    for v in data.values() {
        let Some(s) = v.as_str() else { continue };
        if let Err(e) = base64::engine::general_purpose::STANDARD.decode(s) {
            let at = match e {
                base64::DecodeError::InvalidByte(i, _) => i,
                base64::DecodeError::InvalidLastSymbol(i, _) => i,
                // A missing or misplaced padding: Go reports the offset where the input stopped making sense.
                _ => s.len().saturating_sub(s.len() % 4),
            };
            return Some(format!("illegal base64 data at input byte {at}"));
        }
    }
    None
}

/// The v1 → internal conversion: each `stringData` entry overwrites `data`'s (base64-encoded), `stringData`
/// goes; an empty `type` becomes `Opaque` (`SetDefaults_Secret`).
pub(super) fn stored_form(mut v: Value) -> Value {
    let Some(o) = v.as_object_mut() else { return v };
    if let Some(Value::Object(sd)) = o.remove("stringData") {
        let data = o.entry("data").or_insert_with(|| json!({}));
        if !data.is_object() {
            *data = json!({});
        }
        if let Some(d) = data.as_object_mut() {
            for (k, s) in sd {
                let text = s.as_str().unwrap_or_default();
                let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                d.insert(k, Value::String(encoded));
            }
        }
    }
    if o.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        o.insert("type".into(), json!("Opaque"));
    }
    v
}

fn data(obj: &Value) -> Map<String, Value> {
    obj.get("data")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn decoded_len(v: &Value) -> usize {
    let s = v.as_str().unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_or(s.len(), |b| b.len())
}

/// `IsConfigMapKey`: `[-._a-zA-Z0-9]+`, at most 253 characters, not `.` or `..`.
fn key_errors(key: &str) -> Option<String> {
    const MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        Some(MSG.to_string())
    } else if key.len() > 253 {
        Some("must be no more than 253 characters".to_string())
    } else if key == "." || key == ".." {
        Some(format!("must not be {}", quote(key)))
    } else {
        None
    }
}

/// `ValidateSecret` (the parts a client can hit: key names, size, the keys each well-known type requires).
pub(super) fn validate(obj: &Value) -> Vec<FieldErr> {
    let mut errs = Vec::new();
    let data = data(obj);
    let mut total = 0;
    for (k, v) in &data {
        if let Some(why) = key_errors(k) {
            errs.push(FieldErr::invalid(&format!("data[{k}]"), &quote(k), &why));
        }
        total += decoded_len(v);
    }
    if total > MAX_SECRET_SIZE {
        errs.push(FieldErr {
            field: "data".into(),
            reason: "FieldValueTooLong",
            message: format!("data: Too long: may not be more than {MAX_SECRET_SIZE} bytes"),
        });
    }
    let ty = obj.get("type").and_then(Value::as_str).unwrap_or("Opaque");
    let required: &[&str] = match ty {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        _ => &[],
    };
    for key in required {
        if !data.contains_key(*key) {
            errs.push(FieldErr::required(&format!("data[{key}]"), ""));
        }
    }
    errs
}

/// `ValidateSecretUpdate`: `type` never changes; once `immutable` is true, neither `data` nor `immutable` do.
pub(super) fn validate_update(new: &Value, old: &Value) -> Vec<FieldErr> {
    let mut errs = validate(new);
    const IMMUTABLE: &str = "field is immutable";
    if new.get("type") != old.get("type") {
        let ty = new.get("type").and_then(Value::as_str).unwrap_or_default();
        errs.push(FieldErr::invalid("type", &quote(ty), IMMUTABLE));
    }
    if old.get("immutable").and_then(Value::as_bool) == Some(true) {
        const WHEN: &str = "field is immutable when `immutable` is set";
        if new.get("immutable").and_then(Value::as_bool) != Some(true) {
            errs.push(FieldErr::forbidden("immutable", WHEN));
        }
        if data(new) != data(old) {
            errs.push(FieldErr::forbidden("data", WHEN));
        }
    }
    errs
}
