//! `/healthz`, `/readyz` and `/metrics` of the agent (docs/install.md, "The node agent's health and metrics")
//! against the fake CRI runtime and the embedded apiserver: alive at once, ready only with the pod watch synced and the runtime
//! answering, and the counters following what the agent did.

#[path = "support/fake_cri.rs"]
mod fake_cri;
#[path = "support/poll.rs"]
mod poll;

use std::net::SocketAddr;
use std::time::Duration;

use fake_cri::{Fake, FakeContainer, serve};
use insitu_sim::SimClock;
use insitu_sim::apiserver::ApiServer;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use poll::eventually;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const IMAGE: &str = "nginx:1.20.0";

/// One HTTP/1.0 GET: the status code and the body.
async fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: agent\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

/// The value of the sample `name` (with its labels, as rendered) in a /metrics body.
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

fn pod(name: &str, reads_labels: bool) -> Pod {
    let env = if reads_labels {
        serde_json::json!([{"name": "TEST_ENV", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['test-env']"}}}])
    } else {
        serde_json::json!([{"name": "PLAIN", "value": "x"}])
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name, "namespace": "default", "labels": {"test-env": "v1"},
            "ownerReferences": [{
                "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                "uid": "5f3c2a1e-0000-4000-8000-000000000001", "controller": true
            }]
        },
        "spec": {
            "nodeName": "node-a",
            "terminationGracePeriodSeconds": 5,
            "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
            "containers": [{
                "name": "app", "image": IMAGE, "env": env,
                "lifecycle": {"preStop": {"exec": {"command": ["false"]}}}
            }]
        }
    }))
    .expect("pod manifest")
}

fn status(id: &str, updating: bool) -> serde_json::Value {
    serde_json::json!({"status": {
        "phase": "Running",
        "conditions": [{"type": "InPlaceUpdateReady", "status": if updating { "False" } else { "True" }}],
        "containerStatuses": [{
            "name": "app", "image": IMAGE, "imageID": "sha256:1", "ready": true, "restartCount": 0,
            "containerID": format!("containerd://{id}"), "state": {"running": {}}
        }]
    }})
}

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics_follow_the_agent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("containerd.sock");
    let server = ApiServer::new(SimClock::new("2026-01-01T00:00:00Z".parse().expect("time"), 1.0));
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let ps = PatchParams::default();
    let mut uid = String::new();
    for (name, reads) in [("served", true), ("plain", false)] {
        let p = pods
            .create(&PostParams::default(), &pod(name, reads))
            .await
            .expect("create");
        if reads {
            uid = p.metadata.uid.unwrap_or_default();
        }
        pods.patch_status(name, &ps, &Patch::Merge(status("c1", false)))
            .await
            .expect("status");
    }

    let addr = free_addr();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let config = insitu_agent::AgentConfig {
        node_name: "node-a".into(),
        runtime_endpoint: format!("unix://{}", sock.display()),
        metrics_addr: Some(addr),
    };
    let agent = tokio::spawn(insitu_agent::run(server.client(), config, async move {
        let _ = stop_rx.await;
    }));

    // No runtime yet: alive, not ready.
    eventually("/healthz answering", || async {
        get(addr, "/healthz").await.is_some()
    })
    .await;
    assert_eq!(get(addr, "/healthz").await.map(|r| r.0), Some(200));
    let (code, body) = get(addr, "/readyz").await.expect("/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("not synced"), "{body}");

    // The runtime comes: the watch syncs, ready.
    let fake = Fake::default();
    fake.state().containers.push(FakeContainer {
        id: "c1".into(),
        pod_uid: uid.clone(),
        name: "app".into(),
        running: true,
        created_at: 1,
        env: vec!["TEST_ENV=v1".into()],
        restart_count: 0,
        image: IMAGE.into(),
    });
    fake.state().exec_exit = 1;
    serve(fake.clone(), &sock).await;
    eventually("/readyz 200", || async {
        get(addr, "/readyz").await.is_some_and(|r| r.0 == 200)
    })
    .await;
    // Ready says the watch synced and CRI answers; the pod's first sync may still be running.
    eventually("the served pod counted and its containers listed", || async {
        get(addr, "/metrics").await.is_some_and(|(_, b)| {
            sample(&b, "insitu_agent_pods_served") == Some(1.0)
                && sample(
                    &b,
                    r#"insitu_agent_cri_call_duration_seconds_count{call="ListContainers"}"#,
                )
                .is_some_and(|n| n >= 1.0)
        })
    })
    .await;
    let (_, body) = get(addr, "/metrics").await.expect("/metrics");
    assert!(
        sample(
            &body,
            r#"insitu_agent_cri_call_duration_seconds_count{call="Version"}"#
        )
        .is_some_and(|n| n >= 1.0),
        "{body}"
    );

    // An in-place update changes the label: one restart, its preStop hook failing (exit 1).
    pods.patch(
        "served",
        &ps,
        &Patch::Merge(serde_json::json!({"metadata": {"labels": {"test-env": "v2"}}})),
    )
    .await
    .expect("relabel");
    pods.patch_status("served", &ps, &Patch::Merge(status("c1", true)))
        .await
        .expect("updating");
    eventually("a restart counted", || async {
        get(addr, "/metrics").await.is_some_and(|(_, b)| {
            sample(&b, r#"insitu_agent_container_restarts_total{result="stopped"}"#) == Some(1.0)
        })
    })
    .await;
    let (_, body) = get(addr, "/metrics").await.expect("/metrics");
    assert_eq!(
        sample(&body, "insitu_agent_prestop_hook_failures_total"),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            r#"insitu_agent_cri_call_duration_seconds_count{call="StopContainer"}"#
        ),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, "insitu_agent_sync_errors_total"),
        Some(0.0),
        "{body}"
    );

    // The runtime wedges: not ready, still alive, the failing syncs counted.
    fake.state().down = true;
    pods.patch(
        "served",
        &ps,
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"poke": "1"}}})),
    )
    .await
    .expect("poke");
    let (code, body) = get(addr, "/readyz").await.expect("/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("runtime not reachable"), "{body}");
    assert_eq!(get(addr, "/healthz").await.map(|r| r.0), Some(200));
    eventually("a sync error counted", || async {
        get(addr, "/metrics")
            .await
            .is_some_and(|(_, b)| sample(&b, "insitu_agent_sync_errors_total").is_some_and(|n| n >= 1.0))
    })
    .await;

    let _ = stop_tx.send(());
    let done = tokio::time::timeout(Duration::from_secs(10), agent).await;
    assert!(
        matches!(done, Ok(Ok(Ok(())))),
        "the agent stops cleanly: {done:?}"
    );
}
