//! The agent's `/healthz`, `/readyz` and `/metrics` (kruise-daemon serves its metrics and `/healthz` on one
//! address, `:10221` by default: Kruise `cmd/daemon/main.go`, flag `addr`; `pkg/daemon/daemon.go`, `Run`).
//! docs/install.md, "The node agent's health and metrics", lists what each reports.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;

use crate::cri::Cri;
use crate::observe::Observer;

/// How long `/readyz` waits for the runtime's `Version` answer.
const RUNTIME_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// `/readyz`: the first list of the node's pods is in, and the runtime answers `Version` now.
async fn ready(observer: &Observer, cri: &Cri) -> (StatusCode, String) {
    if !observer.is_synced() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "pod watch not synced yet\n".into(),
        );
    }
    match tokio::time::timeout(RUNTIME_PROBE_TIMEOUT, cri.runtime_name()).await {
        Ok(Ok(_)) => (StatusCode::OK, "ok\n".into()),
        Ok(Err(e)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("runtime not reachable: {e}\n"),
        ),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("runtime did not answer within {RUNTIME_PROBE_TIMEOUT:?}\n"),
        ),
    }
}

/// Binds `addr` and serves the three endpoints until the process ends. `/healthz` answers as long as the
/// process runs (a wedged runtime is `/readyz`'s business: restarting the agent would not fix it).
pub(crate) async fn serve(addr: SocketAddr, observer: Arc<Observer>, cri: Cri) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding {addr}: {e}"))?;
    tracing::info!(addr = %listener.local_addr()?, "serving /metrics /healthz /readyz");
    let (m, r) = (observer.clone(), observer);
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let (r, cri) = (r.clone(), cri.clone());
                async move { ready(&r, &cri).await }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let m = m.clone();
                async move {
                    (
                        [(
                            "content-type",
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        m.render(),
                    )
                }
            }),
        );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "metrics server stopped");
        }
    });
    Ok(())
}
