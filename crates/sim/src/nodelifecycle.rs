//! What kube-controller-manager does about nodes that stop heartbeating, for the embedded cluster (a real cluster
//! runs KCM): the node lifecycle controller, its NoExecute taint eviction, and PodGC's orphan collection.
//!
//! Reproduced behaviour (`pkg/controller/nodelifecycle`, `pkg/controller/tainteviction`, `pkg/controller/podgc`):
//! - every `--node-monitor-period` (5 s) each node's health is probed: the last time *this controller saw* its
//!   Lease `renewTime` or its Ready `lastHeartbeatTime` change (local observation, no trust in the kubelet's
//!   clock). Past `--node-monitor-grace-period` (50 s since Kubernetes 1.32, 40 s before) without a change, the
//!   Ready, MemoryPressure, DiskPressure and PIDPressure conditions become `Unknown` (reason
//!   `NodeStatusUnknown`, "Kubelet stopped posting node status."), and when Ready leaves True every pod on the
//!   node gets its Ready condition set to False (`MarkPodsNotReady`; the kubelet sets it back when it returns);
//! - a node whose Ready is Unknown is tainted `node.kubernetes.io/unreachable` with effects NoSchedule and
//!   NoExecute (`not-ready` when Ready is False), with `timeAdded`; the taints go when Ready is True again. In a
//!   zone where every node is not ready ("full disruption") no NoExecute taint is kept: KCM assumes its own
//!   connectivity failed and stops evicting;
//! - the taint eviction controller deletes each pod on a NoExecute-tainted node once its tolerations run out:
//!   at once without a matching toleration, after the smallest matching `tolerationSeconds` (the 300 s that
//!   the DefaultTolerationSeconds admission adds to every pod) counted from the taint's `timeAdded`, never with
//!   a matching toleration without seconds. Before deleting it adds the `DisruptionTarget` condition (reason
//!   `DeletionByTaintManager`); the deletion is graceful, so on a lost node the pod stays Terminating until its
//!   kubelet is back (or its Node is deleted);
//! - PodGC force-deletes (grace 0) pods bound to a node that no longer exists, after a 40 s quarantine
//!   (`DisruptionTarget` reason `DeletionByPodGC`), every 20 s.
//!
//! Rate limits on eviction (`--node-eviction-rate` 0.1 nodes/s, the secondary rate in unhealthy zones of large
//! clusters) only space out evictions across nodes; a sim of a few nodes has one zone and is never "large".
//! Its client is the fault-free one: the fault injector tests the controller, not KCM.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, PodCondition, Taint};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};

use crate::Clock;
use crate::boundpod::BoundPod;
use crate::kubelet::LEASE_NAMESPACE;
use crate::kubelet::status::to_time;

/// `--node-monitor-period`.
pub const MONITOR_PERIOD: Duration = Duration::from_secs(5);
/// `--node-monitor-grace-period` (Kubernetes ≥ 1.32).
pub const GRACE_PERIOD: Duration = Duration::from_secs(50);
/// PodGC's quarantine before deleting a pod of a missing node, and its check period.
pub const PODGC_QUARANTINE: Duration = Duration::from_secs(40);
const PODGC_PERIOD: u32 = 4;

pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Reasons of the `DisruptionTarget` condition the eviction paths add before deleting.
pub const BY_TAINT_MANAGER: &str = "DeletionByTaintManager";
pub const BY_POD_GC: &str = "DeletionByPodGC";

/// What the controller last saw of a node's heartbeat, and when it saw it change.
struct Probe {
    record: (Option<Timestamp>, Option<Timestamp>),
    at: Timestamp,
}

#[derive(Default)]
struct Controller {
    probes: BTreeMap<String, Probe>,
    /// Pods bound to a missing node, and since when.
    orphans: BTreeMap<String, Timestamp>,
    /// Nodes seen Ready at the last pass.
    was_ready: BTreeSet<String>,
    /// Nodes whose pods are still to be marked NotReady (a failed write is retried next pass).
    to_mark: BTreeSet<String>,
    ticks: u32,
}

