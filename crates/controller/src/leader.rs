//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics: only one replica acts.
//!
//! The elector GETs the Lease every `retry_period` and acquires or renews it with a resourceVersion-guarded PUT
//! (create when absent). Another holder's lease counts as expired when its record has not changed for
//! `lease_duration` *as observed locally* (no trust in remote clocks, like client-go). A leader that cannot renew
//! for `renew_deadline` steps down, and no round outlives that deadline (client-go runs its renewals under a
//! `RenewDeadline` context): a leader cut off from the apiserver, its requests hanging, stops leading before the
//! standby's `lease_duration` runs out, so two replicas never act at once. Leadership is published on a
//! [`watch`] channel; once lost it is never regained by the same elector (the process is expected to exit and
//! restart as a standby). Timestamps written (`acquireTime`, `renewTime`) come from the injected [`Clock`], so a
//! simulated run writes the same Lease every time.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::clock::{Clock, SystemClock};

/// Where and how to elect.
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity (`holderIdentity`); unique per process.
    pub identity: String,
    /// How long a non-renewed lease blocks other candidates (client-go default 15 s).
    pub lease_duration: Duration,
    /// A leader that has not renewed for this long steps down (client-go default 10 s).
    pub renew_deadline: Duration,
    /// Interval between acquire/renew attempts (client-go default 2 s).
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// client-go's default timings.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// A running elector. Dropping it aborts the loop without releasing the lease.
pub struct LeaderElector {
    rx: watch::Receiver<bool>,
    /// Whether the last acquire/renew round reached the apiserver (for a standby's readiness).
    ok_rx: watch::Receiver<bool>,
    task: JoinHandle<()>,
    api: Api<Lease>,
    config: LeaderElectionConfig,
    clock: Arc<dyn Clock>,
}

impl LeaderElector {
    /// Starts electing in the background, stamping the Lease with the wall clock.
    pub fn spawn(client: kube::Client, config: LeaderElectionConfig) -> Self {
        Self::spawn_with_clock(client, config, Arc::new(SystemClock))
    }

    /// As [`LeaderElector::spawn`], with the Lease's timestamps from `clock`.
    pub fn spawn_with_clock(
        client: kube::Client,
        config: LeaderElectionConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        let (tx, rx) = watch::channel(false);
        let (ok_tx, ok_rx) = watch::channel(true);
        let task = tokio::spawn(elect(api.clone(), config.clone(), clock.clone(), tx, ok_tx));
        Self {
            rx,
            ok_rx,
            task,
            api,
            config,
            clock,
        }
    }

    /// `true` while this replica holds the lease.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }

    /// `true` while the last Lease round (GET and acquire/renew) succeeded, lost races included.
    pub fn rounds_ok(&self) -> watch::Receiver<bool> {
        self.ok_rx.clone()
    }

    /// Stops electing and, if this replica still holds the lease, hands it back (empty holder, 1 s duration)
    /// so a standby takes over at its next retry instead of waiting for expiry.
    pub async fn release(self) {
        self.task.abort();
        let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(self.clock.now()));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.config.name, "released leader lease"),
            Err(e) => tracing::warn!(error = %e, "could not release leader lease"),
        }
    }
}

impl Drop for LeaderElector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What this elector last saw of the lease record, and when (local monotonic time).
struct Observed {
    record: (Option<String>, Option<MicroTime>, Option<i32>),
    at: Instant,
}

