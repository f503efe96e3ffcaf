//! What the StatefulSet controller reads of a pod (Kruise `stateful_set_utils.go`: `isHealthy`,
//! `isRunningAndReady`, `isRunningAndAvailable`, `isTerminating`, `getPodRevision`).

use std::time::Duration;

use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::model::podmeta::condition;

pub(crate) fn name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or_default()
}

pub(crate) fn uid(p: &Pod) -> &str {
    p.metadata.uid.as_deref().unwrap_or_default()
}

pub(crate) fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

pub(crate) fn annotation<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Kruise `getPodRevision`: the `controller-revision-hash` label.
pub(crate) fn revision(p: &Pod) -> &str {
    label(p, keys::CONTROLLER_REVISION_HASH_LABEL).unwrap_or_default()
}

/// The lifecycle state label (`""` when absent).
pub(crate) fn lifecycle(p: &Pod) -> &str {
    label(p, keys::LIFECYCLE_STATE_LABEL).unwrap_or_default()
}

pub(crate) fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

pub(crate) fn terminating(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

fn ready(p: &Pod) -> bool {
    condition(p, "Ready").is_some_and(|c| c.status == "True")
}

/// Kruise `isRunningAndReady`.
pub(crate) fn running_and_ready(p: &Pod) -> bool {
    phase(p) == "Running" && ready(p)
}

/// Kruise `isHealthy`: lifecycle absent or Normal, running, ready, not terminating.
pub(crate) fn healthy(p: &Pod) -> bool {
    let lc = lifecycle(p);
    (lc.is_empty() || lc == keys::lifecycle::NORMAL) && running_and_ready(p) && !terminating(p)
}

/// Kruise `isRunningAndAvailable`: `(true, None)` when available; `(false, Some(wait))` when it becomes
/// available after `wait` if nothing changes; `(false, None)` when it is not ready at all.
pub(crate) fn available(p: &Pod, min_ready_seconds: i32, now: Timestamp) -> (bool, Option<Duration>) {
    let lc = lifecycle(p);
    if !lc.is_empty() && lc != keys::lifecycle::NORMAL {
        return (false, None);
    }
    if !running_and_ready(p) {
        return (false, None);
    }
    if min_ready_seconds <= 0 {
        return (true, None);
    }
    let min = Duration::from_secs(u64::try_from(min_ready_seconds).unwrap_or(0));
    let Some(since) = condition(p, "Ready").and_then(|c| c.last_transition_time.as_ref()) else {
        return (false, Some(min));
    };
    let elapsed = now.duration_since(since.0).as_secs_f64();
    let left = min.as_secs_f64() - elapsed;
    if left > 0.0 {
        (false, Some(Duration::from_secs_f64(left)))
    } else {
        (true, None)
    }
}

/// Whether the pod carries the `InPlaceUpdateReady` readiness gate (the user's template put it there).
pub(crate) fn has_inplace_gate(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.condition_type == keys::INPLACE_UPDATE_READY))
}

/// The `InPlaceUpdateReady` condition is True.
pub(crate) fn inplace_ready(p: &Pod) -> bool {
    condition(p, keys::INPLACE_UPDATE_READY).is_some_and(|c| c.status == "True")
}

/// The in-place grace and state annotations (current keys, then Kruise's old ones).
pub(crate) fn grace(p: &Pod) -> Option<&str> {
    annotation(p, keys::INPLACE_UPDATE_GRACE_ANNOTATION)
        .or_else(|| annotation(p, keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD))
}

pub(crate) fn state(p: &Pod) -> Option<&str> {
    annotation(p, keys::INPLACE_UPDATE_STATE_ANNOTATION)
        .or_else(|| annotation(p, keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD))
}

/// Kruise `CheckPodUpdateCompleted` (`DefaultCheckInPlaceUpdateCompleted`) through the shared engine.
pub(crate) fn update_completed(p: &Pod) -> Result<(), String> {
    crate::inplaceupdate::check_completed(p, grace(p), state(p))
}
