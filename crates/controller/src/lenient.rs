//! Per-item decoding of lists and watches: one object the controller cannot decode is set aside, not fatal.
//!
//! kube-runtime's watcher decodes a LIST whole, so a single bad item (a ControllerRevision whose `data`
//! nests past serde_json's recursion limit of 128, a pod with a numeric label value written before
//! validation existed) fails the list, the cache never syncs and every CloneSet stalls. A `Lenient<K>` reads
//! each item as raw JSON first (serde_json skips it without recursing) and decodes it alone: a bad item
//! becomes `Lenient::Bad` with its name and the decode error, and `decoded` turns the watch stream back into
//! one of `K`, reporting each bad object once (log line with the error only, never the body; Warning Event
//! on the object; `insitu_undecodable_objects_total{resource}`) and dropping it from the cache.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, ObjectReference, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use kube::runtime::watcher;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::Metrics;
use crate::events::{EventSink, Severity};

/// Event reason on an object the controller cannot decode.
pub const UNDECODABLE: &str = "UndecodableObject";

/// What could be read of an object that did not decode as `K`.
#[derive(Clone, Debug, Default)]
pub struct Undecodable {
    /// name, namespace, uid, resourceVersion and ownerReferences, as far as they read.
    pub meta: ObjectMeta,
    /// The decode error (serde's message: what and where, no body).
    pub error: String,
}

/// An item of a list or watch: decoded, or set aside with its name.
#[derive(Clone, Debug)]
pub enum Lenient<K> {
    Ok(K),
    Bad(Box<Undecodable>),
}

/// The few metadata fields read from an undecodable object, each on its own (one bad field spoils no other),
/// located without parsing anything else (so at any depth).
#[derive(Deserialize, Default)]
struct Probe<'a> {
    #[serde(default, borrow)]
    metadata: Option<ProbeMeta<'a>>,
}

#[derive(Deserialize, Default)]
struct ProbeMeta<'a> {
    #[serde(default, borrow)]
    name: Option<&'a RawValue>,
    #[serde(default, borrow)]
    namespace: Option<&'a RawValue>,
    #[serde(default, borrow)]
    uid: Option<&'a RawValue>,
    #[serde(rename = "resourceVersion", default, borrow)]
    resource_version: Option<&'a RawValue>,
    #[serde(rename = "ownerReferences", default, borrow)]
    owner_references: Option<&'a RawValue>,
}

fn probe(raw: &str) -> ObjectMeta {
    let Ok(Probe { metadata: Some(m) }) = serde_json::from_str::<Probe<'_>>(raw) else {
        return ObjectMeta::default();
    };
    let s = |v: Option<&RawValue>| v.and_then(|v| serde_json::from_str::<String>(v.get()).ok());
    ObjectMeta {
        name: s(m.name),
        namespace: s(m.namespace),
        uid: s(m.uid),
        resource_version: s(m.resource_version),
        owner_references: m
            .owner_references
            .and_then(|v| serde_json::from_str::<Vec<OwnerReference>>(v.get()).ok()),
        ..Default::default()
    }
}

impl<K: serde::de::DeserializeOwned + Send> Lenient<K> {
    /// Decodes one item's JSON; never fails.
    pub fn decode(raw: &str) -> Self {
        let decoded = match serde_json::from_str::<K>(raw) {
            Ok(k) => Ok(k),
            // serde_json stops at 128 levels, Kubernetes at 10,000 (`insitu_api::jsondepth`).
            Err(e) if e.to_string().starts_with("recursion limit exceeded") => decode_deep::<K>(raw),
            Err(e) => Err(e.to_string()),
        };
        match decoded {
            Ok(k) => Lenient::Ok(k),
            Err(error) => Lenient::Bad(Box::new(Undecodable {
                meta: probe(raw),
                error,
            })),
        }
    }
}

