//! Env from metadata in place (Kruise `inplace_update_defaults.go`: `defaultCalculateInPlaceUpdateSpec`,
//! `defaultPatchUpdateSpecToPod`; kruise-daemon's `pkg/daemon/containermeta`): which containers read a
//! changed label or annotation through the downward API, and whether the node agent restarted them with the
//! new values.

use std::collections::{BTreeMap, BTreeSet};

use insitu_api::containermeta::{self, MetaKind, RuntimeContainerMetaSet};
use insitu_api::inplace::ContainerRefMetadata;
use k8s_openapi::api::core::v1::{Container, Pod};

/// The labels/annotations one container needs on the pod before it restarts (Kruise `containerRefMetadata`).
pub(crate) type RefMeta = ContainerRefMetadata;

fn map(m: &RefMeta, kind: MetaKind) -> &BTreeMap<String, String> {
    match kind {
        MetaKind::Labels => &m.labels,
        MetaKind::Annotations => &m.annotations,
    }
}

fn map_mut(m: &mut RefMeta, kind: MetaKind) -> &mut BTreeMap<String, String> {
    match kind {
        MetaKind::Labels => &mut m.labels,
        MetaKind::Annotations => &mut m.annotations,
    }
}

/// container name → metadata it reads that changed.
pub(crate) type RefMetadata = BTreeMap<String, RefMeta>;

/// Kruise `defaultCalculateInPlaceUpdateSpec` step 6 on the metadata changes of the two templates: each
/// label/annotation set (`add`/`replace` of `/metadata/labels/<k>`, so only when the old template had that
/// map) that a container of the new template reads via `fieldRef` goes to that container's `RefMeta`, and is
/// taken out of the plain metadata patch (`changes`) so that it reaches the pod only with its container's
/// batch.
pub(crate) fn extract(
    new_containers: &[Container],
    old_has_map: bool,
    kind: MetaKind,
    changes: &mut BTreeMap<String, Option<String>>,
    out: &mut RefMetadata,
) {
    if !old_has_map {
        return;
    }
    let mut taken = Vec::new();
    for (key, value) in changes.iter() {
        let Some(value) = value else { continue };
        for c in new_containers {
            if containermeta::references(c, kind, key) {
                map_mut(out.entry(c.name.clone()).or_default(), kind).insert(key.clone(), value.clone());
                taken.push(key.clone());
            }
        }
    }
    for k in taken {
        changes.remove(&k);
    }
}

/// Kruise `addMetadataSharedContainersToUpdate`: containers reading a label/annotation that a container of
/// this batch changes join the batch, transitively (the key reaches the pod once, so every reader restarts).
pub(crate) fn add_shared(batch: &mut BTreeSet<String>, refs: &RefMetadata) {
    let mut frontier: Vec<String> = batch.iter().cloned().collect();
    let mut keys: BTreeSet<(MetaKind, String)> = BTreeSet::new();
    while !frontier.is_empty() {
        for c in &frontier {
            if let Some(m) = refs.get(c) {
                keys.extend(m.labels.keys().map(|k| (MetaKind::Labels, k.clone())));
                keys.extend(m.annotations.keys().map(|k| (MetaKind::Annotations, k.clone())));
            }
        }
        frontier.clear();
        for (c, m) in refs {
            if batch.contains(c) {
                continue;
            }
            if keys.iter().any(|(kind, k)| map(m, *kind).contains_key(k)) {
                batch.insert(c.clone());
                frontier.push(c.clone());
            }
        }
    }
}

/// Which of the node agent's hashes `hashes_consistent` compares (Kruise's `hashType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HashKind {
    /// kubelet's `HashContainer` of the spec container (1.31+: name and image): the running container is
    /// the spec's, whatever `status.image` and `status.imageID` say.
    Plain,
    /// The env-from-metadata values the pod's current labels/annotations give the container.
    EnvFromMetadata,
}

