//! Changes to a running pod: a new spec (image restarts, in-place resize), ConfigMaps, env from metadata,
//! termination, and what kruise-daemon reports about its containers.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use insitu_api::containermeta::{self, MetaKind, RuntimeContainerHashes, RuntimeContainerMeta};

use super::super::resize::Res;
use super::container::{AfterStop, KillWhy, Phase};
use super::spec::CSpec;
use super::{Env, KEvent, Kind, PodRt, add, termination_grace};

/// kruise-daemon's restarter adds a container to its queue rate-limited, so the first stop comes 3 s after the
/// change (Kruise `pkg/daemon/containermeta/container_meta_controller.go`, `NewController`:
/// `NewItemExponentialFailureRateLimiter(3*time.Second, …)`); `insitu agent` waits the same.
const ENV_RESTART_DELAY: Duration = Duration::from_secs(3);

impl PodRt {
    /// kubelet `handlePodResourcesResize` for the app containers, and the restarts it asks for.
    pub(super) fn sync_resize(&mut self, now: Timestamp, env: &mut Env<'_>) {
        if self.terminating {
            return;
        }
        let regular = &mut self.containers[self.n_init..];
        let names: Vec<String> = regular.iter().map(|c| c.name.clone()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut res: Vec<&mut Res> = regular.iter_mut().map(|c| &mut c.res).collect();
        let step = self.resize.sync(
            &self.desc,
            &names,
            &mut res,
            &mut env.node.alloc,
            self.generation,
            now,
        );
        for (warning, reason, message) in step.events {
            env.events.push(KEvent {
                at: now,
                warning,
                reason,
                message,
                field_path: None,
            });
        }
        // Only a running container restarts; one not running yet starts with the new allocation anyway.
        let n_init = self.n_init;
        for i in step.restart.into_iter().map(|i| n_init + i) {
            if matches!(self.containers[i].phase, Phase::Running { .. }) {
                let grace = self.grace;
                self.kill(i, now, AfterStop::Restart, grace, KillWhy::ResizeRestart, env);
            }
        }
    }

    /// A resize timer: the actuation finished, or a deferred resize is retried.
    pub(super) fn resize_step(&mut self, t: Timestamp, env: &mut Env<'_>) {
        if self.resize.retry_due(t) {
            self.sync_resize(t, env);
            return;
        }
        let regular = &mut self.containers[self.n_init..];
        let names: Vec<String> = regular.iter().map(|c| c.name.clone()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut res: Vec<&mut Res> = regular.iter_mut().map(|c| &mut c.res).collect();
        if let Some((warning, reason, message)) = self.resize.tick(&names, &mut res, t) {
            env.events.push(KEvent {
                at: t,
                warning,
                reason,
                message,
                field_path: None,
            });
        }
    }

    /// Applies a new pod spec: a changed image restarts that container (preStop, kill, pull, start).
    pub fn update_spec(&mut self, pod: &Pod, now: Timestamp, env: &mut Env<'_>) {
        self.see_metadata(pod);
        let Some(spec) = &pod.spec else { return };
        let all = spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter());
        let grace = termination_grace(pod);
        for c in all {
            let Some(i) = self.containers.iter().position(|r| r.name == c.name) else {
                continue;
            };
            let new = CSpec::from(c);
            let rt = &mut self.containers[i];
            rt.res.set_spec(c);
            if rt.spec == new {
                continue;
            }
            rt.spec = new;
            if self.terminating || rt.kind == Kind::Init {
                continue;
            }
            let image = rt.spec.image.clone();
            let running_other = rt
                .current
                .as_ref()
                .is_some_and(|inst| inst.image != image && inst.exit.is_none());
            match &rt.phase {
                Phase::Running { .. } if running_other => {
                    self.kill(i, now, AfterStop::Restart, grace, KillWhy::DefinitionChanged, env);
                }
                Phase::PullFailed { image: pulling, .. } if *pulling != image => {
                    rt.pull_backoff = None;
                    rt.phase = Phase::Queued { at: now };
                }
                Phase::CrashBackOff { .. } => {
                    rt.crash = None;
                    rt.phase = Phase::Queued { at: now };
                }
                _ => {}
            }
        }
        self.generation = pod.metadata.generation.unwrap_or(self.generation);
        self.grace = grace;
        self.sync_resize(now, env);
    }

    /// A ConfigMap in the pod's namespace changed: containers held in `CreateContainerConfigError` retry now
    /// (kubelet retries on its next pod sync; Kruise's barrier controller's pod patch triggers one).
    pub fn config_changed(&mut self, namespace: &str, now: Timestamp) {
        if namespace != self.namespace {
            return;
        }
        for c in &mut self.containers {
            if matches!(c.phase, Phase::ConfigError { .. }) {
                c.phase = Phase::Queued { at: now };
            }
        }
    }

    /// kruise-daemon's env-from-metadata restart (Kruise `pkg/daemon/containermeta`, `Controller.sync`):
    /// while the pod's `InPlaceUpdateReady` is False, a running app container whose env-from-metadata values
    /// differ from the pod's current labels/annotations is stopped through the runtime (no preStop: CRI
    /// StopContainer), and the kubelet starts it again (restartCount+1) with the new values. The stop comes
    /// `ENV_RESTART_DELAY` after the change is first seen, as Kruise's restarter queue adds it rate-limited.
    pub fn restart_stale_env(&mut self, pod: &Pod, now: Timestamp, env: &mut Env<'_>) {
        let updating = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "InPlaceUpdateReady" && c.status == "False");
        if !updating || self.terminating || self.stale_env().next().is_none() {
            self.env_restart_at = None;
            return;
        }
        let at = *self.env_restart_at.get_or_insert(add(now, ENV_RESTART_DELAY));
        if at <= now {
            self.restart_stale_now(now, env);
        }
    }

