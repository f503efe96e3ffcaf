//! CloneSet API (`apps.kruise.io/v1alpha1`): types, well-known keys, in-place annotations, CRD and validation.
#![forbid(unsafe_code)]

pub mod cloneset;
pub mod containermeta;
pub mod crd;
pub mod inplace;
pub mod keys;
pub mod quantity;
pub mod validation;

pub use cloneset::*;
