//! One stored object version: its JSON (as served, or LZ4-compressed against its resource's dictionary) and the
//! small parsed index (namespace, name, labels, selectable fields) that lists, selectors and watches read.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

/// Extracts the selectable fields (`spec.nodeName`, `status.phase`, ...) of one object.
pub type FieldIndexer = fn(&Value) -> Vec<(&'static str, String)>;

/// The parsed facts about a stored object that selectors and watchers need.
#[derive(Debug, Default)]
pub struct ObjIndex {
    pub namespace: String,
    pub name: String,
    pub rv: u64,
    pub labels: BTreeMap<String, String>,
    /// Selectable field values, as the resource's [`FieldIndexer`] extracted them.
    pub fields: Fields,
    /// Whether the JSON nests deeper than a request worker's stack is trusted with (`deep::SHALLOW`): whatever
    /// parses or renders it runs on a deep stack (`deep::run`).
    pub deep: bool,
}

/// Selectable field values in one allocation: a million Events' eleven fields each would otherwise cost
/// a `String` apiece (~0.5 KB an Event). The names are shared by every object of a resource.
#[derive(Debug, Default)]
pub struct Fields {
    pub(super) names: Arc<[&'static str]>,
    /// The values in `names`' order, each ended by a NUL (which no JSON string value here contains
    /// unescaped; one that does is still found, as its own field's text up to the NUL).
    values: Box<str>,
}

impl Fields {
    /// Fields from an indexer's output, reusing `names` when they are the same.
    pub fn new(fields: Vec<(&'static str, String)>, names: Option<&Arc<[&'static str]>>) -> Self {
        let names = match names {
            Some(n) if n.len() == fields.len() && n.iter().zip(&fields).all(|(a, (b, _))| a == b) => {
                n.clone()
            }
            _ => fields.iter().map(|(k, _)| *k).collect(),
        };
        let mut values = String::with_capacity(fields.iter().map(|(_, v)| v.len() + 1).sum());
        for (_, v) in &fields {
            values.push_str(v);
            values.push('\0');
        }
        Self {
            names,
            values: values.into_boxed_str(),
        }
    }

    /// The value of field `label`, if the resource has it.
    pub fn get(&self, label: &str) -> Option<&str> {
        let i = self.names.iter().position(|n| *n == label)?;
        self.values.split('\0').nth(i)
    }
}

impl ObjIndex {
    /// The value of a selectable field; `metadata.name`/`metadata.namespace` always exist.
    pub fn field(&self, label: &str) -> Option<&str> {
        match label {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => Some(&self.namespace),
            _ => self.fields.get(label),
        }
    }
}

/// One stored object version: its JSON and index.
#[derive(Clone, Debug)]
pub struct Object {
    body: Body,
    pub index: Arc<ObjIndex>,
}

/// An object's JSON, as served or compressed.
#[derive(Clone, Debug)]
enum Body {
    Plain(Bytes),
    /// LZ4 block with the JSON's length prepended, compressed against `dict` (the resource's first object).
    Packed {
        data: Arc<[u8]>,
        dict: Arc<[u8]>,
    },
}

impl Object {
    /// An object of these JSON bytes.
    pub fn new(bytes: Bytes, index: Arc<ObjIndex>) -> Self {
        Self {
            body: Body::Plain(bytes),
            index,
        }
    }

    /// An object of `data`, the JSON LZ4-compressed against `dict` with its length prepended.
    pub(super) fn packed(data: Arc<[u8]>, dict: Arc<[u8]>, index: Arc<ObjIndex>) -> Self {
        Self {
            body: Body::Packed { data, dict },
            index,
        }
    }

    /// The JSON (decompressed, for a packed resource).
    pub fn bytes(&self) -> Bytes {
        match &self.body {
            Body::Plain(b) => b.clone(),
            // What the store compressed reads back.
            Body::Packed { data, dict } => Bytes::from(
                lz4_flex::block::decompress_size_prepended_with_dict(data, dict).unwrap_or_default(),
            ),
        }
    }

    /// Length of the JSON.
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Plain(b) => b.len(),
            Body::Packed { data, .. } => data
                .get(..4)
                .and_then(|h| <[u8; 4]>::try_from(h).ok())
                .map_or(0, |h| u32::from_le_bytes(h) as usize),
        }
    }

    /// Whether the JSON is empty (never, for a stored object).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes this version takes in memory (compressed, for a packed resource).
    pub fn stored_len(&self) -> usize {
        match &self.body {
            Body::Plain(b) => b.len(),
            Body::Packed { data, .. } => data.len(),
        }
    }

    /// Parses the stored JSON (always valid: the store serialized it, at most `deep::MAX_DEPTH` deep; a deep
    /// one must be parsed on a deep stack, see [`ObjIndex::deep`]).
    pub fn value(&self) -> Value {
        crate::deep::from_slice(&self.bytes()).unwrap_or(Value::Null)
    }
}
