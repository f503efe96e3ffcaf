//! The `insitu` command's building blocks: the controller's runner and the user CLI (plan, explain, status, set,
//! rollout, adopt). The simulated cluster's commands live in `insitu-lab` (the `lab` feature).
#![forbid(unsafe_code)]

pub mod adopt;
pub mod agent_cmd;
pub mod allocator;
pub mod explain_cmd;
pub mod logging;
pub mod plan_cmd;
pub mod rollout_cmd;
pub mod rollout_view;
pub mod run_cmd;
pub mod set_cmd;
pub mod status_cmd;
pub mod target;
