//! Watches one CloneSet's rollout through the API and records what happened to each pod: the same observer
//! runs on the embedded cluster (virtual time) and on a real one (the e2e's predicted-vs-actual check).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures::StreamExt as _;
use insitu_api::CloneSet;
use insitu_api::quantity::parse_quantity;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::watcher;
use serde::Serialize;
use tokio::time::Instant;

/// How the observer decides that a rollout is over.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// No pod changed for this long and the CloneSet is not done: the rollout is stuck (reported as such).
    pub stall: Duration,
    /// Give up after this long in any case.
    pub timeout: Duration,
    /// How often the CloneSet's status is read.
    pub tick: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            stall: Duration::from_secs(600),
            timeout: Duration::from_secs(6 * 3600),
            tick: Duration::from_millis(200),
        }
    }
}

/// What happened to a pod that existed when the change was made.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodFate {
    pub name: String,
    pub node: String,
    /// `in-place`, `recreate` or `unchanged`.
    pub decision: String,
    /// Seconds after the change when the pod first left its steady state (revision, readiness, deletion).
    pub start: Option<f64>,
    /// Seconds after the change when it was Ready at the new revision (in place) or when its replacement was.
    pub end: Option<f64>,
}

/// Counts at one moment of the rollout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    pub t: f64,
    /// Live pods at the CloneSet's update revision.
    pub updated: usize,
    pub ready: usize,
    /// `replicas` minus the Ready live pods.
    pub unavailable: usize,
    /// Every pod, terminating ones included.
    pub pods: usize,
}

/// The observed rollout.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Observed {
    /// Seconds from the change to the CloneSet being done (or to the stall/timeout).
    pub seconds: f64,
    /// Done; false when it stalled or timed out.
    pub done: bool,
    pub update_revision: String,
    pub pods: Vec<PodFate>,
    /// Pods created during the rollout: (created, Ready) seconds after the change.
    pub new_pods: Vec<(f64, Option<f64>)>,
    pub peak_unavailable: usize,
    pub peak_extra_pods: usize,
    pub peak_extra_cpu_milli: i64,
    pub peak_extra_memory_bytes: i64,
    pub base_cpu_milli: i64,
    pub base_memory_bytes: i64,
    pub timeline: Vec<Sample>,
    /// The CloneSet's pods at the end (for the resizes still pending).
    #[serde(skip)]
    pub final_pods: Vec<Pod>,
}

#[derive(Clone, Debug, PartialEq)]
struct Lite {
    name: String,
    node: String,
    rev: String,
    ready: bool,
    /// No in-place update in flight (`insitu explain`'s stage None): a resize the kubelet has not applied
    /// keeps a pod Ready but Updating.
    settled: bool,
    deleting: bool,
    cpu: i64,
    mem: i64,
}

/// Requests of a pod: cpu millicores, memory bytes (containers; init containers run before, not beside).
pub fn requests(p: &Pod) -> (i64, i64) {
    let q = |k: &str| -> i64 {
        p.spec
            .iter()
            .flat_map(|s| &s.containers)
            .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get(k))
            .filter_map(|q| parse_quantity(&q.0))
            .map(|v| i64::try_from(v).unwrap_or(i64::MAX))
            .sum()
    };
    (q("cpu") / 1_000_000, q("memory") / 1_000_000_000)
}

fn lite(p: &Pod) -> Lite {
    let ready = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let (cpu, mem) = requests(p);
    Lite {
        name: p.metadata.name.clone().unwrap_or_default(),
        node: p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        rev: p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(insitu_api::keys::CONTROLLER_REVISION_HASH_LABEL))
            .cloned()
            .unwrap_or_default(),
        ready,
        settled: insitu_core::explain::podwhy::stage(p).0 == "None",
        deleting: p.metadata.deletion_timestamp.is_some(),
        cpu,
        mem,
    }
}

fn owned_by(p: &Pod, cs: &str) -> bool {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.kind == "CloneSet" && r.name == cs)
}

/// The rollout is over: the controller saw the last spec, and as many pods as it expects at the update
/// revision are updated and Ready, all replicas are Ready, no pod is on its way out and none is mid-update.
/// The pods themselves must show it, not only the status: between a recreate's deletion and its replacement's
/// creation the status can already count pods the watch has not shown yet.
fn done(cs: &CloneSet, pods: &HashMap<String, Lite>) -> bool {
    let Some(st) = &cs.status else { return false };
    let replicas = cs.spec.replicas.unwrap_or(1);
    let count =
        |f: &dyn Fn(&Lite) -> bool| i32::try_from(pods.values().filter(|p| f(p)).count()).unwrap_or(i32::MAX);
    st.observed_generation >= cs.metadata.generation.unwrap_or(0)
        && st.updated_ready_replicas >= st.expected_updated_replicas
        && st.ready_replicas >= replicas
        && st.replicas == replicas
        && pods.values().all(|p| !p.deleting && p.settled)
        && count(&|p| p.ready) >= replicas
        && count(&|p| p.ready && p.rev == st.update_revision) >= st.expected_updated_replicas
}

