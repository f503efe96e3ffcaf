//! The invariant checker: watches pods and the CloneSet through a fault-free client and asserts at every event.
//!
//! Its arithmetic is its own (not the planner's): Kruise's documented bounds, computed from the spec it sees.
//!
//! Node loss makes pods unavailable (NotReady, then evicted and replaced) without the controller doing anything;
//! the budget accounts for it as Kruise's arithmetic does, which counts every unavailable pod, lost ones
//! included, against `maxUnavailable`. A pod is *lost* while it is unavailable because of a node (its node is not
//! Ready or gone, or the taint manager / PodGC evicted it) and stays so until it is Ready again; a pod created
//! after an eviction (its replacement) is lost until Ready too. Then, in an in-place-only scenario:
//! - the controller's own unavailable pods (the unavailable ones that are not lost) never exceed
//!   `maxUnavailable`;
//! - the controller does not take a pod down while the budget is used up, live lost pods counted (Kruise:
//!   `maxUnavailable - unavailable` pods of the active ones, so not the Terminating evicted ones but their
//!   replacements while not Ready, may be updated), once it could know: a lost pod counts from
//!   [`KNOWN_AFTER`] after it became lost, the lag of the controller's watch under the injected 410s and 500s
//!   (kube-runtime's watcher backs off up to 30 s before it relists);
//! - a pod may be deleted only by an eviction (its `DisruptionTarget` condition says the taint manager or PodGC).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use insitu_api::CloneSet;
use insitu_sim::nodelifecycle::{BY_POD_GC, BY_TAINT_MANAGER};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::time::Instant;

/// Trace lines kept for a failure report.
const TRACE: usize = 40;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// How long after a pod became lost the controller is held to count it against the budget.
pub const KNOWN_AFTER: f64 = 60.0;

/// Whether the taint manager or PodGC marked `p` for deletion.
pub fn evicted(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && matches!(c.reason.as_deref(), Some(BY_TAINT_MANAGER | BY_POD_GC))
            })
        })
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

fn unavailable(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some() || !ready(p)
}

pub fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn revision(p: &Pod) -> &str {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("controller-revision-hash"))
        .map_or("", String::as_str)
}

/// Kruise's scaled value of an int-or-percent against `replicas` (percent rounded up or down).
pub fn scaled(v: Option<&IntOrString>, replicas: i32, up: bool, default: i32) -> i32 {
    match v {
        None => default,
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => {
            let p: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            let x = p * i64::from(replicas);
            let v = if up { (x + 99) / 100 } else { x / 100 };
            i32::try_from(v).unwrap_or(i32::MAX)
        }
    }
}

/// The checker's configuration for one scenario.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// Live pods never exceed this: the largest replicas the scenario asks for plus its surge.
    pub max_pods: i32,
    /// In-place-only scenario: no pod is ever deleted and unavailable ≤ this (Kruise maxUnavailable).
    pub strict_unavailable: Option<i32>,
}

#[derive(Default)]
struct State {
    violations: Vec<String>,
    trace: VecDeque<String>,
    /// The strict checks start once every pod was ready (the scale-up before is not an update).
    armed: bool,
    events: u64,
    /// Lost pods (by uid) and when they became lost.
    lost: HashMap<String, f64>,
    /// Pods seen so far (by uid) and whether they were available at their last event.
    available: HashMap<String, bool>,
    /// Evictions seen, and the pods created since armed (replacements while within evictions).
    evictions: HashSet<String>,
    created: HashSet<String>,
    /// FNV-1a over every trace line noted, in order: two runs of a seed are the same run iff they are equal.
    digest: u64,
    lines: u64,
}

/// A running checker; clones share state.
#[derive(Clone)]
pub struct Checker {
    state: Arc<Mutex<State>>,
    start: Instant,
    /// Print every trace line as it is noted (`--seed S --trace`).
    live: Option<u64>,
    pub pods: Store<Pod>,
    pub clonesets: Store<CloneSet>,
    pub nodes: Store<Node>,
}

impl Checker {
    /// Starts watching `default` with `client` (an oracle client: no faults).
    pub fn spawn(client: kube::Client, bounds: Bounds, live: Option<u64>) -> Checker {
        let (pods, pod_writer) = reflector::store::<Pod>();
        let (clonesets, cs_writer) = reflector::store::<CloneSet>();
        let (nodes, node_writer) = reflector::store::<Node>();
        let checker = Checker {
            state: Default::default(),
            start: Instant::now(),
            live,
            pods,
            clonesets,
            nodes,
        };
        tokio::spawn(
            watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
                .reflect(node_writer)
                .for_each(|_| std::future::ready(())),
        );
        let cs_api: Api<CloneSet> = Api::namespaced(client.clone(), "default");
        tokio::spawn(
            watcher(cs_api, watcher::Config::default())
                .reflect(cs_writer)
                .for_each(|_| std::future::ready(())),
        );
        let pod_api: Api<Pod> = Api::namespaced(client, "default");
        let c = checker.clone();
        tokio::spawn(async move {
            let mut events = Box::pin(watcher(pod_api, watcher::Config::default()).reflect(pod_writer));
            while let Some(ev) = events.next().await {
                if let Ok(ev) = ev {
                    c.observe(&ev, &bounds);
                }
            }
        });
        checker
    }

    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A line for the trace (the driver's steps, crashes, fault changes).
    pub fn note(&self, line: impl Into<String>) {
        let line = format!("t={:.1}s {}", self.elapsed(), line.into());
        if let Some(seed) = self.live {
            eprintln!("seed {seed}: {line}");
        }
        let mut st = self.lock();
        st.digest = line
            .bytes()
            .chain([b'\n'])
            .fold(if st.lines == 0 { FNV_OFFSET } else { st.digest }, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
            });
        st.lines += 1;
        if st.trace.len() == TRACE {
            st.trace.pop_front();
        }
        st.trace.push_back(line);
    }

