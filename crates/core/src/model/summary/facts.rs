//! `Intrinsics::of`: the one pass over a pod that makes its summary facts, and Kruise's in-place completion check it runs.

use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;

use super::{Intrinsics, NamePrefix, ShortHash, pack};
use crate::inplaceupdate;
use crate::model::podmeta::{self as pods, Lc};

/// Kruise's in-place completion check on this pod version, made once per version (it reads nothing but
/// the pod) and only where the planner's Refresh step asks for it: a state annotation, no grace period,
/// and an update that may be in flight (lifecycle `Updating`, or `InPlaceUpdateReady` not True). A plan
/// with thousands of pods mid-update then parses no JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InFlight {
    /// Not checked: no state, a grace period, or a settled pod.
    Unchecked,
    /// The state annotation does not parse.
    Invalid,
    /// Some container recorded in the state has not restarted with its new image yet.
    Waiting,
    /// Env from metadata waits for a node agent that never reported on this pod (no
    /// `apps.kruise.io/runtime-containers-meta`): without kruise-daemon nothing restarts the containers.
    NoNodeAgent,
    /// The resize waits on the kubelet's `PodResizePending` (Deferred / Infeasible): Kruise waits too.
    ResizePending,
    /// Every container of the last batch is updated and no batch is left.
    Done,
    /// The last batch is updated and another batch of containers waits (`nextContainerImages`,
    /// `nextContainerResources`).
    NextBatch,
}

impl InFlight {
    pub(crate) fn check(pod: &Pod, state: &str) -> InFlight {
        match inplaceupdate::parse_state(state) {
            Err(_) => InFlight::Invalid,
            Ok(st) => match inplaceupdate::containers_completed(pod, &st) {
                Err(_)
                    if st.update_resources
                        && crate::inplaceupdate::vertical::resize_pending(pod).is_some() =>
                {
                    InFlight::ResizePending
                }
                Err(_)
                    if st.update_env_from_metadata
                        && !pod.metadata.annotations.as_ref().is_some_and(|a| {
                            a.contains_key(insitu_api::containermeta::RUNTIME_CONTAINERS_META_ANNOTATION)
                        }) =>
                {
                    InFlight::NoNodeAgent
                }
                Err(_) => InFlight::Waiting,
                Ok(()) if !inplaceupdate::has_next_batch(&st) => InFlight::Done,
                Ok(()) => InFlight::NextBatch,
            },
        }
    }
}

