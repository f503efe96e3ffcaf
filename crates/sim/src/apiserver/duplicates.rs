//! Duplicate fields in a request body or patch document, reported as kube-apiserver's strict decoders do:
//! sigs.k8s.io/json for JSON (`duplicate field "spec.replicas"`; a JSON patch's ops as `json patch duplicate
//! field "[0].value.a"`), yaml.v2 for YAML (`yaml: unmarshal errors: line 4: key "a" already set in map`).
//! serde_json keeps the last value silently; the apiserver rejects the body under `fieldValidation=Strict` and
//! warns under Warn (its default). Protobuf bodies have no duplicates to report.

use std::fmt;

use axum::http::Method;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::errors::quote;
use super::patch::PatchKind;

/// The strict decoder's messages for the fields a request repeats, in document order.
pub(super) fn in_request(method: &Method, content_type: &str, body: &[u8]) -> Vec<String> {
    let ct = content_type.to_ascii_lowercase();
    let json = |prefix: &str| -> Vec<String> {
        find(body)
            .iter()
            .map(|p| format!("{prefix}duplicate field {}", quote(p)))
            .collect()
    };
    if *method == Method::PATCH {
        return match PatchKind::from_content_type(&ct) {
            Some(PatchKind::Json) => json("json patch "),
            Some(PatchKind::Merge | PatchKind::Strategic) => json(""),
            Some(PatchKind::Apply) if serde_json::from_slice::<IgnoredAny>(body).is_err() => find_yaml(body),
            Some(PatchKind::Apply) => json(""),
            None => Vec::new(),
        };
    }
    if !matches!(*method, Method::POST | Method::PUT) || super::protobuf::is_protobuf(&ct) {
        return Vec::new();
    }
    if ct.contains("yaml") && serde_json::from_slice::<IgnoredAny>(body).is_err() {
        return find_yaml(body);
    }
    json("")
}

/// yaml.v2's strict error for the first repeated key of a YAML document (serde-saphyr stops at the first; the
/// document itself is read with the last value winning, as the non-strict decoder does).
fn find_yaml(body: &[u8]) -> Vec<String> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Vec::new();
    };
    let Err(e) = serde_saphyr::from_str::<Value>(text) else {
        return Vec::new();
    };
    let msg = e.to_string();
    let Some(rest) = msg.split("duplicate mapping key").nth(1) else {
        return Vec::new();
    };
    let key = rest
        .strip_prefix(": ")
        .and_then(|r| r.split(", set DuplicateKeyPolicy").next())
        .unwrap_or("");
    let line = e.location().map(|l| l.line()).unwrap_or(0);
    vec![format!(
        "yaml: unmarshal errors:\n  line {line}: key {} already set in map",
        quote(key)
    )]
}

/// The paths of the duplicated fields of a JSON document (`spec.replicas`, `spec.containers[0].image`), in
/// document order; empty when the body is not JSON (it then fails to parse elsewhere with the real error).
pub(super) fn find(body: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let seed = Walk {
        path: String::new(),
        found: &mut found,
    };
    if seed.deserialize(&mut de).is_err() {
        return Vec::new();
    }
    found
}

/// One JSON value at `path`; duplicates below it go to `found`.
struct Walk<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let item = Walk {
                path: format!("{}[{i}]", self.path),
                found: &mut *self.found,
            };
            if seq.next_element_seed(item)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Objects are small: a linear scan of the keys seen costs less than hashing them.
        let mut seen: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if seen.contains(&key) {
                self.found.push(path);
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            seen.push(key);
            map.next_value_seed(Walk {
                path,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_duplicates_in_document_order() {
        let body = br#"{"spec":{"replicas":1,"replicas":2,"template":{"spec":{"containers":[{"name":"a","image":"x","image":"y"}]}}},"metadata":{"labels":{"a":"1","a":"2"}}}"#;
        assert_eq!(
            find(body),
            vec![
                "spec.replicas",
                "spec.template.spec.containers[0].image",
                "metadata.labels.a"
            ]
        );
        assert!(find(br#"{"a":{"b":1},"c":{"b":2}}"#).is_empty());
        assert!(find(b"kind: Pod\nkind: Pod\n").is_empty());
    }

    #[test]
    fn messages_per_body_and_patch_type() {
        let body = br#"{"spec":{"replicas":1,"replicas":2}}"#;
        let want = vec![r#"duplicate field "spec.replicas""#.to_string()];
        assert_eq!(in_request(&Method::POST, "application/json", body), want);
        assert_eq!(
            in_request(&Method::PATCH, "application/merge-patch+json", body),
            want
        );
        let ops = br#"[{"op":"add","path":"/x","value":{"a":1,"a":2}}]"#;
        assert_eq!(
            in_request(&Method::PATCH, "application/json-patch+json", ops),
            vec![r#"json patch duplicate field "[0].value.a""#]
        );
        let yaml = b"kind: Pod\nspec:\n  replicas: 1\n  replicas: 2\n";
        assert_eq!(
            in_request(&Method::POST, "application/yaml", yaml),
            vec!["yaml: unmarshal errors:\n  line 4: key \"replicas\" already set in map"]
        );
        assert!(in_request(&Method::POST, "application/vnd.kubernetes.protobuf", body).is_empty());
        assert!(in_request(&Method::DELETE, "application/json", body).is_empty());
    }
}
