//! Node registration (Node with Ready condition, addresses, capacity, podCIDR) and Lease/Node-status heartbeats.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

use super::KubeletConfig;
use super::image::hex64;
use super::ipam::Plan;
use super::status::to_time;
use crate::Clock;

/// Namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// Label put on every simulated node.
pub const SIM_NODE_LABEL: &str = "node.insitu.io/simulated";
/// Lease duration the kubelet advertises (its default `nodeLeaseDurationSeconds`).
const LEASE_DURATION_SECONDS: i32 = 40;

/// One simulated node's identity.
#[derive(Clone, Debug)]
pub struct NodeIdentity {
    /// Node name.
    pub name: String,
    /// Index in `0..count`.
    pub index: usize,
    /// InternalIP.
    pub host_ip: String,
    /// `spec.podCIDR`.
    pub pod_cidr: String,
}

/// The identities of all nodes of a config.
pub fn identities(config: &KubeletConfig) -> Vec<NodeIdentity> {
    let plan = Plan::new(config.nodes);
    (0..config.nodes)
        .map(|index| NodeIdentity {
            name: format!("{}{index}", config.node_prefix),
            index,
            host_ip: plan.host_ip(index).to_string(),
            pod_cidr: plan.pod_cidr(index),
        })
        .collect()
}

fn conditions(now: Timestamp, prev: Option<&NodeStatus>) -> Vec<NodeCondition> {
    let spec = [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        (
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ];
    spec.iter()
        .map(|(t, s, r, m)| {
            let old = prev
                .and_then(|p| p.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == *t));
            let transition = old
                .filter(|o| o.status == *s)
                .and_then(|o| o.last_transition_time.clone());
            NodeCondition {
                type_: t.to_string(),
                status: s.to_string(),
                reason: Some(r.to_string()),
                message: Some(m.to_string()),
                last_heartbeat_time: Some(to_time(now)),
                last_transition_time: transition.or_else(|| Some(to_time(now))),
            }
        })
        .collect()
}

fn node_status(
    id: &NodeIdentity,
    config: &KubeletConfig,
    now: Timestamp,
    prev: Option<&NodeStatus>,
) -> NodeStatus {
    let resources: BTreeMap<String, Quantity> = [
        ("cpu", config.capacity.cpu.clone()),
        ("memory", config.capacity.memory.clone()),
        ("pods", config.capacity.pods.to_string()),
        ("ephemeral-storage", "1Ti".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Quantity(v)))
    .collect();
    let uid = hex64(super::image::fnv1a(id.name.as_bytes()));
    NodeStatus {
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: id.host_ip.clone(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: id.name.clone(),
            },
        ]),
        allocatable: Some(resources.clone()),
        capacity: Some(resources),
        conditions: Some(conditions(now, prev)),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port: 10250 }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: "amd64".into(),
            boot_id: uid[..32].to_string(),
            container_runtime_version: "containerd://2.1.0".into(),
            kernel_version: "6.8.0-insitu".into(),
            kube_proxy_version: String::new(),
            kubelet_version: config.kubelet_version.clone(),
            machine_id: uid[32..].to_string(),
            operating_system: "linux".into(),
            os_image: "insitu simulated node".into(),
            system_uuid: uid[..32].to_string(),
            ..Default::default()
        }),
        ..prev.cloned().unwrap_or_default()
    }
}

/// The labels a node registers with (kubelet's well-known labels, the sim's, the configured extras).
pub fn node_labels(id: &NodeIdentity, config: &KubeletConfig) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", id.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
        (SIM_NODE_LABEL, "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    labels.extend(config.node_labels.clone());
    labels
}

