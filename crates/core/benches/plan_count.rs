//! Runs `plan()` on the bench fixture a fixed number of times, for measurements that survive a loaded
//! machine (see docs/benchmarks.md):
//!
//! ```text
//! # instructions per plan (valgrind; exact and repeatable)
//! valgrind --tool=callgrind --toggle-collect='insitu_core::planner::plan' \
//!     target/release/deps/plan_count-<hash> 10000 steady 3
//! # CPU time per plan: best batch, on-CPU time from /proc/thread-self/schedstat (time spent waiting for a
//! # core under load is not counted) next to wall time
//! target/release/deps/plan_count-<hash> 10000 steady 200 --time
//! ```
//!
//! Arguments: pods (default 10000), `steady` | `rollout` (default steady), plans (default 1), `--time`.

use std::hint::black_box;
use std::time::Instant;

mod fixture;

/// Nanoseconds this thread has run on a CPU (Linux schedstat); `None` elsewhere.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let time = args.iter().any(|a| a == "--time");
    let mut pos = args.iter().filter(|a| !a.starts_with("--"));
    let n: usize = pos.next().map_or(10_000, |a| a.parse().expect("pods"));
    let steady = match pos.next().map(String::as_str) {
        None | Some("steady") => true,
        Some("rollout") => false,
        Some(other) => panic!("expected steady or rollout, got {other}"),
    };
    let iters: usize = pos.next().map_or(1, |a| a.parse().expect("plans"));
    let s = fixture::snapshot(n, steady);
    let mut actions = 0;
    if !time {
        for _ in 0..iters {
            actions = black_box(insitu_core::plan(black_box(&s))).actions.len();
        }
        println!("{n} pods, steady={steady}, {iters} plan(s), {actions} action(s)");
        return;
    }
    // Batches of ~10 plans: schedstat advances in scheduler ticks, so single plans are too short to time.
    let batch = 10.min(iters).max(1);
    let (mut best_cpu, mut best_wall) = (f64::MAX, f64::MAX);
    for _ in 0..iters.div_ceil(batch) {
        let (c0, t0) = (cpu_ns(), Instant::now());
        for _ in 0..batch {
            actions = black_box(insitu_core::plan(black_box(&s))).actions.len();
        }
        let wall = t0.elapsed().as_secs_f64() * 1e3 / batch as f64;
        best_wall = best_wall.min(wall);
        if let (Some(a), Some(b)) = (c0, cpu_ns()) {
            best_cpu = best_cpu.min((b - a) as f64 / 1e6 / batch as f64);
        }
    }
    println!(
        "{n} pods, steady={steady}, {actions} action(s): best batch {best_cpu:.3} ms CPU, {best_wall:.3} ms wall per plan"
    );
}
