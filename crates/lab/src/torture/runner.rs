//! Runs many seeds, in parallel (each on its own thread, runtime and virtual clock), and reports them in order.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};

use super::{SeedReport, TortureArgs, run_one};

/// Totals over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub seeds: u64,
    pub faults: u64,
    /// Injected Status answers by HTTP code, over all seeds.
    pub by_code: std::collections::BTreeMap<u16, u64>,
    pub crashes: u64,
    pub node_losses: u64,
    pub evictions: u64,
    pub partitions: u64,
    pub events: u64,
    pub failed: Vec<u64>,
}

/// Runs `seeds` on `jobs` threads; `each` sees every report in seed order.
pub fn run_seeds(
    seeds: &[u64],
    max_pods: i32,
    jobs: usize,
    live_trace: bool,
    mut each: impl FnMut(&SeedReport),
) -> anyhow::Result<Totals> {
    let jobs = match jobs {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, seeds.len().max(1));
    let next = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<(usize, anyhow::Result<SeedReport>)>();
    let seeds_arc: Arc<Vec<u64>> = Arc::new(seeds.to_vec());
    let mut workers = Vec::new();
    for _ in 0..jobs {
        let (next, tx, seeds) = (next.clone(), tx.clone(), seeds_arc.clone());
        workers.push(std::thread::spawn(move || {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { return };
                if tx.send((i, run_one(seed, max_pods, live_trace))).is_err() {
                    return;
                }
            }
        }));
    }
    drop(tx);
    // Reports arrive in any order; hand them on in seed order.
    let mut pending = std::collections::BTreeMap::new();
    let (mut want, mut totals) = (0usize, Totals::default());
    for (i, r) in rx {
        pending.insert(i, r?);
        while let Some(r) = pending.remove(&want) {
            totals.seeds += 1;
            totals.faults += r.faults;
            totals.crashes += r.crashes;
            totals.node_losses += r.node_losses;
            totals.evictions += r.evictions;
            totals.partitions += r.partitions;
            for (code, n) in &r.by_code {
                *totals.by_code.entry(*code).or_default() += n;
            }
            totals.events += r.events;
            if !r.violations.is_empty() {
                totals.failed.push(r.seed);
            }
            each(&r);
            want += 1;
        }
    }
    for w in workers {
        let _ = w.join();
    }
    Ok(totals)
}

fn print_failure(r: &SeedReport, pods: i32) {
    println!(
        "seed {}: {} violation(s): {}",
        r.seed,
        r.violations.len(),
        r.description
    );
    for v in &r.violations {
        println!("  {v}");
    }
    println!("  events around it:");
    for l in &r.trace {
        println!("    {l}");
    }
    println!(
        "  reproduce: insitu torture --seed {} --pods {pods} --trace",
        r.seed
    );
}

pub fn main(args: TortureArgs) -> anyhow::Result<ExitCode> {
    let seeds: Vec<u64> = match args.seed {
        Some(s) => vec![s],
        None => (args.start..args.start + args.seeds).collect(),
    };
    let started = std::time::Instant::now();
    let live = args.trace && args.seed.is_some();
    let totals = run_seeds(&seeds, args.pods, args.jobs, live, |r| {
        if args.trace && args.seed.is_none() {
            for l in &r.trace {
                eprintln!("seed {}: {l}", r.seed);
            }
        }
        if !r.violations.is_empty() {
            print_failure(r, args.pods);
        }
    })?;
    println!(
        "torture: {} seed(s), {} fault(s) injected ({} controller crashes, {} nodes lost, {} pods evicted, {} lease holders partitioned, statuses by code {:?}), {} pod events checked, {} violating seed(s) in {:.1}s",
        totals.seeds,
        totals.faults,
        totals.crashes,
        totals.node_losses,
        totals.evictions,
        totals.partitions,
        totals.by_code,
        totals.events,
        totals.failed.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(if totals.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
