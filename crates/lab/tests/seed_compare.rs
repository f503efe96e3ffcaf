//! CI smoke test of `insitu bench seed-compare --pods 20`: the comparison's invariants, not its figures.

use clap::Parser;
use insitu_lab::bench::seed_compare::{SeedCompareArgs, run};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: SeedCompareArgs,
}

#[test]
fn seed_compare_20_pods_invariants() {
    let Cli { args } = Cli::parse_from(["seed-compare", "--pods", "20", "--seed", "3"]);
    let rt = insitu_lab::simtime::runtime().expect("runtime");
    let r = rt.block_on(run(args)).expect("seed-compare runs");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let (a, b) = (&r.in_place, &r.recreate);
    // In place: the same pods (UIDs, IPs) and nothing above the replicas.
    assert_eq!((a.ip_changes, a.uid_changes, a.peak_extra_pods), (0, 0, 0));
    assert_eq!(a.peak_extra_cpu_percent, 0.0);
    // Recreate: every pod replaced by one the scheduler placed (new UID, new IP), replacements overlapping the
    // terminating pods (maxUnavailable 10% = 2 at a time).
    assert_eq!((b.ip_changes, b.uid_changes), (20, 20));
    assert!(b.peak_extra_pods >= 1, "{b:?}");
    assert!(b.peak_extra_cpu_percent > 0.0, "{b:?}");
    // Both timelines end with every pod updated and Ready, never more than maxUnavailable down at once.
    for run in [a, b] {
        let last = run.timeline.last().expect("a timeline");
        assert_eq!(
            (last.updated, last.ready, last.unavailable),
            (20, 20, 0),
            "{}",
            run.strategy
        );
        assert!(
            run.max_unavailable_seen <= 2,
            "{}: {}",
            run.strategy,
            run.max_unavailable_seen
        );
        assert!(run.total_seconds > 0.0 && run.api_writes_per_pod > 0.0);
    }
}
