//! Test harness: a simulated cluster plus the controller on virtual time, and helpers to drive scenarios.
//!
//! Shared by the controller's behaviour tests and the `insitu` crate's CLI tests (`#[path]`); it needs only the
//! simulated cluster (`insitu-sim`), not the lab.
#![allow(dead_code)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use insitu_api::CloneSet;
use insitu_controller::{Config, Metrics};
use insitu_core::explain::podwhy;
use insitu_sim::cluster::{SimCluster, SimConfig};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

pub struct Harness {
    pub cluster: SimCluster,
    pub client: kube::Client,
    pub metrics: Arc<Metrics>,
    pub pods: Store<Pod>,
    /// Worst number of not-ready pods seen at any pod event, per CloneSet app label, once tracking started.
    pub max_unavailable: Arc<Mutex<Option<usize>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// The seed tutorial's CloneSet (what `insitu demo` runs).
pub const SEED_YAML: &str = include_str!("../../../../examples/cloneset-demo.yaml");

pub fn seed_cloneset() -> CloneSet {
    serde_saphyr::from_str(SEED_YAML).expect("seed yaml")
}

/// The simulated cluster's clock as the controller's: the controller reads virtual time.
pub struct SharedClock(pub Arc<insitu_sim::SimClock>);

impl insitu_controller::Clock for SharedClock {
    fn now(&self) -> Timestamp {
        insitu_sim::Clock::now(&*self.0)
    }
}

/// A CloneSet like the seed's (its 10 s grace period included) but named `name`, with `replicas`.
pub fn cloneset(name: &str, replicas: i32) -> CloneSet {
    let mut cs = seed_cloneset();
    cs.metadata.name = Some(name.into());
    cs.metadata.labels = Some([("app".to_string(), name.to_string())].into());
    cs.spec.replicas = Some(replicas);
    cs.spec.selector.match_labels = Some([("app".to_string(), name.to_string())].into());
    if let Some(m) = cs.spec.template.metadata.as_mut() {
        m.labels = Some([("app".to_string(), name.to_string())].into());
    }
    cs
}

impl Harness {
    pub async fn start(seed: u64) -> Self {
        Self::start_with(SimConfig {
            nodes: 4,
            seed,
            ..Default::default()
        })
        .await
    }

    /// A cluster with this configuration (image profiles, nodes, ...) plus the controller.
    pub async fn start_with(config: SimConfig) -> Self {
        let mut h = Self::without_controller_with(config).await;
        h.start_controller();
        h
    }

    /// The cluster and the pod tracker, no controller yet (`start_controller`): to set up what the
    /// controller's first LIST sees.
    pub async fn without_controller(seed: u64) -> Self {
        Self::without_controller_with(SimConfig {
            nodes: 4,
            seed,
            ..Default::default()
        })
        .await
    }

    pub async fn without_controller_with(config: SimConfig) -> Self {
        let clock = insitu_sim::SimClock::new(Timestamp::from_second(1_764_000_000).unwrap(), 1.0);
        let cluster = SimCluster::start(config, clock.clone())
            .await
            .expect("sim starts");
        let client = cluster.client.clone();
        let metrics = Arc::new(Metrics::new());
        let (store, writer) = reflector::store::<Pod>();
        let max_unavailable: Arc<Mutex<Option<usize>>> = Arc::default();
        let tracker = max_unavailable.clone();
        let reader = store.clone();
        let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
        tokio::spawn(async move {
            let mut events = Box::pin(
                watcher(pods_api, watcher::Config::default())
                    .default_backoff()
                    .reflect(writer)
                    .applied_objects(),
            );
            while events.next().await.is_some() {
                let mut guard = tracker.lock().unwrap();
                if let Some(worst) = guard.as_mut() {
                    let not_ready = reader
                        .state()
                        .iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none() && !is_ready(p))
                        .count();
                    *worst = (*worst).max(not_ready);
                }
            }
        });
        Harness {
            cluster,
            client,
            metrics,
            pods: store,
            max_unavailable,
            stop: None,
        }
    }

    /// Starts the controller (default config) on the cluster.
    pub fn start_controller(&mut self) {
        self.start_controller_with(Config::default());
    }

