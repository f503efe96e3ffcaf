//! The simulated kubelet against a flaky apiserver: every write it needs is retried until it lands, as the
//! kubelet's status manager retries on each sync (found by `insitu torture`: pods stuck Terminating forever).

use std::time::Duration;

use insitu_sim::apiserver::faults::{Fault, Rule, Verb};
use insitu_sim::cluster::{SimCluster, SimConfig};
use insitu_sim::{Clock, SimClock};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.19.0"}]}
    }))
    .unwrap_or_default()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Starts a one-node cluster; the test's own requests go through the oracle client (never faulted).
async fn start() -> (SimCluster, std::sync::Arc<SimClock>, Api<Pod>) {
    let clock = SimClock::new(
        "2026-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH),
        1.0,
    );
    let config = SimConfig {
        nodes: 1,
        seed: 7,
        events: false,
        ..SimConfig::default()
    };
    let cluster = SimCluster::start(config, clock.clone())
        .await
        .expect("cluster starts");
    let pods = Api::namespaced(cluster.apiserver.oracle_client(), "default");
    (cluster, clock, pods)
}

/// Polls every 100 ms of cluster time for up to 60 s; the cluster seconds it took, or `None`.
async fn within(clock: &SimClock, mut done: impl AsyncFnMut() -> bool) -> Option<f64> {
    let t0 = clock.now();
    for _ in 0..600 {
        if done().await {
            return Some(clock.now().duration_since(t0).as_secs_f64());
        }
        clock.sleep(Duration::from_millis(100)).await;
    }
    None
}

async fn run_then_delete_under(rules: Vec<Rule>) -> (u64, Option<f64>) {
    let (cluster, clock, pods) = start().await;
    pods.create(&PostParams::default(), &pod("p"))
        .await
        .expect("create");
    let up = within(&clock, async || {
        pods.get_opt("p").await.ok().flatten().is_some_and(|p| ready(&p))
    })
    .await;
    assert!(up.is_some(), "pod never became ready");
    for r in rules {
        cluster.apiserver.faults().add(r);
    }
    pods.delete("p", &DeleteParams::default()).await.expect("delete");
    let gone = within(&clock, async || matches!(pods.get_opt("p").await, Ok(None))).await;
    (cluster.apiserver.faults().injected().statuses, gone)
}

fn once(verbs: &[Verb], code: u16) -> Rule {
    Rule {
        budget: Some(1),
        ..Rule::always(verbs, &["pods"], Fault::Status(code))
    }
}

#[tokio::test(start_paused = true)]
async fn final_delete_is_retried_after_a_failed_status_write() {
    // The terminal status write fails once (429): the delete that was to follow must still happen.
    let (injected, gone) = run_then_delete_under(vec![once(&[Verb::Update], 429)]).await;
    assert_eq!(injected, 1, "the status write was faulted");
    assert!(gone.is_some_and(|s| s < 5.0), "pod still there: {gone:?}");
}

#[tokio::test(start_paused = true)]
async fn final_delete_is_retried_after_a_conflict() {
    // A 409 on the final delete is a conflict, not a sign the pod is gone.
    let (injected, gone) = run_then_delete_under(vec![once(&[Verb::Delete], 409)]).await;
    assert_eq!(injected, 1, "the final delete was faulted");
    assert!(gone.is_some_and(|s| s < 5.0), "pod still there: {gone:?}");
}

#[tokio::test(start_paused = true)]
async fn binding_is_retried_after_a_conflict() {
    // kube-scheduler requeues a pod on any binding error: a 409 on pods/binding is not "already bound".
    let (cluster, clock, pods) = start().await;
    cluster.apiserver.faults().add(once(&[Verb::Create], 409));
    pods.create(&PostParams::default(), &pod("b"))
        .await
        .expect("create");
    let up = within(&clock, async || {
        pods.get_opt("b").await.ok().flatten().is_some_and(|p| ready(&p))
    })
    .await;
    assert_eq!(
        cluster.apiserver.faults().injected().statuses,
        1,
        "the binding was faulted"
    );
    assert!(up.is_some_and(|s| s < 10.0), "never scheduled and ready: {up:?}");
}
