//! Per-plan pod facts (availability, deletion, revision) from pod summaries, and pod construction.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::ops::Deref;

use insitu_api::{CloneSet, keys};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodReadinessGate, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

pub use crate::model::podmeta::instance_id;
pub(crate) use crate::model::podmeta::{Lc, rfc3339};
use crate::model::summary::{PodSummary, RevisionKey};
use crate::revision::{self, ALPHANUMS};
use crate::util::strmap::Entries;

/// Everything the planner asks about one pod in one plan: the pod's summary (reachable through `Deref`)
/// and what depends on the plan (now, minReadySeconds, podsToDelete, the update revision). Computed once
/// per pod per plan, reading only the summary (no per-comparison recomputation in sorts).
#[derive(Debug, Clone)]
pub struct PodFacts<'a> {
    pub summary: &'a PodSummary,
    /// Kruise `IsPodAvailable`: lifecycle ""/Normal ∧ `IsPodUpdateReady(pod, minReadySeconds)`.
    pub available: bool,
    /// Kruise scale `isPodReady` = `IsPodAvailable(pod, 0)`: lifecycle ""/Normal ∧ `IsPodUpdateReady(pod, 0)`.
    pub normal_ready: bool,
    /// Ready but minReadySeconds not elapsed yet: how long until it is.
    pub available_in: Option<SignedDuration>,
    /// `apps.kruise.io/specified-delete` label or listed in `podsToDelete`.
    pub specified_delete: bool,
    /// At the update revision (Kruise `EqualToRevisionHash`).
    pub updated: bool,
}

impl Deref for PodFacts<'_> {
    type Target = PodSummary;

    fn deref(&self) -> &PodSummary {
        self.summary
    }
}

/// The per-plan inputs of `PodFacts`, prepared once so the per-pod pass repeats no work.
pub(crate) struct FactsContext<'c> {
    pub(crate) now: Timestamp,
    pub(crate) min_ready_seconds: i32,
    pub(crate) pods_to_delete: &'c HashSet<&'c str>,
    /// The update revision, its short hash taken once per plan.
    pub(crate) update: RevisionKey<'c>,
}

impl<'a> PodFacts<'a> {
    /// The facts of one pod for a plan at `now` towards `update_revision`.
    pub fn new(
        summary: &'a PodSummary,
        now: Timestamp,
        min_ready_seconds: i32,
        pods_to_delete: &HashSet<&str>,
        update_revision: &str,
    ) -> Self {
        let ctx = FactsContext {
            now,
            min_ready_seconds,
            pods_to_delete,
            update: RevisionKey::new(update_revision),
        };
        Self::with_context(summary, &ctx)
    }

    /// The facts, from the summary's inline fields only (the pod is read only to look a name up in a
    /// non-empty `podsToDelete`, and only when the name is too long to be held inline).
    pub(crate) fn with_context(s: &'a PodSummary, ctx: &FactsContext) -> Self {
        // k8s podutil.IsPodAvailable: minReadySeconds == 0, or lastTransitionTime + mrs strictly before now.
        let (now, min_ready_seconds) = (ctx.now, ctx.min_ready_seconds);
        let (min_ready_ok, available_in) = if min_ready_seconds <= 0 || !s.update_ready {
            (true, None)
        } else {
            match s.ready_since() {
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
        let lifecycle_ok = matches!(s.lc, Lc::None | Lc::Normal);
        let specified_delete =
            s.specified_label || (!ctx.pods_to_delete.is_empty() && ctx.pods_to_delete.contains(s.name()));
        PodFacts {
            summary: s,
            available: lifecycle_ok && s.update_ready && min_ready_ok,
            normal_ready: lifecycle_ok && s.update_ready,
            available_in: if lifecycle_ok { available_in } else { None },
            specified_delete,
            updated: s.at_revision(&ctx.update),
        }
    }

    /// The pod whole (decoded if the cache keeps it packed: only for the pods a plan acts on).
    pub fn pod(&self) -> Cow<'a, Pod> {
        self.summary.pod()
    }

    /// The pod's metadata (for as long as the summary is borrowed, unlike through `Deref`); of a packed pod
    /// without labels and annotations: read those with `labels()` and `annotations()`.
    pub fn meta(&self) -> &'a ObjectMeta {
        self.summary.meta()
    }

