//! Object store: versioned JSON objects, a global resourceVersion and per-resource watch history.
//!
//! Objects are kept serialized (`Bytes`) next to a small parsed index (namespace, name, labels and the
//! selectable fields), so lists and watch fan-out are memcpy-cheap and 100k pods fit comfortably. Resources
//! registered as packed (Events: many, alike, rarely read) keep their JSON LZ4-compressed against a
//! dictionary of the resource's first unlike objects, as etcd's storage costs a real apiserver nothing of its
//! own memory.
//! All writes go through [`Store::write`], which runs a caller's closure under the store lock, assigns the
//! next resourceVersion, appends to the resource's bounded history and broadcasts the event.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

mod object;
mod pages;
pub use object::{FieldIndexer, Fields, ObjIndex, Object};
pub use pages::{Cursor, Expired, Page};

/// Watch event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// The wire name (`ADDED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// A change to one object, as recorded in history and broadcast to watchers.
#[derive(Debug)]
pub struct Event {
    pub kind: EventType,
    pub rv: u64,
    /// The new state (for `Deleted`: the last state, carrying the deletion's resourceVersion).
    pub object: Object,
    /// The index of the previous state, for `Modified` (lets watchers with selectors compute transitions).
    pub prev: Option<Arc<ObjIndex>>,
}

/// What a write closure wants done.
pub enum Write {
    /// Store this object (create or replace). The store sets `metadata.resourceVersion`.
    Put(Value),
    /// Remove the object.
    Delete,
    /// Remove the object, recording this value as its last state (e.g. with `deletionTimestamp` set).
    DeleteAs(Value),
    /// Change nothing.
    Keep,
}

/// What a write did.
#[derive(Clone, Debug)]
pub enum Written {
    Created(Object),
    Updated(Object),
    Deleted(Object),
    /// Nothing changed; the current object, if any.
    Unchanged(Option<Object>),
}

impl Written {
    /// The resulting (or last, for deletes) object.
    pub fn object(&self) -> Option<&Object> {
        match self {
            Written::Created(o) | Written::Updated(o) | Written::Deleted(o) => Some(o),
            Written::Unchanged(o) => o.as_ref(),
        }
    }
}

/// A watch start refused because the requested resourceVersion has left the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooOld {
    pub requested: u64,
    /// The oldest resourceVersion a watch may still start from.
    pub oldest: u64,
}

/// A write refused because it would take the stored objects past [`StoreConfig::quota_bytes`], as etcd refuses
/// a write past its `--quota-backend-bytes` (`mvcc: database space exceeded`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaExceeded;

/// Where a watch starts.
pub enum WatchFrom {
    /// Snapshot of the current objects (sent as ADDED), then live events.
    Snapshot,
    /// Replay events after this resourceVersion, then live events.
    After(u64),
}

/// A started watch: what to send first, and the live feed.
pub struct WatchStart {
    /// Current objects (for [`WatchFrom::Snapshot`]), sorted by namespace then name.
    pub snapshot: Vec<Object>,
    /// Replayed history (for [`WatchFrom::After`]).
    pub replay: Vec<Arc<Event>>,
    pub rx: broadcast::Receiver<Arc<Event>>,
    /// The global resourceVersion when the watch started.
    pub rv: u64,
}

/// Store tuning.
#[derive(Clone, Copy, Debug)]
pub struct StoreConfig {
    /// Events kept per resource for watch resumption (at most).
    pub history_capacity: usize,
    /// Bytes of serialized (JSON, uncompressed: the same depth whether a resource is packed) objects kept per
    /// resource's history (at most; the newest event always stays). Like
    /// kube-apiserver's watch cache, a watch from a resourceVersion older than what is kept gets 410 Gone and
    /// the client relists; a byte bound keeps a 100k-pod cluster's history from outgrowing its objects.
    pub history_bytes: usize,
    /// Per-resource broadcast buffer; a watcher lagging further behind is disconnected.
    pub watch_buffer: usize,
    /// The most bytes of JSON the current objects of all resources may take together (`None`: no bound), as
    /// etcd's backend quota bounds a real cluster's: a create or a growing update past it is refused with
    /// [`QuotaExceeded`]. Unlike etcd, which raises an alarm that refuses every later write until an operator
    /// defragments and disarms it, writes go through again once deletes have made room (there is no operator
    /// to disarm an alarm); deletes and updates that do not grow are never refused.
    pub quota_bytes: Option<usize>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            history_capacity: 100_000,
            history_bytes: 64 << 20,
            watch_buffer: 8192,
            quota_bytes: None,
        }
    }
}

