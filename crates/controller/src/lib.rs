//! The CloneSet controller's I/O side: caches → `insitu_core::plan` → writes, with expectations, events, metrics.
//!
//! Data flows one way per reconcile: `snapshot` (read caches) → `core::plan` (pure) → `execute` (writes).
//! The code path is the same against a real apiserver and the simulated one; only the `kube::Client` differs.
#![forbid(unsafe_code)]

pub mod acknowledged;
pub mod barrier;
pub mod client;
pub mod clock;
pub mod context;
pub mod correlator;
pub mod discovery;
pub mod error;
pub mod events;
pub mod execute;
pub mod expectations;
pub mod health;
pub mod initial_list;
pub mod leader;
pub mod lenient;
pub mod metrics;
pub mod offload;
pub mod predownload;
pub mod ratelimit;
pub mod reconcile;
pub mod recreate;
pub mod resize;
pub mod run;
pub mod snapshot;
pub mod statefulset;
pub mod stored;
pub mod webhook;
pub mod workload;

pub use clock::{Clock, SystemClock};
pub use context::{Config, Context};
pub use error::Error;
pub use metrics::Metrics;
pub use run::{run, run_with};
