//! `insitu explain`: per pod, whether its next update goes in place or recreates it and why (the exact fields),
//! its stage (None / Preparing / Updating / Updated, docs/operations.md, "A pod's stage with plain kubectl")
//! and what it waits for.

use std::fmt::Write;

use insitu_api::keys;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use crate::inplaceupdate;
use crate::model::plan::{Action, Plan, UpdateReason};
use crate::recreate::Refusal;
use crate::{Snapshot, revision};

/// One pod, explained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodWhy {
    pub name: String,
    /// The revision hash the pod carries (`controller-revision-hash`).
    pub revision: String,
    /// None / Preparing / Updating / Updated.
    pub stage: &'static str,
    /// `up to date`, `in place`, or `recreate` (with `refusal`).
    pub next: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// What the pod waits for (grace left, kubelet, readiness, hook, …).
    pub waits: Vec<String>,
    /// What this round does to it, if anything.
    pub this_round: Vec<String>,
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn condition(pod: &Pod, type_: &str) -> Option<bool> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status == "True")
}

/// The seed phase of a pod, from Kruise's fields (the table in docs/operations.md, "A pod's stage").
pub fn stage(pod: &Pod) -> (&'static str, Vec<String>) {
    let grace = annotation(pod, keys::INPLACE_UPDATE_GRACE_ANNOTATION);
    let state = annotation(pod, keys::INPLACE_UPDATE_STATE_ANNOTATION);
    let gate = condition(pod, keys::INPLACE_UPDATE_READY);
    let mut waits = Vec::new();
    if gate == Some(false) && grace.is_some() {
        waits.push("the in-place grace period (apps.kruise.io/inplace-update-grace) to end".into());
        return ("Preparing", waits);
    }
    // A resize under resizePolicy NotRequired never marks the pod not-ready (Kruise
    // defaultCheckPodNeedsBeUnready): its lifecycle label `Updating` says the update is in flight.
    let lc_updating = label(pod, keys::LIFECYCLE_STATE_LABEL) == Some(keys::lifecycle::UPDATING);
    if gate == Some(false) || (state.is_some() && (gate.is_none() || lc_updating)) {
        if let Err(e) = inplaceupdate::check_completed(pod, grace, state) {
            waits.push(updating_wait(pod, state, &e));
            return ("Updating", waits);
        }
        if condition(pod, "Ready") != Some(true) {
            waits.push("readiness after the in-place update".into());
        }
        if gate == Some(false) {
            waits.push("the controller to set InPlaceUpdateReady=True".into());
        } else if lc_updating {
            waits.push("the controller to end the update (lifecycle Updating → Normal)".into());
        }
        return ("Updated", waits);
    }
    if condition(pod, "Ready") != Some(true) {
        waits.push("Ready".into());
    }
    ("None", waits)
}

/// What an in-place update in flight waits for: the kubelet's resize (Kruise waits on `PodResizePending`
/// as long as it lasts), the node agent for env from metadata (only kruise-daemon restarts those
/// containers), else the kubelet's container statuses.
fn updating_wait(pod: &Pod, state: Option<&str>, not_done: &str) -> String {
    let st = state.and_then(|s| inplaceupdate::parse_state(s).ok());
    if st.as_ref().is_some_and(|s| s.update_resources)
        && let Some((reason, message)) = crate::inplaceupdate::vertical::resize_pending(pod)
    {
        let then = if reason == "Infeasible" {
            "the node can never fit it: the update waits as in Kruise (no recreate); lower the request or move the pod"
        } else {
            "the kubelet applies it when the node has room"
        };
        return format!("the resize: PodResizePending {reason} ({message}); {then}");
    }
    if st.as_ref().is_some_and(|s| s.update_env_from_metadata)
        && annotation(pod, insitu_api::containermeta::RUNTIME_CONTAINERS_META_ANNOTATION).is_none()
    {
        return format!(
            "a node agent (kruise-daemon) to restart the containers whose env reads a changed label/annotation: the pod has no {}, so nothing on its node restarts them",
            insitu_api::containermeta::RUNTIME_CONTAINERS_META_ANNOTATION
        );
    }
    format!("the kubelet: {not_done}")
}

