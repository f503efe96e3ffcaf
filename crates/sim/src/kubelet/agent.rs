//! The kubelet agent loop: one pod watch for all nodes, one timer queue, bounded concurrent status writes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use insitu_api::containermeta::{RUNTIME_CONTAINERS_META_ANNOTATION, RuntimeContainerMetaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::{mpsc, watch};

use super::KubeletConfig;
use super::cache::{self, KeptSpec};
use super::events::{EventSink, Regarding};
use super::ipam::{Plan, Pool};
use super::node::{identities, node_labels};
use super::pulljob;
use super::runtime::{ConfigMaps, Env, KEvent, NodeRt, PodRt, add, deletion_grace};
use super::status::{PodView, build_status_kept};
use super::write::{Outcome, StatusWrite, is_code, meta_annotation, status_hash, write_status};
use crate::Clock;

/// Retry delay after a failed write.
const RETRY: Duration = Duration::from_secs(1);

struct NodeState {
    name: String,
    /// The node's labels (ImagePullJob node selectors match them).
    labels: BTreeMap<String, String>,
    host_ip: String,
    rt: NodeRt,
    pool: Pool,
}

struct Entry {
    uid: String,
    node: usize,
    /// The pod as last seen, without its spec (`cache::kept`).
    pod: Pod,
    /// What building its status reads of its spec.
    spec: KeptSpec,
    rt: PodRt,
    ip: Option<Ipv4Addr>,
    /// `hostNetwork`: the pod IP is the node IP.
    host_network: bool,
    start_time: Timestamp,
    timer: Option<(Timestamp, u64)>,
    writing: bool,
    dirty: bool,
    /// In `Agent::waiting` (a write is due and every write slot is taken).
    queued: bool,
    last_written: Option<u64>,
    deleting: bool,
    /// Found already terminal (Succeeded/Failed): never run or re-report, only finish a deletion.
    frozen: bool,
}

impl Entry {
    /// Caches `pod` as last seen. Its spec's kept part is immutable on a pod; a copy without a spec keeps it.
    fn keep(&mut self, pod: Pod) {
        let has_spec = pod.spec.is_some();
        let (pod, spec) = cache::kept(pod);
        self.pod = pod;
        if has_spec {
            self.spec = spec;
        }
    }
}

struct Done {
    key: String,
    uid: String,
    outcome: Outcome,
    /// The final delete's result, when this sync meant to delete (`Err` too when the status write before it
    /// failed, so the delete is retried with it).
    deleted: Option<Result<(), String>>,
}

pub(super) struct Agent {
    client: Client,
    clock: Arc<dyn Clock>,
    config: Arc<KubeletConfig>,
    nodes: Vec<NodeState>,
    node_index: HashMap<String, usize>,
    /// Boxed: an `Entry` is ~2.9 KB inline (mostly the `Pod` struct), and a table of them keeps up to half its
    /// slots spare, and twice that while it grows (~400 MB at 100k pods).
    pods: HashMap<String, Box<Entry>>,
    timers: BTreeMap<(Timestamp, u64), String>,
    seq: u64,
    rng: ChaCha8Rng,
    /// Status writes under way (at most `max_inflight_writes`).
    inflight: usize,
    /// Pods with a write due when every slot was taken, in the order they came; each is synced again (its
    /// status regenerated, so intermediate states collapse as in the kubelet's status manager) when a slot
    /// frees. A queue rather than a task per waiting write: 100k pods' writes waiting would each hold a pod.
    waiting: VecDeque<String>,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    events: Option<EventSink>,
    relist: Option<HashSet<String>>,
    /// What the kubelet's ConfigMap manager sees (env `configMapKeyRef`).
    config_maps: ConfigMaps,
    /// Lost nodes (by index): their pods' events wait in `parked`, their status is not written.
    lost: HashSet<usize>,
    lost_rx: watch::Receiver<BTreeSet<String>>,
    /// The latest watch event of each pod on a lost node, delivered when the node is back (as the kubelet's
    /// relist after a partition shows it the latest state, not the history).
    parked: BTreeMap<String, watcher::Event<Pod>>,
    /// The ImagePullJob executor (Kruise's ImagePullJob controller and kruise-daemon), when on.
    jobs: Option<pulljob::Executor>,
    _tasks: tokio::task::JoinSet<()>,
}

fn key_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn rv_of(pod: &Pod) -> Option<u64> {
    pod.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
}

