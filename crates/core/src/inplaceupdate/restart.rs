//! What a kubelet was already doing when an in-place batch is written (insitu's addition to Kruise's rule).
//!
//! Kruise's completion rule (`defaultCheckContainersInPlaceUpdateCompleted`) takes a changed imageID, or an
//! unchanged one with the status image equal to the spec's, for "updated". Two writes in quick succession
//! (an update to Y, then a rollback to X before the kubelet finished Y) fool it both ways (torture seed 3474):
//! - the kubelet saw Y (`status.observedGeneration` ≥ `metadata.generation`) and is stopping the container that
//!   still runs X: the rollback to X passes at once (same imageID, same image), the pod is marked Ready, then
//!   the kubelet's restart takes it down — an unavailable pod the budget never counted;
//! - the kubelet stopped the old container (its terminated status still shows X) and starts a new one, of Y if
//!   it has not seen X yet: X passes the rule on the terminated container, or Y's new imageID passes it, and
//!   the kubelet then restarts the container again for X.
//!
//! So the write records, per container of the batch not running its spec's image, the containerID the kubelet
//! is replacing (when it saw the spec, or the container stopped: then a new container is certain) and the
//! images it may still start (the overwritten spec's, never one equal to the new image). The update is not
//! complete while a container still shows the recorded containerID or a recorded image: both end once the
//! kubelet acts on the new spec, so the record can delay completion, never stall it.

use std::collections::{BTreeMap, BTreeSet};

use insitu_api::keys;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde::{Deserialize, Serialize};

use super::batch::container_statuses;
use super::image::images_equal;

/// One container's record in the `insitu/inplace-update-restarting` annotation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pending {
    /// The container the kubelet is stopping (it must run as a new container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    container_id: Option<String>,
    /// Images the kubelet may start before it sees the new spec (the status must not show them).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    images: BTreeSet<String>,
}

type Record = BTreeMap<String, Pending>;

fn read(pod: &Pod) -> Option<Record> {
    let raw = pod
        .metadata
        .annotations
        .as_ref()?
        .get(keys::INPLACE_UPDATE_RESTARTING_ANNOTATION)?;
    // Unreadable (hand-edited): the record is only ever a stricter check, Kruise's rule decides.
    serde_json::from_str(raw).ok()
}

/// Records, on `pod` (being written with a new in-place batch), what the kubelet was doing with each container
/// of `batch` in `before` (the pod as read for the write); removes the record where it was settled. Returns
/// whether `pod` changed.
pub fn record_pending_restarts<'a>(
    before: &Pod,
    pod: &mut Pod,
    batch: impl IntoIterator<Item = &'a str>,
) -> bool {
    let pending = pending_restarts(before, pod, batch);
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

/// The record for the containers of `batch`: `before`'s spec and status, `after`'s new images.
fn pending_restarts<'a>(before: &Pod, after: &Pod, batch: impl IntoIterator<Item = &'a str>) -> Record {
    let observed = before.status.as_ref().and_then(|s| s.observed_generation);
    let seen = matches!((observed, before.metadata.generation), (Some(o), Some(g)) if o >= g);
    let earlier = read(before).unwrap_or_default();
    let mut out = Record::new();
    for name in batch {
        let (Some(old), Some(new)) = (image_of(before, name), image_of(after, name)) else {
            continue;
        };
        let Some(s) = container_statuses(before).find(|s| s.name == name) else {
            continue;
        };
        let running = s.state.as_ref().is_some_and(|st| st.running.is_some());
        if running && images_equal(old, &s.image) {
            // Settled on the overwritten spec: Kruise's rule sees the restart the new image brings.
            continue;
        }
        let was = earlier.get(name).cloned().unwrap_or_default();
        let id = s.container_id.as_deref().filter(|id| !id.is_empty());
        let container_id = match id {
            // Still the container an earlier write saw being replaced, one the kubelet is replacing now
            // (it saw the overwritten spec), or one that stopped: with the pods' `restartPolicy: Always` the
            // kubelet starts a new container, maybe of the overwritten image before it sees the new one.
            Some(id) if was.container_id.as_deref() == Some(id) || seen || !running => Some(id.to_string()),
            _ => None,
        };
        let images: BTreeSet<String> = was
            .images
            .into_iter()
            .chain([old.to_string()])
            .filter(|i| !images_equal(i, new))
            .collect();
        if container_id.is_some() || !images.is_empty() {
            out.insert(name.to_string(), Pending { container_id, images });
        }
    }
    out
}

/// Err while a container recorded by [`record_pending_restarts`] still runs as the recorded container or
/// shows an image the kubelet was moving to before it saw the new spec.
pub(crate) fn restarts_done(pod: &Pod) -> Result<(), String> {
    let Some(record) = read(pod) else {
        return Ok(());
    };
    for s in container_statuses(pod) {
        let Some(p) = record.get(&s.name) else { continue };
        if p.container_id.is_some() && p.container_id == s.container_id {
            return Err(format!(
                "container {} not restarted yet by the kubelet (it saw an earlier image)",
                s.name
            ));
        }
        if shows_one_of(s, &p.images) {
            return Err(format!(
                "container {} shows {}, an image of an earlier spec",
                s.name, s.image
            ));
        }
    }
    Ok(())
}

