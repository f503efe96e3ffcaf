//! Kubelet runtime model: postStart hooks, images whose default command exits at once, env from ConfigMaps
//! (`CreateContainerConfigError`), and kruise-daemon's env-from-metadata restart.

use std::collections::BTreeSet;

use insitu_sim::kubelet::runtime::{ConfigMaps, Env, KEvent, NodeRt, PodRt};
use insitu_sim::kubelet::{ImageFailure, ImageProfile, ImageProfiles};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

struct H {
    images: ImageProfiles,
    node: NodeRt,
    rng: ChaCha8Rng,
    events: Vec<KEvent>,
    cms: ConfigMaps,
}

impl H {
    fn new() -> Self {
        H {
            images: ImageProfiles::default().with(
                "busybox*",
                ImageProfile {
                    fail: ImageFailure::ExitsAtOnce,
                    ..ImageProfile::default()
                },
            ),
            node: NodeRt::default(),
            rng: ChaCha8Rng::seed_from_u64(1),
            events: Vec::new(),
            cms: ConfigMaps::default(),
        }
    }

    fn env(&mut self) -> Env<'_> {
        Env {
            images: &self.images,
            node: &mut self.node,
            rng: &mut self.rng,
            events: &mut self.events,
            config_maps: &self.cms,
        }
    }

    fn run(&mut self, rt: &mut PodRt, until: Timestamp) {
        while let Some(d) = rt.deadline().filter(|d| *d <= until) {
            rt.advance(d, &mut self.env());
        }
        rt.advance(until, &mut self.env());
    }

    fn reasons(&mut self) -> Vec<&'static str> {
        self.events.drain(..).map(|e| e.reason).collect()
    }
}

fn pod(v: serde_json::Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn status(rt: &PodRt, _pod: &Pod, i: usize) -> ContainerStatus {
    rt.statuses().1.remove(i)
}

fn waiting(s: &ContainerStatus) -> Option<String> {
    s.state.as_ref()?.waiting.as_ref()?.reason.clone()
}

fn terminated(s: &ContainerStatus) -> Option<(String, i32)> {
    let t = s.state.as_ref()?.terminated.as_ref()?;
    Some((t.reason.clone().unwrap_or_default(), t.exit_code))
}

#[test]
fn post_start_sleep_delays_started_and_blocks_the_pod_worker() {
    let mut h = H::new();
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [
            {"name": "a", "image": "nginx:1", "lifecycle": {"postStart": {"exec": {"command": ["/bin/sh", "-c", "sleep 10"]}}}},
            {"name": "b", "image": "nginx:1"}
        ]}
    }));
    let mut rt = PodRt::new(&p, t(0), &mut h.env());
    // pull 2 s + start 1 s: `a` starts at 3, its hook runs to 13 (reported at the 14 s relist).
    h.run(&mut rt, t(12));
    let a = status(&rt, &p, 0);
    assert_eq!(waiting(&a).as_deref(), Some("ContainerCreating"), "{a:?}");
    assert!(!a.ready && a.started == Some(false));
    // `b` waits for the pod worker, busy with `a`'s hook until 13.
    assert_eq!(waiting(&status(&rt, &p, 1)).as_deref(), Some("ContainerCreating"));
    h.run(&mut rt, t(14));
    let a = status(&rt, &p, 0);
    assert!(a.ready && a.started == Some(true), "{a:?}");
    let started = a.state.unwrap().running.unwrap().started_at.unwrap().0;
    assert_eq!(
        started,
        t(3),
        "startedAt is the container's start, before its hook"
    );
    h.run(&mut rt, t(15));
    let b = status(&rt, &p, 1);
    assert_eq!(b.state.unwrap().running.unwrap().started_at.unwrap().0, t(14));
}

#[test]
fn a_failing_post_start_hook_kills_the_container() {
    let mut h = H::new();
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [
            {"name": "a", "image": "nginx:1", "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "sleep 1; exit 3"]}}}}
        ]}
    }));
    let mut rt = PodRt::new(&p, t(0), &mut h.env());
    h.run(&mut rt, t(6));
    let reasons = h.reasons();
    assert!(reasons.contains(&"FailedPostStartHook"), "{reasons:?}");
    let a = status(&rt, &p, 0);
    assert!(!a.ready);
    assert!(a.restart_count >= 1, "restarted per restartPolicy Always: {a:?}");
    let last = a
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("killed");
    assert_eq!(last.exit_code, 137);
}

