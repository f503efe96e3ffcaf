//! Per-pod runtime model (pulls, starts, probes, crashes, kills, back-offs): pure, timed transitions.

mod configmaps;
mod container;
mod lifecycle;
mod report;
mod spec;
#[cfg(test)]
mod tests;
mod update;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use rand_chacha::ChaCha8Rng;

pub use configmaps::ConfigMaps;
pub use spec::pre_stop_duration;

use container::{ContainerRt, Exit, Instance, Phase};
use update::env_hash;

use super::image::{ImageProfiles, normalize_image};
use super::resize::{NodeAlloc, PodResize, pod_requests};
pub use super::timing::{add, since};

/// Initial crash-loop and image-pull back-off.
pub const BACKOFF_INITIAL: Duration = Duration::from_secs(10);
/// Maximum crash-loop and image-pull back-off.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// How long `ErrImagePull` shows before the next sync reports `ImagePullBackOff`.
const ERR_IMAGE_PULL_SHOWN: Duration = Duration::from_secs(1);
/// Default `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// kubelet's pod-worker back-off before it retries a container stuck in `CreateContainerConfigError`.
pub const CONFIG_RETRY: Duration = Duration::from_secs(10);
/// The kubelet notices a container state change at its next PLEG relist (1 s period): the end of a postStart
/// hook shows in the status this long after the hook returns.
pub const PLEG_RELIST: Duration = Duration::from_secs(1);
/// Guard against runaway zero-duration transition chains.
const MAX_STEPS_PER_ADVANCE: usize = 100_000;

/// Go's `time.Duration.String()` for whole and fractional seconds (`2s`, `1.5s`, `1m20s`, `500ms`).
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let frac = d.subsec_millis();
    let s = secs % 60;
    let sec_str = if frac == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{}s", format!("{frac:03}").trim_end_matches('0'))
    };
    match (secs / 3600, (secs / 60) % 60) {
        (0, 0) => sec_str,
        (0, m) => format!("{m}m{sec_str}"),
        (h, m) => format!("{h}h{m}m{sec_str}"),
    }
}

/// An event the kubelet records about a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KEvent {
    /// When it happened.
    pub at: Timestamp,
    /// `Warning` (else `Normal`).
    pub warning: bool,
    /// Event reason (`Pulling`, `Started`, `Killing`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `spec.containers{name}`.
    pub field_path: Option<String>,
}

/// Per-node runtime state: which images are present (since when) and when the serialized image puller is free.
#[derive(Clone, Debug, Default)]
pub struct NodeRt {
    present: HashMap<String, Timestamp>,
    pull_free: Option<Timestamp>,
    /// Allocatable and what the node's pods were allocated (resize admission).
    pub alloc: NodeAlloc,
}

impl NodeRt {
    /// A node whose allocatable is its capacity (the simulated nodes reserve nothing).
    pub fn with_allocatable(capacity: &super::NodeCapacity) -> Self {
        let q = |s: &str| insitu_api::quantity::parse_quantity(s);
        let mut rt = Self::default();
        rt.alloc.allocatable = q(&capacity.cpu).zip(q(&capacity.memory));
        rt
    }

    /// Marks an image as present on the node from `at` on (a pull under way ends then); an earlier time stays.
    pub fn mark_present(&mut self, image: &str, at: Timestamp) {
        let t = self.present.entry(normalize_image(image)).or_insert(at);
        *t = (*t).min(at);
    }

    /// When the image is (or, for a pull under way, will be) present on the node.
    pub fn present_at(&self, image: &str) -> Option<Timestamp> {
        self.present.get(&normalize_image(image)).copied()
    }
}

/// What a transition needs from the outside world.
pub struct Env<'a> {
    /// Image behaviour.
    pub images: &'a ImageProfiles,
    /// The pod's node.
    pub node: &'a mut NodeRt,
    /// Seeded randomness (container IDs).
    pub rng: &'a mut ChaCha8Rng,
    /// Events produced (appended).
    pub events: &'a mut Vec<KEvent>,
    /// ConfigMaps, for env references.
    pub config_maps: &'a ConfigMaps,
}

/// A container's role in the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Regular init container: runs to completion before the next.
    Init,
    /// Init container with `restartPolicy: Always`: keeps running; the next starts once it is started.
    Sidecar,
    /// App container.
    Regular,
}

