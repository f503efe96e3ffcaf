//! Builds the embedded cluster in the live state (nodes, their other load, the CloneSet, its revisions, PVCs
//! and pods), starts the real controller on virtual time, applies the change and observes the rollout.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use insitu_api::CloneSet;
use insitu_api::quantity::parse_quantity;
use insitu_controller::{Config, Metrics};
use insitu_sim::Clock as _;
use insitu_sim::cluster::{SimCluster, SimConfig};
use insitu_sim::kubelet::{ImageProfile, ImageProfiles, NodeCapacity, StartModel};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::input::Inputs;
use super::observe::{self, Limits, Observed};
use crate::simtime;

/// The timing model: what the sim kubelet takes for what the cluster does not tell.
#[derive(Clone, Debug)]
pub struct Timing {
    /// Image → pull seconds (from `Pulled` events).
    pub pulls: BTreeMap<String, f64>,
    /// Pull seconds of an image no event timed.
    pub default_pull: f64,
    /// Container create + start.
    pub start: f64,
    /// A new pod's sandbox (before its first pull).
    pub sandbox: f64,
}

impl Timing {
    fn profiles(&self) -> ImageProfiles {
        let secs = |s: f64| Duration::from_secs_f64(s.max(0.0));
        let profile = |pull: f64| ImageProfile {
            pull: secs(pull),
            start: secs(self.start),
            ..ImageProfile::default()
        };
        let mut p = ImageProfiles {
            default: profile(self.default_pull),
            starts: StartModel {
                sandbox: secs(self.sandbox),
                ..StartModel::default()
            },
            ..ImageProfiles::default()
        };
        for (image, pull) in &self.pulls {
            p = p.with(image.clone(), profile(*pull));
        }
        p
    }
}

/// Options of one simulated rollout.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub timing: Timing,
    pub limits: Limits,
    pub seed: u64,
    /// Kruise feature gates the controller runs with.
    pub gates: insitu_core::FeatureGates,
}

/// The embedded cluster's view of the live nodes: sim node names in order, and each one's load.
#[derive(Clone, Debug, Default)]
pub struct NodeMap {
    /// Live name → sim name (`sim-node-N`).
    pub to_sim: BTreeMap<String, String>,
    pub to_live: BTreeMap<String, String>,
    /// The largest allocatable (cpu millicores, memory bytes): every sim node has it.
    pub capacity: Option<(i64, i64)>,
    /// Per live node: what the node cannot give the CloneSet (other pods, and allocatable below the largest).
    pub held: BTreeMap<String, (i64, i64)>,
    /// Per live node: allocatable (cpu millicores, memory bytes).
    pub allocatable: BTreeMap<String, (i64, i64)>,
}

fn quantity(
    m: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    k: &str,
) -> Option<i128> {
    parse_quantity(&m?.get(k)?.0)
}

/// Maps the live nodes (those given, and any a pod names) onto sim nodes and works out what each holds.
pub fn node_map(inp: &Inputs) -> NodeMap {
    let mut names: BTreeSet<String> = inp.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
    names.extend(inp.pods.iter().filter_map(|p| p.spec.as_ref()?.node_name.clone()));
    let mut m = NodeMap::default();
    for (i, n) in names.iter().enumerate() {
        m.to_sim.insert(n.clone(), format!("sim-node-{i}"));
        m.to_live.insert(format!("sim-node-{i}"), n.clone());
    }
    for n in &inp.nodes {
        let a = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
        if let (Some(cpu), Some(mem)) = (quantity(a, "cpu"), quantity(a, "memory")) {
            let v = (
                i64::try_from(cpu / 1_000_000).unwrap_or(i64::MAX),
                i64::try_from(mem / 1_000_000_000).unwrap_or(i64::MAX),
            );
            m.allocatable
                .insert(n.metadata.name.clone().unwrap_or_default(), v);
        }
    }
    if let (Some(c), Some(mm)) = (
        m.allocatable.values().map(|v| v.0).max(),
        m.allocatable.values().map(|v| v.1).max(),
    ) {
        m.capacity = Some((c, mm));
        for (n, (c0, m0)) in &m.allocatable {
            m.held.insert(n.clone(), (c - c0, mm - m0));
        }
    }
    for p in &inp.others {
        let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        let (c, mem) = observe::requests(p);
        let e = m.held.entry(n).or_default();
        e.0 += c;
        e.1 += mem;
    }
    m
}