async fn elect(
    api: Api<Lease>,
    config: LeaderElectionConfig,
    clock: Arc<dyn Clock>,
    tx: watch::Sender<bool>,
    ok_tx: watch::Sender<bool>,
) {
    let mut observed: Option<Observed> = None;
    // When the last successful renewal *started*: the standby cannot have seen the lease change before then, so
    // its `lease_duration` ends after this + `renew_deadline`, the latest a leader steps down.
    let mut last_renew: Option<Instant> = None;
    loop {
        let started = Instant::now();
        let leading = *tx.borrow();
        let attempt = try_acquire_or_renew(&api, &config, clock.now(), &mut observed);
        let round = if leading {
            let left = last_renew.map_or(Duration::ZERO, |t| {
                config.renew_deadline.saturating_sub(t.elapsed())
            });
            tokio::time::timeout(left, attempt).await.ok()
        } else {
            Some(attempt.await)
        };
        let Some(round) = round else {
            ok_tx.send_replace(false);
            tracing::error!(identity = %config.identity, "leader lease renewal did not finish before the renew deadline");
            tx.send_replace(false);
            return;
        };
        ok_tx.send_if_modified(|ok| {
            let now_ok = round.is_ok() || round.as_ref().is_err_and(is_conflict);
            std::mem::replace(ok, now_ok) != now_ok
        });
        match round {
            Ok(true) => {
                last_renew = Some(started);
                if !leading {
                    tracing::info!(identity = %config.identity, lease = %config.name, "became leader");
                    tx.send_replace(true);
                }
            }
            Ok(false) if leading => {
                tracing::error!(identity = %config.identity, "leader lease taken by another replica");
                tx.send_replace(false);
                return;
            }
            Ok(false) => {}
            Err(e) => {
                if is_conflict(&e) {
                    tracing::debug!(lease = %config.name, "leader lease changed concurrently; retrying");
                } else {
                    tracing::warn!(error = %e, lease = %config.name, "leader election request failed");
                }
                if leading && last_renew.is_none_or(|t| t.elapsed() >= config.renew_deadline) {
                    tracing::error!(identity = %config.identity, "could not renew the leader lease in time");
                    tx.send_replace(false);
                    return;
                }
            }
        }
        if leading {
            // Sleep no later than the deadline: a leader that would wake past it has already lost.
            let left = last_renew.map_or(Duration::ZERO, |t| {
                config.renew_deadline.saturating_sub(t.elapsed())
            });
            if left <= config.retry_period {
                tokio::time::sleep(left).await;
                if last_renew.is_none_or(|t| t.elapsed() >= config.renew_deadline) {
                    tracing::error!(identity = %config.identity, "could not renew the leader lease in time");
                    tx.send_replace(false);
                    return;
                }
                continue;
            }
        }
        tokio::time::sleep(config.retry_period).await;
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// One round: `Ok(true)` = we hold the lease now, `Ok(false)` = someone else does; a 409 (lost race) is an `Err`
/// so that a leader retries until its renew deadline instead of stepping down at once.
async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaderElectionConfig,
    now: Timestamp,
    observed: &mut Option<Observed>,
) -> Result<bool, kube::Error> {
    let now = MicroTime(now);
    let duration_secs = i32::try_from(config.lease_duration.as_secs())
        .unwrap_or(i32::MAX)
        .max(1);
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(duration_secs),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return api.create(&PostParams::default(), &lease).await.map(|_| true);
    };

    let spec = lease.spec.get_or_insert_with(Default::default);
    let record = (
        spec.holder_identity.clone(),
        spec.renew_time.clone(),
        spec.lease_duration_seconds,
    );
    if observed.as_ref().is_none_or(|o| o.record != record) {
        *observed = Some(Observed {
            record,
            at: Instant::now(),
        });
    }
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let ours = holder == config.identity;
    if !holder.is_empty() && !ours {
        let their_duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(duration_secs)).unwrap_or(0),
        );
        let seen_at = observed.as_ref().map_or_else(Instant::now, |o| o.at);
        if seen_at.elapsed() < their_duration {
            return Ok(false);
        }
        tracing::info!(previous = %holder, "leader lease expired; taking over");
    }
    if !ours {
        // client-go's `tryAcquireOrRenew` counts every acquisition of an existing lease by a non-leader, a
        // released one (empty holder) included.
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec.holder_identity = Some(config.identity.clone());
    spec.lease_duration_seconds = Some(duration_secs);
    spec.renew_time = Some(now);
    // `lease.metadata.resourceVersion` is the one we read: a concurrent writer makes this a 409.
    api.replace(&config.name, &PostParams::default(), &lease)
        .await
        .map(|_| true)
}
