//! Runs `plan()` a fixed number of times on the bench fixture, for instruction counting:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='insitu_core::planner::plan' \
//!     target/release/deps/plan_count-* 10000 steady 3
//! ```
//!
//! Arguments: pods (default 10000), `steady` | `rollout` (default steady), iterations (default 1).
//! Instruction counts are stable under load, unlike wall time on a shared machine.

use std::hint::black_box;

mod fixture;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(10_000, |a| a.parse().expect("pods"));
    let steady = match args.next().as_deref() {
        None | Some("steady") => true,
        Some("rollout") => false,
        Some(other) => panic!("expected steady or rollout, got {other}"),
    };
    let iters: usize = args.next().map_or(1, |a| a.parse().expect("iterations"));
    let s = fixture::snapshot(n, steady);
    let mut actions = 0;
    for _ in 0..iters {
        actions = black_box(insitu_core::plan(black_box(&s))).actions.len();
    }
    println!("{n} pods, steady={steady}, {iters} plan(s), {actions} action(s)");
}
