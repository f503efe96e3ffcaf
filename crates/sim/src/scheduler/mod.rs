//! Scheduler: binds pending pods to the node with the fewest pods through `pods/binding`, via the API only.
//!
//! A pod whose PersistentVolumeClaims are missing, being deleted or not bound yet stays pending, as the real
//! scheduler's VolumeBinding plugin keeps it (no node is even considered).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Binding, Node, ObjectReference, PersistentVolumeClaim, Pod, PodCondition, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::Clock;
use crate::boundpod::BoundPod;
use crate::kubelet::events::{EventDrops, EventSink, Regarding};
use crate::kubelet::status::to_time;

mod informer;
use informer::Feeds;
pub use informer::run;

/// Scheduler configuration.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// Pods whose `spec.schedulerName` is this (or unset) are scheduled.
    pub scheduler_name: String,
    /// Label selector restricting candidate nodes (`None`: every node).
    pub node_selector: Option<String>,
    /// Record `Scheduled` / `FailedScheduling` events.
    pub events: bool,
    /// Counts the Events dropped on a full queue (shared with the cluster).
    pub event_drops: EventDrops,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            scheduler_name: "default-scheduler".into(),
            node_selector: None,
            events: true,
            event_drops: EventDrops::default(),
        }
    }
}

#[derive(Clone, Debug)]
struct NodeInfo {
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    ready: bool,
    unschedulable: bool,
    max_pods: usize,
}

impl NodeInfo {
    fn from(node: &Node) -> Self {
        let status = node.status.clone().unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let max_pods = status
            .allocatable
            .as_ref()
            .and_then(|a| a.get("pods"))
            .and_then(|q| q.0.parse::<usize>().ok())
            .unwrap_or(110);
        let spec = node.spec.clone().unwrap_or_default();
        Self {
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: spec.taints.unwrap_or_default(),
            ready,
            unschedulable: spec.unschedulable == Some(true),
            max_pods,
        }
    }
}

/// Why a node does not fit a pod (the scheduler's per-node filter reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Misfit {
    Selector,
    Unschedulable,
    NotReady,
    Taint,
    TooManyPods,
}

impl Misfit {
    fn text(self) -> &'static str {
        match self {
            Misfit::Selector => "node(s) didn't match Pod's node affinity/selector",
            Misfit::Unschedulable => "node(s) were unschedulable",
            Misfit::NotReady => "node(s) had untolerated taint {node.kubernetes.io/not-ready: }",
            Misfit::Taint => "node(s) had untolerated taint(s)",
            Misfit::TooManyPods => "Too many pods",
        }
    }
}

fn tolerates(pod: &Pod, taint: &Taint) -> bool {
    if taint.effect == "PreferNoSchedule" {
        return true;
    }
    pod.spec
        .iter()
        .flat_map(|s| s.tolerations.iter().flatten())
        .any(|t| {
            let key_ok = match t.key.as_deref() {
                None | Some("") => t.operator.as_deref() == Some("Exists"),
                Some(k) => k == taint.key,
            };
            let value_ok = t.operator.as_deref() == Some("Exists")
                || t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("");
            let effect_ok = t
                .effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == taint.effect);
            key_ok && value_ok && effect_ok
        })
}

fn fits(pod: &Pod, node: &NodeInfo, count: usize) -> Result<(), Misfit> {
    let selector = pod.spec.as_ref().and_then(|s| s.node_selector.as_ref());
    if selector.is_some_and(|sel| sel.iter().any(|(k, v)| node.labels.get(k) != Some(v))) {
        return Err(Misfit::Selector);
    }
    if node.unschedulable {
        return Err(Misfit::Unschedulable);
    }
    if !node.ready {
        return Err(Misfit::NotReady);
    }
    if node
        .taints
        .iter()
        .any(|t| (t.effect == "NoSchedule" || t.effect == "NoExecute") && !tolerates(pod, t))
    {
        return Err(Misfit::Taint);
    }
    if count >= node.max_pods {
        return Err(Misfit::TooManyPods);
    }
    Ok(())
}