impl Intrinsics {
    /// One pass over labels, annotations and conditions each. It borrows (no allocation), reads only the
    /// keys it knows (a `str` match compares lengths first, so unrelated keys are skipped without touching
    /// their bytes) and parses only the in-place state of a pod whose update may be in flight (`InFlight`).
    /// No selector answer (`has_selector` false).
    pub fn of(whole: &Pod) -> Intrinsics {
        let meta = &whole.metadata;
        let status = whole.status.as_ref();
        // The phase, read once: (terminated, running, k8s podPhaseToOrdinal: Pending 0, Unknown 1, Running 2).
        let (terminated, running, phase_ord) = match status.and_then(|s| s.phase.as_deref()) {
            Some("Succeeded" | "Failed") => (true, false, 0),
            Some("Running") => (false, true, 2),
            Some("Unknown") => (false, false, 1),
            _ => (false, false, 0),
        };
        let active = !terminated && meta.deletion_timestamp.is_none();

        // `if let` + plain loops rather than `iter().flatten()` over the `Option`s: the flatten adapter
        // costs more per element than the match itself.
        let (mut lifecycle, mut revision, mut specified_label, mut has_template_hash) =
            ("", "", false, false);
        if let Some(labels) = &meta.labels {
            for (k, v) in labels {
                match k.as_str() {
                    keys::LIFECYCLE_STATE_LABEL => lifecycle = v,
                    keys::CONTROLLER_REVISION_HASH_LABEL => revision = v,
                    keys::SPECIFIED_DELETE_LABEL => specified_label = true,
                    keys::POD_TEMPLATE_HASH_LABEL => has_template_hash = true,
                    _ => {}
                }
            }
        }
        let (mut grace, mut grace_old, mut state, mut state_old, mut deletion_cost) =
            (None, None, None, None, 0);
        if let Some(annotations) = &meta.annotations {
            for (k, v) in annotations {
                match k.as_str() {
                    keys::INPLACE_UPDATE_GRACE_ANNOTATION => grace = Some(v.as_str()),
                    keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD => grace_old = Some(v.as_str()),
                    keys::INPLACE_UPDATE_STATE_ANNOTATION => state = Some(v.as_str()),
                    keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD => state_old = Some(v.as_str()),
                    keys::POD_DELETION_COST_ANNOTATION => deletion_cost = pods::deletion_cost(v),
                    _ => {}
                }
            }
        }
        let (mut ready, mut ready_since, mut ipu, mut has_kruise_ready) = (false, None, None, false);
        let mut kruise_ready_clean = false;
        if let Some(conditions) = status.and_then(|s| s.conditions.as_ref()) {
            for c in conditions {
                match c.type_.as_str() {
                    "Ready" => {
                        ready = c.status == "True";
                        ready_since = if ready {
                            c.last_transition_time.as_ref().map(|t| t.0)
                        } else {
                            None
                        };
                    }
                    keys::INPLACE_UPDATE_READY => ipu = Some(c.status == "True"),
                    keys::KRUISE_POD_READY => {
                        has_kruise_ready = true;
                        kruise_ready_clean =
                            c.status == "True" && c.message.as_deref().is_none_or(str::is_empty);
                    }
                    _ => {}
                }
            }
        }
        let (mut has_ipu_gate, mut has_kruise_gate) = (false, false);
        for g in whole.spec.iter().flat_map(|s| s.readiness_gates.iter().flatten()) {
            match g.condition_type.as_str() {
                keys::INPLACE_UPDATE_READY => has_ipu_gate = true,
                keys::KRUISE_POD_READY => has_kruise_gate = true,
                _ => {}
            }
        }
        let restarts = status
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0));
        let node_assigned = whole
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let (ready_since_s, ready_since_ns) = pack(ready_since);
        // As `grace()` and `state()` read them: the new key first, then the old one, never empty.
        let has_grace = grace.or(grace_old).is_some_and(|s| !s.is_empty());
        let state = state.or(state_old).filter(|s| !s.is_empty());
        let lc = Lc::parse(lifecycle);
        // The planner's Refresh condition (`Planner::refresh`).
        let may_change = lc == Lc::Updating || ipu != Some(true);
        let in_flight = match state {
            Some(st) if !has_grace && may_change => InFlight::check(whole, st),
            _ => InFlight::Unchecked,
        };
        let has_revision = !revision.is_empty();
        let (revision, name, created) = (
            ShortHash::of(revision),
            NamePrefix::of(meta.name.as_deref().unwrap_or("")),
            pack(meta.creation_timestamp.as_ref().map(|t| t.0)),
        );
        let (created_s, created_ns) = created;
        Intrinsics {
            ready_since_s,
            created_s,
            ready_since_ns,
            created_ns,
            selector: 0,
            has_selector: false,
            deletion_cost,
            restarts,
            revision,
            name,
            lc,
            phase_ord,
            ipu,
            active,
            ready,
            update_ready: running && ready && ipu.unwrap_or(true),
            has_kruise_ready,
            kruise_ready_clean,
            has_kruise_gate,
            has_ipu_gate,
            specified_label,
            has_template_hash,
            node_assigned,
            has_revision,
            has_grace,
            has_state: state.is_some(),
            in_flight,
            selected: false,
            deleting: meta.deletion_timestamp.is_some(),
            owner: None,
        }
    }
}
