//! The data model: what a plan reads (the snapshot, pod summaries and facts) and what it says (actions, status).

pub mod claim;
pub mod gates;
pub mod input;
pub mod mutation;
pub mod plan;
pub mod podmeta;
pub mod pods;
pub mod snapshot;
pub mod summary;
