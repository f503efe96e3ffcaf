//! `insitu whatif`: predicts a CloneSet's rollout before it happens, by running the real controller on the
//! embedded cluster (virtual time) built in the live state (docs/whatif.md).

pub mod change;
pub mod input;
pub mod observe;
mod plot;
pub mod report;
pub mod sim;
pub mod synth;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Value, json};

pub use change::Change;
pub use input::Inputs;
pub use report::Report;
pub use sim::{SimOptions, Timing};

/// Output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Output {
    #[default]
    Text,
    Json,
}

#[derive(clap::Args, Debug, Clone)]
pub struct WhatifArgs {
    /// The CloneSet: `cloneset/NAME` or `NAME` (optional when a file names exactly one).
    pub target: Option<String>,
    /// Namespace of the CloneSet (live mode).
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// A file, up to twice: a dump (the CloneSet with its pods, revisions, PVCs, nodes, other pods and
    /// events, e.g. `kubectl get cloneset,pods,controllerrevisions,pvc,events -o yaml; kubectl get
    /// nodes,pods -A -o yaml`) makes the what-if offline; a file with only a CloneSet is the new CloneSet
    /// to try (its spec replaces the current one).
    #[arg(short = 'f', long = "filename")]
    pub files: Vec<PathBuf>,
    /// Change a container's image: `CONTAINER=IMAGE` (`*=IMAGE` for all); repeatable.
    #[arg(long = "set-image")]
    pub set_image: Vec<String>,
    /// A JSON patch (a list) or merge patch (an object) of the CloneSet, JSON or YAML; repeatable.
    #[arg(long)]
    pub patch: Vec<PathBuf>,
    /// Also simulate the change under ReCreate (or InPlaceIfPossible when the CloneSet uses ReCreate).
    #[arg(long)]
    pub compare_recreate: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Draw pods updated over time for each strategy to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Pull time of an image no `Pulled` event timed, seconds (default: the median of the timed pulls, else 5).
    #[arg(long)]
    pub default_pull_seconds: Option<f64>,
    /// Container create + start, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub start_seconds: f64,
    /// A new pod's sandbox (network, IP) before its first pull, seconds.
    #[arg(long, default_value_t = 0.0)]
    pub sandbox_seconds: f64,
    /// A rollout in which no pod changes for this many simulated seconds is reported as not completing.
    #[arg(long, default_value_t = 600)]
    pub stall_seconds: u64,
    /// Kruise feature gates the controller runs with, e.g. `InPlaceWorkloadVerticalScaling=true`.
    #[arg(long = "feature-gates", default_value = "")]
    pub feature_gates: String,
    /// Seed for the simulated cluster's randomness (IPs, IDs).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `cloneset/NAME`, `clonesets.apps.kruise.io/NAME` or `NAME`.
fn target_name(t: &str) -> anyhow::Result<String> {
    let name = match t.split_once('/') {
        Some((kind, name)) => {
            anyhow::ensure!(
                matches!(
                    kind,
                    "cloneset" | "clonesets" | "cs" | "clonesets.apps.kruise.io" | "cloneset.apps.kruise.io"
                ),
                "{t}: only CloneSets (cloneset/NAME)"
            );
            name
        }
        None => t,
    };
    anyhow::ensure!(!name.is_empty(), "{t}: no name");
    Ok(name.to_string())
}

fn is_new_cloneset(docs: &[Value]) -> bool {
    let kinds: Vec<&str> = docs
        .iter()
        .filter(|d| !d.is_null())
        .map(|d| d.get("kind").and_then(Value::as_str).unwrap_or(""))
        .collect();
    kinds == ["CloneSet"]
}

/// The timing model with its defaults filled in, and the sentences that state it.
pub fn timing(args: &WhatifArgs, inp: &Inputs) -> (Timing, Vec<String>) {
    let mut timed: Vec<f64> = inp.pulls.values().copied().collect();
    timed.sort_by(f64::total_cmp);
    let (default_pull, why) = match (args.default_pull_seconds, timed.get(timed.len() / 2)) {
        (Some(s), _) => (s, "--default-pull-seconds".to_string()),
        (None, Some(m)) => (*m, "the median of the timed pulls".to_string()),
        (None, None) => (5.0, "no Pulled event timed a pull: the default".to_string()),
    };
    let mut a: Vec<String> = inp
        .pulls
        .iter()
        .map(|(i, s)| format!("pull {i}: {s:.2} s (kubelet Pulled events, median)"))
        .collect();
    a.push(format!(
        "pull of any other image: {default_pull:.2} s ({why}); once per node and image, as the kubelet caches it"
    ));
    a.push(format!(
        "container create + start {:.2} s; a new pod's sandbox {:.2} s; no start fails",
        args.start_seconds, args.sandbox_seconds
    ));
    a.push("readiness/startup probes, preStop, terminationGracePeriodSeconds and lifecycle hooks as the pods' specs and the template say; the application is ready at its first probe".into());
    a.push("the simulated scheduler places recreated pods by node selector, affinity and taints, fewest pods first; it does not refuse a pod for cpu/memory (the kubelet does refuse a resize)".into());
    (
        Timing {
            pulls: inp.pulls.clone(),
            default_pull,
            start: args.start_seconds,
            sandbox: args.sandbox_seconds,
        },
        a,
    )
}

/// The other strategy `--compare-recreate` tries.
fn other_strategy(cs: &Value) -> &'static str {
    match cs.pointer("/spec/updateStrategy/type").and_then(Value::as_str) {
        Some("ReCreate") => "InPlaceIfPossible",
        _ => "ReCreate",
    }
}

