//! `insitu bench` (default scenario): an in-place rollout of a large CloneSet on the embedded cluster, measured.
//!
//! Scenario: create a CloneSet of `--pods` replicas (`InPlaceIfPossible`, the seed's pod template), wait until all
//! are Ready, change the image, and measure until every pod runs the new image and is Ready again. Cluster time
//! is virtual (paused tokio clock, as fast as the CPU allows), so "rollout seconds" are simulated seconds: they
//! depend only on the kubelet timings, `maxUnavailable` and how promptly the controller reacts, never on CPU speed.
//! Wall time is what the CPU spends simulating the whole cluster plus running the controller (one thread).
//!
//! Figures: rollout virtual seconds and pods/s, the kubelet-bound floor and the ratio to it, wall time, API
//! writes per updated pod (apiserver-side, by verb/resource, and the controller's own `insitu_api_writes_total`),
//! reconciles, planning time (the controller's `insitu_plan_duration_seconds` histogram during the rollout, and
//! `core::plan` timed directly on the 10k-pod state), and memory (`VmHWM`/`VmRSS` of the whole process, plus an
//! estimate of the controller's pod cache).

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use insitu_api::CloneSet;
use insitu_controller::{Config, Metrics};
use insitu_core::explain::podtable;
use insitu_sim::Clock as _;
use insitu_sim::apiserver::ApiStats;
use insitu_sim::cluster::{SimCluster, SimConfig};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use super::figures::{
    cpu_time, diff, label, percentile, proc_memory, reset_peak, samples, settled, wait_cloneset, write_counts,
};
use super::planning::{cache_estimate, planning};
use super::report::{BenchReport, Floor, Memory, Phase, WriteCount, Writes, render};
pub use super::report::{NEW_IMAGE, OLD_IMAGE};
use crate::simtime;

const NAME: &str = "bench";

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// CloneSet replicas.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// `updateStrategy.maxUnavailable` (count or percentage). The default, 50%, is two batches: with the seed's
    /// timings (preStop 5 s, pull 2 s, start 1 s, readiness 5 s) the floor is 13 s + 11 s, i.e. ~416 pods/s at
    /// 10k pods; 34% (three batches) would already fall below 300 pods/s whatever the controller does.
    #[arg(long, default_value = "50%")]
    pub max_unavailable: String,
    /// `updateStrategy.inPlaceUpdateStrategy.gracePeriodSeconds` (the seed uses 10).
    #[arg(long, default_value_t = 0)]
    pub grace_seconds: i32,
    /// Simulated nodes.
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,
    /// Seed for the simulated cluster's randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the figures as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Do not record Kubernetes Events (kubelet, scheduler, controller).
    #[arg(long)]
    pub no_events: bool,
    /// Times `core::plan` is run directly on the final state (per case) for the planning figures.
    #[arg(long, default_value_t = 30)]
    pub plan_samples: usize,
    /// Give up after this many cluster seconds (per phase).
    #[arg(long, default_value_t = 3600)]
    pub timeout: u64,
    /// Run the controller on the cluster's one runtime thread instead of in turns on the second core (the
    /// earlier layout, to compare).
    #[arg(long)]
    pub controller_on_cluster_thread: bool,
}

pub fn main(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let report = super::block_on(run(args.clone()))?;
    super::emit(&report, args.json, render, &report.problems)
}

pub fn parse_max_unavailable(s: &str) -> anyhow::Result<IntOrString> {
    let s = s.trim();
    if let Some(p) = s.strip_suffix('%') {
        let v: u32 = p.parse().with_context(|| format!("--max-unavailable {s}"))?;
        anyhow::ensure!(v > 0 && v <= 100, "--max-unavailable {s}: must be 1%..100%");
        Ok(IntOrString::String(s.to_string()))
    } else {
        let v: i32 = s.parse().with_context(|| format!("--max-unavailable {s}"))?;
        anyhow::ensure!(v > 0, "--max-unavailable {s}: must be positive");
        Ok(IntOrString::Int(v))
    }
}

