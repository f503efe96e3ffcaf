//! The agent against a fake CRI runtime (k8s-cri's generated server on a unix socket) and the embedded
//! apiserver: it publishes `runtime-containers-meta`, restarts a container whose label-fed env changed during an
//! in-place update (preStop exec, then one StopContainer), and reports the new container once the "kubelet"
//! started it.

#[path = "support/fake_cri.rs"]
mod fake_cri;
#[path = "support/poll.rs"]
mod poll;

use std::time::Duration;

use fake_cri::{Fake, FakeContainer, serve};
use insitu_api::containermeta::{self, RuntimeContainerMetaSet};
use insitu_sim::SimClock;
use insitu_sim::apiserver::ApiServer;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use poll::eventually;

const IMAGE: &str = "nginx:1.20.0";

fn pod_manifest() -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0", "namespace": "default", "labels": {"app": "web", "test-env": "v1"},
            "ownerReferences": [{
                "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                "uid": "5f3c2a1e-0000-4000-8000-000000000001", "controller": true
            }]
        },
        "spec": {
            "nodeName": "node-a",
            "terminationGracePeriodSeconds": 10,
            "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
            "containers": [{
                "name": "app",
                "image": IMAGE,
                "env": [{"name": "TEST_ENV", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['test-env']"}}}],
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 1"]}}}
            }]
        }
    }))
    .expect("pod manifest")
}

/// The status the kubelet reports for the container `id`.
fn status_patch(id: &str, restarts: i32, updating: bool) -> serde_json::Value {
    serde_json::json!({"status": {
        "phase": "Running",
        "conditions": [{"type": "InPlaceUpdateReady", "status": if updating { "False" } else { "True" }}],
        "containerStatuses": [{
            "name": "app", "image": IMAGE, "imageID": "sha256:1", "ready": true, "restartCount": restarts,
            "containerID": format!("containerd://{id}"), "state": {"running": {}}
        }]
    }})
}

async fn meta_of(pods: &Api<Pod>) -> Option<RuntimeContainerMetaSet> {
    let pod = pods.get("web-0").await.ok()?;
    RuntimeContainerMetaSet::of(&pod).ok().flatten()
}

