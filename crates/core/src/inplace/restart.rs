//! The restart a kubelet already decided when an in-place update begins (insitu's addition to Kruise's rule).
//!
//! Kruise's completion rule (`defaultCheckContainersInPlaceUpdateCompleted`) compares imageIDs and the reported
//! image. A rollback written while the kubelet is stopping the container for the previous update (it saw the
//! newer image: `status.observedGeneration` ≥ `metadata.generation`, the container still running the older
//! image) targets the very image still running: Kruise's rule passes at once, the pod is marked Ready, and
//! then the kubelet's restart takes it down, one unavailable pod the budget never counted (torture seed 3474;
//! Kruise has the same window). The kubelet restarts a container whose spec hash changed once its sync saw
//! it, so the update also waits for those containers to run as new containers.

use std::collections::BTreeMap;

use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;

use super::complete::images_equal;

/// Records, on `pod` (being written with a new in-place batch), the containers of `batch` that the kubelet is
/// already replacing in `before` (the pod as read for the write): running an image other than the spec the
/// kubelet has observed. Removes a stale record otherwise. Returns whether `pod` changed.
pub fn record_pending_restarts<'a>(
    before: &Pod,
    pod: &mut Pod,
    batch: impl IntoIterator<Item = &'a str>,
) -> bool {
    let pending = pending_restarts(before, batch);
    let value = (!pending.is_empty()).then(|| serde_json::to_string(&pending).unwrap_or_default());
    let key = keys::INPLACE_UPDATE_RESTARTING_ANNOTATION;
    let annotations = &mut pod.metadata.annotations;
    match value {
        Some(v) if annotations.as_ref().and_then(|a| a.get(key)) != Some(&v) => {
            annotations
                .get_or_insert_with(Default::default)
                .insert(key.to_string(), v);
            true
        }
        None => annotations.as_mut().and_then(|a| a.remove(key)).is_some(),
        Some(_) => false,
    }
}

/// container name → containerID for each container of `batch` that `pod`'s kubelet is replacing.
fn pending_restarts<'a>(pod: &Pod, batch: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    let observed = pod.status.as_ref().and_then(|s| s.observed_generation);
    let seen = matches!((observed, pod.metadata.generation), (Some(o), Some(g)) if o >= g);
    let mut out = BTreeMap::new();
    if !seen {
        // No report of what the kubelet saw (kubelets before PodObservedGenerationTracking): Kruise's rule.
        return out;
    }
    let (Some(spec), Some(statuses)) = (
        pod.spec.as_ref(),
        pod.status.as_ref().and_then(|s| s.container_statuses.as_ref()),
    ) else {
        return out;
    };
    for name in batch {
        let Some(c) = spec.containers.iter().find(|c| c.name == name) else {
            continue;
        };
        let Some(s) = statuses.iter().find(|s| s.name == name) else {
            continue;
        };
        let running = s.state.as_ref().is_some_and(|st| st.running.is_some());
        let id = s.container_id.as_deref().unwrap_or("");
        if running && !id.is_empty() && !images_equal(c.image.as_deref().unwrap_or(""), &s.image) {
            out.insert(name.to_string(), id.to_string());
        }
    }
    out
}