/// Decodes an object nested past serde_json's 128 levels, as Kubernetes does up to 10,000, on a thread with a
/// deep stack. Fields the controller does not read are skipped at any depth; `metadata.managedFields` (which
/// mirror the object's field paths, so they nest as deep as its deepest field) is dropped there, as the caches
/// drop it anyway (`run.rs`). What is kept must still fit serde_json's 128 levels: the controller clones and
/// drops its objects on async threads with ordinary stacks, so a free-form field it keeps (a
/// ControllerRevision's `data`) nested deeper than that is refused with the reason.
fn decode_deep<K: serde::de::DeserializeOwned + Send>(raw: &str) -> Result<K, String> {
    insitu_api::jsondepth::on_deep_stack(|| {
        let mut value: serde_json::Value =
            insitu_api::jsondepth::from_slice(raw.as_bytes()).map_err(|e| e.to_string())?;
        if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("managedFields");
        }
        let shallow = serde_json::to_string(&value).map_err(|e| e.to_string())?;
        drop(value);
        serde_json::from_str::<K>(&shallow).map_err(|e| {
            format!("{e} (a field the controller keeps nests deeper than the 128 levels it supports there)")
        })
    })
}

/// Only malformed JSON (which no apiserver sends) fails: anything well-formed is `Ok` or `Bad`.
impl<'de, K: serde::de::DeserializeOwned + Send> Deserialize<'de> for Lenient<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(Lenient::decode(raw.get()))
    }
}

impl<K: Resource> Resource for Lenient<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Lenient::Ok(k) => k.meta(),
            Lenient::Bad(b) => &b.meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Lenient::Ok(k) => k.meta_mut(),
            Lenient::Bad(b) => &mut b.meta,
        }
    }
}

/// A stand-in carrying only metadata: what the cache deletes when an object turns undecodable.
pub trait Placeholder {
    fn placeholder(meta: ObjectMeta) -> Self;
}

impl Placeholder for insitu_core::PackedPod {
    fn placeholder(metadata: ObjectMeta) -> Self {
        insitu_core::PackedPod::pack(Pod {
            metadata,
            ..Default::default()
        })
    }
}

impl Placeholder for ControllerRevision {
    fn placeholder(metadata: ObjectMeta) -> Self {
        ControllerRevision {
            metadata,
            ..Default::default()
        }
    }
}

impl Placeholder for PersistentVolumeClaim {
    fn placeholder(metadata: ObjectMeta) -> Self {
        PersistentVolumeClaim {
            metadata,
            ..Default::default()
        }
    }
}

impl Placeholder for Node {
    fn placeholder(metadata: ObjectMeta) -> Self {
        Node {
            metadata,
            ..Default::default()
        }
    }
}

impl Placeholder for insitu_api::CloneSet {
    fn placeholder(metadata: ObjectMeta) -> Self {
        insitu_api::CloneSet {
            metadata,
            spec: Default::default(),
            status: None,
        }
    }
}

impl Placeholder for insitu_api::statefulset::StatefulSet {
    fn placeholder(metadata: ObjectMeta) -> Self {
        insitu_api::statefulset::StatefulSet {
            metadata,
            spec: Default::default(),
            status: None,
        }
    }
}

/// Reports undecodable objects: once per object version (a relist sees the same one again).
#[derive(Clone)]
pub struct Reporter {
    metrics: Arc<Metrics>,
    events: EventSink,
    seen: Arc<Mutex<HashSet<(String, String, String)>>>,
}

impl Reporter {
    pub fn new(metrics: Arc<Metrics>, events: EventSink) -> Self {
        Self {
            metrics,
            events,
            seen: Default::default(),
        }
    }

