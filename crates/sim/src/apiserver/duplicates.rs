//! Duplicate JSON fields in a request body, found as sigs.k8s.io/json's strict decoder reports them
//! (`duplicate field "spec.replicas"`): serde_json keeps the last value silently, kube-apiserver rejects the
//! body under `fieldValidation=Strict` and warns under Warn.

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

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
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.found.push(path);
                map.next_value::<IgnoredAny>()?;
                continue;
            }
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
    use super::find;

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
}