/// Err while a container recorded by [`record_pending_restarts`] still runs as the recorded container.
pub fn restarts_done(pod: &Pod) -> Result<(), String> {
    let Some(raw) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::INPLACE_UPDATE_RESTARTING_ANNOTATION))
    else {
        return Ok(());
    };
    let Ok(pending) = serde_json::from_str::<BTreeMap<String, String>>(raw) else {
        // Unreadable (hand-edited): the record is only ever a stricter check, Kruise's rule decides.
        return Ok(());
    };
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref());
    for s in statuses.into_iter().flatten() {
        if pending
            .get(&s.name)
            .is_some_and(|id| s.container_id.as_deref() == Some(id))
        {
            return Err(format!(
                "container {} not restarted yet by the kubelet (it saw an earlier image)",
                s.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Pod at generation 2, spec image `spec`, container c running `running` as `cid`, kubelet observed `observed`.
    fn pod(spec: &str, running: &str, cid: &str, observed: Option<i64>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "generation": 2},
            "spec": {"containers": [{"name": "c", "image": spec}, {"name": "side", "image": "s:1"}]},
            "status": {"observedGeneration": observed, "containerStatuses": [
                {"name": "c", "image": running, "imageID": "id", "containerID": cid, "ready": true,
                 "restartCount": 0, "state": {"running": {}}},
                {"name": "side", "image": "s:1", "imageID": "ids", "containerID": "cs", "ready": true,
                 "restartCount": 0, "state": {"running": {}}}]}
        }))
        .unwrap_or_default()
    }

    fn recorded(p: &Pod) -> Option<&String> {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::INPLACE_UPDATE_RESTARTING_ANNOTATION))
    }

    #[test]
    fn a_rollback_during_the_kubelets_restart_waits_for_a_new_container() {
        // The kubelet saw 1.20 (generation 2) and is stopping the 1.19 container; the rollback writes 1.19.
        let before = pod("nginx:1.20", "nginx:1.19", "cid-1", Some(2));
        let mut written = pod("nginx:1.19", "nginx:1.19", "cid-1", Some(2));
        assert!(record_pending_restarts(&before, &mut written, ["c"]));
        assert_eq!(recorded(&written).map(String::as_str), Some(r#"{"c":"cid-1"}"#));
        let err = restarts_done(&written).unwrap_err();
        assert!(err.contains("container c"), "{err}");
        // The kubelet's restart: a new container of the same image completes it.
        let mut restarted = written.clone();
        if let Some(s) = restarted
            .status
            .as_mut()
            .and_then(|s| s.container_statuses.as_mut())
        {
            s[0].container_id = Some("cid-2".into());
        }
        assert_eq!(restarts_done(&restarted), Ok(()));
    }

    #[test]
    fn nothing_is_recorded_when_the_kubelet_did_not_see_a_change() {
        // Not yet observed: the kubelet may never act on generation 2 (Kruise's rule alone).
        let before = pod("nginx:1.20", "nginx:1.19", "cid-1", Some(1));
        let mut written = before.clone();
        assert!(!record_pending_restarts(&before, &mut written, ["c"]));
        // No observedGeneration reported at all (older kubelets).
        let before = pod("nginx:1.20", "nginx:1.19", "cid-1", None);
        assert!(!record_pending_restarts(&before, &mut written, ["c"]));
        // Observed and already running the spec's image (the normal start of an update).
        let before = pod("docker.io/library/nginx:1.19", "nginx:1.19", "cid-1", Some(2));
        assert!(!record_pending_restarts(&before, &mut written, ["c"]));
        assert_eq!(recorded(&written), None);
        // A container outside the batch is not recorded.
        let before = pod("nginx:1.20", "nginx:1.19", "cid-1", Some(2));
        assert!(!record_pending_restarts(&before, &mut written, ["side"]));
    }

    #[test]
    fn a_later_update_drops_the_stale_record_and_bad_records_are_ignored() {
        let before = pod("nginx:1.20", "nginx:1.19", "cid-1", Some(2));
        let mut written = pod("nginx:1.19", "nginx:1.19", "cid-1", Some(2));
        record_pending_restarts(&before, &mut written, ["c"]);
        let settled = pod("nginx:1.19", "nginx:1.19", "cid-2", Some(3));
        assert!(record_pending_restarts(&settled, &mut written, ["c"]));
        assert_eq!(recorded(&written), None);
        written
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(keys::INPLACE_UPDATE_RESTARTING_ANNOTATION.into(), "{bad".into());
        assert_eq!(restarts_done(&written), Ok(()));
    }
}
