//! ControllerRevisions: byte-exact data, Kruise/k8s hash naming, choosing current/update revisions, history.

pub(crate) mod name;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use insitu_api::{CloneSet, keys};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Map, Value};

use crate::model::plan::Action;
use crate::util::gojson;
pub use name::{equal_to_revision, short_hash};

/// apimachinery `rand.SafeEncodeString` alphabet (no vowels, no confusable digits).
pub(crate) const ALPHANUMS: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1 (not 1a) 32-bit, as Go's `hash/fnv.New32` used by k8s `history.HashControllerRevision`.
pub(crate) fn fnv32(data: &[u8], mut h: u32) -> u32 {
    for b in data {
        h = h.wrapping_mul(16_777_619);
        h ^= u32::from(*b);
    }
    h
}
pub(crate) const FNV32_OFFSET: u32 = 2_166_136_261;

/// FNV-1a 32-bit (Go `fnv.New32a`).
pub(crate) fn fnv32a(data: &[u8]) -> u32 {
    let mut h = FNV32_OFFSET;
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(16_777_619);
    }
    h
}

/// apimachinery `rand.SafeEncodeString`: each char → `ALPHANUMS[rune % 27]`.
pub(crate) fn safe_encode(s: &str) -> String {
    s.chars()
        .map(|c| ALPHANUMS[(c as usize) % ALPHANUMS.len()] as char)
        .collect()
}

/// k8s `history.HashControllerRevision`: fnv32 over the data bytes, then over the decimal collisionCount,
/// rendered in decimal and SafeEncoded. Kruise always passes the collision count, so `"0"` is hashed too.
pub fn hash_revision(data: &[u8], collision_count: i32) -> String {
    let h = fnv32(collision_count.to_string().as_bytes(), fnv32(data, FNV32_OFFSET));
    safe_encode(&h.to_string())
}

/// k8s `history.ControllerRevisionName`: the prefix is cut to 223 chars.
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let p: String = if prefix.len() > 223 {
        prefix.chars().take(223).collect()
    } else {
        prefix.to_string()
    };
    format!("{p}-{hash}")
}

/// The revision data Kruise stores: `{"spec":{"template":{...,"$patch":"replace"}}}` (Kruise
/// `cloneset_revision.go`, `getPatch`).
pub fn revision_data(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or(Value::Object(Map::new()));
    gojson::normalize_pod_template(&mut t);
    if let Value::Object(m) = &mut t {
        m.insert("$patch".into(), Value::String("replace".into()));
    }
    let mut spec = Map::new();
    spec.insert("template".into(), t);
    let mut root = Map::new();
    root.insert("spec".into(), Value::Object(spec));
    Value::Object(root)
}

/// The template inside a revision's data (still carrying `$patch`), if the data has the Kruise shape.
pub fn template_value(rev: &ControllerRevision) -> Option<&Value> {
    rev.data.as_ref()?.0.get("spec")?.get("template")
}

/// The typed pod template stored in a revision (Kruise `ApplyRevision`: the template is replaced whole).
pub(crate) fn template_of(rev: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut v = template_value(rev)?.clone();
    if let Value::Object(m) = &mut v {
        m.remove("$patch");
    }
    serde_json::from_value(v).ok()
}

/// Bytes of a stored revision's data as Go would hold them in `Data.Raw`.
pub(crate) fn stored_bytes(rev: &ControllerRevision) -> Option<String> {
    rev.data.as_ref().map(|d| gojson::marshal(&d.0))
}

