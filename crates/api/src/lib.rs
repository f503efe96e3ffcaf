//! CloneSet and Advanced StatefulSet APIs (`apps.kruise.io/v1alpha1` and `v1beta1`): types, conversion, well-known
//! keys, in-place annotations, CRDs, defaults and validation.
#![forbid(unsafe_code)]

pub mod cloneset;
pub mod containermeta;
pub mod conversion;
pub mod conversion_review;
pub mod crd;
pub mod crds;
pub mod defaults;
pub mod inplace;
pub mod jsondepth;
pub mod keys;
pub mod quantity;
pub mod statefulset;
pub mod v1beta1;
pub mod validation;

pub use cloneset::*;
