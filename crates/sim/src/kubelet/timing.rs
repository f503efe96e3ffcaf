//! Timestamp arithmetic of the simulated kubelet (saturating, never negative).

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// `ts + d`, saturating.
pub fn add(ts: Timestamp, d: Duration) -> Timestamp {
    ts.saturating_add(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX))
        .unwrap_or(ts)
}

/// `a - b`, or zero if `a < b`.
pub fn since(a: Timestamp, b: Timestamp) -> Duration {
    Duration::try_from(a.duration_since(b)).unwrap_or(Duration::ZERO)
}
