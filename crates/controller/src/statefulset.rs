//! The Advanced StatefulSet controller's round (Kruise `pkg/controller/statefulset`): the same gate,
//! expectations and executor as a CloneSet's round (`reconcile`), with the StatefulSet's own planner
//! (`insitu_core::statefulset`). Its rounds share the CloneSet controller's [`Reconciler`] (caches, events,
//! metrics, back-off); keys are prefixed so a StatefulSet and a CloneSet of one name never share a key.

use std::sync::Arc;
use std::time::Duration;

use insitu_api::statefulset::StatefulSet;
use insitu_api::statefulset::validation;
use insitu_core::statefulset::{StatefulSetSnapshot, claims};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::events::Severity;
use crate::expectations::{Caches, Check};
use crate::reconcile::Reconciler;
use crate::workload::Workload;
use crate::{Error, execute, ratelimit};

/// How long to wait before re-checking when the cache lags behind our writes.
const EXPECTATION_RECHECK: Duration = Duration::from_secs(5);

/// The set's key for expectations and back-off.
pub fn key(set: &StatefulSet) -> String {
    Workload::StatefulSet(set).key()
}

/// The Advanced StatefulSets that own `obj` (matched by group and kind, whatever the version).
pub fn owning_statefulsets<K: Resource>(obj: &K) -> Vec<ObjectRef<StatefulSet>> {
    crate::workload::owners_of_kind(obj, "StatefulSet")
}

/// The snapshot of one set from the caches: its controlled pods (unpacked) and revisions, and the PVCs its
/// volumeClaimTemplates name for the ordinals in use (claims are not owned under the `Retain` policy).
fn snapshot(r: &Reconciler, set: Arc<StatefulSet>) -> StatefulSetSnapshot {
    let ctx = &r.ctx;
    let ns = set.namespace().unwrap_or_default();
    let uid = set.uid().unwrap_or_default();
    let controlled = |refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference]| {
        refs.iter().any(|o| o.controller == Some(true) && o.uid == uid)
    };
    let pods: Vec<Arc<Pod>> = ctx
        .caches
        .pods
        .state()
        .iter()
        .filter(|p| p.meta().namespace.as_deref() == Some(ns.as_str()))
        .filter(|p| controlled(p.meta().owner_references.as_deref().unwrap_or_default()))
        .map(|p| Arc::new(p.unpack()))
        .collect();
    let revisions = ctx
        .caches
        .revisions
        .state()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(ns.as_str()) && controlled(r.owner_references()))
        .collect();
    let range = insitu_core::statefulset::OrdinalRange::of(&set);
    let mut ordinals: Vec<i32> = pods
        .iter()
        .filter_map(|p| insitu_core::statefulset::ordinal(p.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    ordinals.extend((range.start..range.end).filter(|o| range.holds(*o)));
    ordinals.sort_unstable();
    ordinals.dedup();
    let pvcs: Vec<Arc<PersistentVolumeClaim>> = ordinals
        .iter()
        .flat_map(|o| claims(&set, *o))
        .filter_map(|c| {
            let name = c.metadata.name.unwrap_or_default();
            ctx.caches.pvcs.get(&ObjectRef::new(&name).within(&ns))
        })
        .collect();
    StatefulSetSnapshot {
        set,
        pods,
        revisions,
        pvcs,
        now: ctx.clock.now(),
        gates: ctx.config.gates.clone(),
    }
}

/// Reconciles one Advanced StatefulSet; a success resets its back-off.
pub async fn reconcile(set: Arc<StatefulSet>, r: Arc<Reconciler>) -> Result<Action, Error> {
    let key = key(&set);
    let result = round(set, r.clone()).await;
    if result.is_ok() {
        r.rate_limiter.forget(&key);
    }
    result
}

async fn round(set: Arc<StatefulSet>, r: Arc<Reconciler>) -> Result<Action, Error> {
    let ctx = &r.ctx;
    let _running = ctx.health.reconciling();
    let ns = set.namespace().unwrap_or_default();
    let key = key(&set);
    if set.metadata.deletion_timestamp.is_some() {
        ctx.expectations.forget(&key);
        return Ok(Action::await_change());
    }
    let errs = validation::validate_create(&set);
    if !errs.is_empty() {
        let msg = insitu_api::validation::aggregate(&errs);
        ctx.events.emit_on(
            Workload::StatefulSet(&set),
            Severity::Warning,
            insitu_api::keys::events::INVALID_SPEC,
            format!("StatefulSet is invalid, not acting on it: {msg}"),
        );
        return Ok(Action::await_change());
    }
    let limit = ctx.config.cache_sync_timeout;
    let caches = &ctx.caches;
    let ready = async {
        caches.pods.wait_until_ready().await.is_ok()
            && caches.revisions.wait_until_ready().await.is_ok()
            && caches.pvcs.wait_until_ready().await.is_ok()
    };
    match tokio::time::timeout(limit, ready).await {
        Ok(true) => {}
        _ => {
            return Err(Error::Invalid(format!(
                "caches have not synced within {}s",
                limit.as_secs()
            )));
        }
    }
    let now = ctx.clock.now();
    let view = Caches {
        pods: &caches.pods,
        revisions: &caches.revisions,
        pvcs: &caches.pvcs,
    };
    match ctx
        .expectations
        .check(&key, &ns, view, now, ctx.config.expectation_timeout)
    {
        Check::Satisfied => {}
        Check::Waiting(left) => return Ok(Action::requeue(left.min(EXPECTATION_RECHECK))),
        Check::TimedOut(n) => {
            tracing::warn!(statefulset = %key, dropped = n, "expectations timed out; cache may be stale")
        }
    }
    let snap = snapshot(&r, set.clone());
    let plan = insitu_core::statefulset::plan(&snap);
    for line in &plan.explanation {
        tracing::debug!(statefulset = %key, "{line}");
    }
    execute::execute_statefulset(ctx, &r.executed, &set, &plan).await?;
    if let Some(e) = &plan.error {
        // Kruise returns the error from updateStatefulSet: reported, then retried with back-off.
        ctx.events.emit_on(
            Workload::StatefulSet(&set),
            Severity::Warning,
            insitu_api::keys::events::FAILED_UPDATE,
            e.clone(),
        );
        return Err(Error::Invalid(e.clone()));
    }
    Ok(match plan.requeue_after {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

/// Back-off after a failed round, as for CloneSets (`reconcile::error_policy`).
pub fn error_policy(set: Arc<StatefulSet>, err: &Error, r: Arc<Reconciler>) -> Action {
    let key = key(&set);
    let delay = ratelimit::requeue_delay(&r.rate_limiter, &key, err, tokio::time::Instant::now());
    tracing::warn!(statefulset = %key, error = %err, retry_ms = delay.as_millis() as u64, "reconcile failed");
    Action::requeue(delay)
}
