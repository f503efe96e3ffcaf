//! Kruise's Advanced StatefulSet API (`statefulsets.apps.kruise.io`, v1beta1 stored, v1alpha1 served): types,
//! lossless conversion, defaults, validation (Rust and CEL) and the CRD.

pub mod cel;
pub mod conversion;
pub mod crd;
pub mod defaults;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

pub use v1beta1::{StatefulSet, StatefulSetSpec, StatefulSetStatus};