struct Kind {
    /// namespace ("" for cluster-scoped) → name → object.
    objects: BTreeMap<String, BTreeMap<String, Object>>,
    count: usize,
    history: VecDeque<Arc<Event>>,
    /// Bytes the objects in `history` take (compressed, for a packed resource).
    history_size: usize,
    /// Highest resourceVersion evicted from `history` (0: nothing evicted yet).
    floor: u64,
    /// The resourceVersion of the resource's last write (0: none yet).
    changed: u64,
    tx: broadcast::Sender<Arc<Event>>,
    indexer: FieldIndexer,
    /// The field names of this resource's objects (shared by their indexes).
    field_names: Option<Arc<[&'static str]>>,
    /// Whether objects are kept compressed (`Store::register_packed`).
    packed: bool,
    /// Objects stored that are [`ObjIndex::deep`].
    deep: usize,
    /// What a packed resource's objects are compressed against: its first objects' JSON (`grow_dict`).
    dict: Option<Arc<[u8]>>,
}

/// The most a packed resource's dictionary grows to. LZ4 reads the whole dictionary into its match table on
/// every compression, so a larger one costs CPU on each write for a little less memory.
const DICT_MAX: usize = 8 * 1024;

/// The dictionary after an object that compressed to `packed` bytes of `json`: an object that found less
/// than half of itself in it (another component's or reason's events: a shape not seen yet) is appended,
/// while there is room. Objects keep the dictionary they were compressed against, so it can change.
/// At 100k pods the kubelets' events took 625 bytes each against the first event alone (~240 MB).
fn grow_dict(dict: &Arc<[u8]>, json: &[u8], packed: usize) -> Option<Arc<[u8]>> {
    (packed * 2 > json.len() && dict.len() + json.len() <= DICT_MAX).then(|| {
        let mut grown = Vec::with_capacity(dict.len() + json.len());
        grown.extend_from_slice(dict);
        grown.extend_from_slice(json);
        Arc::from(grown)
    })
}

struct Inner {
    rv: u64,
    /// Bytes of JSON of all current objects (what [`StoreConfig::quota_bytes`] bounds).
    stored: usize,
    kinds: HashMap<String, Kind>,
    /// The newest paged lists' states, for their continuations (`pages`).
    snapshots: VecDeque<pages::Snapshot>,
}

/// The versioned object store shared by every resource.
pub struct Store {
    inner: Mutex<Inner>,
    config: StoreConfig,
}

fn no_fields(_: &Value) -> Vec<(&'static str, String)> {
    Vec::new()
}

impl Store {
    /// An empty store.
    pub fn new(config: StoreConfig) -> Self {
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                stored: 0,
                kinds: HashMap::new(),
                snapshots: VecDeque::new(),
            }),
            config,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn new_kind(&self, indexer: FieldIndexer) -> Kind {
        let (tx, _) = broadcast::channel(self.config.watch_buffer.max(16));
        Kind {
            objects: BTreeMap::new(),
            count: 0,
            history: VecDeque::new(),
            history_size: 0,
            floor: 0,
            changed: 0,
            tx,
            indexer,
            field_names: None,
            packed: false,
            deep: 0,
            dict: None,
        }
    }

    /// Registers a resource (by key) with its field indexer. Unregistered keys are created on first use.
    pub fn register(&self, key: &str, indexer: FieldIndexer) {
        let mut g = self.lock();
        if !g.kinds.contains_key(key) {
            let kind = self.new_kind(indexer);
            g.kinds.insert(key.to_string(), kind);
        }
    }

    /// Registers a resource whose objects are kept compressed: for many similar objects rarely read back
    /// (Events), at the price of a decompression per read.
    pub fn register_packed(&self, key: &str, indexer: FieldIndexer) {
        self.register(key, indexer);
        if let Some(kind) = self.lock().kinds.get_mut(key) {
            kind.packed = true;
        }
    }

