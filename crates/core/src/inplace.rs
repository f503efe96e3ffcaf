//! In-place update rules (research §2.3–2.6): eligibility from the revision diff, start, grace, completion.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use insitu_api::inplace::{
    InPlaceUpdateContainerBatch, InPlaceUpdateContainerStatus, InPlaceUpdatePreCheckBeforeNext,
    InPlaceUpdateState, UpdateSpec,
};
use insitu_api::keys;
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value};

use crate::envmeta::{self, RefMetadata};
use crate::gojson;
use crate::plan::PodMutation;

/// What an in-place update changes (Kruise `UpdateSpec` minus the fields we do not support).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InPlaceSpec {
    /// container name → new image.
    pub images: BTreeMap<String, String>,
    /// Metadata changes of the template (labels/annotations set or removed, finalizers added/removed).
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
    pub finalizers: BTreeMap<String, bool>,
    /// Strategic-merge patch JSON of the metadata change (Go bytes), if any.
    pub meta_patch: Option<String>,
    /// container name → the changed labels/annotations it reads through the downward API (Kruise
    /// `containerRefMetadata`); these keys are not in `labels`/`annotations`/`meta_patch` but reach the pod
    /// with their container's batch, and the node agent restarts the container.
    pub ref_metadata: RefMetadata,
    /// Kruise `updateEnvFromMetadata`: some container must restart for env from metadata.
    pub update_env_from_metadata: bool,
    /// container name → the cpu/memory quantities that change (Kruise `containerResources`).
    pub resources: BTreeMap<String, ResourceRequirements>,
}

impl InPlaceSpec {
    /// Kruise `VerticalUpdateOnly`: a resize, no image, no env from metadata.
    pub fn vertical_only(&self) -> bool {
        !self.resources.is_empty() && self.images.is_empty() && !self.update_env_from_metadata
    }

    /// Kruise `defaultCheckPodNeedsBeUnready` (gate present is checked by the caller): every in-place update
    /// marks the pod NotReady, except a resize where no changed resource has `RestartContainer`.
    pub fn needs_unready(&self, pod: &Pod) -> bool {
        !self.vertical_only() || crate::vertical::resize_needs_restart(pod, &self.resources)
    }
}

/// One RFC 6902 operation of the template diff (op, path).
#[derive(Debug)]
pub(crate) struct Op {
    pub(crate) op: &'static str,
    pub(crate) path: String,
}

fn esc(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

fn is_simple_array(a: &[Value]) -> bool {
    a.iter().all(|v| !matches!(v, Value::Array(_) | Value::Object(_)))
}

/// A JSON diff with the shape of gomodules/appscode `jsonpatch.CreatePatch` (the library Kruise uses):
/// objects key by key, arrays of objects element by element (extra → remove/add), type changes → replace.
pub(crate) fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<Op>) {
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            for (k, vb) in mb {
                let p = format!("{path}/{}", esc(k));
                match ma.get(k) {
                    None => out.push(Op { op: "add", path: p }),
                    Some(va) => diff(va, vb, &p, out),
                }
            }
            for k in ma.keys().filter(|k| !mb.contains_key(*k)) {
                out.push(Op {
                    op: "remove",
                    path: format!("{path}/{}", esc(k)),
                });
            }
        }
        (Value::Array(xa), Value::Array(xb)) => {
            if xa == xb {
                return;
            }
            if is_simple_array(xa) && is_simple_array(xb) {
                // Edit-distance ops in the library; any of them disqualifies a spec change, so one suffices.
                let op = if xa.len() == xb.len() {
                    "replace"
                } else if xa.len() < xb.len() {
                    "add"
                } else {
                    "remove"
                };
                out.push(Op {
                    op,
                    path: format!("{path}/0"),
                });
                return;
            }
            let n = xa.len().min(xb.len());
            for i in (n..xa.len()).rev() {
                out.push(Op {
                    op: "remove",
                    path: format!("{path}/{i}"),
                });
            }
            for i in n..xb.len() {
                out.push(Op {
                    op: "add",
                    path: format!("{path}/{i}"),
                });
            }
            for i in 0..n {
                diff(&xa[i], &xb[i], &format!("{path}/{i}"), out);
            }
        }
        (x, y) if x == y => {}
        _ => out.push(Op {
            op: "replace",
            path: path.to_string(),
        }),
    }
}

fn container_image_index(path: &str) -> Option<usize> {
    let rest = path.strip_prefix("/spec/containers/")?;
    let (idx, tail) = rest.split_once('/')?;
    if tail != "image" || idx.is_empty() || !idx.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    idx.parse().ok()
}

