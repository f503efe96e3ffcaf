//! Liveness and readiness of the controller, as `/healthz` and `/readyz` report them.
//!
//! Ready = every cache has synced, its watch is not failing right now (apiserver reachable), and no reconcile
//! is wedged; with leader election a standby is ready while its Lease rounds succeed (it has no caches).
//! Live = no reconcile has been running for longer than `wedged_after` (each reconcile is bounded: cache
//! waits time out, writes have client timeouts), so a stuck loop gets the process restarted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::Clock;

/// The caches the controller needs synced before it is ready.
pub const CACHES: [&str; 4] = [
    "clonesets",
    "pods",
    "controllerrevisions",
    "persistentvolumeclaims",
];

/// Leader-election standing, for readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// No leader election: this replica always acts.
    Off,
    /// Waiting for the Lease; `true` while the last Lease round reached the apiserver.
    Standby(bool),
    Leading,
}

/// Shared health state: written by the caches, reconciles and leader election, read by the probes.
pub struct Health {
    clock: Arc<dyn Clock>,
    synced: [AtomicBool; 4],
    /// Per cache: the last item of its watch stream was an error (apiserver down, list refused).
    failing: [AtomicBool; 4],
    leadership: Mutex<Leadership>,
    /// Reconciles in flight: id → start.
    in_flight: Mutex<HashMap<u64, Timestamp>>,
    next_id: AtomicU64,
    wedged_after: Duration,
}

/// What a probe reports: ok, or why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub ok: bool,
    pub reasons: Vec<String>,
}

impl Verdict {
    fn of(reasons: Vec<String>) -> Self {
        Verdict {
            ok: reasons.is_empty(),
            reasons,
        }
    }

    /// Body of the probe response.
    pub fn body(&self) -> String {
        if self.ok {
            "ok\n".into()
        } else {
            format!("{}\n", self.reasons.join("\n"))
        }
    }
}

fn index(cache: &str) -> Option<usize> {
    CACHES.iter().position(|c| *c == cache)
}

impl Health {
    pub fn new(clock: Arc<dyn Clock>, wedged_after: Duration) -> Self {
        Health {
            clock,
            synced: Default::default(),
            failing: Default::default(),
            leadership: Mutex::new(Leadership::Off),
            in_flight: Default::default(),
            next_id: AtomicU64::new(0),
            wedged_after,
        }
    }

    pub fn set_synced(&self, cache: &str) {
        if let Some(i) = index(cache) {
            self.synced[i].store(true, Ordering::Relaxed);
        }
    }

    /// Records whether the last item of `cache`'s watch stream was an error.
    pub fn set_failing(&self, cache: &str, failing: bool) {
        if let Some(i) = index(cache) {
            self.failing[i].store(failing, Ordering::Relaxed);
        }
    }

    pub fn set_leadership(&self, l: Leadership) {
        *self.leadership.lock().unwrap_or_else(|e| e.into_inner()) = l;
    }

    pub fn leadership(&self) -> Leadership {
        *self.leadership.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks a reconcile as running until the guard drops.
    pub fn reconciling(self: &Arc<Self>) -> ReconcileGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, self.clock.now());
        ReconcileGuard {
            health: self.clone(),
            id,
        }
    }

    fn wedged(&self) -> Option<String> {
        let now = self.clock.now();
        let oldest = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .min()
            .copied()?;
        let running = now.duration_since(oldest);
        let limit = k8s_openapi::jiff::SignedDuration::try_from(self.wedged_after).unwrap_or_default();
        (running > limit).then(|| {
            format!(
                "a reconcile has been running for {}s (limit {}s): the reconcile loop is wedged",
                running.as_secs(),
                self.wedged_after.as_secs()
            )
        })
    }

    /// `/healthz`: the reconcile loop is not wedged.
    pub fn live(&self) -> Verdict {
        Verdict::of(self.wedged().into_iter().collect())
    }

    /// `/readyz`: see the module doc.
    pub fn ready(&self) -> Verdict {
        let mut reasons = Vec::new();
        match self.leadership() {
            Leadership::Standby(true) => return Verdict::of(reasons),
            Leadership::Standby(false) => {
                reasons.push("standby: the leader-election Lease cannot be read or written".into());
                return Verdict::of(reasons);
            }
            Leadership::Off | Leadership::Leading => {}
        }
        for (i, cache) in CACHES.iter().enumerate() {
            if !self.synced[i].load(Ordering::Relaxed) {
                reasons.push(format!("cache {cache} has not synced"));
            } else if self.failing[i].load(Ordering::Relaxed) {
                reasons.push(format!(
                    "watch of {cache} is failing (apiserver unreachable or refusing)"
                ));
            }
        }
        reasons.extend(self.wedged());
        Verdict::of(reasons)
    }
}

/// Removes its reconcile from the in-flight set when dropped (also on error or panic).
pub struct ReconcileGuard {
    health: Arc<Health>,
    id: u64,
}

impl Drop for ReconcileGuard {
    fn drop(&mut self) {
        self.health
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Mutex<Timestamp>);
    impl Clock for Fixed {
        fn now(&self) -> Timestamp {
            *self.0.lock().unwrap()
        }
    }

    #[test]
    fn ready_needs_every_cache_and_a_live_loop() {
        let clock = Arc::new(Fixed(Mutex::new(Timestamp::from_second(1_000).unwrap())));
        let h = Arc::new(Health::new(clock.clone(), Duration::from_secs(60)));
        assert!(!h.ready().ok);
        assert!(h.live().ok);
        for c in CACHES {
            h.set_synced(c);
        }
        assert!(h.ready().ok, "{:?}", h.ready());
        h.set_failing("pods", true);
        assert_eq!(
            h.ready().reasons,
            ["watch of pods is failing (apiserver unreachable or refusing)"]
        );
        h.set_failing("pods", false);
        let guard = h.reconciling();
        *clock.0.lock().unwrap() = Timestamp::from_second(1_061).unwrap();
        assert!(!h.live().ok);
        assert!(!h.ready().ok);
        drop(guard);
        assert!(h.live().ok);
        h.set_leadership(Leadership::Standby(false));
        assert!(!h.ready().ok);
        h.set_leadership(Leadership::Standby(true));
        assert!(h.ready().ok);
    }
}
