//! The seed scenario end to end on the simulated cluster, on virtual time: in place, one pod at a time.

use insitu_lab::demo::{self, DemoArgs};

#[test]
fn seed_image_change_goes_in_place_one_pod_at_a_time() {
    let rt = insitu_lab::simtime::runtime().expect("runtime");
    let args = DemoArgs {
        json: true,
        speed: 0.0,
        seed: 7,
        nodes: 3,
        timeout: 600,
    };
    let report = rt.block_on(demo::run(args)).expect("demo runs to completion");
    assert_eq!(report.pods_before.len(), 3);
    assert_eq!(report.pods_after.len(), 3);
    for (b, a) in report.pods_before.iter().zip(&report.pods_after) {
        assert_eq!(
            (&b.name, &b.uid, &b.ip),
            (&a.name, &a.uid, &a.ip),
            "pod identity kept"
        );
        assert_eq!(b.image, "nginx:1.19.0");
        assert_eq!(a.image, "nginx:1.20.0");
        assert_eq!(b.restarts, 0);
        assert_eq!(a.restarts, 1, "exactly one container restart");
    }
    assert!(report.in_place);
    assert!(
        report.max_unavailable_seen <= 1,
        "maxUnavailable 1 respected: saw {}",
        report.max_unavailable_seen
    );
    assert_eq!(
        report.max_unavailable_seen, 1,
        "the rollout did take a pod out of service"
    );
    // Each pod: grace 10 s + preStop 5 s + pull/start + readiness 5 s, one at a time.
    assert!(
        report.duration_seconds >= 3.0 * 20.0,
        "rollout took {}s",
        report.duration_seconds
    );
    assert!(report.problems().is_empty(), "{:?}", report.problems());
}
