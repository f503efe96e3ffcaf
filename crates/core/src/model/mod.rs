//! The data model: what a plan reads (the snapshot, pod summaries and facts) and what it says (actions, status).

pub(crate) mod claim;
pub(crate) mod gates;
pub mod input;
pub(crate) mod mutation;
pub(crate) mod plan;
pub(crate) mod podmeta;
pub mod pods;
pub(crate) mod snapshot;
pub(crate) mod summary;
