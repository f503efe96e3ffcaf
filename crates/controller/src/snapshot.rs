//! Builds the planner's `Snapshot` for one CloneSet from the reflector caches (no API calls), with the pods'
//! summaries kept up to date between reconciles (`SummaryCache`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use insitu_api::CloneSet;
use insitu_core::{NodeLabels, PodRef, PodSummary, Snapshot, Summariser};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::Context;
use crate::predownload::ImagePullJobs;

/// Kruise getOwnedPods: any ownerReference with the CloneSet's UID (its field index); the planner's claimPods
/// then tells controlled pods from adoptable ones.
fn references(refs: &[OwnerReference], uid: &str) -> bool {
    refs.iter().any(|r| r.uid == uid)
}

fn controlled_by(refs: &[OwnerReference], uid: &str) -> bool {
    // Kruise: owner matched by controller ref UID (group/kind checked by the event handler).
    refs.iter().any(|r| r.controller == Some(true) && r.uid == uid)
}

/// Each CloneSet's pod summaries as of its last snapshot, so a snapshot summarises only the pods that
/// changed since (a summary depends on nothing but the pod version and the CloneSet's selector, see
/// `PodSummary`): per reconcile, a hash lookup per cached pod instead of reading each pod whole.
///
/// A pod version is recognised by the address of its `Arc` in the reflector store: the store swaps in a
/// new `Arc` on every change, and a cached summary holds its `Arc`, so the address cannot be reused by
/// another pod while the entry exists. Old versions are released at the CloneSet's next snapshot (a pod
/// change triggers one), and the entries of CloneSets gone from the cache at any snapshot.
#[derive(Default)]
pub struct SummaryCache {
    by_cloneset: Mutex<HashMap<String, Owned>>,
}

/// One CloneSet's pods at its last snapshot.
#[derive(Default)]
struct Owned {
    /// To find the CloneSet in the store (pruning).
    namespace: String,
    name: String,
    /// `cloneset_fingerprint` of the CloneSet (selector, uid, name) the summaries were made for.
    selector: u64,
    /// Sorted by pod name (`PodSummary::name_cmp`), the order `plan()` wants: then it sorts nothing.
    summaries: Arc<Vec<PodSummary>>,
    /// `Arc::as_ptr` of each summary's pod → its position in `summaries`.
    index: HashMap<usize, usize>,
}

/// What `SummaryCache::refresh` did, for tests and tracing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// Summaries kept from the last snapshot.
    pub reused: usize,
    /// Pods summarised now (new, or changed since).
    pub made: usize,
}

fn address<K>(p: &Arc<K>) -> usize {
    Arc::as_ptr(p) as usize
}

impl SummaryCache {
    /// The summaries of the pods of `cs` among `all` (those `owned` accepts), sorted by name. A pod whose
    /// `Arc` was summarised for `cs` last time is taken as owned without a look at it (same `Arc`, same
    /// pod version, same owner).
    pub fn refresh<K>(
        &self,
        cs: &CloneSet,
        all: &[Arc<K>],
        owned: impl Fn(&K) -> bool,
    ) -> (Arc<Vec<PodSummary>>, Refreshed)
    where
        Arc<K>: Into<PodRef>,
    {
        let uid = cs.uid().unwrap_or_default();
        let summariser = Summariser::for_cloneset(cs);
        let fingerprint = summariser.fingerprint();
        // Taken out while it is worked on, so other CloneSets' snapshots do not wait (kube-runtime never
        // reconciles one object twice at once; if it did, the second would only summarise everything).
        let taken = self.lock().remove(&uid).filter(|o| o.selector == fingerprint);
        let mut entry = taken.unwrap_or_else(|| Owned {
            selector: fingerprint,
            ..Default::default()
        });
        entry.namespace = cs.namespace().unwrap_or_default();
        entry.name = cs.name_any();
        let mut kept = vec![false; entry.summaries.len()];
        let mut fresh: Vec<PodSummary> = Vec::new();
        for p in all {
            if let Some(&i) = entry.index.get(&address(p))
                && entry.summaries[i].pod_ref().addr() == address(p)
            {
                kept[i] = true;
            } else if owned(p) {
                fresh.push(summariser.summarise(p.clone()));
            }
        }
        let stats = Refreshed {
            reused: kept.iter().filter(|k| **k).count(),
            made: fresh.len(),
        };
        if !fresh.is_empty() || stats.reused != kept.len() {
            // Kept summaries are in name order already: merge the new ones in.
            fresh.sort_by(|a, b| a.name_cmp(b));
            let mut fresh = fresh.into_iter().peekable();
            let old = Arc::unwrap_or_clone(std::mem::take(&mut entry.summaries));
            let mut merged = Vec::with_capacity(stats.reused + stats.made);
            for s in old.into_iter().zip(kept).filter_map(|(s, k)| k.then_some(s)) {
                while let Some(f) = fresh.next_if(|f| f.name_cmp(&s).is_lt()) {
                    merged.push(f);
                }
                merged.push(s);
            }
            merged.extend(fresh);
            entry.index = merged
                .iter()
                .enumerate()
                .map(|(i, s)| (s.pod_ref().addr(), i))
                .collect();
            entry.summaries = Arc::new(merged);
        }
        let summaries = entry.summaries.clone();
        self.lock().insert(uid, entry);
        (summaries, stats)
    }

