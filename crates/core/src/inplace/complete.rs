//! In-place completion (Kruise `DefaultCheckInPlaceUpdateCompleted`) and the next container batch.

use std::collections::{BTreeMap, BTreeSet};

use insitu_api::inplace::InPlaceUpdateState;
use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::batch::{Changes, patch_spec_to_pod};
use super::time;
use crate::envmeta;
use crate::plan::PodMutation;

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
