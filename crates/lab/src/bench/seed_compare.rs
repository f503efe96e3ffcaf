//! `insitu bench seed-compare`: the seed's comparison table (100 pods, in place vs recreate) measured on the
//! embedded cluster.
//!
//! One cluster, two CloneSets rolled one after the other with the seed's pod template (preStop `sleep 5`,
//! readiness probe after 5 s every 3 s, in-place `gracePeriodSeconds: 10`): `seed-inplace` under
//! `InPlaceIfPossible`, `seed-recreate` under `ReCreate`, each changing its image once (distinct image pairs so
//! that neither finds the other's new image already pulled). The sim kubelet pulls in 2 s, starts in 1 s, gives a
//! pod new on a node a sandbox first (`--sandbox-seconds`), and fails a container start attempt with a seeded
//! probability (`--new-pod-failure` for a pod's first containers, `--restart-failure` for a container restarted in
//! place), retried after the kubelet's 10 s back-off. The scheduler places recreated pods (new UIDs, new IPs).

pub mod plot;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use insitu_api::CloneSet;
use insitu_controller::{Config, Metrics};
use insitu_sim::Clock as _;
use insitu_sim::cluster::{SimCluster, SimConfig};
use insitu_sim::kubelet::{ImageProfiles, StartModel};
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde::Serialize;

use super::figures::{diff, samples, settled, wait_cloneset};
use super::rollout::parse_max_unavailable;
use super::timeline::{self, Sample};
use crate::simtime;

const CPU_REQUEST: &str = "100m";
const MEMORY_REQUEST: &str = "128Mi";

#[derive(clap::Args, Debug, Clone)]
pub struct SeedCompareArgs {
    /// CloneSet replicas (the seed's table is for 100).
    #[arg(long, default_value_t = 100)]
    pub pods: usize,
    /// Seed for the cluster's randomness (IDs, IPs, the failure draws).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the figures as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write an SVG timeline (updated / ready / unavailable pods over time, per strategy) to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Simulated nodes.
    #[arg(long, default_value_t = 10)]
    pub nodes: usize,
    /// `updateStrategy.maxUnavailable` for both strategies (the seed's demo uses 1 for its 3 pods; its table's
    /// 100 pods are not given one: 10% is ten at a time).
    #[arg(long, default_value = "10%")]
    pub max_unavailable: String,
    /// Chance that a start attempt of a pod new on its node fails (sandbox, IP, volumes, cold pull), 0..1.
    #[arg(long, default_value_t = 0.05)]
    pub new_pod_failure: f64,
    /// Chance that a start attempt of a container restarted in place fails, 0..1.
    #[arg(long, default_value_t = 0.01)]
    pub restart_failure: f64,
    /// Pod sandbox creation (CRI RunPodSandbox + CNI) before a new pod's first pull, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub sandbox_seconds: f64,
    /// `inPlaceUpdateStrategy.gracePeriodSeconds` of the in-place run (the seed's template has 10).
    #[arg(long, default_value_t = 10)]
    pub grace_seconds: i32,
    /// Give up after this many cluster seconds (per phase).
    #[arg(long, default_value_t = 7200)]
    pub timeout: u64,
}

/// One strategy's measured rollout.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Run {
    pub strategy: String,
    pub cloneset: String,
    pub old_image: String,
    pub new_image: String,
    pub total_seconds: f64,
    pub wall_seconds: f64,
    pub ip_changes: usize,
    pub uid_changes: usize,
    pub peak_extra_pods: usize,
    pub peak_extra_pods_percent: f64,
    pub peak_extra_cpu_percent: f64,
    pub peak_extra_memory_percent: f64,
    /// Pods whose update hit at least one failed container start (retried by the kubelet).
    pub failed_updates: usize,
    pub failed_updates_percent: f64,
    /// Writes the apiserver served during the rollout (all clients), per pod.
    pub api_writes_per_pod: f64,
    /// Writes the controller made, per pod.
    pub controller_writes_per_pod: f64,
    pub max_unavailable_seen: usize,
    pub timeline: Vec<Sample>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SeedCompareReport {
    pub pods: usize,
    pub nodes: usize,
    pub seed: u64,
    pub max_unavailable: String,
    pub grace_seconds: i32,
    pub model: BTreeMap<String, String>,
    pub in_place: Run,
    pub recreate: Run,
    /// In place ÷ recreate total time.
    pub time_ratio: f64,
    pub problems: Vec<String>,
}

