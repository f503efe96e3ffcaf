//! One container as the runtime sees it: its instances, phase (pull, create, run, stop, back-off) and deadline.

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::jiff::Timestamp;

use insitu_api::containermeta::{self, MetaKind};

use super::super::resize::Res;
use super::configmaps::{CmRef, cm_refs};
use super::spec::CSpec;
use super::{Env, KEvent, Kind};

/// One container instance the runtime created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Instance {
    pub(super) id: String,
    pub(super) image: String,
    pub(super) image_id: String,
    pub(super) started_at: Timestamp,
    pub(super) exit: Option<Exit>,
    /// Kruise's env-from-metadata hash of the downward-API values this instance started with (the env a
    /// container sees is fixed at its start).
    pub(super) env_hash: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Exit {
    pub(super) at: Timestamp,
    pub(super) code: i32,
    pub(super) reason: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AfterStop {
    Restart,
    Final,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for earlier init containers.
    Blocked,
    /// Will begin (pull, create, start) at `at`, once the pod worker is free.
    Queued { at: Timestamp },
    /// Pulling `image`; done at `at`.
    Pulling {
        at: Timestamp,
        image: String,
        began: Timestamp,
        fails: bool,
    },
    /// The pull of `image` failed; `ImagePullBackOff` shows from `show_at`, retry at `at`.
    PullFailed {
        show_at: Option<Timestamp>,
        at: Timestamp,
        image: String,
        first: bool,
    },
    /// Image present; the container runs at `at`.
    Creating { at: Timestamp, image: String },
    /// `CreateContainerConfigError` (an env ConfigMap or key is missing); the kubelet retries at `at`.
    ConfigError { at: Timestamp, message: String },
    /// Started; its postStart hook runs, and the kubelet reports the outcome at `at`.
    PostStart { at: Timestamp, fails: bool },
    /// Running; pending probe passes and exit.
    Running {
        started_at: Option<Timestamp>,
        ready_at: Option<Timestamp>,
        exit_at: Option<(Timestamp, i32)>,
    },
    /// preStop + SIGTERM in progress; exits at `at`.
    Stopping { at: Timestamp, then: AfterStop },
    /// Exited; `CrashLoopBackOff` until `at`.
    CrashBackOff {
        at: Timestamp,
        exited: Timestamp,
        backoff: Duration,
    },
    /// Done for good.
    Exited,
}

/// One container of a pod, as the runtime sees it.
#[derive(Clone, Debug)]
pub struct ContainerRt {
    pub(super) name: String,
    pub(super) kind: Kind,
    pub(super) spec: CSpec,
    pub(super) restart_count: i32,
    pub(super) current: Option<Instance>,
    pub(super) last: Option<Instance>,
    pub(super) phase: Phase,
    pub(super) ready: bool,
    pub(super) started: bool,
    /// Crash-loop back-off entry: (duration, last update).
    pub(super) crash: Option<(Duration, Timestamp)>,
    pub(super) pull_backoff: Option<Duration>,
    /// Exited without ever running (pod terminated first).
    pub(super) never_ran: bool,
    /// Env vars read from pod labels/annotations (downward API): `(env name, kind, key)`.
    pub(super) env_refs: Vec<(String, MetaKind, String)>,
    /// Required ConfigMap references of its env.
    pub(super) cm_refs: Vec<CmRef>,
    /// Desired, allocated and actuated resources (in-place resize).
    pub(super) res: Res,
}

impl ContainerRt {
    pub(super) fn new(c: &Container, kind: Kind) -> Self {
        Self {
            env_refs: containermeta::env_from_metadata(c)
                .map(|(n, k, key)| (n.to_string(), k, key.to_string()))
                .collect(),
            cm_refs: cm_refs(c),
            name: c.name.clone(),
            kind,
            spec: CSpec::from(c),
            restart_count: 0,
            current: None,
            last: None,
            phase: Phase::Blocked,
            ready: false,
            started: false,
            crash: None,
            pull_backoff: None,
            never_ran: false,
            res: Res::from_spec(c),
        }
    }

    pub(super) fn deadline(&self) -> Option<Timestamp> {
        match &self.phase {
            Phase::Queued { at }
            | Phase::Pulling { at, .. }
            | Phase::Creating { at, .. }
            | Phase::ConfigError { at, .. }
            | Phase::PostStart { at, .. }
            | Phase::Stopping { at, .. }
            | Phase::CrashBackOff { at, .. } => Some(*at),
            Phase::PullFailed { show_at, at, .. } => Some(show_at.map_or(*at, |s| s.min(*at))),
            Phase::Running {
                started_at,
                ready_at,
                exit_at,
            } => [*started_at, *ready_at, exit_at.map(|e| e.0)]
                .into_iter()
                .flatten()
                .min(),
            Phase::Blocked | Phase::Exited => None,
        }
    }

    pub(super) fn field_path(&self) -> String {
        match self.kind {
            Kind::Regular => format!("spec.containers{{{}}}", self.name),
            Kind::Init | Kind::Sidecar => format!("spec.initContainers{{{}}}", self.name),
        }
    }

    pub(super) fn event(
        &self,
        env: &mut Env<'_>,
        at: Timestamp,
        warning: bool,
        reason: &'static str,
        message: String,
    ) {
        env.events.push(KEvent {
            at,
            warning,
            reason,
            message,
            field_path: Some(self.field_path()),
        });
    }

    pub(super) fn exited_ok(&self) -> bool {
        self.phase == Phase::Exited
            && self
                .current
                .as_ref()
                .and_then(|i| i.exit.as_ref())
                .is_some_and(|e| e.code == 0)
    }
}

/// Why a container is being killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KillWhy {
    DefinitionChanged,
    PodDeleted,
    /// A resize of a resource with `resizePolicy: RestartContainer`.
    ResizeRestart,
}