    /// Starts the resourceVersion sequence at `rv` (before any write): the registered resources' histories
    /// begin there, so a watch from an earlier resourceVersion (another run's) is refused as too old.
    pub fn start_at(&self, rv: u64) {
        let mut g = self.lock();
        if rv > g.rv {
            g.rv = rv;
            for kind in g.kinds.values_mut() {
                kind.floor = kind.floor.max(rv);
            }
        }
    }

    /// The current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// One object.
    pub fn get(&self, key: &str, ns: &str, name: &str) -> Option<Object> {
        let g = self.lock();
        g.kinds.get(key)?.objects.get(ns)?.get(name).cloned()
    }

    /// Objects of a resource (in one namespace, or all), sorted by namespace then name, filtered by index,
    /// plus the global resourceVersion of the snapshot.
    pub fn list(
        &self,
        key: &str,
        ns: Option<&str>,
        filter: impl Fn(&ObjIndex) -> bool,
    ) -> (Vec<Object>, u64) {
        let g = self.lock();
        let rv = g.rv;
        let Some(kind) = g.kinds.get(key) else {
            return (Vec::new(), rv);
        };
        (collect(kind, ns, &filter), rv)
    }

    /// Whether any stored object of a resource is [`ObjIndex::deep`] (requests for it then run on a deep stack).
    pub fn holds_deep(&self, key: &str) -> bool {
        self.lock().kinds.get(key).is_some_and(|k| k.deep > 0)
    }

    /// Bytes of JSON the current objects take together (what [`StoreConfig::quota_bytes`] bounds).
    pub fn stored_bytes(&self) -> usize {
        self.lock().stored
    }