fn str_map(meta: Option<&Value>, key: &str) -> BTreeMap<String, String> {
    meta.and_then(|m| m.get(key))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn map_changes(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    for (k, v) in new {
        if old.get(k) != Some(v) {
            out.insert(k.clone(), Some(v.clone()));
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        out.insert(k.clone(), None);
    }
    out
}

/// Kruise `defaultCalculateInPlaceUpdateSpec` on two revision templates (with `$patch`). `Err` says why the
/// change cannot be applied in place (→ recreate, or refusal under InPlaceOnly). `vertical` is the
/// `InPlaceWorkloadVerticalScaling` gate: cpu/memory changes resize in place (research §2.7).
pub fn calculate(old_tpl: &Value, new_tpl: &Value, vertical: bool) -> Result<InPlaceSpec, String> {
    let mut ops = Vec::new();
    diff(old_tpl, new_tpl, "", &mut ops);
    let old_containers = old_tpl.pointer("/spec/containers").and_then(Value::as_array);
    let mut spec = InPlaceSpec::default();
    let mut meta_changed = false;
    for op in &ops {
        if op.path.starts_with("/spec/") {
            if crate::vertical::resource_path(&op.path).is_some() {
                if !vertical {
                    return Err(format!(
                        "template change `{} {}`: resources change in place only with the InPlaceWorkloadVerticalScaling gate",
                        op.op, op.path
                    ));
                }
                crate::vertical::record_op(op.op, &op.path, old_tpl, new_tpl, &mut spec.resources)?;
                continue;
            }
            if op.op != "replace" {
                return Err(format!(
                    "template change `{} {}` is not an in-place change",
                    op.op, op.path
                ));
            }
            let Some(i) = container_image_index(&op.path) else {
                return Err(format!(
                    "template change `replace {}`: only container images and cpu/memory resources can change in place",
                    op.path
                ));
            };
            let name = old_containers
                .and_then(|c| c.get(i))
                .and_then(|c| c.get("name"))
                .and_then(Value::as_str);
            let image = new_tpl.pointer(&op.path).and_then(Value::as_str);
            match (name, image) {
                (Some(n), Some(img)) => {
                    spec.images.insert(n.to_string(), img.to_string());
                }
                _ => {
                    return Err(format!(
                        "template change `replace {}` names no container",
                        op.path
                    ));
                }
            }
        } else if op.path.starts_with("/metadata/") {
            meta_changed = true;
        } else {
            return Err(format!(
                "template change `{} {}` is not an in-place change",
                op.op, op.path
            ));
        }
    }
    if !spec.resources.is_empty()
        && let Some((from, to)) = crate::vertical::qos_changed(old_tpl, new_tpl)
    {
        // Kruise #1212: a resize may not change the QoS class (kube-apiserver rejects it too).
        return Err(format!(
            "resources change the pod QoS class ({from} → {to}), which a resize cannot do"
        ));
    }
    if meta_changed {
        // Kruise applies the metadata as a strategic-merge patch (labels/annotations/finalizers).
        // Without a node agent, env-from-metadata is a plain metadata change (research §2.8).
        let om = old_tpl.get("metadata");
        let nm = new_tpl.get("metadata");
        spec.labels = map_changes(&str_map(om, "labels"), &str_map(nm, "labels"));
        spec.annotations = map_changes(&str_map(om, "annotations"), &str_map(nm, "annotations"));
        // Kruise gate InPlaceUpdateEnvFromMetadata (default on): downward-API keys go to their containers.
        let containers: Vec<k8s_openapi::api::core::v1::Container> = new_tpl
            .pointer("/spec/containers")
            .and_then(|c| serde_json::from_value(c.clone()).ok())
            .unwrap_or_default();
        for (kind, key, changes) in [
            (
                insitu_api::containermeta::MetaKind::Labels,
                "labels",
                &mut spec.labels,
            ),
            (
                insitu_api::containermeta::MetaKind::Annotations,
                "annotations",
                &mut spec.annotations,
            ),
        ] {
            let old_has_map = om.and_then(|m| m.get(key)).is_some_and(Value::is_object);
            envmeta::extract(&containers, old_has_map, kind, changes, &mut spec.ref_metadata);
        }
        spec.update_env_from_metadata = !spec.ref_metadata.is_empty();
        let fins = |m: Option<&Value>| -> Vec<String> {
            m.and_then(|m| m.get("finalizers"))
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let (fo, fnew) = (fins(om), fins(nm));
        for f in &fnew {
            if !fo.contains(f) {
                spec.finalizers.insert(f.clone(), true);
            }
        }
        for f in &fo {
            if !fnew.contains(f) {
                spec.finalizers.insert(f.clone(), false);
            }
        }
        spec.meta_patch = meta_patch_json(&spec, &fnew);
    }
    Ok(spec)
}

/// Go bytes of the strategic-merge patch `{"metadata":{...}}` (sorted keys, `null` removes).
fn meta_patch_json(spec: &InPlaceSpec, new_finalizers: &[String]) -> Option<String> {
    let mut meta = Map::new();
    let to_obj = |m: &BTreeMap<String, Option<String>>| -> Value {
        Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
                .collect(),
        )
    };
    if !spec.labels.is_empty() {
        meta.insert("labels".into(), to_obj(&spec.labels));
    }
    if !spec.annotations.is_empty() {
        meta.insert("annotations".into(), to_obj(&spec.annotations));
    }
    if !spec.finalizers.is_empty() {
        let strs =
            |it: Vec<&String>| Value::Array(it.into_iter().map(|s| Value::String(s.clone())).collect());
        let added: Vec<&String> = spec
            .finalizers
            .iter()
            .filter(|(_, a)| **a)
            .map(|(k, _)| k)
            .collect();
        let removed: Vec<&String> = spec
            .finalizers
            .iter()
            .filter(|(_, a)| !**a)
            .map(|(k, _)| k)
            .collect();
        if !added.is_empty() {
            meta.insert("finalizers".into(), strs(added));
        }
        if !removed.is_empty() {
            meta.insert("$deleteFromPrimitiveList/finalizers".into(), strs(removed));
        }
        meta.insert(
            "$setElementOrder/finalizers".into(),
            strs(new_finalizers.iter().collect()),
        );
    }
    if meta.is_empty() {
        return None;
    }
    let mut root = Map::new();
    root.insert("metadata".into(), Value::Object(meta));
    Some(gojson::marshal(&Value::Object(root)))
}

/// Reads a metadata strategic-merge patch back into mutation maps (grace annotation `metaDataPatch`).
fn meta_from_patch(patch: &str, m: &mut PodMutation) {
    let Ok(v) = serde_json::from_str::<Value>(patch) else {
        return;
    };
    let Some(meta) = v.get("metadata") else { return };
    for (key, target) in [("labels", &mut m.labels), ("annotations", &mut m.annotations)] {
        if let Some(obj) = meta.get(key).and_then(Value::as_object) {
            for (k, v) in obj {
                target.insert(k.clone(), v.as_str().map(str::to_string));
            }
        }
    }
    for (key, add) in [
        ("finalizers", true),
        ("$deleteFromPrimitiveList/finalizers", false),
    ] {
        for f in meta
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            m.finalizers.insert(f.to_string(), add);
        }
    }
}

fn apply_meta(spec: &InPlaceSpec, m: &mut PodMutation) {
    m.labels
        .extend(spec.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    m.annotations
        .extend(spec.annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
    m.finalizers
        .extend(spec.finalizers.iter().map(|(k, v)| (k.clone(), *v)));
}

/// Container launch priority from the injected `KRUISE_CONTAINER_BARRIER` env (`configMapKeyRef.key` =
/// `p_<int>`), Kruise `containerlaunchpriority`; `None` = no priority.
fn container_priority(pod: &Pod, name: &str) -> Option<i64> {
    let c = pod.spec.as_ref()?.containers.iter().find(|c| c.name == name)?;
    let env = c
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == "KRUISE_CONTAINER_BARRIER")?;
    let key = &env.value_from.as_ref()?.config_map_key_ref.as_ref()?.key;
    key.strip_prefix("p_")?.parse().ok()
}

/// What one batch patches per container (Kruise `UpdateSpec` container maps): images, the metadata their
/// env reads, resizes.
#[derive(Clone, Copy)]
struct Changes<'a> {
    images: &'a BTreeMap<String, String>,
    refs: &'a RefMetadata,
    resources: &'a BTreeMap<String, ResourceRequirements>,
}

/// Kruise `defaultPatchUpdateSpecToPod`: choose this batch (containers without a priority plus those with
/// the highest, plus those sharing a changed label/annotation with them), set their images, the metadata
/// their env reads and their resources, record their imageIDs and the batch, queue the rest as `next*`.
fn patch_spec_to_pod(
    pod: &Pod,
    changes: Changes<'_>,
    state: &mut InPlaceUpdateState,
    now: &Time,
    m: &mut PodMutation,
) {
    let Changes {
        images,
        refs,
        resources,
    } = changes;
    state.next_container_images.clear();
    state.next_container_ref_metadata.clear();
    state.next_container_resources.clear();
    state.pre_check_before_next = None;
    let names: BTreeSet<&str> = images
        .keys()
        .chain(refs.keys())
        .chain(resources.keys())
        .map(String::as_str)
        .collect();
    let prios: BTreeMap<&str, Option<i64>> = names.iter().map(|n| (*n, container_priority(pod, n))).collect();
    let top = prios.values().flatten().max().copied();
    let mut batch: BTreeSet<String> = prios
        .iter()
        .filter(|(_, p)| p.is_none() || **p == top)
        .map(|(n, _)| n.to_string())
        .collect();
    envmeta::add_shared(&mut batch, refs);
    for (name, img) in images {
        if batch.contains(name) {
            m.container_images.insert(name.clone(), img.clone());
        } else {
            state.next_container_images.insert(name.clone(), img.clone());
        }
    }
    for (name, meta) in refs {
        if batch.contains(name) {
            m.labels
                .extend(meta.labels.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
            m.annotations
                .extend(meta.annotations.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
        } else {
            state
                .next_container_ref_metadata
                .insert(name.clone(), meta.clone());
        }
    }
    for (name, res) in resources {
        if batch.contains(name) {
            m.container_resources.insert(name.clone(), res.clone());
        } else {
            state.next_container_resources.insert(name.clone(), res.clone());
        }
    }
    for s in pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
    {
        // Kruise records imageIDs only for the containers whose image this batch changes.
        if batch.contains(&s.name) && images.contains_key(&s.name) {
            let last = state.last_container_statuses.get_or_insert_with(BTreeMap::new);
            last.insert(
                s.name.clone(),
                InPlaceUpdateContainerStatus {
                    image_id: s.image_id.clone(),
                },
            );
        }
    }
    if has_next_batch(state) {
        state.pre_check_before_next = Some(InPlaceUpdatePreCheckBeforeNext {
            containers_required_ready: batch.iter().cloned().collect(),
        });
    }
    state.container_batches_record.push(InPlaceUpdateContainerBatch {
        timestamp: now.clone(),
        containers: batch.into_iter().collect(),
    });
}

pub fn time(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// What every in-place start from one old revision to one target shares, computed once per plan so the
/// per-pod work is a few clones (10k-pod rollouts stay cheap).
#[derive(Clone, Debug)]
pub struct StartTemplate {
    pub spec: InPlaceSpec,
    pub revision: String,
    pub revision_label: String,
    pub grace_seconds: i32,
    /// `lifecycle.apps.kruise.io/timestamp` value (RFC3339 of now).
    pub now_rfc3339: String,
    pub now: Time,
    /// With a grace period: the grace annotation and the state annotation, identical for every pod.
    pub grace_json: Option<String>,
    pub state_json: Option<String>,
}

impl StartTemplate {
    pub fn new(
        spec: InPlaceSpec,
        revision: &str,
        revision_label: &str,
        grace_seconds: i32,
        now: Timestamp,
    ) -> Self {
        let t = time(now);
        let (mut grace_json, mut state_json) = (None, None);
        if grace_seconds > 0 {
            let grace = UpdateSpec {
                revision: revision.to_string(),
                container_images: spec.images.clone(),
                container_ref_metadata: spec.ref_metadata.clone(),
                update_env_from_metadata: spec.update_env_from_metadata,
                container_resources: spec.resources.clone(),
                meta_data_patch: spec.meta_patch.as_ref().map(|p| B64.encode(p.as_bytes())),
                grace_seconds,
            };
            grace_json = Some(grace.to_json());
            state_json = Some(Self::state(&spec, revision, &t).to_json());
        }
        StartTemplate {
            spec,
            revision: revision.to_string(),
            revision_label: revision_label.to_string(),
            grace_seconds,
            now_rfc3339: crate::pods::rfc3339(now),
            now: t,
            grace_json,
            state_json,
        }
    }

    fn state(spec: &InPlaceSpec, revision: &str, t: &Time) -> InPlaceUpdateState {
        InPlaceUpdateState {
            revision: revision.to_string(),
            update_timestamp: t.clone(),
            update_images: !spec.images.is_empty(),
            update_env_from_metadata: spec.update_env_from_metadata,
            update_resources: !spec.resources.is_empty(),
            ..Default::default()
        }
    }

    /// Whether `mutation` reads nothing from the pod (with a grace period the images wait, so the write is
    /// the same for every pod): the planner then builds it once and clones it per pod.
    pub fn same_for_every_pod(&self) -> bool {
        // Must follow the first arm of the match in `mutation`.
        self.grace_json.is_some() && self.state_json.is_some()
    }

    /// The pod write that starts an in-place update (Kruise `updatePodInPlace`, research §2.4): revision
    /// labels, lifecycle `Updating`, the state annotation, and either the new images now (grace 0) or the
    /// grace annotation (images untouched until the grace period ends).
    pub fn mutation(&self, pod: &Pod) -> PodMutation {
        let mut m = PodMutation::default();
        m.labels.insert(
            keys::CONTROLLER_REVISION_HASH_LABEL.into(),
            Some(self.revision_label.clone()),
        );
        m.labels.insert(
            keys::POD_TEMPLATE_HASH_LABEL.into(),
            Some(crate::revision::short_hash(&self.revision).into()),
        );
        m.labels.insert(
            keys::LIFECYCLE_STATE_LABEL.into(),
            Some(keys::lifecycle::UPDATING.into()),
        );
        m.annotations.insert(
            keys::LIFECYCLE_TIMESTAMP_ANNOTATION.into(),
            Some(self.now_rfc3339.clone()),
        );
        let state_json = match (&self.grace_json, &self.state_json) {
            (Some(g), Some(st)) => {
                m.annotations
                    .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(), Some(g.clone()));
                st.clone()
            }
            _ => {
                let mut state = Self::state(&self.spec, &self.revision, &self.now);
                apply_meta(&self.spec, &mut m);
                let changes = Changes {
                    images: &self.spec.images,
                    refs: &self.spec.ref_metadata,
                    resources: &self.spec.resources,
                };
                patch_spec_to_pod(pod, changes, &mut state, &self.now, &mut m);
                m.annotations
                    .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(), None);
                m.annotations
                    .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD.into(), None);
                state.to_json()
            }
        };
        m.annotations
            .insert(keys::INPLACE_UPDATE_STATE_ANNOTATION.into(), Some(state_json));
        m.annotations
            .insert(keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD.into(), None);
        m
    }
}

/// Outcome of Kruise `finishGracePeriod` for one pod.
#[derive(Debug)]
pub enum Grace {
    /// Still waiting: look again after this many whole seconds (rounded up).
    Wait(std::time::Duration),
    /// Grace over: apply the images/metadata (and drop the annotation).
    Finish(PodMutation),
    /// The pod's revision no longer matches the grace spec: drop the annotation.
    Abandon(PodMutation),
    /// Unreadable annotations: nothing to do (explained).
    Invalid(String),
    /// A grace annotation without the state annotation (both are written together when an update starts):
    /// Kruise's finishGracePeriod fails on it in every round and the rollout stalls. Recovered here by
    /// finishing the grace at once from a fresh state (the mutation), with the reason for a Warning.
    Stale(PodMutation, String),
}

/// Kruise `finishGracePeriod` (research §2.5).
pub fn finish_grace(
    pod: &Pod,
    pod_revision: &str,
    grace: &str,
    state: Option<&str>,
    now: Timestamp,
) -> Grace {
    let spec: UpdateSpec = match serde_json::from_str(grace) {
        Ok(s) => s,
        Err(e) => {
            return Grace::Invalid(format!(
                "unreadable {}: {e}",
                keys::INPLACE_UPDATE_GRACE_ANNOTATION
            ));
        }
    };
    let stale = match state {
        None => None,
        Some(state) => {
            let Ok(state) = serde_json::from_str::<InPlaceUpdateState>(state) else {
                return Grace::Invalid(format!("unreadable {}", keys::INPLACE_UPDATE_STATE_ANNOTATION));
            };
            Some(state)
        }
    };
    let (mut state, stale) = match stale {
        Some(state) => (state, None),
        None => {
            // When the update started is unknown: its grace period counts as over now.
            let state = InPlaceUpdateState {
                revision: spec.revision.clone(),
                update_timestamp: time(now),
                last_container_statuses: None,
                update_env_from_metadata: false,
                update_resources: false,
                update_images: !spec.container_images.is_empty(),
                next_container_images: Default::default(),
                next_container_ref_metadata: Default::default(),
                next_container_resources: Default::default(),
                pre_check_before_next: None,
                container_batches_record: Vec::new(),
            };
            let why = format!(
                "pod has {} but {} not found: the grace period is finished now (Kruise would fail this pod's refresh in every round)",
                keys::INPLACE_UPDATE_GRACE_ANNOTATION,
                keys::INPLACE_UPDATE_STATE_ANNOTATION
            );
            (state, Some(why))
        }
    };
    let mut m = PodMutation::default();
    if !crate::revision::equal_to_revision(pod_revision, &spec.revision) {
        m.annotations
            .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(), None);
        m.annotations
            .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD.into(), None);
        return Grace::Abandon(m);
    }
    let grace_ms = i64::from(spec.grace_seconds) * 1000;
    let span_ms = now.as_millisecond() - state.update_timestamp.0.as_millisecond();
    if span_ms < grace_ms && stale.is_none() {
        // Kruise roundupSeconds(grace − span).
        let left_ms = grace_ms - span_ms;
        let secs = (left_ms + 999) / 1000;
        return Grace::Wait(std::time::Duration::from_secs(u64::try_from(secs).unwrap_or(0)));
    }
    if let Some(p) = spec.meta_data_patch.as_deref().and_then(|p| B64.decode(p).ok()) {
        meta_from_patch(&String::from_utf8_lossy(&p), &mut m);
    }
    let changes = Changes {
        images: &spec.container_images,
        refs: &spec.container_ref_metadata,
        resources: &spec.container_resources,
    };
    patch_spec_to_pod(pod, changes, &mut state, &time(now), &mut m);
    m.annotations.insert(
        keys::INPLACE_UPDATE_STATE_ANNOTATION.into(),
        Some(state.to_json()),
    );
    m.annotations
        .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(), None);
    m.annotations
        .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD.into(), None);
    match stale {
        Some(why) => Grace::Stale(m, why),
        None => Grace::Finish(m),
    }
}

