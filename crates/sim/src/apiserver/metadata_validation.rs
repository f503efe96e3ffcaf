//! Object metadata validation every kind gets, as apimachinery's `ValidateObjectMeta`: label keys (qualified
//! names) and values (63 characters, the label regex), annotation keys and their 256 KiB total size; and, for
//! CloneSets, the embedded ObjectMeta's types (a label value sent as a JSON number does not decode).

use serde_json::Value;

use super::errors::{ApiError, FieldErr, quote};
use super::resources::ResourceType;

const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
pub(super) const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `TotalAnnotationSizeLimitB`: keys and values together.
pub const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// Label and annotation errors of `obj` (empty when valid).
pub(super) fn validate(obj: &Value) -> Vec<FieldErr> {
    let mut errs = Vec::new();
    let meta = obj.get("metadata");
    if let Some(labels) = meta.and_then(|m| m.get("labels")).and_then(Value::as_object) {
        for (k, v) in labels {
            for msg in label_key(k) {
                errs.push(FieldErr::invalid("metadata.labels", &quote(k), &msg));
            }
            let v = v.as_str().unwrap_or_default();
            if v.len() > 63 {
                // kube-apiserver 1.37 words this one in bytes (observed against it; keys still say characters).
                errs.push(FieldErr::invalid(
                    "metadata.labels",
                    &quote(v),
                    "must be no more than 63 bytes",
                ));
            }
            if !v.is_empty() && !key_name_ok(v) {
                errs.push(FieldErr::invalid("metadata.labels", &quote(v), LABEL_VALUE_MSG));
            }
        }
    }
    if let Some(ann) = meta.and_then(|m| m.get("annotations")).and_then(Value::as_object) {
        let mut total = 0usize;
        for (k, v) in ann {
            for msg in label_key(&k.to_ascii_lowercase()) {
                errs.push(FieldErr::invalid("metadata.annotations", &quote(k), &msg));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > ANNOTATIONS_LIMIT {
            errs.push(FieldErr {
                field: "metadata.annotations".into(),
                reason: "FieldValueTooLong",
                message: format!(
                    "metadata.annotations: Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"
                ),
            });
        }
    }
    if obj.get("kind").and_then(Value::as_str) == Some("ConfigMap") {
        errs.extend(configmap_size(obj));
    }
    errs
}

/// `ValidateConfigMap`: `data` and `binaryData` together at most 1 MiB (keys and values).
fn configmap_size(obj: &Value) -> Option<FieldErr> {
    const LIMIT: usize = 1024 * 1024;
    let mut total = 0usize;
    for field in ["data", "binaryData"] {
        if let Some(m) = obj.get(field).and_then(Value::as_object) {
            total += m
                .iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum::<usize>();
        }
    }
    (total > LIMIT).then(|| FieldErr {
        field: "[]".into(),
        reason: "FieldValueTooLong",
        message: format!("[]: Too long: may not be more than {LIMIT} bytes"),
    })
}

/// `IsQualifiedName`'s messages for a label (or lowercased annotation) key.
pub(super) fn label_key(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !subdomain_ok(prefix) {
                    errs.push(format!("prefix part {SUBDOMAIN_MSG}"));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a valid label key {LABEL_KEY_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !key_name_ok(name) {
        errs.push(format!("name part {LABEL_KEY_MSG}"));
    }
    errs
}

/// A non-empty label value's form (`IsValidLabelValue`'s regex).
pub(super) fn label_value_ok(s: &str) -> bool {
    key_name_ok(s)
}

/// Matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` (also the non-empty label value form).
fn key_name_ok(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

fn subdomain_ok(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.split('.').all(|p| {
        !p.is_empty() && p.starts_with(alnum) && p.ends_with(alnum) && p.chars().all(|c| alnum(c) || c == '-')
    })
}

/// A CloneSet's embedded ObjectMeta must decode: label and annotation values are strings (the CRD handler's
/// `objectmeta.Coerce` answers `metadata: Invalid value: ...: json: cannot unmarshal ...`).
pub(super) fn cloneset_meta_types(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some(meta) = obj.get("metadata") else {
        return Ok(());
    };
    for field in ["labels", "annotations"] {
        let Some(map) = meta.get(field).and_then(Value::as_object) else {
            continue;
        };
        if let Some(bad) = map.values().find(|v| !v.is_string() && !v.is_null()) {
            let kind = match bad {
                Value::Number(_) => "number",
                Value::Bool(_) => "bool",
                Value::Array(_) => "array",
                _ => "object",
            };
            let why = format!(
                "json: cannot unmarshal {kind} into Go struct field ObjectMeta.{field} of type string"
            );
            let e = FieldErr::invalid("metadata", &quote(&meta.to_string()), &why);
            return Err(ApiError::invalid(rt, name, &[e]));
        }
    }
    Ok(())
}

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

pub(super) fn name_errors(name: &str, label: bool) -> Vec<FieldErr> {
    name_errors_for("metadata.name", name, label)
}

/// `IsDNS1123Subdomain`'s errors for a name at `field` (a webhook's name).
pub(in crate::apiserver) fn name_errors_at(field: &str, name: &str) -> Vec<FieldErr> {
    name_errors_for(field, name, false)
}

fn name_errors_for(field: &str, name: &str, label: bool) -> Vec<FieldErr> {
    let max = if label { 63 } else { 253 };
    let mut errs = Vec::new();
    if name.len() > max {
        errs.push(FieldErr::invalid(
            field,
            &quote(name),
            &format!("must be no more than {max} characters"),
        ));
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok_chars = name.chars().all(|c| alnum(c) || c == '-' || (!label && c == '.'));
    let ends_ok = name.starts_with(alnum) && name.ends_with(alnum);
    let parts_ok = label
        || name
            .split('.')
            .all(|p| p.starts_with(alnum) && p.ends_with(alnum));
    if !(ok_chars && ends_ok && parts_ok) {
        errs.push(FieldErr::invalid(
            field,
            &quote(name),
            if label { LABEL_MSG } else { SUBDOMAIN_MSG },
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_and_annotations() {
        let long = "a".repeat(64);
        let obj = json!({"metadata": {"labels": {"ok": "v", "bad key!": "v", "k": long, "k2": "-x", "example.com/n": "1"},
                                      "annotations": {"big": "x".repeat(ANNOTATIONS_LIMIT)}}});
        let errs = validate(&obj);
        let msgs: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(errs.len(), 4, "{msgs:#?}");
        assert!(
            msgs[0].starts_with("metadata.labels: Invalid value: \"bad key!\": name part must consist of")
        );
        assert_eq!(
            msgs[1],
            format!("metadata.labels: Invalid value: \"{long}\": must be no more than 63 bytes")
        );
        assert!(
            msgs[2]
                .starts_with("metadata.labels: Invalid value: \"-x\": a valid label must be an empty string")
        );
        assert_eq!(
            msgs[3],
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
    }
}
