//! The `insitu` command's building blocks: the demo, the monitor table, the real-cluster runner, sim time.
#![forbid(unsafe_code)]

pub mod adopt;
pub mod allocator;
pub mod bench;
pub mod client;
pub mod demo;
pub mod explain_cmd;
pub mod image_flags;
pub mod logging;
pub mod monitor;
pub mod nodes_cmd;
pub mod plan_cmd;
pub mod rollout_cmd;
pub mod rollout_view;
pub mod run_cmd;
pub mod set_cmd;
pub mod simtime;
pub mod status_cmd;
pub mod target;
pub mod torture;
pub mod up_cmd;
pub mod up_kubeconfig;
pub mod up_tls;
