//! A synthetic dump of a settled CloneSet (pods Ready at one revision, spread over nodes), as `kubectl get -o
//! yaml` would give it: for tests and for timing a what-if of a large CloneSet (`insitu bench whatif-dump`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use insitu_api::{CloneSet, keys};
use insitu_core::revision;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

#[derive(clap::Args, Debug, Clone)]
pub struct DumpArgs {
    /// CloneSet replicas.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Nodes the pods are spread over.
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,
    /// `updateStrategy.maxUnavailable`.
    #[arg(long, default_value = "50%")]
    pub max_unavailable: String,
    /// Write the dump (JSON, a kubectl List) here.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

/// The seed's CloneSet (`examples/cloneset-demo.yaml`) with `replicas` pods and requests, as stored (with a
/// uid and the status of a settled rollout).
pub fn cloneset(name: &str, replicas: usize, max_unavailable: Value) -> anyhow::Result<CloneSet> {
    let mut cs: CloneSet = serde_saphyr::from_str(crate::demo::SEED_YAML).context("the seed CloneSet")?;
    let v = json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "generation": 1,
                     "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "updateStrategy": {"maxUnavailable": max_unavailable},
                 "template": {"metadata": {"labels": {"app": name}}}}
    });
    let mut whole = serde_json::to_value(&cs)?;
    json_patch::merge(&mut whole, &v);
    whole["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "100m", "memory": "128Mi"}});
    // As stored: Kruise's defaulting webhook fills the template in, and the revision hash covers it.
    insitu_api::defaults::cloneset(&mut whole, true);
    cs = serde_json::from_value(whole)?;
    Ok(cs)
}

/// The dump: the CloneSet, its revision, `replicas` Ready pods over `nodes` nodes (32 cpu, 64Gi each) and a
/// `Pulled` event for its image.
pub fn dump(mut cs: CloneSet, nodes: usize) -> anyhow::Result<Vec<Value>> {
    let name = cs.metadata.name.clone().unwrap_or_default();
    let replicas = usize::try_from(cs.spec.replicas.unwrap_or(1)).unwrap_or(0);
    let ar = revision::active_revisions(&cs, &[]);
    let rev_name = ar.update.metadata.name.clone().unwrap_or_default();
    let mut status = cs.status.clone().unwrap_or_default();
    status.observed_generation = 1;
    status.replicas = i32::try_from(replicas)?;
    status.ready_replicas = status.replicas;
    status.available_replicas = status.replicas;
    status.updated_replicas = status.replicas;
    status.updated_ready_replicas = status.replicas;
    status.expected_updated_replicas = status.replicas;
    status.current_revision.clone_from(&rev_name);
    status.update_revision.clone_from(&rev_name);
    status.label_selector = format!("app={name}");
    cs.status = Some(status);
    let mut out = vec![serde_json::to_value(&cs)?];
    let mut rev = serde_json::to_value(&*ar.update)?;
    rev["kind"] = "ControllerRevision".into();
    rev["apiVersion"] = "apps/v1".into();
    out.push(rev);
    let now = Timestamp::from_second(1_764_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let nodes = nodes.max(1);
    for i in 0..nodes {
        out.push(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{i}"),
            "labels": {"kubernetes.io/hostname": format!("node-{i}")}},
            "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110000"}}}),
        );
    }
    let template = cs.spec.template.clone();
    let cs_arc = Arc::new(cs);
    for i in 0..replicas {
        let id = format!("{i:05}");
        let mut p = insitu_core::pods::new_pod(&cs_arc, &template, &rev_name, &id, now, false);
        p.metadata.name = Some(format!("{name}-{id}"));
        p.metadata.uid = Some(format!("pod-uid-{i}"));
        if let Some(l) = p.metadata.labels.as_mut() {
            l.insert(keys::LIFECYCLE_STATE_LABEL.into(), keys::lifecycle::NORMAL.into());
        }
        if let Some(s) = p.spec.as_mut() {
            s.node_name = Some(format!("node-{}", i % nodes));
        }
        let mut v = serde_json::to_value(&p)?;
        v["kind"] = "Pod".into();
        v["apiVersion"] = "v1".into();
        v["status"] = json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}, {"type": keys::INPLACE_UPDATE_READY, "status": "True"}]});
        out.push(v);
    }
    let image = template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    out.push(json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "pulled-1", "namespace": "default"},
        "reason": "Pulled", "message": format!("Successfully pulled image \"{image}\" in 2s (2s including waiting)")}));
    Ok(out)
}

/// `insitu bench whatif-dump`: writes the synthetic dump of a large CloneSet.
pub fn main(args: DumpArgs) -> anyhow::Result<ExitCode> {
    let mu = crate::bench::rollout::parse_max_unavailable(&args.max_unavailable)?;
    let cs = cloneset("big", args.pods, serde_json::to_value(mu)?)?;
    let items = dump(cs, args.nodes)?;
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let f =
        std::fs::File::create(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
    serde_json::to_writer(std::io::BufWriter::new(f), &list)?;
    eprintln!(
        "wrote {} ({} pods of CloneSet default/big on {} nodes); try: insitu whatif -f {} --set-image nginx=nginx:1.20.0",
        args.output.display(),
        args.pods,
        args.nodes,
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
