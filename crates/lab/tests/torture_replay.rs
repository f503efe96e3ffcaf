//! `insitu torture --seed S --trace` is a replay: two runs of one seed give the same trace, line for line
//! (compared by the digest of every line and the count), for seeds drawing each kind of fault.

use insitu_lab::torture::run_one;
use insitu_lab::torture::scenario::Scenario;

/// The first seed (from 1) whose scenario satisfies `want`.
fn first(want: impl Fn(&Scenario) -> bool) -> u64 {
    (1..2_000)
        .find(|s| want(&Scenario::generate(*s, 8)))
        .expect("a seed with that scenario")
}

#[test]
fn two_runs_of_a_seed_give_the_same_trace() {
    let seeds = [
        1,
        first(|s| s.node_loss.as_ref().is_some_and(|l| l.secs >= 360)),
        first(|s| s.partition.as_ref().is_some_and(|p| p.secs > 15)),
        first(|s| s.leader_election && !s.crashes.is_empty() && s.malformed_at.is_some()),
    ];
    for seed in seeds {
        let a = run_one(seed, 8, false).expect("run");
        let b = run_one(seed, 8, false).expect("run");
        assert!(
            a.trace_digest.1 > 20,
            "seed {seed}: only {} trace lines",
            a.trace_digest.1
        );
        assert_eq!(
            (a.trace_digest, &a.trace),
            (b.trace_digest, &b.trace),
            "seed {seed}: two runs differ ({})",
            a.description
        );
    }
}
