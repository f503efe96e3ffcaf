//! One in-place batch (Kruise `defaultPatchUpdateSpecToPod`): containers by launch priority, their images,
//! env metadata and resizes now, the rest queued as `next*` in the state annotation.

use std::collections::{BTreeMap, BTreeSet};

use insitu_api::inplace::{
    InPlaceUpdateContainerBatch, InPlaceUpdateContainerStatus, InPlaceUpdatePreCheckBeforeNext,
    InPlaceUpdateState,
};
use insitu_api::keys;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::InPlaceSpec;
use crate::inplaceupdate::envmeta::{self, RefMetadata};
use crate::model::mutation::PodMutation;

/// Reads a metadata strategic-merge patch back into mutation maps (grace annotation `metaDataPatch`).
pub(super) fn meta_from_patch(patch: &str, m: &mut PodMutation) {
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

pub(super) fn apply_meta(spec: &InPlaceSpec, m: &mut PodMutation) {
    m.labels
        .extend(spec.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    m.annotations
        .extend(spec.annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
    m.finalizers
        .extend(spec.finalizers.iter().map(|(k, v)| (k.clone(), *v)));
}

/// Container launch priority from the injected `KRUISE_CONTAINER_BARRIER` env (`configMapKeyRef.key` =
/// `p_<int>`), Kruise `containerlaunchpriority`; `None` = no priority.
pub(super) fn container_priority(pod: &Pod, name: &str) -> Option<i64> {
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
pub(super) struct Changes<'a> {
    pub(super) images: &'a BTreeMap<String, String>,
    pub(super) refs: &'a RefMetadata,
    pub(super) resources: &'a BTreeMap<String, ResourceRequirements>,
}

/// Kruise `defaultPatchUpdateSpecToPod`: choose this batch (containers without a priority plus those with
/// the highest, plus those sharing a changed label/annotation with them), set their images, the metadata
/// their env reads and their resources, record their imageIDs and the batch, queue the rest as `next*`.
pub(super) fn patch_spec_to_pod(
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
    for s in container_statuses(pod) {
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

/// The pod's container statuses (none without a status).
pub(super) fn container_statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
}

/// Re-records the imageIDs of an in-place state annotation from the pod it is being written to (Kruise builds
/// `lastContainerStatuses` from the pod it fetched in each conflict retry of `updatePodInPlace`). The plan made
/// the state from its snapshot; the executor writes it onto the pod as read at write time (our own newer write,
/// or a fresh GET after a 409), whose containers may have restarted since: an older imageID recorded would make
/// the completion check take that restart for this update's. Returns whether it changed anything.
pub fn restamp_last_container_statuses(pod: &mut Pod) -> bool {
    let Some(raw) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::INPLACE_UPDATE_STATE_ANNOTATION))
    else {
        return false;
    };
    let Ok(mut state) = parse_state(raw) else {
        return false;
    };
    let Some(last) = state.last_container_statuses.as_mut() else {
        return false;
    };
    let mut changed = false;
    for s in container_statuses(pod) {
        if let Some(rec) = last.get_mut(&s.name)
            && rec.image_id != s.image_id
        {
            rec.image_id = s.image_id.clone();
            changed = true;
        }
    }
    if changed && let Some(a) = pod.metadata.annotations.as_mut() {
        a.insert(keys::INPLACE_UPDATE_STATE_ANNOTATION.to_string(), state.to_json());
    }
    changed
}

/// Parses the `apps.kruise.io/inplace-update-state` annotation.
pub(crate) fn parse_state(state: &str) -> Result<InPlaceUpdateState, String> {
    serde_json::from_str(state)
        .map_err(|e| format!("unreadable {}: {e}", keys::INPLACE_UPDATE_STATE_ANNOTATION))
}

/// Whether containers wait for a later batch (Kruise `updateNextBatch`'s condition).
pub fn has_next_batch(state: &InPlaceUpdateState) -> bool {
    !state.next_container_images.is_empty()
        || !state.next_container_ref_metadata.is_empty()
        || !state.next_container_resources.is_empty()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{burstable, pod_with};

    use super::super::{StartTemplate, calculate, check_completed, next_batch, parse_state};
    use insitu_api::keys;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    #[test]
    fn restamp_records_the_imageids_of_the_pod_written() {
        use super::{Pod, restamp_last_container_statuses};
        let state = r#"{"revision":"r2","updateTimestamp":"2026-01-01T00:00:00Z","lastContainerStatuses":{"app":{"imageID":"id-v1"}},"updateImages":true}"#;
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "annotations": {keys::INPLACE_UPDATE_STATE_ANNOTATION: state}},
            "spec": {"containers": [{"name": "app", "image": "nginx:v1"}, {"name": "side", "image": "s:1"}]},
            "status": {"containerStatuses": [
                {"name": "app", "image": "nginx:v2", "imageID": "id-v2", "ready": false, "restartCount": 1},
                {"name": "side", "image": "s:1", "imageID": "id-s", "ready": true, "restartCount": 0}]}
        }))
        .unwrap_or_default();
        assert!(restamp_last_container_statuses(&mut pod));
        let raw = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::INPLACE_UPDATE_STATE_ANNOTATION));
        let st = super::super::parse_state(raw.map_or("", String::as_str)).expect("state");
        let last = st.last_container_statuses.unwrap_or_default();
        assert_eq!(last.len(), 1, "only the recorded containers");
        assert_eq!(last.get("app").map(|c| c.image_id.as_str()), Some("id-v2"));
        assert_eq!(st.revision, "r2");
        assert!(!restamp_last_container_statuses(&mut pod), "already current");
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
}
