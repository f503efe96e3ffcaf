//! Per-pod facts computed once per plan (readiness, availability, lifecycle, revision) and pod construction.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};

use insitu_api::{CloneSet, keys};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodCondition, PodReadinessGate,
    PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::revision::{self, ALPHANUMS};
use crate::selector::Selector;

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
    pub lc: Lc,
    /// Not Succeeded/Failed and no deletionTimestamp (k8s `IsPodActive`).
    pub active: bool,
    pub running: bool,
    /// The `Ready` condition is True (k8s `podutil.IsPodReady`).
    pub ready: bool,
    /// lastTransitionTime of `Ready` when True.
    pub ready_since: Option<Timestamp>,
    /// The `InPlaceUpdateReady` condition: `None` absent, `Some(true)` True, `Some(false)` otherwise.
    pub ipu: Option<bool>,
    /// The `KruisePodReady` condition is present (lifecycle `markPodNotReady` bookkeeping).
    pub has_kruise_ready: bool,
    /// Kruise `IsPodUpdateReady(pod, 0)`: Running ∧ Ready ∧ InPlaceUpdateReady (if present) True.
    pub update_ready: bool,
    /// Kruise `IsPodAvailable`: lifecycle ""/Normal ∧ `IsPodUpdateReady(pod, minReadySeconds)`.
    pub available: bool,
    /// Kruise scale `isPodReady` = `IsPodAvailable(pod, 0)`: lifecycle ""/Normal ∧ `IsPodUpdateReady(pod, 0)`.
    pub normal_ready: bool,
    /// Ready but minReadySeconds not elapsed yet: how long until it is.
    pub available_in: Option<SignedDuration>,
    /// `apps.kruise.io/specified-delete` label or listed in `podsToDelete`.
    pub specified_delete: bool,
    pub grace: Option<&'a str>,
    pub state: Option<&'a str>,
    /// Has the `pod-template-hash` label.
    pub has_template_hash: bool,
    pub node_assigned: bool,
    /// `spec.nodeName` (`""` when unscheduled).
    pub node: &'a str,
    /// k8s `podPhaseToOrdinal`: Pending 0, Unknown 1, Running 2 (others 0).
    pub phase_ord: u8,
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

/// The lifecycle label as an enum, so hot loops compare integers, not strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lc {
    /// No label.
    None,
    PreparingNormal,
    Normal,
    PreparingUpdate,
    Updating,
    Updated,
    PreparingDelete,
    /// Any other value.
    Other,
}

impl Lc {
    pub fn parse(s: &str) -> Self {
        match s {
            "" => Lc::None,
            keys::lifecycle::PREPARING_NORMAL => Lc::PreparingNormal,
            keys::lifecycle::NORMAL => Lc::Normal,
            keys::lifecycle::PREPARING_UPDATE => Lc::PreparingUpdate,
            keys::lifecycle::UPDATING => Lc::Updating,
            keys::lifecycle::UPDATED => Lc::Updated,
            keys::lifecycle::PREPARING_DELETE => Lc::PreparingDelete,
            _ => Lc::Other,
        }
    }
}

/// The per-plan inputs of `PodFacts`, prepared once so the per-pod pass repeats no work.
pub(crate) struct FactsContext<'c> {
    pub(crate) now: Timestamp,
    pub(crate) min_ready_seconds: i32,
    pub(crate) pods_to_delete: &'c HashSet<&'c str>,
    pub(crate) update_revision: &'c str,
    /// `short_hash(update_revision)`, for `equal_to_revision` without re-deriving it per pod.
    pub(crate) update_short_hash: &'c str,
    /// The owner's selector, checked in the same pass over the labels; `None` selects every pod.
    pub(crate) selector: Option<&'c Selector<'c>>,
}

impl<'a> PodFacts<'a> {
    /// The facts of one pod (see `classify`, which the planner calls with its selector).
    pub fn new(
        pod: &'a Pod,
        now: Timestamp,
        min_ready_seconds: i32,
        pods_to_delete: &HashSet<&str>,
        update_revision: &str,
    ) -> Self {
        let ctx = FactsContext {
            now,
            min_ready_seconds,
            pods_to_delete,
            update_revision,
            update_short_hash: revision::short_hash(update_revision),
            selector: None,
        };
        Self::classify(pod, &ctx).0
    }

