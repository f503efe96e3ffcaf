//! The sim's clock: wall time derived from tokio's clock, so paused (virtual) time drives every timestamp.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Source of "now" for everything in the sim. Shared by apiserver, kubelet, scheduler and GC.
pub trait Clock: Send + Sync + 'static {
    /// Current wall-clock time as the cluster sees it.
    fn now(&self) -> Timestamp;
    /// Sleep for a duration of cluster time.
    fn sleep(&self, d: Duration) -> tokio::time::Sleep;
}

/// Cluster time = `base` + elapsed tokio time × `speed`. Under `tokio::time::pause` this is virtual time.
#[derive(Clone, Debug)]
pub struct SimClock {
    base: Timestamp,
    start: tokio::time::Instant,
    speed: f64,
}

impl SimClock {
    /// A clock starting at `base`; must be called inside a tokio runtime.
    pub fn new(base: Timestamp, speed: f64) -> Arc<Self> {
        Arc::new(Self {
            base,
            start: tokio::time::Instant::now(),
            speed: if speed > 0.0 { speed } else { 1.0 },
        })
    }

    /// The start of cluster time.
    pub fn base(&self) -> Timestamp {
        self.base
    }

    /// How fast cluster time runs relative to tokio time.
    pub fn speed(&self) -> f64 {
        self.speed
    }
}

impl Clock for SimClock {
    fn now(&self) -> Timestamp {
        let elapsed = self.start.elapsed().mul_f64(self.speed);
        self.base
            .saturating_add(SignedDuration::try_from(elapsed).unwrap_or(SignedDuration::ZERO))
            .unwrap_or(self.base)
    }

    fn sleep(&self, d: Duration) -> tokio::time::Sleep {
        tokio::time::sleep(d.div_f64(self.speed))
    }
}
