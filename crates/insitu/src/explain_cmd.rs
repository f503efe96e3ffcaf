//! `insitu explain cloneset/NAME`: per pod, whether its next update goes in place or recreates it and why, its
//! stage and what it waits for — from the cluster, or offline from a file like `insitu plan -f`.

use std::path::PathBuf;

use anyhow::Context;
use insitu_api::CloneSet;
use insitu_api::validation::format_selector;
use insitu_core::explain::podwhy;
use insitu_core::{FeatureGates, input};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;

use crate::plan_cmd::Output;

#[derive(clap::Args, Debug, Clone)]
pub struct ExplainArgs {
    /// `cloneset/NAME` (or `cloneset NAME`) to read from the cluster; omit with `-f`.
    pub target: Vec<String>,
    #[command(flatten)]
    pub cluster: crate::target::ClusterArgs,
    /// Offline: a kubectl List or multi-document YAML/JSON with one CloneSet, its Pods and ControllerRevisions
    /// (`kubectl get cloneset,pods,controllerrevisions -o yaml`); `-` reads stdin.
    #[arg(short = 'f', long = "filename", conflicts_with = "target")]
    pub file: Option<PathBuf>,
    /// Kruise feature gates, as `insitu run --feature-gates`.
    #[arg(long = "feature-gates", default_value = "")]
    pub feature_gates: String,
    /// Output format (text: one block per pod; json: the same as objects).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

fn to_values<T: serde::Serialize>(
    items: Vec<T>,
    api_version: &str,
    kind: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    items
        .into_iter()
        .map(|i| {
            let mut v = serde_json::to_value(i)?;
            v["apiVersion"] = api_version.into();
            v["kind"] = kind.into();
            Ok(v)
        })
        .collect()
}

/// The CloneSet and what it may own, read from the cluster as `kubectl get` would print them.
async fn fetch(args: &ExplainArgs) -> anyhow::Result<Vec<serde_json::Value>> {
    let name = crate::target::cloneset_name(&args.target)?;
    let (client, ns) = crate::target::connect(&args.cluster, "explain").await?;
    fetch_with(client, &ns, &name).await
}

/// `fetch` with a client at hand (the sim tests explain through this).
pub async fn fetch_with(
    client: kube::Client,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let cs = Api::<CloneSet>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .with_context(|| format!("reading cloneset {ns}/{name}"))?;
    let selector = format_selector(&cs.spec.selector);
    let lp = ListParams::default().labels(&selector);
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .context("listing pods")?;
    let revs = Api::<ControllerRevision>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .context("listing controllerrevisions")?;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(client, ns)
        .list(&ListParams::default())
        .await
        .context("listing persistentvolumeclaims")?;
    let mut docs = vec![serde_json::to_value(&cs)?];
    docs.extend(to_values(pods.items, "v1", "Pod")?);
    docs.extend(to_values(revs.items, "apps/v1", "ControllerRevision")?);
    docs.extend(to_values(pvcs.items, "v1", "PersistentVolumeClaim")?);
    Ok(docs)
}

/// Runs `insitu explain`. Exit code 0 with the explanation printed, 2 on bad input.
pub fn main(args: ExplainArgs) -> anyhow::Result<i32> {
    let gates = match FeatureGates::parse(&args.feature_gates) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: --feature-gates: {e}");
            return Ok(2);
        }
    };
    let docs = match (&args.file, args.target.is_empty()) {
        (Some(f), _) => match crate::plan_cmd::read_docs(f) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(2);
            }
        },
        (None, false) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(fetch(&args))?
        }
        (None, true) => {
            eprintln!("error: name a CloneSet (cloneset/NAME) or give -f FILE");
            return Ok(2);
        }
    };
    match render(docs, Timestamp::now(), gates, args.output) {
        Ok(out) => print!("{out}"),
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    }
    Ok(0)
}

/// The explanation of `docs` at `now`: objects → snapshot → plan → per-pod text or JSON.
pub fn render(
    docs: Vec<serde_json::Value>,
    now: Timestamp,
    gates: FeatureGates,
    output: Output,
) -> Result<String, String> {
    let input = input::snapshot_from_objects(docs, now, gates)?;
    let plan = insitu_core::plan(&input.snapshot);
    let pods = podwhy::pods(&input.snapshot, &plan);
    Ok(match output {
        Output::Json => serde_json::to_string_pretty(&pods).map_err(|e| e.to_string())? + "\n",
        Output::Text => podwhy::text(&pods),
    })
}