fn hash(v: &str) -> u64 {
    containermeta::hash_envs(&[("TEST_ENV".to_string(), v.to_string())])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_once_and_reports_the_new_env() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("containerd.sock");
    let fake = Fake::default();
    serve(fake.clone(), &sock).await;

    let server = ApiServer::new(SimClock::new("2026-01-01T00:00:00Z".parse().expect("time"), 1.0));
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let created = pods
        .create(&PostParams::default(), &pod_manifest())
        .await
        .expect("create pod");
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let ps = PatchParams::default();
    pods.patch_status("web-0", &ps, &Patch::Merge(status_patch("c1", 0, false)))
        .await
        .expect("status");
    fake.state().containers.push(FakeContainer {
        id: "c1".into(),
        pod_uid: uid.clone(),
        name: "app".into(),
        running: true,
        created_at: 1,
        env: vec!["PATH=/bin".into(), "TEST_ENV=v1".into()],
        restart_count: 0,
        image: IMAGE.into(),
    });

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let config = insitu_agent::AgentConfig {
        node_name: "node-a".into(),
        runtime_endpoint: format!("unix://{}", sock.display()),
        metrics_addr: None,
    };
    let agent = tokio::spawn(insitu_agent::run(server.client(), config, async move {
        let _ = stop_rx.await;
    }));

    // The annotation with the hashes of the values the container runs with.
    eventually("the first runtime-containers-meta", || async {
        meta_of(&pods).await.is_some_and(|m| {
            m.containers.len() == 1
                && m.containers[0].container_id == "containerd://c1"
                && m.containers[0].hashes.extracted_env_from_metadata_hash == hash("v1")
        })
    })
    .await;
    let meta = meta_of(&pods).await.unwrap_or_default();
    assert_eq!(meta.containers[0].name, "app");
    assert_eq!(meta.containers[0].restart_count, 0);
    assert_eq!(
        meta.containers[0].hashes.plain_hash,
        containermeta::plain_hash("app", IMAGE)
    );

    // A label change outside an in-place update restarts nothing (Kruise restarts only while
    // InPlaceUpdateReady is False).
    let relabel = serde_json::json!({"metadata": {"labels": {"test-env": "v2"}}});
    pods.patch("web-0", &ps, &Patch::Merge(relabel))
        .await
        .expect("relabel");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        fake.state().calls.is_empty(),
        "no call yet: {:?}",
        fake.state().calls
    );

    // The in-place update: InPlaceUpdateReady False. The agent runs the preStop hook, then stops c1 once
    // with the whole grace period left.
    pods.patch_status("web-0", &ps, &Patch::Merge(status_patch("c1", 0, true)))
        .await
        .expect("updating");
    eventually("the stop", || async {
        fake.state().calls.iter().any(|c| c.starts_with("stop"))
    })
    .await;
    assert_eq!(
        fake.state().calls,
        vec!["exec c1 sh -c sleep 1".to_string(), "stop c1 10".to_string()]
    );
    // The kubelet's `Killing` Event on the container.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(server.client(), "default");
    eventually("the Killing event", || async {
        events.list(&Default::default()).await.is_ok_and(|l| {
            l.items.iter().any(|e| {
                let on = e.regarding.as_ref();
                e.reason.as_deref() == Some("Killing")
                    && on.and_then(|r| r.name.as_deref()) == Some("web-0")
                    && on.and_then(|r| r.field_path.as_deref()) == Some("spec.containers{app}")
                    && e.note.as_deref().is_some_and(|n| n.contains("containerd://c1"))
            })
        })
    })
    .await;

    // The "kubelet" starts the container again with the new value.
    fake.state().containers.push(FakeContainer {
        id: "c2".into(),
        pod_uid: uid.clone(),
        name: "app".into(),
        running: true,
        created_at: 2,
        env: vec!["PATH=/bin".into(), "TEST_ENV=v2".into()],
        restart_count: 1,
        image: IMAGE.into(),
    });
    pods.patch_status("web-0", &ps, &Patch::Merge(status_patch("c2", 1, true)))
        .await
        .expect("restarted");
    eventually("the new container's meta", || async {
        meta_of(&pods).await.is_some_and(|m| {
            m.containers[0].container_id == "containerd://c2"
                && m.containers[0].restart_count == 1
                && m.containers[0].hashes.extracted_env_from_metadata_hash == hash("v2")
        })
    })
    .await;
    let pod = pods.get("web-0").await.expect("pod");
    let spec = &pod.spec.as_ref().expect("spec").containers[0];
    assert_eq!(containermeta::expected_env_hash(spec, &pod), hash("v2"));

    // More events while the update runs: no further stop.
    pods.patch(
        "web-0",
        &ps,
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"poke": "1"}}})),
    )
    .await
    .expect("poke");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let stops = fake
        .state()
        .calls
        .iter()
        .filter(|c| c.starts_with("stop"))
        .count();
    assert_eq!(stops, 1, "calls: {:?}", fake.state().calls);

    let _ = stop_tx.send(());
    let done = tokio::time::timeout(Duration::from_secs(10), agent).await;
    assert!(
        matches!(done, Ok(Ok(Ok(())))),
        "the agent stops cleanly: {done:?}"
    );
}

/// A runtime that is not there yet is waited for, and a stop ends the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stops_while_waiting_for_the_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ApiServer::new(SimClock::new("2026-01-01T00:00:00Z".parse().expect("time"), 1.0));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let config = insitu_agent::AgentConfig {
        node_name: "node-a".into(),
        runtime_endpoint: format!("unix://{}", dir.path().join("absent.sock").display()),
        metrics_addr: None,
    };
    let agent = tokio::spawn(insitu_agent::run(server.client(), config, async move {
        let _ = stop_rx.await;
    }));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!agent.is_finished(), "the agent waits for its runtime");
    let _ = stop_tx.send(());
    let done = tokio::time::timeout(Duration::from_secs(5), agent).await;
    assert!(matches!(done, Ok(Ok(Ok(())))), "stopped: {done:?}");
}