/// Docker-style reference normalisation for comparing spec and reported images: the kubelet reports
/// `docker.io/library/nginx:1.20.0` for `nginx:1.20.0`. Kruise only adds `:latest`; normalising both sides
/// keeps every Kruise "equal" equal and also accepts the kubelet's canonical form.
pub fn normalize_image(image: &str) -> String {
    let (domain, name, suffix) = normalized_parts(image);
    [domain, name, suffix].concat()
}

/// `normalize_image(a) == normalize_image(b)`, without building either string (the completion check
/// compares every in-flight container).
pub fn images_equal(a: &str, b: &str) -> bool {
    fn bytes<'s>((d, n, s): (&'s str, &'s str, &'s str)) -> impl Iterator<Item = u8> + 's {
        d.bytes().chain(n.bytes()).chain(s.bytes())
    }
    let (a, b) = (normalized_parts(a), normalized_parts(b));
    a.0.len() + a.1.len() + a.2.len() == b.0.len() + b.1.len() + b.2.len() && bytes(a).eq(bytes(b))
}

/// `normalize_image` in three pieces: the implied domain prefix, the name, and the tag or digest.
fn normalized_parts(image: &str) -> (&'static str, &str, &str) {
    let (name, suffix) = match image.find('@') {
        Some(i) => (&image[..i], &image[i..]),
        None => {
            let last_slash = image.rfind('/').map_or(0, |i| i + 1);
            match image[last_slash..].rfind(':') {
                Some(j) => (&image[..last_slash + j], &image[last_slash + j..]),
                None => (image, ":latest"),
            }
        }
    };
    let first = name.split('/').next().unwrap_or("");
    let has_domain =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let domain = if has_domain {
        ""
    } else if name.contains('/') {
        "docker.io/"
    } else {
        "docker.io/library/"
    };
    (domain, name, suffix)
}

