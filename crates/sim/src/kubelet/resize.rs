//! In-place pod resize as kubelet 1.37 does it (KEP-1287): allocation against the node, PodResizePending /
//! PodResizeInProgress, actuation, restarts for `RestartContainer`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use insitu_api::quantity::parse_quantity;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodCondition, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::status::to_time;
use super::timing::add;

/// How long the runtime takes to apply accepted resources to the cgroups.
pub const ACTUATION: Duration = Duration::from_millis(500);
/// Deferred resizes are retried every housekeeping period (kubelet `housekeepingPeriod`).
pub const RETRY: Duration = Duration::from_secs(2);

type List = BTreeMap<String, Quantity>;

fn nano(q: &Quantity) -> i128 {
    parse_quantity(&q.0).unwrap_or(0)
}

fn same(a: &Option<List>, b: &Option<List>, name: &str) -> bool {
    let get = |m: &Option<List>| m.as_ref().and_then(|m| m.get(name)).map(nano);
    get(a) == get(b)
}

/// One container's resources as the kubelet tracks them. The three are nearly always equal, so they share one
/// copy (a `ResourceRequirements` is two maps, ~1.2 KB a container: three per container were ~40% of what the
/// kubelet kept per pod); a resize makes its own copy of the one it changes.
#[derive(Clone, Debug, PartialEq)]
pub struct Res {
    /// What the spec asks for.
    pub desired: Arc<ResourceRequirements>,
    /// What the kubelet admitted (`allocatedResources`).
    pub allocated: Arc<ResourceRequirements>,
    /// What the running container has (`status.resources`).
    pub actual: Arc<ResourceRequirements>,
    policy: Vec<(String, String)>,
}

impl Res {
    pub fn from_spec(c: &Container) -> Self {
        let r = Arc::new(c.resources.clone().unwrap_or_default());
        let mut res = Self {
            desired: r.clone(),
            allocated: r.clone(),
            actual: r,
            policy: Vec::new(),
        };
        res.set_spec(c);
        res
    }

    /// Follows a spec change (resources and resize policy; nothing is allocated yet).
    pub fn set_spec(&mut self, c: &Container) {
        // Compared before cloning: every spec update passes here, and nearly none changes resources.
        if c.resources.as_ref().unwrap_or(&ResourceRequirements::default()) != &*self.desired {
            self.desired = Arc::new(c.resources.clone().unwrap_or_default());
        }
        self.policy = c
            .resize_policy
            .iter()
            .flatten()
            .map(|p| (p.resource_name.clone(), p.restart_policy.clone()))
            .collect();
    }

    /// Takes over what a previous kubelet allocated and applied (from the pod status).
    pub fn adopt(&mut self, s: &ContainerStatus) {
        if let Some(r) = &s.resources {
            self.actual = Arc::new(r.clone());
            Arc::make_mut(&mut self.allocated).limits = r.limits.clone();
        }
        if let Some(a) = &s.allocated_resources {
            Arc::make_mut(&mut self.allocated).requests = Some(a.clone());
        }
    }

    fn cpu_mem_differ(&self, name: &str) -> bool {
        !same(&self.desired.requests, &self.allocated.requests, name)
            || !same(&self.desired.limits, &self.allocated.limits, name)
    }

    fn pending(&self) -> bool {
        self.cpu_mem_differ("cpu") || self.cpu_mem_differ("memory")
    }

    /// `RestartContainer` applies to a resource this resize changes (kubelet `computePodResizeAction`).
    fn needs_restart(&self) -> bool {
        self.policy
            .iter()
            .any(|(r, p)| p == "RestartContainer" && self.cpu_mem_differ(r))
    }

    /// `status.resources`: the allocated resources, with cpu/memory as the running container has them.
    pub fn status_resources(&self, running: bool) -> ResourceRequirements {
        if !running {
            return (*self.allocated).clone();
        }
        let mut r = (*self.allocated).clone();
        for (dst, src) in [
            (&mut r.limits, &self.actual.limits),
            (&mut r.requests, &self.actual.requests),
        ] {
            for name in ["cpu", "memory"] {
                match src.as_ref().and_then(|m| m.get(name)) {
                    Some(q) => {
                        dst.get_or_insert_with(BTreeMap::new)
                            .insert(name.into(), q.clone());
                    }
                    None => {
                        if let Some(d) = dst.as_mut() {
                            d.remove(name);
                        }
                    }
                }
            }
        }
        r
    }