    /// Drops the entries of CloneSets that `exists(namespace, name, uid)` denies.
    pub fn prune(&self, exists: impl Fn(&str, &str, &str) -> bool) {
        self.lock().retain(|uid, o| exists(&o.namespace, &o.name, uid));
    }

    /// CloneSets with summaries cached.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owned>> {
        // The map is consistent between statements: a panic elsewhere leaves nothing half-done.
        self.by_cloneset.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Pods, revisions and PVCs owned by `cs`, plus `now`, as the planner wants them.
pub fn build(
    ctx: &Context,
    cache: &SummaryCache,
    jobs: Option<&ImagePullJobs>,
    cs: Arc<CloneSet>,
) -> Snapshot {
    let uid = cs.uid().unwrap_or_default();
    let ns = cs.namespace().unwrap_or_default();
    let (summaries, refreshed) = cache.refresh(&cs, &ctx.caches.pods.state(), |p| {
        p.meta().namespace.as_deref() == Some(ns.as_str()) && references(p.owner_references(), &uid)
    });
    tracing::trace!(cloneset = %cs.name_any(), reused = refreshed.reused, made = refreshed.made, "pod summaries");
    cache.prune(|ns, name, uid| {
        ctx.caches
            .clonesets
            .get(&ObjectRef::new(name).within(ns))
            .is_some_and(|c| c.metadata.uid.as_deref() == Some(uid))
    });
    let revisions: Vec<Arc<ControllerRevision>> = ctx
        .caches
        .revisions
        .state()
        .into_iter()
        .filter(|r| {
            r.metadata.namespace.as_deref() == Some(ns.as_str()) && controlled_by(r.owner_references(), &uid)
        })
        .collect();
    let nodes = node_labels(ctx, &cs, &summaries);
    // Kruise getOwnedPVCs: any ownerReference with the CloneSet's UID (its field index), no deletionTimestamp.
    let pvcs: Vec<Arc<PersistentVolumeClaim>> = ctx
        .caches
        .pvcs
        .state()
        .into_iter()
        .filter(|c| {
            c.metadata.namespace.as_deref() == Some(ns.as_str())
                && c.metadata.deletion_timestamp.is_none()
                && c.owner_references().iter().any(|r| r.uid == uid)
        })
        .collect();
    let image_pull_jobs = jobs.and_then(|j| j.owned_by(&ns, &uid));
    // The summaries stand for the pods (packed in the cache, decoded only for the pods a plan acts on).
    Snapshot {
        cloneset: cs,
        pods: Vec::new(),
        summaries: Some(summaries),
        revisions,
        pvcs,
        now: ctx.clock.now(),
        gates: ctx.config.gates.clone(),
        nodes,
        image_pull_jobs,
    }
}

/// Labels of the pods' nodes, only when the template has topologySpreadConstraints (the only reader).
fn node_labels(ctx: &Context, cs: &CloneSet, pods: &[PodSummary]) -> NodeLabels {
    let spread = cs
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_ref())
        .is_some_and(|c| !c.is_empty());
    let mut out = NodeLabels::new();
    if !spread {
        return out;
    }
    for p in pods {
        let node = p.node();
        if node.is_empty() || out.contains_key(node) {
            continue;
        }
        if let Some(n) = ctx.caches.nodes.get(&ObjectRef::<Node>::new(node)) {
            out.insert(node.to_string(), n.metadata.labels.clone().unwrap_or_default());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use insitu_core::cloneset_fingerprint;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn cloneset() -> CloneSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "cs-uid"},
            "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}
        }))
        .unwrap()
    }

    fn pod(name: &str, owner: &str, app: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                    "labels": {"app": app},
                    "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                                         "name": "web", "uid": owner, "controller": true}]},
                "spec": {"containers": [{"name": "web", "image": "nginx:1"}]},
                "status": {"phase": "Running"}
            }))
            .unwrap(),
        )
    }

    fn owned_by_cs(p: &Pod) -> bool {
        controlled_by(p.owner_references(), "cs-uid")
    }

    fn names(s: &[PodSummary]) -> Vec<&str> {
        s.iter().map(|s| s.name()).collect()
    }

    /// The plan from the cached summaries equals the plan from the raw pods.
    fn same_plan(cs: &CloneSet, summaries: &Arc<Vec<PodSummary>>) {
        let snap = Snapshot {
            cloneset: Arc::new(cs.clone()),
            pods: summaries.iter().map(|s| Arc::new(s.pod().into_owned())).collect(),
            summaries: Some(summaries.clone()),
            revisions: vec![],
            pvcs: vec![],
            now: "2026-01-01T00:00:00Z".parse().unwrap(),
            gates: Default::default(),
            nodes: Default::default(),
            image_pull_jobs: None,
        };
        let raw = Snapshot {
            summaries: None,
            ..snap.clone()
        };
        // As the controller plans: the summaries alone.
        let lean = Snapshot {
            pods: Vec::new(),
            ..snap.clone()
        };
        assert_eq!(insitu_core::plan(&lean), insitu_core::plan(&raw));
    }

    #[test]
    fn summarises_only_changed_pods_and_keeps_name_order() {
        let cache = SummaryCache::default();
        let mut cs = cloneset();
        let mut all = vec![
            pod("web-d", "cs-uid", "web"),
            pod("web-b", "cs-uid", "web"),
            pod("other-a", "other-uid", "web"),
            pod("web-a", "cs-uid", "db"),
            pod("web-c", "cs-uid", "web"),
        ];
        let (s1, r) = cache.refresh(&cs, &all, owned_by_cs);
        assert_eq!(r, Refreshed { reused: 0, made: 4 });
        assert_eq!(names(&s1), ["web-a", "web-b", "web-c", "web-d"]);
        same_plan(&cs, &s1);

        // Nothing changed: the same summaries, nothing summarised.
        drop(s1);
        all.reverse();
        let (s2, r) = cache.refresh(&cs, &all, owned_by_cs);
        assert_eq!(r, Refreshed { reused: 4, made: 0 });
        assert_eq!(names(&s2), ["web-a", "web-b", "web-c", "web-d"]);

        // web-c changes (a new Arc), web-d goes, web-bb and web-e come.
        let old_c = all
            .iter()
            .position(|p| p.metadata.name.as_deref() == Some("web-c"))
            .unwrap();
        all[old_c] = pod("web-c", "cs-uid", "db");
        all.retain(|p| p.metadata.name.as_deref() != Some("web-d"));
        all.push(pod("web-e", "cs-uid", "web"));
        all.push(pod("web-bb", "cs-uid", "web"));
        let (s3, r) = cache.refresh(&cs, &all, owned_by_cs);
        assert_eq!(r, Refreshed { reused: 2, made: 3 });
        assert_eq!(names(&s3), ["web-a", "web-b", "web-bb", "web-c", "web-e"]);
        assert_eq!(s3[3].pod_ref().addr(), Arc::as_ptr(&all[old_c]) as usize);
        // The previous snapshot still holds its summaries: they are copied, not taken.
        assert_eq!(names(&s2), ["web-a", "web-b", "web-c", "web-d"]);
        same_plan(&cs, &s3);

        // Another selector: every pod is summarised again.
        cs.spec.selector = serde_json::from_value(json!({"matchLabels": {"app": "db"}})).unwrap();
        let (s4, r) = cache.refresh(&cs, &all, owned_by_cs);
        assert_eq!(r, Refreshed { reused: 0, made: 5 });
        let fp = cloneset_fingerprint(&cs);
        assert!(s4.iter().all(|s| s.selected_by(fp).is_some()));
        // And whose each pod is, for the claim step.
        assert!(s4.iter().all(|s| s.owner_by(fp).is_some()));
        same_plan(&cs, &s4);

        cache.prune(|_, _, uid| uid != "cs-uid");
        assert!(cache.is_empty());
    }

    #[test]
    fn packed_pods_as_the_controller_caches_them() {
        // The controller's store holds `PackedPod`s: same summaries, same identity rule, same plan.
        let cache = SummaryCache::default();
        let cs = cloneset();
        let packed = |p: &Arc<Pod>| Arc::new(insitu_core::PackedPod::pack((**p).clone()));
        let pods = [
            pod("web-b", "cs-uid", "web"),
            pod("web-a", "cs-uid", "web"),
            pod("other-a", "other-uid", "web"),
        ];
        let mut all: Vec<Arc<insitu_core::PackedPod>> = pods.iter().map(packed).collect();
        let owned = |p: &insitu_core::PackedPod| {
            controlled_by(p.meta().owner_references.as_deref().unwrap_or_default(), "cs-uid")
        };
        let (s1, r) = cache.refresh(&cs, &all, owned);
        assert_eq!(r, Refreshed { reused: 0, made: 2 });
        assert_eq!(names(&s1), ["web-a", "web-b"]);
        assert!(matches!(s1[0].pod_ref(), PodRef::Packed(_)));
        assert_eq!(*s1[0].pod(), (*pods[1]).clone(), "decodes to the pod it packed");
        same_plan(&cs, &s1);
        // A new version of web-b (a new Arc) is summarised again; web-a is reused.
        all[0] = packed(&pod("web-b", "cs-uid", "db"));
        let (s2, r) = cache.refresh(&cs, &all, owned);
        assert_eq!(r, Refreshed { reused: 1, made: 1 });
        assert_eq!(s2[1].pod_ref().addr(), Arc::as_ptr(&all[0]) as usize);
        same_plan(&cs, &s2);
    }
}
