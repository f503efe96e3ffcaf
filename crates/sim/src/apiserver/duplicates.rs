//! Duplicate fields in a request body or patch document, reported as kube-apiserver's strict decoders do:
//! sigs.k8s.io/json for JSON (`duplicate field "spec.replicas"`; a JSON patch's ops as `json patch duplicate
//! field "[0].value.a"`), yaml.v2 for YAML (`yaml: unmarshal errors: line 4: key "a" already set in map`).
//! serde_json keeps the last value silently; the apiserver rejects the body under `fieldValidation=Strict` and
//! warns under Warn (its default). Protobuf bodies have no duplicates to report.

use std::fmt::{self, Write as _};

use axum::http::Method;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::errors::quote;
use super::patch::PatchKind;

/// The strict decoder's messages for the fields a request repeats, in document order; and the body of a JSON
/// create or update as parsed by the same pass (`None`: not such a body, or not JSON; the handler then parses it
/// and reports the real error).
pub(super) fn scan_request(method: &Method, content_type: &str, body: &[u8]) -> (Vec<String>, Option<Value>) {
    let ct = content_type.to_ascii_lowercase();
    if matches!(*method, Method::POST | Method::PUT)
        && ct.starts_with("application/json")
        && let Ok((value, paths)) = parse_json(body)
    {
        let messages = paths
            .iter()
            .map(|p| format!("duplicate field {}", quote(p)))
            .collect();
        return (messages, Some(value));
    }
    (scan_other(method, &ct, body), None)
}

fn scan_other(method: &Method, ct: &str, body: &[u8]) -> Vec<String> {
    let json = |prefix: &str| -> Vec<String> {
        find(body)
            .iter()
            .map(|p| format!("{prefix}duplicate field {}", quote(p)))
            .collect()
    };
    if *method == Method::PATCH {
        return match PatchKind::from_content_type(ct) {
            Some(PatchKind::Json) => json("json patch "),
            Some(PatchKind::Merge | PatchKind::Strategic) => json(""),
            Some(PatchKind::Apply) if crate::deep::from_slice::<IgnoredAny>(body).is_err() => find_yaml(body),
            Some(PatchKind::Apply) => json(""),
            None => Vec::new(),
        };
    }
    if !matches!(*method, Method::POST | Method::PUT) || super::protobuf::is_protobuf(ct) {
        return Vec::new();
    }
    if ct.contains("yaml") && crate::deep::from_slice::<IgnoredAny>(body).is_err() {
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
    parse_json(body).map(|(_, paths)| paths).unwrap_or_default()
}

/// Appends `.key` (or `key` at the top) to a field path being built.
pub(super) fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// Parses a JSON document into a `Value` exactly as `serde_json::from_slice` does (the last of repeated keys
/// wins) and, in the same pass, the repeated keys' paths (the strict decoder's duplicates): a create or update
/// body is read once, not once to store and once to check.
pub(super) fn parse_json(body: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    let (value, keys) = parse_keys(body, false)?;
    Ok((value, keys.into_iter().map(|k| k.path).collect()))
}

/// One key of a JSON document met by the strict decoder's walk.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Key {
    pub path: String,
    /// The key repeats an earlier one of its object (a `duplicate field`).
    pub repeated: bool,
}

/// Every key of a JSON document in document order, as the strict decoder meets them (keys inside a repeated
/// key's value are not walked): the order of its `unknown field` and `duplicate field` messages.
pub(super) fn key_order(body: &[u8]) -> Option<Vec<Key>> {
    parse_keys(body, true).ok().map(|(_, keys)| keys)
}

