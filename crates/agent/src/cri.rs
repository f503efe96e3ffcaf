//! A thin CRI v1 client over the runtime's unix socket (`k8s-cri`'s generated tonic client): the calls the
//! agent makes, as Kruise's daemon makes them through `k8s.io/cri-api` (`pkg/daemon/criruntime`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::{
    ContainerFilter, ContainerState, ContainerStatusRequest, ExecSyncRequest, ListContainersRequest,
    StopContainerRequest, VersionRequest,
};
use tonic::transport::{Channel, Endpoint, Uri};

use crate::decide::{LABEL_POD_UID, RuntimeContainer};
use crate::observe::Observer;

/// Short calls (list, status, version): a wedged runtime must not hold a pod's sync forever.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A CRI call's failure.
#[derive(Debug)]
pub struct CriError(pub String);

impl std::fmt::Display for CriError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CriError {}

fn err(what: &str, s: tonic::Status) -> CriError {
    CriError(format!("CRI {what}: {} {}", s.code(), s.message()))
}

fn request<T>(msg: T, timeout: Duration) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(timeout);
    r
}

/// The runtime's RuntimeService; cheap to clone (one HTTP/2 connection, re-established when it drops).
#[derive(Clone)]
pub struct Cri {
    client: RuntimeServiceClient<Channel>,
    /// Each call's latency goes to `insitu_agent_cri_call_duration_seconds`.
    observer: Arc<Observer>,
}

impl Cri {
    /// A client for `unix:///path/to.sock` (the kubelet's `--container-runtime-endpoint` form). Connects
    /// lazily, so a runtime that restarts is reached again by the next call.
    pub fn connect(endpoint: &str, observer: Arc<Observer>) -> Result<Self, CriError> {
        let path = endpoint
            .strip_prefix("unix://")
            .ok_or_else(|| {
                CriError(format!(
                    "runtime endpoint {endpoint:?}: only unix:// sockets are supported"
                ))
            })?
            .to_string();
        // The URI is required by tonic but unused: every connection goes to the socket.
        let channel =
            Endpoint::from_static("http://localhost")
                .connect_timeout(CALL_TIMEOUT)
                .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
                    }
                }));
        Ok(Self {
            client: RuntimeServiceClient::new(channel),
            observer,
        })
    }

    /// Records a call's latency, whatever its outcome.
    fn timed<T>(&self, call: &'static str, started: Instant, res: T) -> T {
        self.observer.metrics.cri_call(call, started);
        res
    }

    /// The runtime's name (`containerd`), the scheme of the container ids the kubelet reports.
    pub async fn runtime_name(&self) -> Result<String, CriError> {
        let started = Instant::now();
        let v = self
            .client
            .clone()
            .version(request(VersionRequest { version: "v1".into() }, CALL_TIMEOUT))
            .await
            .map_err(|s| err("Version", s));
        let v = self.timed("Version", started, v)?;
        Ok(v.into_inner().runtime_name)
    }

    /// Every container of a pod (by the kubelet's `io.kubernetes.pod.uid` label), running or not.
    pub async fn pod_containers(&self, uid: &str) -> Result<Vec<RuntimeContainer>, CriError> {
        let filter = ContainerFilter {
            label_selector: HashMap::from([(LABEL_POD_UID.to_string(), uid.to_string())]),
            ..Default::default()
        };
        let started = Instant::now();
        let resp = self
            .client
            .clone()
            .list_containers(request(
                ListContainersRequest { filter: Some(filter) },
                CALL_TIMEOUT,
            ))
            .await
            .map_err(|s| err("ListContainers", s));
        let resp = self.timed("ListContainers", started, resp)?;
        Ok(resp
            .into_inner()
            .containers
            .into_iter()
            .map(|c| RuntimeContainer {
                name: c
                    .labels
                    .get(crate::decide::LABEL_CONTAINER_NAME)
                    .cloned()
                    .or_else(|| c.metadata.as_ref().map(|m| m.name.clone()))
                    .unwrap_or_default(),
                running: c.state == ContainerState::ContainerRunning as i32,
                created_at: c.created_at,
                annotations: c.annotations.into_iter().collect(),
                id: c.id,
            })
            .collect())
    }

    /// The environment the container's process was started with, from `ContainerStatus{verbose}`'s `info`
    /// (no exec into the container: it works for images without an `env` binary, unlike Kruise's
    /// `ExecSync env` in `wrapEnvGetter`). `None` when the runtime does not say.
    pub async fn container_env(&self, id: &str) -> Result<Option<BTreeMap<String, String>>, CriError> {
        let started = Instant::now();
        let resp = self
            .client
            .clone()
            .container_status(request(
                ContainerStatusRequest {
                    container_id: id.to_string(),
                    verbose: true,
                },
                CALL_TIMEOUT,
            ))
            .await
            .map_err(|s| err("ContainerStatus", s));
        let resp = self.timed("ContainerStatus", started, resp)?;
        Ok(env_from_info(&resp.into_inner().info))
    }

    /// Runs `cmd` in the container, bounded by `timeout` (a preStop exec hook). The exit code is returned,
    /// not judged: a failing hook does not stop the restart, as with the kubelet.
    pub async fn exec_sync(&self, id: &str, cmd: Vec<String>, timeout: Duration) -> Result<i32, CriError> {
        let started = Instant::now();
        let resp = self
            .client
            .clone()
            .exec_sync(request(
                ExecSyncRequest {
                    container_id: id.to_string(),
                    cmd,
                    timeout: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
                },
                timeout + CALL_TIMEOUT,
            ))
            .await
            .map_err(|s| err("ExecSync", s));
        let resp = self.timed("ExecSync", started, resp)?;
        Ok(resp.into_inner().exit_code)
    }

    /// Stops the container: SIGTERM, SIGKILL after `grace_seconds`.
    pub async fn stop(&self, id: &str, grace_seconds: i64) -> Result<(), CriError> {
        let wait = Duration::from_secs(u64::try_from(grace_seconds).unwrap_or(0));
        let started = Instant::now();
        let res = self
            .client
            .clone()
            .stop_container(request(
                StopContainerRequest {
                    container_id: id.to_string(),
                    timeout: grace_seconds,
                },
                wait + CALL_TIMEOUT,
            ))
            .await
            .map_err(|s| err("StopContainer", s));
        self.timed("StopContainer", started, res)?;
        Ok(())
    }
}

