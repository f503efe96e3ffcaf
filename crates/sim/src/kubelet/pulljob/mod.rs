//! The simulated nodes execute Kruise's ImagePullJobs: this plays Kruise's ImagePullJob controller and the
//! kruise-daemon of each simulated node at once, pulling into the nodes' image stores the kubelet reads.
//!
//! Kruise splits the work: its controller picks a job's nodes (`GetNodeImagesForJob`), hands the image to at
//! most `parallelism` of them at a time by writing it into their NodeImage spec, and sums their NodeImage
//! status into the job's status (`calculateStatus`); each node's kruise-daemon pulls what its NodeImage asks
//! (`pullWorker.Run`). Here the NodeImage is this agent's memory (its CRD need not be installed, and no
//! NodeImage objects are written); the pull lands in the node's image store, so a container started there
//! later finds the image present ("already present on machine", no pull time), and a kubelet pull already
//! under way is shared. Kruise's protection finalizer and the pull-secret copies into `kruise-daemon-config`
//! serve only the secret sync, which the sim does not need: neither is written.

pub mod model;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;
use tokio::sync::mpsc;

use super::ImageProfiles;
use super::events::{EventSink, Regarding};
use super::image::ImageFailure;
use super::runtime::{NodeRt, add};
use crate::Clock;
use model::{JobSpec, JobStatus, NodeInfo, NodeState, PodInfo, PullInput, PullOutcome};

/// How often to look again for the ImagePullJob kind when the server does not serve it (CRD not installed).
const DISCOVERY_RETRY: Duration = Duration::from_secs(30);
/// Retry delay after a failed status write or delete.
const RETRY: Duration = Duration::from_secs(1);

/// What the job stream yields: the served version once, then the watch.
pub(super) enum JobEvent {
    Served(ApiResource),
    Watch(Box<Result<watcher::Event<DynamicObject>, watcher::Error>>),
}

fn resource(version: &str) -> ApiResource {
    ApiResource {
        group: "apps.kruise.io".into(),
        version: version.into(),
        api_version: format!("apps.kruise.io/{version}"),
        kind: "ImagePullJob".into(),
        plural: "imagepulljobs".into(),
    }
}

/// The ImagePullJob version to use: v1beta1 (Kruise master's, the storage version) where served, else v1alpha1.
async fn discover(client: Client, clock: Arc<dyn Clock>) -> ApiResource {
    loop {
        for version in ["v1beta1", "v1alpha1"] {
            let ar = resource(version);
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            match api.list(&ListParams::default().limit(1)).await {
                Ok(_) => return ar,
                Err(e) => tracing::debug!(version, error = %e, "ImagePullJobs not served"),
            }
        }
        clock.sleep(DISCOVERY_RETRY).await;
    }
}

/// The stream of ImagePullJob events for the agent's loop (pending forever until the kind is served).
pub(super) fn stream(client: Client, clock: Arc<dyn Clock>) -> BoxStream<'static, JobEvent> {
    futures::stream::once(discover(client.clone(), clock))
        .flat_map(move |ar| {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let watch = watcher(api, watcher::Config::default())
                .default_backoff()
                .map(|e| JobEvent::Watch(Box::new(e)));
            futures::stream::once(std::future::ready(JobEvent::Served(ar))).chain(watch)
        })
        .boxed()
}

/// The executor's next finished write (pending forever without an executor).
pub(super) async fn recv(jobs: Option<&mut Executor>) -> Option<Done> {
    match jobs {
        Some(j) => j.done_rx.recv().await,
        None => std::future::pending().await,
    }
}

/// One node the executor may pull onto.
pub(super) struct NodeRef<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub rt: &'a mut NodeRt,
}

/// What a reconcile reads and changes: the agent's nodes (their image stores) and pods.
pub(super) struct World<'a> {
    pub nodes: Vec<NodeRef<'a>>,
    pub pods: Vec<&'a Pod>,
    /// Node index of each pod in `pods`.
    pub pod_nodes: Vec<usize>,
    pub images: &'a ImageProfiles,
}

struct Task {
    outcome: PullOutcome,
    /// The failure was evented.
    reported: bool,
}

struct Job {
    obj: DynamicObject,
    spec: JobSpec,
    /// Per node name: the image handed to it and how its pull ends.
    tasks: BTreeMap<String, Task>,
    /// Next time this job needs a reconcile.
    wake: Option<Timestamp>,
    busy: bool,
    dirty: bool,
}

