//! `insitu bench`'s figures (serialized with `--json`) and their human-readable rendering.

use std::collections::BTreeMap;

use serde::Serialize;

pub use super::figures::WriteCount;
use super::figures::{CpuTime, cpu_time};

/// The rollout's images: from, to.
pub const OLD_IMAGE: &str = "nginx:1.19.0";
pub const NEW_IMAGE: &str = "nginx:1.20.0";

#[derive(Clone, Debug, Default, Serialize)]
pub struct Phase {
    pub virtual_seconds: f64,
    pub wall_seconds: f64,
    /// Wall seconds per virtual second (< 1: the simulation runs faster than real time; 0.2 = 5× faster).
    pub wall_per_virtual: f64,
    /// CPU seconds (user + system) the whole process used in the phase: the cluster, the controller, the bench.
    pub cpu_seconds: f64,
    /// Of which the embedded cluster's thread (apiserver, kubelets, scheduler, GC; the bench's own watch).
    pub cluster_thread_cpu_seconds: f64,
    /// Events the simulated kubelets and scheduler dropped in the phase because their queue was full (as
    /// client-go's recorder drops them): those `kubectl get events` will not show.
    pub events_dropped: u64,
}

impl Phase {
    /// The phase that began at CPU time `cpu0` and took these virtual and wall seconds.
    pub fn new(virtual_seconds: f64, wall_seconds: f64, cpu0: CpuTime) -> Self {
        let cpu = cpu_time();
        Self {
            virtual_seconds,
            wall_seconds,
            wall_per_virtual: if virtual_seconds > 0.0 {
                wall_seconds / virtual_seconds
            } else {
                0.0
            },
            cpu_seconds: cpu.process - cpu0.process,
            cluster_thread_cpu_seconds: cpu.thread - cpu0.thread,
            events_dropped: 0,
        }
    }

    /// The phase, with the events dropped in it.
    pub fn with_events_dropped(self, events_dropped: u64) -> Self {
        Self {
            events_dropped,
            ..self
        }
    }

    /// `24.1 s (cluster thread 12.0 s; 1.43 cores busy)`: the phase's CPU and how many cores it kept busy.
    fn cpu(&self) -> String {
        let cores = if self.wall_seconds > 0.0 {
            self.cpu_seconds / self.wall_seconds
        } else {
            0.0
        };
        format!(
            "{:.1} s (cluster thread {:.1} s; {:.2} cores busy)",
            self.cpu_seconds, self.cluster_thread_cpu_seconds, cores
        )
    }
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
    /// Peak resident set of the setup (0 → N pods Ready).
    pub vm_hwm_setup_mib: f64,
    /// Peak resident set of the rollout alone (`VmHWM` reset when it starts; else the peak so far), before the
    /// bench lists the pods and plans on them for its figures (which can raise `vm_hwm_mib`).
    pub vm_hwm_rollout_mib: f64,
    /// Whether the kernel let the peak be reset between the phases.
    pub peak_reset: bool,
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
    /// Every write the apiserver served from the CloneSet's creation until all pods were Ready, per pod.
    pub setup_writes: Vec<WriteCount>,
    pub setup_writes_per_pod: f64,
    pub planning: Planning,
    pub memory: Memory,
    /// Worst `replicas − readyReplicas` the CloneSet status showed during the rollout.
    pub max_not_ready_seen: i64,
    pub problems: Vec<String>,
}

/// One aligned `name value` line of the report.
pub fn row(s: &mut String, k: &str, v: String) {
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
/// The rows under a phase's headline: its CPU and the Events dropped in it.
fn phase_rows(s: &mut String, p: &Phase) {
    row(s, "    CPU", p.cpu());
    row(s, "    Events dropped (queue full)", p.events_dropped.to_string());
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
            "{:.1} s virtual, {:.2} s wall (wall/virtual {:.2}), {} reconciles",
            r.setup.virtual_seconds, r.setup.wall_seconds, r.setup.wall_per_virtual, r.setup_reconciles
        ),
    );
    phase_rows(&mut s, &r.setup);
    row(
        &mut s,
        "    apiserver writes per pod (all clients)",
        format!("{:.2}", r.setup_writes_per_pod),
    );
    write_rows(&mut s, &r.setup_writes);
    row(
        &mut s,
        "rollout: all pods updated + Ready",
        format!(
            "{:.2} s virtual, {:.2} s wall (wall/virtual {:.2})",
            r.rollout.virtual_seconds, r.rollout.wall_seconds, r.rollout.wall_per_virtual
        ),
    );
    phase_rows(&mut s, &r.rollout);
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
            "setup {:.1} MiB, rollout {:.1} MiB{}; {:.1} MiB with the figures' own lists (VmRSS after setup {:.1} MiB, now {:.1} MiB)",
            m.vm_hwm_setup_mib,
            m.vm_hwm_rollout_mib,
            if m.peak_reset {
                ""
            } else {
                " (peak not reset: includes the setup's)"
            },
            m.vm_hwm_mib,
            m.rss_after_setup_mib,
            m.vm_rss_mib
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
