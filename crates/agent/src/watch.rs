//! The watch loop (Kruise `pkg/daemon/containermeta/container_meta_controller.go`, `Controller.sync`): the
//! node's pods through a field selector on `spec.nodeName`, each served pod synced on every change: runtime
//! facts read through CRI, the decision made by `decide`, the annotation patched, the restarts run.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, reflector};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Resource as _, ResourceExt as _};

use crate::cri::{Cri, CriError};
use crate::decide::{self, Observed};
use crate::observe::Observer;
use crate::restart;

/// Kruise's containermeta queue backs off from 500 ms to about 50 s (`NewItemExponentialFailureRateLimiter`).
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(50);
/// A running container whose environment the runtime did not give: look again (Kruise: 3 s).
const RETRY_ENV: Duration = Duration::from_secs(3);
/// How long a restart waits after it is first decided. Kruise's restarter queue adds each container
/// rate-limited (`pkg/daemon/containermeta/container_meta_controller.go`, `NewController`:
/// `NewItemExponentialFailureRateLimiter(3*time.Second, …)`, then `AddRateLimited`), so its first kill comes
/// 3 s after the change. The wait matters: the kubelet starts the container again from its own copy of the pod,
/// and a container stopped before that copy has the new labels comes back with the old value and needs a
/// second restart (seen on a loaded node: restartCount 2).
const RESTART_DELAY: Duration = Duration::from_secs(3);

/// A failed sync: retried with back-off.
#[derive(Debug)]
pub struct SyncError(String);

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SyncError {}

impl From<CriError> for SyncError {
    fn from(e: CriError) -> Self {
        Self(e.0)
    }
}

impl From<kube::Error> for SyncError {
    fn from(e: kube::Error) -> Self {
        Self(format!("apiserver: {e}"))
    }
}

/// What the syncs share.
pub struct Agent {
    pub(crate) pods: Api<Pod>,
    pub(crate) cri: Cri,
    pub(crate) runtime_name: String,
    /// Per pod UID, the runtime ids this agent stopped: one restart per container per change, however many
    /// pod events arrive while the kubelet restarts it.
    stopped: Mutex<HashMap<String, HashSet<String>>>,
    /// Per pod UID, the runtime ids decided for a restart and when each restart is due (`RESTART_DELAY`).
    due: Mutex<HashMap<String, HashMap<String, Instant>>>,
    /// Consecutive failures per pod key, for the back-off.
    failures: Mutex<HashMap<String, u32>>,
    recorder: Recorder,
    /// Metrics, and the store `/readyz` and `/metrics` read.
    pub(crate) observer: Arc<Observer>,
}

impl Agent {
    pub(crate) fn new(
        pods: Api<Pod>,
        cri: Cri,
        runtime_name: String,
        node: &str,
        observer: Arc<Observer>,
    ) -> Self {
        let reporter = Reporter {
            controller: "insitu-agent".into(),
            instance: Some(node.to_string()),
        };
        Self {
            recorder: Recorder::new(pods.clone().into_client(), reporter),
            pods,
            cri,
            runtime_name,
            stopped: Mutex::default(),
            due: Mutex::default(),
            failures: Mutex::default(),
            observer,
        }
    }

    fn stopped_of(&self, uid: &str) -> HashSet<String> {
        let map = self
            .stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(uid).cloned().unwrap_or_default()
    }

    /// Records (or, on `forget`, removes) a stopped id; `keep` prunes ids the runtime no longer lists.
    fn note_stopped(&self, uid: &str, id: Option<(&str, bool)>, keep: Option<&HashSet<&str>>) {
        let mut map = self
            .stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let set = map.entry(uid.to_string()).or_default();
        match id {
            Some((id, true)) => {
                set.insert(id.to_string());
            }
            Some((id, false)) => {
                set.remove(id);
            }
            None => {}
        }
        if let Some(keep) = keep {
            set.retain(|id| keep.contains(id.as_str()));
        }
        if set.is_empty() {
            map.remove(uid);
        }
    }

