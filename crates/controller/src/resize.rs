//! `insitu_resize_total{outcome}`: what became of in-place resizes (insitu's addition; Kruise counts none).
//!
//! Outcomes, with where each is counted:
//! - `requested`: the apiserver accepted the resize (`pods/resize` patch, or on servers before 1.32 the pod
//!   update carrying the resources), once per write;
//! - `failed`: the apiserver refused it (e.g. Forbidden: beyond the node's allocatable), once per attempt:
//!   as in Kruise the in-place start fails and the next round tries again;
//! - `deferred` / `infeasible`: the kubelet holds it (`PodResizePending` with that reason), once per pod
//!   and in-place update;
//! - `completed`: every container status reports the spec's resources (Kruise `IsUpdateCompleted`), once
//!   per pod and in-place update. Counted where the planner detects completion, not where the controller
//!   writes `InPlaceUpdateReady` back to True: a resource-only update under `NotRequired` never marks the
//!   pod not-ready, so it never writes that condition.

use std::collections::HashMap;
use std::sync::Mutex;

use insitu_core::{ResizeOutcome, ResizeSeen};

use crate::metrics::Metrics;

/// Entries kept at most: a pod deleted by someone else while its resize was held leaves one (the
/// controller's own deletes remove theirs); past this many the memory is dropped (a still-held resize may
/// then be counted once more).
const MAX_PODS: usize = 100_000;

/// The outcomes already counted, per pod uid: the in-place update they belong to and a bit per outcome.
#[derive(Default)]
pub struct Counted(Mutex<HashMap<String, (String, u8)>>);

fn bit(o: ResizeOutcome) -> u8 {
    match o {
        ResizeOutcome::Completed => 1,
        ResizeOutcome::Deferred => 2,
        ResizeOutcome::Infeasible => 4,
    }
}

impl Counted {
    /// True the first time this pod's in-place update `update` is seen with `outcome`.
    pub fn first_time(&self, uid: &str, update: &str, outcome: ResizeOutcome) -> bool {
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if m.len() >= MAX_PODS && !m.contains_key(uid) {
            m.clear();
        }
        let entry = m
            .entry(uid.to_string())
            .or_insert_with(|| (update.to_string(), 0));
        if entry.0 != update {
            *entry = (update.to_string(), 0);
        }
        let first = entry.1 & bit(outcome) == 0;
        entry.1 |= bit(outcome);
        first
    }

    /// The pod is gone.
    pub fn forget(&self, uid: &str) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uid);
    }

    pub fn len(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Counts the plan's newly seen outcomes.
pub fn observed(metrics: &Metrics, counted: &Counted, seen: &[ResizeSeen]) {
    for s in seen {
        if counted.first_time(&s.uid, &s.update, s.outcome) {
            metrics.resize(s.outcome.label());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(uid: &str, update: &str, outcome: ResizeOutcome) -> ResizeSeen {
        ResizeSeen {
            pod: "p".into(),
            uid: uid.into(),
            update: update.into(),
            outcome,
        }
    }

    fn value(m: &Metrics, outcome: &str) -> Option<String> {
        let line = format!("insitu_resize_total{{outcome=\"{outcome}\"}} ");
        m.render()
            .lines()
            .find_map(|l| l.strip_prefix(&line).map(str::to_string))
    }

    #[test]
    fn each_outcome_once_per_pod_and_update() {
        let (m, c) = (Metrics::new(), Counted::default());
        let held = [seen("u1", "r1@t1", ResizeOutcome::Deferred)];
        for _ in 0..5 {
            observed(&m, &c, &held);
        }
        assert_eq!(value(&m, "deferred").as_deref(), Some("1"));
        observed(&m, &c, &[seen("u1", "r1@t1", ResizeOutcome::Infeasible)]);
        observed(&m, &c, &[seen("u1", "r1@t1", ResizeOutcome::Completed)]);
        observed(&m, &c, &[seen("u1", "r1@t1", ResizeOutcome::Completed)]);
        assert_eq!(value(&m, "infeasible").as_deref(), Some("1"));
        assert_eq!(value(&m, "completed").as_deref(), Some("1"));
        // The pod's next resize, and another pod.
        observed(&m, &c, &[seen("u1", "r2@t2", ResizeOutcome::Deferred)]);
        observed(&m, &c, &[seen("u2", "r2@t2", ResizeOutcome::Deferred)]);
        assert_eq!(value(&m, "deferred").as_deref(), Some("3"));
        assert_eq!(c.len(), 2);
        c.forget("u1");
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn requested_and_failed_count_each_write() {
        let m = Metrics::new();
        m.resize("requested");
        m.resize("requested");
        m.resize("failed");
        assert_eq!(value(&m, "requested").as_deref(), Some("2"));
        assert_eq!(value(&m, "failed").as_deref(), Some("1"));
        assert_eq!(value(&m, "completed"), None);
    }
}
