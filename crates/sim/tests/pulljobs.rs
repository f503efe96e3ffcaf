//! The simulated nodes execute Kruise's ImagePullJobs (as Kruise's ImagePullJob controller and kruise-daemon
//! would), against the in-memory apiserver on virtual time.

use std::sync::Arc;
use std::time::Duration;

use insitu_sim::cluster::{SimCluster, SimConfig};
use insitu_sim::kubelet::{ImageFailure, ImageProfile, ImageProfiles};
use insitu_sim::{Clock, SimClock};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

fn base() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

fn ipj(version: &str) -> ApiResource {
    ApiResource {
        group: "apps.kruise.io".into(),
        version: version.into(),
        api_version: format!("apps.kruise.io/{version}"),
        kind: "ImagePullJob".into(),
        plural: "imagepulljobs".into(),
    }
}

/// 3 nodes; `nginx:*` pulls in 20 s, `broken:*` never pulls.
async fn start() -> (SimCluster, Arc<SimClock>) {
    let clock = SimClock::new(base(), 1.0);
    let images = ImageProfiles::default()
        .with(
            "broken:*",
            ImageProfile {
                pull: Duration::from_secs(2),
                fail: ImageFailure::NeverPulls,
                ..ImageProfile::default()
            },
        )
        .with(
            "nginx:*",
            ImageProfile {
                pull: Duration::from_secs(20),
                ..ImageProfile::default()
            },
        );
    let config = SimConfig {
        nodes: 3,
        seed: 7,
        images,
        ..SimConfig::default()
    };
    let cluster = SimCluster::start(config, clock.clone())
        .await
        .expect("cluster starts");
    (cluster, clock)
}

async fn create_job(client: &kube::Client, version: &str, name: &str, spec: Value) -> DynamicObject {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ipj(version));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("apps.kruise.io/{version}"),
        "kind": "ImagePullJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .expect("job object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create job")
}

/// Polls the job's status (every 500 ms of cluster time) until `pred` holds; returns it and the time taken.
async fn wait_status(
    client: &kube::Client,
    clock: &SimClock,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> (Value, f64) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ipj("v1beta1"));
    let t0 = clock.now();
    let mut last = Value::Null;
    for _ in 0..2000 {
        if let Ok(Some(o)) = api.get_opt(name).await {
            last = o.data.get("status").cloned().unwrap_or(Value::Null);
            if pred(&last) {
                return (last, clock.now().duration_since(t0).as_secs_f64());
            }
        }
        clock.sleep(Duration::from_millis(500)).await;
    }
    panic!("timed out waiting for job {name}: {what}; last status {last}");
}

fn n(v: &Value, k: &str) -> i64 {
    v.get(k).and_then(Value::as_i64).unwrap_or(-1)
}

async fn reasons(client: &kube::Client, name: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut evs: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .collect();
    evs.sort_by_key(|e| {
        e.event_time
            .as_ref()
            .map(|t| t.0)
            .or(e.first_timestamp.as_ref().map(|t| t.0))
    });
    evs.into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_job_pulls_onto_every_node_and_a_later_pod_skips_the_pull() {
    let (cluster, clock) = start().await;
    let client = cluster.client.clone();
    // One node at a time (parallelism 1): 3 × 20 s.
    create_job(
        &client,
        "v1alpha1",
        "pre",
        json!({"image": "nginx:1.27", "completionPolicy": {"type": "Always"}}),
    )
    .await;
    let (running, _) = wait_status(&client, &clock, "pre", "one node pulling", |s| {
        n(s, "active") == 1
    })
    .await;
    assert_eq!(n(&running, "desired"), 3, "{running}");
    assert!(running.get("startTime").is_some(), "{running}");
    let (done, secs) = wait_status(&client, &clock, "pre", "succeeded=3", |s| n(s, "succeeded") == 3).await;
    assert_eq!((n(&done, "active"), n(&done, "failed")), (0, 0), "{done}");
    assert_eq!(done["message"], "job has completed");
    assert!(done.get("completionTime").is_some(), "{done}");
    assert!(
        (55.0..70.0).contains(&secs),
        "3 sequential 20 s pulls took {secs} s"
    );
    // v1alpha1 and v1beta1 are views of one object.
    let alpha: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ipj("v1alpha1"));
    let a = alpha.get("pre").await.expect("v1alpha1 view");
    assert_eq!(
        a.types.map(|t| t.api_version),
        Some("apps.kruise.io/v1alpha1".to_string())
    );

    // A pod on a node the job pulled onto: the kubelet finds the image present.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"nodeName": "sim-node-1", "containers": [{"name": "c", "image": "nginx:1.27"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let t0 = clock.now();
    loop {
        let p = pods.get("web").await.expect("pod");
        let ready = p
            .status
            .and_then(|s| s.container_statuses)
            .is_some_and(|c| c.iter().all(|c| c.ready));
        if ready {
            break;
        }
        assert!(
            clock.now().duration_since(t0).as_secs_f64() < 30.0,
            "pod not ready in 30 s"
        );
        clock.sleep(Duration::from_millis(100)).await;
    }
    let took = clock.now().duration_since(t0).as_secs_f64();
    assert!(
        took < 5.0,
        "a pre-pulled image starts without the 20 s pull: {took} s"
    );
    clock.sleep(Duration::from_secs(1)).await;
    let evs = reasons(&client, "web").await;
    assert!(
        evs.iter()
            .any(|(r, m)| r == "Pulled" && m == "Container image \"nginx:1.27\" already present on machine"),
        "{evs:?}"
    );
    assert!(!evs.iter().any(|(r, _)| r == "Pulling"), "{evs:?}");
}

