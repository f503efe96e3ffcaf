//! Garbage collector: deletes dependents whose owner is gone (ownerReferences), background/foreground/orphan.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::Clock;

/// Delay before retrying failed work (e.g. a 500 from the apiserver).
const RETRY: Duration = Duration::from_secs(1);

/// Finalizer asking the GC to delete dependents before the owner.
pub const FOREGROUND: &str = "foregroundDeletion";
/// Finalizer asking the GC to orphan dependents.
pub const ORPHAN: &str = "orphan";

/// Which owner kinds and dependent kinds the GC watches.
#[derive(Clone, Debug)]
pub struct GcConfig {
    /// Owner kinds (all namespaced).
    pub owners: Vec<ApiResource>,
    /// Dependent kinds (all namespaced).
    pub dependents: Vec<ApiResource>,
}

impl Default for GcConfig {
    /// CloneSets (and Advanced StatefulSets) own pods, revisions, PVCs and ImagePullJobs; pods own the PVCs handed over to them (Kruise
    /// disablePVCReuse) and their launch-priority barrier ConfigMaps, which go when the pod goes.
    fn default() -> Self {
        Self {
            owners: vec![
                ApiResource::erase::<insitu_api::CloneSet>(&()),
                ApiResource::erase::<insitu_api::statefulset::StatefulSet>(&()),
                ApiResource::erase::<Pod>(&()),
            ],
            dependents: vec![
                ApiResource::erase::<Pod>(&()),
                ApiResource::erase::<ControllerRevision>(&()),
                ApiResource::erase::<PersistentVolumeClaim>(&()),
                ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
                image_pull_jobs(),
            ],
        }
    }
}

/// Kruise's ImagePullJobs (v1beta1), which a CloneSet owns while it pre-downloads its update revision's images.
pub fn image_pull_jobs() -> ApiResource {
    ApiResource {
        group: "apps.kruise.io".into(),
        version: "v1beta1".into(),
        api_version: "apps.kruise.io/v1beta1".into(),
        kind: "ImagePullJob".into(),
        plural: "imagepulljobs".into(),
    }
}

/// What the GC reads of a watched object: its metadata. Spec and status are skipped while parsing (no
/// `serde_json::Value` tree per pod event, as `DynamicObject` would build).
#[derive(Clone, Debug, Default, serde::Deserialize)]
struct MetaObject {
    #[serde(default)]
    metadata: ObjectMeta,
}

impl kube::Resource for MetaObject {
    type DynamicType = ApiResource;
    type Scope = kube::core::DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

#[derive(Clone, Debug)]
struct Owner {
    kind: usize,
    namespace: String,
    name: String,
    deleting: bool,
    finalizers: Vec<String>,
    rv: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Ref {
    kind: usize,
    uid: String,
    name: String,
}

#[derive(Clone, Debug)]
struct Dependent {
    uid: String,
    rv: Option<String>,
    deleting: bool,
    tracked: Vec<Ref>,
    /// Typed: as JSON values they were ~1 KB a pod (at 100k pods, ~100 MB) for a list read only to patch it.
    all_refs: Vec<OwnerReference>,
}

type DepKey = (usize, String, String);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Work {
    Dependent(DepKey),
    Owner(String),
}

#[derive(Clone, Copy)]
enum Source {
    Owner(usize),
    Dependent(usize),
    /// A kind that is both (pods): one watch feeds both roles.
    Both(usize, usize),
}

struct Gc {
    client: Client,
    config: GcConfig,
    owners: HashMap<String, Owner>,
    synced: Vec<bool>,
    deps: HashMap<DepKey, Dependent>,
    by_owner: HashMap<String, HashSet<DepKey>>,
    queue: VecDeque<Work>,
    queued: HashSet<Work>,
}

impl Gc {
    fn owner_kind(&self, api_version: &str, kind: &str) -> Option<usize> {
        self.config
            .owners
            .iter()
            .position(|ar| ar.kind == kind && ar.group == group_of(api_version))
    }

    fn enqueue(&mut self, w: Work) {
        if self.queued.insert(w.clone()) {
            self.queue.push_back(w);
        }
    }

    fn on_owner(&mut self, kind: usize, ev: watcher::Event<MetaObject>) {
        match ev {
            watcher::Event::Init | watcher::Event::InitDone => {
                if matches!(ev, watcher::Event::InitDone) {
                    self.synced[kind] = true;
                    let keys: Vec<DepKey> = self.deps.keys().cloned().collect();
                    for k in keys {
                        self.enqueue(Work::Dependent(k));
                    }
                }
            }
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                let Some(uid) = o.metadata.uid.clone() else { return };
                let owner = Owner {
                    kind,
                    namespace: o.metadata.namespace.clone().unwrap_or_default(),
                    name: o.metadata.name.clone().unwrap_or_default(),
                    deleting: o.metadata.deletion_timestamp.is_some(),
                    finalizers: o.metadata.finalizers.clone().unwrap_or_default(),
                    rv: o.metadata.resource_version.clone(),
                };
                let finalize =
                    owner.deleting && owner.finalizers.iter().any(|f| f == FOREGROUND || f == ORPHAN);
                self.owners.insert(uid.clone(), owner);
                if finalize {
                    self.enqueue(Work::Owner(uid));
                }
            }
            watcher::Event::Delete(o) => {
                let Some(uid) = o.metadata.uid else { return };
                self.owners.remove(&uid);
                for k in self.by_owner.get(&uid).cloned().unwrap_or_default() {
                    self.enqueue(Work::Dependent(k));
                }
            }
        }
    }

