//! `insitu bench`: measured scenarios on the embedded cluster (virtual time): a large in-place rollout (default)
//! and the seed's in-place vs recreate comparison (`seed-compare`).

pub mod ceiling;
pub mod figures;
mod planning;
pub mod report;
pub mod rollout;
pub mod seed_compare;
pub mod timeline;

use std::process::ExitCode;

use anyhow::Context as _;

pub use rollout::BenchArgs;

/// `insitu bench [FLAGS]` runs the in-place rollout; `insitu bench seed-compare [FLAGS]` the comparison.
#[derive(clap::Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchCmd {
    #[command(subcommand)]
    pub scenario: Option<Scenario>,
    #[command(flatten)]
    pub rollout: BenchArgs,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum Scenario {
    /// The seed's comparison table: one image change rolled once InPlaceIfPossible and once ReCreate on the same
    /// embedded cluster (the seed's timings, a seeded failure model), measured side by side.
    SeedCompare(seed_compare::SeedCompareArgs),
    /// The apiserver's own write ceiling on a real cluster: the three writes of an in-place update per pod of a
    /// selector, from a parallel writer with no controller logic (scripts/bench-vs-kruise compares against it).
    Ceiling(ceiling::CeilingArgs),
    /// Writes a synthetic dump of a large settled CloneSet (pods, revision, nodes, a Pulled event) for timing
    /// `insitu whatif -f` on it (docs/benchmarks.md).
    WhatifDump(crate::whatif::synth::DumpArgs),
}

pub fn main(cmd: BenchCmd) -> anyhow::Result<ExitCode> {
    match cmd.scenario {
        Some(Scenario::SeedCompare(args)) => seed_compare::main(args),
        Some(Scenario::Ceiling(args)) => ceiling::main(args),
        Some(Scenario::WhatifDump(args)) => crate::whatif::synth::main(args),
        None => rollout::main(cmd.rollout),
    }
}

/// Runs a scenario on the simulated-time runtime (paused tokio clock) and drops the runtime before returning.
fn block_on<R>(scenario: impl Future<Output = anyhow::Result<R>>) -> anyhow::Result<R> {
    let rt = crate::simtime::runtime().context("starting the runtime")?;
    let report = rt.block_on(scenario)?;
    drop(rt);
    Ok(report)
}

/// Prints a scenario's report (one JSON object with `--json`, else its rendered table); the exit code is 1 when
/// the scenario found problems.
fn emit<R: serde::Serialize>(
    report: &R,
    json: bool,
    render: impl FnOnce(&R) -> String,
    problems: &[String],
) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", render(report));
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
