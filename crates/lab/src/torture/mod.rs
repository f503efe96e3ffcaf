//! `insitu torture`: seeded fault injection on the embedded cluster, on virtual time, with an invariant checker.
//!
//! Per seed: a random CloneSet and changes to it (`scenario`), API faults injected by the sim apiserver (latency,
//! 409, 429, 500, 410 on watches), controller crashes with restarts (all in-memory state lost) and node loss (a
//! kubelet cut off; the sim's node lifecycle controller marks, taints and evicts as KCM does), while
//! `check` asserts Kruise's bounds at every pod event; once faults stop, the CloneSet must converge with a status
//! equal to what the pods show, and no request of the controller may have been refused as invalid (422).

pub mod check;
pub mod malformed;
pub mod replicas;
pub mod runner;
pub mod scenario;

pub use runner::main;

use std::time::Duration;

use insitu_api::CloneSet;
use insitu_sim::apiserver::Partition;
use insitu_sim::cluster::{SimCluster, SimConfig};
use insitu_sim::kubelet::{ImageFailure, ImageProfile, ImageProfiles};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{PatchParams, PostParams};

use check::{Bounds, Checker, ready, revision, scaled};
use scenario::{BAD_PULL, CRASHY, NODES, Scenario, Step};

#[derive(clap::Args, Debug, Clone)]
pub struct TortureArgs {
    /// Run this one seed (with `--trace`, print every trace line as it happens).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Number of seeds to run, from `--start`.
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    pub start: u64,
    /// Largest replicas a scenario may ask for.
    #[arg(long, default_value_t = 8)]
    pub pods: i32,
    /// Print the trace of every seed (not only of failing ones).
    #[arg(long)]
    pub trace: bool,
    /// Seeds run in parallel, each on its own thread and virtual clock (0: one per CPU).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
}

/// What one seed did.
#[derive(Clone, Debug, Default)]
pub struct SeedReport {
    pub seed: u64,
    pub description: String,
    pub faults: u64,
    /// Injected Status answers by HTTP code.
    pub by_code: std::collections::BTreeMap<u16, u64>,
    pub crashes: u64,
    /// Nodes lost (0 or 1).
    pub node_losses: u64,
    /// Pods evicted from a lost node (taint manager, PodGC), as the checker saw them.
    pub evictions: u64,
    /// Lease holders partitioned from the apiserver.
    pub partitions: u64,
    /// FNV-1a of the whole trace and its line count (same seed, same run: same digest).
    pub trace_digest: (u64, u64),
    pub events: u64,
    pub virtual_secs: f64,
    pub violations: Vec<String>,
    pub trace: Vec<String>,
}

fn images() -> ImageProfiles {
    let base = ImageProfile::default();
    ImageProfiles::default()
        .with(
            BAD_PULL,
            ImageProfile {
                fail: ImageFailure::NeverPulls,
                ..base
            },
        )
        .with(
            CRASHY,
            ImageProfile {
                fail: ImageFailure::CrashAfter(Duration::from_secs(3)),
                ..base
            },
        )
}

/// The checker's bounds for a scenario, from its spec (not from the planner).
fn bounds(s: &Scenario) -> Bounds {
    let spec = &s.cloneset.spec;
    let us = spec.update_strategy.clone().unwrap_or_default();
    let max_replicas = s
        .steps
        .iter()
        .filter_map(|(_, st)| match st {
            Step::Scale(r) => Some(*r),
            _ => None,
        })
        .chain([spec.replicas()])
        .max()
        .unwrap_or(0);
    let surge = scaled(us.max_surge.as_ref(), max_replicas, true, 0).max(0);
    // Kruise: maxUnavailable rounds up when maxSurge is 0 (the strict scenarios have no surge).
    let strict = s
        .in_place_only()
        .then(|| scaled(us.max_unavailable.as_ref(), spec.replicas(), true, 1).max(1));
    Bounds {
        max_pods: max_replicas + surge,
        strict_unavailable: strict,
    }
}

/// Whether a pod runs one of the images the scenario breaks on purpose (it can never become ready).
fn broken(p: &k8s_openapi::api::core::v1::Pod) -> bool {
    p.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .any(|c| c.image.as_deref().is_some_and(|i| i == BAD_PULL || i == CRASHY))
    })
}