/// Kruise `checkAllContainersHashConsistent`: every spec container has a status and an entry in the node
/// agent's `runtime-containers-meta`, both with the same containerID (the report is about the container
/// running now), and the entry's hash of `kind` equals the one the spec gives. `Err` names the first
/// container that is not.
///
/// Kruise also accepts the plain hash of kubelets before 1.31 (FNV of the whole container's JSON); insitu
/// computes only the 1.31+ one, so against an older kubelet the plain check fails and completion falls
/// back to the imageID rule, as in Kruise when the report is stale.
pub(crate) fn hashes_consistent(
    pod: &Pod,
    meta: &RuntimeContainerMetaSet,
    kind: HashKind,
) -> Result<(), String> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let Some(status) = statuses.iter().find(|s| s.name == c.name) else {
            return Err(format!("container {} has no status", c.name));
        };
        let Some(m) = meta.containers.iter().find(|m| m.name == c.name) else {
            return Err(format!("container {} is not in the node agent's report", c.name));
        };
        if status.container_id.as_deref().unwrap_or_default() != m.container_id {
            return Err(format!(
                "container {} reported by the node agent is {}, not the running {}",
                c.name,
                m.container_id,
                status.container_id.as_deref().unwrap_or("(none)")
            ));
        }
        let consistent = match kind {
            HashKind::Plain => {
                m.hashes.plain_hash
                    == containermeta::plain_hash(&c.name, c.image.as_deref().unwrap_or_default())
            }
            HashKind::EnvFromMetadata => {
                m.hashes.extracted_env_from_metadata_hash == containermeta::expected_env_hash(c, pod)
            }
        };
        if !consistent {
            return Err(match kind {
                HashKind::Plain => format!("container {} runs another image than its spec", c.name),
                HashKind::EnvFromMetadata => format!(
                    "container {} not restarted with the new env from metadata yet",
                    c.name
                ),
            });
        }
    }
    Ok(())
}

/// Kruise's env-from-metadata completion: the node agent's report is required, and every container must
/// run with the env the pod's current labels/annotations give.
pub(crate) fn env_hashes_consistent(pod: &Pod, meta: Option<&RuntimeContainerMetaSet>) -> Result<(), String> {
    let meta = meta.ok_or_else(|| {
        "waiting for all containers hash consistent, but runtime-container-meta not found".to_string()
    })?;
    hashes_consistent(pod, meta, HashKind::EnvFromMetadata)
        .map_err(|e| format!("waiting for all containers hash consistent ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(pairs: &[(&str, &[&str], &[&str])]) -> RefMetadata {
        pairs
            .iter()
            .map(|(c, labels, anns)| {
                (
                    c.to_string(),
                    RefMeta {
                        labels: labels.iter().map(|k| (k.to_string(), "v".into())).collect(),
                        annotations: anns.iter().map(|k| (k.to_string(), "v".into())).collect(),
                        ..Default::default()
                    },
                )
            })
            .collect()
    }

    #[test]
    fn shared_keys_pull_containers_in_transitively() {
        // c1 changes k1; c2 reads k1 and k2; c3 reads k2 (through c2); c4 reads only annotation a.
        let r = refs(&[
            ("c1", &["k1"], &[]),
            ("c2", &["k1", "k2"], &[]),
            ("c3", &["k2"], &[]),
            ("c4", &[], &["a"]),
        ]);
        let mut batch: BTreeSet<String> = ["c1".to_string()].into();
        add_shared(&mut batch, &r);
        assert_eq!(batch.into_iter().collect::<Vec<_>>(), ["c1", "c2", "c3"]);
        // A label and an annotation of the same name are different keys.
        let r = refs(&[("c1", &["k"], &[]), ("c2", &[], &["k"])]);
        let mut batch: BTreeSet<String> = ["c1".to_string()].into();
        add_shared(&mut batch, &r);
        assert_eq!(batch.len(), 1);
    }
}
