//! The seed's monitor (`insitu demo`, `insitu status`), as a table: one row per pod with its in-place update
//! stage (derived from Kruise's fields).

use std::fmt::Write as _;

use insitu_api::inplace::{InPlaceUpdateState, UpdateSpec};
use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;

/// The seed's four phases, derived from Kruise's real fields (docs/operations.md, "A pod's stage with plain
/// kubectl").
pub fn stage(pod: &Pod) -> &'static str {
    if annotation(pod, keys::INPLACE_UPDATE_GRACE_ANNOTATION).is_some() {
        return "Preparing";
    }
    let gate = condition(pod, keys::INPLACE_UPDATE_READY);
    let ready = condition(pod, "Ready") == Some("True");
    let state = annotation(pod, keys::INPLACE_UPDATE_STATE_ANNOTATION)
        .and_then(|s| serde_json::from_str::<InPlaceUpdateState>(s).ok());
    let restarting = state.as_ref().is_some_and(|st| {
        st.last_container_statuses
            .iter()
            .flatten()
            .any(|(name, last)| container_status(pod, name).is_some_and(|cs| cs.image_id == last.image_id))
    });
    let at_revision = state
        .as_ref()
        .is_some_and(|st| label(pod, keys::CONTROLLER_REVISION_HASH_LABEL) == Some(st.revision.as_str()));
    match (gate, ready) {
        // InPlaceUpdateReady just went False; the controller's pod write (state/grace) follows.
        (Some("False"), _) if !at_revision => "Preparing",
        (Some("False"), _) if restarting => "Updating",
        (Some("False"), _) => "Updated",
        // Containers restarted on the new image; waiting for the readiness probe.
        (_, false) if at_revision && !restarting => "Updated",
        _ => "None",
    }
}

/// The status of condition `ty` of `pod`.
pub fn condition<'a>(pod: &'a Pod, ty: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| c.status.as_str())
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn container_status<'a>(pod: &'a Pod, name: &str) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

fn lifecycle(pod: &Pod) -> &str {
    label(pod, keys::LIFECYCLE_STATE_LABEL).unwrap_or("")
}

/// Pod IP, or `<none>`.
pub fn ip(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_else(|| "<none>".into())
}

/// The first container's spec image.
pub fn image(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// The first container's restart count.
pub fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map(|c| c.restart_count)
        .unwrap_or(0)
}

/// `Ready` condition status as kubectl's custom-columns would print it.
pub fn ready(pod: &Pod) -> &str {
    condition(pod, "Ready").unwrap_or("<none>")
}

fn inplace_summary(pod: &Pod) -> String {
    if let Some(g) = annotation(pod, keys::INPLACE_UPDATE_GRACE_ANNOTATION)
        .and_then(|s| serde_json::from_str::<UpdateSpec>(s).ok())
    {
        let images: Vec<String> = g
            .container_images
            .iter()
            .map(|(c, i)| format!("{c}={i}"))
            .collect();
        return format!("grace {}s, pending {}", g.grace_seconds, images.join(","));
    }
    match annotation(pod, keys::INPLACE_UPDATE_STATE_ANNOTATION)
        .and_then(|s| serde_json::from_str::<InPlaceUpdateState>(s).ok())
    {
        Some(st) => {
            let rev = st.revision.rsplit('-').next().unwrap_or_default().to_string();
            let batches = st.container_batches_record.len();
            format!(
                "rev {rev}, since {}, batches {batches}",
                st.update_timestamp.0.strftime("%H:%M:%S")
            )
        }
        None => "-".into(),
    }
}

/// Renders the pod table (sorted by name).
pub fn table(pods: &[&Pod]) -> String {
    let mut rows: Vec<[String; 9]> = vec![[
        "NAME".into(),
        "PHASE".into(),
        "IP".into(),
        "READY".into(),
        "IMAGE".into(),
        "RESTARTS".into(),
        "STATE".into(),
        "STAGE".into(),
        "IN-PLACE".into(),
    ]];
    let mut sorted: Vec<&&Pod> = pods.iter().collect();
    sorted.sort_by_key(|p| name(p));
    for p in sorted {
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let phase = if p.metadata.deletion_timestamp.is_some() {
            "Terminating".to_string()
        } else {
            phase
        };
        rows.push([
            name(p).to_string(),
            phase,
            ip(p),
            ready(p).to_string(),
            image(p),
            restarts(p).to_string(),
            lifecycle(p).to_string(),
            stage(p).to_string(),
            inplace_summary(p),
        ]);
    }
    let widths: Vec<usize> = (0..9)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{:<w$}", c, w = widths[i]))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}
