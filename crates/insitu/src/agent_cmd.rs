//! `insitu agent`: the node agent (kruise-daemon's role) on one node, talking CRI to its runtime
//! (`insitu-agent`; see docs/architecture.md).

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct AgentArgs {
    /// The node whose pods the agent serves (in a DaemonSet: the downward API's `spec.nodeName`).
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,
    /// The container runtime's CRI socket (the kubelet's `--container-runtime-endpoint`).
    #[arg(long, default_value = "unix:///run/containerd/containerd.sock")]
    pub runtime_endpoint: String,
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Address for /healthz, /readyz and /metrics (kruise-daemon's port, 10221; the controller's is 8080).
    /// Loopback by default; in a DaemonSet give `0.0.0.0:10221` so the kubelet's probes and Prometheus reach it
    /// (deploy/agent/ does).
    #[arg(long, default_value = "127.0.0.1:10221")]
    pub metrics_addr: std::net::SocketAddr,
}

#[cfg(feature = "agent")]
pub fn main(args: AgentArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let client = insitu_controller::client::from_kubeconfig(args.kubeconfig.as_deref(), "agent").await?;
        let config = insitu_agent::AgentConfig {
            node_name: args.node_name,
            runtime_endpoint: args.runtime_endpoint,
            metrics_addr: Some(args.metrics_addr),
        };
        // The controller's graceful shutdown wants a `Sync` trigger: the signal arrives through a channel.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            crate::run_cmd::termination_signal().await;
            let _ = tx.send(());
        });
        insitu_agent::run(client, config, async move {
            let _ = rx.await;
        })
        .await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// A build without the `agent` feature (the default one, which needs no `protoc`) has the command but not the
/// agent: it says so instead of pretending to run.
#[cfg(not(feature = "agent"))]
pub fn main(_args: AgentArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this insitu was built without the node agent: run the image (`insitu:<version>`, docs/install.md) or \
         build with `cargo build --release -p insitu --features agent` (needs protoc: apt-get install protobuf-compiler)"
    )
}