fn strategy(cs: &Value) -> String {
    cs.pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        .unwrap_or("ReCreate")
        .to_string()
}

/// Simulates `new_cs` (and the other strategies given) from `inp`; each run on a fresh embedded cluster and
/// runtime of its own (so this may be called from any thread, async or not).
pub fn predict(
    inp: &Inputs,
    new_cs: &Value,
    strategies: &[String],
    opts: &SimOptions,
) -> anyhow::Result<Vec<report::Run>> {
    let nodes = sim::node_map(inp);
    let mut runs = Vec::new();
    for s in strategies {
        let mut cs = new_cs.clone();
        cs["spec"]["updateStrategy"]["type"] = Value::String(s.clone());
        let (inp2, cs2, opts2) = (inp.clone(), cs, opts.clone());
        let (obs, docs) = std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    let rt = crate::simtime::runtime().context("starting the runtime")?;
                    rt.block_on(sim::simulate(&inp2, &cs2, &opts2))
                })
                .join()
                .map_err(|_| anyhow::anyhow!("the simulation panicked"))?
        })?;
        let planner = report::planner_reasons(&inp.pods, &docs);
        runs.push(report::run(s, obs, &planner, &nodes, template_requests(new_cs)));
    }
    Ok(runs)
}

/// Requests of a pod of the CloneSet's template (cpu millicores, memory bytes).
fn template_requests(cs: &Value) -> (i64, i64) {
    let spec = cs.pointer("/spec/template/spec").cloned().unwrap_or_default();
    let pod: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(json!({"spec": spec})).unwrap_or_default();
    observe::requests(&pod)
}

/// Reads the inputs: the dump if one is given, else the cluster (read-only).
fn gather(args: &WhatifArgs) -> anyhow::Result<(Inputs, Option<Value>, String)> {
    let mut dump = None;
    let mut new_cs = None;
    for f in &args.files {
        let docs = input::read_dump(f)?;
        if is_new_cloneset(&docs) {
            anyhow::ensure!(new_cs.is_none(), "-f: two files with only a CloneSet");
            new_cs = docs.into_iter().find(|d| !d.is_null());
        } else {
            anyhow::ensure!(dump.is_none(), "-f: two dumps");
            dump = Some((docs, f.display().to_string()));
        }
    }
    let name = args.target.as_deref().map(target_name).transpose()?.or_else(|| {
        new_cs
            .as_ref()
            .and_then(|c| c.pointer("/metadata/name")?.as_str().map(str::to_string))
    });
    if let Some((docs, file)) = dump {
        return Ok((
            input::from_docs(docs, name.as_deref())?,
            new_cs,
            format!("the dump {file}"),
        ));
    }
    let name = name.context("name the CloneSet (cloneset/NAME) or give a dump with -f")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let inp = rt.block_on(async {
        let client = insitu_controller::client::from_kubeconfig(args.kubeconfig.as_deref(), "whatif").await?;
        input::from_cluster(&client, &args.namespace, &name).await
    })?;
    Ok((inp, new_cs, format!("the cluster (namespace {})", args.namespace)))
}

pub fn main(args: WhatifArgs) -> anyhow::Result<ExitCode> {
    let wall = Instant::now();
    let gates = insitu_core::FeatureGates::parse(&args.feature_gates)
        .map_err(|e| anyhow::anyhow!("--feature-gates: {e}"))?;
    let (inp, new_file, source) = gather(&args)?;
    let mut changes = Vec::new();
    if let Some(c) = new_file {
        let c = match c.get("apiVersion").and_then(Value::as_str) {
            Some(insitu_api::conversion::V1BETA1) => insitu_api::conversion::to_v1alpha1(&c)
                .map_err(|e| anyhow::anyhow!("the new CloneSet: {e}"))?,
            _ => c,
        };
        changes.push(Change::Replace(c));
    }
    for p in &args.patch {
        let text = std::fs::read_to_string(p).with_context(|| format!("--patch {}", p.display()))?;
        changes.push(Change::patch(&text).with_context(|| format!("--patch {}", p.display()))?);
    }
    for s in &args.set_image {
        changes.push(Change::set_image(s)?);
    }
    anyhow::ensure!(
        !changes.is_empty(),
        "no change to try: give --set-image, --patch or -f NEW.yaml"
    );
    let new_cs = change::apply(&inp.cloneset, &changes)?;
    let (timing, assumptions) = timing(&args, &inp);
    let opts = SimOptions {
        timing,
        limits: observe::Limits {
            stall: Duration::from_secs(args.stall_seconds.max(1)),
            ..observe::Limits::default()
        },
        seed: args.seed,
        gates,
    };
    let mut strategies = vec![strategy(&new_cs)];
    if args.compare_recreate {
        strategies.push(other_strategy(&new_cs).to_string());
    }
    let runs = predict(&inp, &new_cs, &strategies, &opts)?;
    let ns = inp
        .cloneset
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let name = inp
        .cloneset
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let report = Report {
        cloneset: format!("{ns}/{name}"),
        replicas: new_cs
            .pointer("/spec/replicas")
            .and_then(Value::as_u64)
            .map_or(inp.pods.len(), |r| usize::try_from(r).unwrap_or(usize::MAX)),
        change: changes.iter().map(Change::describe).collect(),
        source,
        nodes: sim::node_map(&inp).to_sim.len(),
        assumptions,
        notes: inp.notes.clone(),
        runs,
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    if let Some(path) = &args.plot {
        plot::write_svg(path, &report).with_context(|| format!("--plot {}", path.display()))?;
    }
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Output::Text => print!("{}", report::render(&report)),
    }
    Ok(ExitCode::SUCCESS)
}