    fn requests(&self, r: &ResourceRequirements) -> (i128, i128) {
        let get = |name: &str| r.requests.as_ref().and_then(|m| m.get(name)).map_or(0, nano);
        (get("cpu"), get("memory"))
    }
}

/// The node's allocatable and what its pods hold (kubelet allocation manager).
#[derive(Clone, Debug, Default)]
pub struct NodeAlloc {
    /// (cpu, memory) in nano-units; `None` = unlimited.
    pub allocatable: Option<(i128, i128)>,
    pods: HashMap<String, (i128, i128)>,
}

impl NodeAlloc {
    pub fn set(&mut self, pod: &str, requests: (i128, i128)) {
        self.pods.insert(pod.to_string(), requests);
    }

    pub fn release(&mut self, pod: &str) {
        self.pods.remove(pod);
    }

    fn used_by_others(&self, pod: &str) -> (i128, i128) {
        self.pods
            .iter()
            .filter(|(k, _)| k.as_str() != pod)
            .fold((0, 0), |(c, m), (_, (pc, pm))| (c + pc, m + pm))
    }
}

/// Pod requests from containers' resources (`resource.PodRequests`: regular sum, at least the largest init).
pub fn pod_requests<'a>(res: impl Iterator<Item = (&'a Res, bool)>, allocated: bool) -> (i128, i128) {
    let (mut cpu, mut mem, mut init_cpu, mut init_mem) = (0, 0, 0, 0);
    for (r, init) in res {
        let (c, m) = r.requests(if allocated { &r.allocated } else { &r.desired });
        if init {
            init_cpu = init_cpu.max(c);
            init_mem = init_mem.max(m);
        } else {
            cpu += c;
            mem += m;
        }
    }
    (cpu.max(init_cpu), mem.max(init_mem))
}

#[derive(Clone, Debug, PartialEq)]
enum State {
    Idle,
    Pending {
        reason: &'static str,
        message: String,
        generation: i64,
        since: Timestamp,
        retry_at: Option<Timestamp>,
    },
    InProgress {
        generation: i64,
        since: Timestamp,
        done_at: Timestamp,
    },
}