    fn report(&self, api_version: &str, kind: &str, resource: &str, bad: &Undecodable) {
        let ns = bad.meta.namespace.clone().unwrap_or_default();
        let name = bad.meta.name.clone().unwrap_or_default();
        let rv = bad.meta.resource_version.clone().unwrap_or_default();
        let key = (format!("{resource}/{ns}/{name}"), rv.clone(), bad.error.clone());
        if !self.seen.lock().unwrap_or_else(|e| e.into_inner()).insert(key) {
            return;
        }
        self.metrics
            .undecodable
            .get_or_create(&vec![("resource", resource.to_string())])
            .inc();
        tracing::warn!(
            resource,
            namespace = %ns,
            name = %name,
            resource_version = %rv,
            error = %bad.error,
            "cannot decode object: left out of the cache"
        );
        if name.is_empty() || ns.is_empty() {
            // Nothing to attach an Event to (Events are namespaced; cluster-scoped objects get the log only).
            return;
        }
        let involved = ObjectReference {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
            name: Some(name),
            namespace: Some(ns),
            uid: bad.meta.uid.clone(),
            resource_version: bad.meta.resource_version.clone(),
            ..Default::default()
        };
        self.events.emit_for(
            involved,
            Severity::Warning,
            UNDECODABLE,
            format!("insitu cannot decode this {kind} and ignores it: {}", bad.error),
        );
    }
}