    /// The facts, and whether `ctx.selector` selects the pod. One pass over labels, annotations and
    /// conditions each: this runs for every pod on every plan, so it borrows (`&str`, no allocation),
    /// reads only the keys it knows (a `str` match compares lengths first, so unrelated keys are skipped
    /// without touching their bytes) and parses nothing (annotations are parsed later, only for pods
    /// with an update in flight).
    pub(crate) fn classify(pod: &'a Pod, ctx: &FactsContext) -> (Self, bool) {
        let meta = &pod.metadata;
        let status = pod.status.as_ref();
        // The phase, read once: (terminated, running, k8s podPhaseToOrdinal: Pending 0, Unknown 1, Running 2).
        let (terminated, running, phase_ord) = match status.and_then(|s| s.phase.as_deref()) {
            Some("Succeeded" | "Failed") => (true, false, 0),
            Some("Running") => (false, true, 2),
            Some("Unknown") => (false, false, 1),
            _ => (false, false, 0),
        };
        let active = !terminated && meta.deletion_timestamp.is_none();

        // `if let` + plain loops rather than `iter().flatten()` over the `Option`s: the flatten adapter
        // costs more per element than the match itself.
        let (mut lifecycle, mut revision, mut specified_label, mut has_template_hash) =
            ("", "", false, false);
        // matchLabels pairs met; keys are distinct on both sides, so all met ⇔ count == len. Both are
        // sorted by key, so they are walked together (a merge): once the selector's keys are behind us,
        // the remaining labels cost nothing.
        let selector_labels = ctx.selector.map_or(&[][..], Selector::match_labels);
        let mut selector_next = selector_labels.iter().peekable();
        let mut selector_met = 0;
        if let Some(labels) = &meta.labels {
            for (k, v) in labels {
                match k.as_str() {
                    keys::LIFECYCLE_STATE_LABEL => lifecycle = v,
                    keys::CONTROLLER_REVISION_HASH_LABEL => revision = v,
                    keys::SPECIFIED_DELETE_LABEL => specified_label = true,
                    keys::POD_TEMPLATE_HASH_LABEL => has_template_hash = true,
                    _ => {}
                }
                while let Some(&&(sk, sv)) = selector_next.peek() {
                    match sk.cmp(k.as_str()) {
                        // A selector key this pod does not have: the pod is not selected.
                        Ordering::Less => {
                            selector_next.next();
                        }
                        Ordering::Equal => {
                            selector_met += usize::from(sv == v.as_str());
                            selector_next.next();
                            break;
                        }
                        Ordering::Greater => break,
                    }
                }
            }
        }
        let selected = ctx.selector.is_none_or(|sel| {
            selector_met == selector_labels.len() && sel.matches_expressions(meta.labels.as_ref())
        });
        let (mut grace, mut grace_old, mut state, mut state_old, mut deletion_cost) =
            (None, None, None, None, 0);
        if let Some(annotations) = &meta.annotations {
            for (k, v) in annotations {
                match k.as_str() {
                    keys::INPLACE_UPDATE_GRACE_ANNOTATION => grace = Some(v.as_str()),
                    keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD => grace_old = Some(v.as_str()),
                    keys::INPLACE_UPDATE_STATE_ANNOTATION => state = Some(v.as_str()),
                    keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD => state_old = Some(v.as_str()),
                    keys::POD_DELETION_COST_ANNOTATION => deletion_cost = self::deletion_cost(v),
                    _ => {}
                }
            }
        }
        let (mut ready, mut ready_since, mut ipu, mut has_kruise_ready) = (false, None, None, false);
        if let Some(conditions) = status.and_then(|s| s.conditions.as_ref()) {
            for c in conditions {
                match c.type_.as_str() {
                    "Ready" => {
                        ready = c.status == "True";
                        ready_since = if ready {
                            c.last_transition_time.as_ref().map(|t| t.0)
                        } else {
                            None
                        };
                    }
                    keys::INPLACE_UPDATE_READY => ipu = Some(c.status == "True"),
                    keys::KRUISE_POD_READY => has_kruise_ready = true,
                    _ => {}
                }
            }
        }
        let update_ready = running && ready && ipu.unwrap_or(true);
        let lc = Lc::parse(lifecycle);
        // k8s podutil.IsPodAvailable: minReadySeconds == 0, or lastTransitionTime + mrs strictly before now.
        let (now, min_ready_seconds) = (ctx.now, ctx.min_ready_seconds);
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
        let lifecycle_ok = matches!(lc, Lc::None | Lc::Normal);
        let name = meta.name.as_deref().unwrap_or("");
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("");
        let specified_delete =
            specified_label || (!ctx.pods_to_delete.is_empty() && ctx.pods_to_delete.contains(name));
        // Kruise EqualToRevisionHash against the update revision, its short hash taken once per plan.
        let updated = !revision.is_empty()
            && (revision == ctx.update_revision || revision::short_hash(revision) == ctx.update_short_hash);
        let facts = PodFacts {
            pod,
            name,
            uid: meta.uid.as_deref().unwrap_or(""),
            revision,
            lifecycle,
            lc,
            active,
            running,
            ready,
            ready_since,
            ipu,
            has_kruise_ready,
            update_ready,
            available: lifecycle_ok && update_ready && min_ready_ok,
            normal_ready: lifecycle_ok && update_ready,
            available_in: if lifecycle_ok { available_in } else { None },
            specified_delete,
            grace: grace.or(grace_old).filter(|s| !s.is_empty()),
            state: state.or(state_old).filter(|s| !s.is_empty()),
            has_template_hash,
            node_assigned: !node.is_empty(),
            node,
            phase_ord,
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            deletion_cost,
            updated,
        };
        (facts, selected)
    }