    /// Object counts per resource key.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        self.lock()
            .kinds
            .iter()
            .map(|(k, v)| (k.clone(), v.count))
            .collect()
    }

    /// Atomically reads the current object, lets `f` decide, and applies the decision.
    /// `f` gets the current object and the resourceVersion the write will get. It runs under the store
    /// lock, so it must not call back into the store (the lock is not re-entrant).
    /// A `Put` past [`StoreConfig::quota_bytes`] fails with [`QuotaExceeded`].
    pub fn write<E: From<QuotaExceeded>>(
        &self,
        key: &str,
        ns: &str,
        name: &str,
        f: impl FnOnce(Option<&Object>, u64) -> Result<Write, E>,
    ) -> Result<Written, E> {
        let mut g = self.lock();
        let next_rv = g.rv + 1;
        let stored = g.stored;
        if !g.kinds.contains_key(key) {
            let kind = self.new_kind(no_fields);
            g.kinds.insert(key.to_string(), kind);
        }
        let Some(kind) = g.kinds.get_mut(key) else {
            return Ok(Written::Unchanged(None));
        };
        let current = kind.objects.get(ns).and_then(|m| m.get(name)).cloned();
        let was_deep = current.as_ref().is_some_and(|c| c.index.deep);
        let old_len = current.as_ref().map_or(0, Object::len);
        let decision = match f(current.as_ref(), next_rv)? {
            Write::Delete => match &current {
                Some(c) => Write::DeleteAs(c.value()),
                None => return Ok(Written::Unchanged(None)),
            },
            other => other,
        };
        let (event_kind, object, prev) = match decision {
            Write::Keep | Write::Delete => return Ok(Written::Unchanged(current)),
            Write::Put(mut value) => {
                set_rv(&mut value, next_rv);
                let object = make_object(&value, ns, name, next_rv, kind);
                let grown = stored - old_len + object.len();
                if object.len() > old_len && self.config.quota_bytes.is_some_and(|q| grown > q) {
                    return Err(QuotaExceeded.into());
                }
                kind.deep = kind.deep + usize::from(object.index.deep) - usize::from(was_deep);
                let bucket = kind.objects.entry(ns.to_string()).or_default();
                bucket.insert(name.to_string(), object.clone());
                match current {
                    Some(prev) => (EventType::Modified, object, Some(prev.index)),
                    None => {
                        kind.count += 1;
                        (EventType::Added, object, None)
                    }
                }
            }
            Write::DeleteAs(mut value) => {
                if current.is_none() {
                    return Ok(Written::Unchanged(None));
                }
                if let Some(bucket) = kind.objects.get_mut(ns) {
                    bucket.remove(name);
                    if bucket.is_empty() {
                        kind.objects.remove(ns);
                    }
                }
                kind.count = kind.count.saturating_sub(1);
                kind.deep -= usize::from(was_deep);
                set_rv(&mut value, next_rv);
                let object = make_object(&value, ns, name, next_rv, kind);
                (EventType::Deleted, object, None)
            }
        };
        g.rv = next_rv;
        g.stored = match event_kind {
            EventType::Deleted => stored - old_len,
            _ => stored - old_len + object.len(),
        };
        let cap = self.config.history_capacity.max(1);
        let Some(kind) = g.kinds.get_mut(key) else {
            return Ok(Written::Unchanged(None));
        };
        let event = Arc::new(Event {
            kind: event_kind,
            rv: next_rv,
            object: object.clone(),
            prev,
        });
        kind.changed = next_rv;
        kind.history_size += event.object.len();
        kind.history.push_back(event.clone());
        let max_bytes = self.config.history_bytes;
        while kind.history.len() > cap || (kind.history_size > max_bytes && kind.history.len() > 1) {
            if let Some(old) = kind.history.pop_front() {
                kind.floor = old.rv;
                kind.history_size -= old.object.len();
            }
        }
        // No receivers is fine; a full buffer makes laggards see `Lagged` on their next recv.
        let _ = kind.tx.send(event);
        Ok(match event_kind {
            EventType::Added => Written::Created(object),
            EventType::Modified => Written::Updated(object),
            EventType::Deleted => Written::Deleted(object),
        })
    }

    /// Starts a watch atomically with respect to writes: nothing is missed or duplicated.
    pub fn watch(
        &self,
        key: &str,
        ns: Option<&str>,
        from: WatchFrom,
        filter: impl Fn(&ObjIndex) -> bool,
    ) -> Result<WatchStart, TooOld> {
        let mut g = self.lock();
        let rv = g.rv;
        if !g.kinds.contains_key(key) {
            let kind = self.new_kind(no_fields);
            g.kinds.insert(key.to_string(), kind);
        }
        let Some(kind) = g.kinds.get(key) else {
            let (_tx, rx) = broadcast::channel(1);
            return Ok(WatchStart {
                snapshot: Vec::new(),
                replay: Vec::new(),
                rx,
                rv,
            });
        };
        match from {
            WatchFrom::Snapshot => {
                let snapshot = collect(kind, ns, &filter);
                Ok(WatchStart {
                    snapshot,
                    replay: Vec::new(),
                    rx: kind.tx.subscribe(),
                    rv,
                })
            }
            WatchFrom::After(after) => {
                if after < kind.floor {
                    return Err(TooOld {
                        requested: after,
                        oldest: kind.floor,
                    });
                }
                let start = kind.history.partition_point(|e| e.rv <= after);
                let replay = kind.history.range(start..).cloned().collect();
                Ok(WatchStart {
                    snapshot: Vec::new(),
                    replay,
                    rx: kind.tx.subscribe(),
                    rv,
                })
            }
        }
    }
}

fn collect(kind: &Kind, ns: Option<&str>, filter: &impl Fn(&ObjIndex) -> bool) -> Vec<Object> {
    let mut out = Vec::new();
    let mut take = |bucket: &BTreeMap<String, Object>| {
        out.extend(bucket.values().filter(|o| filter(&o.index)).cloned());
    };
    match ns {
        Some(ns) => {
            if let Some(bucket) = kind.objects.get(ns) {
                take(bucket);
            }
        }
        None => kind.objects.values().for_each(&mut take),
    }
    out
}

fn set_rv(value: &mut Value, rv: u64) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

