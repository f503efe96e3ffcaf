//! The controller under torture: one process, or two replicas electing a leader on a Lease (`insitu run
//! --leader-elect`), where a crash kills the holder and the standby takes over after the lease expires.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use insitu_controller::leader::{LeaderElectionConfig, LeaderElector};
use insitu_controller::{Config, Metrics};
use insitu_sim::cluster::SimCluster;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::task::JoinHandle;

/// The Lease the replicas elect on (in the CloneSet's namespace: the embedded cluster has no `insitu-system`).
pub const LEASE: &str = "insitu-torture";

/// A task aborted when dropped: a replica's controller dies with the replica, as in one process.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a controller process needs of the cluster: its client and clock.
#[derive(Clone)]
struct Env {
    client: kube::Client,
    clock: Arc<insitu_sim::SimClock>,
}

impl Env {
    fn of(cluster: &SimCluster) -> Self {
        Env {
            client: cluster.client.clone(),
            clock: cluster.clock.clone(),
        }
    }
}

fn spawn_controller(env: &Env) -> JoinHandle<()> {
    let clock = Arc::new(crate::simtime::SharedClock(env.clock.clone()));
    tokio::spawn(insitu_controller::run(
        env.client.clone(),
        Config {
            shutdown_timeout: Duration::from_secs(5),
            ..Config::default()
        },
        clock,
        Arc::new(Metrics::new()),
        std::future::pending(),
    ))
}

/// A replica with leader election, as a Deployment's pod running `insitu run --leader-elect`: a standby until it
/// holds the Lease, then the controller while it leads. A leader that can no longer renew stops at once (`insitu
/// run` exits on a lost lease) and its pod restarts as a standby: a new incarnation with a new identity.
fn spawn_replica(env: Env, slot: &'static str, incarnations: Arc<AtomicU64>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let n = incarnations.fetch_add(1, Ordering::Relaxed);
            let elector = LeaderElector::spawn(
                env.client.clone(),
                LeaderElectionConfig::new("default", LEASE, format!("replica-{slot}-{n}")),
            );
            let mut leading = elector.subscribe();
            if leading.wait_for(|l| *l).await.is_err() {
                return;
            }
            let _controller = AbortOnDrop(spawn_controller(&env));
            let _ = leading.wait_for(|l| !*l).await;
            tracing::debug!(replica = slot, "lost the lease: restarting as a standby");
        }
    })
}

const SLOTS: [&str; 2] = ["a", "b"];

/// The controller processes of one seed.
pub enum Replicas {
    /// One controller, no election.
    Single(JoinHandle<()>),
    /// Two replicas electing on [`LEASE`].
    Elected {
        replicas: [JoinHandle<()>; 2],
        incarnations: Arc<AtomicU64>,
    },
}

impl Replicas {
    pub fn start(cluster: &SimCluster, leader_election: bool) -> Self {
        let env = Env::of(cluster);
        if !leader_election {
            return Replicas::Single(spawn_controller(&env));
        }
        let incarnations = Arc::new(AtomicU64::new(0));
        Replicas::Elected {
            replicas: SLOTS.map(|slot| spawn_replica(env.clone(), slot, incarnations.clone())),
            incarnations,
        }
    }

    /// Kills the controller that acts (the Lease holder under election) without any cleanup, as SIGKILL;
    /// returns who it was and the slot to restart after the downtime.
    pub async fn kill_acting(&mut self, oracle: &kube::Client) -> (String, usize) {
        match self {
            Replicas::Single(task) => {
                task.abort();
                let _ = (&mut *task).await;
                ("controller".into(), 0)
            }
            Replicas::Elected { replicas, .. } => {
                let holder = Api::<Lease>::namespaced(oracle.clone(), "default")
                    .get_opt(LEASE)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|l| l.spec?.holder_identity)
                    .unwrap_or_default();
                // No holder (the lease lapsed or was never taken): kill replica a all the same.
                let slot = SLOTS
                    .iter()
                    .position(|s| holder.starts_with(&format!("replica-{s}-")))
                    .unwrap_or(0);
                replicas[slot].abort();
                let _ = (&mut replicas[slot]).await;
                let who = if holder.is_empty() {
                    "no leader".into()
                } else {
                    holder
                };
                (format!("replica {} (lease holder: {who})", SLOTS[slot]), slot)
            }
        }
    }

    /// Starts what `kill_acting` killed: a new process (a standby under election).
    pub fn restart(&mut self, cluster: &SimCluster, slot: usize) {
        let env = Env::of(cluster);
        match self {
            Replicas::Single(task) => *task = spawn_controller(&env),
            Replicas::Elected {
                replicas,
                incarnations,
            } => {
                let slot = slot % 2;
                replicas[slot] = spawn_replica(env, SLOTS[slot], incarnations.clone());
            }
        }
    }

    pub fn abort(&mut self) {
        match self {
            Replicas::Single(task) => task.abort(),
            Replicas::Elected { replicas, .. } => replicas.iter().for_each(JoinHandle::abort),
        }
    }
}
