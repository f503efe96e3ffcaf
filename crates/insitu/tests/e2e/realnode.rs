//! The real node of `e2e/run --real-nodes`: which scenarios it cannot run, and the facts only a real kubelet
//! can falsify (the registry's digest as imageID, a new containerID, HTTP answered from the pod IP, preStop).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::ResourceExt;
use std::io::{Read as _, Write as _};

use crate::util::{ensure, ip};

/// One real kubelet (`e2e/real-node.sh`): its name and the images its registry serves.
pub struct RealNode {
    pub name: String,
    /// Normalized reference (`docker.io/library/nginx:1.20.0`) → registry digest (`sha256:…`).
    pub digests: BTreeMap<String, String>,
}

/// Scenarios a real node cannot run, and why.
pub fn skip_reason(scenario: &str) -> Option<&'static str> {
    match scenario {
        "pvc" => Some(
            "the e2e binds claims without PersistentVolumes (no provisioner); a real kubelet mounts only PV-backed claims",
        ),
        "hostile_parity" => Some(
            "it compares apiservers, not nodes: the simulated-node tier already sends its requests to this kube-apiserver",
        ),
        "agent_least_privilege" => Some(
            "it checks the control plane's admission of the agent's writes on two nodes; the simulated-nodes tier runs it, and one real node gives no second node",
        ),
        _ => None,
    }
}

impl RealNode {
    /// From `INSITU_E2E_REAL_NODE` and `INSITU_E2E_NODE_IMAGES` (lines `<reference> <digest>`).
    pub fn from_env() -> anyhow::Result<Option<Self>> {
        let Ok(name) = std::env::var("INSITU_E2E_REAL_NODE") else {
            return Ok(None);
        };
        let path = std::env::var("INSITU_E2E_NODE_IMAGES")
            .context("INSITU_E2E_NODE_IMAGES must be set with INSITU_E2E_REAL_NODE")?;
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let digests = text
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(r, d)| (r.to_string(), d.trim().to_string()))
            .collect();
        Ok(Some(Self { name, digests }))
    }

    /// The registry digest of `image` as a pod names it (`nginx:1.20.0`).
    pub fn digest(&self, image: &str) -> anyhow::Result<&str> {
        let full = normalize(image);
        self.digests
            .get(&full)
            .map(String::as_str)
            .with_context(|| format!("the node's registry has no image {full}"))
    }
}

/// `nginx:1.20.0` → `docker.io/library/nginx:1.20.0` (as containerd names it).
pub fn normalize(image: &str) -> String {
    let first = image.split('/').next().unwrap_or("");
    let has_host =
        image.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    match (has_host, image.contains('/')) {
        (true, _) => image.to_string(),
        (false, true) => format!("docker.io/{image}"),
        (false, false) => format!("docker.io/library/{image}"),
    }
}

pub fn status_of<'a>(p: &'a Pod, container: &str) -> anyhow::Result<&'a ContainerStatus> {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .with_context(|| format!("{}: no status of container {container}", p.name_any()))
}

pub fn container_id(p: &Pod, container: &str) -> Option<String> {
    status_of(p, container).ok()?.container_id.clone()
}

/// GET / on the pod's IP and `port`; the body (HTTP/1.0, so the server closes). Blocking std I/O on a
/// blocking thread, with socket timeouts.
pub async fn http_get(p: &Pod, port: u16) -> anyhow::Result<String> {
    let addr = format!("{}:{port}", ip(p));
    let a = addr.clone();
    let resp = tokio::task::spawn_blocking(move || {
        let sock: std::net::SocketAddr = a.parse().with_context(|| format!("pod address {a:?}"))?;
        let mut s = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"GET / HTTP/1.0\r\nHost: e2e\r\n\r\n")?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf)?;
        anyhow::Ok(String::from_utf8_lossy(&buf).into_owned())
    })
    .await?
    .with_context(|| format!("GET http://{addr}/"))?;
    let Some((head, body)) = resp.split_once("\r\n\r\n") else {
        bail!("GET http://{addr}/: no HTTP response: {resp:?}");
    };
    ensure(head.starts_with("HTTP/1.") && head.contains(" 200 "), || {
        format!("GET http://{addr}/: {}", head.lines().next().unwrap_or(""))
    })?;
    Ok(body.to_string())
}

/// After an in-place image change of `container` to `image` on the real node: the kubelet runs a new
/// container (containerID changed from `old_id`) of exactly the registry's image (imageID = its digest), the
/// pod IP answers HTTP from the new image (its index page names the reference), the old container exited 0.
pub async fn check_image_change(
    node: &RealNode,
    p: &Pod,
    container: &str,
    old_id: Option<&str>,
    image: &str,
) -> anyhow::Result<()> {
    let name = p.name_any();
    let c = status_of(p, container)?;
    ensure(
        c.container_id.as_deref() != old_id && c.container_id.is_some(),
        || format!("{name}: containerID {:?} did not change", c.container_id),
    )?;
    let digest = node.digest(image)?;
    ensure(c.image_id.ends_with(&format!("@{digest}")), || {
        format!(
            "{name}: imageID {} is not the registry's digest {digest} of {image}",
            c.image_id
        )
    })?;
    let last = c
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .with_context(|| format!("{name}: no lastState.terminated after the restart"))?;
    ensure(last.exit_code == 0, || {
        format!(
            "{name}: the old container exited {} (want 0: SIGTERM)",
            last.exit_code
        )
    })?;
    let body = http_get(p, 80).await?;
    ensure(body.trim() == normalize(image), || {
        format!(
            "{name}: {} answered {body:?}, want the page of {}",
            ip(p),
            normalize(image)
        )
    })?;
    Ok(())
}
