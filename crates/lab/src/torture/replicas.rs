//! The controller under torture: one process, or two replicas electing a leader on a Lease (`insitu run
//! --leader-elect`), where a crash kills the holder and the standby takes over after the lease expires.
//!
//! Each replica talks through its own named client (`replica-a`, `replica-b`: its pod's network), so the sim can
//! partition the lease holder from the apiserver while it keeps running, and log which replica's writes the
//! apiserver accepted: [`leadership_violations`] checks that none came from a replica not holding the Lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use insitu_controller::leader::{LeaderElectionConfig, LeaderElector};
use insitu_controller::{Config, Metrics};
use insitu_sim::apiserver::{AcceptedWrite, Partition};
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

    /// The environment of replica `slot`: its own named client.
    fn replica(cluster: &SimCluster, slot: &str) -> Self {
        Env {
            client: cluster.apiserver.client_as(&client_name(slot)),
            clock: cluster.clock.clone(),
        }
    }
}

/// The client (network) name of replica `slot`.
pub fn client_name(slot: &str) -> String {
    format!("replica-{slot}")
}

fn spawn_controller(env: &Env) -> JoinHandle<()> {
    let clock = Arc::new(crate::simtime::SharedClock(env.clock.clone()));
    tokio::spawn(insitu_controller::run(
        env.client.clone(),
        Config {
            shutdown_timeout: Duration::from_secs(5),
            // Replayable: no blocking-pool thread racing the runtime (see the field).
            plan_on_blocking_pool: false,
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
            let elector = LeaderElector::spawn_with_clock(
                env.client.clone(),
                LeaderElectionConfig::new("default", LEASE, format!("replica-{slot}-{n}")),
                Arc::new(crate::simtime::SharedClock(env.clock.clone())),
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
        if !leader_election {
            return Replicas::Single(spawn_controller(&Env::of(cluster)));
        }
        let incarnations = Arc::new(AtomicU64::new(0));
        Replicas::Elected {
            replicas: SLOTS
                .map(|slot| spawn_replica(Env::replica(cluster, slot), slot, incarnations.clone())),
            incarnations,
        }
    }

    /// Partitions the Lease holder from the apiserver (it keeps running); returns its client name to heal, or
    /// `None` without election or holder.
    pub async fn partition_holder(
        &self,
        cluster: &SimCluster,
        oracle: &kube::Client,
        how: Partition,
    ) -> Option<String> {
        if matches!(self, Replicas::Single(_)) {
            return None;
        }
        let holder = holder(oracle).await?;
        let slot = SLOTS
            .iter()
            .find(|s| holder.starts_with(&format!("replica-{s}-")))?;
        let name = client_name(slot);
        cluster.apiserver.partition(&name, how);
        Some(name)
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
                let holder = holder(oracle).await.unwrap_or_default();
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
        match self {
            Replicas::Single(task) => *task = spawn_controller(&Env::of(cluster)),
            Replicas::Elected {
                replicas,
                incarnations,
            } => {
                let slot = slot % 2;
                let env = Env::replica(cluster, SLOTS[slot]);
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

async fn holder(oracle: &kube::Client) -> Option<String> {
    Api::<Lease>::namespaced(oracle.clone(), "default")
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Writes the apiserver accepted from a replica that did not hold the Lease then, in the order applied. Every
/// accepted Lease write of a replica makes it the holder (acquire and renew both write its identity, guarded by
/// resourceVersion); any other accepted write must come from the holder of that moment.
pub fn leadership_violations(writes: &[AcceptedWrite]) -> Vec<String> {
    let mut holder: Option<&str> = None;
    let mut out = Vec::new();
    for (i, w) in writes.iter().enumerate() {
        // Events are notes, not acts: the Event writer drains its queue after the controller task is aborted
        // (`insitu run` exits on a lost lease, which drops the queue with the process).
        if !w.client.starts_with("replica-") || w.resource == "events" {
            continue;
        }
        // The replicas write one Lease only (a create names it in its body, not its path).
        if w.resource == "leases.coordination.k8s.io" {
            holder = Some(&w.client);
            continue;
        }
        if holder != Some(w.client.as_str()) {
            out.push(format!(
                "write #{i} {} {} {:?} accepted from {} while the lease holder was {}",
                w.verb,
                w.resource,
                w.name,
                w.client,
                holder.unwrap_or("nobody")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(client: &str, resource: &str, name: &str) -> AcceptedWrite {
        AcceptedWrite {
            client: client.into(),
            verb: "update".into(),
            resource: resource.into(),
            namespace: Some("default".into()),
            name: Some(name.into()),
        }
    }

    #[test]
    fn a_write_from_the_deposed_holder_is_reported() {
        let lease = "leases.coordination.k8s.io";
        let writes = [
            AcceptedWrite {
                verb: "create".into(),
                name: None,
                ..w("replica-a", lease, LEASE)
            },
            w("replica-a", "pods", "p1"),
            w("replica-b", lease, LEASE),
            w("replica-b", "pods", "p1"),
            w("replica-a", "pods", "p2"),
        ];
        let v = leadership_violations(&writes);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("write #4") && v[0].contains("holder was replica-b"),
            "{v:?}"
        );
        // Other clients (the sim's own, the scenario driver) are not replicas.
        assert!(leadership_violations(&[w("kubelet", "pods/status", "p1")]).is_empty());
    }
}
