//! Prometheus metrics; names Kruise users alert on keep Kruise's names (and the seed's `kruise_inplace_update_*`).

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

type Labels = Vec<(&'static str, String)>;

/// The allocator's own figures, read at each scrape: `(kind, bytes)` pairs (jemalloc's `stats.allocated`,
/// `stats.active`, `stats.resident`, …). The binary provides it (it owns the global allocator; this crate
/// does not depend on one).
pub type AllocatorStats = fn() -> Vec<(&'static str, i64)>;

/// All controller metrics, registered once.
pub struct Metrics {
    registry: Registry,
    /// In-place updates started (pods).
    pub inplace_update: Family<Labels, Counter>,
    /// In-place updates whose pod write failed.
    pub inplace_update_failed: Family<Labels, Counter>,
    /// Time from the start of an in-place update to InPlaceUpdateReady=True.
    pub inplace_update_duration: Family<Labels, Histogram>,
    /// Pods marked for recreation because the change cannot go in place.
    pub recreate_update: Family<Labels, Counter>,
    /// The same, by the first template field that forced it (`spec.containers.env`, …).
    pub recreate_total: Family<Labels, Counter>,
    /// In-place resizes by outcome (`requested`, `failed`, `deferred`, `infeasible`, `completed`; see `resize`).
    pub resize_total: Family<Labels, Counter>,
    /// Kruise: `cloneset_scale_expectation_leakage{namespace,name}`.
    pub expectation_leakage: Family<Labels, Counter>,
    /// Reconciles by result.
    pub reconcile: Family<Labels, Counter>,
    /// Wall time of one `core::plan` call.
    pub plan_duration: Histogram,
    /// API writes the controller made, by verb and resource.
    pub api_writes: Family<Labels, Counter>,
    /// 1 while this replica holds the leader lease.
    pub leader: Gauge,
    /// Events dropped by client-go's per-object spam filter (see `correlator`).
    pub events_skipped: Counter,
    /// Bytes by allocator figure (`insitu_allocator_bytes{kind}`): live heap vs what the allocator holds, to
    /// tell a leak from pages kept for reuse.
    pub allocator: Family<Labels, Gauge>,
    allocator_stats: std::sync::OnceLock<AllocatorStats>,
    /// Objects left out of a cache because they do not decode, by resource (see `lenient`).
    pub undecodable: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let inplace_update = Family::<Labels, Counter>::default();
        let inplace_update_failed = Family::<Labels, Counter>::default();
        let inplace_update_duration = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(1.0, 2.0, 12))
        });
        let recreate_update = Family::<Labels, Counter>::default();
        let recreate_total = Family::<Labels, Counter>::default();
        let resize_total = Family::<Labels, Counter>::default();
        let expectation_leakage = Family::<Labels, Counter>::default();
        let reconcile = Family::<Labels, Counter>::default();
        let plan_duration = Histogram::new(exponential_buckets(0.000_05, 2.0, 16));
        let api_writes = Family::<Labels, Counter>::default();
        let leader = Gauge::default();
        let events_skipped = Counter::default();
        let undecodable = Family::<Labels, Counter>::default();
        let allocator = Family::<Labels, Gauge>::default();
        registry.register_with_unit(
            "insitu_allocator",
            "The heap allocator's figures: allocated (live heap), active (pages holding it), resident (pages \
             the allocator has in memory), retained (address space kept, not resident), metadata",
            Unit::Bytes,
            allocator.clone(),
        );
        registry.register(
            "insitu_undecodable_objects",
            "Objects left out of the controller's caches because they do not decode (each object version once)",
            undecodable.clone(),
        );
        registry.register(
            "kruise_inplace_update",
            "In-place pod updates started",
            inplace_update.clone(),
        );
        registry.register(
            "kruise_inplace_update_failed",
            "In-place pod updates that failed",
            inplace_update_failed.clone(),
        );
        registry.register_with_unit(
            "kruise_inplace_update_duration",
            "Seconds from the start of an in-place update until the pod is InPlaceUpdateReady again",
            Unit::Seconds,
            inplace_update_duration.clone(),
        );
        registry.register(
            "insitu_recreate_update",
            "Pods marked for recreation by an update",
            recreate_update.clone(),
        );
        registry.register(
            "insitu_recreate",
            "Pods recreated by an update, by the first template field that kept it from going in place",
            recreate_total.clone(),
        );
        registry.register(
            "insitu_resize",
            "In-place resizes by outcome: requested/failed (the apiserver accepted/refused the resize), deferred/infeasible (the kubelet holds it), completed (the container statuses report the spec's resources)",
            resize_total.clone(),
        );
        registry.register(
            "cloneset_scale_expectation_leakage",
            "Expectations that timed out before the cache caught up",
            expectation_leakage.clone(),
        );
        registry.register(
            "insitu_reconcile",
            "CloneSet reconciles by result",
            reconcile.clone(),
        );
        registry.register_with_unit(
            "insitu_plan_duration",
            "Wall time of one planning pass",
            Unit::Seconds,
            plan_duration.clone(),
        );
        registry.register(
            "insitu_api_writes",
            "API writes by verb and resource",
            api_writes.clone(),
        );
        registry.register(
            "insitu_leader",
            "1 while this replica is the leader",
            leader.clone(),
        );
        registry.register(
            "insitu_events_skipped",
            "Events not written: over client-go's per-object spam budget (25, then one per 5 minutes)",
            events_skipped.clone(),
        );
        Self {
            registry,
            inplace_update,
            inplace_update_failed,
            inplace_update_duration,
            recreate_update,
            recreate_total,
            resize_total,
            expectation_leakage,
            reconcile,
            plan_duration,
            api_writes,
            leader,
            events_skipped,
            allocator,
            allocator_stats: std::sync::OnceLock::new(),
            undecodable,
        }
    }

    /// Reports the allocator's figures (`insitu_allocator_bytes`) from `stats` at each scrape; the first call
    /// wins.
    pub fn set_allocator_stats(&self, stats: AllocatorStats) {
        let _ = self.allocator_stats.set(stats);
    }

    /// OpenMetrics text for `/metrics`.
    pub fn render(&self) -> String {
        if let Some(stats) = self.allocator_stats.get() {
            for (kind, bytes) in stats() {
                self.allocator
                    .get_or_create(&vec![("kind", kind.to_string())])
                    .set(bytes);
            }
        }
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// Creates a CloneSet's series at 0 (in-place updates started and failed, their duration, recreations,
    /// expectation leaks), so they are on `/metrics` from its first reconcile: an empty family is not rendered at
    /// all, and then `rate()` of the failure counter is absent instead of 0 and a dashboard panel (the chart's
    /// files/insitu-dashboard.json) shows no data.
    pub fn init_cloneset(&self, namespace: &str, name: &str) {
        let labels = cs_labels(namespace, name);
        drop(self.inplace_update.get_or_create(&labels));
        drop(self.inplace_update_failed.get_or_create(&labels));
        drop(self.inplace_update_duration.get_or_create(&labels));
        drop(self.recreate_update.get_or_create(&labels));
        drop(self.expectation_leakage.get_or_create(&labels));
    }

    /// One resize outcome (`insitu_resize_total{outcome}`).
    pub fn resize(&self, outcome: &'static str) {
        self.resize_total
            .get_or_create(&vec![("outcome", outcome.to_string())])
            .inc();
    }

    pub fn write(&self, verb: &'static str, resource: &'static str) {
        self.api_writes
            .get_or_create(&vec![
                ("verb", verb.to_string()),
                ("resource", resource.to_string()),
            ])
            .inc();
    }
}

