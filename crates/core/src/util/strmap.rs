//! `StrMap`: a pod's labels or annotations in two allocations, and `Entries`, a read-only view of either form.
//!
//! In a `BTreeMap<String, String>` five labels cost a 640-byte tree node plus ten string allocations; over a
//! controller's 10,000 cached pods, labels and annotations were 24 MB of a 38 MB cache (a heap profile;
//! `docs/benchmarks.md`, "The controller's memory"). A packed pod keeps them as one text of keys and values
//! and their end offsets. Maps of a pod are small, so a linear scan finds a key as fast as the tree did.

use std::collections::BTreeMap;

/// A string map, in key order, as two allocations: the keys and values concatenated (`k0 v0 k1 v1 …`), and
/// where each ends in that text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrMap {
    text: Box<str>,
    ends: Box<[u32]>,
}

impl StrMap {
    /// `None` if the map's text is 4 GiB or more (kube-apiserver caps all annotations at 256 KiB).
    pub fn new(map: &BTreeMap<String, String>) -> Option<StrMap> {
        let mut text = String::with_capacity(map.iter().map(|(k, v)| k.len() + v.len()).sum());
        let mut ends = Vec::with_capacity(map.len() * 2);
        for (k, v) in map {
            for s in [k, v] {
                text.push_str(s);
                ends.push(u32::try_from(text.len()).ok()?);
            }
        }
        Some(StrMap {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|&(k, _)| k == key).map(|(_, v)| v)
    }

    /// The entries, in key order.
    pub fn iter(&self) -> StrMapIter<'_> {
        StrMapIter {
            map: self,
            next: 0,
            start: 0,
        }
    }

    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }
}

pub struct StrMapIter<'a> {
    map: &'a StrMap,
    /// Index into `ends` of the next key's end.
    next: usize,
    /// Where the next key starts in the text.
    start: usize,
}

impl<'a> Iterator for StrMapIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let ends = &self.map.ends;
        let (&key_end, &value_end) = (ends.get(self.next)?, ends.get(self.next + 1)?);
        let (key_end, value_end) = (key_end as usize, value_end as usize);
        // The offsets were taken after whole strings were pushed: always char boundaries in range.
        let key = self.map.text.get(self.start..key_end)?;
        let value = self.map.text.get(key_end..value_end)?;
        self.next += 2;
        self.start = value_end;
        Some((key, value))
    }
}

/// A pod's labels or annotations, read-only, from a whole pod (`ObjectMeta`'s map) or a packed one.
#[derive(Clone, Copy, Debug)]
pub enum Entries<'a> {
    Map(Option<&'a BTreeMap<String, String>>),
    Packed(Option<&'a StrMap>),
}

impl<'a> Entries<'a> {
    pub fn get(self, key: &str) -> Option<&'a str> {
        match self {
            Entries::Map(m) => m.and_then(|m| m.get(key)).map(String::as_str),
            Entries::Packed(m) => m.and_then(|m| m.get(key)),
        }
    }

    /// The entries in key order.
    pub fn iter(self) -> impl Iterator<Item = (&'a str, &'a str)> {
        let (map, packed) = match self {
            Entries::Map(m) => (m, None),
            Entries::Packed(m) => (None, m),
        };
        let map = map.into_iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()));
        map.chain(packed.into_iter().flat_map(StrMap::iter))
    }
}

impl<'a> From<&'a Option<BTreeMap<String, String>>> for Entries<'a> {
    fn from(m: &'a Option<BTreeMap<String, String>>) -> Self {
        Entries::Map(m.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_back_what_it_was_made_of() {
        let m = map(&[
            ("app", "web"),
            ("apps.kruise.io/cloneset-instance-id", "x7k2p"),
            ("empty", ""),
            ("", "empty key"),
            ("ünï", "cödé ✓"),
        ]);
        let s = StrMap::new(&m).unwrap();
        assert_eq!(s.iter().count(), 5);
        assert_eq!(s.to_map(), m);
        assert!(s.iter().eq(m.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
        assert_eq!(s.get("app"), Some("web"));
        assert_eq!(s.get("empty"), Some(""));
        assert_eq!(s.get(""), Some("empty key"));
        assert_eq!(s.get("ünï"), Some("cödé ✓"));
        assert_eq!(s.get("ap"), None);
        let empty = StrMap::new(&BTreeMap::new()).unwrap();
        assert_eq!(empty.iter().count(), 0);
    }

    #[test]
    fn both_forms_answer_alike() {
        let m = Some(map(&[("a", "1"), ("b", "2")]));
        let packed = m.as_ref().and_then(StrMap::new);
        let (whole, compact) = (Entries::from(&m), Entries::Packed(packed.as_ref()));
        for key in ["a", "b", "c"] {
            assert_eq!(whole.get(key), compact.get(key));
        }
        assert!(whole.iter().eq(compact.iter()));
        let none: Option<BTreeMap<String, String>> = None;
        assert_eq!(Entries::from(&none).get("a"), None);
        assert_eq!(Entries::Packed(None).iter().count(), 0);
    }
}