fn ready_status(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn since(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or(Duration::ZERO)
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// Runs until dropped.
pub async fn run(client: Client, clock: Arc<dyn Clock>) {
    let mut c = Controller::default();
    loop {
        clock.sleep(MONITOR_PERIOD).await;
        if let Err(e) = c.tick(&client, clock.as_ref()).await {
            tracing::debug!(error = %e, "node lifecycle pass failed; retrying next period");
        }
    }
}

impl Controller {
    async fn tick(&mut self, client: &Client, clock: &dyn Clock) -> Result<(), kube::Error> {
        let nodes_api: Api<Node> = Api::all(client.clone());
        let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
        let nodes = nodes_api.list(&ListParams::default()).await?.items;
        let renewals: BTreeMap<String, Option<Timestamp>> = leases
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|l| (name(&l.metadata), l.spec.and_then(|s| s.renew_time).map(|t| t.0)))
            .collect();
        let now = clock.now();
        let names: BTreeSet<String> = nodes.iter().map(|n| name(&n.metadata)).collect();
        self.probes.retain(|n, _| names.contains(n));
        let mut ready = BTreeMap::new();
        let mut nodes = nodes;
        for node in &mut nodes {
            let n = name(&node.metadata);
            let record = (heartbeat(node), renewals.get(&n).copied().flatten());
            let probe = self.probes.entry(n.clone()).or_insert(Probe { record, at: now });
            if probe.record != record {
                *probe = Probe { record, at: now };
            }
            let mut status = ready_status(node);
            if since(now, probe.at) > GRACE_PERIOD && status.as_deref() != Some("Unknown") {
                match mark_unknown(&nodes_api, node, now).await {
                    Ok(updated) => {
                        *node = updated;
                        status = Some("Unknown".into());
                    }
                    Err(e) => tracing::debug!(node = %n, error = %e, "node not marked Unknown"),
                }
            }
            ready.insert(n, status.unwrap_or_else(|| "Unknown".into()));
        }
        // Full disruption: every node of the (single) zone not ready.
        let full_disruption = !ready.is_empty() && ready.values().all(|s| s != "True");
        for node in &nodes {
            let n = name(&node.metadata);
            let status = ready.get(&n).map_or("Unknown", String::as_str);
            let taints = self.taint(&nodes_api, node, status, full_disruption, now).await;
            // Pods are marked on Ready's transition away from True only (the kubelet owns them afterwards).
            if status == "True" {
                self.was_ready.insert(n.clone());
                self.to_mark.remove(&n);
                continue;
            }
            if self.was_ready.remove(&n) {
                self.to_mark.insert(n.clone());
            }
            if !self.to_mark.contains(&n) && taints.is_empty() {
                continue;
            }
            let pods = pods_on(client, &n).await?;
            if self.to_mark.contains(&n) && mark_pods_not_ready(client, &pods, now).await {
                self.to_mark.remove(&n);
            }
            evict(client, &pods, &taints, now).await;
        }
        self.ticks += 1;
        if self.ticks.is_multiple_of(PODGC_PERIOD) {
            self.collect_orphans(client, &names, now).await?;
        }
        Ok(())
    }

    /// Puts the taints a node's Ready status calls for; returns its NoExecute taints.
    async fn taint(
        &self,
        nodes: &Api<Node>,
        node: &Node,
        ready: &str,
        full_disruption: bool,
        now: Timestamp,
    ) -> Vec<Taint> {
        let key = match ready {
            "True" => None,
            "False" => Some(NOT_READY),
            _ => Some(UNREACHABLE),
        };
        let current = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let mut want: Vec<Taint> = current
            .iter()
            .filter(|t| t.key != UNREACHABLE && t.key != NOT_READY)
            .cloned()
            .collect();
        if let Some(key) = key {
            for effect in ["NoSchedule", "NoExecute"] {
                if effect == "NoExecute" && full_disruption {
                    continue;
                }
                let kept = current.iter().find(|t| t.key == key && t.effect == effect);
                want.push(kept.cloned().unwrap_or_else(|| Taint {
                    key: key.into(),
                    effect: effect.into(),
                    time_added: Some(to_time(now)),
                    value: None,
                }));
            }
        }
        if want != current {
            let mut changed = node.clone();
            changed.spec.get_or_insert_with(Default::default).taints =
                (!want.is_empty()).then(|| want.clone());
            if let Err(e) = nodes
                .replace(&name(&node.metadata), &PostParams::default(), &changed)
                .await
            {
                tracing::debug!(node = %name(&node.metadata), error = %e, "node taints not updated");
                return current.into_iter().filter(|t| t.effect == "NoExecute").collect();
            }
        }
        want.into_iter().filter(|t| t.effect == "NoExecute").collect()
    }

    async fn collect_orphans(
        &mut self,
        client: &Client,
        nodes: &BTreeSet<String>,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        // PodGC reads node names only (kube-controller-manager's reads its informer): each bound pod decoded
        // whole was a transient ~17 KB, 1.7 GB at 100k pods every 20 s. A pod due for deletion is read whole.
        let bound = Api::<BoundPod>::all(client.clone())
            .list(&ListParams::default().fields("spec.nodeName!="))
            .await?
            .items;
        let mut seen = BTreeMap::new();
        for pod in bound {
            let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
            if nodes.contains(&node) {
                continue;
            }
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let key = format!("{ns}/{}", name(&pod.metadata));
            let first = self.orphans.get(&key).copied().unwrap_or(now);
            seen.insert(key, first);
            if since(now, first) >= PODGC_QUARANTINE {
                let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                match api.get_opt(&name(&pod.metadata)).await {
                    Ok(Some(whole)) if whole.metadata.uid == pod.metadata.uid => {
                        let message = "PodGC: node no longer exists";
                        delete_with_condition(client, &whole, BY_POD_GC, message, Some(0), now).await;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(pod = %name(&pod.metadata), error = %e, "orphan not read; next period")
                    }
                }
            }
        }
        self.orphans = seen;
        Ok(())
    }
}

/// The Ready condition's `lastHeartbeatTime`.
fn heartbeat(node: &Node) -> Option<Timestamp> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_heartbeat_time
        .as_ref()
        .map(|t| t.0)
}

