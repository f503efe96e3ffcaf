//! `insitu run`: the controller against a real cluster, with `/metrics`, `/healthz` and `/readyz`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::routing::get;
use insitu_controller::{Config, Metrics, SystemClock};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Only watch this namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Address for /metrics, /healthz, /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Kruise feature gates, e.g. `CloneSetPartitionRollback=true`.
    #[arg(long, default_value = "")]
    pub feature_gates: String,
    /// Concurrent CloneSet reconciles.
    #[arg(long, default_value_t = 3)]
    pub workers: u16,
}

pub async fn client_from(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    let gates = insitu_core::FeatureGates::parse(&args.feature_gates).map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let client = client_from(args.kubeconfig.as_deref()).await?;
        let metrics = Arc::new(Metrics::new());
        let m = metrics.clone();
        let app = Router::new()
            .route("/metrics", get(move || async move { m.render() }))
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(|| async { "ok" }));
        let listener = tokio::net::TcpListener::bind(args.metrics_addr)
            .await
            .with_context(|| format!("binding {}", args.metrics_addr))?;
        tracing::info!(addr = %args.metrics_addr, "serving /metrics /healthz /readyz");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let config = Config {
            namespace: args.namespace,
            gates,
            workers: args.workers,
            ..Config::default()
        };
        insitu_controller::run(client, config, Arc::new(SystemClock), metrics, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
        Ok(ExitCode::SUCCESS)
    })
}
