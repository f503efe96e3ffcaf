//! `insitu bench`: an in-place rollout of a large CloneSet on the embedded cluster, measured.
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

use anyhow::{Context as _, bail};
use futures::StreamExt;
use insitu_api::CloneSet;
use insitu_controller::{Config, Metrics};
use insitu_core::PackedPod;
use insitu_sim::Clock as _;
use insitu_sim::apiserver::ApiStats;
use insitu_sim::cluster::{SimCluster, SimConfig};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde::Serialize;

use crate::monitor;
use crate::simtime::{self, SharedClock};

const NAME: &str = "bench";
const OLD_IMAGE: &str = "nginx:1.19.0";
const NEW_IMAGE: &str = "nginx:1.20.0";

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
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Phase {
    pub virtual_seconds: f64,
    pub wall_seconds: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Floor {
    /// Pods updated at once: `maxUnavailable` scaled to the replicas (rounded down, at least 1).
    pub max_unavailable_pods: usize,
    pub batches: usize,
    pub grace_seconds: f64,
    pub pre_stop_seconds: f64,
    pub pull_seconds: f64,
    pub start_seconds: f64,
    pub readiness_seconds: f64,
    /// One pod, image not yet on its node: grace + preStop + pull + start + readiness.
    pub per_pod_first_seconds: f64,
    /// One pod, image already pulled on its node (every batch after the first).
    pub per_pod_cached_seconds: f64,
    /// first + (batches − 1) × cached.
    pub floor_seconds: f64,
    /// batches × first (every batch pays the pull): the simpler bound, for reference.
    pub floor_with_pull_every_batch_seconds: f64,
    /// Rollout virtual seconds / floor.
    pub ratio: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct WriteCount {
    pub verb: String,
    pub resource: String,
    pub count: u64,
    pub per_pod: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Writes {
    /// Every write the apiserver served during the rollout (controller, kubelet, scheduler, GC, leases).
    pub apiserver_total: u64,
    pub apiserver_per_pod: f64,
    pub apiserver: Vec<WriteCount>,
    /// Writes the controller made (`insitu_api_writes_total`).
    pub controller_total: u64,
    pub controller_per_pod: f64,
    pub controller: Vec<WriteCount>,
    /// Controller writes to pods (`pods`, `pods/status`) per updated pod: the figure the ≤ 3 target is about.
    pub controller_pod_writes_per_pod: f64,
    /// Watch requests started during the rollout (> 0 means some watcher lagged and re-watched).
    pub watches_started: u64,
    pub lists: u64,
    pub gets: u64,
    /// Requests answered with an error status (409 conflicts, mostly), all clients.
    pub errors: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Planning {
    /// Controller plan calls during the rollout (`insitu_plan_duration_seconds` count).
    pub controller_calls: u64,
    /// Quantiles interpolated inside the histogram's buckets (50 µs × 2^k), in milliseconds.
    pub controller_p50_ms: f64,
    pub controller_p99_ms: f64,
    pub controller_mean_ms: f64,
    /// `core::plan` timed directly on the final (settled) N-pod state.
    pub settled_p50_ms: f64,
    pub settled_p99_ms: f64,
    /// `core::plan` on the final state with the template image changed again (a rollout's first plan).
    pub changed_p50_ms: f64,
    pub changed_p99_ms: f64,
    pub changed_actions: usize,
    /// The controller's snapshot step (select the CloneSet's pods from the reflector cache and refresh their
    /// summaries, as `insitu_controller::snapshot::build` does), timed on an identical N-pod cache.
    pub snapshot_p50_ms: f64,
    pub snapshot_p99_ms: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Memory {
    /// Peak resident set of the whole process (sim apiserver + kubelet + scheduler + GC + controller + bench).
    pub vm_hwm_mib: f64,
    pub vm_rss_mib: f64,
    /// RSS after all pods were Ready, before the rollout.
    pub rss_after_setup_mib: f64,
    /// Resident growth of building a reflector store identical to the controller's pod cache (managedFields
    /// dropped) from the final pods, in a fresh thread (so a fresh malloc arena): an estimate of the controller's
    /// dominant memory, which cannot be separated from the rest of the process directly.
    pub controller_pod_cache_estimate_mib: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct BenchReport {
    pub pods: usize,
    pub nodes: usize,
    pub max_unavailable: String,
    pub grace_seconds: i32,
    pub seed: u64,
    pub events: bool,
    pub setup: Phase,
    pub rollout: Phase,
    /// Pods / rollout virtual seconds.
    pub pods_per_second: f64,
    /// Pods / rollout wall seconds.
    pub pods_per_wall_second: f64,
    pub floor: Floor,
    pub writes: Writes,
    /// Reconciles during the rollout, by result.
    pub reconciles: BTreeMap<String, u64>,
    pub reconciles_total: u64,
    /// Reconciles from the CloneSet's creation until all pods were Ready.
    pub setup_reconciles: u64,
    pub planning: Planning,
    pub memory: Memory,
    /// Worst `replicas − readyReplicas` the CloneSet status showed during the rollout.
    pub max_not_ready_seen: i64,
    pub problems: Vec<String>,
}

pub fn main(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let rt = simtime::runtime().context("starting the runtime")?;
    let report = rt.block_on(run(args.clone()))?;
    drop(rt);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn parse_max_unavailable(s: &str) -> anyhow::Result<IntOrString> {
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
fn scaled(mu: &IntOrString, replicas: usize) -> usize {
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

/// `VmHWM` and `VmRSS` from /proc/self/status, in MiB (0 where unavailable).
fn proc_memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Metric samples from OpenMetrics text: `name{labels}` → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse::<f64>().ok()?))
        })
        .collect()
}

/// `label="value"` out of `name{a="x",b="y"}`.
fn label<'a>(key: &'a str, name: &str) -> Option<&'a str> {
    let pat = format!("{name}=\"");
    let start = key.find(&pat)? + pat.len();
    let end = key[start..].find('"')? + start;
    Some(&key[start..end])
}

fn diff(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>, prefix: &str) -> Vec<(String, f64)> {
    after
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}

/// Quantile from cumulative histogram buckets `(upper bound, count)`, interpolated linearly within the bucket.
fn quantile(buckets: &[(f64, f64)], q: f64) -> f64 {
    let total = buckets.last().map_or(0.0, |b| b.1);
    if total <= 0.0 {
        return 0.0;
    }
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, cum) in buckets {
        if cum >= rank {
            if !le.is_finite() {
                return prev.0;
            }
            let inside = cum - prev.1;
            let frac = if inside > 0.0 {
                (rank - prev.1) / inside
            } else {
                1.0
            };
            return prev.0 + (le - prev.0) * frac;
        }
        prev = (le, cum);
    }
    prev.0
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Times `core::plan` on a snapshot `n` times; (p50, p99) in ms and the action count.
fn time_plan(snap: &insitu_core::Snapshot, n: usize) -> (f64, f64, usize) {
    let mut ms = Vec::with_capacity(n);
    let mut actions = 0;
    for _ in 0..n.max(1) {
        let t = Instant::now();
        let plan = insitu_core::plan(snap);
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        actions = plan.actions.len();
    }
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 0.5), percentile(&ms, 0.99), actions)
}