/// Ready and the pressure conditions to Unknown, keeping `lastHeartbeatTime` (KCM's `tryUpdateNodeHealth`).
async fn mark_unknown(nodes: &Api<Node>, node: &Node, now: Timestamp) -> Result<Node, kube::Error> {
    let mut node = node.clone();
    let status = node.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    for t in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        let unknown = NodeCondition {
            type_: t.into(),
            status: "Unknown".into(),
            reason: Some("NodeStatusUnknown".into()),
            message: Some("Kubelet stopped posting node status.".into()),
            last_transition_time: Some(to_time(now)),
            last_heartbeat_time: None,
        };
        match conditions.iter_mut().find(|c| c.type_ == t) {
            Some(c) if c.status != "Unknown" => {
                *c = NodeCondition {
                    last_heartbeat_time: c.last_heartbeat_time.clone(),
                    ..unknown
                };
            }
            Some(_) => {}
            None => conditions.push(NodeCondition {
                reason: Some("NodeStatusNeverUpdated".into()),
                ..unknown
            }),
        }
    }
    nodes
        .replace_status(&name(&node.metadata), &PostParams::default(), &node)
        .await
}

async fn pods_on(client: &Client, node: &str) -> Result<Vec<Pod>, kube::Error> {
    let pods: Api<Pod> = Api::all(client.clone());
    Ok(pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?
        .items)
}

fn pod_api(client: &Client, pod: &Pod) -> Api<Pod> {
    Api::namespaced(
        client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
    )
}

/// `MarkPodsNotReady`: a pod's Ready condition to False (only an existing one, with a new transition time).
/// `false` if a write failed (retried next pass).
async fn mark_pods_not_ready(client: &Client, pods: &[Pod], now: Timestamp) -> bool {
    let mut done = true;
    for pod in pods {
        let mut pod = pod.clone();
        let Some(ready) = pod
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.iter_mut().find(|c| c.type_ == "Ready"))
        else {
            continue;
        };
        if ready.status == "False" {
            continue;
        }
        ready.status = "False".into();
        ready.last_transition_time = Some(to_time(now));
        if let Err(e) = pod_api(client, &pod)
            .replace_status(&name(&pod.metadata), &PostParams::default(), &pod)
            .await
        {
            tracing::debug!(pod = %name(&pod.metadata), error = %e, "pod not marked NotReady; next period");
            done &= matches!(&e, kube::Error::Api(s) if s.code == 404);
        }
    }
    done
}