fn regarding(pod: &Pod) -> Regarding {
    Regarding {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

impl Agent {
    pub(super) fn new(client: Client, clock: Arc<dyn Clock>, config: Arc<KubeletConfig>) -> Self {
        let plan = Plan::new(config.nodes);
        let nodes: Vec<NodeState> = identities(&config)
            .into_iter()
            .map(|id| NodeState {
                labels: node_labels(&id, &config),
                name: id.name,
                host_ip: id.host_ip,
                rt: NodeRt::with_allocatable(&config.capacity),
                pool: plan.pool(id.index),
            })
            .collect();
        let node_index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let mut tasks = tokio::task::JoinSet::new();
        let events = config.events.then(|| {
            let (sink, task) = EventSink::spawn(client.clone(), "kubelet", 65_536);
            tasks.spawn(async move {
                let _ = task.await;
            });
            sink
        });
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let lost_rx = config.lost.subscribe();
        let jobs = config.image_pull_jobs.then(|| {
            let sink = config.events.then(|| {
                let (sink, task) = EventSink::spawn(client.clone(), "kruise-daemon-imagepuller", 4096);
                tasks.spawn(async move {
                    let _ = task.await;
                });
                sink
            });
            pulljob::Executor::new(client.clone(), sink)
        });
        Self {
            jobs,
            inflight: 0,
            waiting: VecDeque::new(),
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            client,
            clock,
            config,
            nodes,
            node_index,
            pods: HashMap::new(),
            timers: BTreeMap::new(),
            seq: 0,
            done_tx,
            done_rx,
            events,
            relist: None,
            config_maps: ConfigMaps::default(),
            lost: HashSet::new(),
            lost_rx,
            parked: BTreeMap::new(),
            _tasks: tasks,
        }
    }

    pub(super) async fn run(mut self) {
        let api: Api<Pod> = Api::all(self.client.clone());
        let mut cfg = watcher::Config::default();
        let selector;
        if self.nodes.len() == 1 {
            selector = format!("spec.nodeName={}", self.nodes[0].name);
            cfg = cfg.fields(&selector);
        }
        let mut stream = watcher(api, cfg).default_backoff().boxed();
        let cm_api: Api<ConfigMap> = Api::all(self.client.clone());
        let mut cm_stream = watcher(cm_api, watcher::Config::default())
            .default_backoff()
            .boxed();
        self.on_lost_changed();
        let mut job_stream = match self.jobs {
            Some(_) => pulljob::stream(self.client.clone(), self.clock.clone()),
            None => futures::stream::pending().boxed(),
        };
        loop {
            let job_timer = self.jobs.as_ref().and_then(pulljob::Executor::deadline);
            let next_timer = self
                .timers
                .keys()
                .next()
                .map(|(t, _)| *t)
                .into_iter()
                .chain(job_timer)
                .min();
            let sleep = next_timer.map(|t| self.clock.sleep(super::runtime::since(t, self.clock.now())));
            tokio::select! {
                biased;
                Some(done) = self.done_rx.recv() => self.on_done(done),
                Ok(()) = self.lost_rx.changed() => self.on_lost_changed(),
                ev = stream.next() => match ev {
                    Some(Ok(ev)) => self.on_watch(ev),
                    Some(Err(e)) => tracing::debug!(error = %e, "kubelet pod watch error"),
                    None => return,
                },
                Some(ev) = cm_stream.next() => match ev {
                    Ok(ev) => self.on_config_map(ev),
                    Err(e) => tracing::debug!(error = %e, "kubelet configmap watch error"),
                },
                Some(ev) = job_stream.next() => {
                    if let Some(jobs) = &mut self.jobs {
                        jobs.on_event(ev);
                    }
                }
                Some(done) = pulljob::recv(self.jobs.as_mut()) => {
                    let now = self.clock.now();
                    if let Some(jobs) = &mut self.jobs {
                        jobs.on_done(done, now);
                    }
                }
                () = async { match sleep { Some(s) => s.await, None => std::future::pending().await } } => {
                    let now = self.clock.now().max(next_timer.unwrap_or(Timestamp::UNIX_EPOCH));
                    self.on_timers(now);
                }
            }
            self.run_jobs();
        }
    }

    /// Reconciles the ImagePullJobs that are due, over the nodes' image stores and the pods they run.
    fn run_jobs(&mut self) {
        let now = self.clock.now();
        let Some(jobs) = self.jobs.as_mut().filter(|j| j.due(now)) else {
            return;
        };
        let (pods, pod_nodes) = self.pods.values().map(|e| (&e.pod, e.node)).unzip();
        let mut world = pulljob::World {
            nodes: self
                .nodes
                .iter_mut()
                .map(|n| pulljob::NodeRef {
                    name: &n.name,
                    labels: &n.labels,
                    rt: &mut n.rt,
                })
                .collect(),
            pods,
            pod_nodes,
            images: &self.config.images,
        };
        jobs.run_due(now, &mut world);
    }

    fn on_watch(&mut self, ev: watcher::Event<Pod>) {
        let ev = match ev {
            watcher::Event::InitApply(p) => {
                if let Some(seen) = &mut self.relist {
                    seen.insert(key_of(&p));
                }
                watcher::Event::Apply(p)
            }
            ev => ev,
        };
        if let watcher::Event::Apply(p) | watcher::Event::Delete(p) = &ev
            && self.lost_node_of(p)
        {
            self.parked.insert(key_of(p), ev);
            return;
        }
        match ev {
            watcher::Event::Init => self.relist = Some(HashSet::new()),
            watcher::Event::InitApply(p) => self.on_apply(p),
            watcher::Event::InitDone => {
                if let Some(seen) = self.relist.take() {
                    let mut gone: Vec<String> =
                        self.pods.keys().filter(|k| !seen.contains(*k)).cloned().collect();
                    gone.sort_unstable();
                    for k in gone {
                        match self.pods.get(&k) {
                            Some(e) if self.lost.contains(&e.node) => {
                                let ev = watcher::Event::Delete(e.pod.clone());
                                self.parked.insert(k, ev);
                            }
                            _ => self.remove(&k),
                        }
                    }
                }
            }
            watcher::Event::Apply(p) => {
                if let Some(jobs) = &mut self.jobs {
                    jobs.pods_changed(p.metadata.namespace.as_deref().unwrap_or_default());
                }
                self.on_apply(p);
            }
            watcher::Event::Delete(p) => {
                if let Some(jobs) = &mut self.jobs {
                    jobs.pods_changed(p.metadata.namespace.as_deref().unwrap_or_default());
                }
                let key = key_of(&p);
                if self
                    .pods
                    .get(&key)
                    .is_some_and(|e| Some(&e.uid) == p.metadata.uid.as_ref())
                {
                    self.remove(&key);
                }
            }
        }
    }

    /// Whether `pod` runs (or is bound to, or was known on) a lost node.
    fn lost_node_of(&self, pod: &Pod) -> bool {
        if self.lost.is_empty() {
            return false;
        }
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .and_then(|n| self.node_index.get(n));
        let known = self.pods.get(&key_of(pod)).map(|e| &e.node);
        bound.or(known).is_some_and(|n| self.lost.contains(n))
    }

    /// Applies a change of the lost set: a node back gets its parked events, then a status sync of every pod.
    fn on_lost_changed(&mut self) {
        let names = self.lost_rx.borrow_and_update().clone();
        let now_lost: HashSet<usize> = names
            .iter()
            .filter_map(|n| self.node_index.get(n).copied())
            .collect();
        let back: Vec<usize> = self.lost.difference(&now_lost).copied().collect();
        self.lost = now_lost;
        if back.is_empty() {
            return;
        }
        let parked = std::mem::take(&mut self.parked);
        for (_, ev) in parked {
            self.on_watch(ev);
        }
        // Sorted: the order of the writes must not depend on HashMap iteration (a run replays from its seed).
        let mut keys: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, e)| back.contains(&e.node))
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort_unstable();
        for key in keys {
            self.sync(&key);
        }
    }

    fn on_config_map(&mut self, ev: watcher::Event<ConfigMap>) {
        let (cm, deleted) = match ev {
            watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) => (cm, false),
            watcher::Event::Delete(cm) => (cm, true),
            watcher::Event::Init | watcher::Event::InitDone => return,
        };
        let ns = cm.metadata.namespace.clone().unwrap_or_default();
        let name = cm.metadata.name.clone().unwrap_or_default();
        if deleted {
            self.config_maps.remove(&ns, &name);
        } else {
            let keys = cm
                .data
                .iter()
                .flat_map(|d| d.keys())
                .chain(cm.binary_data.iter().flat_map(|d| d.keys()))
                .cloned()
                .collect();
            self.config_maps.set(&ns, &name, keys);
        }
        let now = self.clock.now();
        let config = self.config.clone();
        let mut keys: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, e)| e.pod.metadata.namespace.as_deref() == Some(ns.as_str()) && !e.frozen)
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort_unstable();
        for key in keys {
            let mut events = Vec::new();
            let Some(e) = self.pods.get_mut(&key) else {
                continue;
            };
            let mut env = Env {
                images: &config.images,
                node: &mut self.nodes[e.node].rt,
                rng: &mut self.rng,
                events: &mut events,
                config_maps: &self.config_maps,
            };
            e.rt.config_changed(&ns, now);
            e.rt.advance(now, &mut env);
            self.emit(&key, events);
            self.reschedule(&key);
            self.sync(&key);
        }
    }

    fn remove(&mut self, key: &str) {
        if let Some(e) = self.pods.remove(key) {
            e.rt.release(&mut self.nodes[e.node].rt);
            if let Some(t) = e.timer {
                self.timers.remove(&t);
            }
            if let Some(ip) = e.ip {
                self.nodes[e.node].pool.release(ip);
            }
        }
    }

    fn on_apply(&mut self, pod: Pod) {
        let Some(node) = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .and_then(|n| self.node_index.get(n))
            .copied()
        else {
            return;
        };
        let key = key_of(&pod);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if self.pods.get(&key).is_some_and(|e| e.uid != uid) {
            self.remove(&key);
        }
        let now = self.clock.now();
        let mut events = Vec::new();
        let config = self.config.clone();
        let images = &config.images;
        if !self.pods.contains_key(&key) {
            let entry = self.accept(pod, node, now, &mut events, images);
            self.pods.insert(key.clone(), Box::new(entry));
        } else {
            let mut env = Env {
                images,
                node: &mut self.nodes[node].rt,
                rng: &mut self.rng,
                events: &mut events,
                config_maps: &self.config_maps,
            };
            let Some(e) = self.pods.get_mut(&key) else { return };
            if let (Some(old), Some(new)) = (rv_of(&e.pod), rv_of(&pod))
                && new < old
            {
                return;
            }
            if !e.frozen {
                e.rt.update_spec(&pod, now, &mut env);
                if config.kruise_daemon {
                    e.rt.restart_stale_env(&pod, now, &mut env);
                }
                if pod.metadata.deletion_timestamp.is_some() && !e.rt.terminating() {
                    e.rt.terminate(now, deletion_grace(&pod), &mut env);
                }
                e.rt.advance(now, &mut env);
            }
            e.keep(pod);
        }
        self.emit(&key, events);
        self.reschedule(&key);
        self.sync(&key);
    }

    fn accept(
        &mut self,
        pod: Pod,
        node: usize,
        now: Timestamp,
        events: &mut Vec<KEvent>,
        images: &super::ImageProfiles,
    ) -> Entry {
        let status = pod.status.clone().unwrap_or_default();
        let frozen = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
        let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
        let ns = &mut self.nodes[node];
        let mut ip = status
            .pod_ip
            .as_deref()
            .and_then(|s| s.parse::<Ipv4Addr>().ok())
            .filter(|ip| ns.pool.reserve(*ip));
        if ip.is_none() && !frozen && !host_network {
            ip = ns.pool.allocate();
            if ip.is_none() {
                tracing::warn!(node = %ns.name, "pod IP range exhausted");
            }
        }
        let start_time = status.start_time.as_ref().map_or(now, |t| t.0);
        let mut env = Env {
            images,
            node: &mut ns.rt,
            rng: &mut self.rng,
            events,
            config_maps: &self.config_maps,
        };
        let mut rt = PodRt::new(&pod, now, &mut env);
        if !frozen {
            if pod.metadata.deletion_timestamp.is_some() {
                rt.terminate(now, deletion_grace(&pod), &mut env);
            }
            rt.advance(now, &mut env);
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let (pod, spec) = cache::kept(pod);
        Entry {
            uid,
            node,
            pod,
            spec,
            rt,
            ip,
            host_network,
            start_time,
            timer: None,
            writing: false,
            queued: false,
            dirty: false,
            last_written: None,
            deleting: false,
            frozen,
        }
    }

    fn emit(&self, key: &str, events: Vec<KEvent>) {
        let (Some(sink), Some(e)) = (&self.events, self.pods.get(key)) else {
            return;
        };
        let reg = regarding(&e.pod);
        let host = &self.nodes[e.node].name;
        for ev in events {
            sink.record(
                ev.at,
                &reg,
                ev.field_path,
                ev.warning,
                ev.reason,
                ev.message,
                Some(host),
            );
        }
    }

    fn reschedule(&mut self, key: &str) {
        let Some(e) = self.pods.get_mut(key) else { return };
        let want = if e.frozen { None } else { e.rt.deadline() };
        if e.timer.map(|t| t.0) == want {
            return;
        }
        if let Some(t) = e.timer.take() {
            self.timers.remove(&t);
        }
        if let Some(at) = want {
            self.seq += 1;
            e.timer = Some((at, self.seq));
            self.timers.insert((at, self.seq), key.to_string());
        }
    }

    fn schedule_retry(&mut self, key: &str) {
        let at = add(self.clock.now(), RETRY);
        let Some(e) = self.pods.get_mut(key) else { return };
        if e.timer.is_some_and(|t| t.0 <= at) {
            return;
        }
        if let Some(t) = e.timer.take() {
            self.timers.remove(&t);
        }
        self.seq += 1;
        e.timer = Some((at, self.seq));
        self.timers.insert((at, self.seq), key.to_string());
    }

    fn on_timers(&mut self, now: Timestamp) {
        let config = self.config.clone();
        let images = &config.images;
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            let mut events = Vec::new();
            let Some(node) = self.pods.get(&key).map(|e| e.node) else {
                continue;
            };
            let mut env = Env {
                images,
                node: &mut self.nodes[node].rt,
                rng: &mut self.rng,
                events: &mut events,
                config_maps: &self.config_maps,
            };
            if let Some(e) = self.pods.get_mut(&key) {
                e.timer = None;
                if !e.frozen {
                    e.rt.advance(now, &mut env);
                }
            }
            self.emit(&key, events);
            self.reschedule(&key);
            self.sync(&key);
        }
    }

    fn view(&self, e: &Entry) -> PodView {
        let (init_statuses, statuses) = e.rt.statuses();
        let host_ip = self.nodes[e.node].host_ip.clone();
        let pod_ip = if e.host_network {
            host_ip.clone()
        } else {
            e.ip.map(|ip| ip.to_string()).unwrap_or_default()
        };
        PodView {
            sandbox_ready: !pod_ip.is_empty(),
            host_ip,
            pod_ip,
            start_time: e.start_time,
            init_statuses,
            statuses,
            terminal: e.rt.terminal(),
            runtime_meta: (self.config.kruise_daemon && e.rt.reads_metadata()).then(|| {
                RuntimeContainerMetaSet {
                    containers: e.rt.containers_meta(),
                }
                .to_json()
            }),
            resize_conditions: e.rt.resize_conditions(),
        }
    }

    /// Writes status if the generated status differs from the pod's; finishes deletion of terminal pods.
    fn sync(&mut self, key: &str) {
        let Some(e) = self.pods.get(key) else { return };
        if self.lost.contains(&e.node) {
            // Cut off: nothing reaches the apiserver; the node's return syncs every pod.
            return;
        }
        if e.writing {
            if let Some(e) = self.pods.get_mut(key) {
                e.dirty = true;
            }
            return;
        }
        let delete =
            e.pod.metadata.deletion_timestamp.is_some() && !e.deleting && (e.frozen || e.rt.terminal());
        let view = (!e.frozen).then(|| self.view(e));
        // The status to write, built once here and handed to the write (which rebuilds it only after a conflict).
        let first = view.as_ref().and_then(|view| {
            let desired = build_status_kept(&e.pod, &e.spec, view, self.clock.now());
            let meta = view.runtime_meta.as_deref();
            let differs = e.pod.status.as_ref() != Some(&desired)
                || meta.is_some_and(|m| meta_annotation(&e.pod) != Some(m));
            if !differs {
                return None;
            }
            let hash = status_hash(&desired, meta);
            (e.last_written != Some(hash)).then_some((desired, hash))
        });
        if first.is_none() && !delete {
            return;
        }
        if self.inflight >= self.write_slots() {
            if let Some(e) = self.pods.get_mut(key)
                && !e.queued
            {
                e.queued = true;
                self.waiting.push_back(key.to_string());
            }
            return;
        }
        self.inflight += 1;
        // The write needs the metadata (labels and annotations may change through pods/status), not the spec.
        let meta = e.pod.metadata.clone();
        let uid = e.uid.clone();
        if let Some(e) = self.pods.get_mut(key) {
            e.writing = true;
            e.deleting |= delete;
        }
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            meta.namespace.as_deref().unwrap_or("default"),
        );
        let (clock, tx, key) = (self.clock.clone(), self.done_tx.clone(), key.to_string());
        tokio::spawn(async move {
            let name = meta.name.clone().unwrap_or_default();
            let outcome = match (first, view) {
                (Some((desired, hash)), Some(view)) => {
                    let first = StatusWrite {
                        meta,
                        status: desired,
                        hash,
                    };
                    write_status(&api, &name, &uid, first, &view, clock.as_ref()).await
                }
                _ => Outcome::Unchanged(None),
            };
            let deleted = match (&outcome, delete) {
                (Outcome::Written(..) | Outcome::Unchanged(_), true) => {
                    let dp = DeleteParams {
                        grace_period_seconds: Some(0),
                        preconditions: Some(Preconditions {
                            uid: Some(uid.clone()),
                            resource_version: None,
                        }),
                        ..Default::default()
                    };
                    Some(match api.delete(&name, &dp).await {
                        Ok(_) => Ok(()),
                        Err(e) if is_code(&e, 404) => Ok(()),
                        // A 409 is a conflict, not proof the pod is gone (a failed UID precondition means a new
                        // pod took the name, which the watch then shows): retry, as the kubelet's status manager
                        // retries its final delete on every sync until the pod is gone.
                        Err(e) => Err(e.to_string()),
                    })
                }
                (Outcome::Gone, true) => Some(Ok(())),
                (Outcome::Failed(e), true) => Some(Err(format!("not attempted: status write failed: {e}"))),
                _ => None,
            };
            let _ = tx.send(Done {
                key,
                uid,
                outcome,
                deleted,
            });
        });
    }

    fn on_done(&mut self, done: Done) {
        self.inflight = self.inflight.saturating_sub(1);
        self.finish(done);
        while self.inflight < self.write_slots() {
            let Some(key) = self.waiting.pop_front() else {
                break;
            };
            if let Some(e) = self.pods.get_mut(&key) {
                e.queued = false;
                self.sync(&key);
            }
        }
    }

    /// Status writes that may be under way at once.
    fn write_slots(&self) -> usize {
        self.config.max_inflight_writes.max(1)
    }

    /// A write's outcome: the pod as written, a retry, or the sync it missed while writing.
    fn finish(&mut self, done: Done) {
        let Some(e) = self.pods.get_mut(&done.key).filter(|e| e.uid == done.uid) else {
            return;
        };
        e.writing = false;
        let mut retry = false;
        match done.outcome {
            Outcome::Written(w) => {
                e.last_written = Some(w.hash);
                if let Some(base) = w.base
                    && rv_of(&base) > rv_of(&e.pod)
                {
                    e.keep(*base);
                }
                // The write's own watch event (or a later one) may have arrived first; then it already shows this.
                let written = w.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
                if written > rv_of(&e.pod) {
                    e.pod.status = Some(w.status);
                    e.pod.metadata.resource_version = w.resource_version;
                    if let Some(m) = w.runtime_meta {
                        e.pod
                            .metadata
                            .annotations
                            .get_or_insert_with(Default::default)
                            .insert(RUNTIME_CONTAINERS_META_ANNOTATION.into(), m);
                    }
                }
            }
            Outcome::Unchanged(pod) => {
                if let Some(pod) = pod
                    && rv_of(&pod) > rv_of(&e.pod)
                {
                    e.keep(*pod);
                }
            }
            Outcome::Gone => {}
            Outcome::Failed(err) => {
                tracing::debug!(pod = %done.key, error = %err, "pod status write failed; retrying");
                retry = true;
            }
        }
        if let Some(Err(err)) = done.deleted {
            tracing::debug!(pod = %done.key, error = %err, "pod delete failed; retrying");
            e.deleting = false;
            retry = true;
        }
        let dirty = std::mem::take(&mut e.dirty);
        if retry {
            self.schedule_retry(&done.key);
        } else if dirty {
            self.sync(&done.key);
        }
    }
}