/// Converged, as Kruise defines the end of a rollout: `replicas` live pods and none terminating, at least
/// `replicas - partition` of them at the update revision and ready, status equal to what the pods show.
///
/// Kruise's partition counts every pod not at the update revision (`calculateDiffsWithExpectation`:
/// `updateOldDiff = oldRevisionActiveCount - partition`, clamped at 0 unless `CloneSetPartitionRollback`), and it
/// never moves pods back: after a rollback with a partition, pods left at a broken revision stay there (and stay
/// unready). So an old pod may be unready only when it runs one of the scenario's broken images. Such pods also
/// hold surge pods: with them unavailable, `deleteReadyLimit = maxUnavailable + (pods - replicas) - unavailable`
/// is 0 and `scaleDownNumOldRevision = 0` (they are what the partition keeps), so Kruise never removes the extra
/// ready pod. Then up to `replicas + maxSurge` live pods are the end state.
async fn converged(api: &Api<CloneSet>, checker: &Checker) -> Result<(), String> {
    let cs = api.get_status("torture").await.map_err(|e| format!("get: {e}"))?;
    let st = cs.status.clone().unwrap_or_default();
    let replicas = cs.spec.replicas();
    let partition = cs
        .spec
        .update_strategy
        .as_ref()
        .and_then(|u| u.partition.as_ref())
        .map_or(0, |p| scaled(Some(p), replicas, true, 0).clamp(0, replicas));
    let pods = checker.pods.state();
    let live: Vec<_> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let terminating = pods.len() - live.len();
    let ready_n = live.iter().filter(|p| ready(p)).count() as i32;
    let updated: Vec<_> = live
        .iter()
        .filter(|p| revision(p) == st.update_revision)
        .collect();
    let updated_ready = updated.iter().filter(|p| ready(p)).count() as i32;
    let stuck_old = live
        .iter()
        .filter(|p| revision(p) != st.update_revision && !ready(p) && !broken(p))
        .count();
    let n = live.len() as i32;
    let want_updated = replicas - partition;
    let mut why = Vec::new();
    if cs.metadata.generation != Some(st.observed_generation) {
        why.push(format!(
            "observedGeneration {} of {:?}",
            st.observed_generation, cs.metadata.generation
        ));
    }
    let broken_old = live
        .iter()
        .any(|p| revision(p) != st.update_revision && !ready(p) && broken(p));
    let surge = cs
        .spec
        .update_strategy
        .as_ref()
        .and_then(|u| u.max_surge.as_ref())
        .map_or(0, |m| scaled(Some(m), replicas, true, 0).max(0));
    // Kruise's scale-down can stall for good, and that is no controller fault: the partition keeps every
    // old-revision pod (broken ones too, which use up maxUnavailable), and the only pods it could delete are
    // ready updated ones, which deleteReadyLimit = maxUnavailable + (pods − replicas) − unavailable (Kruise
    // `calculateDiffsWithExpectation`) forbids. Converging would break one rule or the other (found by
    // `insitu torture --seed 6405 --pods 50`: scale 36 → 4, partition 17, four pods on a broken image).
    let old_n = live.iter().filter(|p| revision(p) != st.update_revision).count() as i32;
    let max_unavailable = {
        let default = IntOrString::String("20%".into());
        let mu = cs
            .spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.max_unavailable.as_ref())
            .unwrap_or(&default);
        scaled(Some(mu), replicas, surge == 0, 0)
    };
    let scale_down_blocked = broken_old
        && n > replicas
        && old_n <= partition
        && updated_ready == updated.len() as i32
        && max_unavailable + (n - replicas) - (n - ready_n) <= 0;
    let most = if scale_down_blocked {
        n
    } else if broken_old {
        replicas + surge
    } else {
        replicas
    };
    if n < replicas || n > most || terminating > 0 {
        why.push(format!(
            "{n} live pods ({terminating} terminating), want {replicas}{}",
            if most > replicas {
                format!(" to {most} (pods on a broken image hold the surge)")
            } else {
                String::new()
            }
        ));
    }
    if updated_ready != updated.len() as i32 || stuck_old > 0 {
        why.push(format!(
            "{ready_n}/{n} ready ({} updated not ready, {stuck_old} old not ready on a good image)",
            updated.len() as i32 - updated_ready
        ));
    }
    if (updated.len() as i32) < want_updated {
        why.push(format!(
            "{} pods at {}, want at least {want_updated} (partition {partition})",
            updated.len(),
            st.update_revision
        ));
    }
    let status = (
        st.replicas,
        st.ready_replicas,
        st.updated_replicas,
        st.updated_ready_replicas,
    );
    let shown = (n, ready_n, updated.len() as i32, updated_ready);
    if status != shown {
        why.push(format!(
            "status (replicas, ready, updated, updatedReady) = {status:?}, pods show {shown:?}"
        ));
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(why.join("; "))
    }
}

