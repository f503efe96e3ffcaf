//! Cluster wiring: starts the apiserver, scheduler, kubelets, node lifecycle, volume binder and GC on one clock.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::apiserver::{ApiServer, ApiServerConfig};
use crate::clock::{Clock, SimClock};
use crate::gc::{self, GcConfig};
use crate::kubelet::{self, EventDrops, ImageProfiles, KubeletConfig, LostNodes, NodeCapacity};
use crate::nodelifecycle;
use crate::scheduler::{self, SchedulerConfig};
use crate::volumes;

/// Configuration of a simulated cluster.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Number of simulated nodes.
    pub nodes: usize,
    /// Seed for everything random (container IDs, ...).
    pub seed: u64,
    /// Image behaviour (pull/start times, failures).
    pub images: ImageProfiles,
    /// Node lease renewal interval; `None` disables heartbeats (huge sims).
    pub heartbeat: Option<Duration>,
    /// Record kubelet and scheduler Events.
    pub events: bool,
    /// Node capacity.
    pub capacity: NodeCapacity,
    /// Run the scheduler (else pods must be created with `spec.nodeName`).
    pub scheduler: bool,
    /// Bind every new PVC at once, as a cluster with a default dynamic provisioner does.
    pub volumes: bool,
    /// Run the garbage collector.
    pub gc: bool,
    /// GC owner and dependent kinds.
    pub gc_config: GcConfig,
    /// Apiserver tuning (its `seed` is replaced by [`SimConfig::seed`]).
    pub apiserver: ApiServerConfig,
    /// The nodes also act as kruise-daemon (env-from-metadata restarts, runtime-containers-meta).
    pub kruise_daemon: bool,
    /// The nodes also execute Kruise's ImagePullJobs (its ImagePullJob controller and kruise-daemon).
    pub image_pull_jobs: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        let k = KubeletConfig::default();
        Self {
            nodes: k.nodes,
            seed: 0,
            images: ImageProfiles::default(),
            heartbeat: k.heartbeat,
            events: true,
            capacity: NodeCapacity::default(),
            scheduler: true,
            volumes: true,
            gc: true,
            gc_config: GcConfig::default(),
            apiserver: ApiServerConfig::default(),
            kruise_daemon: k.kruise_daemon,
            image_pull_jobs: k.image_pull_jobs,
        }
    }
}

impl SimConfig {
    /// The kubelet configuration this cluster runs its nodes with.
    pub fn kubelet(&self) -> KubeletConfig {
        KubeletConfig {
            nodes: self.nodes,
            seed: self.seed,
            images: self.images.clone(),
            heartbeat: self.heartbeat,
            events: self.events,
            capacity: self.capacity.clone(),
            kruise_daemon: self.kruise_daemon,
            image_pull_jobs: self.image_pull_jobs,
            ..KubeletConfig::default()
        }
    }
}

/// A running simulated cluster; its tasks stop on [`SimCluster::shutdown`] or drop.
pub struct SimCluster {
    /// The in-memory apiserver.
    pub apiserver: ApiServer,
    /// An in-process client of it.
    pub client: kube::Client,
    /// The cluster clock.
    pub clock: Arc<SimClock>,
    /// Node loss: nodes in this set stop talking to the apiserver until restored.
    pub lost: LostNodes,
    /// Events the kubelets and the scheduler dropped on a full queue (as client-go's recorder does).
    pub event_drops: EventDrops,
    tasks: Vec<JoinHandle<()>>,
}

impl SimCluster {
    /// Starts the apiserver, registers the nodes, then spawns kubelet, scheduler, volume binder and GC (all on the
    /// in-process client). Nodes exist and are Ready when this returns.
    pub async fn start(config: SimConfig, clock: Arc<SimClock>) -> Result<Self, kube::Error> {
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        let apiserver = ApiServer::with_config(
            dyn_clock.clone(),
            ApiServerConfig {
                seed: config.seed,
                ..config.apiserver
            },
        );
        let client = apiserver.client();
        let kcfg = config.kubelet();
        let lost = kcfg.lost.clone();
        let event_drops = kcfg.event_drops.clone();
        kubelet::register(&client, dyn_clock.as_ref(), &kcfg).await?;
        let mut tasks = vec![tokio::spawn(kubelet::serve(
            client.clone(),
            dyn_clock.clone(),
            kcfg,
        ))];
        // Node health needs heartbeats: without them (huge sims) every node would look lost.
        if config.heartbeat.is_some() {
            tasks.push(tokio::spawn(nodelifecycle::run(
                apiserver.oracle_client(),
                dyn_clock.clone(),
            )));
        }
        if config.scheduler {
            let scfg = SchedulerConfig {
                events: config.events,
                event_drops: event_drops.clone(),
                ..SchedulerConfig::default()
            };
            tasks.push(tokio::spawn(scheduler::run(
                client.clone(),
                dyn_clock.clone(),
                scfg,
            )));
        }
        if config.volumes {
            tasks.push(tokio::spawn(volumes::run(client.clone(), dyn_clock.clone())));
        }
        if config.gc {
            tasks.push(tokio::spawn(gc::run(
                client.clone(),
                dyn_clock.clone(),
                config.gc_config.clone(),
            )));
        }
        Ok(Self {
            apiserver,
            client,
            clock,
            lost,
            event_drops,
            tasks,
        })
    }

    /// Stops kubelet, scheduler, volume binder and GC.
    pub fn shutdown(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Configuration for `insitu nodes`: simulated nodes against any apiserver.
pub type NodesConfig = KubeletConfig;

/// Runs simulated nodes (kubelet only: the real cluster schedules and collects garbage) against any apiserver,
/// until the future is dropped.
pub async fn run_nodes(
    client: kube::Client,
    clock: Arc<dyn Clock>,
    config: NodesConfig,
) -> Result<(), kube::Error> {
    kubelet::run(client, clock, config).await
}