enum Outcome {
    Written(Box<DynamicObject>),
    Deleted,
    Failed(String),
}

pub(super) struct Done {
    key: String,
    uid: String,
    outcome: Outcome,
}

/// The executor's state, owned by the kubelet agent.
pub(super) struct Executor {
    client: Client,
    resource: Option<ApiResource>,
    jobs: BTreeMap<String, Job>,
    relist: Option<HashSet<String>>,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    events: Option<EventSink>,
}

fn key_of(o: &DynamicObject) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

fn status_of(o: &DynamicObject) -> Option<&Value> {
    o.data.get("status").filter(|s| !s.is_null())
}

fn time_at(o: &DynamicObject, field: &str) -> Option<Timestamp> {
    status_of(o)?.get(field)?.as_str()?.parse().ok()
}

fn rv(o: &DynamicObject) -> u64 {
    o.resource_version().and_then(|r| r.parse().ok()).unwrap_or(0)
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s.max(0)).unwrap_or(0))
}

impl Executor {
    pub(super) fn new(client: Client, events: Option<EventSink>) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Self {
            client,
            resource: None,
            jobs: BTreeMap::new(),
            relist: None,
            done_tx,
            done_rx,
            events,
        }
    }

    /// The next time a job needs a reconcile.
    pub(super) fn deadline(&self) -> Option<Timestamp> {
        self.jobs.values().filter_map(|j| j.wake).min()
    }

    /// A write finished: take the object it returned; a failed one is retried after [`RETRY`].
    pub(super) fn on_done(&mut self, done: Done, now: Timestamp) {
        let Some(job) = self.jobs.get_mut(&done.key) else {
            return;
        };
        if job.obj.uid().as_deref() != Some(done.uid.as_str()) {
            return;
        }
        job.busy = false;
        let dirty = std::mem::take(&mut job.dirty);
        match done.outcome {
            Outcome::Written(obj) => {
                if rv(&obj) >= rv(&job.obj) {
                    job.obj = *obj;
                }
                if dirty {
                    job.wake = Some(now);
                }
            }
            Outcome::Deleted => {}
            Outcome::Failed(e) => {
                tracing::debug!(job = %done.key, error = %e, "ImagePullJob write failed; retrying");
                let at = add(now, RETRY);
                job.wake = Some(job.wake.map_or(at, |w| w.min(at)));
            }
        }
    }

    /// An ImagePullJob stream event.
    pub(super) fn on_event(&mut self, ev: JobEvent) {
        match ev {
            JobEvent::Served(ar) => {
                tracing::info!(version = %ar.api_version, "executing ImagePullJobs on the simulated nodes");
                self.resource = Some(ar);
            }
            JobEvent::Watch(ev) => match *ev {
                Err(e) => tracing::debug!(error = %e, "ImagePullJob watch error"),
                Ok(watcher::Event::Init) => self.relist = Some(HashSet::new()),
                Ok(watcher::Event::InitApply(o)) => {
                    if let Some(seen) = &mut self.relist {
                        seen.insert(key_of(&o));
                    }
                    self.apply(o);
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(seen) = self.relist.take() {
                        self.jobs.retain(|k, _| seen.contains(k));
                    }
                }
                Ok(watcher::Event::Apply(o)) => self.apply(o),
                Ok(watcher::Event::Delete(o)) => {
                    let key = key_of(&o);
                    if self.jobs.get(&key).is_some_and(|j| j.obj.uid() == o.uid()) {
                        self.jobs.remove(&key);
                    }
                }
            },
        }
    }

    fn apply(&mut self, mut o: DynamicObject) {
        o.metadata.managed_fields = None;
        let key = key_of(&o);
        let spec = JobSpec::parse(o.data.get("spec").unwrap_or(&Value::Null));
        match self.jobs.get_mut(&key) {
            Some(j) if j.obj.uid() == o.uid() => {
                if rv(&o) < rv(&j.obj) {
                    return;
                }
                j.obj = o;
                j.spec = spec;
                j.wake = Some(Timestamp::UNIX_EPOCH);
            }
            _ => {
                self.jobs.insert(
                    key,
                    Job {
                        obj: o,
                        spec,
                        tasks: BTreeMap::new(),
                        wake: Some(Timestamp::UNIX_EPOCH),
                        busy: false,
                        dirty: false,
                    },
                );
            }
        }
    }

    /// Pods of `namespace` changed: jobs there that select by pod look again (Kruise's pod event handler).
    pub(super) fn pods_changed(&mut self, namespace: &str) {
        for j in self.jobs.values_mut() {
            if j.spec.pod_selector.is_some()
                && j.obj.namespace().as_deref() == Some(namespace)
                && time_at(&j.obj, "completionTime").is_none()
            {
                j.wake = Some(Timestamp::UNIX_EPOCH);
            }
        }
    }

    /// Whether any job is due at `now` (the agent builds a [`World`] only then).
    pub(super) fn due(&self, now: Timestamp) -> bool {
        self.deadline().is_some_and(|d| d <= now)
    }

    /// Reconciles every job due at `now`.
    pub(super) fn run_due(&mut self, now: Timestamp, world: &mut World<'_>) {
        let due: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.wake.is_some_and(|w| w <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.reconcile(&key, now, world);
        }
    }

    /// Kruise `ReconcileImagePullJob.Reconcile` with the daemons' side folded in.
    fn reconcile(&mut self, key: &str, now: Timestamp, world: &mut World<'_>) {
        let Some(job) = self.jobs.get_mut(key) else { return };
        job.wake = None;
        if job.busy {
            job.dirty = true;
            return;
        }
        let act = step(key, job, now, world, self.events.as_ref());
        match act {
            Act::Nothing => {}
            Act::Delete => {
                job.busy = true;
                self.delete(key);
            }
            Act::Write(status) => {
                job.busy = true;
                self.write_status(key, status);
            }
        }
    }

    fn write_status(&self, key: &str, status: Value) {
        let (Some(ar), Some(job)) = (self.resource.clone(), self.jobs.get(key)) else {
            return;
        };
        let mut obj = job.obj.clone();
        let (ns, name, uid) = (
            obj.namespace().unwrap_or_default(),
            obj.name_any(),
            obj.uid().unwrap_or_default(),
        );
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &ns, &ar);
        let (tx, key) = (self.done_tx.clone(), key.to_string());
        tokio::spawn(async move {
            let mut outcome = Outcome::Failed("too many conflicts".into());
            for _ in 0..5 {
                obj.data["status"] = status.clone();
                match api.replace_status(&name, &PostParams::default(), &obj).await {
                    Ok(o) => {
                        outcome = Outcome::Written(Box::new(o));
                        break;
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => match api.get_opt(&name).await {
                        Ok(Some(o)) if o.uid().as_deref() == Some(uid.as_str()) => obj = o,
                        Ok(_) => {
                            outcome = Outcome::Deleted;
                            break;
                        }
                        Err(e) => {
                            outcome = Outcome::Failed(e.to_string());
                            break;
                        }
                    },
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        outcome = Outcome::Deleted;
                        break;
                    }
                    Err(e) => {
                        outcome = Outcome::Failed(e.to_string());
                        break;
                    }
                }
            }
            let _ = tx.send(Done { key, uid, outcome });
        });
    }

    /// Kruise deletes a finished job once its TTL runs out.
    fn delete(&self, key: &str) {
        let (Some(ar), Some(job)) = (self.resource.clone(), self.jobs.get(key)) else {
            return;
        };
        let (ns, name, uid) = (
            job.obj.namespace().unwrap_or_default(),
            job.obj.name_any(),
            job.obj.uid().unwrap_or_default(),
        );
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &ns, &ar);
        let (tx, key) = (self.done_tx.clone(), key.to_string());
        tracing::info!(job = %key, "deleting ImagePullJob for ttlSecondsAfterFinished");
        tokio::spawn(async move {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            let outcome = match api.delete(&name, &dp).await {
                Ok(_) => Outcome::Deleted,
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Outcome::Deleted,
                Err(e) => Outcome::Failed(e.to_string()),
            };
            let _ = tx.send(Done { key, uid, outcome });
        });
    }
}