#[tokio::test(start_paused = true)]
async fn a_failing_image_counts_failed_nodes() {
    let (cluster, clock) = start().await;
    let client = cluster.client.clone();
    create_job(
        &client,
        "v1beta1",
        "bad",
        json!({"image": "broken:1", "parallelism": 3, "selector": {"names": ["sim-node-0", "sim-node-2"]},
            "pullPolicy": {"backoffLimit": 1, "timeoutSeconds": 60},
            "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 30}}),
    )
    .await;
    let (st, secs) = wait_status(&client, &clock, "bad", "failed=2", |s| n(s, "failed") == 2).await;
    assert_eq!(
        (n(&st, "desired"), n(&st, "succeeded"), n(&st, "active")),
        (2, 0, 0),
        "{st}"
    );
    assert_eq!(st["failedNodes"], json!(["sim-node-0", "sim-node-2"]));
    assert_eq!(st["message"], "job has completed");
    // Two 2 s attempts with kruise-daemon's 1 s and 2 s back-offs: 7 s.
    assert!((6.0..10.0).contains(&secs), "failed after {secs} s");
    let evs = reasons(&client, "bad").await;
    let failed: Vec<_> = evs.iter().filter(|(r, _)| r == "PullImageFailed").collect();
    assert_eq!(failed.len(), 2, "{evs:?}");
    assert!(
        failed[0]
            .1
            .starts_with("Image docker.io/library/broken:1 rpc error: code = NotFound"),
        "{evs:?}"
    );
    // ttlSecondsAfterFinished: the finished job is deleted 30 s later.
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ipj("v1beta1"));
    clock.sleep(Duration::from_secs(25)).await;
    assert!(
        api.get_opt("bad").await.expect("get").is_some(),
        "kept until its TTL"
    );
    clock.sleep(Duration::from_secs(10)).await;
    assert!(
        api.get_opt("bad").await.expect("get").is_none(),
        "deleted after its TTL"
    );
}

#[tokio::test(start_paused = true)]
async fn pod_selector_never_and_active_deadline() {
    let (cluster, clock) = start().await;
    let client = cluster.client.clone();
    // Pods of app=a on sim-node-0 only: the job targets that node.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, node, app) in [("a0", "sim-node-0", "a"), ("b1", "sim-node-1", "b")] {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1"}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
    }
    create_job(
        &client,
        "v1beta1",
        "by-pod",
        json!({"image": "nginx:2", "podSelector": {"matchLabels": {"app": "a"}}, "completionPolicy": {"type": "Never"}}),
    )
    .await;
    let (st, _) = wait_status(&client, &clock, "by-pod", "succeeded=1", |s| {
        n(s, "succeeded") == 1
    })
    .await;
    assert_eq!(n(&st, "desired"), 1, "{st}");
    assert!(
        st.get("completionTime").is_none(),
        "Never does not complete: {st}"
    );
    assert_eq!(st["message"], "job is running, progress 100.0%");
    // A matching pod lands on another node: the job follows it there.
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "a2", "namespace": "default", "labels": {"app": "a"}},
        "spec": {"nodeName": "sim-node-2", "containers": [{"name": "c", "image": "busybox:1"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let (st, _) = wait_status(&client, &clock, "by-pod", "succeeded=2", |s| {
        n(s, "succeeded") == 2
    })
    .await;
    assert_eq!(n(&st, "desired"), 2, "{st}");

    // activeDeadlineSeconds 30 over 3 nodes one at a time (20 s each): the job ends at 30 s with the rest failed.
    create_job(
        &client,
        "v1beta1",
        "short",
        json!({"image": "nginx:3", "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 30}}),
    )
    .await;
    let (st, secs) = wait_status(&client, &clock, "short", "completed", |s| {
        s.get("completionTime").is_some()
    })
    .await;
    assert_eq!(st["message"], "job exceeds activeDeadlineSeconds");
    assert_eq!((n(&st, "succeeded"), n(&st, "failed")), (1, 2), "{st}");
    assert!((29.0..33.0).contains(&secs), "deadline hit after {secs} s");
}
