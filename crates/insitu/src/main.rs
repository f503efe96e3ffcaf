//! `insitu`: the in-place-update CloneSet controller, the tools around it, and (the `lab` feature) its embedded
//! simulated cluster.
#![forbid(unsafe_code)]

use insitu::{adopt, agent_cmd, explain_cmd, logging, plan_cmd, rollout_cmd, run_cmd, set_cmd, status_cmd};
#[cfg(feature = "lab")]
use insitu_lab::{bench, demo, nodes_cmd, torture, up_cmd, whatif};

use std::process::ExitCode;

/// jemalloc, as Linkerd's policy-controller uses: glibc's malloc/free were ~35% of the embedded cluster's CPU
/// (docs/benchmarks.md, "Choices these figures rest on"). Built with its background thread on
/// (Cargo.toml): the pages a rollout frees go back to the system 10 s after they were last used (1 s in
/// `insitu run`: `allocator::CONTROLLER_DIRTY_DECAY_MS`).
#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use clap::{CommandFactory as _, FromArgMatches as _, Subcommand};

/// `insitu --version`: the package version, the commit it was built from (build.rs) and whether the lab is in.
#[cfg(feature = "lab")]
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("INSITU_GIT_COMMIT"),
    ", with the lab)"
);
#[cfg(not(feature = "lab"))]
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("INSITU_GIT_COMMIT"),
    ")"
);

/// The subcommands the `lab` feature adds (the simulated cluster's), for a clear answer from a build without it.
#[cfg(not(feature = "lab"))]
const LAB_COMMANDS: [&str; 6] = ["demo", "up", "nodes", "bench", "torture", "whatif"];

/// In-place update CloneSet controller (OpenKruise drop-in) and its command-line tools.
#[derive(clap::Parser)]
#[command(name = "insitu", version = VERSION, about)]
struct Cli {
    /// Log lines on stderr: `text` (coloured only on a terminal) or `json` (one object per line).
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug)]
struct CrdArgs {
    /// The conversion webhook's URL (an out-of-cluster `insitu run --webhook-url`); default: the in-cluster
    /// Service insitu-system/insitu-webhook. `insitu run` patches the CA bundle in either way.
    #[arg(long)]
    webhook_url: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the seed tutorial end to end on an embedded simulated cluster (no cluster needed).
    #[cfg(feature = "lab")]
    Demo(demo::DemoArgs),
    /// Start the simulated cluster + controller on 127.0.0.1 and write a kubeconfig for kubectl.
    #[cfg(feature = "lab")]
    Up(up_cmd::UpArgs),
    /// Run the controller against a real cluster (kubeconfig or in-cluster config).
    Run(run_cmd::RunArgs),
    /// Run the node agent on one node (kruise-daemon's role, over CRI): publishes
    /// `apps.kruise.io/runtime-containers-meta` and restarts containers whose env from pod metadata changed.
    Agent(agent_cmd::AgentArgs),
    /// Show what the controller would do next for a CloneSet and its pods (from `kubectl get -o yaml`), and why.
    Plan(plan_cmd::PlanArgs),
    /// Per pod of a CloneSet: is its next update in place or a recreate, and why (the exact fields); its
    /// stage (None/Preparing/Updating/Updated) and what it waits for. From the cluster or `-f FILE`.
    Explain(explain_cmd::ExplainArgs),
    /// Print the CloneSet CustomResourceDefinition (v1alpha1 + v1beta1, conversion webhook) as YAML.
    Crd(CrdArgs),
    /// Run simulated nodes (kubelet, scheduler, optional GC) against any apiserver, like kwok.
    #[cfg(feature = "lab")]
    Nodes(nodes_cmd::NodesArgs),
    /// Benchmark an in-place rollout of a large CloneSet on the embedded cluster (virtual time) and print figures;
    /// `bench seed-compare`: the seed's in-place vs recreate table.
    #[cfg(feature = "lab")]
    Bench(bench::BenchCmd),
    /// Seeded fault injection on the embedded cluster (virtual time) with an invariant checker.
    #[cfg(feature = "lab")]
    Torture(torture::TortureArgs),
    /// Predict a change's rollout before making it: the real controller on the embedded cluster built in the
    /// live state (or a dump), on virtual time; duration, batches, in place vs recreated and why, peaks, resizes
    /// that do not fit. Writes nothing to the cluster.
    #[cfg(feature = "lab")]
    Whatif(whatif::WhatifArgs),
    /// Show a CloneSet's rollout: progress, current batch, and each pod's lifecycle state and stage (`-w` watches).
    Status(status_cmd::StatusArgs),
    /// Change a CloneSet's template: `set image cloneset/NAME CONTAINER=IMAGE ...`.
    Set(set_cmd::SetArgs),
    /// Manage a CloneSet's rollout: pause, resume, undo, history, restart (as kubectl-kruise).
    Rollout(rollout_cmd::RolloutArgs),
    /// Take the CloneSets over from a stopped kruise-manager without touching a pod: Kruise's CloneSet webhooks
    /// removed, insitu's CRD (conversion by insitu's webhook), storage version migrated where needed.
    Adopt(adopt::AdoptArgs),
}