/// The CloneSet's controller reference, as Kruise writes it on pods and revisions: with the storage version
/// (`apps.kruise.io/v1beta1` in Kruise master, whose controller works on v1beta1 objects), whichever version the
/// CloneSet was read in. Owners are matched by group and kind, so either version's references are ours.
pub fn controller_ref(cs: &CloneSet) -> OwnerReference {
    OwnerReference {
        api_version: insitu_api::conversion::V1BETA1.into(),
        kind: "CloneSet".into(),
        name: cs.metadata.name.clone().unwrap_or_default(),
        uid: cs.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Kruise `volumeclaimtemplate.GetVCTemplatesHash`: decimal FNV-32a of the marshalled list, `""` if empty.
pub fn vct_hash(cs: &CloneSet) -> String {
    if cs.spec.volume_claim_templates.is_empty() {
        return String::new();
    }
    let v = serde_json::to_value(&cs.spec.volume_claim_templates).unwrap_or(Value::Null);
    fnv32a(gojson::marshal(&v).as_bytes()).to_string()
}

/// A revision's volumeClaimTemplates hash annotation, if it has one.
pub(crate) fn vct_hash_of(r: &ControllerRevision) -> Option<&str> {
    r.metadata
        .annotations
        .as_ref()?
        .get(keys::VCT_HASH_ANNOTATION)
        .map(String::as_str)
}

/// The outcome of Kruise `getActiveRevisions` for one snapshot.
#[derive(Debug)]
pub struct ActiveRevisions {
    pub current: Arc<ControllerRevision>,
    pub update: Arc<ControllerRevision>,
    pub collision_count: i32,
    /// Writes needed to make `update` exist (CreateRevision or BumpRevision), empty if it exists.
    pub actions: Vec<Action>,
    /// All revisions, sorted, including the one being created.
    pub all: Vec<Arc<ControllerRevision>>,
    pub explanation: Vec<String>,
}

/// Kruise `history.SortControllerRevisions`: by `.revision`, then creationTimestamp, then name.
pub(crate) fn sort_revisions(revs: &mut [Arc<ControllerRevision>]) {
    revs.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| {
                let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
                let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
                ta.cmp(&tb)
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// What revision bookkeeping needs of the workload that owns the revisions: one shape for CloneSet and
/// Advanced StatefulSet, whose `getActiveRevisions` / `getStatefulSetRevisions` follow the same k8s
/// `history` rules (`pkg/controller/statefulset/stateful_set_control.go`, `getStatefulSetRevisions`).
pub(crate) struct RevisionOwner<'a> {
    pub(crate) name: &'a str,
    pub(crate) namespace: Option<&'a String>,
    pub(crate) template: &'a PodTemplateSpec,
    pub(crate) annotations: Option<&'a BTreeMap<String, String>>,
    pub(crate) controller_ref: OwnerReference,
    /// The volumeClaimTemplates hash annotation a revision carries (CloneSet only).
    pub(crate) vct_hash: Option<String>,
    pub(crate) current_revision: &'a str,
    pub(crate) collision_count: i32,
}

impl<'a> RevisionOwner<'a> {
    fn of_cloneset(cs: &'a CloneSet) -> Self {
        let status = cs.status.as_ref();
        RevisionOwner {
            name: cs.metadata.name.as_deref().unwrap_or_default(),
            namespace: cs.metadata.namespace.as_ref(),
            template: &cs.spec.template,
            annotations: cs.metadata.annotations.as_ref(),
            controller_ref: controller_ref(cs),
            vct_hash: Some(vct_hash(cs)),
            current_revision: status.map(|s| s.current_revision.as_str()).unwrap_or_default(),
            collision_count: status.and_then(|s| s.collision_count).unwrap_or(0),
        }
    }
}

/// Builds the candidate revision for the CloneSet's current template (the tests' revisions).
#[cfg(test)]
pub(crate) fn new_revision(
    cs: &CloneSet,
    data: Value,
    data_bytes: &str,
    revision: i64,
    collision: i32,
) -> ControllerRevision {
    new_revision_of(
        &RevisionOwner::of_cloneset(cs),
        data,
        data_bytes,
        revision,
        collision,
    )
}

/// Builds the candidate revision for the owner's current template (Kruise `NewRevision`, k8s
/// `history.NewControllerRevision`: the template's labels plus the hash label, the owner's annotations).
fn new_revision_of(
    owner: &RevisionOwner,
    data: Value,
    data_bytes: &str,
    revision: i64,
    collision: i32,
) -> ControllerRevision {
    let hash = hash_revision(data_bytes.as_bytes(), collision);
    let mut labels: BTreeMap<String, String> = owner
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(keys::CONTROLLER_REVISION_HASH_KEY.into(), hash.clone());
    let mut annotations: BTreeMap<String, String> = owner.annotations.cloned().unwrap_or_default();
    if let Some(h) = &owner.vct_hash {
        annotations.insert(keys::VCT_HASH_ANNOTATION.into(), h.clone());
    }
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(owner.name, &hash)),
            namespace: owner.namespace.cloned(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner.controller_ref.clone()]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// Kruise `getActiveRevisions` (`cloneset_controller.go`): reuse the newest equal revision, bump an older
/// equal one (rollback), or create a new one, bumping collisionCount on a name clash with different data.
pub fn active_revisions(cs: &CloneSet, revisions: &[Arc<ControllerRevision>]) -> ActiveRevisions {
    active_revisions_of(&RevisionOwner::of_cloneset(cs), revisions)
}

/// `active_revisions` for any owner (CloneSet or Advanced StatefulSet).
pub(crate) fn active_revisions_of(
    owner: &RevisionOwner,
    revisions: &[Arc<ControllerRevision>],
) -> ActiveRevisions {
    let mut all: Vec<Arc<ControllerRevision>> = revisions.to_vec();
    sort_revisions(&mut all);
    let mut explanation = Vec::new();
    let mut collision = owner.collision_count;
    let next = all.last().map_or(1, |r| r.revision + 1);

    let data = revision_data(owner.template);
    let bytes = gojson::marshal(&data);
    let stored: Vec<Option<String>> = all.iter().map(|r| stored_bytes(r)).collect();
    let equal: Vec<usize> = (0..all.len())
        .filter(|&i| stored[i].as_deref() == Some(bytes.as_str()))
        .collect();

    let mut actions = Vec::new();
    let update: Arc<ControllerRevision> = match equal.last() {
        Some(&i) if i + 1 == all.len() => all[i].clone(),
        Some(&i) => {
            // Kruise: the equivalent revision is not the newest → roll back by bumping its number.
            let mut r = (*all[i]).clone();
            r.revision = next;
            let name = r.metadata.name.clone().unwrap_or_default();
            explanation.push(format!(
                "template equals older revision {name}: bump its revision {} → {next} (rollback)",
                all[i].revision
            ));
            // Kruise getActiveRevisions: the bumped revision takes the CloneSet's current VCT hash.
            let vct_hash = owner
                .vct_hash
                .clone()
                .filter(|want| vct_hash_of(&r) != Some(want.as_str()));
            if let Some(want) = &vct_hash {
                r.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(keys::VCT_HASH_ANNOTATION.into(), want.clone());
            }
            actions.push(Action::BumpRevision {
                name,
                revision: next,
                vct_hash,
            });
            let r = Arc::new(r);
            all.remove(i);
            all.push(r.clone());
            r
        }
        None => {
            let names: HashSet<&str> = all.iter().filter_map(|r| r.metadata.name.as_deref()).collect();
            let mut cand = new_revision_of(owner, data.clone(), &bytes, next, collision);
            // Kruise createControllerRevision: AlreadyExists with different data → collisionCount++, retry.
            let mut tries = 0;
            while cand.metadata.name.as_deref().is_some_and(|n| names.contains(n)) && tries < 1000 {
                collision = collision.saturating_add(1);
                tries += 1;
                cand = new_revision_of(owner, data.clone(), &bytes, next, collision);
            }
            if tries > 0 {
                explanation.push(format!("revision name collision: collisionCount → {collision}"));
            }
            explanation.push(format!(
                "new template: create revision {} (revision {next})",
                cand.metadata.name.as_deref().unwrap_or_default()
            ));
            let r = Arc::new(cand);
            actions.push(Action::CreateRevision {
                revision: Box::new((*r).clone()),
            });
            all.push(r.clone());
            r
        }
    };
    let current_name = owner.current_revision;
    let current = all
        .iter()
        .find(|r| !current_name.is_empty() && r.metadata.name.as_deref() == Some(current_name))
        .cloned()
        .unwrap_or_else(|| update.clone());
    ActiveRevisions {
        current,
        update,
        collision_count: collision,
        actions,
        all,
        explanation,
    }
}

/// Kruise `truncateHistory`: delete the oldest non-live revisions beyond `revisionHistoryLimit`. A revision
/// is live when it is current, update, or named by some pod's `controller-revision-hash` (full or short).
pub(crate) fn truncate_history<'p>(
    all: &[Arc<ControllerRevision>],
    pods: impl IntoIterator<Item = &'p ObjectMeta>,
    current: &str,
    update: &str,
    limit: i32,
) -> Vec<Action> {
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    let mut candidates: Vec<&str> = all
        .iter()
        .filter_map(|r| r.metadata.name.as_deref())
        .filter(|n| !equal_to_revision(current, n) && !equal_to_revision(update, n))
        .collect();
    // Fast path: nothing to delete even if no pod references any candidate.
    if candidates.len() <= limit {
        return Vec::new();
    }
    let mut referenced: Vec<bool> = vec![false; candidates.len()];
    for p in pods {
        let Some(h) = p
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::CONTROLLER_REVISION_HASH_LABEL))
        else {
            continue;
        };
        for (i, c) in candidates.iter().enumerate() {
            if !referenced[i] && equal_to_revision(h, c) {
                referenced[i] = true;
            }
        }
    }
    let mut i = 0;
    candidates.retain(|_| {
        let keep = !referenced[i];
        i += 1;
        keep
    });
    if candidates.len() <= limit {
        return Vec::new();
    }
    candidates[..candidates.len() - limit]
        .iter()
        .map(|n| Action::DeleteRevision {
            name: (*n).to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_encode_digits() {
        // '0'(48)%27=21 → '4' … '9'(57)%27=3 → 'f'
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
    }

    #[test]
    fn fnv_reference_values() {
        // Reference values of FNV-1/FNV-1a 32 for "a" (Fowler/Noll/Vo test vectors).
        assert_eq!(fnv32(b"a", FNV32_OFFSET), 0x050c5d7e);
        assert_eq!(fnv32a(b"a"), 0xe40c292c);
    }

    #[test]
    fn revision_hash_hand_computed() {
        // Computed independently (python: h=2166136261; for b in data+b"0": h=(h*16777619)%2**32; h^=b):
        // fnv32("{}0") = 777742067 → SafeEncodeString = "cccc864bc".
        assert_eq!(fnv32(b"{}0", FNV32_OFFSET), 777_742_067);
        assert_eq!(hash_revision(b"{}", 0), "cccc864bc");
    }

    #[test]
    fn revision_data_and_name_of_simple_template() {
        let tpl: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.20.0"}]}
        }))
        .unwrap();
        let bytes = gojson::marshal(&revision_data(&tpl));
        assert_eq!(
            bytes,
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"web"}},"spec":{"containers":[{"image":"nginx:1.20.0","name":"web","resources":{}}]}}}}"#
        );
        // fnv32(bytes ++ "0") = 1983450404 (python, as above).
        assert_eq!(hash_revision(bytes.as_bytes(), 0), "5fd7894848");
        assert_eq!(revision_name("web", "5fd7894848"), "web-5fd7894848");
    }
}
