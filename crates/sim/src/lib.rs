//! The simulated cluster: an in-memory Kubernetes apiserver plus scheduler, kubelet/nodes, volume binder and GC, on
//! a virtual clock.
//!
//! Everything here is a black box to the controller: the controller only ever sees a `kube::Client`.
//! `sim` never depends on `insitu-core` or `insitu-controller`.
#![forbid(unsafe_code)]

pub mod apiserver;
mod boundpod;
pub mod clock;
pub mod cluster;
mod deep;
pub mod gc;
pub mod kubelet;
pub mod nodelifecycle;
pub mod scheduler;
pub mod store;
pub mod volumes;

pub use clock::{Clock, SimClock};
