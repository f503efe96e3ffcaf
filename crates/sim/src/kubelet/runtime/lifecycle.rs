//! Container lifecycle transitions of a pod: pull, create, start, postStart, probes passing, exit, kill, back-off.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use rand::RngCore;

use super::super::image::{ImageFailure, fnv1a, hex64, normalize_image};
use super::container::{AfterStop, ContainerRt, Exit, Instance, KillWhy, Phase};
use super::update::env_hash;
use super::{
    BACKOFF_INITIAL, BACKOFF_MAX, CONFIG_RETRY, DEFAULT_GRACE, ERR_IMAGE_PULL_SHOWN, Env, Kind, PLEG_RELIST,
    PodRt, add, go_duration, since,
};

impl PodRt {
    pub(super) fn step(&mut self, i: usize, t: Timestamp, env: &mut Env<'_>) {
        let phase = std::mem::replace(&mut self.containers[i].phase, Phase::Exited);
        match phase {
            Phase::Blocked | Phase::Exited => self.containers[i].phase = phase,
            Phase::Queued { .. } if self.busy_until > t => {
                self.containers[i].phase = Phase::Queued { at: self.busy_until };
            }
            Phase::Queued { .. } => self.begin_pull(i, t, env),
            Phase::Pulling {
                image, began, fails, ..
            } => {
                let c = &mut self.containers[i];
                if fails {
                    let backoff = c
                        .pull_backoff
                        .map_or(BACKOFF_INITIAL, |b| (b * 2).min(BACKOFF_MAX));
                    c.pull_backoff = Some(backoff);
                    let n = normalize_image(&image);
                    let msg = if env.images.lookup(&image).fail == ImageFailure::NeverPulls {
                        format!(
                            "Failed to pull image \"{image}\": rpc error: code = NotFound desc = failed to pull and unpack image \"{n}\": failed to resolve reference \"{n}\": {n}: not found"
                        )
                    } else {
                        format!(
                            "Failed to pull image \"{image}\": rpc error: code = Unavailable desc = failed to pull and unpack image \"{n}\": failed to copy: read tcp: i/o timeout"
                        )
                    };
                    c.event(env, t, true, "Failed", msg);
                    c.event(env, t, true, "Failed", "Error: ErrImagePull".into());
                    let show_at = (ERR_IMAGE_PULL_SHOWN < backoff).then(|| add(t, ERR_IMAGE_PULL_SHOWN));
                    c.phase = Phase::PullFailed {
                        show_at,
                        at: add(t, backoff),
                        image,
                        first: true,
                    };
                    return;
                }
                c.pull_backoff = None;
                let profile = env.images.lookup(&image);
                let size = 10_000_000 + fnv1a(normalize_image(&image).as_bytes()) % 190_000_000;
                let msg = format!(
                    "Successfully pulled image \"{image}\" in {} ({} including waiting). Image size: {size} bytes.",
                    go_duration(profile.pull.min(since(t, began))),
                    go_duration(since(t, began))
                );
                c.event(env, t, false, "Pulled", msg);
                if c.spec.image != image {
                    c.phase = Phase::Queued { at: t };
                } else {
                    let at = add(t, profile.start);
                    c.phase = Phase::Creating { at, image };
                    self.busy_until = self.busy_until.max(at);
                }
            }
            Phase::PullFailed {
                show_at: Some(s),
                at,
                image,
                ..
            } if s <= at => {
                let c = &mut self.containers[i];
                c.event(
                    env,
                    t,
                    false,
                    "BackOff",
                    format!("Back-off pulling image \"{image}\""),
                );
                c.event(env, t, true, "Failed", "Error: ImagePullBackOff".into());
                c.phase = Phase::PullFailed {
                    show_at: None,
                    at,
                    image,
                    first: false,
                };
            }
            Phase::PullFailed { .. } => self.begin_pull(i, t, env),
            Phase::Creating { image, .. } => self.start_instance(i, t, image, env),
            // The kubelet's next sync: pull check ("already present"), then create again.
            Phase::ConfigError { .. } => self.containers[i].phase = Phase::Queued { at: t },
            Phase::PostStart { fails, .. } => {
                let desc = self.desc.clone();
                let c = &mut self.containers[i];
                if fails {
                    c.event(
                        env,
                        t,
                        true,
                        "FailedPostStartHook",
                        format!("PostStartHook failed for container {} in pod {desc}", c.name),
                    );
                    c.event(
                        env,
                        t,
                        false,
                        "Killing",
                        format!("FailedPostStartHook: container {} will be killed", c.name),
                    );
                    // Killed after the failed hook (SIGKILL's 137); restarted per restartPolicy.
                    self.exit(i, t, 137, env);
                } else {
                    let start = c.current.as_ref().map_or(t, |inst| inst.started_at);
                    self.run_instance(i, start, t, env);
                }
            }
            Phase::Running {
                started_at,
                ready_at,
                exit_at,
            } => {
                let c = &mut self.containers[i];
                let due = |x: Option<Timestamp>| x.filter(|x| *x <= t);
                let mut next = Phase::Running {
                    started_at,
                    ready_at,
                    exit_at,
                };
                if let Phase::Running {
                    started_at, ready_at, ..
                } = &mut next
                {
                    if due(*started_at).is_some() {
                        c.started = true;
                        *started_at = None;
                    }
                    if due(*ready_at).is_some() {
                        c.ready = true;
                        *ready_at = None;
                    }
                }
                c.phase = next;
                if let Some((at, code)) = exit_at
                    && at <= t
                {
                    self.exit(i, t, code, env);
                }
            }
            Phase::Stopping { then, .. } => {
                let c = &mut self.containers[i];
                if let Some(inst) = &mut c.current {
                    inst.exit = Some(Exit {
                        at: t,
                        code: 0,
                        reason: "Completed",
                    });
                }
                c.ready = false;
                c.started = false;
                c.phase = match then {
                    AfterStop::Restart => Phase::Queued { at: t },
                    AfterStop::Final => Phase::Exited,
                };
            }
            Phase::CrashBackOff { exited, backoff, .. } => {
                let c = &mut self.containers[i];
                c.crash = Some(((backoff * 2).min(BACKOFF_MAX), exited));
                c.phase = Phase::Queued { at: t };
            }
        }
    }

