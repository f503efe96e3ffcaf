//! Per-pod facts computed once per plan (readiness, availability, lifecycle, revision) and pod construction.

use std::collections::{BTreeMap, HashSet};

use insitu_api::{CloneSet, keys};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaimVolumeSource, Pod, PodCondition, PodReadinessGate, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::revision::{self, ALPHANUMS};

/// Everything the planner asks about one pod, computed once (no per-comparison recomputation in sorts).
#[derive(Debug, Clone)]
pub struct PodFacts<'a> {
    pub pod: &'a Pod,
    pub name: &'a str,
    pub uid: &'a str,
    /// `controller-revision-hash` label (may be empty).
    pub revision: &'a str,
    /// Lifecycle label (`""` when absent).
    pub lifecycle: &'a str,
    /// Not Succeeded/Failed and no deletionTimestamp (k8s `IsPodActive`).
    pub active: bool,
    pub running: bool,
    /// The `Ready` condition is True (k8s `podutil.IsPodReady`).
    pub ready: bool,
    /// lastTransitionTime of `Ready` when True.
    pub ready_since: Option<Timestamp>,
    /// Status of the `InPlaceUpdateReady` condition, if present.
    pub ipu_condition: Option<&'a PodCondition>,
    pub has_gate: bool,
    /// Kruise `IsPodUpdateReady(pod, 0)`: Running ∧ Ready ∧ InPlaceUpdateReady (if present) True.
    pub update_ready: bool,
    /// Kruise `IsPodAvailable`: lifecycle ""/Normal ∧ `IsPodUpdateReady(pod, minReadySeconds)`.
    pub available: bool,
    /// Ready but minReadySeconds not elapsed yet: how long until it is.
    pub available_in: Option<SignedDuration>,
    /// `apps.kruise.io/specified-delete` label or listed in `podsToDelete`.
    pub specified_delete: bool,
    pub grace: Option<&'a str>,
    pub state: Option<&'a str>,
    pub node_assigned: bool,
    /// `spec.nodeName` (`""` when unscheduled).
    pub node: &'a str,
    /// k8s `podPhaseToOrdinal`: Pending 0, Unknown 1, Running 2 (others 0).
    pub phase_ord: u8,
    pub restarts: i32,
    pub created: Option<Timestamp>,
    pub deletion_cost: i32,
    /// At the update revision (plain hash comparison).
    pub updated: bool,
}

/// The `InPlaceUpdateReady` (or any) condition of a pod.
pub fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

pub fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

pub fn has_readiness_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.condition_type == keys::INPLACE_UPDATE_READY))
}

impl<'a> PodFacts<'a> {
    pub fn new(
        pod: &'a Pod,
        now: Timestamp,
        min_ready_seconds: i32,
        pods_to_delete: &HashSet<&str>,
        update_revision: &str,
    ) -> Self {
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
        let active = phase != "Succeeded" && phase != "Failed" && pod.metadata.deletion_timestamp.is_none();
        let running = phase == "Running";
        let ready_cond = condition(pod, "Ready");
        let ready = ready_cond.is_some_and(|c| c.status == "True");
        let ready_since = if ready {
            ready_cond
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0)
        } else {
            None
        };
        let ipu_condition = condition(pod, keys::INPLACE_UPDATE_READY);
        let ipu_ok = ipu_condition.is_none_or(|c| c.status == "True");
        let update_ready = running && ready && ipu_ok;
        let lifecycle = label(pod, keys::LIFECYCLE_STATE_LABEL).unwrap_or("");
        // k8s podutil.IsPodAvailable: minReadySeconds == 0, or lastTransitionTime + mrs strictly before now.
        let (min_ready_ok, available_in) = if min_ready_seconds <= 0 || !update_ready {
            (true, None)
        } else {
            match ready_since {
                Some(t) => {
                    let at = t
                        .saturating_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
                        .unwrap_or(Timestamp::MAX);
                    if at < now {
                        (true, None)
                    } else {
                        (false, Some(now.duration_until(at)))
                    }
                }
                None => (false, None),
            }
        };
        let lifecycle_ok = lifecycle.is_empty() || lifecycle == keys::lifecycle::NORMAL;
        let available = lifecycle_ok && update_ready && min_ready_ok;
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("");
        let specified_delete =
            label(pod, keys::SPECIFIED_DELETE_LABEL).is_some() || pods_to_delete.contains(name);
        let revision = label(pod, keys::CONTROLLER_REVISION_HASH_LABEL).unwrap_or("");
        let phase_ord = match phase {
            "Unknown" => 1,
            "Running" => 2,
            _ => 0,
        };
        let restarts = status
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0));
        let deletion_cost = annotation(pod, keys::POD_DELETION_COST_ANNOTATION)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        PodFacts {
            pod,
            name,
            uid: pod.metadata.uid.as_deref().unwrap_or(""),
            revision,
            lifecycle,
            active,
            running,
            ready,
            ready_since,
            ipu_condition,
            has_gate: has_readiness_gate(pod),
            update_ready,
            available,
            available_in: if lifecycle_ok { available_in } else { None },
            specified_delete,
            grace: annotation(pod, keys::INPLACE_UPDATE_GRACE_ANNOTATION)
                .or_else(|| annotation(pod, keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD))
                .filter(|s| !s.is_empty()),
            state: annotation(pod, keys::INPLACE_UPDATE_STATE_ANNOTATION)
                .or_else(|| annotation(pod, keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD))
                .filter(|s| !s.is_empty()),
            node_assigned: !node.is_empty(),
            node,
            phase_ord,
            restarts,
            created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
            deletion_cost,
            updated: revision::equal_to_revision(revision, update_revision),
        }
    }

    pub fn preparing_delete(&self) -> bool {
        self.lifecycle == keys::lifecycle::PREPARING_DELETE
    }
}