/// An event the resize produces: (warning, reason, message).
pub type ResizeEvent = (bool, &'static str, String);

/// What one resize step asks of the runtime.
#[derive(Debug, Default)]
pub struct Step {
    pub events: Vec<ResizeEvent>,
    /// Indices (into the slice given) of containers to restart (`RestartContainer`).
    pub restart: Vec<usize>,
}

/// One pod's resize progress.
#[derive(Clone, Debug)]
pub struct PodResize {
    state: State,
}

impl Default for PodResize {
    fn default() -> Self {
        Self { state: State::Idle }
    }
}

fn summary(names: &[&str], res: &[&Res], generation: i64, error: Option<&str>) -> String {
    let containers: Vec<_> = names
        .iter()
        .zip(res)
        .map(|(n, r)| json!({"name": n, "resources": &*r.desired}))
        .collect();
    let mut v = json!({"containers": containers, "generation": generation});
    if let Some(e) = error {
        v["error"] = json!(e);
    }
    v.to_string()
}

impl PodResize {
    pub fn deadline(&self) -> Option<Timestamp> {
        match &self.state {
            State::Idle => None,
            State::Pending { retry_at, .. } => *retry_at,
            State::InProgress { done_at, .. } => Some(*done_at),
        }
    }

    /// kubelet `handlePodResourcesResize`: on a spec change (or a retry), admit the desired resources
    /// against the node or mark the resize pending. `res` are the regular containers (`names` theirs).
    pub fn sync(
        &mut self,
        key: &str,
        names: &[&str],
        res: &mut [&mut Res],
        node: &mut NodeAlloc,
        generation: i64,
        now: Timestamp,
    ) -> Step {
        let mut step = Step::default();
        if !res.iter().any(|r| r.pending()) {
            // Desired == allocated (e.g. a resize rolled back): nothing is pending any more.
            if matches!(self.state, State::Pending { .. }) {
                self.state = State::Idle;
            }
            return step;
        }
        let view: Vec<&Res> = res.iter().map(|r| &**r).collect();
        let (cpu, mem) = pod_requests(view.iter().map(|r| (*r, false)), false);
        if let Some((acpu, amem)) = node.allocatable {
            let (ucpu, umem) = node.used_by_others(key);
            let over = |want: i128, cap: i128| want > cap;
            let (reason, message) = if over(cpu, acpu) || over(mem, amem) {
                // kubelet (≤ 1.35) found this itself; kube-apiserver 1.36+ refuses it at admission already.
                let (name, want, cap) = if over(cpu, acpu) {
                    ("cpu", cpu / 1_000_000, acpu / 1_000_000)
                } else {
                    ("memory", mem / 1_000_000_000, amem / 1_000_000_000)
                };
                (
                    "Infeasible",
                    format!("Node didn't have enough capacity: {name}, requested: {want}, capacity: {cap}"),
                )
            } else if over(cpu + ucpu, acpu) || over(mem + umem, amem) {
                let (name, want, used, cap) = if over(cpu + ucpu, acpu) {
                    ("cpu", cpu / 1_000_000, ucpu / 1_000_000, acpu / 1_000_000)
                } else {
                    (
                        "memory",
                        mem / 1_000_000_000,
                        umem / 1_000_000_000,
                        amem / 1_000_000_000,
                    )
                };
                (
                    "Deferred",
                    format!(
                        "Node didn't have enough resource: {name}, requested: {want}, used: {used}, capacity: {cap}"
                    ),
                )
            } else {
                ("", String::new())
            };
            if !reason.is_empty() {
                let changed = !matches!(&self.state, State::Pending { reason: r, generation: g, .. }
                    if *r == reason && *g == generation);
                if changed {
                    let ev = if reason == "Infeasible" {
                        "ResizeInfeasible"
                    } else {
                        "ResizeDeferred"
                    };
                    let msg = format!(
                        "Pod resize {reason}: {}",
                        summary(names, &view, generation, Some(&message))
                    );
                    step.events.push((true, ev, msg));
                }
                let since = match &self.state {
                    State::Pending { since, reason: r, .. } if *r == reason => *since,
                    _ => now,
                };
                self.state = State::Pending {
                    reason,
                    message,
                    generation,
                    since,
                    retry_at: (reason == "Deferred").then(|| add(now, RETRY)),
                };
                return step;
            }
        }
        // Accepted: allocate, restart what RestartContainer asks for, actuate the rest.
        step.events.push((
            false,
            "ResizeStarted",
            format!("Pod resize started: {}", summary(names, &view, generation, None)),
        ));
        for (i, r) in res.iter_mut().enumerate() {
            if r.needs_restart() {
                step.restart.push(i);
            }
            r.allocated = r.desired.clone();
        }
        node.set(key, (cpu, mem));
        self.state = State::InProgress {
            generation,
            since: now,
            done_at: add(now, ACTUATION),
        };
        step
    }

    /// The actuation finished (or a deferred resize is due for a retry: the caller calls `sync` then).
    /// Returns the completion event, if the resize is done.
    pub fn tick(&mut self, names: &[&str], res: &mut [&mut Res], now: Timestamp) -> Option<ResizeEvent> {
        let State::InProgress {
            generation, done_at, ..
        } = self.state
        else {
            return None;
        };
        if done_at > now {
            return None;
        }
        for r in res.iter_mut() {
            r.actual = r.allocated.clone();
        }
        self.state = State::Idle;
        let view: Vec<&Res> = res.iter().map(|r| &**r).collect();
        Some((
            false,
            "ResizeCompleted",
            format!(
                "Pod resize completed: {}",
                summary(names, &view, generation, None)
            ),
        ))
    }

    /// Whether a deferred resize waits for a retry at `now`.
    pub fn retry_due(&self, now: Timestamp) -> bool {
        matches!(self.state, State::Pending { retry_at: Some(t), .. } if t <= now)
    }

    /// The `PodResizePending` / `PodResizeInProgress` conditions (kubelet status manager).
    pub fn conditions(&self) -> Vec<PodCondition> {
        match &self.state {
            State::Idle => Vec::new(),
            State::Pending {
                reason,
                message,
                generation,
                since,
                ..
            } => vec![PodCondition {
                type_: "PodResizePending".into(),
                status: "True".into(),
                reason: Some((*reason).into()),
                message: Some(message.clone()),
                last_transition_time: Some(to_time(*since)),
                last_probe_time: Some(to_time(*since)),
                observed_generation: Some(*generation),
            }],
            State::InProgress {
                generation, since, ..
            } => vec![PodCondition {
                type_: "PodResizeInProgress".into(),
                status: "True".into(),
                reason: None,
                message: None,
                last_transition_time: Some(to_time(*since)),
                last_probe_time: Some(to_time(*since)),
                observed_generation: Some(*generation),
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(cpu: &str, policy: &str) -> Container {
        let q = |v: &str| Some([("cpu".to_string(), Quantity(v.into()))].into_iter().collect());
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: q(cpu),
                limits: q("4"),
                claims: None,
            }),
            resize_policy: Some(vec![k8s_openapi::api::core::v1::ContainerResizePolicy {
                resource_name: "cpu".into(),
                restart_policy: policy.into(),
            }]),
            ..Default::default()
        }
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn accept_actuate_complete() {
        let mut r = Res::from_spec(&c("1", "NotRequired"));
        let mut node = NodeAlloc {
            allocatable: Some((4_000_000_000, 1 << 40)),
            ..Default::default()
        };
        node.set("p", (1_000_000_000, 0));
        let mut pr = PodResize::default();
        r.set_spec(&c("2", "NotRequired"));
        let step = pr.sync("p", &["c"], &mut [&mut r], &mut node, 2, t(0));
        assert!(step.restart.is_empty());
        assert_eq!(step.events[0].1, "ResizeStarted");
        assert_eq!(pr.conditions()[0].type_, "PodResizeInProgress");
        assert_eq!(r.allocated, r.desired);
        assert_ne!(r.status_resources(true), *r.desired, "not actuated yet");
        assert!(pr.tick(&["c"], &mut [&mut r], t(0)).is_none());
        assert_eq!(pr.tick(&["c"], &mut [&mut r], t(1)).unwrap().1, "ResizeCompleted");
        assert_eq!(r.status_resources(true), *r.desired);
        assert!(pr.conditions().is_empty());
    }

    #[test]
    fn restart_container_policy_restarts() {
        let mut r = Res::from_spec(&c("1", "RestartContainer"));
        let mut node = NodeAlloc::default();
        r.set_spec(&c("2", "RestartContainer"));
        let step = PodResize::default().sync("p", &["c"], &mut [&mut r], &mut node, 2, t(0));
        assert_eq!(step.restart, vec![0]);
    }

    #[test]
    fn infeasible_and_deferred() {
        let mut node = NodeAlloc {
            allocatable: Some((4_000_000_000, 1 << 40)),
            ..Default::default()
        };
        node.set("other", (2_500_000_000, 0));
        let mut r = Res::from_spec(&c("1", "NotRequired"));
        let mut pr = PodResize::default();
        r.set_spec(&c("8", "NotRequired"));
        let step = pr.sync("p", &["c"], &mut [&mut r], &mut node, 2, t(0));
        let cond = &pr.conditions()[0];
        assert_eq!(
            (cond.type_.as_str(), cond.reason.as_deref()),
            ("PodResizePending", Some("Infeasible"))
        );
        assert_eq!(
            cond.message.as_deref(),
            Some("Node didn't have enough capacity: cpu, requested: 8000, capacity: 4000")
        );
        assert_eq!(step.events[0].1, "ResizeInfeasible");
        assert_eq!(pr.deadline(), None, "infeasible is not retried");
        r.set_spec(&c("2", "NotRequired"));
        pr.sync("p", &["c"], &mut [&mut r], &mut node, 3, t(1));
        assert_eq!(pr.conditions()[0].reason.as_deref(), Some("Deferred"));
        assert_eq!(pr.deadline(), Some(t(3)));
        node.release("other");
        assert!(pr.retry_due(t(3)));
        pr.sync("p", &["c"], &mut [&mut r], &mut node, 3, t(3));
        assert_eq!(pr.conditions()[0].type_, "PodResizeInProgress");
        // Rolled back before anything was pending: nothing to do.
        let mut r2 = Res::from_spec(&c("1", "NotRequired"));
        let mut idle = PodResize::default();
        assert!(
            idle.sync("q", &["c"], &mut [&mut r2], &mut node, 1, t(0))
                .events
                .is_empty()
        );
        assert!(idle.conditions().is_empty());
    }
}