/// Running totals over `State::pods`, kept as pods change (a sample per event must not walk 10,000 pods).
#[derive(Default)]
struct Totals {
    /// Live (not terminating) pods per revision.
    live_by_rev: HashMap<String, usize>,
    live_ready: usize,
    pods: usize,
    cpu: i64,
    mem: i64,
}

impl Totals {
    fn add(&mut self, p: &Lite, sign: i64) {
        let step = |v: &mut usize| {
            *v = if sign > 0 { *v + 1 } else { v.saturating_sub(1) };
        };
        step(&mut self.pods);
        self.cpu += sign * p.cpu;
        self.mem += sign * p.mem;
        if !p.deleting {
            step(self.live_by_rev.entry(p.rev.clone()).or_default());
            if p.ready {
                step(&mut self.live_ready);
            }
        }
    }
}

struct State {
    pods: HashMap<String, Lite>,
    totals: Totals,
    base: HashMap<String, Lite>,
    first_change: HashMap<String, f64>,
    ready_at: HashMap<String, f64>,
    created: BTreeMap<String, f64>,
    update_revision: String,
    replicas: usize,
    obs: Observed,
    last_change: Instant,
}

impl State {
    fn sample(&mut self, t: f64) {
        let tot = &self.totals;
        let s = Sample {
            t,
            updated: tot.live_by_rev.get(&self.update_revision).copied().unwrap_or(0),
            ready: tot.live_ready,
            unavailable: self.replicas.saturating_sub(tot.live_ready),
            pods: tot.pods,
        };
        let (cpu, mem) = (tot.cpu, tot.mem);
        let o = &mut self.obs;
        o.peak_unavailable = o.peak_unavailable.max(s.unavailable);
        o.peak_extra_pods = o.peak_extra_pods.max(s.pods.saturating_sub(self.replicas));
        o.peak_extra_cpu_milli = o.peak_extra_cpu_milli.max(cpu - o.base_cpu_milli);
        o.peak_extra_memory_bytes = o.peak_extra_memory_bytes.max(mem - o.base_memory_bytes);
        if o.timeline
            .last()
            .is_none_or(|l| (l.updated, l.ready, l.pods) != (s.updated, s.ready, s.pods))
        {
            o.timeline.push(s);
        }
    }

    fn apply(&mut self, uid: String, l: Option<Lite>, t: f64) {
        let changed = self.pods.get(&uid) != l.as_ref();
        if !changed {
            return;
        }
        self.last_change = Instant::now();
        match l {
            Some(l) => {
                if let Some(b) = self.base.get(&uid)
                    && (b.rev != l.rev || b.ready != l.ready || !l.settled || l.deleting)
                {
                    self.first_change.entry(uid.clone()).or_insert(t);
                }
                if !self.base.contains_key(&uid) {
                    self.created.entry(uid.clone()).or_insert(t);
                }
                let was_ok = self.pods.get(&uid).is_some_and(|p| p.ready && p.settled);
                if l.ready && l.settled && !was_ok && !l.deleting {
                    self.ready_at.insert(uid.clone(), t);
                }
                self.totals.add(&l, 1);
                if let Some(old) = self.pods.insert(uid, l) {
                    self.totals.add(&old, -1);
                }
            }
            None => {
                if self.base.contains_key(&uid) {
                    self.first_change.entry(uid.clone()).or_insert(t);
                }
                if let Some(old) = self.pods.remove(&uid) {
                    self.totals.add(&old, -1);
                }
            }
        }
        self.sample(t);
    }
}

