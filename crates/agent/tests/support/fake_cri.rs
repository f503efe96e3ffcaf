//! A fake CRI runtime for the agent's tests and benchmark: k8s-cri's generated server on a unix socket, with
//! containers the test adds and a log of the calls that changed something.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use insitu_api::containermeta;
use k8s_cri::v1::runtime_service_server::{RuntimeService, RuntimeServiceServer};
use k8s_cri::v1::*;
use tonic::{Request, Response, Status};

/// A container of the fake runtime.
#[derive(Clone, Debug)]
pub struct FakeContainer {
    pub id: String,
    pub pod_uid: String,
    pub name: String,
    pub running: bool,
    pub created_at: i64,
    pub env: Vec<String>,
    pub restart_count: i32,
    pub image: String,
}

/// The runtime's containers and the calls that changed something (`exec ID CMD`, `stop ID GRACE`).
#[derive(Default)]
pub struct State {
    pub containers: Vec<FakeContainer>,
    pub calls: Vec<String>,
    /// Version and ListContainers answer `Unavailable` (a wedged runtime).
    pub down: bool,
    /// The exit code of every ExecSync (a failing preStop hook when not 0).
    pub exec_exit: i32,
}

#[derive(Clone, Default)]
pub struct Fake(Arc<Mutex<State>>);

impl Fake {
    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
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
                if self.state().down {
                    return Err(Status::unavailable("runtime down"));
                }
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
                if self.state().down {
                    return Err(Status::unavailable("runtime down"));
                }
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
                let mut st = self.state();
                st.calls.push(format!("exec {} {}", r.container_id, r.cmd.join(" ")));
                Ok(Response::new(ExecSyncResponse { exit_code: st.exec_exit, ..Default::default() }))
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
pub async fn serve(fake: Fake, path: &std::path::Path) {
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
