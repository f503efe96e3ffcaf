//! The controller's view of time, injected so grace periods follow the simulated clock when there is one.

use k8s_openapi::jiff::Timestamp;

/// Source of "now" for the controller.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// Real wall-clock time.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}