    pub fn violate(&self, what: impl Into<String>) {
        let line = format!("VIOLATION {}", what.into());
        self.note(line.clone());
        let mut st = self.lock();
        if st.violations.len() < 10 {
            st.violations.push(format!("t={:.1}s {line}", self.elapsed()));
        }
    }

    /// Starts the strict checks; the pods there now are the ones the scenario started with (not replacements).
    pub fn arm(&self) {
        let pods = self.pods.state();
        let mut st = self.lock();
        st.armed = true;
        for p in pods {
            st.available.insert(uid(&p), !unavailable(&p));
        }
    }

    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    pub fn trace(&self) -> Vec<String> {
        self.lock().trace.iter().cloned().collect()
    }

    pub fn events(&self) -> u64 {
        self.lock().events
    }

    /// The digest of the whole trace and its number of lines.
    pub fn digest(&self) -> (u64, u64) {
        let st = self.lock();
        (st.digest, st.lines)
    }

    /// Pods the taint manager or PodGC evicted.
    pub fn evictions(&self) -> u64 {
        self.lock().evictions.len() as u64
    }

    fn observe(&self, ev: &watcher::Event<Pod>, bounds: &Bounds) {
        let pod = match ev {
            watcher::Event::Apply(p) | watcher::Event::Delete(p) => p,
            _ => return,
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        let deleting = matches!(ev, watcher::Event::Delete(_)) || pod.metadata.deletion_timestamp.is_some();
        self.note(format!(
            "pod {name} {} ready={} rev={}",
            match ev {
                watcher::Event::Delete(_) => "gone",
                _ if deleting => "terminating",
                _ => "applied",
            },
            ready(pod),
            revision(pod)
        ));
        let armed = {
            let mut st = self.lock();
            st.events += 1;
            st.armed
        };
        let pods = self.pods.state();
        let live: Vec<&Arc<Pod>> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        if live.len() as i64 > i64::from(bounds.max_pods) {
            self.violate(format!(
                "{} live pods, more than replicas + maxSurge = {}",
                live.len(),
                bounds.max_pods
            ));
        }
        if evicted(pod) {
            self.lock().evictions.insert(uid(pod));
        }
        let Some(max_unavailable) = bounds.strict_unavailable else {
            return;
        };
        if !armed {
            return;
        }
        self.budget(pod, deleting, &pods, max_unavailable);
    }

    /// The in-place-only checks, node loss accounted as the module doc says.
    fn budget(&self, pod: &Pod, deleting: bool, pods: &[Arc<Pod>], max_unavailable: i32) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let now = self.elapsed();
        let nodes: HashMap<String, bool> = self
            .nodes
            .state()
            .iter()
            .map(|n| (n.metadata.name.clone().unwrap_or_default(), node_ready(n)))
            .collect();
        let mut st = self.lock();
        for p in pods {
            let id = uid(p);
            if evicted(p) {
                st.evictions.insert(id.clone());
            }
            if !st.available.contains_key(&id) {
                st.created.insert(id.clone());
            }
        }
        let replacements_allowed = st.evictions.len();
        let mut replacements = 0;
        let mut newly_down = None;
        for p in pods {
            let id = uid(p);
            let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
            let node_bad = !node.is_empty() && !nodes.get(node).copied().unwrap_or(false);
            let is_replacement = st.created.contains(&id) && {
                replacements += 1;
                replacements <= replacements_allowed
            };
            if unavailable(p) {
                if node_bad || evicted(p) || is_replacement {
                    st.lost.entry(id.clone()).or_insert(now);
                }
            } else {
                st.lost.remove(&id);
            }
            let was = st.available.insert(id.clone(), !unavailable(p));
            if was == Some(true) && unavailable(p) && !st.lost.contains_key(&id) {
                newly_down = Some(id);
            }
        }
        let id = uid(pod);
        if deleting && !evicted(pod) {
            drop(st);
            self.violate(format!(
                "pod {name} deleted during an in-place-only scenario (no change allows a delete, and no eviction marked it)"
            ));
            st = self.lock();
        }
        let down: Vec<&Arc<Pod>> = pods.iter().filter(|p| unavailable(p)).collect();
        let lost_now = down.iter().filter(|p| st.lost.contains_key(&uid(p))).count();
        let own = down.len() - lost_now;
        let mut why = Vec::new();
        if own as i64 > i64::from(max_unavailable) {
            why.push(format!(
                "{own} pods unavailable by the controller ({lost_now} more lost with their node), more than maxUnavailable = {max_unavailable}"
            ));
        }
        if let Some(down_id) = newly_down.filter(|d| *d == id) {
            // Kruise counts active pods only: an evicted pod stops counting once Terminating, its replacement
            // counts (lost, while not Ready) instead.
            let known_lost = down
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| st.lost.get(&uid(p)).is_some_and(|t| *t <= now - KNOWN_AFTER))
                .count();
            let others = own - 1 + known_lost;
            if others as i64 >= i64::from(max_unavailable) {
                why.push(format!(
                    "pod {name} ({down_id}) taken down with {} others unavailable ({known_lost} lost for over {KNOWN_AFTER}s), maxUnavailable = {max_unavailable}",
                    others
                ));
            }
        }
        drop(st);
        for w in why {
            self.violate(w);
        }
    }
}