/// The runtime state of one pod on a node. Every transition happens at an exact cluster time; the pod reports
/// the next time it needs attention ([`PodRt::deadline`]) and the agent keeps one timer queue for all pods.
#[derive(Clone, Debug)]
pub struct PodRt {
    containers: Vec<ContainerRt>,
    n_init: usize,
    restart_policy: String,
    init_done: bool,
    busy_until: Timestamp,
    terminating: bool,
    /// `name_namespace(uid)`, as the kubelet formats pods in messages.
    desc: String,
    namespace: String,
    /// The pod's labels and annotations as last seen (downward-API env values at container start); kept only
    /// when a container reads them (`see_metadata`), since most pods' would be a second copy of the cache's.
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    /// In-place resize progress.
    resize: PodResize,
    /// `metadata.generation` of the spec seen last (resize conditions observe it).
    generation: i64,
    /// `terminationGracePeriodSeconds` of the spec seen last (resize restarts).
    grace: Duration,
    /// When kruise-daemon's restart of containers with stale env from metadata is due (`restart_stale_env`).
    env_restart_at: Option<Timestamp>,
}

impl PodRt {
    /// A pod the kubelet just accepted at `now`; adopts containers already running per `pod.status`
    /// (a restarted kubelet), and queues the rest.
    pub fn new(pod: &Pod, now: Timestamp, env: &mut Env<'_>) -> Self {
        let spec = pod.spec.clone().unwrap_or_default();
        // Sized exactly: growing from empty reserves 4 slots (~2.7 KB a pod with one container, 300 MB at
        // 100k pods) for a list that never changes length.
        let inits = spec.init_containers.as_deref().unwrap_or_default();
        let mut containers = Vec::with_capacity(inits.len() + spec.containers.len());
        for c in inits {
            let kind = if c.restart_policy.as_deref() == Some("Always") {
                Kind::Sidecar
            } else {
                Kind::Init
            };
            containers.push(ContainerRt::new(c, kind));
        }
        let n_init = containers.len();
        containers.extend(spec.containers.iter().map(|c| ContainerRt::new(c, Kind::Regular)));
        let meta = &pod.metadata;
        let desc = format!(
            "{}_{}({})",
            meta.name.as_deref().unwrap_or_default(),
            meta.namespace.as_deref().unwrap_or_default(),
            meta.uid.as_deref().unwrap_or_default()
        );
        let mut rt = Self {
            containers,
            n_init,
            restart_policy: spec.restart_policy.unwrap_or_else(|| "Always".into()),
            init_done: false,
            busy_until: now,
            terminating: false,
            desc,
            namespace: meta.namespace.clone().unwrap_or_default(),
            labels: None,
            annotations: None,
            resize: PodResize::default(),
            generation: pod.metadata.generation.unwrap_or(0),
            grace: termination_grace(pod),
            env_restart_at: None,
        };
        rt.see_metadata(pod);
        rt.adopt(pod, now, env);
        // A pod new on the node (nothing adopted) first gets its sandbox: network namespace, CNI, IP.
        if rt.containers.iter().all(|c| c.current.is_none()) {
            rt.busy_until = add(now, env.images.starts.sandbox);
        }
        let requests = pod_requests(rt.containers.iter().map(|c| (&c.res, c.kind == Kind::Init)), true);
        env.node.alloc.set(&rt.desc, requests);
        rt.sync_resize(now, env);
        rt.orchestrate(now);
        rt
    }

    /// The `PodResizePending` / `PodResizeInProgress` conditions.
    pub fn resize_conditions(&self) -> Vec<k8s_openapi::api::core::v1::PodCondition> {
        self.resize.conditions()
    }

    /// Gives the pod's allocation back to the node (the pod is gone).
    pub fn release(&self, node: &mut NodeRt) {
        node.alloc.release(&self.desc);
    }

    /// Takes over containers that a previous kubelet left running (per the pod's status).
    fn adopt(&mut self, pod: &Pod, now: Timestamp, env: &mut Env<'_>) {
        let Some(status) = &pod.status else { return };
        let lists = [
            status.init_container_statuses.as_deref(),
            status.container_statuses.as_deref(),
        ];
        for c in &mut self.containers {
            let list = if c.kind == Kind::Regular {
                lists[1]
            } else {
                lists[0]
            };
            let Some(s) = list.into_iter().flatten().find(|s| s.name == c.name) else {
                continue;
            };
            c.res.adopt(s);
            let Some(state) = &s.state else { continue };
            if normalize_image(&s.image) != normalize_image(&c.spec.image) {
                continue;
            }
            // A previous kubelet's container: its env is taken to match the pod's metadata now.
            let env_hash = env_hash(
                &c.env_refs,
                pod.metadata.labels.as_ref(),
                pod.metadata.annotations.as_ref(),
            );
            let instance = |started_at: Timestamp| Instance {
                id: s.container_id.clone().unwrap_or_default(),
                image: c.spec.image.clone(),
                image_id: s.image_id.clone(),
                started_at,
                exit: None,
                env_hash,
            };
            if let Some(run) = &state.running {
                let started = run.started_at.as_ref().map_or(now, |t| t.0);
                c.current = Some(instance(started));
                c.restart_count = s.restart_count;
                c.started = s.started == Some(true);
                c.ready = s.ready;
                let started_at = if c.started {
                    None
                } else {
                    Some(c.spec.startup.map_or(now, |p| p.pass_time(started, now)))
                };
                let ready_at = if c.ready || c.kind == Kind::Init {
                    None
                } else {
                    Some(c.spec.readiness.map_or(now, |p| p.pass_time(started, now)))
                };
                c.phase = Phase::Running {
                    started_at,
                    ready_at,
                    exit_at: None,
                };
                env.node.mark_present(&c.spec.image, now);
            } else if let Some(t) = &state.terminated
                && c.kind == Kind::Init
                && t.exit_code == 0
            {
                let mut inst = instance(t.started_at.as_ref().map_or(now, |t| t.0));
                inst.exit = Some(Exit {
                    at: t.finished_at.as_ref().map_or(now, |t| t.0),
                    code: 0,
                    reason: "Completed",
                });
                c.current = Some(inst);
                c.restart_count = s.restart_count;
                c.ready = s.ready;
                c.phase = Phase::Exited;
            }
        }
    }