/// Metadata a create keeps: name, namespace, labels, annotations, finalizers; owner references to the
/// CloneSet point at its new UID.
fn fresh_meta(meta: &ObjectMeta, owner: Option<&OwnerReference>) -> ObjectMeta {
    let owners = meta.owner_references.as_ref().map(|refs| {
        refs.iter()
            .filter(|r| r.kind == "CloneSet")
            .filter_map(|r| {
                owner.map(|o| OwnerReference {
                    controller: r.controller,
                    ..o.clone()
                })
            })
            .collect::<Vec<_>>()
    });
    ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        finalizers: meta.finalizers.clone(),
        owner_references: owners.filter(|o| !o.is_empty()),
        ..ObjectMeta::default()
    }
}

/// A live pod as the sim creates it: on its mapped node, without status and without the service account
/// token volume the apiserver injected (the sim serves no tokens; nothing the rollout does depends on it).
fn sim_pod(p: &Pod, owner: &OwnerReference, nodes: &NodeMap) -> Pod {
    let mut spec = p.spec.clone().unwrap_or_default();
    spec.node_name = spec.node_name.as_ref().and_then(|n| nodes.to_sim.get(n).cloned());
    let injected = |n: &str| n.starts_with("kube-api-access-");
    if let Some(v) = spec.volumes.as_mut() {
        v.retain(|v| !injected(&v.name));
    }
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        if let Some(m) = c.volume_mounts.as_mut() {
            m.retain(|m| !injected(&m.name));
        }
    }
    Pod {
        metadata: fresh_meta(&p.metadata, Some(owner)),
        spec: Some(spec),
        status: None,
    }
}

/// ConfigMaps the pods' env names (the sim kubelet fails a container whose `configMapKeyRef` does not
/// resolve): stand-ins with the keys asked for.
fn config_maps(
    pods: &[Pod],
    template: Option<&k8s_openapi::api::core::v1::PodSpec>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let specs = pods.iter().filter_map(|p| p.spec.as_ref()).chain(template);
    for s in specs {
        for c in s.containers.iter().chain(s.init_containers.iter().flatten()) {
            for e in c.env.iter().flatten() {
                if let Some(r) = e.value_from.as_ref().and_then(|v| v.config_map_key_ref.as_ref()) {
                    out.entry(r.name.clone()).or_default().insert(r.key.clone());
                }
            }
            for f in c.env_from.iter().flatten() {
                if let Some(r) = &f.config_map_ref {
                    out.entry(r.name.clone()).or_default();
                }
            }
        }
    }
    out
}

fn filler(node: &str, (cpu, mem): (i64, i64)) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("whatif-held-{node}"), "namespace": LOAD_NS},
        "spec": {"nodeName": node, "containers": [{"name": "held", "image": "whatif/held:1",
            "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": format!("{mem}")}}}]}
    }))
    .unwrap_or_default()
}

const LOAD_NS: &str = "whatif-load";

async fn ensure_ns(client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
    match api.create(&PostParams::default(), &n).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating namespace {ns}")),
    }
}

/// Node labels and taints as live (node selectors, affinity and tolerations then place pods alike).
async fn label_nodes(client: &kube::Client, inp: &Inputs, nodes: &NodeMap) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    for n in &inp.nodes {
        let Some(sim) = n.metadata.name.as_ref().and_then(|l| nodes.to_sim.get(l)) else {
            continue;
        };
        let patch = json!({"metadata": {"labels": n.metadata.labels},
                           "spec": {"taints": n.spec.as_ref().and_then(|s| s.taints.clone())}});
        api.patch(sim, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("labelling {sim}"))?;
    }
    Ok(())
}