    pub(super) fn begin_pull(&mut self, i: usize, t: Timestamp, env: &mut Env<'_>) {
        let c = &mut self.containers[i];
        let image = c.spec.image.clone();
        let profile = env.images.lookup(&image);
        let norm = normalize_image(&image);
        let present = env.node.present.get(&norm).copied();
        let fails = profile.fail == ImageFailure::NeverPulls || transient_failure(c, env);
        if let (Some(p), false) = (present, fails)
            && p <= t
        {
            c.event(
                env,
                t,
                false,
                "Pulled",
                format!("Container image \"{image}\" already present on machine"),
            );
            let at = add(t, profile.start);
            c.phase = Phase::Creating { at, image };
            self.busy_until = self.busy_until.max(at);
            return;
        }
        c.event(env, t, false, "Pulling", format!("Pulling image \"{image}\""));
        let at = match (present, fails) {
            (Some(p), false) => p,
            _ => {
                let begin = env.node.pull_free.map_or(t, |f| f.max(t));
                let end = add(begin, profile.pull);
                env.node.pull_free = Some(end);
                if !fails {
                    env.node.present.insert(norm, end);
                }
                end
            }
        };
        c.phase = Phase::Pulling {
            at,
            image,
            began: t,
            fails,
        };
        self.busy_until = self.busy_until.max(at);
    }

    pub(super) fn start_instance(&mut self, i: usize, t: Timestamp, image: String, env: &mut Env<'_>) {
        // kubelet generateContainerConfig: env from ConfigMaps must resolve first.
        if let Err(message) = env
            .config_maps
            .check(&self.namespace, &self.containers[i].cm_refs)
        {
            let c = &mut self.containers[i];
            c.event(env, t, true, "Failed", format!("Error: {message}"));
            c.phase = Phase::ConfigError {
                at: add(t, CONFIG_RETRY),
                message,
            };
            return;
        }
        let env_hash = env_hash(
            &self.containers[i].env_refs,
            self.labels.as_ref(),
            self.annotations.as_ref(),
        );
        let c = &mut self.containers[i];
        if c.current.is_some() {
            c.restart_count = c.restart_count.saturating_add(1);
        }
        let id = format!("containerd://{}", hex64(env.rng.next_u64()));
        // A new container starts with what is allocated.
        c.res.actual = c.res.allocated.clone();
        c.last = c.current.take();
        c.current = Some(Instance {
            id,
            image: image.clone(),
            image_id: env.images.image_id(&image),
            started_at: t,
            exit: None,
            env_hash,
        });
        c.event(env, t, false, "Created", format!("Created container: {}", c.name));
        c.event(env, t, false, "Started", format!("Started container {}", c.name));
        let exits_at_once =
            env.images.lookup(&image).fail == ImageFailure::ExitsAtOnce && !c.spec.has_command;
        let (hook, kind) = (c.spec.post_start, c.kind);
        match hook {
            // kubelet runs postStart synchronously in the pod worker (the next container waits), and
            // reports its end at the next relist. A container that exits at once never runs its hook.
            Some(hook) if kind != Kind::Init && !exits_at_once => {
                let end = add(t, hook.takes);
                c.phase = Phase::PostStart {
                    at: add(end, PLEG_RELIST),
                    fails: hook.fails,
                };
                self.busy_until = self.busy_until.max(end);
            }
            _ => self.run_instance(i, t, t, env),
        }
    }