    /// The next time this pod needs [`PodRt::advance`].
    pub fn deadline(&self) -> Option<Timestamp> {
        let (resize, env_restart) = if self.terminating {
            (None, None)
        } else {
            (self.resize.deadline(), self.env_restart_at)
        };
        self.containers
            .iter()
            .filter_map(ContainerRt::deadline)
            .chain(resize)
            .chain(env_restart)
            .min()
    }

    /// The pod finished terminating: every container is stopped for good.
    pub fn terminal(&self) -> bool {
        self.terminating && self.containers.iter().all(|c| c.phase == Phase::Exited)
    }

    /// Whether deletion is in progress.
    pub fn terminating(&self) -> bool {
        self.terminating
    }

    /// Applies every transition due at or before `now`, in time order.
    pub fn advance(&mut self, now: Timestamp, env: &mut Env<'_>) {
        for _ in 0..MAX_STEPS_PER_ADVANCE {
            let next = self
                .containers
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.deadline().filter(|d| *d <= now).map(|d| (d, i)))
                .min();
            let resize = self.resize.deadline().filter(|d| *d <= now && !self.terminating);
            let env_restart = self.env_restart_at.filter(|d| *d <= now && !self.terminating);
            match (next, resize, env_restart) {
                (Some((t, i)), r, e) if r.is_none_or(|r| t < r) && e.is_none_or(|e| t < e) => {
                    self.step(i, t, env);
                    self.orchestrate(t);
                }
                (_, Some(r), e) if e.is_none_or(|e| r < e) => self.resize_step(r, env),
                (_, _, Some(e)) => self.restart_stale_now(e, env),
                _ => return,
            }
        }
        tracing::warn!(pod = %self.desc, "kubelet: too many transitions in one step; deferring");
    }

    /// Starts init containers in order, then the app containers; notices the end of termination.
    fn orchestrate(&mut self, t: Timestamp) {
        if self.terminating || self.init_done {
            return;
        }
        for c in &mut self.containers[..self.n_init] {
            let done = match c.kind {
                Kind::Sidecar => c.started,
                _ => c.exited_ok(),
            };
            if done {
                continue;
            }
            if c.phase == Phase::Blocked {
                c.phase = Phase::Queued { at: t };
            }
            return;
        }
        self.init_done = true;
        for c in &mut self.containers[self.n_init..] {
            if c.phase == Phase::Blocked {
                c.phase = Phase::Queued { at: t };
            }
        }
    }

    fn restarts(&self, kind: Kind, code: i32) -> bool {
        match (kind, self.restart_policy.as_str()) {
            (Kind::Sidecar, _) => true,
            (Kind::Init, _) if code == 0 => false,
            (_, "Always") => true,
            (_, "OnFailure") => code != 0,
            _ => false,
        }
    }
}

/// The pod's termination grace period (spec, default 30 s).
pub fn termination_grace(pod: &Pod) -> Duration {
    pod.spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .map_or(DEFAULT_GRACE, |s| {
            Duration::from_secs(u64::try_from(s.max(0)).unwrap_or(0))
        })
}

/// The grace period of a pod being deleted (`metadata.deletionGracePeriodSeconds`, else the spec's).
pub fn deletion_grace(pod: &Pod) -> Duration {
    pod.metadata.deletion_grace_period_seconds.map_or_else(
        || termination_grace(pod),
        |s| Duration::from_secs(u64::try_from(s.max(0)).unwrap_or(0)),
    )
}
