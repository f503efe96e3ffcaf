//! Pure CloneSet planning: a snapshot (CloneSet, pods, revisions, now) in, a plan (actions, status, requeue) out.
//!
//! No kube client, no async runtime, no clock reads: the same snapshot always yields the same plan.
#![forbid(unsafe_code)]

pub mod explain;
pub mod inplaceupdate;
pub mod launch_priority;
pub mod lifecycle;
mod model;
pub mod predownload;
pub mod recreate;
pub mod revision;
pub mod sync;
mod util;

pub use model::{claim, gates, input, mutation, plan, podmeta, pods, snapshot, summary};
pub use gates::FeatureGates;
pub use plan::{
    Action, Budget, Plan, PodMutation, PodRefusal, ResizeOutcome, ResizeSeen, UpdateReason, Warning,
};
pub use inplaceupdate::{envmeta, vertical};
pub use explain::{podtable, podwhy};
pub use sync::plan;
pub use util::{gojson, strmap};
pub use sync::{budget, sort, status};
pub use snapshot::Snapshot;
pub use summary::PackedPod;
pub use summary::{PodRef, PodSummary};
