//! Runs `plan()` on the bench fixture a fixed number of times, for measurements that survive a loaded
//! machine (see docs/benchmarks.md):
//!
//! ```text
//! # instructions per plan (valgrind; exact and repeatable)
//! valgrind --tool=callgrind --toggle-collect='insitu_core::sync::plan' \
//!     target/release/deps/plan_count-<hash> 10000 steady 3
//! # CPU time per plan: best batch, on-CPU time from /proc/thread-self/schedstat (time spent waiting for a
//! # core under load is not counted) next to wall time
//! target/release/deps/plan_count-<hash> 10000 steady 200 --time
//! ```
//!
//! Arguments: pods (default 10000), `steady` | `rollout` | `inflight` (default steady), plans (default 1), `--time`,
//! `--raw`. By default `plan()` gets the pod summaries precomputed, as from the controller (they are made
//! before the plans, outside the measured function). `--raw` plans from the raw pods instead (no summaries:
//! `plan()` makes them). `--time` times both, and making the summaries of all pods once.

use std::hint::black_box;
use std::time::Instant;

mod fixture;

/// Nanoseconds this thread has run on a CPU (Linux schedstat); `None` elsewhere.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Best batch of `f`, in `iters.div_ceil(10)` batches of at least 10 calls and 20 ms each (schedstat
/// advances in scheduler ticks, so shorter batches cannot be timed): (ms CPU, ms wall) per call, and the
/// last result.
fn time<R>(iters: usize, mut f: impl FnMut() -> R) -> (f64, f64, R) {
    let t0 = Instant::now();
    let mut last = black_box(f());
    let once = t0.elapsed().as_secs_f64().max(1e-9);
    let batch = ((0.020 / once).ceil() as usize).max(10);
    let (mut best_cpu, mut best_wall) = (f64::MAX, f64::MAX);
    for _ in 0..iters.div_ceil(10).max(1) {
        let (c0, t0) = (cpu_ns(), Instant::now());
        for _ in 0..batch {
            last = black_box(f());
        }
        let wall = t0.elapsed().as_secs_f64() * 1e3 / batch as f64;
        best_wall = best_wall.min(wall);
        if let (Some(a), Some(b)) = (c0, cpu_ns()) {
            best_cpu = best_cpu.min((b - a) as f64 / 1e6 / batch as f64);
        }
    }
    (best_cpu, best_wall, last)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let (timed, raw_only) = (flag("--time"), flag("--raw"));
    let mut pos = args.iter().filter(|a| !a.starts_with("--"));
    let n: usize = pos.next().map_or(10_000, |a| a.parse().expect("pods"));
    let case = match pos.next().map(String::as_str) {
        None | Some("steady") => fixture::Case::Steady,
        Some("rollout") => fixture::Case::Rollout,
        Some("inflight") => fixture::Case::InFlight,
        Some(other) => panic!("expected steady, rollout or inflight, got {other}"),
    };
    let iters: usize = pos.next().map_or(1, |a| a.parse().expect("plans"));
    let raw = fixture::snapshot(n, case);
    let summarised = fixture::summarised(&raw);
    if !timed {
        let (s, what) = if raw_only {
            (&raw, "from raw pods")
        } else {
            (&summarised, "with precomputed summaries")
        };
        let mut actions = 0;
        for _ in 0..iters {
            actions = black_box(insitu_core::plan(black_box(s))).actions.len();
        }
        println!("{n} pods, case={case:?}, {iters} plan(s) {what}, {actions} action(s)");
        return;
    }
    let size = std::mem::size_of::<insitu_core::PodSummary>();
    let runs: [(&str, &insitu_core::Snapshot); 2] = [
        ("plan, summaries precomputed", &summarised),
        ("plan from raw pods", &raw),
    ];
    for (what, s) in runs {
        if raw_only && std::ptr::eq(s, &summarised) {
            continue;
        }
        let (cpu, wall, p) = time(iters, || insitu_core::plan(black_box(s)));
        println!(
            "{n} pods, case={case:?}, {} action(s), {what}: best batch {cpu:.3} ms CPU, {wall:.3} ms wall per plan",
            p.actions.len()
        );
    }
    let (cpu, wall, _) = time(iters.min(20), || fixture::summaries(black_box(&raw)));
    println!(
        "{n} pods: summarising every pod once ({size} B each): best batch {cpu:.3} ms CPU, {wall:.3} ms wall"
    );
}
