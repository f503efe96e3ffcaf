//! Unit tests of the per-pod runtime model on virtual timestamps.

use super::spec::ProbeT;
use super::*;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Probe};
use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, Lifecycle, LifecycleHandler, PodSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rand::SeedableRng;

use crate::kubelet::image::{ImageFailure, ImageProfile, image_id};

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn seed_pod(image: &str) -> Pod {
    let probe = |delay, period| Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/".into()),
            port: IntOrString::Int(80),
            ..Default::default()
        }),
        initial_delay_seconds: Some(delay),
        period_seconds: Some(period),
        ..Default::default()
    };
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            uid: Some("u1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "nginx".into(),
                image: Some(image.into()),
                readiness_probe: Some(probe(5, 3)),
                liveness_probe: Some(probe(10, 5)),
                lifecycle: Some(Lifecycle {
                    pre_stop: Some(LifecycleHandler {
                        exec: Some(ExecAction {
                            command: Some(vec!["/bin/sh".into(), "-c".into(), "sleep 5".into()]),
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

struct Harness {
    images: ImageProfiles,
    node: NodeRt,
    rng: ChaCha8Rng,
    events: Vec<KEvent>,
    config_maps: ConfigMaps,
}

impl Harness {
    fn new(images: ImageProfiles) -> Self {
        Self {
            images,
            node: NodeRt::default(),
            rng: ChaCha8Rng::seed_from_u64(7),
            events: vec![],
            config_maps: ConfigMaps::default(),
        }
    }
    fn env(&mut self) -> Env<'_> {
        Env {
            images: &self.images,
            node: &mut self.node,
            rng: &mut self.rng,
            events: &mut self.events,
            config_maps: &self.config_maps,
        }
    }
    /// Advances through every deadline up to `until`.
    fn run(&mut self, rt: &mut PodRt, until: Timestamp) {
        while let Some(d) = rt.deadline().filter(|d| *d <= until) {
            rt.advance(d, &mut self.env());
        }
    }
    fn reasons(&mut self) -> Vec<&'static str> {
        self.events.drain(..).map(|e| e.reason).collect()
    }
}

fn c(rt: &PodRt, _pod: &Pod) -> ContainerStatus {
    rt.statuses().1.remove(0)
}

#[test]
fn probe_pass_times() {
    let p = ProbeT {
        initial: Duration::from_secs(5),
        period: Duration::from_secs(3),
        success: 1,
    };
    assert_eq!(p.pass_time(t(0), t(0)), t(5));
    assert_eq!(p.pass_time(t(0), t(6)), t(8));
    assert_eq!(p.pass_time(t(0), t(8)), t(8));
    let p2 = ProbeT { success: 2, ..p };
    assert_eq!(p2.pass_time(t(0), t(0)), t(8));
    assert_eq!(go_duration(Duration::from_secs(80)), "1m20s");
    assert_eq!(go_duration(Duration::from_millis(2500)), "2.5s");
    assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
}

#[test]
fn seed_lifecycle_start_update_delete() {
    let mut h = Harness::new(ImageProfiles::default());
    let pod = seed_pod("nginx:1.19.0");
    let mut rt = PodRt::new(&pod, t(0), &mut h.env());
    rt.advance(t(0), &mut h.env());
    assert_eq!(h.reasons(), ["Pulling"]);
    let s = c(&rt, &pod);
    assert_eq!(
        s.state.and_then(|s| s.waiting).and_then(|w| w.reason).as_deref(),
        Some("ContainerCreating")
    );
    h.run(&mut rt, t(3));
    assert_eq!(h.reasons(), ["Pulled", "Created", "Started"]);
    let s = c(&rt, &pod);
    assert!(!s.ready && s.started == Some(true));
    assert_eq!(s.image, "docker.io/library/nginx:1.19.0");
    assert_eq!(s.image_id, image_id("nginx:1.19.0"));
    assert!(
        s.container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("containerd://") && id.len() == 13 + 64)
    );
    assert_eq!(
        rt.deadline(),
        Some(t(8)),
        "ready at pull 2s + start 1s + initialDelay 5s"
    );
    h.run(&mut rt, t(8));
    assert!(c(&rt, &pod).ready);
    let first_id = c(&rt, &pod).container_id;

    // In-place update at t=20: preStop 5s, then pull 2s + start 1s, then ready after initialDelay 5s.
    let new = seed_pod("nginx:1.21.0");
    rt.update_spec(&new, t(20), &mut h.env());
    assert_eq!(h.reasons(), ["Killing"]);
    assert_eq!(h.events.len(), 0);
    let s = c(&rt, &new);
    assert!(!s.ready && s.state.and_then(|s| s.running).is_some());
    h.run(&mut rt, t(25));
    let s = c(&rt, &new);
    let term = s.state.and_then(|s| s.terminated).unwrap_or_default();
    assert_eq!((term.exit_code, term.reason.as_deref()), (0, Some("Completed")));
    assert_eq!(
        s.image_id,
        image_id("nginx:1.19.0"),
        "old image until the new container runs"
    );
    h.run(&mut rt, t(28));
    let s = c(&rt, &new);
    assert_eq!(s.restart_count, 1);
    assert_eq!(s.image_id, image_id("nginx:1.21.0"));
    assert_ne!(s.container_id, first_id);
    let last = s.last_state.and_then(|l| l.terminated).unwrap_or_default();
    assert_eq!((last.exit_code, last.container_id), (0, first_id));
    assert!(!s.ready);
    h.run(&mut rt, t(33));
    assert!(c(&rt, &new).ready);
    assert_eq!(h.reasons(), ["Pulling", "Pulled", "Created", "Started"]);

    // Back to the first image: already on the node, so no pull.
    let back = seed_pod("nginx:1.19.0");
    rt.update_spec(&back, t(40), &mut h.env());
    h.run(&mut rt, t(46));
    assert_eq!(h.reasons(), ["Killing", "Pulled", "Created", "Started"]);
    assert_eq!(c(&rt, &back).restart_count, 2);

    // Delete with a 30s grace period: preStop 5s then terminal.
    rt.terminate(t(100), Duration::from_secs(30), &mut h.env());
    assert_eq!(rt.deadline(), Some(t(105)));
    h.run(&mut rt, t(105));
    assert!(rt.terminal());
    let (_, st) = rt.statuses();
    assert_eq!(
        st[0]
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code),
        Some(0)
    );
}

#[test]
fn crash_loop_backoff_doubles() {
    let crash = ImageProfile {
        fail: ImageFailure::CrashAfter(Duration::from_secs(3)),
        ..Default::default()
    };
    let mut h = Harness::new(ImageProfiles::default().with("crashy:*", crash));
    let pod = seed_pod("crashy:1");
    let mut rt = PodRt::new(&pod, t(0), &mut h.env());
    // runs at 3, crashes at 6, restarts at once (runs at 7), crashes at 10, back-off 10s → runs at 21,
    // crashes at 24, back-off 20s → runs at 45, crashes 48, back-off 40s → runs at 89.
    let mut starts = vec![];
    let mut now = 0;
    while now < 200 {
        h.run(&mut rt, t(now));
        for e in h.events.drain(..) {
            if e.reason == "Started" {
                starts.push(e.at.as_second() - t(0).as_second());
            }
        }
        now += 1;
    }
    assert_eq!(&starts[..5], &[3, 7, 21, 45, 89]);
    h.run(&mut rt, t(50));
    let s = c(&rt, &pod);
    assert!(!s.ready);
    let mut waiting = None;
    let mut h2 = Harness::new(h.images.clone());
    let mut rt2 = PodRt::new(&pod, t(0), &mut h2.env());
    h2.run(&mut rt2, t(12));
    if let Some(st) = c(&rt2, &pod).state {
        waiting = st.waiting.and_then(|w| w.reason);
    }
    assert_eq!(waiting.as_deref(), Some("CrashLoopBackOff"));
    let s2 = c(&rt2, &pod);
    assert_eq!(s2.restart_count, 1);
    assert_eq!(
        s2.last_state
            .and_then(|l| l.terminated)
            .map(|t| (t.exit_code, t.reason)),
        Some((1, Some("Error".into())))
    );
}

#[test]
fn image_pull_backoff() {
    let bad = ImageProfile {
        fail: ImageFailure::NeverPulls,
        ..Default::default()
    };
    let mut h = Harness::new(ImageProfiles::default().with("nginx:nope", bad));
    let pod = seed_pod("nginx:nope");
    let mut rt = PodRt::new(&pod, t(0), &mut h.env());
    h.run(&mut rt, t(2));
    let reason = |rt: &PodRt| {
        c(rt, &pod)
            .state
            .and_then(|s| s.waiting)
            .and_then(|w| w.reason)
            .unwrap_or_default()
    };
    assert_eq!(reason(&rt), "ErrImagePull");
    h.run(&mut rt, t(3));
    assert_eq!(reason(&rt), "ImagePullBackOff");
    assert_eq!(rt.deadline(), Some(t(12)), "retry after 10s");
    h.run(&mut rt, t(14));
    assert_eq!(reason(&rt), "ErrImagePull");
    assert_eq!(rt.deadline(), Some(t(15)));
    h.run(&mut rt, t(15));
    assert_eq!(rt.deadline(), Some(t(34)), "then 20s");
    // Fixing the image starts it right away.
    let good = seed_pod("nginx:1.19.0");
    rt.update_spec(&good, t(20), &mut h.env());
    h.run(&mut rt, t(23));
    assert!(c(&rt, &good).state.and_then(|s| s.running).is_some());
}

#[test]
fn start_model_sandbox_and_transient_failures() {
    let running = |rt: &PodRt, pod: &Pod| c(rt, pod).state.and_then(|s| s.running).is_some();
    // A new pod waits for its sandbox (2 s) before the pull (2 s) and start (1 s).
    let starts = super::super::StartModel {
        sandbox: Duration::from_secs(2),
        ..Default::default()
    };
    let mut h = Harness::new(ImageProfiles {
        starts,
        ..Default::default()
    });
    let pod = seed_pod("nginx:1.19.0");
    let mut rt = PodRt::new(&pod, t(0), &mut h.env());
    h.run(&mut rt, t(4));
    assert!(!running(&rt, &pod), "sandbox, then pull: not yet running at 4 s");
    h.run(&mut rt, t(5));
    assert!(running(&rt, &pod));
    // Every first start fails once it is certain: ErrImagePull, back-off, retried (and failing again).
    let always = super::super::StartModel {
        new_pod_failure_ppm: 1_000_000,
        ..Default::default()
    };
    let mut h = Harness::new(ImageProfiles {
        starts: always,
        ..Default::default()
    });
    let mut rt = PodRt::new(&pod, t(0), &mut h.env());
    h.run(&mut rt, t(2));
    let waiting = c(&rt, &pod).state.and_then(|s| s.waiting).and_then(|w| w.reason);
    assert_eq!(waiting.as_deref(), Some("ErrImagePull"));
    assert!(h.events.iter().any(|e| e.message.contains("i/o timeout")));
    // Restarts in place have their own chance (0 here): the running container's update succeeds.
    let none = super::super::StartModel {
        new_pod_failure_ppm: 0,
        restart_failure_ppm: 0,
        ..Default::default()
    };
    let mut h = Harness::new(ImageProfiles {
        starts: none,
        ..Default::default()
    });
    let mut rt = PodRt::new(&pod, t(0), &mut h.env());
    h.run(&mut rt, t(4));
    h.images.starts.restart_failure_ppm = 1_000_000;
    rt.update_spec(&seed_pod("nginx:1.20.0"), t(10), &mut h.env());
    h.run(&mut rt, t(20));
    assert!(
        h.events.iter().any(|e| e.message.contains("i/o timeout")),
        "restart attempt failed"
    );
}

#[test]
fn grace_period_bounds_prestop() {
    let mut h = Harness::new(ImageProfiles::default());
    let pod = seed_pod("nginx:1.19.0");
    let mut rt = PodRt::new(&pod, t(0), &mut h.env());
    h.run(&mut rt, t(10));
    rt.terminate(t(10), Duration::from_secs(2), &mut h.env());
    assert_eq!(rt.deadline(), Some(t(12)));
    h.run(&mut rt, t(12));
    assert!(rt.terminal());
    // Deleted before it ever ran.
    let mut rt = PodRt::new(&pod, t(0), &mut h.env());
    rt.advance(t(0), &mut h.env());
    rt.terminate(t(1), Duration::from_secs(30), &mut h.env());
    assert!(rt.terminal());
    let s = c(&rt, &pod);
    assert_eq!(
        s.state
            .and_then(|s| s.terminated)
            .and_then(|t| t.reason)
            .as_deref(),
        Some("ContainerStatusUnknown")
    );
}

#[test]
fn init_containers_run_in_order() {
    let mut h = Harness::new(ImageProfiles::default());
    let mut pod = seed_pod("nginx:1.19.0");
    if let Some(spec) = &mut pod.spec {
        spec.init_containers = Some(vec![
            Container {
                name: "init".into(),
                image: Some("busybox:1".into()),
                ..Default::default()
            },
            Container {
                name: "side".into(),
                image: Some("envoy:1".into()),
                restart_policy: Some("Always".into()),
                ..Default::default()
            },
        ]);
    }
    let mut rt = PodRt::new(&pod, t(0), &mut h.env());
    h.run(&mut rt, t(1));
    let (init, regular) = rt.statuses();
    assert_eq!(
        regular[0]
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref()),
        Some("PodInitializing")
    );
    assert!(init[0].state.as_ref().is_some_and(|s| s.waiting.is_some()));
    // init: pull 2 + start 1 → done at 3; sidecar: pull 2 + start 1 → started at 6; nginx: 6 + 3 = 9.
    h.run(&mut rt, t(9));
    let (init, regular) = rt.statuses();
    assert_eq!(
        init[0]
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code),
        Some(0)
    );
    assert!(init[1].started == Some(true) && init[1].ready);
    assert!(regular[0].state.as_ref().is_some_and(|s| s.running.is_some()));
}

#[test]
fn serialized_pulls_share_a_node() {
    let mut h = Harness::new(ImageProfiles::default());
    let a = seed_pod("nginx:1.19.0");
    let b = seed_pod("redis:7");
    let mut ra = PodRt::new(&a, t(0), &mut h.env());
    let mut rb = PodRt::new(&b, t(0), &mut h.env());
    ra.advance(t(0), &mut h.env());
    rb.advance(t(0), &mut h.env());
    assert_eq!(ra.deadline(), Some(t(2)));
    assert_eq!(rb.deadline(), Some(t(4)), "the node pulls one image at a time");
    let a2 = seed_pod("nginx:1.19.0");
    let mut ra2 = PodRt::new(&a2, t(1), &mut h.env());
    ra2.advance(t(1), &mut h.env());
    assert_eq!(ra2.deadline(), Some(t(2)), "waits for the pull in progress");
}
