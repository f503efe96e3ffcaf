//! Planning cost for one CloneSet with 1k / 10k / 100k pods: mid-rollout (half the pods updated, 10% may
//! start an in-place update this round), in-flight (half the pods mid-update, nothing may start) and steady
//! (all updated, state annotations present, nothing to do).
//!
//! `plan/<case>/<n>`: with the pod summaries precomputed, as the controller plans. `plan-raw/<case>/<n>`:
//! from the raw pods (`Snapshot::summaries` is `None`, so `plan()` summarises every pod first).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

mod fixture;
use fixture::{Case, snapshot, summarised};

fn bench(c: &mut Criterion) {
    for (group, precomputed) in [("plan", true), ("plan-raw", false)] {
        for (name, case) in [
            ("rollout", Case::Rollout),
            ("inflight", Case::InFlight),
            ("steady", Case::Steady),
        ] {
            let mut g = c.benchmark_group(format!("{group}/{name}"));
            g.sample_size(10);
            for n in [1_000usize, 10_000, 100_000] {
                let raw = snapshot(n, case);
                let s = if precomputed { summarised(&raw) } else { raw };
                let p = insitu_core::plan(&s);
                // Only the mid-rollout population has something to do.
                let settled = case != Case::Rollout;
                assert_eq!(p.actions.is_empty(), settled, "{name}: {:?}", p.explanation);
                g.bench_with_input(BenchmarkId::from_parameter(n), &s, |b, s| {
                    b.iter(|| insitu_core::plan(black_box(s)))
                });
            }
            g.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