/// What a reconcile ends with.
enum Act {
    Nothing,
    Delete,
    Write(Value),
}

/// One reconcile of a job not being written: TTL deletion once finished; else the status over its targets,
/// handing the image to more nodes (up to `parallelism` pulling) until no more can start.
fn step(key: &str, job: &mut Job, now: Timestamp, world: &mut World<'_>, events: Option<&EventSink>) -> Act {
    if job.obj.metadata.deletion_timestamp.is_some() {
        return Act::Nothing;
    }
    if let Some(done) = time_at(&job.obj, "completionTime") {
        // Finished: deleted `ttlSecondsAfterFinished` after completion (kept without one).
        if let Some(ttl) = job.spec.ttl_seconds_after_finished {
            let at = add(done, secs(ttl));
            if at <= now {
                return Act::Delete;
            }
            job.wake = Some(at);
        }
        return Act::Nothing;
    }
    let ns = job.obj.namespace().unwrap_or_default();
    let start = time_at(&job.obj, "startTime");
    let targets = {
        let infos: Vec<NodeInfo<'_>> = world
            .nodes
            .iter()
            .map(|n| NodeInfo {
                name: n.name,
                labels: n.labels,
            })
            .collect();
        let pods = world.pods.iter().zip(&world.pod_nodes).map(|(p, n)| PodInfo {
            namespace: p.metadata.namespace.as_deref().unwrap_or_default(),
            labels: p.metadata.labels.as_ref(),
            node: *n,
            active: p.metadata.deletion_timestamp.is_none()
                && !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                ),
        });
        model::targets(&job.spec, &ns, &infos, pods)
    };
    let status = loop {
        let states: Vec<(&str, NodeState)> = targets
            .iter()
            .map(|&i| {
                (
                    world.nodes[i].name,
                    state(job.tasks.get(world.nodes[i].name), now),
                )
            })
            .collect();
        let (status, not_synced) = model::calculate(&job.spec, start, now, &states);
        let n = model::to_sync(&job.spec, &status, not_synced.len());
        if status.completion_time.is_some() || n == 0 {
            break status;
        }
        for name in not_synced.iter().take(n) {
            let Some(node) = world.nodes.iter_mut().find(|x| x.name == name) else {
                continue;
            };
            let profile = world.images.lookup(&job.spec.image);
            let outcome = model::run_pull(&PullInput {
                start: now,
                pull: profile.pull,
                never_pulls: profile.fail == ImageFailure::NeverPulls,
                present: node.rt.present_at(&job.spec.image),
                spec: &job.spec,
            });
            if let Some(at) = outcome.present_at {
                node.rt.mark_present(&job.spec.image, at);
            }
            tracing::debug!(job = %key, node = %name, ?outcome, "ImagePullJob: pulling onto the node");
            job.tasks.insert(
                name.clone(),
                Task {
                    outcome,
                    reported: false,
                },
            );
        }
    };
    report_failures(job, now, events);
    job.wake = next_wake(job, &status, now);
    let desired = status.to_json();
    if status_of(&job.obj) == Some(&desired) {
        Act::Nothing
    } else {
        Act::Write(desired)
    }
}

