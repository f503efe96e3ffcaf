//! The plan's side steps Kruise runs outside scale and update: the launch-priority barrier and image pre-download.

use crate::launch_priority::{self, COMPLETED_ANNOTATION};
use crate::model::plan::Action;
use crate::model::summary::PodSummary;
use crate::predownload::{self, Input};

use super::Planner;
use k8s_openapi::api::apps::v1::ControllerRevision;

impl Planner<'_> {
    /// Kruise's container-launch-priority controller (`pkg/controller/containerlaunchpriority`, `Reconcile`) for
    /// the CloneSet's pods still launching: one barrier step per pod (see [`launch_priority::next_step`]).
    pub(super) fn launch_barriers(&mut self, summaries: &[PodSummary]) {
        if !launch_priority::cloneset_uses_priority(self.cs, &self.s.revisions) {
            return;
        }
        self.plan.launch_priority = true;
        let uid = self.cs.metadata.uid.as_deref().unwrap_or_default();
        let ns = self.cs.metadata.namespace.as_deref();
        for sm in summaries {
            let meta = sm.meta();
            let controlled = meta
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid);
            if meta.namespace.as_deref() != ns
                || !controlled
                || meta.deletion_timestamp.is_some()
                || sm.annotations().get(COMPLETED_ANNOTATION) == Some("true")
            {
                continue;
            }
            let Some(step) = launch_priority::next_step(&sm.pod()) else {
                continue;
            };
            self.why(format!(
                "launch priority: pod {} needs barrier key {}{}",
                sm.name(),
                step.key,
                if step.complete { ", then is complete" } else { "" }
            ));
            self.plan.actions.push(Action::LaunchBarrier {
                pod: sm.name().to_string(),
                uid: sm.uid().to_string(),
                barrier: launch_priority::barrier_name(sm.name()),
                key: step.key,
                complete: step.complete,
            });
        }
    }

    /// Kruise's pre-download step (`createImagePullJobsForInPlaceUpdate`, `DeleteJobsForWorkload`), after the
    /// round's revisions and before scale and update, when the snapshot knows the CloneSet's ImagePullJobs.
    /// The revisions are those the round settled on, so a revision created this round has its jobs at once
    /// (Kruise uses the update revision in the round `getActiveRevisions` creates it).
    pub(super) fn predownload(&mut self, current: &ControllerRevision, update: &ControllerRevision) {
        let Some(owned) = &self.s.image_pull_jobs else {
            return;
        };
        let p = predownload::plan(&Input {
            cs: self.cs,
            current: Some(current),
            update: Some(update),
            owned_jobs: owned,
            vertical: self.gates.in_place_workload_vertical_scaling,
        });
        self.why(p.why);
        for job in p.create {
            let name = job["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let image = job["spec"]["image"].as_str().unwrap_or_default().to_string();
            self.plan.actions.push(Action::CreateImagePullJob {
                name,
                image,
                job: Box::new(job),
            });
        }
        if let Some((name, label)) = p.label_revision {
            self.plan.actions.push(Action::LabelRevision {
                name,
                label: label.to_string(),
            });
        }
        for name in p.delete {
            self.plan.actions.push(Action::DeleteImagePullJob { name });
        }
    }
}