    /// The running phase of the instance started at `start`, from `from` (its start, or its postStart
    /// hook's end): probe passes and, per the image profile, its exit.
    pub(super) fn run_instance(&mut self, i: usize, start: Timestamp, from: Timestamp, env: &mut Env<'_>) {
        let c = &mut self.containers[i];
        let image = c
            .current
            .as_ref()
            .map_or_else(|| c.spec.image.clone(), |inst| inst.image.clone());
        let profile = env.images.lookup(&image);
        let t = start;
        let exit_at = match (profile.fail, c.kind) {
            (ImageFailure::ExitsAtOnce, _) if !c.spec.has_command => Some((from, 0)),
            (ImageFailure::CrashAfter(d), _) => Some((add(t, d).max(from), 1)),
            (_, Kind::Init) => Some((add(t, profile.warmup).max(from), 0)),
            _ => None,
        };
        let started_time = c.spec.startup.map_or(from, |p| p.pass_time(t, from));
        let ready_time = match c.kind {
            Kind::Init => None,
            _ => Some(c.spec.readiness.map_or(started_time, |p| {
                p.pass_time(t, started_time.max(add(t, profile.warmup)))
            })),
        };
        let before_exit = |x: Timestamp| exit_at.is_none_or(|(e, _)| x < e);
        c.started = false;
        c.ready = false;
        c.phase = Phase::Running {
            started_at: Some(started_time).filter(|x| before_exit(*x)),
            ready_at: ready_time.filter(|x| before_exit(*x)),
            exit_at,
        };
        self.check_image(i, from, &image, env);
    }

    /// The spec image changed while this instance was being started: restart it with the new one.
    pub(super) fn check_image(&mut self, i: usize, t: Timestamp, image: &str, env: &mut Env<'_>) {
        let c = &self.containers[i];
        if c.kind != Kind::Init && c.spec.image != image {
            self.kill(
                i,
                t,
                AfterStop::Restart,
                DEFAULT_GRACE,
                KillWhy::DefinitionChanged,
                env,
            );
        }
    }

    pub(super) fn exit(&mut self, i: usize, t: Timestamp, code: i32, env: &mut Env<'_>) {
        let restarts = self.restarts(self.containers[i].kind, code);
        let desc = self.desc.clone();
        let c = &mut self.containers[i];
        if let Some(inst) = &mut c.current {
            inst.exit = Some(Exit {
                at: t,
                code,
                reason: if code == 0 { "Completed" } else { "Error" },
            });
        }
        c.ready = false;
        c.started = false;
        if !restarts {
            // Completed init containers report ready.
            c.ready = c.kind == Kind::Init && code == 0;
            c.phase = Phase::Exited;
            return;
        }
        match c.crash {
            Some((backoff, last)) if since(t, last) <= BACKOFF_MAX * 2 => {
                c.event(
                    env,
                    t,
                    true,
                    "BackOff",
                    format!("Back-off restarting failed container {} in pod {desc}", c.name),
                );
                c.phase = Phase::CrashBackOff {
                    at: add(t, backoff),
                    exited: t,
                    backoff,
                };
            }
            _ => {
                c.crash = Some((BACKOFF_INITIAL, t));
                c.phase = Phase::Queued { at: t };
            }
        }
    }

    pub(super) fn kill(
        &mut self,
        i: usize,
        t: Timestamp,
        then: AfterStop,
        grace: Duration,
        why: KillWhy,
        env: &mut Env<'_>,
    ) {
        let c = &mut self.containers[i];
        match std::mem::replace(&mut c.phase, Phase::Exited) {
            Phase::Running { .. } | Phase::PostStart { .. } => {
                let msg = match why {
                    KillWhy::DefinitionChanged => {
                        format!("Container {} definition changed, will be restarted", c.name)
                    }
                    KillWhy::PodDeleted => format!("Stopping container {}", c.name),
                    KillWhy::ResizeRestart => format!("Container {} resize requires restart", c.name),
                };
                c.event(env, t, false, "Killing", msg);
                c.ready = false;
                let at = add(t, c.spec.pre_stop.min(grace));
                c.phase = Phase::Stopping { at, then };
                self.busy_until = self.busy_until.max(at);
            }
            Phase::Stopping { at, .. } => {
                let at = if then == AfterStop::Final {
                    at.min(add(t, grace))
                } else {
                    at
                };
                c.phase = Phase::Stopping { at, then };
            }
            Phase::Exited => {}
            _ if then == AfterStop::Restart => c.phase = Phase::Queued { at: t },
            _ => {
                c.ready = false;
                c.started = false;
                c.never_ran = c.current.is_none();
            }
        }
    }
}

/// Whether this start attempt fails transiently (seeded, [`super::StartModel`]): the new-pod chance for a container
/// that never ran in this pod, the restart chance otherwise. Draws from the RNG only when a chance is set, so runs
/// without the model replay as before.
pub(super) fn transient_failure(c: &ContainerRt, env: &mut Env<'_>) -> bool {
    let m = env.images.starts;
    let ppm = if c.current.is_none() && c.last.is_none() {
        m.new_pod_failure_ppm
    } else {
        m.restart_failure_ppm
    };
    ppm > 0 && env.rng.next_u32() % 1_000_000 < ppm
}