/// Picks the feasible node with the fewest pods (ties: name order), or explains why none fits.
fn pick<'a>(
    pod: &Pod,
    nodes: &'a BTreeMap<String, NodeInfo>,
    counts: &HashMap<String, usize>,
) -> Result<&'a str, String> {
    let mut best: Option<(usize, &str)> = None;
    let mut misfits: BTreeMap<Misfit, usize> = BTreeMap::new();
    for (name, info) in nodes {
        let count = counts.get(name).copied().unwrap_or(0);
        match fits(pod, info, count) {
            Ok(()) if best.is_none_or(|(c, _)| count < c) => best = Some((count, name)),
            Ok(()) => {}
            Err(m) => *misfits.entry(m).or_default() += 1,
        }
    }
    if let Some((_, name)) = best {
        return Ok(name);
    }
    let n = nodes.len();
    let reasons: Vec<String> = misfits.iter().map(|(m, c)| format!("{c} {}", m.text())).collect();
    let detail = if reasons.is_empty() {
        String::new()
    } else {
        format!(" {}.", reasons.join(", "))
    };
    Err(format!(
        "0/{n} nodes are available:{detail} preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
    ))
}

/// What the scheduler knows of a PersistentVolumeClaim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Claim {
    deleting: bool,
    bound: bool,
}

impl Claim {
    fn from(pvc: &PersistentVolumeClaim) -> Self {
        Self {
            deleting: pvc.metadata.deletion_timestamp.is_some(),
            bound: pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"),
        }
    }
}

/// k8s VolumeBinding PreFilter: every `persistentVolumeClaim` volume of the pod names an existing claim that is
/// not being deleted and is bound (the sim provisions Immediate volumes only). `claims` is keyed `ns/name`.
fn claims_ready(pod: &Pod, claims: &HashMap<String, Claim>) -> Result<(), String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let mut unbound = false;
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(c) = &v.persistent_volume_claim else {
            continue;
        };
        match claims.get(&format!("{ns}/{}", c.claim_name)) {
            None => return Err(format!("persistentvolumeclaim \"{}\" not found", c.claim_name)),
            Some(cl) if cl.deleting => {
                return Err(format!(
                    "persistentvolumeclaim \"{}\" is being deleted",
                    c.claim_name
                ));
            }
            Some(cl) => unbound |= !cl.bound,
        }
    }
    if unbound {
        return Err("pod has unbound immediate PersistentVolumeClaims".into());
    }
    Ok(())
}

/// The scheduler's message when a pre-filter rejects the pod before any node is looked at.
fn prefilter_message(reason: &str, nodes: usize) -> String {
    format!(
        "0/{nodes} nodes are available: {reason}. preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
    )
}

fn key_of(pod: &Pod) -> String {
    meta_key(&pod.metadata)
}

fn meta_key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

struct Scheduler {
    client: Client,
    clock: Arc<dyn Clock>,
    config: SchedulerConfig,
    nodes: BTreeMap<String, NodeInfo>,
    assigned: HashMap<String, String>,
    counts: HashMap<String, usize>,
    /// Boxed: a map keeps its capacity after the pods are bound, and 100k pods inline kept ~320 MB of table.
    pending: HashMap<String, (u64, Box<Pod>)>,
    order: BTreeMap<u64, String>,
    seq: u64,
    reported: HashMap<String, String>,
    events: Option<EventSink>,
    /// PersistentVolumeClaims by `ns/name`.
    claims: HashMap<String, Claim>,
    /// What the informers have delivered and not yet applied, and their relist state.
    feeds: Feeds,
}

