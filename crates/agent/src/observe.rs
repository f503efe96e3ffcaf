//! The agent's metrics and watch state, which `/metrics` and `/readyz` report (`endpoints`; docs/install.md,
//! "The node agent's health and metrics").

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

type Labels = Vec<(&'static str, String)>;

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

    pub(crate) fn render(&self) -> String {
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

    pub(crate) fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }
}
