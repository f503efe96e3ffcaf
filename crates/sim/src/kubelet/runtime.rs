//! Per-pod runtime model (pulls, starts, probes, crashes, kills, back-offs): pure, timed transitions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, Probe,
};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use insitu_api::containermeta::{self, MetaKind, RuntimeContainerHashes, RuntimeContainerMeta};

use super::image::{ImageFailure, ImageProfiles, fnv1a, hex64, normalize_image};
use super::resize::{NodeAlloc, PodResize, Res, pod_requests};
use super::status::to_time;

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

/// `ts + d`, saturating.
pub fn add(ts: Timestamp, d: Duration) -> Timestamp {
    ts.saturating_add(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX))
        .unwrap_or(ts)
}

/// `a - b`, or zero if `a < b`.
pub fn since(a: Timestamp, b: Timestamp) -> Duration {
    Duration::try_from(a.duration_since(b)).unwrap_or(Duration::ZERO)
}

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

    /// Marks an image as present on the node.
    pub fn mark_present(&mut self, image: &str, at: Timestamp) {
        self.present.entry(normalize_image(image)).or_insert(at);
    }
}

/// The ConfigMaps the node's kubelet sees (its ConfigMap manager), for container env `configMapKeyRef` /
/// `envFrom.configMapRef`: `(namespace, name)` → keys.
#[derive(Clone, Debug, Default)]
pub struct ConfigMaps {
    maps: HashMap<(String, String), BTreeSet<String>>,
}

impl ConfigMaps {
    /// Records a ConfigMap's keys (an add or an update).
    pub fn set(&mut self, namespace: &str, name: &str, keys: BTreeSet<String>) {
        self.maps.insert((namespace.to_string(), name.to_string()), keys);
    }

    /// Forgets a deleted ConfigMap.
    pub fn remove(&mut self, namespace: &str, name: &str) {
        self.maps.remove(&(namespace.to_string(), name.to_string()));
    }

    /// kubelet `makeEnvironmentVariables`: the error it reports (as `CreateContainerConfigError`) for the
    /// first reference that does not resolve.
    fn check(&self, namespace: &str, refs: &[CmRef]) -> Result<(), String> {
        for r in refs {
            let Some(keys) = self.maps.get(&(namespace.to_string(), r.name.clone())) else {
                return Err(format!("configmap \"{}\" not found", r.name));
            };
            if let Some(k) = &r.key
                && !keys.contains(k)
            {
                return Err(format!(
                    "couldn't find key {k} in ConfigMap {namespace}/{}",
                    r.name
                ));
            }
        }
        Ok(())
    }
}

/// A required ConfigMap reference of a container's env (`key: None` for `envFrom`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct CmRef {
    name: String,
    key: Option<String>,
}

fn cm_refs(c: &Container) -> Vec<CmRef> {
    let mut out = Vec::new();
    for e in c.env.iter().flatten() {
        if let Some(r) = e.value_from.as_ref().and_then(|v| v.config_map_key_ref.as_ref())
            && r.optional != Some(true)
        {
            out.push(CmRef {
                name: r.name.clone(),
                key: Some(r.key.clone()),
            });
        }
    }
    for f in c.env_from.iter().flatten() {
        if let Some(r) = &f.config_map_ref
            && r.optional != Some(true)
        {
            out.push(CmRef {
                name: r.name.clone(),
                key: None,
            });
        }
    }
    out
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

/// The probe fields that decide timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ProbeT {
    initial: Duration,
    period: Duration,
    success: u32,
}

impl ProbeT {
    fn from(p: &Probe) -> Self {
        let secs =
            |v: Option<i32>, d: i32| Duration::from_secs(u64::try_from(v.unwrap_or(d).max(0)).unwrap_or(0));
        let period = secs(p.period_seconds, 10).max(Duration::from_secs(1));
        Self {
            initial: secs(p.initial_delay_seconds, 0),
            period,
            success: p.success_threshold.unwrap_or(1).max(1).unsigned_abs(),
        }
    }