fn write_counts(stats_after: &ApiStats, stats_before: &ApiStats, pods: usize) -> Vec<WriteCount> {
    let mut out: Vec<WriteCount> = stats_after
        .writes
        .iter()
        .map(|((verb, res), n)| {
            let d = n - stats_before.writes_for(verb, res);
            WriteCount {
                verb: verb.clone(),
                resource: res.clone(),
                count: d,
                per_pod: d as f64 / pods as f64,
            }
        })
        .filter(|w| w.count > 0)
        .collect();
    out.sort_by_key(|w| std::cmp::Reverse(w.count));
    out
}

/// Waits on the CloneSet watch until `done` holds; calls `seen` on every version.
async fn wait_cloneset<S>(
    stream: &mut S,
    clock: &insitu_sim::SimClock,
    timeout: u64,
    what: &str,
    mut seen: impl FnMut(&CloneSet),
    done: impl Fn(&CloneSet) -> bool,
) -> anyhow::Result<CloneSet>
where
    S: futures::Stream<Item = Result<CloneSet, watcher::Error>> + Unpin,
{
    let start = clock.now();
    loop {
        let left = Duration::from_secs(timeout)
            .saturating_sub(Duration::try_from(clock.now().duration_since(start)).unwrap_or_default());
        match tokio::time::timeout(left, stream.next()).await {
            Ok(Some(Ok(cs))) => {
                seen(&cs);
                if done(&cs) {
                    return Ok(cs);
                }
            }
            Ok(Some(Err(e))) => tracing::debug!("cloneset watch: {e}"),
            Ok(None) => bail!("CloneSet watch ended while waiting for {what}"),
            Err(_) => bail!("{what}: not reached within {timeout} cluster seconds"),
        }
    }
}