pub fn main(args: SeedCompareArgs) -> anyhow::Result<ExitCode> {
    let report = super::block_on(run(args.clone()))?;
    if let Some(path) = &args.plot {
        plot::write_svg(path, &report)
            .with_context(|| format!("--plot {}: writing the SVG", path.display()))?;
    }
    super::emit(&report, args.json, render, &report.problems)
}

fn ppm(p: f64, flag: &str) -> anyhow::Result<u32> {
    anyhow::ensure!(
        (0.0..=1.0).contains(&p),
        "{flag} {p}: must be a probability between 0 and 1"
    );
    Ok((p * 1e6).round() as u32)
}

/// The seed's CloneSet (`examples/cloneset-demo.yaml`) renamed, scaled, with requests and the given strategy.
fn cloneset(name: &str, strategy: &str, image: &str, ctx: &Ctx) -> anyhow::Result<CloneSet> {
    let (pods, mu) = (ctx.pods, &ctx.mu);
    let mut cs: CloneSet =
        serde_saphyr::from_str(crate::demo::SEED_YAML).context("parsing the seed CloneSet")?;
    let labels: BTreeMap<String, String> = [("app".to_string(), name.to_string())].into();
    cs.metadata.name = Some(name.into());
    cs.metadata.labels = Some(labels.clone());
    cs.spec.replicas = Some(i32::try_from(pods).context("--pods")?);
    cs.spec.selector.match_labels = Some(labels.clone());
    if let Some(m) = cs.spec.template.metadata.as_mut() {
        m.labels = Some(labels);
    }
    if let Some(c) = cs
        .spec
        .template
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
    {
        c.image = Some(image.into());
        c.resources = Some(ResourceRequirements {
            requests: Some(
                [
                    ("cpu".to_string(), Quantity(CPU_REQUEST.into())),
                    ("memory".to_string(), Quantity(MEMORY_REQUEST.into())),
                ]
                .into(),
            ),
            ..Default::default()
        });
    }
    let us = cs.spec.update_strategy.get_or_insert_with(Default::default);
    us.type_ = Some(strategy.into());
    us.max_unavailable = Some(mu.clone());
    us.in_place_update_strategy
        .get_or_insert_with(Default::default)
        .grace_period_seconds = Some(ctx.grace_seconds);
    Ok(cs)
}

struct Ctx {
    client: kube::Client,
    cluster: SimCluster,
    clock: Arc<insitu_sim::SimClock>,
    metrics: Arc<Metrics>,
    pods: usize,
    timeout: u64,
    mu: IntOrString,
    grace_seconds: i32,
}

fn identities(pods: &[Pod]) -> (BTreeSet<String>, BTreeSet<String>) {
    let live = pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none());
    let uids = live.clone().filter_map(|p| p.uid()).collect();
    let ips = live
        .filter_map(|p| p.status.as_ref().and_then(|s| s.pod_ip.clone()))
        .collect();
    (uids, ips)
}

fn percent(extra: f64, base: f64) -> f64 {
    if base > 0.0 { 100.0 * extra / base } else { 0.0 }
}

