//! Shared state of the controller: client, caches, clock, expectations, metrics, configuration.

use std::sync::Arc;
use std::time::Duration;

use insitu_api::CloneSet;
use insitu_core::{FeatureGates, PackedPod};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::reflector::Store;

use crate::expectations::Expectations;
use crate::{Clock, Metrics};

/// Controller settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Watch only this namespace (all namespaces when `None`).
    pub namespace: Option<String>,
    pub gates: FeatureGates,
    /// Give up waiting for the cache to show our own writes after this long (Kruise `--expectation-timeout`).
    pub expectation_timeout: Duration,
    /// Emit Kubernetes Events for pod operations.
    pub events: bool,
    /// Max CloneSets reconciled at once (Kruise `--cloneset-workers`).
    pub workers: u16,
    /// After the shutdown signal, how long running reconciles may take before the controller stops anyway.
    pub shutdown_timeout: Duration,
    /// A reconcile running longer than this makes `/healthz` fail (the loop is wedged).
    pub wedged_after: Duration,
    /// How long a reconcile waits for a cache to sync before it fails (and is retried).
    pub cache_sync_timeout: Duration,
    /// How the caches fill: streaming list where served, else LIST (see `initial_list`).
    pub initial_list: crate::initial_list::InitialList,
    /// Plan on the blocking pool (default) so a large plan does not hold up watches and writes; `false` plans on
    /// the reconcile's own task, which a simulated run needs to replay from its seed (a blocking-pool thread
    /// finishes at a real-time instant, so where its result lands among the runtime's other tasks varies).
    pub plan_on_blocking_pool: bool,
    /// Runs each reconcile's body on an embedder's executor instead of kube-runtime's task (see `offload`).
    pub offload: Option<Arc<dyn crate::offload::Offload>>,
    /// Also run the Advanced StatefulSet controller (`statefulsets.apps.kruise.io`, `insitu run --workloads
    /// cloneset,statefulset`), on the same caches and executor.
    pub statefulset: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            namespace: None,
            gates: FeatureGates::default(),
            expectation_timeout: Duration::from_secs(300),
            events: true,
            workers: 3,
            shutdown_timeout: Duration::from_secs(20),
            wedged_after: Duration::from_secs(300),
            cache_sync_timeout: Duration::from_secs(30),
            initial_list: Default::default(),
            plan_on_blocking_pool: true,
            offload: None,
            statefulset: false,
        }
    }
}

/// The controller's caches (reflector stores), shared by every reconcile.
pub struct Stores {
    pub clonesets: Store<CloneSet>,
    /// Pods, packed (metadata plus the JSON of spec and status: a fifth of a `Pod`'s memory).
    pub pods: Store<PackedPod>,
    pub revisions: Store<ControllerRevision>,
    /// Node metadata (labels only), for the topology-spread scale-down ranker.
    pub nodes: Store<k8s_openapi::api::core::v1::Node>,
    /// PersistentVolumeClaims (those from volumeClaimTemplates carry an ownerReference to their CloneSet).
    pub pvcs: Store<PersistentVolumeClaim>,
}

/// What the server offers, discovered once at start.
#[derive(Clone, Debug, Default)]
pub struct Server {
    /// The server has `pods/resize` (≥ 1.32, Kruise `ShouldUpdateResourceByResize`): resizes go through it;
    /// before that, in the pod update.
    pub resize_subresource: bool,
    /// `clonesets` of `apps.kruise.io/v1beta1` with its status subresource, when served: status is written there
    /// (the storage version, as Kruise master writes it), else in v1alpha1.
    pub status_resource: Option<kube::api::ApiResource>,
}

/// What every step of a reconcile shares: the client, the caches, the sinks (events, metrics, health) and the
/// settings. A step's own memory across rounds (pod summaries, barrier keys, ImagePullJobs, warnings emitted,
/// resizes counted, back-off) is the step's, kept by the reconciler (`reconcile::Reconciler`) and passed to it.
pub struct Context {
    pub client: kube::Client,
    pub caches: Stores,
    pub server: Server,
    pub clock: Arc<dyn Clock>,
    pub expectations: Expectations,
    pub metrics: Arc<Metrics>,
    pub health: Arc<crate::health::Health>,
    pub events: crate::events::EventSink,
    pub config: Config,
}
