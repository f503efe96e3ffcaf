//! The explanation: a plan rendered for people (`insitu plan -o text`) and for tools (`-o json`, issue 3's shape).
//!
//! Per pod, [`podwhy`] says whether its next update goes in place and what it waits for (`insitu explain`), and
//! [`podtable`] is the monitor's table (`insitu demo`, `insitu status`).

pub mod podtable;
pub mod podwhy;

use std::fmt::Write;

use serde::Serialize;

use crate::model::plan::{Action, Budget, Plan};

/// The `insitu plan -o json` document, fields in the order of issue 3.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanOutput<'a> {
    pub current_revision: &'a str,
    pub update_revision: &'a str,
    pub budget: &'a Budget,
    pub actions: &'a [Action],
    pub requeue_after_seconds: Option<f64>,
}

/// `{"currentRevision","updateRevision","budget":{..},"actions":[..],"requeueAfterSeconds"}`.
pub fn json(plan: &Plan) -> PlanOutput<'_> {
    PlanOutput {
        current_revision: &plan.current_revision,
        update_revision: &plan.update_revision,
        budget: &plan.budget,
        actions: &plan.actions,
        requeue_after_seconds: plan.requeue_after.map(|d| d.as_secs_f64()),
    }
}

/// One line per budget number: its value and what it means (the names of Kruise's
/// `calculateDiffsWithExpectation`, `sync/cloneset_sync_utils.go`).
pub(crate) fn budget_lines(b: &Budget) -> Vec<String> {
    let rows: [(&str, i32, &str); 13] = [
        (
            "partition",
            b.partition,
            "pods kept at the current revision (updateStrategy.partition; percent rounds up)",
        ),
        (
            "maxSurge",
            b.max_surge,
            "pods allowed above replicas while updating (rounds up; 0 when paused)",
        ),
        (
            "maxUnavailable",
            b.max_unavailable,
            "pods allowed unavailable (default 20%; rounds up without surge, down with surge)",
        ),
        (
            "scaleUpNum",
            b.scale_up_num,
            "pods missing: replicas + useSurge − current pods",
        ),
        (
            "scaleUpNumOldRevision",
            b.scale_up_num_old_revision,
            "of those, at the current revision: partition + useSurgeOldRevision − current old pods",
        ),
        (
            "scaleUpLimit",
            b.scale_up_limit,
            "pods created this round: min(scaleUpNum, scaleStrategy.maxUnavailable − unavailable)",
        ),
        (
            "scaleDownNum",
            b.scale_down_num,
            "pods in excess: current − specified deletes − (replicas + useSurge)",
        ),
        (
            "scaleDownNumOldRevision",
            b.scale_down_num_old_revision,
            "of those, taken from the current revision first",
        ),
        (
            "deleteReadyLimit",
            b.delete_ready_limit,
            "ready pods that may be deleted now: maxUnavailable + (pods − replicas) − unavailable",
        ),
        (
            "useSurge",
            b.use_surge,
            "surge pods used for specified deletes or for moving pods between revisions",
        ),
        (
            "useSurgeOldRevision",
            b.use_surge_old_revision,
            "of those, at the current revision",
        ),
        (
            "updateNum",
            b.update_num,
            "pods to move to the update revision (negative: back to the current one)",
        ),
        (
            "updateMaxUnavailable",
            b.update_max_unavailable,
            "maxUnavailable + (pods − replicas): cap on unavailable pods while updating",
        ),
    ];
    rows.iter()
        .map(|(k, v, what)| format!("{k:>24} = {v:<6} {what}"))
        .collect()
}