/// Creates the CloneSet, waits until its pods are Ready, changes the image and measures until every pod is
/// updated and Ready; then deletes it and waits for its pods to be gone.
async fn roll(ctx: &Ctx, name: &str, strategy: &str, images: (&str, &str)) -> anyhow::Result<Run> {
    let n = i32::try_from(ctx.pods).context("--pods")?;
    let css: Api<CloneSet> = Api::namespaced(ctx.client.clone(), "default");
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), "default");
    let selector = format!("app={name}");
    let mut cs_events = Box::pin(
        watcher(
            css.clone(),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        )
        .applied_objects(),
    );
    let cs = cloneset(name, strategy, images.0, ctx)?;
    css.create(&PostParams::default(), &cs)
        .await
        .with_context(|| format!("creating CloneSet {name}"))?;
    let what = format!("{name}: all pods Ready");
    let ready = wait_cloneset(
        &mut cs_events,
        &ctx.clock,
        ctx.timeout,
        &what,
        |_| {},
        |c| settled(c, n),
    )
    .await?;
    let old_revision = ready.status.clone().unwrap_or_default().update_revision;
    let before = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let (uids0, ips0) = identities(&before);
    let steady = timeline_steady(&before);

    let (observed, watch) = timeline::spawn(
        pods_api.clone(),
        selector.clone(),
        ctx.clock.clone(),
        images.1.to_string(),
        ctx.pods,
    );
    let stats0 = ctx.cluster.apiserver.stats();
    let metrics0 = samples(&ctx.metrics.render());
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": images.1}
    ]))?;
    let (wall, t0) = (Instant::now(), ctx.clock.now());
    css.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .with_context(|| format!("patching {name}'s image"))?;
    let what = format!("{name}: all pods updated and Ready");
    wait_cloneset(
        &mut cs_events,
        &ctx.clock,
        ctx.timeout,
        &what,
        |_| {},
        |c| {
            settled(c, n)
                && c.status
                    .as_ref()
                    .is_some_and(|s| s.update_revision != old_revision)
        },
    )
    .await?;
    let total = ctx.clock.now().duration_since(t0).as_secs_f64();
    let wall = wall.elapsed().as_secs_f64();
    let stats1 = ctx.cluster.apiserver.stats();
    let metrics1 = samples(&ctx.metrics.render());
    // Let the watch catch up with the last events before reading it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    watch.abort();
    let after = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let (uids1, ips1) = identities(&after);
    let pods_f = ctx.pods as f64;
    let controller_writes: f64 = diff(&metrics1, &metrics0, "insitu_api_writes_total")
        .iter()
        .map(|(_, d)| d)
        .sum();
    let run = {
        let o = observed
            .lock()
            .map_err(|_| anyhow::anyhow!("timeline lock poisoned"))?;
        let failed = o.failed.len();
        Run {
            strategy: strategy.into(),
            cloneset: name.into(),
            old_image: images.0.into(),
            new_image: images.1.into(),
            total_seconds: total,
            wall_seconds: wall,
            ip_changes: ips1.difference(&ips0).count(),
            uid_changes: uids1.difference(&uids0).count(),
            peak_extra_pods: o.peak_pods.saturating_sub(ctx.pods),
            peak_extra_pods_percent: percent(o.peak_pods.saturating_sub(ctx.pods) as f64, pods_f),
            peak_extra_cpu_percent: percent((o.peak_cpu_milli - steady.0).max(0) as f64, steady.0 as f64),
            peak_extra_memory_percent: percent(
                (o.peak_memory_bytes - steady.1).max(0) as f64,
                steady.1 as f64,
            ),
            failed_updates: failed,
            failed_updates_percent: percent(failed as f64, pods_f),
            api_writes_per_pod: (stats1.total_writes() - stats0.total_writes()) as f64 / pods_f,
            controller_writes_per_pod: controller_writes / pods_f,
            max_unavailable_seen: o.samples.iter().map(|s| s.unavailable).max().unwrap_or(0),
            timeline: o.samples.clone(),
        }
    };
    css.delete(name, &DeleteParams::default()).await?;
    let start = ctx.clock.now();
    while !pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .is_empty()
    {
        anyhow::ensure!(
            ctx.clock.now().duration_since(start).as_secs_f64() < ctx.timeout as f64,
            "{name}: pods not gone within {} cluster seconds of deleting the CloneSet",
            ctx.timeout
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(run)
}

/// Requests (cpu millicores, memory bytes) of the settled pods: the steady state the peaks are compared with.
fn timeline_steady(pods: &[Pod]) -> (i64, i64) {
    let q = |p: &Pod, k: &str| -> i64 {
        p.spec
            .iter()
            .flat_map(|s| &s.containers)
            .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get(k))
            .filter_map(|q| insitu_api::quantity::parse_quantity(&q.0))
            .map(|v| i64::try_from(v).unwrap_or(i64::MAX))
            .sum()
    };
    pods.iter().fold((0, 0), |(c, m), p| {
        (c + q(p, "cpu") / 1_000_000, m + q(p, "memory") / 1_000_000_000)
    })
}

