//! The pod's container statuses as the kubelet reports them (state, last state, restarts, resources).

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
};

use super::super::image::normalize_image;
use super::super::status::to_time;
use super::container::{ContainerRt, Instance, Phase};
use super::{PodRt, go_duration};

impl PodRt {
    /// Container statuses `(init, regular)` for `status`; resources as allocated and actuated.
    pub fn statuses(&self) -> (Vec<ContainerStatus>, Vec<ContainerStatus>) {
        let has_init = self.n_init > 0;
        let mut init = Vec::with_capacity(self.n_init);
        let mut regular = Vec::with_capacity(self.containers.len() - self.n_init);
        for (i, c) in self.containers.iter().enumerate() {
            let s = self.status(c, has_init);
            if i < self.n_init {
                init.push(s)
            } else {
                regular.push(s)
            }
        }
        (init, regular)
    }

    pub(super) fn status(&self, c: &ContainerRt, has_init: bool) -> ContainerStatus {
        let terminated = |inst: &Instance| {
            inst.exit.as_ref().map(|e| ContainerStateTerminated {
                exit_code: e.code,
                reason: Some(e.reason.to_string()),
                started_at: Some(to_time(inst.started_at)),
                finished_at: Some(to_time(e.at)),
                container_id: Some(inst.id.clone()),
                ..Default::default()
            })
        };
        let state_of = |inst: Option<&Instance>| ContainerState {
            terminated: inst.and_then(terminated),
            ..Default::default()
        };
        let waiting = |reason: &str, message: Option<String>| ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.to_string()),
                message,
            }),
            ..Default::default()
        };
        let default_wait = if has_init {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        let current_exited = c.current.as_ref().filter(|i| i.exit.is_some());
        let (state, last_state) = match &c.phase {
            Phase::Running { .. } | Phase::Stopping { .. } => {
                let running = c.current.as_ref().map(|i| ContainerStateRunning {
                    started_at: Some(to_time(i.started_at)),
                });
                (
                    ContainerState {
                        running,
                        ..Default::default()
                    },
                    state_of(c.last.as_ref()),
                )
            }
            Phase::PullFailed { show_at, image, .. } => {
                let (reason, message) = if show_at.is_some() {
                    (
                        "ErrImagePull",
                        format!(
                            "rpc error: code = NotFound desc = failed to pull and unpack image \"{}\"",
                            normalize_image(image)
                        ),
                    )
                } else {
                    ("ImagePullBackOff", format!("Back-off pulling image \"{image}\""))
                };
                (waiting(reason, Some(message)), state_of(current_exited))
            }
            Phase::ConfigError { message, .. } => (
                waiting("CreateContainerConfigError", Some(message.clone())),
                state_of(current_exited.or(c.last.as_ref())),
            ),
            // The kubelet's status is only regenerated after the hook returns: still being created.
            Phase::PostStart { .. } => (waiting(default_wait, None), state_of(c.last.as_ref())),
            Phase::CrashBackOff { backoff, .. } => {
                let message = format!(
                    "back-off {} restarting failed container={} pod={}",
                    go_duration(*backoff),
                    c.name,
                    self.desc
                );
                (
                    waiting("CrashLoopBackOff", Some(message)),
                    state_of(current_exited),
                )
            }
            Phase::Exited if c.never_ran => (
                ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: 137,
                        reason: Some("ContainerStatusUnknown".into()),
                        message: Some(
                            "The container could not be located when the pod was terminated".into(),
                        ),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ContainerState::default(),
            ),
            _ => match current_exited {
                Some(cur) => (state_of(Some(cur)), state_of(c.last.as_ref())),
                None => (waiting(default_wait, None), ContainerState::default()),
            },
        };
        let (image, image_id, container_id) = match &c.current {
            Some(i) => (normalize_image(&i.image), i.image_id.clone(), Some(i.id.clone())),
            None => (normalize_image(&c.spec.image), String::new(), None),
        };
        let running = matches!(c.phase, Phase::Running { .. } | Phase::Stopping { .. });
        ContainerStatus {
            name: c.name.clone(),
            image,
            image_id,
            container_id,
            ready: c.ready,
            started: Some(c.started),
            restart_count: c.restart_count,
            state: Some(state),
            last_state: Some(last_state),
            allocated_resources: c.res.allocated.requests.clone().filter(|m| !m.is_empty()),
            resources: Some(c.res.status_resources(running)),
            ..Default::default()
        }
    }
}
