//! Small utilities the rest of core shares: Go-compatible JSON, compact label maps, prepared label selectors.

pub mod gojson;
pub(crate) mod selector;
pub(crate) mod strmap;
