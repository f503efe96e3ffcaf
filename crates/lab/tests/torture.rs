//! CI's share of `insitu torture`: a fixed range of seeds (every fault kind the scenarios draw), 0 violations,
//! and proof that faults were injected (a run without them would check nothing).

use insitu_lab::torture::runner::run_seeds;

/// Seeds 1..=300 with up to 8 replicas, as `insitu torture --seeds 300 --jobs 2`.
const SEEDS: u64 = 300;

#[test]
fn three_hundred_seeds_without_a_violation() {
    let seeds: Vec<u64> = (1..=SEEDS).collect();
    let mut failures = Vec::new();
    let totals = run_seeds(&seeds, 8, 2, false, |r| {
        if !r.violations.is_empty() {
            failures.push(format!(
                "seed {}: {}\n  {}\n  reproduce: insitu torture --seed {} --trace",
                r.seed,
                r.description,
                r.violations.join("\n  "),
                r.seed
            ));
        }
    })
    .expect("torture runs");
    assert_eq!(totals.seeds, SEEDS);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every kind of fault the scenarios draw was injected, many times over.
    for code in [409, 410, 429, 500] {
        let n = totals.by_code.get(&code).copied().unwrap_or(0);
        assert!(n >= 50, "only {n} injected {code}s: {:?}", totals.by_code);
    }
    assert!(
        totals.crashes >= 100,
        "only {} controller crashes",
        totals.crashes
    );
    assert!(totals.faults > 5_000, "only {} faults", totals.faults);
    // Node loss: nodes cut off, some long enough that the taint manager evicted their pods.
    assert!(totals.node_losses >= 60, "only {} nodes lost", totals.node_losses);
    assert!(totals.evictions >= 50, "only {} pods evicted", totals.evictions);
    // Lease holders partitioned from the apiserver while running (the deposed one must write nothing after).
    assert!(
        totals.partitions >= 20,
        "only {} lease holders partitioned",
        totals.partitions
    );
    assert!(
        totals.events > 10_000,
        "only {} pod events checked",
        totals.events
    );
}

/// Seed 6405 of the first 10,000-seed run (50 pods): scaled 36 → 4 with `partition: 17` while four old-revision
/// pods run a broken image. Kruise's arithmetic keeps those (partition) and may delete only ready updated pods,
/// which `deleteReadyLimit` forbids: the controller must stall there, and the checker must accept that state
/// rather than report "no convergence".
#[test]
fn partition_blocked_scale_down_is_a_stall_not_a_violation() {
    let description = one_seed_without_a_violation(6405);
    assert!(description.contains("Scale(4)"), "{description}");
}

/// Seed 3474 of the 10,000-seed run (50 pods): a rollback 1.20.0 → 1.19.0 written while the kubelet was replacing
/// the 1.19.0 container for the first update (stopped, then starting 1.20.0). Kruise's completion rule alone
/// (same imageID, status image = spec) saw the rollback complete at once; the kubelet's restart then took the pod
/// down, one unavailable pod more than `maxUnavailable`. The controller now waits until the status shows neither
/// the replaced container nor the overwritten image (`core::inplaceupdate::restart`).
#[test]
fn a_rollback_during_the_kubelets_restart_stays_within_max_unavailable() {
    one_seed_without_a_violation(3474);
}

/// Runs one seed at up to 50 pods, asserts it has no violation, and returns its scenario's description.
fn one_seed_without_a_violation(seed: u64) -> String {
    let mut description = String::new();
    let totals = run_seeds(&[seed], 50, 1, false, |r| {
        assert!(
            r.violations.is_empty(),
            "seed {seed}: {}\n  {}",
            r.description,
            r.violations.join("\n  ")
        );
        description.clone_from(&r.description);
    })
    .expect("torture runs");
    assert_eq!(totals.seeds, 1);
    description
}
