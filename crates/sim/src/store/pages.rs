//! Paged lists (`limit` and `continue`): pages in key order, and the snapshots their continuations read.
//!
//! kube-apiserver returns a list in etcd key order (`<namespace>/<name>`, or `<name>` within one namespace or
//! for a cluster-scoped resource), at most `limit` matching objects per page, and a continue token naming
//! the first page's resourceVersion and the key to resume after. Every page of one list reads the state at
//! that resourceVersion (its watch cache keeps snapshots, etcd the revisions until compaction); a token
//! whose state is gone gets `410 Expired` with a token for the rest at the latest state instead.
//! Here a snapshot of the scope is taken when a first page leaves objects behind; it is dropped when its last
//! page is served, when the resource's watch history moves past it (as etcd compacts) or when
//! [`SNAPSHOTS_MAX`] newer ones exist. A continuation whose snapshot was dropped is still served while the
//! resource has not changed since (the state is the same), and is expired otherwise.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{Kind, ObjIndex, Object, Store};

/// How many list snapshots the store keeps (oldest dropped first). Each holds one reference per object
/// of its scope, so old object versions live as long as a snapshot that lists them.
pub(super) const SNAPSHOTS_MAX: usize = 8;

/// The state of one list scope at one resourceVersion, in key order.
pub(super) struct Snapshot {
    key: String,
    ns: Option<String>,
    rv: u64,
    items: Arc<[Object]>,
}

/// Where a continued list resumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The resourceVersion of the list's first page; `None` continues at the latest state (the token an
    /// expired continuation gets, `"rv":-1`).
    pub rv: Option<u64>,
    /// The first key to return (the last returned key and a NUL).
    pub start: String,
}

/// One page of a list.
#[derive(Debug)]
pub struct Page {
    pub items: Vec<Object>,
    /// The resourceVersion the page was read at.
    pub rv: u64,
    /// Set when objects remain after this page: where the next page starts.
    pub next: Option<Cursor>,
    /// Objects of the scope after this page, matching or not (kube-apiserver reports it only for a list
    /// without selectors, whose count it then knows exactly).
    pub remaining: u64,
}

/// A continuation whose state is gone: `start` continues at the latest state.
#[derive(Debug, PartialEq, Eq)]
pub struct Expired {
    pub start: String,
}

/// An object's key within a list: `<name>` in one namespace or for a cluster-scoped resource,
/// `<namespace>/<name>` across namespaces.
fn key_parts(index: &ObjIndex, scoped: bool) -> (&str, &str) {
    if scoped || index.namespace.is_empty() {
        ("", &index.name)
    } else {
        (&index.namespace, &index.name)
    }
}

/// Compares an object's key with `key` without building it.
fn cmp_key(o: &Object, scoped: bool, key: &str) -> Ordering {
    let (ns, name) = key_parts(&o.index, scoped);
    let sep: &[u8] = if ns.is_empty() { b"" } else { b"/" };
    ns.as_bytes()
        .iter()
        .chain(sep)
        .chain(name.as_bytes())
        .cmp(key.as_bytes().iter())
}

fn key_of(o: &Object, scoped: bool) -> String {
    match key_parts(&o.index, scoped) {
        ("", name) => name.to_string(),
        (ns, name) => format!("{ns}/{name}"),
    }
}

/// The scope's objects in key order: a namespace's by name; all namespaces by `<namespace>/`, then name
/// (not by namespace alone: `kube-system/` sorts before `kube/`, as '-' is below '/').
fn ordered<'a>(kind: &'a Kind, ns: Option<&str>) -> Box<dyn Iterator<Item = &'a Object> + 'a> {
    match ns {
        Some(ns) => match kind.objects.get(ns) {
            Some(bucket) => Box::new(bucket.values()),
            None => Box::new(std::iter::empty()),
        },
        None => {
            let mut spaces: Vec<_> = kind.objects.iter().collect();
            spaces.sort_by(|(a, _), (b, _)| {
                let slash = |s: &'a String| s.as_bytes().iter().chain(b"/");
                slash(a).cmp(slash(b))
            });
            Box::new(spaces.into_iter().flat_map(|(_, bucket)| bucket.values()))
        }
    }
}