    pub fn labels(&self) -> Entries<'a> {
        self.summary.labels()
    }

    pub fn annotations(&self) -> Entries<'a> {
        self.summary.annotations()
    }

    /// `metadata.name` (`""` when absent).
    pub fn name(&self) -> &'a str {
        self.summary.name()
    }

    /// `metadata.uid` (`""` when absent).
    pub fn uid(&self) -> &'a str {
        self.summary.uid()
    }

    /// The `controller-revision-hash` label (`""` when absent).
    pub fn revision(&self) -> &'a str {
        self.summary.revision()
    }
}

/// How many instance ids exist: 5 characters of Kruise's 27-letter alphabet (27⁵). No CloneSet can have more
/// pods than this, whatever `spec.replicas` says.
pub const ID_SPACE: u64 = 27 * 27 * 27 * 27 * 27;

/// Random draws allowed per id asked for (plus `ID_DRAW_SLACK`) before `instance_ids` gives up: with half of
/// the id space taken the chance that 16 draws all collide is 2⁻¹⁶. Keeps a nearly full id space from
/// turning one plan into an endless search.
const ID_DRAWS_PER_ID: u64 = 16;
const ID_DRAW_SLACK: u64 = 1024;

/// Deterministic 5-char instance ids from Kruise's alphabet, seeded by the snapshot (no RNG in core):
/// same snapshot → same ids; ids never collide with `taken` nor with each other. Generated one at a time
/// (nothing is allocated up front for `n`), with a bounded number of draws: fewer than `n` come back when the
/// id space is (nearly) exhausted, and the caller reports it.
pub fn instance_ids(seed: &str, n: usize, taken: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut chosen: HashSet<String> = HashSet::new();
    let max_draws = (n as u64)
        .saturating_mul(ID_DRAWS_PER_ID)
        .saturating_add(ID_DRAW_SLACK);
    let mut counter: u64 = 0;
    while out.len() < n && counter < max_draws {
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
        if !taken(&id) && chosen.insert(id.clone()) {
            out.push(id);
        }
    }
    out
}

/// Kruise `getOrGenAvailableIDs`: first the ids of PVCs that no active pod uses (so a pod whose PVCs
/// outlived it comes back under the same name, with the same claims), then fresh ids that are neither
/// in `taken` nor a PVC's. Kruise pops the reusable ids from a set in no particular order; here they are
/// taken in the order of `pvc_ids` (the planner sorts them), so the plan stays deterministic. May return
/// fewer than `n` (see `instance_ids`); the planner bounds `n` per round (`MAX_CREATES_PER_ROUND`).
pub fn available_ids(
    seed: &str,
    n: usize,
    pvc_ids: &[&str],
    active_ids: &HashSet<&str>,
    taken: &HashSet<String>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
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
        out.extend(instance_ids(seed, n - out.len(), |id| taken.contains(id)));
    }
    out
}

/// The name of the PVC of template `vct_name` for instance `id`: `<vct>-<cloneset>-<id>` (Kruise
/// getPersistentVolumeClaimName); the pod's volume of the same name claims it.
pub(crate) fn pvc_name(vct_name: &str, cs_name: &str, id: &str) -> String {
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

/// Kruise `newVersionedPods` (`pkg/controller/cloneset/core/cloneset_core.go`) + Kubernetes
/// `GetPodFromTemplate` (`pkg/controller/controller_utils.go`): a pod for `template` at `revision`.
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
    let tmeta_annotations = tmeta.annotations.clone();
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
    if crate::lifecycle::wants_gate(cs) && !gates.iter().any(|g| g.condition_type == keys::KRUISE_POD_READY) {
        gates.push(PodReadinessGate {
            condition_type: keys::KRUISE_POD_READY.into(),
        });
    }
    // Kruise's pod webhook injects KRUISE_CONTAINER_BARRIER for launch priority; insitu builds its pods
    // itself and injects it here (a priority that is not an integer gets none; Kruise's webhook would
    // reject such a pod).
    if let Ok(Some(prios)) = crate::launch_priority::priorities(&spec, tmeta_annotations.as_ref()) {
        crate::launch_priority::inject(&mut spec, &prios, &format!("{cs_name}-{id}"));
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