/// Installed as `kubectl-insitu`, the binary is a kubectl plugin: `kubectl insitu status ...` runs it with
/// argv[0] `kubectl-insitu`, and its help then says `kubectl insitu`.
fn command_name() -> &'static str {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let base = std::path::Path::new(&argv0)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if base == "kubectl-insitu" {
        "kubectl insitu"
    } else {
        "insitu"
    }
}

/// A lab subcommand asked of a build without the lab (the container image's): say so instead of clap's
/// "unrecognized subcommand".
#[cfg(not(feature = "lab"))]
fn without_lab(e: &clap::Error) -> Option<ExitCode> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidSubcommand {
        return None;
    }
    let Some(ContextValue::String(cmd)) = e.get(ContextKind::InvalidSubcommand) else {
        return None;
    };
    LAB_COMMANDS.contains(&cmd.as_str()).then(|| {
        eprintln!(
            "error: `{cmd}` runs on the embedded simulated cluster, which this build of insitu leaves out (built \
             without the `lab` feature, as the container image is); a build with the default features has it: \
             cargo install --path crates/insitu"
        );
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let matches = match Cli::command().bin_name(command_name()).try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            #[cfg(not(feature = "lab"))]
            if let Some(code) = without_lab(&e) {
                return code;
            }
            e.exit()
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let init_tracing = |default: &str| logging::init(default, cli.log_format);
    let result = match cli.command {
        #[cfg(feature = "lab")]
        Command::Demo(args) => {
            init_tracing("warn");
            demo::main(args)
        }
        #[cfg(feature = "lab")]
        Command::Up(args) => {
            init_tracing("info");
            up_cmd::main(args)
        }
        Command::Run(args) => {
            init_tracing("info");
            run_cmd::main(args)
        }
        Command::Agent(args) => {
            init_tracing("info");
            agent_cmd::main(args)
        }
        #[cfg(feature = "lab")]
        Command::Nodes(args) => {
            init_tracing("info");
            nodes_cmd::main(args)
        }
        #[cfg(feature = "lab")]
        Command::Bench(args) => {
            init_tracing("warn");
            bench::main(args)
        }
        #[cfg(feature = "lab")]
        Command::Torture(args) => {
            init_tracing("error");
            torture::main(args)
        }
        #[cfg(feature = "lab")]
        Command::Whatif(args) => {
            init_tracing("error");
            whatif::main(args)
        }
        Command::Status(args) => {
            init_tracing("warn");
            status_cmd::main(args)
        }
        Command::Set(args) => {
            init_tracing("warn");
            set_cmd::main(args)
        }
        Command::Rollout(args) => {
            init_tracing("warn");
            rollout_cmd::main(args)
        }
        Command::Adopt(args) => {
            init_tracing("warn");
            adopt::main(args)
        }
        Command::Plan(args) => plan_cmd::run(&args).map(|c| ExitCode::from(c.clamp(0, 255) as u8)),
        Command::Explain(args) => explain_cmd::main(args).map(|c| ExitCode::from(c.clamp(0, 255) as u8)),
        Command::Crd(args) => match args.webhook_url {
            Some(url) => {
                print!(
                    "{}",
                    insitu_api::crds::crd_yaml_for(&insitu_api::crd::WebhookTarget::Url(url))
                );
                Ok(ExitCode::SUCCESS)
            }
            None => {
                print!("{}", insitu_api::crds::crd_yaml());
                Ok(ExitCode::SUCCESS)
            }
        },
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

// docs/cli.md documents the whole command, lab included: checked in the default build.
#[cfg(all(test, feature = "lab"))]
mod cli_doc;
