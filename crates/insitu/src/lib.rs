//! The `insitu` command's building blocks: the demo, the monitor table, the real-cluster runner, sim time.
#![forbid(unsafe_code)]

pub mod bench_cmd;
pub mod demo;
pub mod monitor;
pub mod nodes_cmd;
pub mod plan_cmd;
pub mod run_cmd;
pub mod simtime;
pub mod torture;
pub mod up_cmd;
