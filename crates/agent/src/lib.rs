//! `insitu agent`: the node agent in kruise-daemon's role (Kruise `pkg/daemon`), talking CRI v1 to the node's
//! runtime. This first part is the containermeta controller (`pkg/daemon/containermeta`): it publishes
//! `apps.kruise.io/runtime-containers-meta` for the node's pods whose env reads pod labels or annotations,
//! and restarts in place the containers whose env-from-metadata values changed during an in-place update.

mod cri;
mod decide;
mod endpoints;
mod observe;
mod restart;
mod watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

/// What the agent needs to know of its node.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The node whose pods it serves (`spec.nodeName`).
    pub node_name: String,
    /// The runtime's CRI socket, `unix:///run/containerd/containerd.sock`.
    pub runtime_endpoint: String,
    /// Where `/healthz`, `/readyz` and `/metrics` are served (docs/install.md, "The node agent's health and
    /// metrics"); `None`: nowhere.
    pub metrics_addr: Option<SocketAddr>,
}

/// Runs the agent until `shutdown` resolves. The runtime is waited for (it may start after the agent);
/// every later failure is retried with back-off.
pub async fn run(
    client: kube::Client,
    config: AgentConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let observer = Arc::new(observe::Observer::new());
    let cri = cri::Cri::connect(&config.runtime_endpoint, observer.clone())?;
    // Served before the runtime answers: alive, not ready.
    if let Some(addr) = config.metrics_addr {
        endpoints::serve(addr, observer.clone(), cri.clone()).await?;
    }
    // Shared: a stop while the runtime is awaited ends the wait; later it ends the watch.
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let runtime_name = tokio::select! {
        name = runtime_name(&cri, &config.runtime_endpoint) => name?,
        () = shutdown.clone() => return Ok(()),
    };
    tracing::info!(node = %config.node_name, runtime = %runtime_name, "agent started");
    let agent = Arc::new(watch::Agent::new(
        kube::Api::<Pod>::all(client),
        cri,
        runtime_name,
        &config.node_name,
        observer,
    ));
    watch::run(agent, &config.node_name, shutdown).await;
    Ok(())
}

/// The runtime's name, asked until it answers (1 s, doubling to 30 s between attempts).
async fn runtime_name(cri: &cri::Cri, endpoint: &str) -> anyhow::Result<String> {
    let mut wait = Duration::from_secs(1);
    loop {
        match cri.runtime_name().await {
            Ok(name) if !name.is_empty() => return Ok(name),
            Ok(_) => anyhow::bail!("the runtime at {endpoint} gave no name"),
            Err(e) => {
                tracing::warn!(endpoint, error = %e, retry_in = ?wait, "runtime not reachable");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
}