/// RFC3339 at second precision, as Go `time.Now().Format(time.RFC3339)` in UTC.
pub fn rfc3339(t: Timestamp) -> String {
    let t = Timestamp::from_second(t.as_second()).unwrap_or(t);
    k8s_openapi::jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", t).unwrap_or_default()
}

/// Deterministic 5-char instance ids from Kruise's alphabet, seeded by the snapshot (no RNG in core):
/// same snapshot → same ids; ids never collide with `taken` nor with each other.
pub fn instance_ids(seed: &str, n: usize, taken: &HashSet<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(n);
    let mut chosen: HashSet<String> = HashSet::new();
    let mut counter: u64 = 0;
    while out.len() < n {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in seed.as_bytes().iter().chain(counter.to_le_bytes().iter()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        counter += 1;
        let mut id = String::with_capacity(5);
        let mut x = h;
        for _ in 0..5 {
            id.push(ALPHANUMS[(x % 27) as usize] as char);
            x /= 27;
        }
        if !taken.contains(&id) && chosen.insert(id.clone()) {
            out.push(id);
        }
    }
    out
}

/// Kruise `newVersionedPods` + k8s `GetPodFromTemplate` (research §3.9): a pod for `template` at `revision`.
pub fn new_pod(
    cs: &CloneSet,
    template: &PodTemplateSpec,
    revision_name: &str,
    id: &str,
    now: Timestamp,
    short_hash_gate: bool,
) -> Pod {
    let cs_name = cs.metadata.name.as_deref().unwrap_or_default();
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    labels.insert(keys::INSTANCE_ID_LABEL.into(), id.into());
    let short = revision::short_hash(revision_name).to_string();
    labels.insert(
        keys::CONTROLLER_REVISION_HASH_LABEL.into(),
        if short_hash_gate {
            short.clone()
        } else {
            revision_name.to_string()
        },
    );
    labels.insert(keys::POD_TEMPLATE_HASH_LABEL.into(), short);
    labels.insert(
        keys::LIFECYCLE_STATE_LABEL.into(),
        keys::lifecycle::PREPARING_NORMAL.into(),
    );
    let mut annotations: BTreeMap<String, String> = tmeta.annotations.unwrap_or_default();
    annotations.insert(keys::LIFECYCLE_TIMESTAMP_ANNOTATION.into(), rfc3339(now));
    let mut spec = template.spec.clone().unwrap_or_default();
    let gates = spec.readiness_gates.get_or_insert_with(Vec::new);
    if !gates
        .iter()
        .any(|g| g.condition_type == keys::INPLACE_UPDATE_READY)
    {
        gates.push(PodReadinessGate {
            condition_type: keys::INPLACE_UPDATE_READY.into(),
        });
    }
    // One PVC volume per volumeClaimTemplate, replacing a template volume of the same name.
    for vct in &cs.spec.volume_claim_templates {
        let Some(vname) = vct.metadata.name.as_deref() else {
            continue;
        };
        let vols = spec.volumes.get_or_insert_with(Vec::new);
        vols.retain(|v| v.name != vname);
        vols.push(Volume {
            name: vname.into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: format!("{vname}-{cs_name}-{id}"),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{cs_name}-{id}")),
            generate_name: Some(format!("{cs_name}-")),
            namespace: cs.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![revision::controller_ref(cs)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}