    fn unindex(&mut self, key: &DepKey) -> Option<Dependent> {
        let old = self.deps.remove(key)?;
        for r in &old.tracked {
            if let Some(set) = self.by_owner.get_mut(&r.uid) {
                set.remove(key);
                if set.is_empty() {
                    self.by_owner.remove(&r.uid);
                }
            }
        }
        Some(old)
    }

    fn on_dependent(&mut self, kind: usize, ev: watcher::Event<MetaObject>) {
        match ev {
            watcher::Event::Init | watcher::Event::InitDone => {}
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                let key = (
                    kind,
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default(),
                );
                let refs = o.metadata.owner_references.clone().unwrap_or_default();
                let tracked: Vec<Ref> = refs
                    .iter()
                    .filter_map(|r| {
                        self.owner_kind(&r.api_version, &r.kind).map(|k| Ref {
                            kind: k,
                            uid: r.uid.clone(),
                            name: r.name.clone(),
                        })
                    })
                    .collect();
                if let Some(old) = self.unindex(&key) {
                    for r in old.tracked.iter().filter(|r| !tracked.contains(r)) {
                        if self.owners.get(&r.uid).is_some_and(|o| o.deleting) {
                            self.enqueue(Work::Owner(r.uid.clone()));
                        }
                    }
                }
                if tracked.is_empty() {
                    return;
                }
                for r in &tracked {
                    self.by_owner
                        .entry(r.uid.clone())
                        .or_default()
                        .insert(key.clone());
                }
                let dep = Dependent {
                    uid: o.metadata.uid.clone().unwrap_or_default(),
                    rv: o.metadata.resource_version.clone(),
                    deleting: o.metadata.deletion_timestamp.is_some(),
                    all_refs: refs,
                    tracked,
                };
                let suspicious = dep.tracked.iter().any(|r| match self.owners.get(&r.uid) {
                    None => self.synced[r.kind],
                    Some(o) => o.deleting,
                });
                self.deps.insert(key.clone(), dep);
                if suspicious {
                    self.enqueue(Work::Dependent(key));
                }
            }
            watcher::Event::Delete(o) => {
                let key = (
                    kind,
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default(),
                );
                if let Some(old) = self.unindex(&key) {
                    for r in old.tracked {
                        if self.owners.get(&r.uid).is_some_and(|o| o.deleting) {
                            self.enqueue(Work::Owner(r.uid));
                        }
                    }
                }
            }
        }
    }