    /// First time this probe passes for a container started at `start` whose app is ready from `not_before`:
    /// probes run at `start + initialDelay + k·period`; `successThreshold` consecutive successes are needed.
    fn pass_time(self, start: Timestamp, not_before: Timestamp) -> Timestamp {
        let first = add(start, self.initial);
        let mut t = first;
        if not_before > first {
            let gap = since(not_before, first).as_nanos();
            let period = self.period.as_nanos().max(1);
            let k = gap.div_ceil(period);
            t = add(
                first,
                Duration::from_nanos(u64::try_from(k * period).unwrap_or(u64::MAX)),
            );
        }
        add(t, self.period * self.success.saturating_sub(1))
    }
}

/// A postStart hook as the simulation runs it: how long it takes and whether it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hook {
    takes: Duration,
    fails: bool,
}

/// The container spec fields the runtime uses.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CSpec {
    image: String,
    readiness: Option<ProbeT>,
    startup: Option<ProbeT>,
    pre_stop: Duration,
    post_start: Option<Hook>,
    /// `command` set: the image's default command (which `--exit-image` images exit from) is not run.
    has_command: bool,
}

impl CSpec {
    fn from(c: &Container) -> Self {
        Self {
            image: c.image.clone().unwrap_or_default(),
            readiness: c.readiness_probe.as_ref().map(ProbeT::from),
            startup: c.startup_probe.as_ref().map(ProbeT::from),
            pre_stop: pre_stop_duration(c),
            post_start: post_start_hook(c),
            has_command: c.command.as_ref().is_some_and(|v| !v.is_empty()),
        }
    }
}

