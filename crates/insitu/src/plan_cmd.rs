//! `insitu plan`: what the controller would do next for one CloneSet in a file, and why (no cluster needed).

use std::io::Read;
use std::path::PathBuf;

use insitu_core::{FeatureGates, explain, input};
use k8s_openapi::jiff::Timestamp;

/// Output format of `insitu plan`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Output {
    /// `{"currentRevision","updateRevision","budget","actions","requeueAfterSeconds"}`.
    #[default]
    Json,
    /// One line per number and per action, then the reasoning.
    Text,
}

#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// A kubectl List or multi-document YAML/JSON with one CloneSet, its Pods and (optionally) its
    /// ControllerRevisions and PersistentVolumeClaims, e.g.
    /// `kubectl get cloneset,pods,controllerrevisions,pvc,nodes -o yaml`. `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
    /// The instant to plan at (RFC3339, e.g. 2026-01-01T00:00:00Z); default: now.
    #[arg(long)]
    pub now: Option<String>,
    /// Kruise feature gates, e.g. `CloneSetPartitionRollback=true,PreparingUpdateAsUpdate=true`.
    #[arg(long = "feature-gates", default_value = "")]
    pub feature_gates: String,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Json)]
    pub output: Output,
}

/// Bad input: message on stderr, exit code 2.
fn usage_error(msg: impl std::fmt::Display) -> anyhow::Result<i32> {
    eprintln!("error: {msg}");
    Ok(2)
}

/// The documents of a YAML/JSON file (`-`: stdin); the error says which file and why.
pub fn read_docs(file: &std::path::Path) -> Result<Vec<serde_json::Value>, String> {
    let mut text = String::new();
    if file.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("reading stdin: {e}"))?;
    } else {
        text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    }
    serde_saphyr::from_multiple(&text).map_err(|e| format!("{} is not valid YAML/JSON: {e}", file.display()))
}

/// Runs `insitu plan`. Returns the process exit code: 0 with a plan printed, 2 on bad input.
pub fn run(args: &PlanArgs) -> anyhow::Result<i32> {
    let gates = match FeatureGates::parse(&args.feature_gates) {
        Ok(g) => g,
        Err(e) => return usage_error(format!("--feature-gates: {e}")),
    };
    let now = match &args.now {
        Some(s) => match s.parse::<Timestamp>() {
            Ok(t) => t,
            Err(e) => return usage_error(format!("--now {s:?} is not an RFC3339 time: {e}")),
        },
        None => Timestamp::now(),
    };
    let docs = match read_docs(&args.file) {
        Ok(d) => d,
        Err(e) => return usage_error(e),
    };
    let input = match input::snapshot_from_objects(docs, now, gates) {
        Ok(i) => i,
        Err(e) => return usage_error(e),
    };
    let mut plan = insitu_core::plan(&input.snapshot);
    // Without ControllerRevisions in the file, report the stored current revision by name, as Kruise would
    // find it in the cluster.
    if let Some(cur) = &input.stored_current_revision
        && !input
            .snapshot
            .revisions
            .iter()
            .any(|r| r.metadata.name.as_deref() == Some(cur))
    {
        plan.current_revision = cur.clone();
    }
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&explain::json(&plan))?),
        Output::Text => print!("{}", explain::text(&plan, &input.notes)),
    }
    Ok(0)
}