impl Scheduler {
    fn wants(&self, pod: &Pod) -> bool {
        let spec = pod.spec.as_ref();
        let name = spec
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler");
        name == self.config.scheduler_name
            && pod.metadata.deletion_timestamp.is_none()
            && spec.and_then(|s| s.node_name.as_deref()).unwrap_or("").is_empty()
            && !matches!(
                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
            && spec
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_none_or(|g| g.is_empty())
    }

    fn set_pending(&mut self, pod: Pod) {
        let key = key_of(&pod);
        if !self.wants(&pod) {
            self.drop_pending(&key);
            return;
        }
        match self.pending.get_mut(&key) {
            Some((_, p)) => **p = pod,
            None => {
                self.seq += 1;
                self.order.insert(self.seq, key.clone());
                self.pending.insert(key, (self.seq, Box::new(pod)));
            }
        }
    }

    fn drop_pending(&mut self, key: &str) {
        if let Some((seq, _)) = self.pending.remove(key) {
            self.order.remove(&seq);
        }
        self.reported.remove(key);
    }

    fn set_assigned(&mut self, key: String, node: Option<String>) {
        let old = match node {
            Some(n) => {
                *self.counts.entry(n.clone()).or_default() += 1;
                self.assigned.insert(key, n)
            }
            None => self.assigned.remove(&key),
        };
        if let Some(old) = old
            && let Some(c) = self.counts.get_mut(&old)
        {
            *c = c.saturating_sub(1);
        }
    }

    /// Tries every pending pod in arrival order; returns true if a transient failure asks for a retry.
    async fn schedule_all(&mut self) -> bool {
        let keys: Vec<String> = self.order.values().cloned().collect();
        for key in keys {
            let Some((_, pod)) = self.pending.get(&key).cloned() else {
                continue;
            };
            if let Err(reason) = claims_ready(&pod, &self.claims) {
                let msg = prefilter_message(&reason, self.nodes.len());
                self.report_unschedulable(&key, &pod, msg).await;
                continue;
            }
            let node = match pick(&pod, &self.nodes, &self.counts) {
                Ok(n) => n.to_string(),
                Err(msg) => {
                    self.report_unschedulable(&key, &pod, msg).await;
                    continue;
                }
            };
            let bound = self.bind(&pod, &node).await;
            // Apply what the informers delivered while the binding was in flight: on a one-threaded cluster a
            // turn over 100,000 pending pods lasts long enough for a watch to fall behind otherwise.
            self.drain_feeds();
            match bound {
                Ok(()) => {
                    self.drop_pending(&key);
                    self.set_assigned(key, Some(node.clone()));
                    self.event(
                        &pod,
                        false,
                        "Scheduled",
                        format!("Successfully assigned {} to {node}", key_of(&pod)),
                    );
                }
                // Gone: nothing to schedule. A 409 is not: kube-apiserver answers Conflict both for a pod
                // already assigned (the watch then shows its nodeName and drops it from the queue) and for a
                // write that lost a race or was refused under load; kube-scheduler requeues the pod on any
                // binding error (`handleBindingCycleError`), so it is retried like a 5xx.
                Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 404) => {
                    self.drop_pending(&key);
                }
                Err(e) => {
                    tracing::debug!(pod = %key, error = %e, "binding failed; will retry");
                    return true;
                }
            }
        }
        false
    }