fn settled(cs: &CloneSet, n: i32) -> bool {
    let Some(st) = &cs.status else { return false };
    st.observed_generation == cs.metadata.generation.unwrap_or(0)
        && st.replicas == n
        && st.ready_replicas == n
        && st.updated_replicas == n
        && st.updated_ready_replicas == n
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
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(insitu_controller::run(
        client.clone(),
        Config {
            events: !args.no_events,
            ..Config::default()
        },
        Arc::new(SharedClock(clock.clone())),
        metrics.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ));
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
    let (wall, t0) = (Instant::now(), clock.now());
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
    let setup = Phase {
        virtual_seconds: clock.now().duration_since(t0).as_secs_f64(),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    let old_revision = ready.status.clone().unwrap_or_default().update_revision;
    let before: HashMap<String, String> = pods_api
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await?
        .items
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();
    let rss_after_setup = proc_memory().1;

    // Phase 2: the image change, measured until every pod is updated and Ready.
    let stats0 = cluster.apiserver.stats();
    let metrics0 = samples(&metrics.render());
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": NEW_IMAGE}
    ]))?;
    let (wall, t0) = (Instant::now(), clock.now());
    css.patch(NAME, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .context("patching the image")?;
    let mut max_not_ready = 0i64;
    let done = wait_cloneset(
        &mut cs_events,
        &clock,
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
    let rollout = Phase {
        virtual_seconds: clock.now().duration_since(t0).as_secs_f64(),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    let stats1 = cluster.apiserver.stats();
    let metrics1 = samples(&metrics.render());

    // Verification: same pods, new image, Ready, one restart each.
    let after: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await?
        .items;
    let mut problems = Vec::new();
    let live: Vec<&Pod> = after
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if live.len() != args.pods {
        problems.push(format!(
            "{} live pods after the rollout, expected {}",
            live.len(),
            args.pods
        ));
    }
    let count = |f: &dyn Fn(&Pod) -> bool| live.iter().filter(|p| !f(p)).count();
    let checks: [(&str, usize); 4] = [
        (
            "not the same pod (name/UID) as before",
            count(&|p| before.get(&p.name_any()) == p.uid().as_ref()),
        ),
        ("not on the new image", count(&|p| monitor::image(p) == NEW_IMAGE)),
        ("not Ready", count(&|p| monitor::ready(p) == "True")),
        (
            "not restarted exactly once",
            count(&|p| monitor::restarts(p) == 1),
        ),
    ];
    for (what, bad) in checks {
        if bad > 0 {
            problems.push(format!("{bad} pods {what}"));
        }
    }

    // Writes.
    let apiserver = write_counts(&stats1, &stats0, args.pods);
    let apiserver_total: u64 = apiserver.iter().map(|w| w.count).sum();
    let mut controller_w: Vec<WriteCount> = diff(&metrics1, &metrics0, "insitu_api_writes_total")
        .into_iter()
        .filter(|(_, d)| *d > 0.0)
        .map(|(k, d)| WriteCount {
            verb: label(&k, "verb").unwrap_or("").to_string(),
            resource: label(&k, "resource").unwrap_or("").to_string(),
            count: d as u64,
            per_pod: d / args.pods as f64,
        })
        .collect();
    controller_w.sort_by_key(|w| std::cmp::Reverse(w.count));
    let controller_total: u64 = controller_w.iter().map(|w| w.count).sum();
    let controller_pod: u64 = controller_w
        .iter()
        .filter(|w| w.resource == "pods" || w.resource == "pods/status")
        .map(|w| w.count)
        .sum();
    let writes = Writes {
        apiserver_total,
        apiserver_per_pod: apiserver_total as f64 / args.pods as f64,
        apiserver,
        controller_total,
        controller_per_pod: controller_total as f64 / args.pods as f64,
        controller: controller_w,
        controller_pod_writes_per_pod: controller_pod as f64 / args.pods as f64,
        watches_started: stats1.watches - stats0.watches,
        lists: stats1.lists - stats0.lists,
        gets: stats1.reads - stats0.reads,
        errors: stats1.errors - stats0.errors,
    };

    // Reconciles.
    let reconciles: BTreeMap<String, u64> = diff(&metrics1, &metrics0, "insitu_reconcile_total")
        .into_iter()
        .map(|(k, d)| (label(&k, "result").unwrap_or("").to_string(), d as u64))
        .filter(|(_, d)| *d > 0)
        .collect();
    let reconciles_total = reconciles.values().sum();

    // Planning: the controller's histogram during the rollout, then `core::plan` timed directly.
    let mut buckets: Vec<(f64, f64)> = diff(&metrics1, &metrics0, "insitu_plan_duration_seconds_bucket")
        .into_iter()
        .filter_map(|(k, d)| {
            let le = label(&k, "le")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, d))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let calls = diff(&metrics1, &metrics0, "insitu_plan_duration_seconds_count")
        .first()
        .map_or(0.0, |x| x.1);
    let sum = diff(&metrics1, &metrics0, "insitu_plan_duration_seconds_sum")
        .first()
        .map_or(0.0, |x| x.1);
    let revisions: Vec<ControllerRevision> = Api::<ControllerRevision>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await?
        .items;
    let cs_now = css.get(NAME).await?;
    let cs_now_for_snapshot = cs_now.clone();
    let cs_uid = cs_now.uid().unwrap_or_default();
    let snap_pods: Vec<Arc<Pod>> = after
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.metadata.managed_fields = None;
            Arc::new(p)
        })
        .collect();
    // With the pods' summaries, as the controller plans (it refreshes them in its snapshot step, below).
    let summariser = insitu_core::summary::Summariser::new(&cs_now.spec.selector);
    let summaries: Vec<insitu_core::PodSummary> = snap_pods
        .iter()
        .map(|p| summariser.summarise(p.clone()))
        .collect();
    let mut snap = insitu_core::Snapshot {
        cloneset: Arc::new(cs_now.clone()),
        pods: snap_pods,
        summaries: Some(Arc::new(summaries)),
        revisions: revisions.into_iter().map(Arc::new).collect(),
        pvcs: vec![],
        now: clock.now(),
        gates: Default::default(),
        nodes: Default::default(),
    };
    let (settled_p50, settled_p99, _) = time_plan(&snap, args.plan_samples);
    let mut changed = cs_now;
    if let Some(c) = changed
        .spec
        .template
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
    {
        c.image = Some("nginx:1.21.0".into());
    }
    changed.metadata.generation = changed.metadata.generation.map(|g| g + 1);
    snap.cloneset = Arc::new(changed);
    let (changed_p50, changed_p99, changed_actions) = time_plan(&snap, args.plan_samples);
    drop(snap);
    let mut planning = Planning {
        controller_calls: calls as u64,
        controller_p50_ms: quantile(&buckets, 0.5) * 1e3,
        controller_p99_ms: quantile(&buckets, 0.99) * 1e3,
        controller_mean_ms: if calls > 0.0 { sum / calls * 1e3 } else { 0.0 },
        settled_p50_ms: settled_p50,
        settled_p99_ms: settled_p99,
        changed_p50_ms: changed_p50,
        changed_p99_ms: changed_p99,
        changed_actions,
        ..Default::default()
    };

    // Memory: whole process, and the controller's pod cache rebuilt in a fresh arena.
    let samples_n = args.plan_samples.max(1);
    let (cache_estimate, snapshot_ms) = {
        let pods = Arc::new(after);
        let cs_for_snapshot = cs_now_for_snapshot;
        let handle = std::thread::spawn(move || {
            let (reader, mut writer) = kube::runtime::reflector::store::<PackedPod>();
            let before = proc_memory().1;
            writer.apply_watcher_event(&watcher::Event::Init);
            for p in pods.iter() {
                writer.apply_watcher_event(&watcher::Event::InitApply(PackedPod::pack(p.clone())));
            }
            writer.apply_watcher_event(&watcher::Event::InitDone);
            let grown = proc_memory().1 - before;
            // The snapshot step of every reconcile: all cached pods, those of the CloneSet (by namespace and
            // controller UID) summarised where they changed since the last snapshot (here: none after the
            // first, untimed, round), in name order.
            let owned = |p: &PackedPod| {
                p.metadata.namespace.as_deref() == Some("default")
                    && p.owner_references()
                        .iter()
                        .any(|r| r.controller == Some(true) && r.uid == cs_uid)
            };
            let cache = insitu_controller::snapshot::SummaryCache::default();
            drop(cache.refresh(&cs_for_snapshot, &reader.state(), owned));
            let mut ms = Vec::with_capacity(samples_n);
            for _ in 0..samples_n {
                let t = Instant::now();
                let (summaries, _) = cache.refresh(&cs_for_snapshot, &reader.state(), owned);
                drop(summaries);
                ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
            ms.sort_by(f64::total_cmp);
            drop(reader);
            (grown, ms)
        });
        handle.join().unwrap_or_default()
    };
    planning.snapshot_p50_ms = percentile(&snapshot_ms, 0.5);
    planning.snapshot_p99_ms = percentile(&snapshot_ms, 0.99);
    let (hwm, rss) = proc_memory();

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
        setup_reconciles: metrics0
            .iter()
            .filter(|(k, _)| k.starts_with("insitu_reconcile_total"))
            .map(|(_, v)| *v as u64)
            .sum(),
        planning,
        memory: Memory {
            vm_hwm_mib: hwm,
            vm_rss_mib: rss,
            rss_after_setup_mib: rss_after_setup,
            controller_pod_cache_estimate_mib: cache_estimate,
        },
        max_not_ready_seen: max_not_ready,
        problems,
    };
    let _ = done;
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
    drop(cluster);
    Ok(report)
}

