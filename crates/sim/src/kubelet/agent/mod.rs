//! The kubelet agent loop: one pod watch for all nodes, one timer queue, bounded concurrent status writes. What it
//! does with each watched object is in `watched`, its timers and status writes in `sync`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
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
use super::runtime::{ConfigMaps, NodeRt, PodRt};
use super::write::Outcome;
use crate::Clock;

mod sync;
mod watched;

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
            // One queue for all the nodes' kubelets. Virtual time makes a node's events of one instant arrive
            // together, where a real kubelet's recorder (1,000 queued, client-go's `maxQueuedEvents`) drains them
            // as they come; so at 100,000 pods on 1,000 nodes this queue drops 237,856 of 950,010 Events, counted
            // and logged (2026-12-07). 1,000 per node dropped none but peaked at 3,084 MiB, over the 3 GiB the
            // 100k simulation is held to: the drops are the price, and `insitu bench` shows them.
            let (sink, task) =
                EventSink::spawn(client.clone(), "kubelet", 65_536, config.event_drops.clone());
            tasks.spawn(async move {
                let _ = task.await;
            });
            sink
        });
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let lost_rx = config.lost.subscribe();
        let jobs = config.image_pull_jobs.then(|| {
            let sink = config.events.then(|| {
                let (sink, task) = EventSink::spawn(
                    client.clone(),
                    "kruise-daemon-imagepuller",
                    4096,
                    config.event_drops.clone(),
                );
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
}