/// `maxUnavailable` scaled to `replicas` as Kruise does for in-place updates (rounded down), at least 1.
pub fn scaled(mu: &IntOrString, replicas: usize) -> usize {
    let v = match mu {
        IntOrString::Int(i) => usize::try_from(*i).unwrap_or(1),
        IntOrString::String(s) => {
            let p: usize = s.trim_end_matches('%').parse().unwrap_or(0);
            replicas * p / 100
        }
    };
    v.max(1)
}

fn bench_cloneset(args: &BenchArgs, mu: IntOrString) -> anyhow::Result<CloneSet> {
    let mut cs: CloneSet =
        serde_saphyr::from_str(crate::demo::SEED_YAML).context("parsing the seed CloneSet")?;
    let labels: BTreeMap<String, String> = [("app".to_string(), NAME.to_string())].into();
    cs.metadata.name = Some(NAME.into());
    cs.metadata.labels = Some(labels.clone());
    cs.spec.replicas = Some(i32::try_from(args.pods).context("--pods")?);
    cs.spec.selector.match_labels = Some(labels.clone());
    if let Some(m) = cs.spec.template.metadata.as_mut() {
        m.labels = Some(labels);
    }
    let us = cs.spec.update_strategy.get_or_insert_with(Default::default);
    us.max_unavailable = Some(mu);
    us.in_place_update_strategy
        .get_or_insert_with(Default::default)
        .grace_period_seconds = Some(args.grace_seconds);
    Ok(cs)
}

/// The kubelet-bound floor of an in-place rollout of `cs` on a cluster configured like `sim`.
fn floor(cs: &CloneSet, sim: &SimConfig, args: &BenchArgs, mu_pods: usize) -> Floor {
    let spec = cs.spec.template.spec.clone().unwrap_or_default();
    let termination = Duration::from_secs(
        spec.termination_grace_period_seconds
            .map_or(30, |s| u64::try_from(s.max(0)).unwrap_or(0)),
    );
    let c = spec.containers.first().cloned().unwrap_or_default();
    let pre_stop = insitu_sim::kubelet::runtime::pre_stop_duration(&c).min(termination);
    let profile = sim.images.lookup(NEW_IMAGE);
    // Readiness: probes at start + initialDelay + k·period, the app ready after warm-up; successThreshold passes.
    let readiness = c.readiness_probe.as_ref().map_or(profile.warmup, |p| {
        let secs =
            |v: Option<i32>, d: i32| Duration::from_secs(u64::try_from(v.unwrap_or(d).max(0)).unwrap_or(0));
        let initial = secs(p.initial_delay_seconds, 0);
        let period = secs(p.period_seconds, 10).max(Duration::from_secs(1));
        let success = p.success_threshold.unwrap_or(1).max(1).unsigned_abs();
        let mut t = initial;
        if profile.warmup > initial {
            let k = (profile.warmup - initial).as_nanos().div_ceil(period.as_nanos());
            t = initial + Duration::from_nanos(u64::try_from(k * period.as_nanos()).unwrap_or(u64::MAX));
        }
        t + period * success.saturating_sub(1)
    });
    let grace = Duration::from_secs(u64::try_from(args.grace_seconds.max(0)).unwrap_or(0));
    let cached = grace + pre_stop + profile.start + readiness;
    let first = cached + profile.pull;
    let batches = args.pods.div_ceil(mu_pods.max(1)).max(1);
    let floor = first + cached * u32::try_from(batches - 1).unwrap_or(u32::MAX);
    Floor {
        max_unavailable_pods: mu_pods,
        batches,
        grace_seconds: grace.as_secs_f64(),
        pre_stop_seconds: pre_stop.as_secs_f64(),
        pull_seconds: profile.pull.as_secs_f64(),
        start_seconds: profile.start.as_secs_f64(),
        readiness_seconds: readiness.as_secs_f64(),
        per_pod_first_seconds: first.as_secs_f64(),
        per_pod_cached_seconds: cached.as_secs_f64(),
        floor_seconds: floor.as_secs_f64(),
        floor_with_pull_every_batch_seconds: (first * u32::try_from(batches).unwrap_or(u32::MAX))
            .as_secs_f64(),
        ratio: 0.0,
    }
}

