//! Pure CloneSet planning: a snapshot (CloneSet, pods, revisions, now) in, a plan (actions, status, requeue) out.
//!
//! No kube client, no async runtime, no clock reads: the same snapshot always yields the same plan.
#![forbid(unsafe_code)]

pub mod claim;
pub mod explain;
pub mod gates;
pub mod gojson;
pub mod inplaceupdate;
pub mod input;
pub mod launch_priority;
pub mod lifecycle;
pub mod mutation;
pub mod plan;
pub mod podmeta;
pub mod pods;
pub mod podtable;
pub mod podwhy;
pub mod predownload;
pub mod recreate;
pub mod revision;
mod selector;
pub mod sync;
pub mod snapshot;
pub mod strmap;
pub mod summary;

pub use gates::FeatureGates;
pub use plan::{
    Action, Budget, Plan, PodMutation, PodRefusal, ResizeOutcome, ResizeSeen, UpdateReason, Warning,
};
pub use inplaceupdate::{envmeta, vertical};
pub use sync::plan;
pub use sync::{budget, sort, status};
pub use snapshot::Snapshot;
pub use summary::PackedPod;
pub use summary::{PodRef, PodSummary};