fn image_of<'p>(pod: &'p Pod, name: &str) -> Option<&'p str> {
    let c = pod.spec.as_ref()?.containers.iter().find(|c| c.name == name)?;
    c.image.as_deref()
}

fn shows_one_of(s: &ContainerStatus, images: &BTreeSet<String>) -> bool {
    images.iter().any(|i| images_equal(i, &s.image))
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

    /// Container c's status in a pod made by [`pod`].
    fn status_c(p: &mut Pod) -> &mut ContainerStatus {
        let statuses = p.status.as_mut().and_then(|s| s.container_statuses.as_mut());
        &mut statuses.expect("pod() has statuses")[0]
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
        assert_eq!(
            recorded(&written).map(String::as_str),
            Some(r#"{"c":{"containerId":"cid-1","images":["nginx:1.20"]}}"#)
        );
        let err = restarts_done(&written).unwrap_err();
        assert!(err.contains("container c not restarted"), "{err}");
        // The kubelet started 1.20 before it saw the rollback: still not done.
        let mut interim = written.clone();
        status_c(&mut interim).container_id = Some("cid-2".into());
        status_c(&mut interim).image = "docker.io/library/nginx:1.20".into();
        let err = restarts_done(&interim).unwrap_err();
        assert!(err.contains("an image of an earlier spec"), "{err}");
        // Then a new container of the rollback's image completes it.
        let mut restarted = written.clone();
        status_c(&mut restarted).container_id = Some("cid-3".into());
        assert_eq!(restarts_done(&restarted), Ok(()));
    }

    #[test]
    fn without_the_kubelets_word_only_the_earlier_image_is_recorded() {
        // Not yet observed: the kubelet may never act on generation 2, so its container need not restart
        // (a rollback to the running image completes at once), but it may still start 1.20.
        let before = pod("nginx:1.20", "nginx:1.19", "cid-1", Some(1));
        let mut written = pod("nginx:1.19", "nginx:1.19", "cid-1", Some(1));
        assert!(record_pending_restarts(&before, &mut written, ["c"]));
        assert_eq!(
            recorded(&written).map(String::as_str),
            Some(r#"{"c":{"images":["nginx:1.20"]}}"#)
        );
        assert_eq!(restarts_done(&written), Ok(()));
        // No observedGeneration reported at all (older kubelets): the same.
        let before = pod("nginx:1.20", "nginx:1.19", "cid-1", None);
        let mut written = pod("nginx:1.19", "nginx:1.19", "cid-1", None);
        record_pending_restarts(&before, &mut written, ["c"]);
        assert_eq!(restarts_done(&written), Ok(()));
    }

    #[test]
    fn a_settled_container_and_containers_outside_the_batch_record_nothing() {
        // Observed and already running the spec's image (the normal start of an update).
        let before = pod("docker.io/library/nginx:1.19", "nginx:1.19", "cid-1", Some(2));
        let mut written = pod("nginx:1.20", "nginx:1.19", "cid-1", Some(2));
        assert!(!record_pending_restarts(&before, &mut written, ["c"]));
        assert_eq!(recorded(&written), None);
        // A container outside the batch is not recorded.
        let before = pod("nginx:1.20", "nginx:1.19", "cid-1", Some(2));
        assert!(!record_pending_restarts(&before, &mut written, ["side"]));
        // An earlier image spelled like the new one is never recorded (it would never go away).
        let before = pod("nginx:1.20", "nginx:1.19", "cid-1", Some(1));
        let mut written = pod("docker.io/library/nginx:1.20", "nginx:1.19", "cid-1", Some(1));
        assert!(!record_pending_restarts(&before, &mut written, ["c"]));
    }

    #[test]
    fn records_accumulate_until_settled_and_bad_records_are_ignored() {
        // 1.19 → 1.20 → 1.21 → 1.19 while the kubelet is stopping the first container.
        let mut p = pod("nginx:1.21", "nginx:1.19", "cid-1", Some(2));
        let mut before = p.clone();
        before.spec = pod("nginx:1.20", "", "", None).spec;
        record_pending_restarts(&before, &mut p, ["c"]);
        let before = p.clone();
        let mut written = pod("nginx:1.19", "nginx:1.19", "cid-1", Some(1));
        written.metadata.annotations = p.metadata.annotations.clone();
        record_pending_restarts(&before, &mut written, ["c"]);
        assert_eq!(
            recorded(&written).map(String::as_str),
            Some(r#"{"c":{"containerId":"cid-1","images":["nginx:1.20","nginx:1.21"]}}"#)
        );
        // The next write from a settled pod drops it.
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

    #[test]
    fn a_stopped_container_must_be_replaced_even_unobserved() {
        // The kubelet stopped the 1.19 container (terminated, same containerID) and will start a new one.
        let mut before = pod("nginx:1.20", "nginx:1.19", "cid-1", Some(1));
        status_c(&mut before).state =
            serde_json::from_value(json!({"terminated": {"exitCode": 0, "containerID": "cid-1"}})).ok();
        let mut written = before.clone();
        written.spec = pod("nginx:1.19", "", "", None).spec;
        assert!(record_pending_restarts(&before, &mut written, ["c"]));
        let err = restarts_done(&written).unwrap_err();
        assert!(err.contains("container c not restarted"), "{err}");
    }
}
