//! Builds the planner's `Snapshot` for one CloneSet from the reflector caches (no API calls).

use std::sync::Arc;

use insitu_api::CloneSet;
use insitu_core::Snapshot;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

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
    }
}