#[test]
fn an_exit_image_without_command_completes_or_crash_loops() {
    let mut h = H::new();
    let spec = |policy: &str, command: Option<Vec<&str>>| {
        let mut c = json!({"name": "a", "image": "busybox:1.36"});
        if let Some(cmd) = command {
            c["command"] = json!(cmd);
        }
        pod(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"restartPolicy": policy, "containers": [c]}
        }))
    };
    let never = spec("Never", None);
    let mut rt = PodRt::new(&never, t(0), &mut h.env());
    h.run(&mut rt, t(30));
    assert_eq!(
        terminated(&status(&rt, &never, 0)),
        Some(("Completed".to_string(), 0))
    );
    let always = spec("Always", None);
    let mut rt = PodRt::new(&always, t(0), &mut h.env());
    h.run(&mut rt, t(30));
    let s = status(&rt, &always, 0);
    assert_eq!(waiting(&s).as_deref(), Some("CrashLoopBackOff"), "{s:?}");
    assert!(
        s.last_state
            .as_ref()
            .and_then(|l| l.terminated.as_ref())
            .is_some()
    );
    // With a command of its own the image runs.
    let cmd = spec("Always", Some(vec!["sleep", "999"]));
    let mut rt = PodRt::new(&cmd, t(0), &mut h.env());
    h.run(&mut rt, t(30));
    let s = status(&rt, &cmd, 0);
    assert!(s.state.unwrap().running.is_some() && s.restart_count == 0);
}

#[test]
fn a_missing_configmap_key_holds_the_container_until_it_exists() {
    let mut h = H::new();
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "ns1", "uid": "u"},
        "spec": {"containers": [{"name": "a", "image": "nginx:1", "env": [
            {"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": "p-barrier", "key": "p_0"}}}
        ]}]}
    }));
    let mut rt = PodRt::new(&p, t(0), &mut h.env());
    h.run(&mut rt, t(5));
    let s = status(&rt, &p, 0);
    assert_eq!(waiting(&s).as_deref(), Some("CreateContainerConfigError"));
    let msg = s.state.unwrap().waiting.unwrap().message.unwrap();
    assert_eq!(msg, "configmap \"p-barrier\" not found");
    h.cms
        .set("ns1", "p-barrier", BTreeSet::from(["p_10".to_string()]));
    rt.config_changed("ns1", t(5));
    h.run(&mut rt, t(20));
    let s = status(&rt, &p, 0);
    let msg = s.state.unwrap().waiting.unwrap().message.unwrap();
    assert_eq!(msg, "couldn't find key p_0 in ConfigMap ns1/p-barrier");
    h.cms.set(
        "ns1",
        "p-barrier",
        BTreeSet::from(["p_10".to_string(), "p_0".to_string()]),
    );
    rt.config_changed("ns1", t(20));
    h.run(&mut rt, t(22));
    let s = status(&rt, &p, 0);
    assert_eq!(
        s.state.unwrap().running.unwrap().started_at.unwrap().0,
        t(21),
        "image already present: create + start 1 s"
    );
}

#[test]
fn the_node_agent_restarts_a_container_whose_env_from_metadata_changed() {
    let mut h = H::new();
    let mut p = pod(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u", "labels": {"k": "v1"}},
        "spec": {"containers": [{"name": "a", "image": "nginx:1", "env": [
            {"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['k']"}}}
        ]}]},
        "status": {"conditions": [{"type": "InPlaceUpdateReady", "status": "True"}]}
    }));
    let mut rt = PodRt::new(&p, t(0), &mut h.env());
    h.run(&mut rt, t(5));
    let meta = rt.containers_meta();
    let hash_v1 = insitu_api::containermeta::hash_envs(&[("E".into(), "v1".into())]);
    assert_eq!(meta[0].hashes.extracted_env_from_metadata_hash, hash_v1);
    // The label changes while InPlaceUpdateReady is True: kruise-daemon does nothing.
    p.metadata.labels = Some([("k".to_string(), "v2".to_string())].into());
    rt.update_spec(&p, t(5), &mut h.env());
    rt.restart_stale_env(&p, t(5), &mut h.env());
    h.run(&mut rt, t(10));
    assert_eq!(status(&rt, &p, 0).restart_count, 0);
    // During an in-place update (InPlaceUpdateReady False) it restarts the container with the new value.
    p.status = Some(
        serde_json::from_value(json!({"conditions": [{"type": "InPlaceUpdateReady", "status": "False"}]}))
            .unwrap(),
    );
    rt.restart_stale_env(&p, t(10), &mut h.env());
    h.run(&mut rt, t(15));
    let s = status(&rt, &p, 0);
    assert_eq!(s.restart_count, 1);
    assert!(s.state.unwrap().running.is_some());
    let meta = rt.containers_meta();
    assert_eq!(Some(meta[0].container_id.clone()), s.container_id);
    assert_eq!(
        meta[0].hashes.extracted_env_from_metadata_hash,
        insitu_api::containermeta::hash_envs(&[("E".into(), "v2".into())])
    );
    // Settled: no further restart.
    rt.restart_stale_env(&p, t(15), &mut h.env());
    h.run(&mut rt, t(30));
    assert_eq!(status(&rt, &p, 0).restart_count, 1);
}