async fn wait_converged(api: &Api<CloneSet>, checker: &Checker, secs: u64) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..secs {
        match converged(api, checker).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(last)
}

/// Runs one seed on a fresh embedded cluster (call inside a paused-time runtime).
pub async fn run_seed(seed: u64, max_pods: i32, live_trace: bool) -> SeedReport {
    let s = Scenario::generate(seed, max_pods);
    let mut report = SeedReport {
        seed,
        description: s.describe(),
        ..Default::default()
    };
    let clock = insitu_sim::SimClock::new(Timestamp::from_second(1_764_000_000).unwrap_or_default(), 1.0);
    let cluster = match SimCluster::start(
        SimConfig {
            nodes: NODES,
            seed,
            images: images(),
            events: false,
            ..Default::default()
        },
        clock,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            report.violations.push(format!("sim did not start: {e}"));
            return report;
        }
    };
    let oracle = cluster.apiserver.oracle_client();
    let checker = Checker::spawn(oracle.clone(), bounds(&s), live_trace.then_some(seed));
    let api: Api<CloneSet> = Api::namespaced(oracle.clone(), "default");
    let note = |line: String| checker.note(line);
    for r in &s.rules {
        cluster.apiserver.faults().add(r.clone());
    }
    note(format!("scenario {}", report.description));
    let mut controller = replicas::Replicas::start(&cluster, s.leader_election);
    if let Err(e) = api.create(&PostParams::default(), &s.cloneset).await {
        report.violations.push(format!("create CloneSet: {e}"));
        return report;
    }
    // Timeline after the first rollout settles: the steps, the crashes, the end of faults.
    // Liveness is owed once faults stop, not while they last: a cache that cannot list half the time backs off
    // to 30 s between attempts (kube-runtime's watcher backoff, as client-go's reflector), so a first sync can
    // take minutes under the harshest rules. Then the faults pause until the scale-up is done, and that must
    // converge within the after-faults bound.
    let bound = 300 + 30 * u64::try_from(bounds(&s).max_pods).unwrap_or(0);
    if let Err(e) = wait_converged(&api, &checker, 300).await {
        note(format!(
            "initial scale-up not done after 300s under faults ({e}); faults paused"
        ));
        cluster.apiserver.faults().clear();
        if let Err(e) = wait_converged(&api, &checker, bound).await {
            checker.violate(format!(
                "initial scale-up did not converge within {bound}s after faults paused: {e}"
            ));
        }
        for r in &s.rules {
            cluster.apiserver.faults().add(r.clone());
        }
    }
    checker.arm();
    note("initial pods ready; strict checks armed".into());
    enum Ev<'a> {
        Step(&'a Step),
        Crash(u64),
        Malformed,
        NodeLost(usize),
        NodeEnd(usize, bool),
        Partition(bool),
        Heal,
        FaultsOff,
    }
    let mut timeline: Vec<(u64, Ev)> = s.steps.iter().map(|(t, st)| (*t, Ev::Step(st))).collect();
    timeline.extend(s.crashes.iter().map(|(t, down)| (*t, Ev::Crash(*down))));
    timeline.extend(s.malformed_at.map(|t| (t, Ev::Malformed)));
    if let Some(l) = &s.node_loss {
        timeline.push((l.at, Ev::NodeLost(l.node)));
        timeline.push((l.at + l.secs, Ev::NodeEnd(l.node, l.returns)));
    }
    if let Some(p) = &s.partition {
        timeline.push((p.at, Ev::Partition(p.hang)));
        timeline.push((p.at + p.secs, Ev::Heal));
    }
    let mut partitioned: Option<String> = None;
    timeline.push((s.faults_until, Ev::FaultsOff));
    timeline.sort_by_key(|(t, _)| *t);
    let mut now = 0u64;
    for (t, ev) in timeline {
        tokio::time::sleep(Duration::from_secs(t.saturating_sub(now))).await;
        now = t;
        match ev {
            Ev::Step(step) => {
                let pod = checker
                    .pods
                    .state()
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter_map(|p| p.metadata.name.clone())
                    .min();
                note(format!("step {step:?}"));
                if let Err(e) = api
                    .patch("torture", &PatchParams::default(), &step.patch(pod.as_deref()))
                    .await
                {
                    checker.violate(format!("scenario patch {step:?} refused: {e}"));
                }
            }
            Ev::Crash(down) => {
                let (who, slot) = controller.kill_acting(&oracle).await;
                note(format!("crash of {who}, down {down}s"));
                report.crashes += 1;
                tokio::time::sleep(Duration::from_secs(down)).await;
                now += down;
                controller.restart(&cluster, slot);
                note("restarted".into());
            }
            Ev::Malformed => {
                for line in malformed::inject(&cluster.apiserver, seed) {
                    note(line);
                }
            }
            Ev::NodeLost(i) => {
                cluster.lost.lose(&node_name(i));
                report.node_losses += 1;
                note(format!("node {} lost (kubelet cut off)", node_name(i)));
            }
            Ev::NodeEnd(i, true) => {
                cluster.lost.restore(&node_name(i));
                note(format!("node {} back", node_name(i)));
            }
            Ev::NodeEnd(i, false) => {
                let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(oracle.clone());
                match nodes.delete(&node_name(i), &Default::default()).await {
                    Ok(_) => note(format!("node {} never returns: Node deleted", node_name(i))),
                    Err(e) => checker.violate(format!("deleting Node {}: {e}", node_name(i))),
                }
            }
            Ev::Partition(hang) => {
                let how = if hang { Partition::Hang } else { Partition::Refused };
                partitioned = controller.partition_holder(&cluster, &oracle, how).await;
                match &partitioned {
                    Some(name) => {
                        report.partitions += 1;
                        note(format!("lease holder {name} partitioned ({how:?})"));
                    }
                    None => note("no lease holder to partition".into()),
                }
            }
            Ev::Heal => {
                if let Some(name) = partitioned.take() {
                    cluster.apiserver.heal(&name);
                    note(format!("{name} partition healed"));
                }
            }
            Ev::FaultsOff => {
                cluster.apiserver.faults().clear();
                note("faults off".into());
            }
        }
    }
    if let Err(e) = wait_converged(&api, &checker, bound).await {
        checker.violate(format!(
            "no convergence within {bound}s after faults stopped: {e}"
        ));
    }
    for v in replicas::leadership_violations(&cluster.apiserver.accepted_writes())
        .into_iter()
        .take(3)
    {
        checker.violate(v);
    }
    let stats = cluster.apiserver.stats();
    if stats.invalid > 0 {
        checker.violate(format!(
            "{} request(s) of the controller refused as invalid (422)",
            stats.invalid
        ));
    }
    let injected = cluster.apiserver.faults().injected();
    report.faults =
        injected.statuses + injected.latencies + report.crashes + report.node_losses + report.partitions;
    report.by_code = injected.by_code;
    report.events = checker.events();
    report.evictions = checker.evictions();
    report.virtual_secs = checker.elapsed();
    report.violations = checker.violations();
    report.trace = checker.trace();
    report.trace_digest = checker.digest();
    controller.abort();
    report
}

fn node_name(i: usize) -> String {
    format!("{}{i}", insitu_sim::kubelet::KubeletConfig::default().node_prefix)
}

/// Runs one seed on its own runtime (virtual time).
///
/// What the sim does not draw from the seed it must not leave to chance: kube-runtime's watcher back-off jitter
/// (backon) forks this thread's fastrand generator, so that is seeded first; the runtime is current-thread
/// (no work stealing) and the sim's `select!`s are biased.
pub fn run_one(seed: u64, max_pods: i32, live_trace: bool) -> anyhow::Result<SeedReport> {
    fastrand::seed(seed ^ 0x0b4c_c0ff);
    let rt = crate::simtime::runtime()?;
    Ok(rt.block_on(run_seed(seed, max_pods, live_trace)))
}