/// Labels `{namespace, name}` for per-CloneSet metrics.
pub fn cs_labels(namespace: &str, name: &str) -> Labels {
    vec![("namespace", namespace.to_string()), ("name", name.to_string())]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed() -> Vec<(&'static str, i64)> {
        vec![("allocated", 1_048_576), ("resident", 4_194_304)]
    }

    #[test]
    fn allocator_figures_are_read_at_each_scrape() {
        let m = Metrics::new();
        assert!(
            !m.render().contains("insitu_allocator_bytes{"),
            "no figures before a source is set"
        );
        m.set_allocator_stats(fixed);
        let text = m.render();
        assert!(
            text.contains("insitu_allocator_bytes{kind=\"allocated\"} 1048576"),
            "{text}"
        );
        assert!(
            text.contains("insitu_allocator_bytes{kind=\"resident\"} 4194304"),
            "{text}"
        );
    }
    #[test]
    fn a_clonesets_series_exist_at_zero_from_its_first_reconcile() {
        let m = Metrics::new();
        assert!(!m.render().contains("kruise_inplace_update_failed"));
        m.init_cloneset("shop", "web");
        let text = m.render();
        for line in [
            "kruise_inplace_update_total{namespace=\"shop\",name=\"web\"} 0",
            "kruise_inplace_update_failed_total{namespace=\"shop\",name=\"web\"} 0",
            "kruise_inplace_update_duration_seconds_count{namespace=\"shop\",name=\"web\"} 0",
            "insitu_recreate_update_total{namespace=\"shop\",name=\"web\"} 0",
            "cloneset_scale_expectation_leakage_total{namespace=\"shop\",name=\"web\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
        // Idempotent: a second reconcile adds nothing.
        m.init_cloneset("shop", "web");
        assert_eq!(m.render(), text);
    }
}
