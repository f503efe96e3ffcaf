//! Node loss on the embedded cluster, as kube-controller-manager handles it on a real one: a node whose kubelet
//! stops heartbeating turns Ready=Unknown after the 50 s node-monitor grace period, its pods NotReady, the node
//! tainted unreachable; after the pods' 300 s default tolerations they are evicted (Terminating until the kubelet
//! is back); a node that never returns and is deleted has its pods collected by PodGC.

use std::time::Duration;

use insitu_sim::cluster::{SimCluster, SimConfig};
use insitu_sim::nodelifecycle::{BY_TAINT_MANAGER, UNREACHABLE};
use insitu_sim::{Clock, SimClock};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use serde_json::json;

fn pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx:1.19.0"}]}
    }))
    .unwrap_or_default()
}

fn condition(p: &Pod, t: &str) -> Option<(String, Option<String>)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

fn ready(p: &Pod) -> bool {
    condition(p, "Ready").is_some_and(|(s, _)| s == "True")
}

fn node_ready(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn taints(n: &Node) -> Vec<(String, String)> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.effect))
        .collect()
}

struct Env {
    cluster: SimCluster,
    clock: std::sync::Arc<SimClock>,
    pods: Api<Pod>,
    nodes: Api<Node>,
}

async fn start() -> Env {
    let clock = SimClock::new(
        "2026-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH),
        1.0,
    );
    let config = SimConfig {
        nodes: 2,
        seed: 11,
        events: false,
        ..SimConfig::default()
    };
    let cluster = SimCluster::start(config, clock.clone())
        .await
        .expect("cluster starts");
    let oracle = cluster.apiserver.oracle_client();
    let env = Env {
        pods: Api::namespaced(oracle.clone(), "default"),
        nodes: Api::all(oracle),
        cluster,
        clock,
    };
    for (name, node) in [("lost-pod", "sim-node-0"), ("other-pod", "sim-node-1")] {
        env.pods
            .create(&PostParams::default(), &pod(name, node))
            .await
            .expect("create");
    }
    env.wait(30, async |e| {
        e.get("lost-pod").await.is_some_and(|p| ready(&p))
            && e.get("other-pod").await.is_some_and(|p| ready(&p))
    })
    .await
    .expect("pods ready");
    env
}

impl Env {
    async fn get(&self, name: &str) -> Option<Pod> {
        self.pods.get_opt(name).await.ok().flatten()
    }

    async fn node(&self, name: &str) -> Option<Node> {
        self.nodes.get_opt(name).await.ok().flatten()
    }

    /// Polls each second for up to `secs` of cluster time; the seconds it took.
    async fn wait(&self, secs: u64, mut done: impl AsyncFnMut(&Env) -> bool) -> Option<f64> {
        let t0 = self.clock.now();
        for _ in 0..=secs {
            if done(self).await {
                return Some(self.clock.now().duration_since(t0).as_secs_f64());
            }
            self.clock.sleep(Duration::from_secs(1)).await;
        }
        None
    }
}

