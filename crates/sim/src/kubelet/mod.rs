//! Simulated kubelets: one agent runs N nodes' pods and reports status like the real kubelet, via the API only.

mod agent;
mod cache;
pub mod events;
pub mod image;
pub mod ipam;
pub mod lost;
pub mod node;
mod pulljob;
pub mod resize;
pub mod runtime;
pub mod status;
mod timing;
mod write;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;

pub use events::EventDrops;
pub use image::{ImageFailure, ImageProfile, ImageProfiles, StartModel, image_id, normalize_image};
pub use lost::LostNodes;
pub use node::{LEASE_NAMESPACE, SIM_NODE_LABEL};

use crate::Clock;

/// Capacity (and allocatable) every simulated node reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCapacity {
    /// CPU quantity, e.g. `32`.
    pub cpu: String,
    /// Memory quantity, e.g. `256Gi`.
    pub memory: String,
    /// Max pods.
    pub pods: u32,
}

impl Default for NodeCapacity {
    fn default() -> Self {
        Self {
            cpu: "32".into(),
            memory: "256Gi".into(),
            pods: 110_000,
        }
    }
}

/// Configuration of the simulated nodes and their kubelet.
#[derive(Clone, Debug)]
pub struct KubeletConfig {
    /// Number of nodes (`{node_prefix}0..N-1`).
    pub nodes: usize,
    /// Node name prefix.
    pub node_prefix: String,
    /// Seed for container IDs (runs replay from a seed).
    pub seed: u64,
    /// Image pull/start/failure behaviour.
    pub images: ImageProfiles,
    /// Lease renewal interval; `None` disables leases and node heartbeats (huge sims).
    pub heartbeat: Option<Duration>,
    /// Node status re-post interval (needs `heartbeat`); `None` posts node status only at registration.
    pub node_status_interval: Option<Duration>,
    /// Record core/v1 Events (Pulling, Pulled, Created, Started, Killing, BackOff, ...).
    pub events: bool,
    /// Node capacity.
    pub capacity: NodeCapacity,
    /// Extra node labels.
    pub node_labels: BTreeMap<String, String>,
    /// `nodeInfo.kubeletVersion`.
    pub kubelet_version: String,
    /// Maximum concurrent status writes.
    pub max_inflight_writes: usize,
    /// Also act as kruise-daemon's container-meta controller: restart containers whose env from metadata
    /// changed during an in-place update and report `apps.kruise.io/runtime-containers-meta` (for pods
    /// with such env; see `runtime::PodRt::restart_stale_env`).
    pub kruise_daemon: bool,
    /// Nodes cut off from the apiserver (node loss); empty unless a test or `insitu torture` loses one.
    pub lost: LostNodes,
    /// Also execute Kruise's ImagePullJobs on these nodes, as Kruise's ImagePullJob controller and each node's
    /// kruise-daemon would (`pulljob`): only where the server serves `imagepulljobs.apps.kruise.io`, and in one
    /// process per cluster (two would write each other's job status over their own nodes).
    pub image_pull_jobs: bool,
    /// Counts the Events dropped on a full queue (shared with the cluster, see [`EventDrops`]).
    pub event_drops: EventDrops,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            nodes: 3,
            node_prefix: "sim-node-".into(),
            seed: 0,
            images: ImageProfiles::default(),
            heartbeat: Some(Duration::from_secs(10)),
            node_status_interval: Some(Duration::from_secs(300)),
            events: true,
            capacity: NodeCapacity::default(),
            node_labels: BTreeMap::new(),
            kubelet_version: "v1.35.0".into(),
            max_inflight_writes: 64,
            kruise_daemon: true,
            lost: LostNodes::default(),
            image_pull_jobs: true,
            event_drops: EventDrops::default(),
        }
    }
}

/// Registers the nodes, then runs their pods until the future is dropped (works against any apiserver).
pub async fn run(client: Client, clock: Arc<dyn Clock>, config: KubeletConfig) -> Result<(), kube::Error> {
    node::register(&client, clock.as_ref(), &config).await?;
    serve(client, clock, config).await;
    Ok(())
}

/// Registers the nodes (idempotent): Node objects, Ready status, leases.
pub async fn register(client: &Client, clock: &dyn Clock, config: &KubeletConfig) -> Result<(), kube::Error> {
    node::register(client, clock, config).await
}

/// Runs already-registered nodes: lease heartbeats plus the pod agent, until the future is dropped.
pub async fn serve(client: Client, clock: Arc<dyn Clock>, config: KubeletConfig) {
    let config = Arc::new(config);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(node::heartbeat_loop(
        client.clone(),
        clock.clone(),
        config.clone(),
    ));
    agent::Agent::new(client, clock, config).run().await;
}