/// Parses the `apps.kruise.io/inplace-update-state` annotation.
pub fn parse_state(state: &str) -> Result<InPlaceUpdateState, String> {
    serde_json::from_str(state)
        .map_err(|e| format!("unreadable {}: {e}", keys::INPLACE_UPDATE_STATE_ANNOTATION))
}

/// Kruise `DefaultCheckInPlaceUpdateCompleted` on the status fallback (no node agent): no grace period,
/// no pending batch, and every container recorded in `lastContainerStatuses` reports a new imageID, or
/// reports the spec image already.
pub fn check_completed(pod: &Pod, grace: Option<&str>, state: Option<&str>) -> Result<(), String> {
    if grace.is_some() {
        return Err("still in grace period of in-place update".into());
    }
    let Some(state) = state else { return Ok(()) };
    let state = parse_state(state)?;
    if has_next_batch(&state) {
        return Err("existing containers to in-place update in next batches".into());
    }
    containers_completed(pod, &state)
}

/// Whether containers wait for a later batch (Kruise `updateNextBatch`'s condition).
pub fn has_next_batch(state: &InPlaceUpdateState) -> bool {
    !state.next_container_images.is_empty()
        || !state.next_container_ref_metadata.is_empty()
        || !state.next_container_resources.is_empty()
}

