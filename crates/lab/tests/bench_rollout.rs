//! `insitu bench` (the in-place rollout) at 400 pods with the controller on the cluster's thread and in turns
//! on the second core: the same rollout on the same virtual clock either way, every pod verified.

use clap::Parser;
use insitu_lab::bench::BenchArgs;
use insitu_lab::bench::rollout::run;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn bench(extra: &[&str]) -> insitu_lab::bench::report::BenchReport {
    let mut argv = vec![
        "bench",
        "--pods",
        "400",
        "--nodes",
        "8",
        "--plan-samples",
        "1",
        "--timeout",
        "600",
    ];
    argv.extend_from_slice(extra);
    let Cli { args } = Cli::parse_from(argv);
    let rt = insitu_lab::simtime::runtime().expect("runtime");
    rt.block_on(run(args)).expect("the bench runs")
}

#[test]
fn rollout_is_the_same_with_the_controller_on_either_core() {
    let shared = bench(&["--controller-on-cluster-thread"]);
    let second = bench(&[]);
    for (name, r) in [("cluster thread", &shared), ("second core", &second)] {
        // Every pod kept its UID and runs the new image, Ready (the bench's own verification).
        assert!(r.problems.is_empty(), "{name}: {:?}", r.problems);
        assert_eq!(r.pods, 400);
        // Three pod writes per updated pod, whichever thread the controller ran on.
        assert!(
            (2.99..=3.05).contains(&r.writes.controller_pod_writes_per_pod),
            "{name}: {:?}",
            r.writes
        );
        // The CPU figures are read (/proc): the cluster thread's seconds are part of the process's (which
        // count in 1/100 s ticks, hence the slack).
        let (cpu, cluster) = (r.rollout.cpu_seconds, r.rollout.cluster_thread_cpu_seconds);
        assert!(
            cpu > 0.0 && cluster > 0.0 && cluster <= cpu + 0.02,
            "{name}: rollout CPU {cpu} s, cluster thread {cluster} s"
        );
        // The setup created and bound each pod exactly once.
        let setup = |verb: &str, resource: &str| {
            r.setup_writes
                .iter()
                .find(|w| w.verb == verb && w.resource == resource)
                .map_or(0, |w| w.count)
        };
        assert_eq!(setup("create", "pods"), 400, "{name}: {:?}", r.setup_writes);
        assert_eq!(
            setup("create", "pods/binding"),
            400,
            "{name}: {:?}",
            r.setup_writes
        );
        // At 400 pods no Event queue fills: the scheduler's and the kubelets' five Events per new pod
        // (Scheduled, Pulling, Pulled, Created, Started) are all written (the controller's own come on top),
        // and none is counted as dropped.
        assert_eq!(
            (r.setup.events_dropped, r.rollout.events_dropped),
            (0, 0),
            "{name}"
        );
        assert!(setup("create", "events") >= 2000, "{name}: {:?}", r.setup_writes);
        // Virtual time: the rollout cannot beat the kubelets' floor (two batches of preStop, pull, start and
        // readiness), and an idle-looking controller must not let time run ahead (within 3 s of the floor).
        let floor = r.floor.floor_seconds;
        assert!(
            r.rollout.virtual_seconds >= floor && r.rollout.virtual_seconds <= floor + 3.0,
            "{name}: rollout {} s virtual, floor {floor} s",
            r.rollout.virtual_seconds
        );
    }
}