/// Why a pod that is not at the update revision got no write this round: its lifecycle hook, the
/// partition, or maxUnavailable (Kruise `limitUpdateIndexes`), from the plan's budget.
fn turn_waits(s: &Snapshot, plan: &Plan, pod: &Pod) -> Vec<String> {
    if label(pod, keys::LIFECYCLE_STATE_LABEL) == Some(keys::lifecycle::PREPARING_UPDATE) {
        let hook = s
            .cloneset
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.in_place_update.as_ref());
        if crate::lifecycle::is_hooked(hook, (&pod.metadata.labels).into(), &pod.metadata) {
            return vec![
                "the lifecycle.inPlaceUpdate hook: the pod stays PreparingUpdate until its hook label/finalizer is removed"
                    .into(),
            ];
        }
    }
    let b = &plan.budget;
    if b.update_num == 0 && b.partition > 0 {
        return vec![format!(
            "the partition: updateStrategy.partition {} keeps that many pods at old revisions",
            b.partition
        )];
    }
    if b.update_num != 0 {
        return vec![format!(
            "its batch: at most {} pod(s) may be unavailable at the update revision (maxUnavailable {}); the next pods update as updated ones become available",
            b.update_max_unavailable.max(0),
            b.max_unavailable
        )];
    }
    Vec::new()
}

fn round_actions(plan: &Plan, pod: &str) -> Vec<String> {
    let mut out = Vec::new();
    for a in &plan.actions {
        let s = match a {
            Action::UpdatePod { pod: p, reason, .. } if p == pod => match reason {
                UpdateReason::StartInPlaceUpdate => "starts an in-place update",
                UpdateReason::FinishGracePeriod => "finishes the grace period (containers patched)",
                UpdateReason::NextBatch => "patches the next container batch",
                _ => "updates the pod",
            },
            Action::PatchPodMetadata { pod: p, reason, .. } if p == pod => match reason {
                UpdateReason::Recreate => "marks it for recreation (apps.kruise.io/specified-delete)",
                UpdateReason::Lifecycle => "moves its lifecycle state",
                UpdateReason::BackfillHash => "adds the pod-template-hash label",
                _ => "patches its metadata",
            },
            Action::DeletePod { pod: p, .. } if p == pod => "deletes it",
            Action::SetInPlaceUpdateReady { pod: p, ready, .. } if p == pod => {
                if *ready {
                    "sets InPlaceUpdateReady=True"
                } else {
                    "sets InPlaceUpdateReady=False"
                }
            }
            _ => continue,
        };
        out.push(s.to_string());
    }
    out
}

fn template(
    revs: &[std::sync::Arc<ControllerRevision>],
    pred: impl Fn(&ControllerRevision) -> bool,
) -> Option<&serde_json::Value> {
    revs.iter()
        .find(|r| pred(r))
        .and_then(|r| revision::template_value(r))
}

/// Every pod of the snapshot, explained against the plan made from it.
pub fn pods(s: &Snapshot, plan: &Plan) -> Vec<PodWhy> {
    let vertical = s.gates.in_place_workload_vertical_scaling;
    let target = template(&s.revisions, |r| {
        r.metadata.name.as_deref() == Some(plan.update_revision.as_str())
    });
    let mut out = Vec::new();
    for pod in &s.pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let rev = label(pod, keys::CONTROLLER_REVISION_HASH_LABEL)
            .unwrap_or_default()
            .to_string();
        let (stage, mut waits) = stage(pod);
        let up_to_date = revision::equal_to_revision(&rev, &plan.update_revision);
        let (next, refusal) = if up_to_date {
            ("up to date", None)
        } else {
            let old = template(&s.revisions, |r| {
                r.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| revision::equal_to_revision(&rev, n))
            });
            match (old, target) {
                (Some(o), Some(t)) => match inplaceupdate::calculate(o, t, vertical) {
                    Ok(_) => ("in place", None),
                    Err(m) => ("recreate", Some(Refusal::from_templates(m, o, t, vertical))),
                },
                _ => (
                    "recreate",
                    Some(Refusal::other(format!("revision {rev:?} of the pod not found"))),
                ),
            }
        };
        let mut this_round = round_actions(plan, &name);
        if this_round.is_empty() && !up_to_date {
            this_round
                .push("nothing yet (partition, maxUnavailable or the previous batch decide when)".into());
            waits.extend(turn_waits(s, plan, pod));
        }
        out.push(PodWhy {
            name,
            revision: rev,
            stage,
            next,
            refusal,
            waits,
            this_round,
        });
    }
    out
}

/// The text of `insitu explain`: one block per pod.
pub fn text(pods: &[PodWhy]) -> String {
    let mut t = String::new();
    for p in pods {
        let _ = writeln!(t, "pod {} (revision {}): stage {}", p.name, p.revision, p.stage);
        match &p.refusal {
            Some(r) => {
                let _ = writeln!(t, "  next update: recreate — {}", r.describe());
            }
            None => {
                let _ = writeln!(t, "  next update: {}", p.next);
            }
        }
        for w in &p.waits {
            let _ = writeln!(t, "  waits for: {w}");
        }
        for a in &p.this_round {
            let _ = writeln!(t, "  this round: {a}");
        }
    }
    if pods.is_empty() {
        t.push_str("no pods\n");
    }
    t
}

#[cfg(test)]
mod tests;
