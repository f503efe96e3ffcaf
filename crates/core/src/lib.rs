//! Pure planning for CloneSets and Advanced StatefulSets: a snapshot (CloneSet, pods, revisions, now) in, a plan (actions, status, requeue) out.
//!
//! No kube client, no async runtime, no clock reads: the same snapshot always yields the same plan.
//!
//! The modules are grouped by what they are: the reconcile steps, named after the Kruise packages they follow
//! (`sync` is `pkg/controller/cloneset/sync` with the reconcile around it; `inplaceupdate`, `lifecycle`,
//! `revision` are `pkg/util/…`), the data model a plan reads and says (`model`), the explanation of a plan
//! (`explain`), and small utilities (`util`). Everything is private to core unless re-exported here: other crates
//! use exactly the items below.
#![forbid(unsafe_code)]
// A `pub` item no other crate can reach is `pub(crate)`, so the list below is the whole public surface.
#![warn(unreachable_pub)]

// The reconcile steps, as Kruise names them.
pub mod inplaceupdate;
pub mod launch_priority;
pub mod lifecycle;
pub mod predownload;
mod recreate;
pub mod revision;
// Kruise's Advanced StatefulSet: its own planner over the same in-place engine, revisions and actions.
pub mod statefulset;
mod sync;
// The data model: what a plan reads and what it says.
mod model;
// The explanation of a plan, for people and for tools.
pub mod explain;
// Small utilities.
mod util;

// The planner: one reconcile of one CloneSet (Kruise `doReconcile`), and its arithmetic.
pub use sync::{MAX_CREATES_PER_ROUND, budget, plan};
// Its input: one CloneSet and what it owns at one instant, the feature gates, and the loose-object reader.
pub use model::gates::FeatureGates;
pub use model::input;
pub use model::snapshot::{NodeLabels, Snapshot};
// Its output: the actions for the controller to carry out, with the status, budget and warnings.
pub use model::mutation::PodMutation;
pub use model::plan::{
    Action, Budget, Plan, PodRefusal, ReadinessMessage, ResizeOutcome, ResizeSeen, UpdateReason,
};
// Pods as a plan reads them: the summary kept between rounds, the packed form the caches hold, per-plan facts.
pub use model::pods;
pub use model::summary::{PackedPod, PodRef, PodSummary, Summariser, cloneset_fingerprint};
// Go's `encoding/json`, byte-exact: what Kruise hashes for a revision name.
pub use util::gojson;
