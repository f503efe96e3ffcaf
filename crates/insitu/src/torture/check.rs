//! The invariant checker: watches pods and the CloneSet through a fault-free client and asserts at every event.
//!
//! Its arithmetic is its own (not the planner's): Kruise's documented bounds, computed from the spec it sees.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use insitu_api::CloneSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::time::Instant;

/// Trace lines kept for a failure report.
const TRACE: usize = 40;

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
}

impl Checker {
    /// Starts watching `default` with `client` (an oracle client: no faults).
    pub fn spawn(client: kube::Client, bounds: Bounds, live: Option<u64>) -> Checker {
        let (pods, pod_writer) = reflector::store::<Pod>();
        let (clonesets, cs_writer) = reflector::store::<CloneSet>();
        let checker = Checker {
            state: Default::default(),
            start: Instant::now(),
            live,
            pods,
            clonesets,
        };
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

    pub fn arm(&self) {
        self.lock().armed = true;
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
        let Some(max_unavailable) = bounds.strict_unavailable else {
            return;
        };
        if !armed {
            return;
        }
        if deleting {
            self.violate(format!(
                "pod {name} deleted during an in-place-only scenario (no change allows a delete)"
            ));
        }
        let unavailable = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some() || !ready(p))
            .count();
        if unavailable as i64 > i64::from(max_unavailable) {
            self.violate(format!(
                "{unavailable} pods unavailable, more than maxUnavailable = {max_unavailable}"
            ));
        }
    }
}
