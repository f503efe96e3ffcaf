//! The simulated kubelet at scale, on virtual time: many pods, one watch, one timer queue; seeded replay.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use insitu_sim::cluster::{SimCluster, SimConfig};
use insitu_sim::{Clock, SimClock};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{
            "name": "nginx",
            "image": "nginx:1.19.0",
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "initialDelaySeconds": 5, "periodSeconds": 3}
        }]}
    }))
    .unwrap_or_default()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Creates `n` pods and waits until all are Ready; returns them with the cluster time it took.
async fn run(n: usize, nodes: usize, seed: u64) -> (Vec<Pod>, Duration) {
    let clock = SimClock::new(
        "2026-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH),
        1.0,
    );
    let config = SimConfig {
        nodes,
        seed,
        heartbeat: None,
        events: false,
        ..SimConfig::default()
    };
    let cluster = SimCluster::start(config, clock.clone()).await.expect("cluster");
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let t0 = clock.now();
    for i in 0..n {
        pods.create(&PostParams::default(), &pod(&format!("p{i:05}")))
            .await
            .expect("create");
    }
    for _ in 0..600 {
        let list = pods
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        if list.len() == n && list.iter().all(ready) {
            return (
                list,
                Duration::try_from(clock.now().duration_since(t0)).unwrap_or_default(),
            );
        }
        clock.sleep(Duration::from_secs(1)).await;
    }
    panic!("pods did not all become ready");
}

fn check_spread(list: &[Pod], n: usize, nodes: usize) {
    let ips: HashSet<String> = list
        .iter()
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .collect();
    assert_eq!(ips.len(), n, "unique pod IPs");
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for p in list {
        *per_node
            .entry(
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
            )
            .or_default() += 1;
    }
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        vec![n / nodes; nodes]
    );
}

#[tokio::test(start_paused = true)]
async fn thousand_pods_become_ready() {
    let wall = Instant::now();
    let (list, took) = run(1000, 4, 1).await;
    eprintln!(
        "1000 pods ready after {took:?} cluster time, {:?} wall",
        wall.elapsed()
    );
    // pull 2 s + start 1 s + initialDelay 5 s (+ 1 s polling).
    assert!(
        took >= Duration::from_secs(8) && took <= Duration::from_secs(10),
        "{took:?}"
    );
    check_spread(&list, 1000, 4);
}

#[tokio::test(start_paused = true)]
#[ignore = "slow in debug builds: cargo test --release -- --ignored"]
async fn ten_thousand_pods_become_ready() {
    let wall = Instant::now();
    let (list, took) = run(10_000, 10, 1).await;
    eprintln!(
        "10000 pods ready after {took:?} cluster time, {:?} wall",
        wall.elapsed()
    );
    check_spread(&list, 10_000, 10);
}

#[tokio::test(start_paused = true)]
async fn same_seed_same_run() {
    let ids = |list: Vec<Pod>| -> Vec<(String, String, String)> {
        let mut v: Vec<_> = list
            .into_iter()
            .map(|p| {
                let name = p.metadata.name.clone().unwrap_or_default();
                let st = p.status.unwrap_or_default();
                let cid = st
                    .container_statuses
                    .and_then(|c| c.first()?.container_id.clone())
                    .unwrap_or_default();
                (name, st.pod_ip.unwrap_or_default(), cid)
            })
            .collect();
        v.sort();
        v
    };
    let a = ids(run(20, 2, 7).await.0);
    let b = ids(run(20, 2, 7).await.0);
    let c = ids(run(20, 2, 8).await.0);
    assert_eq!(a, b);
    assert_ne!(a, c);
}