    /// An Event on the pod's container, as the kubelet records them (Kruise's restarter records `Killing`
    /// through its kubelet-like runtime, `pkg/daemon/kuberuntime/kuberuntime_container.go`). Best effort.
    async fn event(&self, pod: &Pod, container: &str, type_: EventType, reason: &str, note: &str) {
        let mut reference = pod.object_ref(&());
        reference.field_path = Some(format!("spec.containers{{{container}}}"));
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(note.chars().take(1024).collect()),
            action: "Restart".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &reference).await {
            tracing::debug!(error = %e, reason, "event not recorded");
        }
    }

    fn forget_pod(&self, uid: &str) {
        self.stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uid);
        self.due
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uid);
    }

    /// Of the restarts decided now, the ones whose wait is over; the others are remembered (the first decision's
    /// time is kept) and the shortest wait left is returned. Ids no longer decided are dropped: a change undone
    /// within the wait restarts nothing.
    fn due_now<'a>(
        &self,
        uid: &str,
        restarts: &'a [decide::Restart],
        now: Instant,
    ) -> (Vec<&'a decide::Restart>, Option<Duration>) {
        let mut map = self.due.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = map.remove(uid).unwrap_or_default();
        let (ready, keep) = schedule(&old, restarts, now);
        let wait = keep.values().min().map(|at| *at - now);
        if !keep.is_empty() {
            map.insert(uid.to_string(), keep);
        }
        (ready, wait)
    }

    fn failed(&self, key: &str) -> Duration {
        let mut map = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = map.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        BACKOFF_FIRST
            .saturating_mul(2u32.saturating_pow(n.saturating_sub(1).min(16)))
            .min(BACKOFF_MAX)
    }

    fn succeeded(&self, key: &str) {
        let mut map = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.remove(key);
    }
}