/// Runs both strategies on one cluster and gathers the figures.
pub async fn run(args: SeedCompareArgs) -> anyhow::Result<SeedCompareReport> {
    anyhow::ensure!(args.pods > 0, "--pods must be positive");
    let mu = parse_max_unavailable(&args.max_unavailable)?;
    let starts = StartModel {
        sandbox: Duration::from_secs_f64(args.sandbox_seconds.max(0.0)),
        new_pod_failure_ppm: ppm(args.new_pod_failure, "--new-pod-failure")?,
        restart_failure_ppm: ppm(args.restart_failure, "--restart-failure")?,
    };
    let images = ImageProfiles {
        starts,
        ..ImageProfiles::default()
    };
    let profile = images.default;
    let model: BTreeMap<String, String> = [
        (
            "image pull (once per node and image)",
            format!("{:?}", profile.pull),
        ),
        ("container create + start", format!("{:?}", profile.start)),
        ("pod sandbox (new pods only)", format!("{:?}", starts.sandbox)),
        (
            "start attempt failure, pod new on its node",
            format!("{}", args.new_pod_failure),
        ),
        (
            "start attempt failure, container restarted in place",
            format!("{}", args.restart_failure),
        ),
        (
            "retry after a failed attempt",
            "kubelet back-off 10 s, doubling".into(),
        ),
        (
            "requests per pod",
            format!("cpu {CPU_REQUEST}, memory {MEMORY_REQUEST}"),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let sim_config = SimConfig {
        nodes: args.nodes.max(1),
        seed: args.seed,
        images,
        ..Default::default()
    };
    let base = Timestamp::from_second(1_764_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let clock = insitu_sim::SimClock::new(base, 1.0);
    let cluster = SimCluster::start(sim_config, clock.clone())
        .await
        .context("starting the simulated cluster")?;
    let client = cluster.client.clone();
    let metrics = Arc::new(Metrics::new());
    let (controller, stop_tx) =
        simtime::spawn_controller(client.clone(), Config::default(), &clock, metrics.clone());
    let ctx = Ctx {
        client,
        cluster,
        clock,
        metrics,
        pods: args.pods,
        timeout: args.timeout,
        mu,
        grace_seconds: args.grace_seconds,
    };
    let in_place = roll(
        &ctx,
        "seed-inplace",
        "InPlaceIfPossible",
        ("nginx:1.19.0", "nginx:1.20.0"),
    )
    .await?;
    let recreate = roll(
        &ctx,
        "seed-recreate",
        "ReCreate",
        ("nginx:1.21.0", "nginx:1.22.0"),
    )
    .await?;
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
    drop(ctx);

    let mut problems = Vec::new();
    if in_place.ip_changes > 0 || in_place.uid_changes > 0 {
        problems.push(format!(
            "in place changed {} IPs and {} UIDs (expected 0)",
            in_place.ip_changes, in_place.uid_changes
        ));
    }
    if in_place.peak_extra_pods > 0 {
        problems.push(format!(
            "in place ran {} pods above the replicas (expected none)",
            in_place.peak_extra_pods
        ));
    }
    if recreate.uid_changes != args.pods {
        problems.push(format!(
            "recreate changed {} UIDs of {} pods",
            recreate.uid_changes, args.pods
        ));
    }
    Ok(SeedCompareReport {
        pods: args.pods,
        nodes: args.nodes,
        seed: args.seed,
        max_unavailable: args.max_unavailable.clone(),
        grace_seconds: args.grace_seconds,
        model,
        time_ratio: in_place.total_seconds / recreate.total_seconds.max(1e-9),
        in_place,
        recreate,
        problems,
    })
}

fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        if a == 0.0 { "–".into() } else { "∞".into() }
    } else {
        format!("{:.2}", a / b)
    }
}

/// The seed's table, measured.
pub fn render(r: &SeedCompareReport) -> String {
    use std::fmt::Write as _;
    let (a, b) = (&r.in_place, &r.recreate);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "insitu bench seed-compare — {} pods on {} simulated nodes, maxUnavailable {}, seed {}; cluster time is virtual",
        r.pods, r.nodes, r.max_unavailable, r.seed
    );
    let _ = writeln!(
        s,
        "the seed's pod template (preStop sleep 5, readiness after 5 s every 3 s), in-place gracePeriodSeconds {}",
        r.grace_seconds
    );
    let _ = writeln!(s, "model:");
    for (k, v) in &r.model {
        let _ = writeln!(s, "  {k:<52} {v}");
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "  {:<40} {:>16} {:>16} {:>10}",
        "", "InPlaceIfPossible", "ReCreate", "ratio"
    );
    let mut line = |k: &str, x: String, y: String, q: String| {
        let _ = writeln!(s, "  {k:<40} {x:>16} {y:>16} {q:>10}");
    };
    line(
        "total time (virtual s)",
        format!("{:.1}", a.total_seconds),
        format!("{:.1}", b.total_seconds),
        ratio(a.total_seconds, b.total_seconds),
    );
    line(
        "pod IP changes",
        a.ip_changes.to_string(),
        b.ip_changes.to_string(),
        ratio(a.ip_changes as f64, b.ip_changes as f64),
    );
    line(
        "pod UID changes",
        a.uid_changes.to_string(),
        b.uid_changes.to_string(),
        ratio(a.uid_changes as f64, b.uid_changes as f64),
    );
    line(
        "peak pods above steady state",
        format!("+{} (+{:.0}%)", a.peak_extra_pods, a.peak_extra_pods_percent),
        format!("+{} (+{:.0}%)", b.peak_extra_pods, b.peak_extra_pods_percent),
        String::new(),
    );
    line(
        "peak requested cpu / memory above steady",
        format!(
            "+{:.0}% / +{:.0}%",
            a.peak_extra_cpu_percent, a.peak_extra_memory_percent
        ),
        format!(
            "+{:.0}% / +{:.0}%",
            b.peak_extra_cpu_percent, b.peak_extra_memory_percent
        ),
        String::new(),
    );
    line(
        "failed updates (a start attempt failed)",
        format!("{} ({:.0}%)", a.failed_updates, a.failed_updates_percent),
        format!("{} ({:.0}%)", b.failed_updates, b.failed_updates_percent),
        ratio(a.failed_updates as f64, b.failed_updates as f64),
    );
    line(
        "API writes per pod (all clients)",
        format!("{:.2}", a.api_writes_per_pod),
        format!("{:.2}", b.api_writes_per_pod),
        ratio(a.api_writes_per_pod, b.api_writes_per_pod),
    );
    line(
        "API writes per pod (controller)",
        format!("{:.2}", a.controller_writes_per_pod),
        format!("{:.2}", b.controller_writes_per_pod),
        ratio(a.controller_writes_per_pod, b.controller_writes_per_pod),
    );
    line(
        "worst unavailable pods",
        a.max_unavailable_seen.to_string(),
        b.max_unavailable_seen.to_string(),
        String::new(),
    );
    line(
        "wall time (s)",
        format!("{:.2}", a.wall_seconds),
        format!("{:.2}", b.wall_seconds),
        String::new(),
    );
    let _ = writeln!(s);
    if r.problems.is_empty() {
        let _ = writeln!(
            s,
            "OK: in place kept every pod's UID and IP; recreate replaced all {} pods.",
            r.pods
        );
    } else {
        for p in &r.problems {
            let _ = writeln!(s, "FAIL: {p}");
        }
    }
    s
}
