//! A rollout observed from a pod watch: updated / ready / unavailable pods over time, the peak of pods and requested
//! resources held on nodes, and the pods whose update hit a failed container start.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use insitu_api::quantity::parse_quantity;
use insitu_sim::Clock as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::watcher;
use serde::Serialize;

/// One point of the timeline (seconds since the change was applied).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    pub t: f64,
    /// Live pods whose spec runs the new image.
    pub updated: usize,
    /// Live pods Ready.
    pub ready: usize,
    /// `replicas` − live Ready pods (what a Service behind the CloneSet lacks).
    pub unavailable: usize,
}

/// What the watch saw of one pod.
#[derive(Clone, Debug, Default)]
struct PodView {
    live: bool,
    bound: bool,
    finished: bool,
    ready: bool,
    new_image: bool,
    failed_start: bool,
    cpu_milli: i64,
    memory_bytes: i64,
}

/// Running aggregates of a watch; shared between the watch task and the scenario.
#[derive(Debug, Default)]
pub struct Observed {
    pods: BTreeMap<String, PodView>,
    pub samples: Vec<Sample>,
    /// Most pod objects at once (live + terminating), and most requests held on nodes (bound, not finished).
    pub peak_pods: usize,
    pub peak_cpu_milli: i64,
    pub peak_memory_bytes: i64,
    /// UIDs of pods that showed `ErrImagePull` / `ImagePullBackOff` / `CrashLoopBackOff` during the rollout.
    pub failed: BTreeSet<String>,
}

fn view(pod: &Pod, new_image: &str) -> PodView {
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let (mut cpu, mut mem) = (0i64, 0i64);
    for c in &spec.containers {
        let req = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        let q = |k: &str| {
            req.and_then(|r| r.get(k))
                .and_then(|q| parse_quantity(&q.0))
                .unwrap_or(0)
        };
        cpu += i64::try_from(q("cpu") / 1_000_000).unwrap_or(i64::MAX);
        mem += i64::try_from(q("memory") / 1_000_000_000).unwrap_or(i64::MAX);
    }
    let phase = status.phase.as_deref().unwrap_or("");
    let failing = status.container_statuses.iter().flatten().any(|s| {
        s.state
            .as_ref()
            .and_then(|st| st.waiting.as_ref())
            .and_then(|w| w.reason.as_deref())
            .is_some_and(|r| matches!(r, "ErrImagePull" | "ImagePullBackOff" | "CrashLoopBackOff"))
    });
    PodView {
        live: pod.metadata.deletion_timestamp.is_none(),
        bound: spec.node_name.is_some(),
        finished: phase == "Succeeded" || phase == "Failed",
        ready: insitu_core::explain::podtable::ready(pod) == "True",
        new_image: spec.containers.first().and_then(|c| c.image.as_deref()) == Some(new_image),
        failed_start: failing,
        cpu_milli: cpu,
        memory_bytes: mem,
    }
}

impl Observed {
    fn apply(&mut self, pod: &Pod, new_image: &str) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let v = view(pod, new_image);
        if v.failed_start {
            self.failed.insert(uid.clone());
        }
        self.pods.insert(uid, v);
    }

    fn sample(&mut self, t: f64, replicas: usize) {
        let live = || self.pods.values().filter(|p| p.live);
        let held = self.pods.values().filter(|p| p.bound && !p.finished);
        let (cpu, mem) = held.fold((0, 0), |(c, m), p| (c + p.cpu_milli, m + p.memory_bytes));
        self.peak_pods = self.peak_pods.max(self.pods.len());
        self.peak_cpu_milli = self.peak_cpu_milli.max(cpu);
        self.peak_memory_bytes = self.peak_memory_bytes.max(mem);
        let ready = live().filter(|p| p.ready).count();
        let s = Sample {
            t,
            updated: live().filter(|p| p.new_image).count(),
            ready,
            unavailable: replicas.saturating_sub(ready),
        };
        let same = self
            .samples
            .last()
            .is_some_and(|l| (l.updated, l.ready, l.unavailable) == (s.updated, s.ready, s.unavailable));
        if !same {
            self.samples.push(s);
        }
    }
}

/// Watches the pods matching `selector` from now on, recording into the returned [`Observed`] until aborted.
pub fn spawn(
    pods: Api<Pod>,
    selector: String,
    clock: Arc<insitu_sim::SimClock>,
    new_image: String,
    replicas: usize,
) -> (Arc<Mutex<Observed>>, tokio::task::JoinHandle<()>) {
    let observed = Arc::new(Mutex::new(Observed::default()));
    let out = observed.clone();
    let t0 = clock.now();
    let task = tokio::spawn(async move {
        let mut events = Box::pin(watcher(pods, watcher::Config::default().labels(&selector)));
        // While a (re-)list is delivered the map is incomplete: sample only once it is whole.
        let mut listing = false;
        while let Some(ev) = events.next().await {
            let Ok(ev) = ev else { continue };
            let t = clock.now().duration_since(t0).as_secs_f64();
            let Ok(mut o) = out.lock() else { return };
            match ev {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => o.apply(&p, &new_image),
                watcher::Event::Delete(p) => {
                    o.pods.remove(p.metadata.uid.as_deref().unwrap_or_default());
                }
                watcher::Event::Init => {
                    listing = true;
                    o.pods.clear();
                }
                watcher::Event::InitDone => listing = false,
            }
            if !listing {
                o.sample(t, replicas);
            }
        }
    });
    (observed, task)
}