/// The watch stream of `K` from one of `Lenient<K>`: bad objects reported and left out (an object that turns
/// bad is deleted from the cache, so no stale version of it is planned with).
pub fn decoded<K>(
    stream: impl Stream<Item = Result<watcher::Event<Lenient<K>>, watcher::Error>> + Send,
    reporter: Reporter,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    K: Resource<DynamicType = ()> + Placeholder + Send,
{
    let (api_version, kind, resource) = (
        K::api_version(&()).into_owned(),
        K::kind(&()).into_owned(),
        K::plural(&()).into_owned(),
    );
    stream.filter_map(move |ev| {
        let out = match ev {
            Err(e) => Some(Err(e)),
            Ok(ev) => {
                let bad = |b: Box<Undecodable>| {
                    reporter.report(&api_version, &kind, &resource, &b);
                    K::placeholder(b.meta)
                };
                Some(Ok(match ev {
                    watcher::Event::Init => watcher::Event::Init,
                    watcher::Event::InitDone => watcher::Event::InitDone,
                    watcher::Event::InitApply(Lenient::Ok(k)) => watcher::Event::InitApply(k),
                    watcher::Event::InitApply(Lenient::Bad(b)) => {
                        // Left out of the relisted cache.
                        bad(b);
                        return std::future::ready(None);
                    }
                    watcher::Event::Apply(Lenient::Ok(k)) => watcher::Event::Apply(k),
                    watcher::Event::Apply(Lenient::Bad(b)) => watcher::Event::Delete(bad(b)),
                    watcher::Event::Delete(Lenient::Ok(k)) => watcher::Event::Delete(k),
                    watcher::Event::Delete(Lenient::Bad(b)) => watcher::Event::Delete(K::placeholder(b.meta)),
                }))
            }
        };
        std::future::ready(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ObjectList;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn one_bad_item_leaves_the_rest_of_the_list() {
        let rev = |name: &str, data: &str| {
            format!(
                r#"{{"apiVersion":"apps/v1","kind":"ControllerRevision","metadata":{{"name":"{name}","namespace":"default","resourceVersion":"5"}},"revision":1,"data":{data}}}"#
            )
        };
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"List","metadata":{{"resourceVersion":"9"}},"items":[{},{},{}]}}"#,
            rev("a", "{}"),
            rev("deep", &nested(125)),
            rev("b", "{}")
        );
        // As kube decodes a list: whole, it fails (the depth counts from the list's root).
        assert!(serde_json::from_str::<ObjectList<ControllerRevision>>(&body).is_err());
        let list: ObjectList<Lenient<ControllerRevision>> = serde_json::from_str(&body).unwrap();
        let names: Vec<_> = list
            .items
            .iter()
            .map(|i| match i {
                Lenient::Ok(r) => format!("ok {}", r.metadata.name.as_deref().unwrap()),
                Lenient::Bad(b) => format!("bad {}", b.meta.name.as_deref().unwrap()),
            })
            .collect();
        // Alone, the deep revision is within the limit: all three are kept.
        assert_eq!(names, ["ok a", "ok deep", "ok b"]);
        // Deeper than the limit on its own: set aside by name, the others kept.
        let body = body.replace(&nested(125), &nested(200));
        let list: ObjectList<Lenient<ControllerRevision>> = serde_json::from_str(&body).unwrap();
        let bad: Vec<_> = list
            .items
            .iter()
            .filter_map(|i| match i {
                Lenient::Bad(b) => Some((b.meta.name.clone().unwrap(), b.error.clone())),
                Lenient::Ok(_) => None,
            })
            .collect();
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].0, "deep");
        assert!(bad[0].1.contains("recursion limit"), "{}", bad[0].1);
    }

    /// A v1beta1 CloneSet with `extra` (raw JSON) under `spec.template.metadata.deep` and as the fieldsV1 of
    /// its managedFields (which mirror the field paths, so they nest as deep).
    fn deep_cloneset(extra: &str) -> String {
        format!(
            r#"{{"apiVersion":"apps.kruise.io/v1beta1","kind":"CloneSet","metadata":{{"name":"deep","namespace":"ns","resourceVersion":"7","managedFields":[{{"manager":"kubectl","operation":"Apply","fieldsType":"FieldsV1","fieldsV1":{extra}}}]}},"spec":{{"replicas":2,"selector":{{"matchLabels":{{"app":"a"}}}},"template":{{"metadata":{{"labels":{{"app":"a"}},"deep":{extra}}},"spec":{{"containers":[{{"name":"c","image":"nginx"}}]}}}}}}}}"#
        )
    }

    #[test]
    fn objects_nested_as_deep_as_kubernetes_allows_are_read_and_deeper_ones_set_aside_by_name() {
        use crate::stored::StoredCloneSet;
        use insitu_api::jsondepth::{MAX_DEPTH, nested_objects};
        for depth in [200, MAX_DEPTH - 4] {
            match Lenient::<StoredCloneSet>::decode(&deep_cloneset(&nested_objects(depth))) {
                Lenient::Ok(cs) => {
                    assert_eq!(cs.0.metadata.name.as_deref(), Some("deep"));
                    assert_eq!(cs.0.spec.replicas, Some(2));
                    assert!(cs.0.metadata.managed_fields.is_none());
                }
                Lenient::Bad(b) => panic!("{depth} levels: {}", b.error),
            }
        }
        match Lenient::<StoredCloneSet>::decode(&deep_cloneset(&nested_objects(MAX_DEPTH - 3))) {
            Lenient::Bad(b) => {
                assert_eq!(b.meta.name.as_deref(), Some("deep"));
                assert_eq!(b.meta.resource_version.as_deref(), Some("7"));
                assert!(b.error.contains("max depth of 10000"), "{}", b.error);
            }
            Lenient::Ok(_) => panic!("10,001 levels decoded"),
        }
    }

    #[test]
    fn a_pod_with_a_numeric_label_is_bad_by_name() {
        let raw = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u","labels":{"a":1},
            "ownerReferences":[{"apiVersion":"apps.kruise.io/v1alpha1","kind":"CloneSet","name":"web","uid":"cs","controller":true}]}}"#;
        match Lenient::<insitu_core::PackedPod>::decode(raw) {
            Lenient::Bad(b) => {
                assert_eq!(b.meta.name.as_deref(), Some("p"));
                assert_eq!(b.meta.namespace.as_deref(), Some("ns"));
                assert_eq!(b.meta.owner_references.as_ref().unwrap()[0].uid, "cs");
                assert!(b.error.contains("invalid type: integer `1`"), "{}", b.error);
            }
            Lenient::Ok(_) => panic!("decoded a numeric label"),
        }
    }
}