    /// Starts the controller with `config` (feature gates, ...) on the cluster.
    pub fn start_controller_with(&mut self, config: Config) {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(insitu_controller::run(
            self.client.clone(),
            config,
            Arc::new(SharedClock(self.cluster.clock.clone())),
            self.metrics.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        self.stop = Some(tx);
    }

    pub fn clonesets(&self) -> Api<CloneSet> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub fn pods_api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub async fn create(&self, cs: &CloneSet) {
        self.clonesets()
            .create(&PostParams::default(), cs)
            .await
            .expect("create cloneset");
    }

    pub async fn json_patch(&self, name: &str, patch: serde_json::Value) {
        let p: json_patch::Patch = serde_json::from_value(patch).expect("patch");
        self.clonesets()
            .patch(name, &PatchParams::default(), &Patch::<()>::Json(p))
            .await
            .expect("patch cloneset");
    }

    pub async fn merge_patch(&self, name: &str, patch: serde_json::Value) {
        self.clonesets()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch cloneset");
    }

    pub async fn set_image(&self, name: &str, image: &str) {
        self.json_patch(
            name,
            serde_json::json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}]),
        )
        .await;
    }

    /// Live pods of the CloneSet `app` label (no deletionTimestamp), sorted by name.
    pub async fn pods(&self, app: &str) -> Vec<Pod> {
        let mut pods: Vec<Pod> = self
            .pods_api()
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .expect("list pods")
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        pods.sort_by_key(|p| p.name_any());
        pods
    }

    pub async fn status(&self, name: &str) -> insitu_api::CloneSetStatus {
        self.clonesets()
            .get_status(name)
            .await
            .expect("get cloneset")
            .status
            .unwrap_or_default()
    }

    /// Starts recording the worst number of unavailable pods.
    pub fn track_unavailable(&self) {
        *self.max_unavailable.lock().unwrap() = Some(0);
    }

    pub fn worst_unavailable(&self) -> usize {
        self.max_unavailable.lock().unwrap().unwrap_or(0)
    }

    /// Polls `check` every virtual second until it returns true, or panics after `secs` virtual seconds.
    pub async fn wait_for<F, Fut>(&self, what: &str, secs: u64, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        for _ in 0..secs {
            if check().await {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        panic!("timed out after {secs}s (virtual) waiting for: {what}");
    }

    /// Waits until `n` pods of `app` are Ready and, if given, all run `image`.
    pub async fn wait_ready(&self, app: &str, n: usize, image: Option<&str>, secs: u64) {
        self.wait_for(&format!("{n} ready pods of {app} on {image:?}"), secs, || async {
            let pods = self.pods(app).await;
            pods.len() == n
                && pods.iter().all(|p| {
                    is_ready(p) && image.is_none_or(|i| insitu_core::explain::podtable::image(p) == i)
                })
        })
        .await;
    }

    /// What `insitu explain cloneset/NAME` prints (text) for the sim's cluster now: the CloneSet, its pods and
    /// revisions, and the PVCs, planned by core and explained per pod (as `insitu::explain_cmd` does).
    pub async fn explain(&self, name: &str) -> String {
        use insitu_sim::Clock;
        let cs = self
            .clonesets()
            .get(name)
            .await
            .expect("explain reads the CloneSet");
        let lp = ListParams::default().labels(&insitu_api::validation::format_selector(&cs.spec.selector));
        let pods = self.pods_api().list(&lp).await.expect("explain lists pods");
        let revs: Api<ControllerRevision> = Api::namespaced(self.client.clone(), "default");
        let revs = revs.list(&lp).await.expect("explain lists revisions");
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), "default");
        let pvcs = pvcs
            .list(&ListParams::default())
            .await
            .expect("explain lists PVCs");
        let mut docs = vec![serde_json::to_value(&cs).unwrap()];
        docs.extend(typed(pods.items, "v1", "Pod"));
        docs.extend(typed(revs.items, "apps/v1", "ControllerRevision"));
        docs.extend(typed(pvcs.items, "v1", "PersistentVolumeClaim"));
        let now = self.cluster.clock.now();
        let input = insitu_core::input::snapshot_from_objects(docs, now, Default::default())
            .expect("explain reads the objects");
        let plan = insitu_core::plan(&input.snapshot);
        podwhy::text(&podwhy::pods(&input.snapshot, &plan))
    }

    pub async fn sleep(&self, secs: u64) {
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }

    /// Nothing the sim's components or the controller wrote lost a field to the apiserver's pruning of unknown
    /// fields (kube-apiserver drops what its Go types lack; a field lost here would be a sim or controller bug).
    pub fn assert_nothing_pruned(&self) {
        let pruned = self.cluster.apiserver.stats().pruned;
        assert!(pruned.is_empty(), "fields dropped as unknown: {pruned:?}");
    }

    pub fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

pub fn is_ready(p: &Pod) -> bool {
    insitu_core::explain::podtable::ready(p) == "True"
}

pub fn uid(p: &Pod) -> String {
    p.uid().unwrap_or_default()
}

/// Objects as a list's items lack them: with `apiVersion` and `kind`, as `kubectl get -o yaml` prints them.
fn typed<T: serde::Serialize>(items: Vec<T>, api_version: &str, kind: &str) -> Vec<serde_json::Value> {
    items
        .into_iter()
        .map(|i| {
            let mut v = serde_json::to_value(i).unwrap();
            v["apiVersion"] = api_version.into();
            v["kind"] = kind.into();
            v
        })
        .collect()
}

/// Runs a scenario on a fresh current-thread runtime with paused (virtual) time.
pub fn run<F: Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
        .block_on(f);
}
