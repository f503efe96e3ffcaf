//! Env from metadata in place (research §2.3 step 6, §2.6, §2.8): which containers read a changed label or
//! annotation through the downward API, and whether the node agent restarted them with the new values.

use std::collections::{BTreeMap, BTreeSet};

use insitu_api::containermeta::{self, MetaKind, RuntimeContainerMetaSet};
use insitu_api::inplace::ContainerRefMetadata;
use k8s_openapi::api::core::v1::{Container, Pod};

/// The labels/annotations one container needs on the pod before it restarts (Kruise `containerRefMetadata`).
pub type RefMeta = ContainerRefMetadata;

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
pub type RefMetadata = BTreeMap<String, RefMeta>;

/// Kruise `defaultCalculateInPlaceUpdateSpec` step 6 on the metadata changes of the two templates: each
/// label/annotation set (`add`/`replace` of `/metadata/labels/<k>`, so only when the old template had that
/// map) that a container of the new template reads via `fieldRef` goes to that container's `RefMeta`, and is
/// taken out of the plain metadata patch (`changes`) so that it reaches the pod only with its container's
/// batch.
pub fn extract(
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
pub fn add_shared(batch: &mut BTreeSet<String>, refs: &RefMetadata) {
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

/// Kruise `checkAllContainersHashConsistent(…, extractedEnvFromMetadataHash)`: the node agent reports, for
/// every spec container, the running container (same containerID as the status) with the env-from-metadata
/// hash the pod's current labels/annotations give.
pub fn env_hashes_consistent(pod: &Pod) -> Result<(), String> {
    let meta = RuntimeContainerMetaSet::of(pod)?.ok_or_else(|| {
        "waiting for all containers hash consistent, but runtime-container-meta not found".to_string()
    })?;
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let status = statuses.iter().find(|s| s.name == c.name);
        let m = meta.containers.iter().find(|m| m.name == c.name);
        let consistent = match (status, m) {
            (Some(s), Some(m)) => {
                s.container_id.as_deref().unwrap_or_default() == m.container_id
                    && m.hashes.extracted_env_from_metadata_hash == containermeta::expected_env_hash(c, pod)
            }
            _ => false,
        };
        if !consistent {
            return Err(format!(
                "waiting for all containers hash consistent (container {} not restarted with the new env from metadata yet)",
                c.name
            ));
        }
    }
    Ok(())
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