/// One aligned `name value` line of the report.
fn row(s: &mut String, k: &str, v: String) {
    use std::fmt::Write as _;
    let _ = writeln!(s, "  {k:<44} {v}");
}

/// One indented row per `verb resource` write count.
fn write_rows(s: &mut String, writes: &[WriteCount]) {
    for c in writes {
        row(
            s,
            &format!("    {} {}", c.verb, c.resource),
            format!("{} ({:.2}/pod)", c.count, c.per_pod),
        );
    }
}
/// The human-readable report.
pub fn render(r: &BenchReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let f = &r.floor;
    let _ = writeln!(
        s,
        "insitu bench — in-place rollout of {} pods on {} simulated nodes (maxUnavailable {} = {} pods, gracePeriodSeconds {}, seed {}, events {})",
        r.pods,
        r.nodes,
        r.max_unavailable,
        f.max_unavailable_pods,
        r.grace_seconds,
        r.seed,
        if r.events { "on" } else { "off" }
    );
    let _ = writeln!(
        s,
        "image {OLD_IMAGE} → {NEW_IMAGE}; cluster time is virtual (paused clock, as fast as possible)\n"
    );
    row(
        &mut s,
        "setup: all pods Ready",
        format!(
            "{:.1} s virtual, {:.2} s wall, {} reconciles",
            r.setup.virtual_seconds, r.setup.wall_seconds, r.setup_reconciles
        ),
    );
    row(
        &mut s,
        "rollout: all pods updated + Ready",
        format!(
            "{:.2} s virtual, {:.2} s wall",
            r.rollout.virtual_seconds, r.rollout.wall_seconds
        ),
    );
    row(
        &mut s,
        "in-place pods/s (virtual clock)",
        format!("{:.0}", r.pods_per_second),
    );
    row(
        &mut s,
        "in-place pods/s (wall clock)",
        format!("{:.0}", r.pods_per_wall_second),
    );
    row(
        &mut s,
        "per-pod in-place time (kubelet)",
        format!(
            "grace {:.0} + preStop {:.0} + pull {:.0} + start {:.0} + readiness {:.0} = {:.0} s ({:.0} s once pulled)",
            f.grace_seconds,
            f.pre_stop_seconds,
            f.pull_seconds,
            f.start_seconds,
            f.readiness_seconds,
            f.per_pod_first_seconds,
            f.per_pod_cached_seconds
        ),
    );
    row(
        &mut s,
        "kubelet-bound floor",
        format!(
            "{} batches: {:.0} + {} × {:.0} = {:.0} s (pull every batch: {:.0} s)",
            f.batches,
            f.per_pod_first_seconds,
            f.batches - 1,
            f.per_pod_cached_seconds,
            f.floor_seconds,
            f.floor_with_pull_every_batch_seconds
        ),
    );
    row(&mut s, "rollout / floor", format!("{:.3}", f.ratio));
    row(
        &mut s,
        "worst not-Ready seen (CloneSet status)",
        format!("{}", r.max_not_ready_seen),
    );
    let w = &r.writes;
    row(
        &mut s,
        "controller writes per updated pod",
        format!(
            "{:.2} total, {:.2} to pods + pods/status",
            w.controller_per_pod, w.controller_pod_writes_per_pod
        ),
    );
    write_rows(&mut s, &w.controller);
    row(
        &mut s,
        "apiserver writes per updated pod (all clients)",
        format!("{:.2} ({} writes)", w.apiserver_per_pod, w.apiserver_total),
    );
    write_rows(&mut s, &w.apiserver);
    row(
        &mut s,
        "apiserver reads during rollout",
        format!(
            "{} gets, {} lists, {} watches started, {} error responses",
            w.gets, w.lists, w.watches_started, w.errors
        ),
    );
    let rec: Vec<String> = r.reconciles.iter().map(|(k, v)| format!("{k} {v}")).collect();
    row(
        &mut s,
        "reconciles",
        format!("{} ({})", r.reconciles_total, rec.join(", ")),
    );
    let p = &r.planning;
    row(
        &mut s,
        "plan time, controller (histogram)",
        format!(
            "p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms over {} plans",
            p.controller_p50_ms, p.controller_p99_ms, p.controller_mean_ms, p.controller_calls
        ),
    );
    row(
        &mut s,
        "plan time, settled N pods (direct)",
        format!("p50 {:.2} ms, p99 {:.2} ms", p.settled_p50_ms, p.settled_p99_ms),
    );
    row(
        &mut s,
        "snapshot step, N pods in cache (direct)",
        format!("p50 {:.2} ms, p99 {:.2} ms", p.snapshot_p50_ms, p.snapshot_p99_ms),
    );
    row(
        &mut s,
        "plan time, image changed (direct)",
        format!(
            "p50 {:.2} ms, p99 {:.2} ms ({} actions)",
            p.changed_p50_ms, p.changed_p99_ms, p.changed_actions
        ),
    );
    let m = &r.memory;
    row(
        &mut s,
        "peak RSS, whole process (VmHWM)",
        format!(
            "{:.1} MiB (VmRSS now {:.1} MiB, after setup {:.1} MiB)",
            m.vm_hwm_mib, m.vm_rss_mib, m.rss_after_setup_mib
        ),
    );
    row(
        &mut s,
        "controller pod cache (estimate)",
        format!("{:.1} MiB", m.controller_pod_cache_estimate_mib),
    );
    let _ = writeln!(s);
    if r.problems.is_empty() {
        let _ = writeln!(
            s,
            "OK: every pod kept its name and UID, runs {NEW_IMAGE}, is Ready and restarted once."
        );
    } else {
        for p in &r.problems {
            let _ = writeln!(s, "FAIL: {p}");
        }
    }
    s
}