/// Watches the pods of CloneSet `ns/name`, runs `change` once the watch has listed them (the steady state),
/// and follows the rollout until it is done, stalls or times out ([`Limits`]). Times are `tokio::time` (virtual
/// on the embedded cluster's paused clock).
pub async fn observe(
    client: &kube::Client,
    ns: &str,
    name: &str,
    change: impl Future<Output = anyhow::Result<()>>,
    limits: Limits,
) -> anyhow::Result<Observed> {
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let css: Api<CloneSet> = Api::namespaced(client.clone(), ns);
    let mut stream = watcher(pods_api, watcher::Config::default()).boxed();
    let mut initial = HashMap::new();
    loop {
        match stream.next().await {
            Some(Ok(watcher::Event::InitApply(p))) if owned_by(&p, name) => {
                if let Some(uid) = p.metadata.uid.clone() {
                    initial.insert(uid, lite(&p));
                }
            }
            Some(Ok(watcher::Event::InitDone)) => break,
            Some(Err(e)) => return Err(anyhow::anyhow!("watching pods: {e}")),
            None => anyhow::bail!("the pod watch ended before it listed"),
            _ => {}
        }
    }
    let cs0 = css.get(name).await?;
    let replicas = usize::try_from(cs0.spec.replicas.unwrap_or(1)).unwrap_or(0);
    let (cpu, mem) = initial
        .values()
        .fold((0, 0), |(c, m), p: &Lite| (c + p.cpu, m + p.mem));
    let mut totals = Totals::default();
    for p in initial.values() {
        totals.add(p, 1);
    }
    let mut st = State {
        totals,
        pods: initial.clone(),
        base: initial,
        first_change: HashMap::new(),
        ready_at: HashMap::new(),
        created: BTreeMap::new(),
        update_revision: cs0.status.map(|s| s.update_revision).unwrap_or_default(),
        replicas,
        obs: Observed {
            base_cpu_milli: cpu,
            base_memory_bytes: mem,
            ..Observed::default()
        },
        last_change: Instant::now(),
    };
    change.await?;
    let t0 = Instant::now();
    st.update_revision = next_revision(client, ns, name).await?;
    st.sample(0.0);
    let mut tick = tokio::time::interval(limits.tick);
    let mut seen_new_generation = false;
    loop {
        tokio::select! {
            ev = stream.next() => {
                let t = t0.elapsed().as_secs_f64();
                match ev {
                    Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) if owned_by(&p, name) => {
                        if let Some(uid) = p.metadata.uid.clone() {
                            st.apply(uid, Some(lite(&p)), t);
                        }
                    }
                    Some(Ok(watcher::Event::Delete(p))) => {
                        if let Some(uid) = p.metadata.uid.clone() {
                            st.apply(uid, None, t);
                        }
                    }
                    Some(Err(e)) => tracing::debug!("pod watch: {e}"),
                    None => anyhow::bail!("the pod watch ended"),
                    _ => {}
                }
            }
            _ = tick.tick() => {
                let cs = css.get(name).await?;
                if let Some(s) = &cs.status {
                    st.update_revision.clone_from(&s.update_revision);
                }
                // The first reads may still show the status of the spec before the change.
                seen_new_generation |= cs.status.as_ref().is_some_and(|s| {
                    s.observed_generation >= cs.metadata.generation.unwrap_or(0)
                        && s.observed_generation > cs0.metadata.generation.unwrap_or(0)
                });
                let t = t0.elapsed().as_secs_f64();
                if seen_new_generation && done(&cs, &st.pods) {
                    st.obs.done = true;
                    st.obs.seconds = t;
                    break;
                }
                if st.last_change.elapsed() > limits.stall || t0.elapsed() > limits.timeout {
                    st.obs.seconds = st.last_change.duration_since(t0).as_secs_f64().max(0.0);
                    break;
                }
            }
        }
    }
    Ok(finish(st, &pods_of(client, ns, name).await?))
}

/// The revision the controller will roll to, computed from the changed CloneSet and its revisions as the
/// controller does (Kruise `getActiveRevisions`), so that the first samples count the right pods as updated.
async fn next_revision(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<String> {
    let cs: CloneSet = Api::namespaced(client.clone(), ns).get(name).await?;
    let revs: Vec<std::sync::Arc<ControllerRevision>> =
        Api::<ControllerRevision>::namespaced(client.clone(), ns)
            .list(&kube::api::ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.kind == "CloneSet" && o.name == name)
            })
            .map(std::sync::Arc::new)
            .collect();
    let ar = insitu_core::revision::active_revisions(&cs, &revs);
    Ok(ar.update.metadata.name.clone().unwrap_or_default())
}

async fn pods_of(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<Vec<Pod>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    Ok(api
        .list(&kube::api::ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| owned_by(p, name))
        .collect())
}

/// Each original pod's fate; a recreated pod's end is its replacement's Ready time, replacements taken in
/// the order they were created, matched with the pods in the order they left.
fn finish(mut st: State, final_pods: &[Pod]) -> Observed {
    let mut new: Vec<(f64, Option<f64>)> = st
        .created
        .iter()
        .map(|(uid, t)| (*t, st.ready_at.get(uid).copied().filter(|r| r >= t)))
        .collect();
    new.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut replacements = new.iter().map(|(_, r)| *r);
    let mut base: Vec<(&String, &Lite)> = st.base.iter().collect();
    base.sort_by(|a, b| {
        let t = |u: &String| st.first_change.get(u).copied().unwrap_or(f64::MAX);
        t(a.0).total_cmp(&t(b.0)).then(a.1.name.cmp(&b.1.name))
    });
    let mut fates = Vec::new();
    for (uid, b) in base {
        let now = st.pods.get(uid);
        let (decision, end) = match now {
            None => ("recreate", replacements.next().flatten()),
            Some(p) if p.rev == st.update_revision && b.rev != st.update_revision => (
                "in-place",
                st.ready_at.get(uid).copied().filter(|_| p.ready && p.settled),
            ),
            Some(_) => ("unchanged", None),
        };
        fates.push(PodFate {
            name: b.name.clone(),
            node: b.node.clone(),
            decision: decision.into(),
            start: st
                .first_change
                .get(uid)
                .copied()
                .filter(|_| decision != "unchanged"),
            end,
        });
    }
    fates.sort_by(|a, b| a.name.cmp(&b.name));
    st.obs.pods = fates;
    st.obs.new_pods = new;
    st.obs.update_revision = st.update_revision.clone();
    st.obs.final_pods = final_pods.to_vec();
    st.obs
}
