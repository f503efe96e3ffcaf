//! The workload a round is for (CloneSet or Advanced StatefulSet): what the shared executor, events and
//! recreate warnings need of it — its name, metadata, kind and the reference Events name.

use insitu_api::CloneSet;
use insitu_api::statefulset::StatefulSet;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// One workload object, borrowed for a round.
#[derive(Clone, Copy, Debug)]
pub enum Workload<'a> {
    CloneSet(&'a CloneSet),
    StatefulSet(&'a StatefulSet),
}

impl<'a> Workload<'a> {
    pub fn meta(&self) -> &'a ObjectMeta {
        match self {
            Workload::CloneSet(c) => &c.metadata,
            Workload::StatefulSet(s) => &s.metadata,
        }
    }

    pub fn name(&self) -> String {
        self.meta().name.clone().unwrap_or_default()
    }

    /// The kind, as Kruise's Events and ownerReferences name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::CloneSet(_) => "CloneSet",
            Workload::StatefulSet(_) => "StatefulSet",
        }
    }

    /// The key of its expectations and back-off: `ns/name` for a CloneSet, `statefulset/ns/name` for an
    /// Advanced StatefulSet (so the two kinds never share a key).
    pub fn key(&self) -> String {
        let m = self.meta();
        let (ns, name) = (
            m.namespace.as_deref().unwrap_or_default(),
            m.name.as_deref().unwrap_or_default(),
        );
        match self {
            Workload::CloneSet(_) => format!("{ns}/{name}"),
            Workload::StatefulSet(_) => format!("statefulset/{ns}/{name}"),
        }
    }

    /// The CloneSet, for the steps only a CloneSet has (claiming pods, `podsToDelete`, pre-download).
    pub fn cloneset(&self) -> Option<&'a CloneSet> {
        match self {
            Workload::CloneSet(c) => Some(c),
            Workload::StatefulSet(_) => None,
        }
    }

    /// The Events' involvedObject: Kruise master's controllers work on v1beta1 objects, so its recorder's
    /// `reference.GetReference` names that version whichever version the object was written in.
    pub fn reference(&self) -> ObjectReference {
        let m = self.meta();
        ObjectReference {
            api_version: Some(insitu_api::conversion::V1BETA1.into()),
            kind: Some(self.kind().into()),
            name: m.name.clone(),
            namespace: Some(m.namespace.clone().unwrap_or_else(|| "default".into())),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            ..Default::default()
        }
    }
}

/// The `apps.kruise.io` objects of `kind` that own `obj` (matched by group and kind, whatever the version): the
/// sets a pod, revision or PVC event is fanned out to.
pub fn owners_of_kind<K: Resource, W: Resource<DynamicType = ()>>(obj: &K, kind: &str) -> Vec<ObjectRef<W>> {
    let ns = obj.meta().namespace.clone();
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .filter(|r| {
            r.kind == kind && r.api_version.rsplit_once('/').map(|(g, _)| g) == Some("apps.kruise.io")
        })
        .map(|r| {
            let o = ObjectRef::new(&r.name);
            match &ns {
                Some(ns) => o.within(ns),
                None => o,
            }
        })
        .collect()
}