/// Takes up to `limit` (0: all) matching objects; whether objects (matching or not) follow the last taken.
fn take<'a>(
    mut it: impl Iterator<Item = &'a Object>,
    filter: &impl Fn(&ObjIndex) -> bool,
    limit: usize,
) -> (Vec<Object>, bool) {
    let mut items = Vec::new();
    for o in it.by_ref() {
        if filter(&o.index) {
            items.push(o.clone());
            if limit > 0 && items.len() >= limit {
                return (items, it.next().is_some());
            }
        }
    }
    (items, false)
}

impl Store {
    /// One page of `limit` (0: all) objects of resource `key` in `ns` (`None`: all) that `filter` accepts:
    /// the first page at the latest state when `from` is `None`, else the page that `from` continues.
    pub fn list_page(
        &self,
        key: &str,
        ns: Option<&str>,
        filter: impl Fn(&ObjIndex) -> bool,
        limit: usize,
        from: Option<&Cursor>,
    ) -> Result<Page, Expired> {
        let mut g = self.lock();
        let current = g.rv;
        // etcd's compaction: a snapshot older than its resource's watch history is gone (its continuations
        // expire unless the resource is unchanged since), so snapshots pin no old objects for long.
        let inner = &mut *g;
        inner
            .snapshots
            .retain(|s| inner.kinds.get(&s.key).is_none_or(|k| s.rv >= k.floor));
        let rv = from.and_then(|c| c.rv).unwrap_or(current);
        let Some(kind) = g.kinds.get(key) else {
            return Ok(Page {
                items: Vec::new(),
                rv,
                next: None,
                remaining: 0,
            });
        };
        let scoped = ns.is_some();
        let start = from.map_or("", |c| c.start.as_str());
        let before_start = |o: &Object| cmp_key(o, scoped, start) == Ordering::Less;
        let kept = from.and_then(|_| {
            g.snapshots
                .iter()
                .find(|s| s.rv == rv && s.key == key && s.ns.as_deref() == ns)
                .map(|s| s.items.clone())
        });
        // (page, whether objects follow, objects from the start on, a snapshot to keep for the next page)
        let (items, more, from_start, new_snapshot) = match kept {
            Some(snapshot) => {
                let rest = &snapshot[snapshot.partition_point(before_start)..];
                let (items, more) = take(rest.iter(), &filter, limit);
                (items, more, rest.len(), None)
            }
            // A first page, or nothing in the resource changed since `rv`: the live objects are the state at
            // `rv`. A snapshot is taken only if a continuation will need it.
            None if from.is_none_or(|c| c.rv.is_none() || kind.changed <= rv) => {
                let live = ordered(kind, ns).skip_while(|o| before_start(o));
                let (items, more) = take(live, &filter, limit);
                if more {
                    let snapshot: Arc<[Object]> = ordered(kind, ns).cloned().collect();
                    let from_start = snapshot.len() - snapshot.partition_point(before_start);
                    (items, more, from_start, Some(snapshot))
                } else {
                    (items, more, 0, None)
                }
            }
            None => {
                return Err(Expired {
                    start: start.to_string(),
                });
            }
        };
        if let Some(snapshot) = new_snapshot {
            keep(&mut g.snapshots, key, ns, rv, snapshot);
        } else if !more && from.is_some() {
            // The list is complete: its snapshot is not needed again (a client reusing an earlier token is
            // served while the resource is unchanged, and expired otherwise, as after a compaction).
            g.snapshots
                .retain(|s| !(s.rv == rv && s.key == key && s.ns.as_deref() == ns));
        }
        let next = items.last().filter(|_| more).map(|o| Cursor {
            rv: Some(rv),
            start: format!("{}\0", key_of(o, scoped)),
        });
        Ok(Page {
            remaining: if more {
                from_start.saturating_sub(limit) as u64
            } else {
                0
            },
            items,
            rv,
            next,
        })
    }
}

