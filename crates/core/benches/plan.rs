//! Planning cost for one CloneSet with 1k / 10k / 100k pods: mid-rollout (half the pods updated, 10% may
//! start an in-place update this round) and steady (all updated, state annotations present, nothing to do).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

mod fixture;
use fixture::snapshot;

fn bench(c: &mut Criterion) {
    for (name, steady) in [("rollout", false), ("steady", true)] {
        let mut g = c.benchmark_group(format!("plan/{name}"));
        g.sample_size(10);
        for n in [1_000usize, 10_000, 100_000] {
            let s = snapshot(n, steady);
            let p = insitu_core::plan(&s);
            assert_eq!(p.actions.is_empty(), steady, "{name}: {:?}", p.explanation);
            g.bench_with_input(BenchmarkId::from_parameter(n), &s, |b, s| {
                b.iter(|| insitu_core::plan(black_box(s)))
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
