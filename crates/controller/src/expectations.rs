//! Expectations: what the cache must show after our own writes before we plan again (Kruise `pkg/util/expectations`).
//!
//! Planning on a cache that has not yet seen our last writes would double-create or double-update pods.
//! Kruise keeps scale expectations by pod/PVC name and resourceVersion expectations by UID; we keep both per
//! CloneSet, keyed by object name, and check them against the reflector stores.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use insitu_core::PackedPod;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

/// One thing we wait to see in the cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expect {
    /// A pod we created must appear.
    PodCreated(String),
    /// A pod we deleted must disappear (or show a deletionTimestamp).
    PodDeleted(String),
    /// A pod we wrote must show at least this resourceVersion.
    PodVersion(String, u64),
    /// A revision we created must appear.
    RevisionCreated(String),
    /// A PVC we created must appear (Kruise ExpectScale(create, pvc)).
    PvcCreated(String),
    /// A PVC we deleted must disappear or show a deletionTimestamp (Kruise ExpectScale(delete, pvc)).
    PvcDeleted(String),
    /// A PVC we patched must show at least this resourceVersion.
    PvcVersion(String, u64),
}

#[derive(Default)]
struct Pending {
    items: Vec<(Expect, Timestamp)>,
}

/// Outcome of checking a CloneSet's expectations.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    Satisfied,
    /// Still waiting; ask again after this long at the latest.
    Waiting(Duration),
    /// Some expectations timed out and were dropped (a leak, reported as a metric).
    TimedOut(usize),
}

/// The reflector stores expectations are checked against.
#[derive(Clone, Copy)]
pub struct Caches<'a> {
    pub pods: &'a Store<PackedPod>,
    pub revisions: &'a Store<ControllerRevision>,
    pub pvcs: &'a Store<PersistentVolumeClaim>,
}

/// Per-CloneSet expectations, keyed by `namespace/name`.
#[derive(Default)]
pub struct Expectations {
    inner: Mutex<HashMap<String, Pending>>,
}

fn rv_of(rv: Option<&String>) -> u64 {
    rv.and_then(|v| v.parse().ok()).unwrap_or(0)
}

impl Expectations {
    /// Records an expectation for the CloneSet `key` at time `now`.
    pub fn expect(&self, key: &str, what: Expect, now: Timestamp) {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(key.to_string()).or_default().items.push((what, now));
    }

    /// Forgets everything about a CloneSet (it was deleted).
    pub fn forget(&self, key: &str) {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(key);
    }

    /// Drops satisfied expectations and tells whether the cache is fresh enough to plan on.
    pub fn check(
        &self,
        key: &str,
        namespace: &str,
        caches: Caches<'_>,
        now: Timestamp,
        timeout: Duration,
    ) -> Check {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(pending) = map.get_mut(key) else {
            return Check::Satisfied;
        };
        let pod = |name: &str| {
            caches
                .pods
                .get(&ObjectRef::<PackedPod>::new(name).within(namespace))
        };
        let pvc = |name: &str| {
            caches
                .pvcs
                .get(&ObjectRef::<PersistentVolumeClaim>::new(name).within(namespace))
        };
        pending.items.retain(|(what, _)| match what {
            Expect::PodCreated(name) => pod(name).is_none(),
            Expect::PodDeleted(name) => pod(name).is_some_and(|p| p.meta().deletion_timestamp.is_none()),
            Expect::PodVersion(name, rv) => {
                pod(name).is_some_and(|p| rv_of(p.meta().resource_version.as_ref()) < *rv)
            }
            Expect::RevisionCreated(name) => caches
                .revisions
                .get(&ObjectRef::<ControllerRevision>::new(name).within(namespace))
                .is_none(),
            Expect::PvcCreated(name) => pvc(name).is_none(),
            Expect::PvcDeleted(name) => pvc(name).is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
            Expect::PvcVersion(name, rv) => {
                pvc(name).is_some_and(|c| rv_of(c.metadata.resource_version.as_ref()) < *rv)
            }
        });
        if pending.items.is_empty() {
            map.remove(key);
            return Check::Satisfied;
        }
        let before = pending.items.len();
        let timeout_j = k8s_openapi::jiff::SignedDuration::try_from(timeout).unwrap_or_default();
        pending
            .items
            .retain(|(_, since)| now.duration_since(*since) < timeout_j);
        let dropped = before - pending.items.len();
        if dropped > 0 {
            return Check::TimedOut(dropped);
        }
        let oldest = pending.items.iter().map(|(_, t)| *t).min().unwrap_or(now);
        let waited = Duration::try_from(now.duration_since(oldest)).unwrap_or_default();
        Check::Waiting(timeout.saturating_sub(waited))
    }

    /// Number of CloneSets with pending expectations (for tests and metrics).
    pub fn pending(&self) -> usize {
        self.inner.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// The resourceVersion of a written pod as a number (Kruise compares them numerically).
pub fn pod_version(pod: &ObjectMeta) -> u64 {
    rv_of(pod.resource_version.as_ref())
}

/// The resourceVersion of a written PVC as a number.
pub fn pvc_version(pvc: &PersistentVolumeClaim) -> u64 {
    rv_of(pvc.resource_version().as_ref())
}