fn keep(
    snapshots: &mut std::collections::VecDeque<Snapshot>,
    key: &str,
    ns: Option<&str>,
    rv: u64,
    items: Arc<[Object]>,
) {
    if snapshots.len() >= SNAPSHOTS_MAX {
        snapshots.pop_front();
    }
    snapshots.push_back(Snapshot {
        key: key.to_string(),
        ns: ns.map(str::to_string),
        rv,
        items,
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{StoreConfig, Write};

    fn put(store: &Store, ns: &str, name: &str, image: &str) {
        put_in(store, "pods", ns, name, image);
    }

    fn put_in(store: &Store, resource: &str, ns: &str, name: &str, image: &str) {
        let v = json!({"metadata": {"name": name, "namespace": ns}, "image": image});
        let _ = store.write::<crate::store::QuotaExceeded>(resource, ns, name, |_, _| Ok(Write::Put(v)));
    }

    /// Takes `n` paged lists of another resource, pushing older snapshots out.
    fn other_lists(store: &Store, n: usize) {
        for i in 0..n {
            put_in(store, "configmaps", "other", &format!("x{i}"), "v1");
            put_in(store, "configmaps", "other", &format!("y{i}"), "v1");
            let p = store.list_page("configmaps", Some("other"), |_| true, 1, None);
            assert!(p.is_ok_and(|p| p.next.is_some()));
        }
    }

    fn delete(store: &Store, ns: &str, name: &str) {
        let _ = store.write::<crate::store::QuotaExceeded>("pods", ns, name, |cur, _| {
            Ok(cur.map_or(Write::Keep, |c| Write::DeleteAs(c.value())))
        });
    }

    fn names(page: &Page) -> Vec<String> {
        page.items.iter().map(|o| key_of(o, false)).collect()
    }

    fn page(store: &Store, ns: Option<&str>, limit: usize, from: Option<&Cursor>) -> Page {
        store
            .list_page("pods", ns, |_| true, limit, from)
            .expect("served")
    }

    #[test]
    fn pages_follow_etcd_key_order_across_namespaces() {
        let store = Store::new(StoreConfig::default());
        for (ns, name) in [("kube", "b"), ("kube-system", "a"), ("a", "z"), ("kube", "a")] {
            put(&store, ns, name, "v1");
        }
        // "kube-system/" sorts before "kube/": '-' is below '/'.
        let all = page(&store, None, 0, None);
        assert_eq!(names(&all), ["a/z", "kube-system/a", "kube/a", "kube/b"]);
        assert!(all.next.is_none());
        let mut seen = Vec::new();
        let mut from = None;
        loop {
            let p = page(&store, None, 1, from.as_ref());
            seen.extend(names(&p));
            match p.next {
                Some(next) => from = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, names(&all));
    }

    #[test]
    fn continuations_read_the_first_pages_state() {
        let store = Store::new(StoreConfig::default());
        for name in ["a", "b", "c", "d", "e"] {
            put(&store, "default", name, "v1");
        }
        let first = page(&store, Some("default"), 2, None);
        assert_eq!(names(&first), ["default/a", "default/b"]);
        assert_eq!(first.remaining, 3);
        let next = first.next.clone().expect("more");
        assert_eq!(next.start, "b\0");
        // Writes after the first page are not seen by its continuations.
        put(&store, "default", "c", "v2");
        delete(&store, "default", "d");
        put(&store, "default", "bb", "v1");
        let second = page(&store, Some("default"), 2, Some(&next));
        assert_eq!(names(&second), ["default/c", "default/d"]);
        assert_eq!(second.items[0].value()["image"], "v1");
        assert_eq!((second.rv, second.remaining), (first.rv, 1));
        let third = page(&store, Some("default"), 2, second.next.as_ref());
        assert_eq!(names(&third), ["default/e"]);
        assert!(third.next.is_none());
        // A fresh list sees the writes.
        let now = page(&store, Some("default"), 0, None);
        assert_eq!(
            names(&now),
            ["default/a", "default/b", "default/bb", "default/c", "default/e"]
        );
        assert!(now.rv > first.rv);
    }

    #[test]
    fn a_page_with_selectors_ends_where_its_limit_does() {
        let store = Store::new(StoreConfig::default());
        for name in ["a", "b", "c", "d"] {
            put(&store, "default", name, "v1");
        }
        let odd = |idx: &ObjIndex| idx.name == "a" || idx.name == "c";
        let p = store
            .list_page("pods", Some("default"), odd, 2, None)
            .expect("served");
        // Two matches fill the page; "d" follows, so a (possibly empty) next page is offered, as
        // kube-apiserver does when objects remain unfiltered.
        assert_eq!(names(&p), ["default/a", "default/c"]);
        let next = p.next.expect("objects remain");
        let last = store
            .list_page("pods", Some("default"), odd, 2, Some(&next))
            .expect("served");
        assert!(last.items.is_empty() && last.next.is_none());
        // Fewer matches than the limit: one page.
        let p = store
            .list_page("pods", Some("default"), odd, 3, None)
            .expect("served");
        assert_eq!((p.items.len(), p.next.is_none()), (2, true));
    }

    #[test]
    fn a_dropped_snapshot_expires_its_continuations_once_the_resource_changed() {
        let store = Store::new(StoreConfig::default());
        for name in ["a", "b", "c"] {
            put(&store, "default", name, "v1");
        }
        let first = page(&store, Some("default"), 1, None);
        let next = first.next.expect("more");
        // Newer paged lists push the first one's snapshot out; pods did not change since: the live state
        // is the first page's.
        other_lists(&store, SNAPSHOTS_MAX);
        let second = page(&store, Some("default"), 1, Some(&next));
        assert_eq!(
            (names(&second), second.rv),
            (vec!["default/b".to_string()], first.rv)
        );
        // Once a pod changed, the state at the first page's resourceVersion is gone.
        other_lists(&store, SNAPSHOTS_MAX);
        put(&store, "default", "a", "v2");
        let gone = store.list_page("pods", Some("default"), |_| true, 1, Some(&next));
        assert_eq!(gone.err(), Some(Expired { start: "a\0".into() }));
        // The token an expired continuation gets reads the latest state from the same key.
        let latest = Cursor {
            rv: None,
            start: "a\0".into(),
        };
        let p = page(&store, Some("default"), 1, Some(&latest));
        assert_eq!(names(&p), ["default/b"]);
        assert_eq!(p.rv, store.current_rv());
    }

    #[test]
    fn snapshots_go_with_the_last_page_and_with_compacted_history() {
        let store = Store::new(StoreConfig {
            history_capacity: 4,
            ..StoreConfig::default()
        });
        for name in ["a", "b", "c"] {
            put(&store, "default", name, "v1");
        }
        // Paged to the end: the snapshot goes; the first token, reused after a change, is expired.
        let first = page(&store, Some("default"), 2, None);
        let token = first.next.expect("more");
        assert!(page(&store, Some("default"), 2, Some(&token)).next.is_none());
        put(&store, "default", "c", "v2");
        let reused = store.list_page("pods", Some("default"), |_| true, 2, Some(&token));
        assert_eq!(reused.err(), Some(Expired { start: "b\0".into() }));
        // A list left half-read is expired once the resource's history has moved past it.
        let half = page(&store, Some("default"), 1, None);
        let token = half.next.expect("more");
        assert_eq!(page(&store, Some("default"), 1, Some(&token)).rv, half.rv);
        // History holds 4 events: after 5 writes the list's own resourceVersion is evicted too.
        for i in 0..5 {
            put(&store, "default", "a", &format!("v{i}"));
        }
        let gone = store.list_page("pods", Some("default"), |_| true, 1, Some(&token));
        assert_eq!(gone.err(), Some(Expired { start: "a\0".into() }));
    }
}
