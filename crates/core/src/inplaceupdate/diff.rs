//! The template diff in the shape of the JSON-patch library Kruise uses, and the metadata patch it yields.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::InPlaceSpec;
use crate::util::gojson;

/// One RFC 6902 operation of the template diff (op, path).
#[derive(Debug)]
pub(crate) struct Op {
    pub(crate) op: &'static str,
    pub(crate) path: String,
}

fn esc(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

fn is_simple_array(a: &[Value]) -> bool {
    a.iter().all(|v| !matches!(v, Value::Array(_) | Value::Object(_)))
}

/// A JSON diff with the shape of gomodules/appscode `jsonpatch.CreatePatch` (the library Kruise uses):
/// objects key by key, arrays of objects element by element (extra → remove/add), type changes → replace.
pub(crate) fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<Op>) {
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            for (k, vb) in mb {
                let p = format!("{path}/{}", esc(k));
                match ma.get(k) {
                    None => out.push(Op { op: "add", path: p }),
                    Some(va) => diff(va, vb, &p, out),
                }
            }
            for k in ma.keys().filter(|k| !mb.contains_key(*k)) {
                out.push(Op {
                    op: "remove",
                    path: format!("{path}/{}", esc(k)),
                });
            }
        }
        (Value::Array(xa), Value::Array(xb)) => {
            if xa == xb {
                return;
            }
            if is_simple_array(xa) && is_simple_array(xb) {
                // Edit-distance ops in the library; any of them disqualifies a spec change, so one suffices.
                let op = if xa.len() == xb.len() {
                    "replace"
                } else if xa.len() < xb.len() {
                    "add"
                } else {
                    "remove"
                };
                out.push(Op {
                    op,
                    path: format!("{path}/0"),
                });
                return;
            }
            let n = xa.len().min(xb.len());
            for i in (n..xa.len()).rev() {
                out.push(Op {
                    op: "remove",
                    path: format!("{path}/{i}"),
                });
            }
            for i in n..xb.len() {
                out.push(Op {
                    op: "add",
                    path: format!("{path}/{i}"),
                });
            }
            for i in 0..n {
                diff(&xa[i], &xb[i], &format!("{path}/{i}"), out);
            }
        }
        (x, y) if x == y => {}
        _ => out.push(Op {
            op: "replace",
            path: path.to_string(),
        }),
    }
}

pub(super) fn container_image_index(path: &str) -> Option<usize> {
    let rest = path.strip_prefix("/spec/containers/")?;
    let (idx, tail) = rest.split_once('/')?;
    if tail != "image" || idx.is_empty() || !idx.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    idx.parse().ok()
}

pub(super) fn str_map(meta: Option<&Value>, key: &str) -> BTreeMap<String, String> {
    meta.and_then(|m| m.get(key))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn map_changes(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    for (k, v) in new {
        if old.get(k) != Some(v) {
            out.insert(k.clone(), Some(v.clone()));
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        out.insert(k.clone(), None);
    }
    out
}

/// Go bytes of the strategic-merge patch `{"metadata":{...}}` (sorted keys, `null` removes).
pub(super) fn meta_patch_json(spec: &InPlaceSpec, new_finalizers: &[String]) -> Option<String> {
    let mut meta = Map::new();
    let to_obj = |m: &BTreeMap<String, Option<String>>| -> Value {
        Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
                .collect(),
        )
    };
    if !spec.labels.is_empty() {
        meta.insert("labels".into(), to_obj(&spec.labels));
    }
    if !spec.annotations.is_empty() {
        meta.insert("annotations".into(), to_obj(&spec.annotations));
    }
    if !spec.finalizers.is_empty() {
        let strs =
            |it: Vec<&String>| Value::Array(it.into_iter().map(|s| Value::String(s.clone())).collect());
        let added: Vec<&String> = spec
            .finalizers
            .iter()
            .filter(|(_, a)| **a)
            .map(|(k, _)| k)
            .collect();
        let removed: Vec<&String> = spec
            .finalizers
            .iter()
            .filter(|(_, a)| !**a)
            .map(|(k, _)| k)
            .collect();
        if !added.is_empty() {
            meta.insert("finalizers".into(), strs(added));
        }
        if !removed.is_empty() {
            meta.insert("$deleteFromPrimitiveList/finalizers".into(), strs(removed));
        }
        meta.insert(
            "$setElementOrder/finalizers".into(),
            strs(new_finalizers.iter().collect()),
        );
    }
    if meta.is_empty() {
        return None;
    }
    let mut root = Map::new();
    root.insert("metadata".into(), Value::Object(meta));
    Some(gojson::marshal(&Value::Object(root)))
}