/// What the rollout phase left behind for the figures.
struct Rolled {
    rollout: Phase,
    stats0: ApiStats,
    stats1: ApiStats,
    metrics0: BTreeMap<String, f64>,
    metrics1: BTreeMap<String, f64>,
    max_not_ready: i64,
}

/// Runs the scenario and gathers the figures.
pub async fn run(args: BenchArgs) -> anyhow::Result<BenchReport> {
    let mu = parse_max_unavailable(&args.max_unavailable)?;
    let n = i32::try_from(args.pods).context("--pods")?;
    anyhow::ensure!(n > 0, "--pods must be positive");
    let mu_pods = scaled(&mu, args.pods);
    let cs = bench_cloneset(&args, mu.clone())?;
    let sim_config = SimConfig {
        nodes: args.nodes.max(1),
        seed: args.seed,
        events: !args.no_events,
        ..Default::default()
    };
    let mut fl = floor(&cs, &sim_config, &args, mu_pods);

    let base = Timestamp::from_second(1_764_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let clock = insitu_sim::SimClock::new(base, 1.0);
    let cluster = SimCluster::start(sim_config, clock.clone())
        .await
        .context("starting the simulated cluster")?;
    let client = cluster.client.clone();
    let metrics = Arc::new(Metrics::new());
    let config = Config {
        events: !args.no_events,
        ..Config::default()
    };
    let placement = if args.controller_on_cluster_thread {
        simtime::Placement::Shared
    } else {
        simtime::Placement::SecondCore
    };
    let (controller, stop_tx) =
        simtime::spawn_controller_placed(client.clone(), config, &clock, metrics.clone(), placement);
    let css: Api<CloneSet> = Api::namespaced(client.clone(), "default");
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut cs_events = Box::pin(
        watcher(
            css.clone(),
            watcher::Config::default().fields(&format!("metadata.name={NAME}")),
        )
        .applied_objects(),
    );

    // Phase 1: N pods Ready.
    let (wall, t0, cpu0) = (Instant::now(), clock.now(), cpu_time());
    let setup_stats0 = cluster.apiserver.stats();
    let drops0 = cluster.event_drops.count();
    css.create(&PostParams::default(), &cs)
        .await
        .context("creating the CloneSet")?;
    let ready = wait_cloneset(
        &mut cs_events,
        &clock,
        args.timeout,
        "all pods Ready",
        |_| {},
        |c| settled(c, n),
    )
    .await?;
    let setup = Phase::new(
        clock.now().duration_since(t0).as_secs_f64(),
        wall.elapsed().as_secs_f64(),
        cpu0,
    )
    .with_events_dropped(cluster.event_drops.count() - drops0);
    let setup_writes = write_counts(&cluster.apiserver.stats(), &setup_stats0, args.pods);
    let old_revision = ready.status.clone().unwrap_or_default().update_revision;
    let (hwm_setup, rss_after_setup) = proc_memory();
    let before = names_and_uids(&client).await?;
    // The rollout's peak apart from the setup's and from the list above (a measurement, not the cluster).
    let peak_reset = reset_peak();

    // Phase 2: the image change, measured until every pod is updated and Ready.
    let rolled = roll(
        &cluster,
        &metrics,
        &css,
        &mut cs_events,
        &clock,
        &args,
        &old_revision,
    )
    .await?;
    let hwm_rollout = proc_memory().0;
    let after: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await?
        .items;
    let problems = verify(&after, &before, args.pods);
    let writes = writes(&rolled, args.pods);
    let reconciles: BTreeMap<String, u64> =
        diff(&rolled.metrics1, &rolled.metrics0, "insitu_reconcile_total")
            .into_iter()
            .map(|(k, d)| (label(&k, "result").unwrap_or("").to_string(), d as u64))
            .filter(|(_, d)| *d > 0)
            .collect();
    let reconciles_total = reconciles.values().sum();

    let cs_now = css.get(NAME).await?;
    let mut planning = planning(
        &client,
        &rolled.metrics0,
        &rolled.metrics1,
        &cs_now,
        &after,
        &clock,
        args.plan_samples,
    )
    .await?;
    let (cache_estimate, snapshot_ms) = cache_estimate(after, cs_now, args.plan_samples);
    planning.snapshot_p50_ms = percentile(&snapshot_ms, 0.5);
    planning.snapshot_p99_ms = percentile(&snapshot_ms, 0.99);
    let (hwm, rss) = proc_memory();
    let hwm = hwm.max(hwm_setup);

    let rollout = rolled.rollout.clone();
    fl.ratio = if fl.floor_seconds > 0.0 {
        rollout.virtual_seconds / fl.floor_seconds
    } else {
        0.0
    };
    let report = BenchReport {
        pods: args.pods,
        nodes: args.nodes,
        max_unavailable: args.max_unavailable.clone(),
        grace_seconds: args.grace_seconds,
        seed: args.seed,
        events: !args.no_events,
        pods_per_second: args.pods as f64 / rollout.virtual_seconds.max(1e-9),
        pods_per_wall_second: args.pods as f64 / rollout.wall_seconds.max(1e-9),
        setup,
        rollout,
        floor: fl,
        writes,
        reconciles,
        reconciles_total,
        setup_reconciles: rolled
            .metrics0
            .iter()
            .filter(|(k, _)| k.starts_with("insitu_reconcile_total"))
            .map(|(_, v)| *v as u64)
            .sum(),
        setup_writes_per_pod: setup_writes.iter().map(|w| w.count).sum::<u64>() as f64 / args.pods as f64,
        setup_writes,
        planning,
        memory: Memory {
            vm_hwm_mib: hwm,
            vm_rss_mib: rss,
            rss_after_setup_mib: rss_after_setup,
            vm_hwm_setup_mib: hwm_setup,
            vm_hwm_rollout_mib: hwm_rollout,
            peak_reset,
            controller_pod_cache_estimate_mib: cache_estimate,
        },
        max_not_ready_seen: rolled.max_not_ready,
        problems,
    };
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
    drop(cluster);
    Ok(report)
}

/// Name → UID of the bench's pods, decoding nothing else (100,000 whole `Pod`s would be ~1 GiB).
async fn names_and_uids(client: &kube::Client) -> anyhow::Result<HashMap<String, String>> {
    #[derive(Clone, serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        name: String,
        #[serde(default)]
        uid: String,
    }
    #[derive(Clone, serde::Deserialize)]
    struct Slim {
        metadata: Meta,
    }
    let req = kube::core::Request::new("/api/v1/namespaces/default/pods")
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .context("building the pod list request")?;
    let list: kube::core::ObjectList<Slim> = client.request(req).await.context("listing the pods")?;
    Ok(list
        .items
        .into_iter()
        .map(|p| (p.metadata.name, p.metadata.uid))
        .collect())
}

