//! In-place completion (Kruise `DefaultCheckInPlaceUpdateCompleted`) and the next container batch.

use std::collections::{BTreeMap, BTreeSet};

use insitu_api::containermeta::RuntimeContainerMetaSet;
use insitu_api::inplace::InPlaceUpdateState;
use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::batch::{Changes, has_next_batch, parse_state, patch_spec_to_pod};
use super::image::images_equal;
use super::time;
use crate::inplaceupdate::envmeta;
use crate::model::mutation::PodMutation;

/// Kruise `DefaultCheckInPlaceUpdateCompleted`: no grace period, no pending batch, and the containers
/// done (`containers_completed`); a pod without a state annotation is complete.
pub(crate) fn check_completed(pod: &Pod, grace: Option<&str>, state: Option<&str>) -> Result<(), String> {
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

/// Kruise `defaultCheckContainersInPlaceUpdateCompleted`, in its order, after insitu's own first step
/// (containers the kubelet was already replacing when the update began must run as new containers,
/// [`super::restart`]):
/// 1. an unreadable `apps.kruise.io/runtime-containers-meta` fails the check;
/// 2. env from metadata needs that report, each container with the running containerID and the env hash
///    of the pod's current labels/annotations;
/// 3. a resize is done when every container status reports the spec's resources (`IsUpdateCompleted`);
/// 4. with a report whose every container has the running containerID and kubelet's plain hash of the
///    spec (name + image), the update is complete: this is how a new tag of the same digest (same
///    imageID, `status.image` possibly the old tag) completes under kruise-daemon;
/// 5. otherwise the status fallback: a container recorded in `lastContainerStatuses` whose imageID did
///    not change must report the spec image, and every recorded container must have a status.
///
/// A stale or partial report (4 failing) is no error, as in Kruise: the fallback decides.
pub fn containers_completed(pod: &Pod, state: &InPlaceUpdateState) -> Result<(), String> {
    // insitu's addition: containers the kubelet was replacing when this update began must restart first.
    super::restart::restarts_done(pod)?;
    let meta = RuntimeContainerMetaSet::of(pod)?;
    if state.update_env_from_metadata {
        envmeta::env_hashes_consistent(pod, meta.as_ref())?;
    }
    if state.update_resources {
        crate::inplaceupdate::vertical::resources_completed(pod)?;
    }
    if let Some(meta) = &meta
        && envmeta::hashes_consistent(pod, meta, envmeta::HashKind::Plain).is_ok()
    {
        return Ok(());
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
    use crate::inplaceupdate::image::normalize_image;
    use insitu_api::containermeta::{self, RUNTIME_CONTAINERS_META_ANNOTATION};
    use serde_json::{Value, json};

    /// Kruise TestCheckInPlaceUpdateCompleted's pod: c1 at `image` (spec), status image `reported`,
    /// imageID `image_id`, containerID `cid`.
    fn pod(image: &str, reported: &str, image_id: &str, cid: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c1", "image": image}]},
            "status": {"containerStatuses": [{"name": "c1", "image": reported, "imageID": image_id,
                "containerID": cid, "ready": true, "restartCount": 1}]}
        }))
        .unwrap()
    }

    fn state(last: Value) -> String {
        json!({"revision": "new", "updateTimestamp": "2026-01-01T00:00:00Z", "lastContainerStatuses": last,
               "updateImages": true})
        .to_string()
    }

    /// kruise-daemon's report: c1 running as `cid` with kubelet's plain hash of `image`.
    fn with_meta(mut p: Pod, cid: &str, image: &str) -> Pod {
        let meta = json!({"containers": [{"name": "c1", "containerID": cid, "restartCount": 1,
            "hashes": {"plainHash": containermeta::plain_hash("c1", image)}}]});
        p.metadata.annotations =
            Some([(RUNTIME_CONTAINERS_META_ANNOTATION.to_string(), meta.to_string())].into());
        p
    }

    // Kruise TestCheckInPlaceUpdateCompleted (`pkg/util/inplaceupdate/inplace_update_test.go`): the status
    // fallback, no node agent.
    #[test]
    fn kruise_completion_rows_on_the_status() {
        let p = pod("foo:v2", "foo:v2", "img02", "containerd://2");
        assert_eq!(check_completed(&p, None, None), Ok(()), "no state: complete");
        let st = state(json!({"c1": {"imageID": "img01"}}));
        assert_eq!(check_completed(&p, None, Some(&st)), Ok(()), "imageID changed");
        let same = state(json!({"c1": {"imageID": "img02"}}));
        let stale = pod("foo:v2", "foo:v1", "img02", "containerd://1");
        assert_eq!(
            check_completed(&stale, None, Some(&same)),
            Err("container c1 imageID not changed".into())
        );
        assert_eq!(
            check_completed(&p, None, Some(&same)),
            Ok(()),
            "same imageID but the spec image reported"
        );
        let other = state(json!({"c0": {"imageID": "img01"}}));
        assert!(
            check_completed(&p, None, Some(&other))
                .unwrap_err()
                .starts_with("not found statuses of containers")
        );
        assert!(check_completed(&p, Some("{}"), Some(&st)).is_err(), "in grace");
    }

    // Kruise defaultCheckContainersInPlaceUpdateCompleted with runtime-containers-meta: when every spec
    // container is reported with the running containerID and the plain hash of its spec (kubelet
    // HashContainer: name + image), the update is complete before the imageID rule is looked at. A new
    // tag of one digest: same imageID, and containerd reports the image's first tag (the old one).
    #[test]
    fn the_node_agents_report_completes_a_same_digest_tag() {
        let same = state(json!({"c1": {"imageID": "sha256:aa"}}));
        let retagged = pod("foo:v2", "foo:v1", "sha256:aa", "containerd://2");
        assert!(
            check_completed(&retagged, None, Some(&same)).is_err(),
            "no report: status rule"
        );
        let reported = with_meta(retagged.clone(), "containerd://2", "foo:v2");
        assert_eq!(check_completed(&reported, None, Some(&same)), Ok(()));
        // A report about the old container (the agent has not seen the restart yet) is stale: fallback.
        let old_container = with_meta(retagged.clone(), "containerd://1", "foo:v2");
        assert_eq!(
            check_completed(&old_container, None, Some(&same)),
            Err("container c1 imageID not changed".into())
        );
        // The running container is the old spec's (plain hash of foo:v1): fallback.
        let old_image = with_meta(retagged.clone(), "containerd://2", "foo:v1");
        assert!(check_completed(&old_image, None, Some(&same)).is_err());
        // A stale report never blocks a completion the status shows (Kruise: "kruise-daemon has broken").
        let moved = with_meta(
            pod("foo:v2", "foo:v2", "sha256:bb", "containerd://2"),
            "containerd://1",
            "foo:v1",
        );
        assert_eq!(check_completed(&moved, None, Some(&same)), Ok(()));
        // An unreadable report fails the check (Kruise GetRuntimeContainerMetaSet's error).
        let mut bad = retagged;
        bad.metadata.annotations =
            Some([(RUNTIME_CONTAINERS_META_ANNOTATION.to_string(), "{".to_string())].into());
        let e = check_completed(&bad, None, Some(&same)).unwrap_err();
        assert!(
            e.starts_with("unreadable apps.kruise.io/runtime-containers-meta"),
            "{e}"
        );
    }

    // Kruise checkAllContainersHashConsistent requires *every spec container* in the report: a pod whose
    // second container is missing from it falls back to the status rule.
    #[test]
    fn a_report_missing_a_container_is_not_consistent() {
        let mut p = with_meta(
            pod("foo:v2", "foo:v1", "sha256:aa", "containerd://2"),
            "containerd://2",
            "foo:v2",
        );
        let spec = p.spec.as_mut().unwrap();
        let mut c2 = spec.containers[0].clone();
        c2.name = "c2".into();
        spec.containers.push(c2);
        let st = p.status.as_mut().unwrap().container_statuses.as_mut().unwrap();
        let mut s2 = st[0].clone();
        s2.name = "c2".into();
        s2.container_id = Some("containerd://3".into());
        st.push(s2);
        let meta = RuntimeContainerMetaSet::of(&p).unwrap().unwrap();
        let e = envmeta::hashes_consistent(&p, &meta, envmeta::HashKind::Plain).unwrap_err();
        assert!(e.contains("c2 is not in the node agent's report"), "{e}");
        let same = state(json!({"c1": {"imageID": "sha256:aa"}}));
        assert!(check_completed(&p, None, Some(&same)).is_err());
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