    fn dyn_api(&self, ar: &ApiResource, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, ar)
    }

    /// Whether the owner is really gone (the real GC confirms with a live read before deleting).
    async fn absent(&self, r: &Ref, ns: &str) -> Result<bool, kube::Error> {
        let api = self.dyn_api(&self.config.owners[r.kind], ns);
        Ok(match api.get_opt(&r.name).await? {
            None => true,
            Some(o) => o.metadata.uid.as_deref() != Some(r.uid.as_str()),
        })
    }

    async fn process(&mut self, w: Work) -> Result<(), kube::Error> {
        match w {
            Work::Dependent(key) => self.process_dependent(key).await,
            Work::Owner(uid) => self.process_owner(uid).await,
        }
    }

    /// A 404 ends the work (the object is gone); any other error, a 409 included, is retried with the state the
    /// watches show by then, as kube-controller-manager's garbage collector requeues its items on every error (a
    /// conflict need not be followed by a watch event that would enqueue the item again).
    async fn process_dependent(&mut self, key: DepKey) -> Result<(), kube::Error> {
        let Some(dep) = self.deps.get(&key).cloned() else {
            return Ok(());
        };
        let mut dangling = Vec::new();
        let mut delete_for_foreground = false;
        let mut orphan_from = Vec::new();
        for r in &dep.tracked {
            match self.owners.get(&r.uid) {
                Some(o) if o.deleting && o.finalizers.iter().any(|f| f == FOREGROUND) => {
                    delete_for_foreground = true
                }
                Some(o) if o.deleting && o.finalizers.iter().any(|f| f == ORPHAN) => {
                    orphan_from.push(r.uid.clone())
                }
                Some(_) => {}
                None if !self.synced[r.kind] => {}
                None => {
                    if self.absent(r, &key.1).await? {
                        dangling.push(r.uid.clone());
                    }
                }
            }
        }
        let api = self.dyn_api(&self.config.dependents[key.0], &key.1);
        let remaining: Vec<&OwnerReference> = dep
            .all_refs
            .iter()
            .filter(|r| !dangling.iter().chain(orphan_from.iter()).any(|d| *d == r.uid))
            .collect();
        if (delete_for_foreground || (remaining.is_empty() && !dangling.is_empty())) && !dep.deleting {
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                preconditions: Some(Preconditions {
                    uid: Some(dep.uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            tracing::debug!(dependent = ?key, "gc: deleting dependent of a deleted owner");
            return match api.delete(&key.2, &dp).await {
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                r => r.map(|_| ()),
            };
        }
        if remaining.len() != dep.all_refs.len() && !remaining.is_empty() || !orphan_from.is_empty() {
            let patch = json!({"metadata": {"ownerReferences": remaining, "resourceVersion": dep.rv}});
            return match api
                .patch(&key.2, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                r => r.map(|_| ()),
            };
        }
        Ok(())
    }

    async fn process_owner(&mut self, uid: String) -> Result<(), kube::Error> {
        let Some(owner) = self.owners.get(&uid).cloned() else {
            return Ok(());
        };
        if !owner.deleting {
            return Ok(());
        }
        let deps = self.by_owner.get(&uid).cloned().unwrap_or_default();
        if !deps.is_empty() {
            for k in deps {
                self.enqueue(Work::Dependent(k));
            }
            return Ok(());
        }
        // No dependents left: drop the GC finalizers so the owner's deletion completes.
        let finalizers: Vec<&String> = owner
            .finalizers
            .iter()
            .filter(|f| *f != FOREGROUND && *f != ORPHAN)
            .collect();
        if finalizers.len() == owner.finalizers.len() {
            return Ok(());
        }
        let api = self.dyn_api(&self.config.owners[owner.kind], &owner.namespace);
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": owner.rv}});
        match api
            .patch(&owner.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            r => r.map(|_| ()),
        }
    }
}

type Tagged = (Source, Result<watcher::Event<MetaObject>, watcher::Error>);

/// Runs the garbage collector until the future is dropped.
pub async fn run(client: Client, clock: Arc<dyn Clock>, config: GcConfig) {
    let mut streams: Vec<BoxStream<'static, Tagged>> = Vec::new();
    let same = |a: &ApiResource, b: &ApiResource| a.group == b.group && a.kind == b.kind;
    let mut tags: Vec<(&ApiResource, Source)> = Vec::new();
    for (i, ar) in config.owners.iter().enumerate() {
        match config.dependents.iter().position(|d| same(d, ar)) {
            Some(j) => tags.push((ar, Source::Both(i, j))),
            None => tags.push((ar, Source::Owner(i))),
        }
    }
    for (j, ar) in config.dependents.iter().enumerate() {
        if !config.owners.iter().any(|o| same(o, ar)) {
            tags.push((ar, Source::Dependent(j)));
        }
    }
    for (ar, tag) in tags {
        let api = Api::<MetaObject>::all_with(client.clone(), ar);
        streams.push(
            watcher(api, watcher::Config::default())
                .default_backoff()
                .map(move |e| (tag, e))
                .boxed(),
        );
    }
    let mut events = futures::stream::select_all(streams);
    let mut gc = Gc {
        client,
        synced: vec![false; config.owners.len()],
        config,
        owners: HashMap::new(),
        deps: HashMap::new(),
        by_owner: HashMap::new(),
        queue: VecDeque::new(),
        queued: HashSet::new(),
    };
    let mut failed: Vec<Work> = Vec::new();
    let mut retry: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            biased;
            next = events.next() => match next {
                None => return,
                Some((_, Err(e))) => tracing::debug!(error = %e, "gc watch error"),
                Some((Source::Owner(i), Ok(ev))) => gc.on_owner(i, ev),
                Some((Source::Dependent(i), Ok(ev))) => gc.on_dependent(i, ev),
                Some((Source::Both(i, j), Ok(ev))) => {
                    gc.on_owner(i, ev.clone());
                    gc.on_dependent(j, ev);
                }
            },
            () = async {
                match retry.as_mut() {
                    Some(sleep) => sleep.await,
                    None => std::future::pending().await,
                }
            } => {
                retry = None;
                for w in failed.drain(..) {
                    gc.enqueue(w);
                }
            }
        }
        while let Some(w) = gc.queue.pop_front() {
            gc.queued.remove(&w);
            if let Err(e) = gc.process(w.clone()).await {
                tracing::debug!(error = %e, "gc: work item failed; will retry");
                failed.push(w);
                retry.get_or_insert_with(|| Box::pin(clock.sleep(RETRY)));
            }
        }
    }
}
