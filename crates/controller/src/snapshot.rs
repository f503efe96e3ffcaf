//! Builds the planner's `Snapshot` for one CloneSet from the reflector caches (no API calls).

use std::sync::Arc;

use insitu_api::CloneSet;
use insitu_core::Snapshot;
use insitu_core::snapshot::NodeLabels;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::Context;

fn controlled_by(refs: &[OwnerReference], uid: &str) -> bool {
    // Kruise: owner matched by controller ref UID (group/kind checked by the event handler).
    refs.iter().any(|r| r.controller == Some(true) && r.uid == uid)
}

/// Pods, revisions and PVCs owned by `cs`, plus `now`, as the planner wants them.
pub fn build(ctx: &Context, cs: Arc<CloneSet>) -> Snapshot {
    let uid = cs.uid().unwrap_or_default();
    let ns = cs.namespace().unwrap_or_default();
    let pods: Vec<Arc<Pod>> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns.as_str()) && controlled_by(p.owner_references(), &uid)
        })
        .collect();
    let revisions: Vec<Arc<ControllerRevision>> = ctx
        .revisions
        .state()
        .into_iter()
        .filter(|r| {
            r.metadata.namespace.as_deref() == Some(ns.as_str()) && controlled_by(r.owner_references(), &uid)
        })
        .collect();
    let nodes = node_labels(ctx, &cs, &pods);
    // Kruise getOwnedPVCs: any ownerReference with the CloneSet's UID (its field index), no deletionTimestamp.
    let pvcs: Vec<Arc<PersistentVolumeClaim>> = ctx
        .pvcs
        .state()
        .into_iter()
        .filter(|c| {
            c.metadata.namespace.as_deref() == Some(ns.as_str())
                && c.metadata.deletion_timestamp.is_none()
                && c.owner_references().iter().any(|r| r.uid == uid)
        })
        .collect();
    Snapshot {
        cloneset: cs,
        pods,
        revisions,
        pvcs,
        now: ctx.clock.now(),
        gates: ctx.config.gates.clone(),
        nodes,
    }
}

/// Labels of the pods' nodes, only when the template has topologySpreadConstraints (the only reader).
fn node_labels(ctx: &Context, cs: &CloneSet, pods: &[Arc<Pod>]) -> NodeLabels {
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
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        if node.is_empty() || out.contains_key(node) {
            continue;
        }
        if let Some(n) = ctx.nodes.get(&ObjectRef::<Node>::new(node)) {
            out.insert(node.to_string(), n.metadata.labels.clone().unwrap_or_default());
        }
    }
    out
}