/// Splits the restarts decided at `now` into those due (decided `RESTART_DELAY` ago or earlier, per `old`) and
/// the rest with their due times.
fn schedule<'a>(
    old: &HashMap<String, Instant>,
    restarts: &'a [decide::Restart],
    now: Instant,
) -> (Vec<&'a decide::Restart>, HashMap<String, Instant>) {
    let mut keep = HashMap::new();
    let mut ready = Vec::new();
    for r in restarts {
        let at = old.get(&r.id).copied().unwrap_or(now + RESTART_DELAY);
        if at <= now {
            ready.push(r);
        } else {
            keep.insert(r.id.clone(), at);
        }
    }
    (ready, keep)
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// One pod's sync.
async fn sync(pod: Arc<Pod>, agent: Arc<Agent>) -> Result<Action, SyncError> {
    let uid = pod.uid().unwrap_or_default();
    if !decide::serves(&pod) {
        agent.forget_pod(&uid);
        agent.succeeded(&key(&pod));
        return Ok(Action::await_change());
    }
    let listed = agent.cri.pod_containers(&uid).await?;
    let ids: HashSet<&str> = listed.iter().map(|c| c.id.as_str()).collect();
    agent.note_stopped(&uid, None, Some(&ids));
    let mut observed = BTreeMap::new();
    for (name, c) in decide::pick(listed.clone()) {
        let env = if c.running && decide::needs_env(&pod, &name) {
            agent.cri.container_env(&c.id).await?
        } else {
            None
        };
        observed.insert(name, Observed { container: c, env });
    }
    let d = decide::decide(&pod, &agent.runtime_name, &observed, &agent.stopped_of(&uid));
    let pod_key = key(&pod);
    // A failed report does not hold the restarts back (Kruise queues them before it reports); it is
    // returned after them, for the retry.
    let reported = match &d.annotation {
        Some(value) => {
            tracing::info!(pod = %pod_key, meta = %value, "reporting runtime containers meta");
            let ns_pods: Api<Pod> = Api::namespaced(
                agent.pods.clone().into_client(),
                &pod.namespace().unwrap_or_default(),
            );
            ns_pods
                .patch_status(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(decide::annotation_patch(value)),
                )
                .await
                .map(drop)
        }
        None => Ok(()),
    };
    let (ready, wait) = agent.due_now(&uid, &d.restarts, Instant::now());
    if let Some(wait) = wait {
        tracing::debug!(pod = %pod_key, ?wait, "restart decided; waiting as Kruise's restarter does");
    }
    let runs = ready.into_iter().map(|r| {
        let agent = agent.clone();
        let (uid, pod_key, pod) = (uid.clone(), pod_key.clone(), pod.clone());
        async move {
            agent.note_stopped(&uid, Some((&r.id, true)), None);
            let res = restart::restart(&agent.cri, r, &pod_key).await;
            agent.observer.metrics.restart(res.is_ok());
            match &res {
                Ok(hook_failure) => {
                    if let Some(msg) = hook_failure {
                        agent.observer.metrics.prestop_failure();
                        agent
                            .event(&pod, &r.name, EventType::Warning, "FailedPreStopHook", msg)
                            .await;
                    }
                    let uri = format!("{}://{}", agent.runtime_name, r.id);
                    let msg = format!(
                        "Stopping container {} ({uri}): its env from pod metadata changed",
                        r.name
                    );
                    agent
                        .event(&pod, &r.name, EventType::Normal, "Killing", &msg)
                        .await;
                }
                // Not stopped after all: the next sync may try again.
                Err(_) => agent.note_stopped(&uid, Some((&r.id, false)), None),
            }
            res
        }
    });
    for res in futures::future::join_all(runs).await {
        res?;
    }
    reported?;
    agent.succeeded(&pod_key);
    let retry = d.retry.then_some(RETRY_ENV);
    Ok(match (wait, retry) {
        (Some(a), Some(b)) => Action::requeue(a.min(b)),
        (Some(a), None) | (None, Some(a)) => Action::requeue(a),
        (None, None) => Action::await_change(),
    })
}

fn on_error(pod: Arc<Pod>, e: &SyncError, agent: Arc<Agent>) -> Action {
    let k = key(&pod);
    let after = agent.failed(&k);
    agent.observer.metrics.sync_error();
    tracing::warn!(pod = %k, error = %e, retry_in = ?after, "sync failed");
    Action::requeue(after)
}

/// Watches the node's pods until `shutdown`.
pub(crate) async fn run(
    agent: Arc<Agent>,
    node: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    // Controller::new's own reflector, built here to see its first list complete for `/readyz`
    // (`Store::wait_until_ready` wakes only one waiter, and the controller is already one).
    let (store, writer) = reflector::store();
    let observer = agent.observer.clone();
    let events =
        reflector(writer, watcher(agent.pods.clone(), config).default_backoff()).inspect(move |ev| {
            if matches!(ev, Ok(watcher::Event::InitDone)) {
                observer.synced();
            }
        });
    agent.observer.watching(store.clone());
    Controller::for_stream(events.applied_objects(), store)
        .graceful_shutdown_on(shutdown)
        .run(sync, on_error, agent)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "controller");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn restart(id: &str) -> decide::Restart {
        decide::Restart {
            name: "app".into(),
            id: id.into(),
            pre_stop: None,
            grace_seconds: 2,
        }
    }

    #[test]
    fn a_restart_waits_kruises_delay_and_an_undone_change_restarts_nothing() {
        let t0 = Instant::now();
        let rs = [restart("a")];
        let (ready, keep) = schedule(&HashMap::new(), &rs, t0);
        assert!(ready.is_empty());
        assert_eq!(keep.get("a"), Some(&(t0 + RESTART_DELAY)));
        // Decided again before the wait is over: still waiting, the first due time kept.
        let (ready, again) = schedule(&keep, &rs, t0 + Duration::from_secs(1));
        assert!(ready.is_empty());
        assert_eq!(again, keep);
        // Due.
        let (ready, left) = schedule(&keep, &rs, t0 + RESTART_DELAY);
        assert_eq!(ready.len(), 1);
        assert!(left.is_empty());
        // The change was undone within the wait: nothing decided, nothing kept.
        let (ready, left) = schedule(&keep, &[], t0 + RESTART_DELAY);
        assert!(ready.is_empty() && left.is_empty());
    }
}
