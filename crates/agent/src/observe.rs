//! The agent's `/healthz`, `/readyz` and `/metrics` (kruise-daemon serves its metrics and `/healthz` on one
//! address, `:10221` by default: Kruise `cmd/daemon/main.go`, flag `addr`; `pkg/daemon/daemon.go`, `Run`).
//! docs/install.md, "The node agent's health and metrics", lists what each reports.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::cri::Cri;

type Labels = Vec<(&'static str, String)>;

/// How long `/readyz` waits for the runtime's `Version` answer.
const RUNTIME_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The agent's metrics, registered once.
pub(crate) struct Metrics {
    registry: Registry,
    /// In-place container restarts, by `result` (`stopped`, `failed`).
    restarts: Family<Labels, Counter>,
    /// preStop hooks that failed or timed out (the restart went on, as the kubelet's does).
    prestop_failures: Counter,
    /// Pod syncs that failed (retried with back-off).
    sync_errors: Counter,
    /// Pods of the node whose env reads pod metadata (the ones the agent serves), counted at each scrape.
    pods_served: Gauge,
    /// CRI call latency, by `call` (the RPC's name).
    cri_duration: Family<Labels, Histogram>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("insitu_agent");
        let restarts = Family::<Labels, Counter>::default();
        let prestop_failures = Counter::default();
        let sync_errors = Counter::default();
        let pods_served = Gauge::default();
        // 1 ms to ~16 s: a list answers in milliseconds, a StopContainer waits out the grace period.
        let cri_duration = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 15))
        });
        registry.register(
            "container_restarts",
            "In-place container restarts for env from pod metadata, by result",
            restarts.clone(),
        );
        registry.register(
            "prestop_hook_failures",
            "preStop hooks that failed or timed out before a restart",
            prestop_failures.clone(),
        );
        registry.register(
            "sync_errors",
            "Pod syncs that failed (CRI or apiserver errors; retried with back-off)",
            sync_errors.clone(),
        );
        registry.register(
            "pods_served",
            "Pods of this node whose env reads pod labels or annotations",
            pods_served.clone(),
        );
        registry.register_with_unit(
            "cri_call_duration",
            "CRI call latency, by call",
            Unit::Seconds,
            cri_duration.clone(),
        );
        Self {
            registry,
            restarts,
            prestop_failures,
            sync_errors,
            pods_served,
            cri_duration,
        }
    }

    pub(crate) fn restart(&self, ok: bool) {
        let result = if ok { "stopped" } else { "failed" };
        self.restarts
            .get_or_create(&vec![("result", result.into())])
            .inc();
    }

    pub(crate) fn prestop_failure(&self) {
        self.prestop_failures.inc();
    }

    pub(crate) fn sync_error(&self) {
        self.sync_errors.inc();
    }

    pub(crate) fn cri_call(&self, call: &'static str, started: Instant) {
        self.cri_duration
            .get_or_create(&vec![("call", call.into())])
            .observe(started.elapsed().as_secs_f64());
    }
}

/// What the endpoints read: the metrics, and the watch's store once it exists.
pub(crate) struct Observer {
    pub(crate) metrics: Metrics,
    store: OnceLock<Store<Pod>>,
    synced: AtomicBool,
}

impl Observer {
    pub(crate) fn new() -> Self {
        Self {
            metrics: Metrics::new(),
            store: OnceLock::new(),
            synced: AtomicBool::new(false),
        }
    }

    /// The watch's store, whose served pods `/metrics` counts.
    pub(crate) fn watching(&self, store: Store<Pod>) {
        let _ = self.store.set(store);
    }

    /// The first list of the node's pods is in (the watch's `InitDone`).
    pub(crate) fn synced(&self) {
        if !self.synced.swap(true, Ordering::Relaxed) {
            tracing::info!("pod watch synced");
        }
    }

    fn render(&self) -> String {
        if let Some(store) = self.store.get() {
            let served = store.state().iter().filter(|p| crate::decide::serves(p)).count();
            self.metrics
                .pods_served
                .set(i64::try_from(served).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.metrics.registry);
        out
    }

    /// `/readyz`: the first list of the node's pods is in, and the runtime answers `Version` now.
    async fn ready(&self, cri: &Cri) -> (StatusCode, String) {
        if !self.synced.load(Ordering::Relaxed) {
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
                async move { r.ready(&cri).await }
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