    async fn bind(&self, pod: &Pod, node: &str) -> Result<(), kube::Error> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(ns.to_string()),
                uid: pod.metadata.uid.clone(),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.to_string()),
                ..Default::default()
            },
        };
        api.create_subresource::<_, serde_json::Value>("binding", name, &PostParams::default(), &binding)
            .await
            .map(|_| ())
    }

    async fn report_unschedulable(&mut self, key: &str, pod: &Pod, msg: String) {
        if self.reported.get(key) == Some(&msg) {
            return;
        }
        self.reported.insert(key.to_string(), msg.clone());
        self.event(pod, true, "FailedScheduling", msg.clone());
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        for _ in 0..3 {
            let Ok(Some(mut current)) = api.get_opt(&name).await else {
                return;
            };
            if current.metadata.uid != pod.metadata.uid {
                return;
            }
            let status = current.status.get_or_insert_with(Default::default);
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            let cond = PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some(msg.clone()),
                last_transition_time: Some(to_time(self.clock.now())),
                observed_generation: current.metadata.generation,
                last_probe_time: None,
            };
            match conditions.iter_mut().find(|c| c.type_ == "PodScheduled") {
                Some(c) if c.status == "False" => {
                    c.reason = cond.reason;
                    c.message = cond.message;
                }
                Some(c) => *c = cond,
                None => conditions.push(cond),
            }
            status.phase.get_or_insert_with(|| "Pending".into());
            match api.replace_status(&name, &PostParams::default(), &current).await {
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                _ => return,
            }
        }
    }

    fn event(&self, pod: &Pod, warning: bool, reason: &'static str, message: String) {
        if let Some(sink) = &self.events {
            let reg = Arc::new(Regarding {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
            });
            sink.record(self.clock.now(), &reg, None, warning, reason, message, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, Toleration};

    fn node(ready: bool) -> NodeInfo {
        NodeInfo {
            labels: BTreeMap::new(),
            taints: vec![],
            ready,
            unschedulable: false,
            max_pods: 2,
        }
    }

    #[test]
    fn fewest_pods_then_name() {
        let nodes: BTreeMap<String, NodeInfo> = [
            ("b".to_string(), node(true)),
            ("a".to_string(), node(true)),
            ("c".to_string(), node(false)),
        ]
        .into();
        let pod = Pod::default();
        let mut counts = HashMap::new();
        assert_eq!(pick(&pod, &nodes, &counts), Ok("a"));
        counts.insert("a".to_string(), 1);
        assert_eq!(pick(&pod, &nodes, &counts), Ok("b"));
        counts.insert("a".to_string(), 2);
        counts.insert("b".to_string(), 2);
        let err = pick(&pod, &nodes, &counts).err().unwrap_or_default();
        assert!(err.starts_with("0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 2 Too many pods."), "{err}");
    }

    #[test]
    fn claims_must_exist_and_be_bound() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "d"},
            "spec": {"containers": [], "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-p"}},
                {"name": "tmp", "emptyDir": {}}
            ]}
        }))
        .unwrap_or_default();
        let mut claims = HashMap::new();
        assert_eq!(
            claims_ready(&pod, &claims),
            Err("persistentvolumeclaim \"data-p\" not found".into())
        );
        let mut c = Claim {
            deleting: false,
            bound: false,
        };
        claims.insert("d/data-p".to_string(), c);
        assert_eq!(
            claims_ready(&pod, &claims),
            Err("pod has unbound immediate PersistentVolumeClaims".into())
        );
        c.bound = true;
        claims.insert("d/data-p".to_string(), c);
        assert_eq!(claims_ready(&pod, &claims), Ok(()));
        c.deleting = true;
        claims.insert("d/data-p".to_string(), c);
        assert_eq!(
            claims_ready(&pod, &claims),
            Err("persistentvolumeclaim \"data-p\" is being deleted".into())
        );
        assert!(claims_ready(&Pod::default(), &HashMap::new()).is_ok());
    }

    #[test]
    fn taints_and_selectors() {
        let mut n = node(true);
        n.taints = vec![Taint {
            key: "dedicated".into(),
            effect: "NoSchedule".into(),
            value: Some("x".into()),
            ..Default::default()
        }];
        let mut pod = Pod::default();
        assert_eq!(fits(&pod, &n, 0), Err(Misfit::Taint));
        pod.spec = Some(PodSpec {
            tolerations: Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }]),
            node_selector: Some([("zone".to_string(), "z1".to_string())].into()),
            ..Default::default()
        });
        assert_eq!(fits(&pod, &n, 0), Err(Misfit::Selector));
        n.labels.insert("zone".into(), "z1".into());
        assert_eq!(fits(&pod, &n, 0), Ok(()));
    }
}