fn state(task: Option<&Task>, now: Timestamp) -> NodeState {
    match task {
        None => NodeState::NotSynced,
        Some(t) if t.outcome.done_at > now => NodeState::Pulling,
        Some(t) if t.outcome.ok => NodeState::Succeeded,
        Some(_) => NodeState::Failed,
    }
}

/// The next time the job's status changes on its own: a pull ends, the deadline runs out, the TTL ends.
fn next_wake(job: &Job, status: &JobStatus, now: Timestamp) -> Option<Timestamp> {
    if let Some(done) = status.completion_time {
        return job.spec.ttl_seconds_after_finished.map(|t| add(done, secs(t)));
    }
    let pull = job
        .tasks
        .values()
        .map(|t| t.outcome.done_at)
        .filter(|t| *t > now)
        .min();
    let deadline = (!job.spec.never)
        .then_some(job.spec.active_deadline_seconds)
        .flatten()
        .zip(status.start_time)
        .map(|(s, start)| add(start, secs(s)));
    pull.into_iter().chain(deadline).min()
}

/// kruise-daemon's `PullImageFailed` Warning on the job (its owner) when a node's pull has failed.
fn report_failures(job: &mut Job, now: Timestamp, sink: Option<&EventSink>) {
    let reg = std::sync::Arc::new(Regarding {
        api_version: job
            .obj
            .types
            .as_ref()
            .map(|t| t.api_version.clone())
            .unwrap_or_default(),
        kind: "ImagePullJob".into(),
        namespace: job.obj.namespace().unwrap_or_default(),
        name: job.obj.name_any(),
        uid: job.obj.uid().unwrap_or_default(),
    });
    let image = job.spec.image_ref();
    for (node, t) in job.tasks.iter_mut() {
        if t.reported || t.outcome.ok || t.outcome.done_at > now {
            continue;
        }
        t.reported = true;
        if let Some(sink) = sink {
            let message = format!("Image {image} {}", t.outcome.message);
            sink.record(
                t.outcome.done_at,
                &reg,
                None,
                true,
                "PullImageFailed",
                message,
                Some(&std::sync::Arc::from(node.as_str())),
            );
        }
    }
}