/// One line per action.
pub(crate) fn action_line(a: &Action) -> String {
    match a {
        Action::CreateRevision { revision } => format!(
            "create ControllerRevision {} (revision {})",
            revision.metadata.name.as_deref().unwrap_or_default(),
            revision.revision
        ),
        Action::BumpRevision { name, revision, .. } => {
            format!("bump ControllerRevision {name} to revision {revision}")
        }
        Action::DeleteRevision { name } => format!("delete ControllerRevision {name}"),
        Action::CreatePod { pod, revision } => {
            format!(
                "create pod {} at revision {revision}",
                pod.meta().name.as_deref().unwrap_or_default()
            )
        }
        Action::DeletePod { pod, reason, .. } => format!("delete pod {pod} ({reason})"),
        Action::CreatePvc { pvc } => format!(
            "create PersistentVolumeClaim {}",
            pvc.metadata.name.as_deref().unwrap_or_default()
        ),
        Action::DeletePvc { name, reason, .. } => format!("delete PersistentVolumeClaim {name} ({reason})"),
        Action::ReleasePvc { name, pod, .. } => {
            format!("hand PersistentVolumeClaim {name} over to pod {pod} (ownerReference)")
        }
        Action::SetInPlaceUpdateReady { pod, ready, .. } => {
            format!(
                "set pod {pod} condition InPlaceUpdateReady={}",
                if *ready { "True" } else { "False" }
            )
        }
        Action::SetKruisePodReady { pod, messages, .. } => {
            if messages.is_empty() {
                format!("set pod {pod} condition KruisePodReady=True")
            } else {
                format!(
                    "set pod {pod} condition KruisePodReady=False ({})",
                    crate::lifecycle::message_json(messages)
                )
            }
        }
        Action::UpdatePod {
            pod,
            mutation,
            reason,
            ..
        } => {
            let images: Vec<String> = mutation
                .container_images
                .iter()
                .map(|(c, i)| format!("{c}={i}"))
                .collect();
            if images.is_empty() {
                format!("update pod {pod} ({reason:?})")
            } else {
                format!("update pod {pod} ({reason:?}): images {}", images.join(", "))
            }
        }
        Action::PatchPodMetadata {
            pod, labels, reason, ..
        } => {
            let l: Vec<String> = labels
                .iter()
                .map(|(k, v)| match v {
                    Some(v) => format!("{k}={v}"),
                    None => format!("-{k}"),
                })
                .collect();
            format!("patch pod {pod} ({reason:?}): {}", l.join(", "))
        }
        Action::ReleasePod { pod, .. } => format!("release pod {pod} (remove the ownerReference)"),
        Action::AdoptPod { pod, .. } => format!("adopt pod {pod} (set the controller reference)"),
        Action::TruncatePodsToDelete { remove } => {
            format!(
                "remove {} from spec.scaleStrategy.podsToDelete",
                remove.join(", ")
            )
        }
        Action::LaunchBarrier {
            pod,
            barrier,
            key,
            complete,
            ..
        } => {
            let then = if *complete {
                ", then mark the pod launch-priority completed"
            } else {
                ""
            };
            format!("launch priority: key {key} in ConfigMap {barrier} of pod {pod}{then}")
        }
        Action::CreateImagePullJob { name, image, .. } => {
            format!("create ImagePullJob {name} (pre-download {image})")
        }
        Action::LabelRevision { name, label } => format!("label revision {name} {label}=true"),
        Action::DeleteImagePullJob { name } => format!("delete ImagePullJob {name}"),
    }
}

/// The full text report: revisions, budget, actions, requeue, then the planner's reasoning.
pub fn text(plan: &Plan, notes: &[String]) -> String {
    let mut out = String::new();
    for n in notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(out, "current revision: {}", plan.current_revision);
    let _ = writeln!(out, "update revision:  {}", plan.update_revision);
    let _ = writeln!(out, "budget:");
    for l in budget_lines(&plan.budget) {
        let _ = writeln!(out, "{l}");
    }
    if plan.actions.is_empty() {
        let _ = writeln!(out, "actions: none");
    } else {
        let _ = writeln!(out, "actions ({}, in order):", plan.actions.len());
        for a in &plan.actions {
            let _ = writeln!(out, "  - {}", action_line(a));
        }
    }
    if let Some(st) = &plan.status {
        let _ = writeln!(
            out,
            "status to write: replicas {} ready {} available {} updated {} updatedReady {} expectedUpdated {}",
            st.replicas,
            st.ready_replicas,
            st.available_replicas,
            st.updated_replicas,
            st.updated_ready_replicas,
            st.expected_updated_replicas
        );
    }
    match plan.requeue_after {
        Some(d) => {
            let _ = writeln!(out, "look again in {:.3}s", d.as_secs_f64());
        }
        None => {
            let _ = writeln!(out, "look again on the next change");
        }
    }
    let _ = writeln!(out, "why:");
    for e in &plan.explanation {
        let _ = writeln!(out, "  {e}");
    }
    out
}