    pub fn preparing_delete(&self) -> bool {
        self.lc == Lc::PreparingDelete
    }

    /// The pod has the `InPlaceUpdateReady` readiness gate (looked up only when needed).
    pub fn has_gate(&self) -> bool {
        has_readiness_gate(self.pod)
    }

    /// k8s `maxContainerRestarts` (read only when sorting needs it).
    pub fn restarts(&self) -> i32 {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
    }

    /// The `InPlaceUpdateReady` condition is True.
    pub fn ipu_true(&self) -> bool {
        self.ipu == Some(true)
    }
}

/// k8s `IsPodActive`: not Succeeded/Failed and no deletionTimestamp (as `PodFacts::active`, without the rest).
pub fn is_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && !matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

/// The instance id of a pod or PVC (`apps.kruise.io/cloneset-instance-id`; `""` when absent), as Kruise
/// `GetInstanceID`.
pub fn instance_id(meta: &ObjectMeta) -> &str {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(keys::INSTANCE_ID_LABEL))
        .map_or("", String::as_str)
}

/// Kruise `getDeletionCostFromPodAnnotations`: an int32 without `+` or leading zeros, else 0.
pub fn deletion_cost(v: &str) -> i32 {
    let digits = v.strip_prefix('-').unwrap_or(v);
    let valid_first =
        v == "0" || v.starts_with('-') || v.as_bytes().first().is_some_and(|b| (b'1'..=b'9').contains(b));
    if !valid_first || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    v.parse().unwrap_or(0)
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

/// Kruise `getOrGenAvailableIDs`: first the ids of PVCs that no active pod uses (so a pod whose PVCs
/// outlived it comes back under the same name, with the same claims), then fresh ids that are neither
/// in `taken` nor a PVC's. Kruise pops the reusable ids from a set in no particular order; here they are
/// taken in the order of `pvc_ids` (the planner sorts them), so the plan stays deterministic.
pub fn available_ids(
    seed: &str,
    n: usize,
    pvc_ids: &[&str],
    active_ids: &HashSet<&str>,
    taken: &HashSet<String>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(n);
    for id in pvc_ids {
        if out.len() == n {
            break;
        }
        if !id.is_empty() && !active_ids.contains(id) && !out.iter().any(|o| o == id) {
            out.push((*id).to_string());
        }
    }
    if out.len() < n {
        let mut taken = taken.clone();
        taken.extend(pvc_ids.iter().map(|id| (*id).to_string()));
        taken.extend(active_ids.iter().map(|id| (*id).to_string()));
        out.extend(instance_ids(seed, n - out.len(), &taken));
    }
    out
}

/// The name of the PVC of template `vct_name` for instance `id`: `<vct>-<cloneset>-<id>` (Kruise
/// getPersistentVolumeClaimName); the pod's volume of the same name claims it.
pub fn pvc_name(vct_name: &str, cs_name: &str, id: &str) -> String {
    format!("{vct_name}-{cs_name}-{id}")
}

/// Kruise `GetPersistentVolumeClaims` for one volumeClaimTemplate: the template's metadata and spec,
/// named for the instance, labelled with the template labels + the selector's matchLabels + the
/// instance id, owned by the CloneSet (controller, blockOwnerDeletion) like the pod.
pub fn new_pvc(cs: &CloneSet, vct: &PersistentVolumeClaim, id: &str) -> PersistentVolumeClaim {
    let cs_name = cs.metadata.name.as_deref().unwrap_or_default();
    let vct_name = vct.metadata.name.as_deref().unwrap_or_default();
    let mut labels = vct.metadata.labels.clone().unwrap_or_default();
    if let Some(ml) = &cs.spec.selector.match_labels {
        labels.extend(ml.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    labels.insert(keys::INSTANCE_ID_LABEL.into(), id.into());
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(pvc_name(vct_name, cs_name, id)),
            namespace: cs.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: vct.metadata.annotations.clone(),
            finalizers: vct.metadata.finalizers.clone(),
            owner_references: Some(vec![revision::controller_ref(cs)]),
            ..Default::default()
        },
        spec: vct.spec.clone(),
        status: None,
    }
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
    // Kruise's pod webhook injects KruisePodReady into the pods of its workloads; insitu has no webhook and
    // adds it at creation, only when a lifecycle hook uses it (markPodNotReady), so other pods need no
    // extra status write. The planner creates the condition True (Kruise's podreadiness controller).
    if crate::readiness::wants_gate(cs) && !gates.iter().any(|g| g.condition_type == keys::KRUISE_POD_READY) {
        gates.push(PodReadinessGate {
            condition_type: keys::KRUISE_POD_READY.into(),
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
                claim_name: pvc_name(vname, cs_name, id),
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