/// Phase 2: patches the template image and waits until every pod is updated and Ready, counting writes and
/// the controller's metrics around it.
async fn roll(
    cluster: &SimCluster,
    metrics: &Metrics,
    css: &Api<CloneSet>,
    cs_events: &mut (impl futures::Stream<Item = Result<CloneSet, watcher::Error>> + Unpin),
    clock: &insitu_sim::SimClock,
    args: &BenchArgs,
    old_revision: &str,
) -> anyhow::Result<Rolled> {
    let n = i32::try_from(args.pods).context("--pods")?;
    let stats0 = cluster.apiserver.stats();
    let drops0 = cluster.event_drops.count();
    let metrics0 = samples(&metrics.render());
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": NEW_IMAGE}
    ]))?;
    let (wall, t0, cpu0) = (Instant::now(), clock.now(), cpu_time());
    css.patch(NAME, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .context("patching the image")?;
    let mut max_not_ready = 0i64;
    wait_cloneset(
        cs_events,
        clock,
        args.timeout,
        "all pods updated and Ready",
        |c| {
            if let Some(st) = &c.status {
                max_not_ready = max_not_ready.max(i64::from(st.replicas) - i64::from(st.ready_replicas));
            }
        },
        |c| {
            settled(c, n)
                && c.status
                    .as_ref()
                    .is_some_and(|s| s.update_revision != old_revision)
        },
    )
    .await?;
    let rollout = Phase::new(
        clock.now().duration_since(t0).as_secs_f64(),
        wall.elapsed().as_secs_f64(),
        cpu0,
    )
    .with_events_dropped(cluster.event_drops.count() - drops0);
    Ok(Rolled {
        rollout,
        stats0,
        stats1: cluster.apiserver.stats(),
        metrics0,
        metrics1: samples(&metrics.render()),
        max_not_ready,
    })
}

