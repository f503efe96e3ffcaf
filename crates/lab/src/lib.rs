//! The laboratory around the controller: the commands built on the simulated cluster (`insitu demo`, `up`,
//! `nodes`, `bench`, `torture`) and its virtual time. The `insitu` binary bundles it behind its `lab` feature;
//! the container image leaves it out.
#![forbid(unsafe_code)]

pub mod bench;
pub mod demo;
pub mod image_flags;
pub mod nodes_cmd;
pub mod simtime;
pub mod torture;
pub mod up_cmd;
pub mod up_kubeconfig;
pub mod up_tls;
pub mod whatif;
