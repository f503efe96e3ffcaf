//! The agent against a fake CRI runtime (k8s-cri's generated server on a unix socket) and the embedded
//! apiserver: it publishes `runtime-containers-meta`, restarts a container whose label-fed env changed during an
//! in-place update (preStop exec, then one StopContainer), and reports the new container once the "kubelet"
//! started it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use insitu_api::containermeta::{self, RuntimeContainerMetaSet};
use insitu_sim::SimClock;
use insitu_sim::apiserver::ApiServer;
use k8s_cri::v1::runtime_service_server::{RuntimeService, RuntimeServiceServer};
use k8s_cri::v1::*;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tonic::{Request, Response, Status};

/// A container of the fake runtime.
#[derive(Clone, Debug)]
struct FakeContainer {
    id: String,
    pod_uid: String,
    name: String,
    running: bool,
    created_at: i64,
    env: Vec<String>,
    restart_count: i32,
    image: String,
}

/// The runtime's containers and the calls that changed something (`exec ID CMD`, `stop ID GRACE`).
#[derive(Default)]
struct State {
    containers: Vec<FakeContainer>,
    calls: Vec<String>,
}

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<State>>);

impl Fake {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn to_cri(c: &FakeContainer) -> Container {
    Container {
        id: c.id.clone(),
        metadata: Some(ContainerMetadata {
            name: c.name.clone(),
            attempt: u32::try_from(c.restart_count).unwrap_or(0),
        }),
        state: if c.running {
            ContainerState::ContainerRunning as i32
        } else {
            ContainerState::ContainerExited as i32
        },
        created_at: c.created_at,
        labels: HashMap::from([
            ("io.kubernetes.pod.uid".to_string(), c.pod_uid.clone()),
            ("io.kubernetes.container.name".to_string(), c.name.clone()),
        ]),
        annotations: HashMap::from([
            (
                "io.kubernetes.container.hash".to_string(),
                format!("{:x}", containermeta::plain_hash(&c.name, &c.image)),
            ),
            (
                "io.kubernetes.container.restartCount".to_string(),
                c.restart_count.to_string(),
            ),
        ]),
        ..Default::default()
    }
}

/// The unused RPCs answer Unimplemented; the macro writes them inside the one `async_trait` impl.
macro_rules! fake_runtime {
    ($($name:ident($req:ident) -> $resp:ident;)*) => {
        #[tonic::async_trait]
        impl RuntimeService for Fake {
            type GetContainerEventsStream = futures::stream::Empty<Result<ContainerEventResponse, Status>>;

            async fn version(&self, _: Request<VersionRequest>) -> Result<Response<VersionResponse>, Status> {
                Ok(Response::new(VersionResponse {
                    version: "0.1.0".into(),
                    runtime_name: "containerd".into(),
                    runtime_version: "v2.0.0".into(),
                    runtime_api_version: "v1".into(),
                }))
            }

            async fn list_containers(
                &self,
                r: Request<ListContainersRequest>,
            ) -> Result<Response<ListContainersResponse>, Status> {
                let want = r.into_inner().filter.unwrap_or_default().label_selector;
                let containers = self
                    .state()
                    .containers
                    .iter()
                    .map(to_cri)
                    .filter(|c| want.iter().all(|(k, v)| c.labels.get(k) == Some(v)))
                    .collect();
                Ok(Response::new(ListContainersResponse { containers }))
            }

            async fn container_status(
                &self,
                r: Request<ContainerStatusRequest>,
            ) -> Result<Response<ContainerStatusResponse>, Status> {
                let r = r.into_inner();
                let st = self.state();
                let c = st
                    .containers
                    .iter()
                    .find(|c| c.id == r.container_id)
                    .ok_or_else(|| Status::not_found("no such container"))?;
                // containerd's verbose info: the OCI spec's process env.
                let info = serde_json::json!({"pid": 1, "runtimeSpec": {"process": {"env": c.env}}});
                Ok(Response::new(ContainerStatusResponse {
                    status: Some(ContainerStatus { id: c.id.clone(), ..Default::default() }),
                    info: if r.verbose { HashMap::from([("info".to_string(), info.to_string())]) } else { HashMap::new() },
                }))
            }

            async fn exec_sync(&self, r: Request<ExecSyncRequest>) -> Result<Response<ExecSyncResponse>, Status> {
                let r = r.into_inner();
                self.state().calls.push(format!("exec {} {}", r.container_id, r.cmd.join(" ")));
                Ok(Response::new(ExecSyncResponse::default()))
            }

            async fn stop_container(
                &self,
                r: Request<StopContainerRequest>,
            ) -> Result<Response<StopContainerResponse>, Status> {
                let r = r.into_inner();
                let mut st = self.state();
                st.calls.push(format!("stop {} {}", r.container_id, r.timeout));
                for c in st.containers.iter_mut().filter(|c| c.id == r.container_id) {
                    c.running = false;
                }
                Ok(Response::new(StopContainerResponse {}))
            }

            async fn get_container_events(
                &self,
                _: Request<GetEventsRequest>,
            ) -> Result<Response<Self::GetContainerEventsStream>, Status> {
                Err(Status::unimplemented("get_container_events"))
            }

            $(
                async fn $name(&self, _: Request<$req>) -> Result<Response<$resp>, Status> {
                    Err(Status::unimplemented(stringify!($name)))
                }
            )*
        }
    };
}

fake_runtime! {
    run_pod_sandbox(RunPodSandboxRequest) -> RunPodSandboxResponse;
    stop_pod_sandbox(StopPodSandboxRequest) -> StopPodSandboxResponse;
    remove_pod_sandbox(RemovePodSandboxRequest) -> RemovePodSandboxResponse;
    pod_sandbox_status(PodSandboxStatusRequest) -> PodSandboxStatusResponse;
    list_pod_sandbox(ListPodSandboxRequest) -> ListPodSandboxResponse;
    create_container(CreateContainerRequest) -> CreateContainerResponse;
    start_container(StartContainerRequest) -> StartContainerResponse;
    remove_container(RemoveContainerRequest) -> RemoveContainerResponse;
    update_container_resources(UpdateContainerResourcesRequest) -> UpdateContainerResourcesResponse;
    reopen_container_log(ReopenContainerLogRequest) -> ReopenContainerLogResponse;
    exec(ExecRequest) -> ExecResponse;
    attach(AttachRequest) -> AttachResponse;
    port_forward(PortForwardRequest) -> PortForwardResponse;
    container_stats(ContainerStatsRequest) -> ContainerStatsResponse;
    list_container_stats(ListContainerStatsRequest) -> ListContainerStatsResponse;
    pod_sandbox_stats(PodSandboxStatsRequest) -> PodSandboxStatsResponse;
    list_pod_sandbox_stats(ListPodSandboxStatsRequest) -> ListPodSandboxStatsResponse;
    update_runtime_config(UpdateRuntimeConfigRequest) -> UpdateRuntimeConfigResponse;
    status(StatusRequest) -> StatusResponse;
    checkpoint_container(CheckpointContainerRequest) -> CheckpointContainerResponse;
    list_metric_descriptors(ListMetricDescriptorsRequest) -> ListMetricDescriptorsResponse;
    list_pod_sandbox_metrics(ListPodSandboxMetricsRequest) -> ListPodSandboxMetricsResponse;
    runtime_config(RuntimeConfigRequest) -> RuntimeConfigResponse;
}

/// Serves the fake runtime on `path`.
async fn serve(fake: Fake, path: &std::path::Path) {
    let listener = tokio::net::UnixListener::bind(path).expect("bind the fake runtime's socket");
    let incoming = futures::stream::unfold(listener, |l| async move {
        let next = l.accept().await.map(|(s, _)| s);
        Some((next, l))
    });
    tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(RuntimeServiceServer::new(fake))
            .serve_with_incoming(incoming)
            .await;
        if let Err(e) = served {
            eprintln!("fake runtime: {e}");
        }
    });
}

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

/// Polls until `f` holds (10 s at most).
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    for _ in 0..200 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for: {what}");
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