/// The process environment in a verbose `ContainerStatus`'s `info["info"]` JSON: the OCI spec's
/// `runtimeSpec.process.env` (`K=V`, what the process got), else the CRI config's `config.envs`
/// (`{key, value}`, what the kubelet asked for). Later entries win, as in a process environment.
pub fn env_from_info(info: &HashMap<String, String>) -> Option<BTreeMap<String, String>> {
    let v: serde_json::Value = serde_json::from_str(info.get("info")?).ok()?;
    if let Some(list) = v.pointer("/runtimeSpec/process/env").and_then(|e| e.as_array()) {
        return Some(
            list.iter()
                .filter_map(|e| e.as_str()?.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    let list = v.pointer("/config/envs")?.as_array()?;
    Some(
        list.iter()
            .filter_map(|e| {
                let k = e.get("key")?.as_str()?;
                Some((
                    k.to_string(),
                    e.get("value").and_then(|v| v.as_str()).unwrap_or("").to_string(),
                ))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(v: serde_json::Value) -> HashMap<String, String> {
        HashMap::from([("info".to_string(), v.to_string())])
    }

    #[test]
    fn env_from_the_oci_spec_then_the_config() {
        let env = env_from_info(&info(serde_json::json!({
            "runtimeSpec": {"process": {"env": ["PATH=/bin", "A=x=y", "A=z", "B="]}},
            "config": {"envs": [{"key": "A", "value": "ignored"}]}
        })));
        let want: BTreeMap<String, String> = [("PATH", "/bin"), ("A", "z"), ("B", "")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        assert_eq!(env, Some(want));
        let env = env_from_info(&info(
            serde_json::json!({"config": {"envs": [{"key": "A", "value": "v"}, {"key": "E"}]}}),
        ));
        let want: BTreeMap<String, String> = [("A", "v"), ("E", "")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        assert_eq!(env, Some(want));
        assert_eq!(env_from_info(&info(serde_json::json!({"pid": 1}))), None);
        assert_eq!(env_from_info(&HashMap::new()), None);
    }

    #[test]
    fn only_unix_endpoints() {
        assert!(Cri::connect("tcp://127.0.0.1:1", Arc::new(Observer::new())).is_err());
    }
}