/// Kruise `defaultCheckContainersInPlaceUpdateCompleted`: env from metadata needs the node agent's
/// report; a resize is done when every container status reports the spec's resources
/// (`IsUpdateCompleted`); images fall back to the status.
pub fn containers_completed(pod: &Pod, state: &InPlaceUpdateState) -> Result<(), String> {
    if state.update_env_from_metadata {
        envmeta::env_hashes_consistent(pod)?;
    }
    if state.update_resources {
        crate::vertical::resources_completed(pod)?;
    }
    let Some(last) = state.last_container_statuses.as_ref() else {
        return Ok(());
    };
    let spec_images: BTreeMap<&str, &str> = pod
        .spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| (c.name.as_str(), c.image.as_deref().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    let mut missing: BTreeSet<&str> = last.keys().map(String::as_str).collect();
    for cs in pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
    {
        if let Some(old) = last.get(&cs.name) {
            if old.image_id == cs.image_id {
                let want = spec_images.get(cs.name.as_str()).copied().unwrap_or("");
                if !images_equal(want, &cs.image) {
                    return Err(format!("container {} imageID not changed", cs.name));
                }
            }
            missing.remove(cs.name.as_str());
        }
    }
    if !missing.is_empty() {
        return Err(format!("not found statuses of containers {missing:?}"));
    }
    Ok(())
}

/// Kruise Refresh's next-batch step (`updateNextBatch`), once the previous batch is complete: the
/// containers listed in `preCheckBeforeNext` must be ready, then the next containers are patched.
pub fn next_batch(pod: &Pod, mut st: InPlaceUpdateState, now: Timestamp) -> Result<PodMutation, String> {
    if let Some(pre) = &st.pre_check_before_next {
        let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref());
        for c in &pre.containers_required_ready {
            let ready = statuses.into_iter().flatten().any(|s| &s.name == c && s.ready);
            if !ready {
                return Err(format!("container {c} is not ready before the next batch"));
            }
        }
    }
    let images = std::mem::take(&mut st.next_container_images);
    let refs = std::mem::take(&mut st.next_container_ref_metadata);
    let resources = std::mem::take(&mut st.next_container_resources);
    let mut m = PodMutation::default();
    let changes = Changes {
        images: &images,
        refs: &refs,
        resources: &resources,
    };
    patch_spec_to_pod(pod, changes, &mut st, &time(now), &mut m);
    m.annotations
        .insert(keys::INPLACE_UPDATE_STATE_ANNOTATION.into(), Some(st.to_json()));
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tpl(image: &str, env: Option<&str>) -> Value {
        let mut c = json!({"name": "c1", "image": image, "resources": {}});
        if let Some(e) = env {
            c["env"] = json!([{"name": "E", "value": e}]);
        }
        json!({"$patch": "replace", "metadata": {"creationTimestamp": null, "labels": {"app": "a"}},
               "spec": {"containers": [c]}})
    }

    #[test]
    fn image_only_is_in_place() {
        let s = calculate(&tpl("foo1", None), &tpl("foo2", None), true).unwrap();
        assert_eq!(s.images.get("c1").map(String::as_str), Some("foo2"));
        assert!(s.labels.is_empty() && s.meta_patch.is_none());
    }

    #[test]
    fn env_change_is_recreate() {
        let e = calculate(&tpl("foo1", Some("a")), &tpl("foo2", Some("b")), true).unwrap_err();
        assert!(e.contains("/spec/containers/0/env/0/value"), "{e}");
        assert!(calculate(&tpl("foo1", None), &tpl("foo1", Some("b")), true).is_err());
    }

    #[test]
    fn label_change_is_metadata_in_place() {
        let mut new = tpl("foo2", None);
        new["metadata"]["labels"]["k1"] = json!("v1");
        let s = calculate(&tpl("foo1", None), &new, true).unwrap();
        assert_eq!(s.labels.get("k1"), Some(&Some("v1".to_string())));
        assert_eq!(
            s.meta_patch.as_deref(),
            Some(r#"{"metadata":{"labels":{"k1":"v1"}}}"#)
        );
    }

    /// A template with container `c1` (and optionally `c2`) and the given resources JSON.
    fn rtpl(image: &str, res: Value) -> Value {
        json!({"$patch": "replace", "metadata": {"labels": {"app": "a"}},
               "spec": {"containers": [{"name": "c1", "image": image, "resources": res}]}})
    }

    fn burstable(cpu: &str, mem: &str) -> Value {
        json!({"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": "2", "memory": "2Gi"}})
    }

    // Kruise TestCalculateInPlaceUpdateSpec's resource rows (research §4.4).
    #[test]
    fn cpu_only_is_a_resize() {
        let s = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("500m", "1Gi")),
            true,
        )
        .unwrap();
        assert!(s.images.is_empty());
        let r = &s.resources["c1"];
        assert_eq!(r.requests.as_ref().unwrap()["cpu"].0, "500m");
        assert!(r.limits.is_none() && !r.requests.as_ref().unwrap().contains_key("memory"));
        assert!(s.vertical_only());
    }

    #[test]
    fn image_and_cpu_go_together() {
        let s = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo2", burstable("1500m", "1Gi")),
            true,
        )
        .unwrap();
        assert_eq!(s.images["c1"], "foo2");
        assert_eq!(s.resources["c1"].requests.as_ref().unwrap()["cpu"].0, "1500m");
        assert!(!s.vertical_only());
    }

    #[test]
    fn cpu_and_memory_within_burstable_is_a_resize() {
        let s = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("100m", "100Mi")),
            true,
        )
        .unwrap();
        assert_eq!(s.resources["c1"].requests.as_ref().unwrap().len(), 2);
    }

    #[test]
    fn other_field_with_cpu_recreates() {
        let old = rtpl("foo1", burstable("1", "1Gi"));
        let mut new = rtpl("foo1", burstable("2", "1Gi"));
        new["spec"]["containers"][0]["command"] = json!(["sh"]);
        assert!(calculate(&old, &new, true).is_err());
        let mut new = rtpl("foo1", burstable("2", "1Gi"));
        new["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "b"}]);
        assert!(calculate(&old, &new, true).is_err());
    }

    #[test]
    fn qos_change_recreates_with_the_reason() {
        let old = rtpl("foo1", burstable("1", "1Gi"));
        let new = rtpl(
            "foo1",
            json!({"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}),
        );
        let e = calculate(&old, &new, true).unwrap_err();
        assert!(e.contains("QoS class (Burstable → Guaranteed)"), "{e}");
    }

    #[test]
    fn add_remove_and_other_resources_recreate() {
        let old = rtpl("foo1", json!({"requests": {"cpu": "1"}}));
        let add = rtpl("foo1", json!({"requests": {"cpu": "1", "memory": "1Gi"}}));
        let e = calculate(&old, &add, true).unwrap_err();
        assert!(e.contains("can not add or remove resources"), "{e}");
        let e = calculate(&add, &old, true).unwrap_err();
        assert!(e.contains("can not add or remove resources"), "{e}");
        let limits = rtpl("foo1", json!({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}));
        let e = calculate(&old, &limits, true).unwrap_err();
        assert!(e.contains("can not add or remove resources"), "{e}");
        let eph = |q: &str| rtpl("foo1", json!({"requests": {"cpu": "1", "ephemeral-storage": q}}));
        let e = calculate(&eph("1Gi"), &eph("2Gi"), true).unwrap_err();
        assert!(
            e.contains("disallowed inplace update resource: ephemeral-storage"),
            "{e}"
        );
        let bad = rtpl("foo1", json!({"requests": {"cpu": "lots"}}));
        assert!(
            calculate(&old, &bad, true)
                .unwrap_err()
                .contains("parse quantity")
        );
    }

    #[test]
    fn gate_off_recreates_on_resources() {
        let e = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("2", "1Gi")),
            false,
        )
        .unwrap_err();
        assert!(e.contains("InPlaceWorkloadVerticalScaling"), "{e}");
    }

    fn pod_with(policies: Value, priorities: &[(&str, Option<i64>)]) -> Pod {
        let containers: Vec<Value> = priorities
            .iter()
            .map(|(n, p)| {
                let mut c = json!({"name": n, "image": "foo1", "resizePolicy": policies.clone(),
                                   "resources": burstable("1", "1Gi")});
                if let Some(p) = p {
                    c["env"] = json!([{"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": "b", "key": format!("p_{p}")}}}]);
                }
                c
            })
            .collect();
        let statuses: Vec<Value> = priorities
            .iter()
            .map(|(n, _)| json!({"name": n, "image": "foo1", "imageID": format!("id-{n}"), "ready": true, "restartCount": 0}))
            .collect();
        serde_json::from_value(
            json!({"metadata": {"name": "p"}, "spec": {"containers": containers},
                                      "status": {"containerStatuses": statuses}}),
        )
        .unwrap()
    }

    // Kruise TestCheckPodNeedsBeUnready rows (research §4.4).
    #[test]
    fn unready_only_when_a_changed_resource_restarts() {
        let spec = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("2", "1Gi")),
            true,
        )
        .unwrap();
        let none = pod_with(json!([]), &[("c1", None)]);
        assert!(
            !spec.needs_unready(&none),
            "resource-only without RestartContainer stays ready"
        );
        let mem = pod_with(
            json!([{"resourceName": "memory", "restartPolicy": "RestartContainer"}]),
            &[("c1", None)],
        );
        assert!(!spec.needs_unready(&mem), "memory restarts, but only cpu changed");
        let cpu = pod_with(
            json!([{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]),
            &[("c1", None)],
        );
        assert!(spec.needs_unready(&cpu));
        let with_image = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo2", burstable("2", "1Gi")),
            true,
        )
        .unwrap();
        assert!(with_image.needs_unready(&none), "an image change restarts anyway");
    }

    #[test]
    fn start_resizes_now_and_records_state() {
        let spec = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("2", "1Gi")),
            true,
        )
        .unwrap();
        let t = StartTemplate::new(
            spec,
            "rev-2",
            "rev-2",
            0,
            Timestamp::from_second(1_800_000_000).unwrap(),
        );
        let pod = pod_with(json!([]), &[("c1", None)]);
        let m = t.mutation(&pod);
        assert!(m.container_images.is_empty());
        assert_eq!(
            m.container_resources["c1"].requests.as_ref().unwrap()["cpu"].0,
            "2"
        );
        let st = parse_state(
            m.annotations[keys::INPLACE_UPDATE_STATE_ANNOTATION]
                .as_deref()
                .unwrap(),
        )
        .unwrap();
        assert!(st.update_resources && !st.update_images);
        assert_eq!(st.container_batches_record[0].containers, vec!["c1".to_string()]);
        assert_eq!(st.last_container_statuses, None, "no image, no imageID recorded");
        // Not complete until the status reports the new resources.
        let mut p = pod.clone();
        m.apply(&mut p);
        assert!(
            containers_completed(&p, &st)
                .unwrap_err()
                .contains("resources not changed")
        );
        let reported = p.spec.as_ref().unwrap().containers[0].resources.clone();
        p.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0].resources = reported;
        assert_eq!(containers_completed(&p, &st), Ok(()));
    }

    #[test]
    fn grace_period_carries_the_resources() {
        let spec = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("2", "1Gi")),
            true,
        )
        .unwrap();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let t = StartTemplate::new(spec, "rev-2", "rev-2", 5, t0);
        let pod = pod_with(json!([]), &[("c1", None)]);
        let m = t.mutation(&pod);
        assert!(
            m.container_resources.is_empty(),
            "nothing resized during the grace period"
        );
        let grace = m.annotations[keys::INPLACE_UPDATE_GRACE_ANNOTATION]
            .clone()
            .unwrap();
        assert!(
            grace.contains(r#""containerResources":{"c1":{"requests":{"cpu":"2"}}}"#),
            "{grace}"
        );
        let state = m.annotations[keys::INPLACE_UPDATE_STATE_ANNOTATION]
            .clone()
            .unwrap();
        let later = Timestamp::from_second(1_800_000_006).unwrap();
        let Grace::Finish(f) = finish_grace(&pod, "rev-2", &grace, Some(&state), later) else {
            panic!("grace over")
        };
        assert_eq!(
            f.container_resources["c1"].requests.as_ref().unwrap()["cpu"].0,
            "2"
        );
    }

    #[test]
    fn resources_follow_container_priority_batches() {
        let old = json!({"$patch": "replace", "metadata": {}, "spec": {"containers": [
            {"name": "c1", "image": "foo1", "resources": burstable("1", "1Gi")},
            {"name": "c2", "image": "bar1", "resources": burstable("1", "1Gi")}]}});
        let mut new = old.clone();
        new["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("2");
        new["spec"]["containers"][1]["image"] = json!("bar2");
        let spec = calculate(&old, &new, true).unwrap();
        // c2 has the higher priority: it goes first, c1's resize waits for the next batch.
        let pod = pod_with(json!([]), &[("c1", Some(0)), ("c2", Some(10))]);
        let t = StartTemplate::new(
            spec,
            "rev-2",
            "rev-2",
            0,
            Timestamp::from_second(1_800_000_000).unwrap(),
        );
        let m = t.mutation(&pod);
        assert_eq!(m.container_images.keys().collect::<Vec<_>>(), vec!["c2"]);
        assert!(m.container_resources.is_empty());
        let st = parse_state(
            m.annotations[keys::INPLACE_UPDATE_STATE_ANNOTATION]
                .as_deref()
                .unwrap(),
        )
        .unwrap();
        assert!(st.next_container_resources.contains_key("c1"));
        assert_eq!(
            st.pre_check_before_next
                .as_ref()
                .unwrap()
                .containers_required_ready,
            vec!["c2".to_string()]
        );
        assert!(
            check_completed(&pod, None, Some(&st.to_json())).is_err(),
            "next batch pending"
        );
        let n = next_batch(&pod, st, Timestamp::from_second(1_800_000_010).unwrap()).unwrap();
        assert_eq!(
            n.container_resources["c1"].requests.as_ref().unwrap()["cpu"].0,
            "2"
        );
        let st = parse_state(
            n.annotations[keys::INPLACE_UPDATE_STATE_ANNOTATION]
                .as_deref()
                .unwrap(),
        )
        .unwrap();
        assert!(st.next_container_resources.is_empty() && st.pre_check_before_next.is_none());
        assert_eq!(st.container_batches_record.len(), 2);
    }

    #[test]
    fn image_normalisation() {
        assert_eq!(normalize_image("nginx:1.20.0"), "docker.io/library/nginx:1.20.0");
        assert_eq!(normalize_image("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(
            normalize_image("docker.io/library/nginx:1.20.0"),
            "docker.io/library/nginx:1.20.0"
        );
        assert_eq!(normalize_image("localhost:5000/x"), "localhost:5000/x:latest");
        assert_eq!(normalize_image("a/b@sha256:00"), "docker.io/a/b@sha256:00");
        for (a, b, eq) in [
            ("nginx:1.20.0", "docker.io/library/nginx:1.20.0", true),
            ("nginx", "nginx:latest", true),
            ("library/nginx", "docker.io/library/nginx:latest", true),
            ("nginx:1.20.0", "nginx:1.20.1", false),
            ("a/b@sha256:00", "docker.io/a/b@sha256:00", true),
            ("localhost:5000/x", "localhost:5000/x:latest", true),
            ("quay.io/x:1", "docker.io/x:1", false),
        ] {
            assert_eq!(images_equal(a, b), eq, "{a} vs {b}");
            assert_eq!(
                images_equal(a, b),
                normalize_image(a) == normalize_image(b),
                "{a} vs {b}"
            );
        }
    }
}