/// [`parse_json`]'s pass; with `every`, all keys are recorded, not only the repeated ones.
fn parse_keys(body: &[u8], every: bool) -> Result<(Value, Vec<Key>), serde_json::Error> {
    let mut found = Vec::new();
    let mut path = String::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    // Nested at most `deep::MAX_DEPTH` (checked at dispatch), and parsed on a deep stack past `deep::SHALLOW`.
    de.disable_recursion_limit();
    let value = Build {
        path: &mut path,
        found: Some(&mut found),
        every,
        merge: false,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((value, found))
}

/// A built-in kind's JSON body as its typed decoder reads it: Go's `encoding/json` (sigs.k8s.io/json) decodes a
/// repeated key into the value the first one filled, so repeated objects merge (a struct's fields, a map's keys),
/// a repeated array is decoded element by element over the first one's elements and cut to the new length, a
/// `null` empties an object or array and leaves a scalar as it was, and any other scalar replaces. A custom
/// resource's body (an unstructured map) keeps the last value, as [`parse_json`] does.
pub(super) fn parse_typed(body: &[u8]) -> Result<Value, serde_json::Error> {
    let mut path = String::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    de.disable_recursion_limit();
    let value = Build {
        path: &mut path,
        found: None,
        every: false,
        merge: true,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Decodes `new` over `old` as Go's decoder does into a typed value (see [`parse_typed`]). Iterative (the values
/// may nest up to `deep::MAX_DEPTH`), and linear in the size of `new`.
fn decode_over(old: &mut Value, new: Value) {
    let mut stack: Vec<(&mut Value, Value)> = vec![(old, new)];
    while let Some((target, new)) = stack.pop() {
        match (target, new) {
            (Value::Object(have), Value::Object(add)) => {
                let mut deeper = serde_json::Map::new();
                for (k, v) in add {
                    match have.get(&k) {
                        Some(existing) if is_container(existing) && is_container(&v) => {
                            deeper.insert(k, v);
                        }
                        Some(existing) if v.is_null() && !existing.is_array() => {}
                        _ => {
                            have.insert(k, v);
                        }
                    }
                }
                for (k, child) in have.iter_mut() {
                    if let Some(v) = deeper.remove(k) {
                        stack.push((child, v));
                    }
                }
            }
            (Value::Array(have), Value::Array(add)) => {
                have.truncate(add.len());
                let n = have.len();
                let mut add = add.into_iter();
                let over: Vec<Value> = add.by_ref().take(n).collect();
                have.extend(add);
                for (existing, v) in have.iter_mut().zip(over) {
                    if is_container(existing) && is_container(&v) {
                        stack.push((existing, v));
                    } else {
                        *existing = v;
                    }
                }
            }
            // `null` into a struct or a scalar leaves it; into a slice, empties it (most objects of the built-in
            // kinds are struct values: `metadata`, `spec`).
            (Value::Array(have), Value::Null) => *have = Vec::new(),
            (target, Value::Null) if !target.is_null() => {}
            (target, new) => *target = new,
        }
    }
}

fn is_container(v: &Value) -> bool {
    v.is_object() || v.is_array()
}

/// One JSON value at `path`, built; repeated keys below it (or, with `every`, all keys) go to `found` (`None`:
/// inside a repeated key's value, which the strict decoder skips).
struct Build<'a> {
    path: &'a mut String,
    found: Option<&'a mut Vec<Key>>,
    every: bool,
    /// Repeated keys decoded over the first one's value ([`parse_typed`]), not replacing it.
    merge: bool,
}

impl Build<'_> {
    fn child(&mut self, record: bool) -> Build<'_> {
        Build {
            path: &mut *self.path,
            found: if record { self.found.as_deref_mut() } else { None },
            every: self.every,
            merge: self.merge,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let base = self.path.len();
        let record = self.found.is_some();
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        loop {
            if record {
                let _ = write!(self.path, "[{}]", items.len());
            }
            let item = seq.next_element_seed(self.child(record));
            self.path.truncate(base);
            match item? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let base = self.path.len();
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let repeated = out.contains_key(&key);
            if let Some(found) = self.found.as_deref_mut() {
                push_key(self.path, &key);
                if repeated || self.every {
                    found.push(Key {
                        path: self.path.clone(),
                        repeated,
                    });
                }
            }
            let value = map.next_value_seed(self.child(!repeated));
            self.path.truncate(base);
            match out.get_mut(&key) {
                Some(old) if self.merge => decode_over(old, value?),
                _ => {
                    out.insert(key, value?);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_request(method: &Method, content_type: &str, body: &[u8]) -> Vec<String> {
        scan_request(method, content_type, body).0
    }

    #[test]
    fn typed_bodies_decode_repeated_keys_over_the_first_value_as_go() {
        let v = parse_typed(
            br#"{"data":{"a":"1"},"data":{"b":"2"},"n":1,"n":2,"s":"x","s":null,"l":[{"a":1,"b":2},{"c":3}],"l":[{"a":9}],"m":{"k":{"x":1}},"m":{"k":{"y":2}},"e":[1],"e":null}"#,
        )
        .expect("parse");
        assert_eq!(
            v,
            serde_json::json!({"data":{"a":"1","b":"2"},"n":2,"s":"x","l":[{"a":9,"b":2}],"m":{"k":{"x":1,"y":2}},"e":[]})
        );
        // Without repeated keys, what serde_json builds.
        let plain = br#"{"a":{"b":[1,{"c":null}]},"d":null}"#;
        assert_eq!(parse_typed(plain).ok(), serde_json::from_slice(plain).ok());
    }

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
    fn parse_json_builds_what_serde_json_builds_and_finds_what_find_finds() {
        let bodies: [&[u8]; 6] = [
            br#"{"spec":{"replicas":1,"replicas":2,"template":{"spec":{"containers":[{"name":"a","image":"x","image":"y"}]}}},"metadata":{"labels":{"a":"1","a":"2"}}}"#,
            br#"{"a":{"b":1,"b":{"c":1,"c":2}},"a":{"d":[1,2.5,-3,18446744073709551615,1.5e300]}}"#,
            br#"{"s":"esc\"aped\u00e9","k\"ey":null,"k\"ey":true,"n":-0.0,"e":[],"o":{}}"#,
            br#"[{"x":1,"x":2},[{"y":1,"y":1}]]"#,
            br#"  {"trailing": "space"}  "#,
            br#"17"#,
        ];
        for body in bodies {
            let (v, paths) = parse_json(body).expect("parses");
            let want: Value = serde_json::from_slice(body).expect("serde_json parses");
            assert_eq!(v, want, "{}", String::from_utf8_lossy(body));
            assert_eq!(paths, find(body), "{}", String::from_utf8_lossy(body));
        }
        for bad in [&b"{\"a\":1} x"[..], b"{\"a\":", b"", b"kind: Pod"] {
            assert!(parse_json(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn key_order_walks_every_key_as_the_strict_decoder_does() {
        let body = br#"{"b":1,"a":{"y":[{"k":1}],"x":2},"b":{"skipped":1}}"#;
        let keys = key_order(body).expect("json");
        let got: Vec<(&str, bool)> = keys.iter().map(|k| (k.path.as_str(), k.repeated)).collect();
        assert_eq!(
            got,
            vec![
                ("b", false),
                ("a", false),
                ("a.y", false),
                ("a.y[0].k", false),
                ("a.x", false),
                ("b", true)
            ]
        );
        assert!(key_order(b"{").is_none());
    }

    #[test]
    fn scan_request_parses_json_creates_and_updates_only() {
        let body = br#"{"spec":{"replicas":1,"replicas":2}}"#;
        let (msgs, parsed) = scan_request(&Method::PUT, "application/json", body);
        assert_eq!(msgs, vec![r#"duplicate field "spec.replicas""#.to_string()]);
        assert_eq!(parsed, serde_json::from_slice::<Value>(body).ok());
        let (msgs, parsed) = scan_request(&Method::PATCH, "application/merge-patch+json", body);
        assert_eq!(msgs.len(), 1);
        assert!(parsed.is_none());
        assert!(
            scan_request(&Method::POST, "application/yaml", b"kind: Pod\n")
                .1
                .is_none()
        );
        assert!(scan_request(&Method::POST, "application/json", b"{").1.is_none());
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