fn node_object(id: &NodeIdentity, config: &KubeletConfig, now: Timestamp) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(id.name.clone()),
            labels: Some(node_labels(id, config)),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(id.pod_cidr.clone()),
            pod_cidrs: Some(vec![id.pod_cidr.clone()]),
            ..Default::default()
        }),
        status: Some(node_status(id, config, now, None)),
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Creates (or takes over) every node, drops the `node.kubernetes.io/not-ready` taint the apiserver's admission
/// adds (no node-lifecycle controller runs), publishes the Ready status and creates the leases.
pub async fn register(client: &Client, clock: &dyn Clock, config: &KubeletConfig) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    for id in identities(config) {
        let desired = node_object(&id, config, clock.now());
        let mut node = match nodes.create(&PostParams::default(), &desired).await {
            Ok(n) => n,
            Err(e) if is_conflict(&e) => nodes.get(&id.name).await?,
            Err(e) => return Err(e),
        };
        for _ in 0..5 {
            let mut spec = node.spec.clone().unwrap_or_default();
            let mut changed = false;
            if let Some(taints) = &mut spec.taints {
                let before = taints.len();
                taints.retain(|t| t.key != "node.kubernetes.io/not-ready");
                changed |= taints.len() != before;
            }
            if spec.pod_cidr.is_none() {
                spec.pod_cidr = Some(id.pod_cidr.clone());
                spec.pod_cidrs = Some(vec![id.pod_cidr.clone()]);
                changed = true;
            }
            if changed {
                node.spec = Some(spec);
                match nodes.replace(&id.name, &PostParams::default(), &node).await {
                    Ok(n) => node = n,
                    Err(e) if is_conflict(&e) => {
                        node = nodes.get(&id.name).await?;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            node.status = Some(node_status(&id, config, clock.now(), node.status.as_ref()));
            match nodes
                .replace_status(&id.name, &PostParams::default(), &node)
                .await
            {
                Ok(_) => break,
                Err(e) if is_conflict(&e) => node = nodes.get(&id.name).await?,
                Err(e) => return Err(e),
            }
        }
        if config.heartbeat.is_some() {
            let uid = node.metadata.uid.clone().unwrap_or_default();
            if let Err(e) = renew_lease(client, &id.name, &uid, clock.now(), None).await {
                tracing::warn!(node = %id.name, error = %e, "lease not created");
            }
        }
    }
    Ok(())
}

fn lease_object(node: &str, node_uid: &str, now: Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(LEASE_NAMESPACE.to_string()),
            owner_references: (!node_uid.is_empty()).then(|| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: node.to_string(),
                    uid: node_uid.to_string(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

/// Renews (or creates) a node's lease; `cached` is the last lease we wrote.
async fn renew_lease(
    client: &Client,
    node: &str,
    node_uid: &str,
    now: Timestamp,
    cached: Option<Lease>,
) -> Result<Lease, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let mut lease = match cached {
        Some(l) => l,
        None => match leases.get_opt(node).await? {
            Some(l) => l,
            None => {
                return leases
                    .create(&PostParams::default(), &lease_object(node, node_uid, now))
                    .await;
            }
        },
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.renew_time = Some(MicroTime(now));
    spec.holder_identity = Some(node.to_string());
    spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
    match leases.replace(node, &PostParams::default(), &lease).await {
        Ok(l) => Ok(l),
        Err(e) if is_conflict(&e) || is_not_found(&e) => {
            Box::pin(renew_lease(client, node, node_uid, now, None)).await
        }
        Err(e) => Err(e),
    }
}

/// The kubelet's attempts per heartbeat (`maxUpdateRetries` of its lease controller, `nodeStatusUpdateRetry`
/// of its status updater): one refused request does not make a node miss a beat.
const HEARTBEAT_TRIES: usize = 5;

/// Renews every node's lease each `heartbeat`, and re-posts node status (`lastHeartbeatTime`) each
/// `node_status_interval`, like the kubelet's `nodeStatusReportFrequency`. A lost node (`config.lost`) sends
/// nothing; when it is back it posts its status at its next beat (the kubelet's Ready differs from the
/// `Unknown` the node lifecycle controller wrote, which makes the kubelet post at once). Runs forever.
pub async fn heartbeat_loop(client: Client, clock: Arc<dyn Clock>, config: Arc<KubeletConfig>) {
    let Some(interval) = config.heartbeat else { return };
    let ids = identities(&config);
    let nodes: Api<Node> = Api::all(client.clone());
    let mut leases: HashMap<String, Lease> = HashMap::new();
    let mut since_status = std::time::Duration::ZERO;
    // Nodes that owe a status post (back from a loss, or their last post failed).
    let mut owe_status: std::collections::BTreeSet<String> = Default::default();
    loop {
        clock.sleep(interval).await;
        since_status += interval;
        let post_status = config.node_status_interval.is_some_and(|s| since_status >= s);
        if post_status {
            since_status = std::time::Duration::ZERO;
        }
        for id in &ids {
            if config.lost.is_lost(&id.name) {
                owe_status.insert(id.name.clone());
                continue;
            }
            let now = clock.now();
            for _ in 0..HEARTBEAT_TRIES {
                let cached = leases.remove(&id.name);
                let uid = cached
                    .as_ref()
                    .and_then(|l| l.metadata.owner_references.as_ref())
                    .and_then(|o| o.first())
                    .map(|o| o.uid.clone())
                    .unwrap_or_default();
                match renew_lease(&client, &id.name, &uid, now, cached).await {
                    Ok(l) => {
                        leases.insert(id.name.clone(), l);
                        break;
                    }
                    Err(e) => tracing::debug!(node = %id.name, error = %e, "lease renewal failed"),
                }
            }
            if post_status || owe_status.contains(&id.name) {
                let mut posted = false;
                for _ in 0..HEARTBEAT_TRIES {
                    let result = async {
                        let mut node = nodes.get(&id.name).await?;
                        node.status = Some(node_status(id, &config, now, node.status.as_ref()));
                        nodes
                            .replace_status(&id.name, &PostParams::default(), &node)
                            .await
                    }
                    .await;
                    match result {
                        Ok(_) => {
                            posted = true;
                            break;
                        }
                        // A deleted Node stays deleted (the kubelet would re-register on restart only).
                        Err(e) if is_not_found(&e) => {
                            posted = true;
                            break;
                        }
                        Err(e) => {
                            tracing::debug!(node = %id.name, error = %e, "node status heartbeat failed")
                        }
                    }
                }
                if posted {
                    owe_status.remove(&id.name);
                } else {
                    owe_status.insert(id.name.clone());
                }
            }
        }
    }
}