/// Creates the CloneSet (with its stored status), its revisions, PVCs and pods, and the nodes' other load.
async fn seed(
    client: &kube::Client,
    inp: &Inputs,
    nodes: &NodeMap,
) -> anyhow::Result<(String, String, usize)> {
    let cs0: CloneSet = serde_json::from_value(inp.cloneset.clone()).context("the CloneSet")?;
    let ns = cs0.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let name = cs0.metadata.name.clone().context("the CloneSet has no name")?;
    ensure_ns(client, &ns).await?;
    ensure_ns(client, LOAD_NS).await?;
    label_nodes(client, inp, nodes).await?;
    let pods_load: Api<Pod> = Api::namespaced(client.clone(), LOAD_NS);
    for (live, held) in &nodes.held {
        if let Some(sim) = nodes.to_sim.get(live)
            && (held.0 > 0 || held.1 > 0)
        {
            pods_load
                .create(&PostParams::default(), &filler(sim, *held))
                .await?;
        }
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for (cm, keys) in config_maps(&inp.pods, cs0.spec.template.spec.as_ref()) {
        let data: BTreeMap<String, String> = keys.into_iter().map(|k| (k, String::new())).collect();
        let m: ConfigMap = serde_json::from_value(json!({"metadata": {"name": cm}, "data": data}))?;
        if let Err(e) = cms.create(&PostParams::default(), &m).await {
            tracing::debug!("configmap {cm}: {e}");
        }
    }
    let css: Api<CloneSet> = Api::namespaced(client.clone(), &ns);
    let mut create = cs0.clone();
    create.metadata = fresh_meta(&cs0.metadata, None);
    create.status = None;
    let created = css
        .create(&PostParams::default(), &create)
        .await
        .context("creating the CloneSet")?;
    if let Some(status) = &cs0.status {
        // The live generation counts the live CloneSet's spec changes; here the controller has seen none yet.
        let mut status = status.clone();
        status.observed_generation = created.metadata.generation.unwrap_or(1) - 1;
        let patch = json!({"status": status});
        css.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("restoring the CloneSet's status")?;
    }
    let owner = insitu_core::revision::controller_ref(&created);
    let revs: Api<k8s_openapi::api::apps::v1::ControllerRevision> = Api::namespaced(client.clone(), &ns);
    for r in &inp.revisions {
        let mut r2 = r.clone();
        r2.metadata = fresh_meta(&r.metadata, Some(&owner));
        revs.create(&PostParams::default(), &r2)
            .await
            .context("creating a revision")?;
    }
    let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    for c in &inp.pvcs {
        let mut spec = c.spec.clone().unwrap_or_default();
        spec.volume_name = None;
        let c2 = k8s_openapi::api::core::v1::PersistentVolumeClaim {
            metadata: fresh_meta(&c.metadata, Some(&owner)),
            spec: Some(spec),
            status: None,
        };
        pvcs.create(&PostParams::default(), &c2)
            .await
            .context("creating a PVC")?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pp = PostParams::default();
    let groups = ready_groups(&inp.pods);
    let last = groups.len().saturating_sub(1);
    for (i, (group, was_ready)) in groups.into_iter().enumerate() {
        let names: Vec<String> = group.iter().filter_map(|p| p.metadata.name.clone()).collect();
        futures::stream::iter(group.into_iter().map(|p| {
            let (pods, pp, owner) = (&pods, &pp, &owner);
            async move {
                pods.create(pp, &sim_pod(p, owner, nodes))
                    .await
                    .with_context(|| format!("creating pod {}", p.metadata.name.as_deref().unwrap_or("")))
            }
        }))
        .buffer_unordered(64)
        .try_collect::<Vec<_>>()
        .await?;
        // The next group is created and becomes Ready later, as it did live (a second apart: the resolution of
        // both times).
        if was_ready && i < last {
            wait_ready(&pods, &names).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let ready = inp
        .pods
        .iter()
        .filter(|p| insitu_core::explain::podtable::ready(p) == "True")
        .count();
    Ok((ns, name, ready))
}

/// Groups of live pods above which the oldest-Ready groups are started together.
const MAX_READY_GROUPS: usize = 60;

/// The live pods grouped by the second their Ready condition last turned True and then by the second they were
/// created, oldest first, and whether the group was Ready; pods not Ready come last. The controller updates the
/// most recently Ready pods first and, among pods Ready in the same second, the newest (Kruise's `ActivePods`
/// order): started group after group, the simulated pods keep that order (docs/whatif.md). Past
/// [`MAX_READY_GROUPS`] the oldest groups are merged: the newest are the ones the first batches take.
fn ready_groups(pods: &[Pod]) -> Vec<(Vec<&Pod>, bool)> {
    let mut by_second: BTreeMap<(i64, i64), Vec<&Pod>> = BTreeMap::new();
    let mut not_ready = Vec::new();
    for p in pods {
        let ready = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .filter(|c| c.status == "True");
        match ready {
            Some(c) => {
                let ready = c.last_transition_time.as_ref().map_or(0, |t| t.0.as_second());
                let created = p
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or(0, |t| t.0.as_second());
                by_second.entry((ready, created)).or_default().push(p);
            }
            None => not_ready.push(p),
        }
    }
    let mut groups: Vec<(Vec<&Pod>, bool)> = by_second.into_values().map(|g| (g, true)).collect();
    if groups.len() > MAX_READY_GROUPS {
        let newest = groups.split_off(groups.len() - (MAX_READY_GROUPS - 1));
        let oldest: Vec<&Pod> = groups.into_iter().flat_map(|(g, _)| g).collect();
        groups = std::iter::once((oldest, true)).chain(newest).collect();
    }
    if !not_ready.is_empty() {
        groups.push((not_ready, false));
    }
    groups
}

/// Waits (virtual time, at most 120 s: a pod that cannot become Ready here is `settle`'s to report) until the
/// named pods are Ready.
async fn wait_ready(pods: &Api<Pod>, names: &[String]) -> anyhow::Result<()> {
    for _ in 0..120 {
        let list = pods.list(&ListParams::default()).await?.items;
        let ready = list
            .iter()
            .filter(|p| p.metadata.name.as_ref().is_some_and(|n| names.contains(n)))
            .filter(|p| insitu_core::explain::podtable::ready(p) == "True")
            .count();
        if ready >= names.len() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tracing::warn!("what-if: a group of pods Ready live is not Ready after 120 s here; going on");
    Ok(())
}

/// Waits until `want` of the CloneSet's pods are Ready and the controller has observed the CloneSet, then a
/// little longer for the controller's first rounds to settle.
async fn settle(
    client: &kube::Client,
    ns: &str,
    name: &str,
    want: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let css: Api<CloneSet> = Api::namespaced(client.clone(), ns);
    let start = tokio::time::Instant::now();
    loop {
        let list = pods.list(&ListParams::default()).await?.items;
        let ready = list
            .iter()
            .filter(|p| insitu_core::explain::podtable::ready(p) == "True")
            .count();
        let cs = css.get(name).await?;
        let observed = cs.status.as_ref().is_some_and(|s| {
            s.observed_generation >= cs.metadata.generation.unwrap_or(0)
                && usize::try_from(s.ready_replicas).unwrap_or(0) >= want
        });
        if ready >= want && observed {
            tokio::time::sleep(Duration::from_secs(5)).await;
            return Ok(());
        }
        anyhow::ensure!(
            start.elapsed() < timeout,
            "the simulated pods did not become Ready ({ready} of {want}) within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// One simulated rollout of `new_cs` from the state in `inp`, with the controller, on virtual time. Must run
/// on [`simtime::runtime`].
pub async fn simulate(
    inp: &Inputs,
    new_cs: &Value,
    opts: &SimOptions,
) -> anyhow::Result<(Observed, Vec<Value>)> {
    let nodes = node_map(inp);
    let mut capacity = NodeCapacity::default();
    if let Some((cpu, mem)) = nodes.capacity {
        capacity.cpu = format!("{cpu}m");
        capacity.memory = mem.to_string();
    }
    let config = SimConfig {
        nodes: nodes.to_sim.len().max(1),
        seed: opts.seed,
        images: opts.timing.profiles(),
        events: false,
        capacity,
        image_pull_jobs: false,
        ..SimConfig::default()
    };
    let base = Timestamp::from_second(1_764_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let clock = insitu_sim::SimClock::new(base, 1.0);
    let cluster = SimCluster::start(config, clock.clone())
        .await
        .context("starting the simulated cluster")?;
    let client = cluster.client.clone();
    let w0 = std::time::Instant::now();
    let (ns, name, ready) = seed(&client, inp, &nodes).await?;
    tracing::info!("what-if: state built in {:?}", w0.elapsed());
    let config = Config {
        events: false,
        gates: opts.gates.clone(),
        ..Config::default()
    };
    let (controller, stop_tx) = simtime::spawn_controller_placed(
        client.clone(),
        config,
        &clock,
        Arc::new(Metrics::new()),
        simtime::Placement::SecondCore,
    );
    settle(&client, &ns, &name, ready, opts.limits.timeout).await?;
    tracing::info!("what-if: settled at {:?} ({} virtual)", w0.elapsed(), clock.now());
    let css: Api<CloneSet> = Api::namespaced(client.clone(), &ns);
    let spec = new_cs
        .get("spec")
        .cloned()
        .context("the new CloneSet has no spec")?;
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/spec", "value": spec}]))?;
    let change = async {
        css.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
            .context("applying the change to the simulated CloneSet")?;
        Ok(())
    };
    let mut observed = observe::observe(&client, &ns, &name, change, opts.limits).await?;
    tracing::info!("what-if: rollout simulated at {:?}", w0.elapsed());
    for p in &mut observed.pods {
        if let Some(live) = nodes.to_live.get(&p.node) {
            p.node.clone_from(live);
        }
    }
    // What the reasons are computed from: the changed CloneSet and every revision, as the controller has them.
    let mut docs = vec![serde_json::to_value(css.get(&name).await?)?];
    let revs: Api<k8s_openapi::api::apps::v1::ControllerRevision> = Api::namespaced(client.clone(), &ns);
    for r in revs.list(&ListParams::default()).await?.items {
        let mut v = serde_json::to_value(r)?;
        v["kind"] = "ControllerRevision".into();
        v["apiVersion"] = "apps/v1".into();
        docs.push(v);
    }
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
    drop(cluster);
    Ok((observed, docs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_start_in_the_order_they_became_ready_live() {
        let pod = |name: &str, ready: Option<(&str, &str)>| -> Pod {
            let conditions = ready
                .map(|(status, at)| json!([{"type": "Ready", "status": status, "lastTransitionTime": at}]));
            serde_json::from_value(json!({"metadata": {"name": name},
                "status": {"conditions": conditions.unwrap_or(json!([]))}}))
            .expect("pod")
        };
        let pods = [
            pod("c", Some(("True", "2026-01-01T00:00:09Z"))),
            pod("a", Some(("True", "2026-01-01T00:00:05Z"))),
            pod("x", Some(("False", "2026-01-01T00:00:01Z"))),
            pod("b", Some(("True", "2026-01-01T00:00:05Z"))),
            pod("n", None),
        ];
        let names: Vec<(Vec<&str>, bool)> = ready_groups(&pods)
            .into_iter()
            .map(|(g, r)| (g.iter().filter_map(|p| p.metadata.name.as_deref()).collect(), r))
            .collect();
        assert_eq!(
            names,
            vec![(vec!["a", "b"], true), (vec!["c"], true), (vec!["x", "n"], false)]
        );
        let many: Vec<Pod> = (0..100)
            .map(|i| {
                pod(
                    &format!("p{i}"),
                    Some(("True", &format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60))),
                )
            })
            .collect();
        let groups = ready_groups(&many);
        assert_eq!(groups.len(), MAX_READY_GROUPS);
        assert_eq!(groups[0].0.len(), 100 - (MAX_READY_GROUPS - 1));
        assert_eq!(
            groups.last().map(|g| g.0[0].metadata.name.as_deref()),
            Some(Some("p99"))
        );
    }

    #[test]
    fn nodes_map_with_their_load() {
        let node = |n: &str, cpu: &str, mem: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": n},
                "status": {"allocatable": {"cpu": cpu, "memory": mem}}}))
            .unwrap()
        };
        let pod = |node: &str, cpu: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}))
            .unwrap()
        };
        let inp = Inputs {
            cloneset: json!({}),
            pods: vec![pod("c", "1")],
            revisions: vec![],
            pvcs: vec![],
            nodes: vec![node("a", "4", "8Gi"), node("b", "2", "8Gi")],
            others: vec![pod("a", "500m")],
            pulls: BTreeMap::new(),
            notes: vec![],
        };
        let m = node_map(&inp);
        assert_eq!(m.to_sim.len(), 3, "the pod's node c is simulated too");
        assert_eq!(m.to_sim["a"], "sim-node-0");
        assert_eq!(m.capacity, Some((4000, 8 << 30)));
        assert_eq!(m.held["a"], (500, 1 << 30), "a's other pod");
        assert_eq!(m.held["b"], (2000, 0), "b has 2 cpu less than the largest node");
        assert!(!m.held.contains_key("c"), "no Node object: nothing known to hold");
    }
}