/// When a pod tolerating `taints` must go: `None` never, else the instant (the smallest matching
/// `tolerationSeconds` after the taint's `timeAdded`; a taint it does not tolerate at all: at once).
fn eviction_time(pod: &Pod, taints: &[Taint], now: Timestamp) -> Option<Timestamp> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let mut at: Option<Timestamp> = None;
    for taint in taints {
        let matching: Vec<_> = tolerations
            .iter()
            .filter(|t| {
                let key = match t.key.as_deref() {
                    None | Some("") => t.operator.as_deref() == Some("Exists"),
                    Some(k) => k == taint.key,
                };
                let effect = t
                    .effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == taint.effect);
                key && effect
            })
            .collect();
        if matching.is_empty() {
            return Some(now);
        }
        if matching.iter().any(|t| t.toleration_seconds.is_none()) {
            continue;
        }
        let secs = matching
            .iter()
            .filter_map(|t| t.toleration_seconds)
            .min()
            .unwrap_or(0)
            .max(0);
        let added = taint.time_added.as_ref().map_or(now, |t| t.0);
        let due = added
            .checked_add(SignedDuration::from_secs(secs))
            .unwrap_or(added);
        at = Some(at.map_or(due, |a| a.min(due)));
    }
    at
}

async fn evict(client: &Client, pods: &[Pod], taints: &[Taint], now: Timestamp) {
    if taints.is_empty() {
        return;
    }
    for pod in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        if eviction_time(pod, taints, now).is_some_and(|at| at <= now) {
            let message = "Taint manager: deleting due to NoExecute taint";
            delete_with_condition(client, pod, BY_TAINT_MANAGER, message, None, now).await;
        }
    }
}

/// `AddConditionAndDeletePod`: the `DisruptionTarget` condition, then a delete guarded by the pod's UID.
async fn delete_with_condition(
    client: &Client,
    pod: &Pod,
    reason: &str,
    message: &str,
    grace: Option<i64>,
    now: Timestamp,
) {
    let api = pod_api(client, pod);
    let n = name(&pod.metadata);
    let mut marked = pod.clone();
    let conditions = marked
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    if !conditions.iter().any(|c| c.type_ == "DisruptionTarget") {
        conditions.push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_transition_time: Some(to_time(now)),
            ..Default::default()
        });
        if let Err(e) = api.replace_status(&n, &PostParams::default(), &marked).await {
            tracing::debug!(pod = %n, error = %e, "DisruptionTarget not added; next period");
            return;
        }
    }
    let dp = DeleteParams {
        grace_period_seconds: grace.map(|g| g as u32),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&n, &dp).await {
        Ok(_) => tracing::debug!(pod = %n, reason, "evicted"),
        Err(e) => tracing::debug!(pod = %n, error = %e, "eviction failed; next period"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, Toleration};

    fn pod(tolerations: Vec<Toleration>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                tolerations: Some(tolerations),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn taint(key: &str, added: Timestamp) -> Taint {
        Taint {
            key: key.into(),
            effect: "NoExecute".into(),
            time_added: Some(to_time(added)),
            value: None,
        }
    }

    fn tol(key: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: secs,
            value: None,
        }
    }

    #[test]
    fn eviction_follows_the_smallest_toleration() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let now = Timestamp::from_second(1_010).unwrap();
        let taints = [taint(UNREACHABLE, t0)];
        // DefaultTolerationSeconds: 300 s after the taint.
        let p = pod(vec![tol(NOT_READY, Some(300)), tol(UNREACHABLE, Some(300))]);
        assert_eq!(
            eviction_time(&p, &taints, now),
            Some(Timestamp::from_second(1_300).unwrap())
        );
        let p = pod(vec![tol(UNREACHABLE, Some(300)), tol(UNREACHABLE, Some(20))]);
        assert_eq!(
            eviction_time(&p, &taints, now),
            Some(Timestamp::from_second(1_020).unwrap())
        );
        // Without a matching toleration: at once; with one without seconds: never.
        assert_eq!(
            eviction_time(&pod(vec![tol(NOT_READY, Some(5))]), &taints, now),
            Some(now)
        );
        assert_eq!(
            eviction_time(&pod(vec![tol(UNREACHABLE, None)]), &taints, now),
            None
        );
    }
}