/// Verification: the same pods (name and UID) as before, on the new image, Ready, restarted exactly once.
fn verify(after: &[Pod], before: &HashMap<String, String>, pods: usize) -> Vec<String> {
    let mut problems = Vec::new();
    let live: Vec<&Pod> = after
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if live.len() != pods {
        problems.push(format!(
            "{} live pods after the rollout, expected {pods}",
            live.len()
        ));
    }
    let count = |f: &dyn Fn(&Pod) -> bool| live.iter().filter(|p| !f(p)).count();
    let checks: [(&str, usize); 4] = [
        (
            "not the same pod (name/UID) as before",
            count(&|p| before.get(&p.name_any()) == p.uid().as_ref()),
        ),
        (
            "not on the new image",
            count(&|p| podtable::image(p) == NEW_IMAGE),
        ),
        ("not Ready", count(&|p| podtable::ready(p) == "True")),
        (
            "not restarted exactly once",
            count(&|p| podtable::restarts(p) == 1),
        ),
    ];
    for (what, bad) in checks {
        if bad > 0 {
            problems.push(format!("{bad} pods {what}"));
        }
    }
    problems
}

/// The rollout's writes: apiserver-side by verb/resource, and the controller's `insitu_api_writes_total`.
fn writes(r: &Rolled, pods: usize) -> Writes {
    let apiserver = write_counts(&r.stats1, &r.stats0, pods);
    let apiserver_total: u64 = apiserver.iter().map(|w| w.count).sum();
    let mut controller_w: Vec<WriteCount> = diff(&r.metrics1, &r.metrics0, "insitu_api_writes_total")
        .into_iter()
        .filter(|(_, d)| *d > 0.0)
        .map(|(k, d)| WriteCount {
            verb: label(&k, "verb").unwrap_or("").to_string(),
            resource: label(&k, "resource").unwrap_or("").to_string(),
            count: d as u64,
            per_pod: d / pods as f64,
        })
        .collect();
    controller_w.sort_by_key(|w| std::cmp::Reverse(w.count));
    let controller_total: u64 = controller_w.iter().map(|w| w.count).sum();
    let controller_pod: u64 = controller_w
        .iter()
        .filter(|w| w.resource == "pods" || w.resource == "pods/status")
        .map(|w| w.count)
        .sum();
    Writes {
        apiserver_total,
        apiserver_per_pod: apiserver_total as f64 / pods as f64,
        apiserver,
        controller_total,
        controller_per_pod: controller_total as f64 / pods as f64,
        controller: controller_w,
        controller_pod_writes_per_pod: controller_pod as f64 / pods as f64,
        watches_started: r.stats1.watches - r.stats0.watches,
        lists: r.stats1.lists - r.stats0.lists,
        gets: r.stats1.reads - r.stats0.reads,
        errors: r.stats1.errors - r.stats0.errors,
    }
}