fn make_object(value: &Value, ns: &str, name: &str, rv: u64, kind: &mut Kind) -> Object {
    let labels = value
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let json = serde_json::to_vec(value).unwrap_or_default();
    let index = ObjIndex {
        namespace: ns.to_string(),
        name: name.to_string(),
        rv,
        labels,
        fields: Fields::new((kind.indexer)(value), kind.field_names.as_ref()),
        // Packed kinds (pods, Events) are typed all the way down: only free-form fields (a CloneSet's template,
        // a revision's data, a CRD's schema) nest deeper, so only unpacked objects are scanned.
        deep: !kind.packed && crate::deep::nesting(&json) > crate::deep::SHALLOW,
    };
    if kind
        .field_names
        .as_ref()
        .is_none_or(|n| !Arc::ptr_eq(n, &index.fields.names))
    {
        kind.field_names = Some(index.fields.names.clone());
    }
    if kind.packed {
        let dict = kind
            .dict
            .get_or_insert_with(|| Arc::from(json.as_slice()))
            .clone();
        let data = lz4_flex::block::compress_prepend_size_with_dict(&json, &dict);
        if let Some(grown) = grow_dict(&dict, &json, data.len()) {
            kind.dict = Some(grown);
        }
        Object::packed(Arc::from(data), dict, Arc::new(index))
    } else {
        Object::new(Bytes::from(json), Arc::new(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(store: &Store, name: &str) -> Written {
        store
            .write::<QuotaExceeded>("pods", "default", name, |_, _| {
                Ok(Write::Put(json!({"metadata": {"name": name}})))
            })
            .unwrap_or(Written::Unchanged(None))
    }

    #[test]
    fn history_bounded_by_bytes() {
        // Objects of one-letter names serialize to the same size; the bound has room for two of them.
        let one = put(&Store::new(StoreConfig::default()), "a")
            .object()
            .map_or(0, Object::len);
        let store = Store::new(StoreConfig {
            history_bytes: 2 * one + one / 2,
            ..StoreConfig::default()
        });
        for n in ["a", "b", "c", "d"] {
            put(&store, n);
        }
        // rvs 2..5; the byte bound keeps the last two (4, 5): a watch from 2 is too old, from 3 replays 2.
        let too_old = store.watch("pods", None, WatchFrom::After(2), |_| true).err();
        assert_eq!(too_old.map(|e| e.oldest), Some(3));
        let w = store.watch("pods", None, WatchFrom::After(3), |_| true).ok();
        assert_eq!(w.map(|w| w.replay.len()), Some(2));
        // A single event larger than the bound is still kept (the newest always is).
        let tiny = Store::new(StoreConfig {
            history_bytes: 1,
            ..StoreConfig::default()
        });
        put(&tiny, "a");
        put(&tiny, "b");
        let w = tiny.watch("pods", None, WatchFrom::After(2), |_| true).ok();
        assert_eq!(w.map(|w| w.replay.len()), Some(1));
    }

    #[test]
    fn packed_resources_read_back_what_was_written() {
        let store = Store::new(StoreConfig::default());
        store.register_packed("/events", no_fields);
        let event = |name: &str, reason: &str| {
            json!({"metadata": {"name": name, "namespace": "default"}, "reason": reason,
                   "message": "Container image \"nginx:1.20.0\" already present on machine",
                   "involvedObject": {"kind": "Pod", "name": "web-x7k2p", "namespace": "default"}})
        };
        let mut written = Vec::new();
        for (name, reason) in [("a", "Pulled"), ("b", "Created"), ("c", "Started")] {
            let w = store
                .write::<QuotaExceeded>("/events", "default", name, |_, _| {
                    Ok(Write::Put(event(name, reason)))
                })
                .unwrap_or(Written::Unchanged(None));
            written.push(w.object().cloned().expect("stored"));
        }
        for (o, reason) in written.iter().zip(["Pulled", "Created", "Started"]) {
            let v = o.value();
            assert_eq!(v["reason"], reason);
            assert_eq!(v["metadata"]["resourceVersion"], o.index.rv.to_string());
            assert_eq!(serde_json::from_slice::<Value>(&o.bytes()).ok(), Some(v));
            assert_eq!(o.len(), o.bytes().len());
        }
        // Against the first event as dictionary, the later ones take a fraction of their JSON.
        assert!(
            written[2].stored_len() * 3 < written[2].len(),
            "{} of {}",
            written[2].stored_len(),
            written[2].len()
        );
        let (listed, _) = store.list("/events", Some("default"), |_| true);
        assert_eq!(
            listed
                .iter()
                .map(|o| o.value()["reason"].clone())
                .collect::<Vec<_>>(),
            ["Pulled", "Created", "Started"]
        );
        // Other resources stay as they were written.
        let pod = put(&store, "p").object().cloned().expect("stored");
        assert_eq!(pod.stored_len(), pod.len());
    }

    #[test]
    fn a_packed_resource_learns_a_new_shape_of_object() {
        let store = Store::new(StoreConfig::default());
        store.register_packed("/events", no_fields);
        let scheduled = json!({"metadata": {"name": "s", "namespace": "default"}, "reason": "Scheduled",
            "message": "Successfully assigned default/web-0 to node-1", "type": "Normal",
            "source": {"component": "default-scheduler"}});
        let pulled = |i: u32| {
            json!({"metadata": {"name": format!("web-{i}.18f3a9c2{i:04x}"), "namespace": "default"},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": format!("web-{i}"),
                    "namespace": "default", "uid": format!("0b7c{i:04}-5e1d-4a8f-9c3e-2d6f8a1b4c7e"),
                    "fieldPath": "spec.containers{nginx}"},
                "reason": "Pulled", "type": "Normal", "count": 1,
                "message": "Successfully pulled image \"nginx:1.20.0\" in 2s (2s including waiting). Image size: 72195292 bytes.",
                "source": {"component": "kubelet", "host": format!("node-{i}")},
                "reportingComponent": "kubelet", "reportingInstance": format!("node-{i}"),
                "firstTimestamp": "2026-12-05T10:00:02Z", "lastTimestamp": "2026-12-05T10:00:02Z"})
        };
        let put_event = |name: &str, v: Value| {
            store
                .write::<QuotaExceeded>("/events", "default", name, |_, _| Ok(Write::Put(v)))
                .unwrap_or(Written::Unchanged(None))
                .object()
                .cloned()
                .expect("stored")
        };
        put_event("s", scheduled);
        let first = put_event("p1", pulled(1));
        let later = put_event("p2", pulled(2));
        assert_eq!(later.value()["reason"], "Pulled");
        assert_eq!(
            serde_json::from_slice::<Value>(&later.bytes()).ok(),
            Some(later.value())
        );
        // The first event of the new shape took most of its JSON; it became part of the dictionary, so the
        // next takes a fraction.
        assert!(
            first.stored_len() * 2 > first.len(),
            "{} of {}",
            first.stored_len(),
            first.len()
        );
        assert!(
            later.stored_len() * 3 < later.len(),
            "{} of {}",
            later.stored_len(),
            later.len()
        );
        // Read back against the dictionary each was packed with.
        assert_eq!(first.value()["involvedObject"]["name"], "web-1");
    }

    #[test]
    fn field_values_read_back_by_name() {
        let a = Fields::new(
            vec![
                ("spec.nodeName", "node-1".into()),
                ("status.phase", String::new()),
                ("type", "Normal".into()),
            ],
            None,
        );
        assert_eq!(a.get("spec.nodeName"), Some("node-1"));
        assert_eq!(a.get("status.phase"), Some(""));
        assert_eq!(a.get("type"), Some("Normal"));
        assert_eq!(a.get("reason"), None);
        let b = Fields::new(
            vec![
                ("spec.nodeName", String::new()),
                ("status.phase", "Running".into()),
                ("type", "Warning".into()),
            ],
            Some(&a.names),
        );
        assert!(Arc::ptr_eq(&a.names, &b.names), "the same names are shared");
        assert_eq!(
            (b.get("spec.nodeName"), b.get("status.phase"), b.get("type")),
            (Some(""), Some("Running"), Some("Warning"))
        );
        let c = Fields::new(vec![("reason", "Pulled".into())], Some(&a.names));
        assert_eq!((c.get("reason"), c.get("type")), (Some("Pulled"), None));
        assert_eq!(Fields::default().get("type"), None);
    }

    #[test]
    fn history_floor_and_replay() {
        let store = Store::new(StoreConfig {
            history_capacity: 2,
            watch_buffer: 16,
            ..StoreConfig::default()
        });
        for n in ["a", "b", "c"] {
            put(&store, n);
        }
        // rvs 2, 3, 4; capacity 2 evicts rv 2.
        assert_eq!(store.current_rv(), 4);
        assert!(store.watch("pods", None, WatchFrom::After(1), |_| true).is_err());
        let w = store.watch("pods", None, WatchFrom::After(2), |_| true).ok();
        assert_eq!(w.map(|w| w.replay.len()), Some(2));
        let (items, rv) = store.list("pods", Some("default"), |_| true);
        assert_eq!((items.len(), rv), (3, 4));
        assert_eq!(items[0].index.rv, 2);
    }
}