    /// The running app containers whose env-from-metadata values differ from the pod's labels/annotations.
    fn stale_env(&self) -> impl Iterator<Item = usize> + '_ {
        (self.n_init..self.containers.len()).filter(|&i| {
            let c = &self.containers[i];
            if c.env_refs.is_empty() || !matches!(c.phase, Phase::Running { .. }) {
                return false;
            }
            let want = env_hash(&c.env_refs, self.labels.as_ref(), self.annotations.as_ref());
            c.current
                .as_ref()
                .is_some_and(|inst| inst.exit.is_none() && inst.env_hash != want)
        })
    }

    /// The delayed restart is due: the containers still stale are stopped.
    pub(super) fn restart_stale_now(&mut self, now: Timestamp, env: &mut Env<'_>) {
        self.env_restart_at = None;
        let stale: Vec<usize> = self.stale_env().collect();
        for i in stale {
            self.exit(i, now, 0, env);
        }
    }

    /// What kruise-daemon reports in `apps.kruise.io/runtime-containers-meta` for the app containers that
    /// have a container: id, restarts, kubelet's plain hash, and (while running) the env-from-metadata hash.
    pub fn containers_meta(&self) -> Vec<RuntimeContainerMeta> {
        self.containers[self.n_init..]
            .iter()
            .filter_map(|c| {
                let inst = c.current.as_ref()?;
                let running =
                    matches!(c.phase, Phase::Running { .. } | Phase::Stopping { .. }) && inst.exit.is_none();
                Some(RuntimeContainerMeta {
                    name: c.name.clone(),
                    container_id: inst.id.clone(),
                    restart_count: c.restart_count,
                    hashes: RuntimeContainerHashes {
                        plain_hash: containermeta::plain_hash(&c.name, &inst.image),
                        extracted_env_from_metadata_hash: if running { inst.env_hash } else { 0 },
                    },
                })
            })
            .collect()
    }

    /// Keeps the pod's labels and annotations if a container's env reads them (its env is immutable, so
    /// whether one does never changes).
    pub(super) fn see_metadata(&mut self, pod: &Pod) {
        if self.reads_metadata() {
            self.labels.clone_from(&pod.metadata.labels);
            self.annotations.clone_from(&pod.metadata.annotations);
        }
    }

    /// Whether a container reads pod labels/annotations through the downward API.
    pub fn reads_metadata(&self) -> bool {
        self.containers.iter().any(|c| !c.env_refs.is_empty())
    }

    /// Starts graceful termination: every container is killed (preStop bounded by the grace period).
    pub fn terminate(&mut self, now: Timestamp, grace: Duration, env: &mut Env<'_>) {
        if self.terminating {
            // A shorter grace period (a second delete) only shortens running kills.
            for i in 0..self.containers.len() {
                if matches!(self.containers[i].phase, Phase::Stopping { .. }) {
                    self.kill(i, now, AfterStop::Final, grace, KillWhy::PodDeleted, env);
                }
            }
            return;
        }
        self.terminating = true;
        for i in 0..self.containers.len() {
            self.kill(i, now, AfterStop::Final, grace, KillWhy::PodDeleted, env);
        }
    }
}

/// Kruise's env-from-metadata hash of the values `refs` read from these labels/annotations.
pub(super) fn env_hash(
    refs: &[(String, MetaKind, String)],
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
) -> u64 {
    let mut vals: Vec<(String, String)> = refs
        .iter()
        .map(|(name, kind, key)| {
            let m = match kind {
                MetaKind::Labels => labels,
                MetaKind::Annotations => annotations,
            };
            (
                name.clone(),
                m.and_then(|m| m.get(key)).cloned().unwrap_or_default(),
            )
        })
        .collect();
    vals.sort_by(|a, b| a.0.cmp(&b.0));
    containermeta::hash_envs(&vals)
}