fn hook_words(h: &k8s_openapi::api::core::v1::LifecycleHandler) -> Vec<String> {
    h.exec
        .as_ref()
        .and_then(|e| e.command.as_ref())
        .into_iter()
        .flatten()
        .flat_map(|a| {
            a.split(|ch: char| ch.is_whitespace() || ch == ';' || ch == '&' || ch == '|')
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The time of the `sleep N` in a hook's exec command, or its `sleep` action.
fn hook_sleep(h: &k8s_openapi::api::core::v1::LifecycleHandler) -> Duration {
    if let Some(s) = &h.sleep {
        return Duration::from_secs(u64::try_from(s.seconds.max(0)).unwrap_or(0));
    }
    let words = hook_words(h);
    let mut total = Duration::ZERO;
    for pair in words.windows(2) {
        if pair[0] == "sleep" || pair[0].ends_with("/sleep") {
            let n = pair[1].trim_end_matches('s');
            if let Ok(secs) = n.parse::<f64>()
                && secs.is_finite()
                && secs >= 0.0
            {
                total += Duration::from_secs_f64(secs.min(1e9));
            }
        }
    }
    total
}

/// How long a container's preStop hook runs: `sleep N` in an exec hook, or the `sleep` action.
pub fn pre_stop_duration(c: &Container) -> Duration {
    c.lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .map_or(Duration::ZERO, hook_sleep)
}

/// A container's postStart hook: its `sleep` time, and whether it fails (an exec command that is `false`
/// or runs `exit N` with N ≠ 0; every other command succeeds). httpGet/tcpSocket hooks succeed at once.
fn post_start_hook(c: &Container) -> Option<Hook> {
    let h = c.lifecycle.as_ref()?.post_start.as_ref()?;
    let words = hook_words(h);
    let fails = words.iter().any(|w| w == "false" || w.ends_with("/false"))
        || words
            .windows(2)
            .any(|p| p[0] == "exit" && p[1].parse::<i64>().is_ok_and(|n| n != 0));
    Some(Hook {
        takes: hook_sleep(h),
        fails,
    })
}

/// One container instance the runtime created.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Instance {
    id: String,
    image: String,
    image_id: String,
    started_at: Timestamp,
    exit: Option<Exit>,
    /// Kruise's env-from-metadata hash of the downward-API values this instance started with (the env a
    /// container sees is fixed at its start).
    env_hash: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Exit {
    at: Timestamp,
    code: i32,
    reason: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AfterStop {
    Restart,
    Final,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
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
    name: String,
    kind: Kind,
    spec: CSpec,
    restart_count: i32,
    current: Option<Instance>,
    last: Option<Instance>,
    phase: Phase,
    ready: bool,
    started: bool,
    /// Crash-loop back-off entry: (duration, last update).
    crash: Option<(Duration, Timestamp)>,
    pull_backoff: Option<Duration>,
    /// Exited without ever running (pod terminated first).
    never_ran: bool,
    /// Env vars read from pod labels/annotations (downward API): `(env name, kind, key)`.
    env_refs: Vec<(String, MetaKind, String)>,
    /// Required ConfigMap references of its env.
    cm_refs: Vec<CmRef>,
    /// Desired, allocated and actuated resources (in-place resize).
    res: Res,
}

impl ContainerRt {
    fn new(c: &Container, kind: Kind) -> Self {
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

    fn deadline(&self) -> Option<Timestamp> {
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

    fn field_path(&self) -> String {
        match self.kind {
            Kind::Regular => format!("spec.containers{{{}}}", self.name),
            Kind::Init | Kind::Sidecar => format!("spec.initContainers{{{}}}", self.name),
        }
    }

    fn event(&self, env: &mut Env<'_>, at: Timestamp, warning: bool, reason: &'static str, message: String) {
        env.events.push(KEvent {
            at,
            warning,
            reason,
            message,
            field_path: Some(self.field_path()),
        });
    }

    fn exited_ok(&self) -> bool {
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
enum KillWhy {
    DefinitionChanged,
    PodDeleted,
    /// A resize of a resource with `resizePolicy: RestartContainer`.
    ResizeRestart,
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
    /// The pod's labels and annotations as last seen (downward-API env values at container start).
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    /// In-place resize progress.
    resize: PodResize,
    /// `metadata.generation` of the spec seen last (resize conditions observe it).
    generation: i64,
    /// `terminationGracePeriodSeconds` of the spec seen last (resize restarts).
    grace: Duration,
}

impl PodRt {
    /// A pod the kubelet just accepted at `now`; adopts containers already running per `pod.status`
    /// (a restarted kubelet), and queues the rest.
    pub fn new(pod: &Pod, now: Timestamp, env: &mut Env<'_>) -> Self {
        let spec = pod.spec.clone().unwrap_or_default();
        let mut containers = Vec::new();
        for c in spec.init_containers.iter().flatten() {
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
            labels: meta.labels.clone(),
            annotations: meta.annotations.clone(),
            resize: PodResize::default(),
            generation: pod.metadata.generation.unwrap_or(0),
            grace: termination_grace(pod),
        };
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

    /// kubelet `handlePodResourcesResize` for the app containers, and the restarts it asks for.
    fn sync_resize(&mut self, now: Timestamp, env: &mut Env<'_>) {
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
    fn resize_step(&mut self, t: Timestamp, env: &mut Env<'_>) {
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
        let resize = if self.terminating {
            None
        } else {
            self.resize.deadline()
        };
        self.containers
            .iter()
            .filter_map(ContainerRt::deadline)
            .chain(resize)
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
            match (next, resize) {
                (Some((t, i)), r) if r.is_none_or(|r| t < r) => {
                    self.step(i, t, env);
                    self.orchestrate(t);
                }
                (_, Some(r)) => self.resize_step(r, env),
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

    fn step(&mut self, i: usize, t: Timestamp, env: &mut Env<'_>) {
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

    fn begin_pull(&mut self, i: usize, t: Timestamp, env: &mut Env<'_>) {
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

    fn start_instance(&mut self, i: usize, t: Timestamp, image: String, env: &mut Env<'_>) {
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
    fn run_instance(&mut self, i: usize, start: Timestamp, from: Timestamp, env: &mut Env<'_>) {
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
    fn check_image(&mut self, i: usize, t: Timestamp, image: &str, env: &mut Env<'_>) {
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

    fn exit(&mut self, i: usize, t: Timestamp, code: i32, env: &mut Env<'_>) {
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

    fn kill(
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

    /// Applies a new pod spec: a changed image restarts that container (preStop, kill, pull, start).
    pub fn update_spec(&mut self, pod: &Pod, now: Timestamp, env: &mut Env<'_>) {
        self.labels.clone_from(&pod.metadata.labels);
        self.annotations.clone_from(&pod.metadata.annotations);
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

    /// kruise-daemon's env-from-metadata restart (research §2.8): while the pod's `InPlaceUpdateReady` is
    /// False, a running app container whose env-from-metadata values differ from the pod's current
    /// labels/annotations is stopped through the runtime (no preStop: CRI StopContainer), and the kubelet
    /// starts it again (restartCount+1) with the new values.
    pub fn restart_stale_env(&mut self, pod: &Pod, now: Timestamp, env: &mut Env<'_>) {
        let updating = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "InPlaceUpdateReady" && c.status == "False");
        if !updating || self.terminating {
            return;
        }
        for i in self.n_init..self.containers.len() {
            let c = &self.containers[i];
            if c.env_refs.is_empty() || !matches!(c.phase, Phase::Running { .. }) {
                continue;
            }
            let want = env_hash(&c.env_refs, self.labels.as_ref(), self.annotations.as_ref());
            if c.current
                .as_ref()
                .is_some_and(|inst| inst.exit.is_none() && inst.env_hash != want)
            {
                self.exit(i, now, 0, env);
            }
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

    fn status(&self, c: &ContainerRt, has_init: bool) -> ContainerStatus {
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

/// Kruise's env-from-metadata hash of the values `refs` read from these labels/annotations.
fn env_hash(
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

/// Whether this start attempt fails transiently (seeded, [`super::StartModel`]): the new-pod chance for a container
/// that never ran in this pod, the restart chance otherwise. Draws from the RNG only when a chance is set, so runs
/// without the model replay as before.
fn transient_failure(c: &ContainerRt, env: &mut Env<'_>) -> bool {
    let m = env.images.starts;
    let ppm = if c.current.is_none() && c.last.is_none() {
        m.new_pod_failure_ppm
    } else {
        m.restart_failure_ppm
    };
    ppm > 0 && env.rng.next_u32() % 1_000_000 < ppm
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, Lifecycle, LifecycleHandler, PodSpec};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use rand::SeedableRng;

    use crate::kubelet::image::{ImageFailure, ImageProfile, image_id};

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn seed_pod(image: &str) -> Pod {
        let probe = |delay, period| Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/".into()),
                port: IntOrString::Int(80),
                ..Default::default()
            }),
            initial_delay_seconds: Some(delay),
            period_seconds: Some(period),
            ..Default::default()
        };
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "nginx".into(),
                    image: Some(image.into()),
                    readiness_probe: Some(probe(5, 3)),
                    liveness_probe: Some(probe(10, 5)),
                    lifecycle: Some(Lifecycle {
                        pre_stop: Some(LifecycleHandler {
                            exec: Some(ExecAction {
                                command: Some(vec!["/bin/sh".into(), "-c".into(), "sleep 5".into()]),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    struct Harness {
        images: ImageProfiles,
        node: NodeRt,
        rng: ChaCha8Rng,
        events: Vec<KEvent>,
        config_maps: ConfigMaps,
    }

    impl Harness {
        fn new(images: ImageProfiles) -> Self {
            Self {
                images,
                node: NodeRt::default(),
                rng: ChaCha8Rng::seed_from_u64(7),
                events: vec![],
                config_maps: ConfigMaps::default(),
            }
        }
        fn env(&mut self) -> Env<'_> {
            Env {
                images: &self.images,
                node: &mut self.node,
                rng: &mut self.rng,
                events: &mut self.events,
                config_maps: &self.config_maps,
            }
        }
        /// Advances through every deadline up to `until`.
        fn run(&mut self, rt: &mut PodRt, until: Timestamp) {
            while let Some(d) = rt.deadline().filter(|d| *d <= until) {
                rt.advance(d, &mut self.env());
            }
        }
        fn reasons(&mut self) -> Vec<&'static str> {
            self.events.drain(..).map(|e| e.reason).collect()
        }
    }

    fn c(rt: &PodRt, _pod: &Pod) -> ContainerStatus {
        rt.statuses().1.remove(0)
    }

    #[test]
    fn probe_pass_times() {
        let p = ProbeT {
            initial: Duration::from_secs(5),
            period: Duration::from_secs(3),
            success: 1,
        };
        assert_eq!(p.pass_time(t(0), t(0)), t(5));
        assert_eq!(p.pass_time(t(0), t(6)), t(8));
        assert_eq!(p.pass_time(t(0), t(8)), t(8));
        let p2 = ProbeT { success: 2, ..p };
        assert_eq!(p2.pass_time(t(0), t(0)), t(8));
        assert_eq!(go_duration(Duration::from_secs(80)), "1m20s");
        assert_eq!(go_duration(Duration::from_millis(2500)), "2.5s");
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
    }

    #[test]
    fn seed_lifecycle_start_update_delete() {
        let mut h = Harness::new(ImageProfiles::default());
        let pod = seed_pod("nginx:1.19.0");
        let mut rt = PodRt::new(&pod, t(0), &mut h.env());
        rt.advance(t(0), &mut h.env());
        assert_eq!(h.reasons(), ["Pulling"]);
        let s = c(&rt, &pod);
        assert_eq!(
            s.state.and_then(|s| s.waiting).and_then(|w| w.reason).as_deref(),
            Some("ContainerCreating")
        );
        h.run(&mut rt, t(3));
        assert_eq!(h.reasons(), ["Pulled", "Created", "Started"]);
        let s = c(&rt, &pod);
        assert!(!s.ready && s.started == Some(true));
        assert_eq!(s.image, "docker.io/library/nginx:1.19.0");
        assert_eq!(s.image_id, image_id("nginx:1.19.0"));
        assert!(
            s.container_id
                .as_deref()
                .is_some_and(|id| id.starts_with("containerd://") && id.len() == 13 + 64)
        );
        assert_eq!(
            rt.deadline(),
            Some(t(8)),
            "ready at pull 2s + start 1s + initialDelay 5s"
        );
        h.run(&mut rt, t(8));
        assert!(c(&rt, &pod).ready);
        let first_id = c(&rt, &pod).container_id;

        // In-place update at t=20: preStop 5s, then pull 2s + start 1s, then ready after initialDelay 5s.
        let new = seed_pod("nginx:1.21.0");
        rt.update_spec(&new, t(20), &mut h.env());
        assert_eq!(h.reasons(), ["Killing"]);
        assert_eq!(h.events.len(), 0);
        let s = c(&rt, &new);
        assert!(!s.ready && s.state.and_then(|s| s.running).is_some());
        h.run(&mut rt, t(25));
        let s = c(&rt, &new);
        let term = s.state.and_then(|s| s.terminated).unwrap_or_default();
        assert_eq!((term.exit_code, term.reason.as_deref()), (0, Some("Completed")));
        assert_eq!(
            s.image_id,
            image_id("nginx:1.19.0"),
            "old image until the new container runs"
        );
        h.run(&mut rt, t(28));
        let s = c(&rt, &new);
        assert_eq!(s.restart_count, 1);
        assert_eq!(s.image_id, image_id("nginx:1.21.0"));
        assert_ne!(s.container_id, first_id);
        let last = s.last_state.and_then(|l| l.terminated).unwrap_or_default();
        assert_eq!((last.exit_code, last.container_id), (0, first_id));
        assert!(!s.ready);
        h.run(&mut rt, t(33));
        assert!(c(&rt, &new).ready);
        assert_eq!(h.reasons(), ["Pulling", "Pulled", "Created", "Started"]);

        // Back to the first image: already on the node, so no pull.
        let back = seed_pod("nginx:1.19.0");
        rt.update_spec(&back, t(40), &mut h.env());
        h.run(&mut rt, t(46));
        assert_eq!(h.reasons(), ["Killing", "Pulled", "Created", "Started"]);
        assert_eq!(c(&rt, &back).restart_count, 2);

        // Delete with a 30s grace period: preStop 5s then terminal.
        rt.terminate(t(100), Duration::from_secs(30), &mut h.env());
        assert_eq!(rt.deadline(), Some(t(105)));
        h.run(&mut rt, t(105));
        assert!(rt.terminal());
        let (_, st) = rt.statuses();
        assert_eq!(
            st[0]
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code),
            Some(0)
        );
    }

    #[test]
    fn crash_loop_backoff_doubles() {
        let crash = ImageProfile {
            fail: ImageFailure::CrashAfter(Duration::from_secs(3)),
            ..Default::default()
        };
        let mut h = Harness::new(ImageProfiles::default().with("crashy:*", crash));
        let pod = seed_pod("crashy:1");
        let mut rt = PodRt::new(&pod, t(0), &mut h.env());
        // runs at 3, crashes at 6, restarts at once (runs at 7), crashes at 10, back-off 10s → runs at 21,
        // crashes at 24, back-off 20s → runs at 45, crashes 48, back-off 40s → runs at 89.
        let mut starts = vec![];
        let mut now = 0;
        while now < 200 {
            h.run(&mut rt, t(now));
            for e in h.events.drain(..) {
                if e.reason == "Started" {
                    starts.push(e.at.as_second() - t(0).as_second());
                }
            }
            now += 1;
        }
        assert_eq!(&starts[..5], &[3, 7, 21, 45, 89]);
        h.run(&mut rt, t(50));
        let s = c(&rt, &pod);
        assert!(!s.ready);
        let mut waiting = None;
        let mut h2 = Harness::new(h.images.clone());
        let mut rt2 = PodRt::new(&pod, t(0), &mut h2.env());
        h2.run(&mut rt2, t(12));
        if let Some(st) = c(&rt2, &pod).state {
            waiting = st.waiting.and_then(|w| w.reason);
        }
        assert_eq!(waiting.as_deref(), Some("CrashLoopBackOff"));
        let s2 = c(&rt2, &pod);
        assert_eq!(s2.restart_count, 1);
        assert_eq!(
            s2.last_state
                .and_then(|l| l.terminated)
                .map(|t| (t.exit_code, t.reason)),
            Some((1, Some("Error".into())))
        );
    }

    #[test]
    fn image_pull_backoff() {
        let bad = ImageProfile {
            fail: ImageFailure::NeverPulls,
            ..Default::default()
        };
        let mut h = Harness::new(ImageProfiles::default().with("nginx:nope", bad));
        let pod = seed_pod("nginx:nope");
        let mut rt = PodRt::new(&pod, t(0), &mut h.env());
        h.run(&mut rt, t(2));
        let reason = |rt: &PodRt| {
            c(rt, &pod)
                .state
                .and_then(|s| s.waiting)
                .and_then(|w| w.reason)
                .unwrap_or_default()
        };
        assert_eq!(reason(&rt), "ErrImagePull");
        h.run(&mut rt, t(3));
        assert_eq!(reason(&rt), "ImagePullBackOff");
        assert_eq!(rt.deadline(), Some(t(12)), "retry after 10s");
        h.run(&mut rt, t(14));
        assert_eq!(reason(&rt), "ErrImagePull");
        assert_eq!(rt.deadline(), Some(t(15)));
        h.run(&mut rt, t(15));
        assert_eq!(rt.deadline(), Some(t(34)), "then 20s");
        // Fixing the image starts it right away.
        let good = seed_pod("nginx:1.19.0");
        rt.update_spec(&good, t(20), &mut h.env());
        h.run(&mut rt, t(23));
        assert!(c(&rt, &good).state.and_then(|s| s.running).is_some());
    }

    #[test]
    fn start_model_sandbox_and_transient_failures() {
        let running = |rt: &PodRt, pod: &Pod| c(rt, pod).state.and_then(|s| s.running).is_some();
        // A new pod waits for its sandbox (2 s) before the pull (2 s) and start (1 s).
        let starts = super::super::StartModel {
            sandbox: Duration::from_secs(2),
            ..Default::default()
        };
        let mut h = Harness::new(ImageProfiles {
            starts,
            ..Default::default()
        });
        let pod = seed_pod("nginx:1.19.0");
        let mut rt = PodRt::new(&pod, t(0), &mut h.env());
        h.run(&mut rt, t(4));
        assert!(!running(&rt, &pod), "sandbox, then pull: not yet running at 4 s");
        h.run(&mut rt, t(5));
        assert!(running(&rt, &pod));
        // Every first start fails once it is certain: ErrImagePull, back-off, retried (and failing again).
        let always = super::super::StartModel {
            new_pod_failure_ppm: 1_000_000,
            ..Default::default()
        };
        let mut h = Harness::new(ImageProfiles {
            starts: always,
            ..Default::default()
        });
        let mut rt = PodRt::new(&pod, t(0), &mut h.env());
        h.run(&mut rt, t(2));
        let waiting = c(&rt, &pod).state.and_then(|s| s.waiting).and_then(|w| w.reason);
        assert_eq!(waiting.as_deref(), Some("ErrImagePull"));
        assert!(h.events.iter().any(|e| e.message.contains("i/o timeout")));
        // Restarts in place have their own chance (0 here): the running container's update succeeds.
        let none = super::super::StartModel {
            new_pod_failure_ppm: 0,
            restart_failure_ppm: 0,
            ..Default::default()
        };
        let mut h = Harness::new(ImageProfiles {
            starts: none,
            ..Default::default()
        });
        let mut rt = PodRt::new(&pod, t(0), &mut h.env());
        h.run(&mut rt, t(4));
        h.images.starts.restart_failure_ppm = 1_000_000;
        rt.update_spec(&seed_pod("nginx:1.20.0"), t(10), &mut h.env());
        h.run(&mut rt, t(20));
        assert!(
            h.events.iter().any(|e| e.message.contains("i/o timeout")),
            "restart attempt failed"
        );
    }

    #[test]
    fn grace_period_bounds_prestop() {
        let mut h = Harness::new(ImageProfiles::default());
        let pod = seed_pod("nginx:1.19.0");
        let mut rt = PodRt::new(&pod, t(0), &mut h.env());
        h.run(&mut rt, t(10));
        rt.terminate(t(10), Duration::from_secs(2), &mut h.env());
        assert_eq!(rt.deadline(), Some(t(12)));
        h.run(&mut rt, t(12));
        assert!(rt.terminal());
        // Deleted before it ever ran.
        let mut rt = PodRt::new(&pod, t(0), &mut h.env());
        rt.advance(t(0), &mut h.env());
        rt.terminate(t(1), Duration::from_secs(30), &mut h.env());
        assert!(rt.terminal());
        let s = c(&rt, &pod);
        assert_eq!(
            s.state
                .and_then(|s| s.terminated)
                .and_then(|t| t.reason)
                .as_deref(),
            Some("ContainerStatusUnknown")
        );
    }

    #[test]
    fn init_containers_run_in_order() {
        let mut h = Harness::new(ImageProfiles::default());
        let mut pod = seed_pod("nginx:1.19.0");
        if let Some(spec) = &mut pod.spec {
            spec.init_containers = Some(vec![
                Container {
                    name: "init".into(),
                    image: Some("busybox:1".into()),
                    ..Default::default()
                },
                Container {
                    name: "side".into(),
                    image: Some("envoy:1".into()),
                    restart_policy: Some("Always".into()),
                    ..Default::default()
                },
            ]);
        }
        let mut rt = PodRt::new(&pod, t(0), &mut h.env());
        h.run(&mut rt, t(1));
        let (init, regular) = rt.statuses();
        assert_eq!(
            regular[0]
                .state
                .as_ref()
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref()),
            Some("PodInitializing")
        );
        assert!(init[0].state.as_ref().is_some_and(|s| s.waiting.is_some()));
        // init: pull 2 + start 1 → done at 3; sidecar: pull 2 + start 1 → started at 6; nginx: 6 + 3 = 9.
        h.run(&mut rt, t(9));
        let (init, regular) = rt.statuses();
        assert_eq!(
            init[0]
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code),
            Some(0)
        );
        assert!(init[1].started == Some(true) && init[1].ready);
        assert!(regular[0].state.as_ref().is_some_and(|s| s.running.is_some()));
    }

    #[test]
    fn serialized_pulls_share_a_node() {
        let mut h = Harness::new(ImageProfiles::default());
        let a = seed_pod("nginx:1.19.0");
        let b = seed_pod("redis:7");
        let mut ra = PodRt::new(&a, t(0), &mut h.env());
        let mut rb = PodRt::new(&b, t(0), &mut h.env());
        ra.advance(t(0), &mut h.env());
        rb.advance(t(0), &mut h.env());
        assert_eq!(ra.deadline(), Some(t(2)));
        assert_eq!(rb.deadline(), Some(t(4)), "the node pulls one image at a time");
        let a2 = seed_pod("nginx:1.19.0");
        let mut ra2 = PodRt::new(&a2, t(1), &mut h.env());
        ra2.advance(t(1), &mut h.env());
        assert_eq!(ra2.deadline(), Some(t(2)), "waits for the pull in progress");
    }
}