#[tokio::test(start_paused = true)]
async fn a_lost_node_goes_unknown_then_its_pods_are_evicted_and_finish_when_it_returns() {
    let env = start().await;
    env.cluster.lost.lose("sim-node-0");
    // Nothing within the grace period.
    env.clock.sleep(Duration::from_secs(40)).await;
    let n = env.node("sim-node-0").await.expect("node");
    assert_eq!(node_ready(&n).as_deref(), Some("True"));
    assert!(ready(&env.get("lost-pod").await.expect("pod")));
    // Past 50 s (+ one 5 s monitor period, + the last heartbeat's age): Unknown, tainted, pod NotReady.
    let unknown = env
        .wait(30, async |e| {
            e.node("sim-node-0")
                .await
                .is_some_and(|n| node_ready(&n).as_deref() == Some("Unknown"))
        })
        .await
        .expect("node Unknown");
    assert!(unknown <= 30.0, "{unknown}");
    env.wait(10, async |e| e.get("lost-pod").await.is_some_and(|p| !ready(&p)))
        .await
        .expect("pod marked NotReady");
    let n = env.node("sim-node-0").await.expect("node");
    let t = taints(&n);
    assert!(t.contains(&(UNREACHABLE.into(), "NoExecute".into())), "{t:?}");
    assert!(t.contains(&(UNREACHABLE.into(), "NoSchedule".into())), "{t:?}");
    // The healthy node and its pod are untouched.
    assert_eq!(
        node_ready(&env.node("sim-node-1").await.expect("node")).as_deref(),
        Some("True")
    );
    assert!(ready(&env.get("other-pod").await.expect("pod")));
    // The default 300 s toleration, then eviction: DisruptionTarget and a graceful delete that stays pending.
    let p = env.get("lost-pod").await.expect("pod");
    assert!(
        p.metadata.deletion_timestamp.is_none(),
        "evicted before its toleration ran out"
    );
    env.wait(320, async |e| {
        e.get("lost-pod")
            .await
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await
    .expect("pod evicted");
    let p = env
        .get("lost-pod")
        .await
        .expect("pod stays Terminating while its kubelet is away");
    assert_eq!(
        condition(&p, "DisruptionTarget"),
        Some(("True".into(), Some(BY_TAINT_MANAGER.into())))
    );
    env.clock.sleep(Duration::from_secs(60)).await;
    assert!(env.get("lost-pod").await.is_some(), "deleted without its kubelet");
    // Back: the kubelet finishes the deletion, the node is Ready and untainted again.
    env.cluster.lost.restore("sim-node-0");
    env.wait(60, async |e| e.get("lost-pod").await.is_none())
        .await
        .expect("deletion finished by the returning kubelet");
    env.wait(30, async |e| {
        e.node("sim-node-0")
            .await
            .is_some_and(|n| node_ready(&n).as_deref() == Some("True") && taints(&n).is_empty())
    })
    .await
    .expect("node Ready and untainted");
    assert!(ready(&env.get("other-pod").await.expect("pod")));
}

#[tokio::test(start_paused = true)]
async fn a_node_back_before_eviction_makes_its_pods_ready_again() {
    let env = start().await;
    env.cluster.lost.lose("sim-node-0");
    env.wait(90, async |e| e.get("lost-pod").await.is_some_and(|p| !ready(&p)))
        .await
        .expect("pod marked NotReady");
    env.cluster.lost.restore("sim-node-0");
    env.wait(30, async |e| e.get("lost-pod").await.is_some_and(|p| ready(&p)))
        .await
        .expect("pod Ready again");
    env.wait(30, async |e| {
        e.node("sim-node-0")
            .await
            .is_some_and(|n| node_ready(&n).as_deref() == Some("True") && taints(&n).is_empty())
    })
    .await
    .expect("node Ready and untainted");
    let p = env.get("lost-pod").await.expect("pod");
    assert!(p.metadata.deletion_timestamp.is_none());
    assert_eq!(condition(&p, "DisruptionTarget"), None);
}

#[tokio::test(start_paused = true)]
async fn a_deleted_node_has_its_pods_collected_by_podgc() {
    let env = start().await;
    env.cluster.lost.lose("sim-node-0");
    env.clock.sleep(Duration::from_secs(10)).await;
    env.nodes
        .delete("sim-node-0", &Default::default())
        .await
        .expect("delete node");
    // Not before PodGC's 40 s quarantine.
    env.clock.sleep(Duration::from_secs(30)).await;
    assert!(
        env.get("lost-pod").await.is_some(),
        "collected before the quarantine"
    );
    let took = env
        .wait(40, async |e| e.get("lost-pod").await.is_none())
        .await
        .expect("orphan pod collected");
    assert!(took <= 40.0, "{took}");
    assert!(env.get("other-pod").await.is_some_and(|p| ready(&p)));
}
