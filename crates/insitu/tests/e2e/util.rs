//! Helpers for the e2e scenarios: CloneSet manifests, polling with bounded timeouts, pod facts, a pod observer.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use futures::StreamExt;
use insitu_api::CloneSet;
use insitu_api::keys;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::Env;

pub const IMAGE_V1: &str = "nginx:1.19.0";
pub const IMAGE_V2: &str = "nginx:1.20.0";

/// Creates the namespace (idempotent).
pub async fn ensure_namespace(env: &Env, ns: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(env.client.clone());
    let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e).context(format!("create namespace {ns}")),
    }
}

pub fn clonesets(env: &Env, ns: &str) -> Api<CloneSet> {
    Api::namespaced(env.client.clone(), ns)
}

pub fn pods(env: &Env, ns: &str) -> Api<Pod> {
    Api::namespaced(env.client.clone(), ns)
}

/// A small CloneSet tuned for real-time e2e: 1 s readiness, 1 s in-place grace, 2 s termination grace.
pub fn fast_cloneset(name: &str, replicas: i32, max_unavailable: i32) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {
                "type": "InPlaceIfPossible",
                "maxUnavailable": max_unavailable,
                "inPlaceUpdateStrategy": {"gracePeriodSeconds": 1}
            },
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "containers": [{
                        "name": "app",
                        "image": IMAGE_V1,
                        "env": [{"name": "VERSION", "value": "v1"}],
                        "ports": [{"containerPort": 80}],
                        "readinessProbe": {
                            "httpGet": {"path": "/", "port": 80},
                            "initialDelaySeconds": 1,
                            "periodSeconds": 1
                        }
                    }]
                }
            }
        }
    })
}

pub async fn create_cloneset(env: &Env, ns: &str, manifest: Value) -> anyhow::Result<CloneSet> {
    let cs: CloneSet = serde_json::from_value(manifest).context("CloneSet manifest")?;
    clonesets(env, ns)
        .create(&PostParams::default(), &cs)
        .await
        .with_context(|| format!("create CloneSet {ns}/{}", cs.name_any()))
}

/// RFC 6902 JSON patch on a CloneSet (what `kubectl patch --type=json` sends).
pub async fn json_patch(env: &Env, ns: &str, name: &str, ops: Value) -> anyhow::Result<CloneSet> {
    let patch: json_patch::Patch = serde_json::from_value(ops.clone())?;
    clonesets(env, ns)
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .with_context(|| format!("json patch {ns}/{name}: {ops}"))
}

pub async fn set_image(env: &Env, ns: &str, name: &str, image: &str) -> anyhow::Result<CloneSet> {
    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}]),
    )
    .await
}

/// Best effort: delete the CloneSet and its pods (nothing garbage-collects on a bare control plane).
pub async fn cleanup(env: &Env, ns: &str, name: &str) {
    crate::record::freeze(ns);
    let _ = clonesets(env, ns).delete(name, &DeleteParams::default()).await;
    let lp = ListParams::default().labels(&format!("app={name}"));
    let _ = pods(env, ns)
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
}

/// Live (not terminating) pods of the CloneSet `name` (label `app=name`), sorted by name.
pub async fn live_pods(env: &Env, ns: &str, name: &str) -> anyhow::Result<Vec<Pod>> {
    let lp = ListParams::default().labels(&format!("app={name}"));
    let mut out: Vec<Pod> = pods(env, ns)
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    out.sort_by_key(|p| p.name_any());
    Ok(out)
}

/// Every pod with label `app=name`, terminating ones included.
pub async fn all_pods(env: &Env, ns: &str, name: &str) -> anyhow::Result<Vec<Pod>> {
    let lp = ListParams::default().labels(&format!("app={name}"));
    Ok(pods(env, ns).list(&lp).await?.items)
}

pub fn condition(p: &Pod, type_: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

pub fn is_ready(p: &Pod) -> bool {
    condition(p, "Ready").as_deref() == Some("True")
}

pub fn restarts(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}

pub fn spec_image(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// The image the runtime reports for the first container (normalized, e.g. `docker.io/library/nginx:1.20.0`).
pub fn status_image(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .map(|c| c.image.clone())
        .unwrap_or_default()
}

pub fn waiting_reason(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
}

pub fn ip(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default()
}

pub fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

pub fn revision(p: &Pod) -> String {
    p.labels()
        .get(keys::CONTROLLER_REVISION_HASH_LABEL)
        .cloned()
        .unwrap_or_default()
}

pub fn env_value(p: &Pod, name: &str) -> Option<String> {
    p.spec
        .as_ref()?
        .containers
        .first()?
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

/// `nginx:1.20.0` runs as `docker.io/library/nginx:1.20.0`.
pub fn runs_image(p: &Pod, image: &str) -> bool {
    let s = status_image(p);
    s == image || s.ends_with(&format!("/{image}"))
}

/// Polls `check` every 500 ms until it yields `Ok(Ok(v))`; `Ok(Err(why))` means "not yet" (the last `why` is
/// reported on timeout); `Err` aborts at once.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<T, String>>>,
{
    let start = Instant::now();
    let mut last;
    loop {
        match check().await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(why)) => last = why,
            Err(e) => {
                // Transient API errors (e.g. a connection reset) are retried until the deadline.
                last = format!("error: {e:#}");
            }
        }
        if start.elapsed() >= timeout {
            bail!("timed out after {timeout:?} waiting for {what}; last: {last}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until the CloneSet `name` has exactly `replicas` live pods, all Ready, all on `image`, all of the
/// update revision, and its status says so (observedGeneration current, updated/ready counts = replicas).
pub async fn wait_rolled_out(
    env: &Env,
    ns: &str,
    name: &str,
    replicas: usize,
    image: &str,
    timeout: Duration,
) -> anyhow::Result<(CloneSet, Vec<Pod>)> {
    let what = format!("{ns}/{name}: {replicas} Ready pods on {image}");
    wait_until(&what, timeout, || async move {
        let cs = clonesets(env, ns).get(name).await?;
        let pods = live_pods(env, ns, name).await?;
        let st = cs.status.clone().unwrap_or_default();
        let r = replicas as i32;
        let gen_ok = Some(st.observed_generation) == cs.metadata.generation;
        let counts_ok = st.replicas == r && st.ready_replicas == r && st.updated_replicas == r && st.updated_ready_replicas == r;
        let pods_ok = pods.len() == replicas
            && pods.iter().all(|p| {
                is_ready(p) && spec_image(p) == image && runs_image(p, image) && revision(p) == st.update_revision
            });
        let all = all_pods(env, ns, name).await?;
        if gen_ok && counts_ok && pods_ok && all.len() == replicas {
            Ok(Ok((cs, pods)))
        } else {
            Ok(Err(format!(
                "generation {:?}/observed {}, status replicas={} ready={} updated={} updatedReady={}, pods: {}",
                cs.metadata.generation,
                st.observed_generation,
                st.replicas,
                st.ready_replicas,
                st.updated_replicas,
                st.updated_ready_replicas,
                describe(&all, &st.update_revision)
            )))
        }
    })
    .await
}

/// One line per pod: name, ready, image, restarts, updated?, waiting reason, terminating?
pub fn describe(pods: &[Pod], update_revision: &str) -> String {
    pods.iter()
        .map(|p| {
            format!(
                "{}[{}{} {} r{}{}{}]",
                p.name_any(),
                if is_ready(p) { "ready" } else { "notready" },
                if revision(p) == update_revision {
                    " upd"
                } else {
                    ""
                },
                spec_image(p),
                restarts(p),
                waiting_reason(p).map(|w| format!(" {w}")).unwrap_or_default(),
                if p.metadata.deletion_timestamp.is_some() {
                    " terminating"
                } else {
                    ""
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// (name, uid, ip) of each pod, sorted by name.
pub fn identities(pods: &[Pod]) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = pods.iter().map(|p| (p.name_any(), uid(p), ip(p))).collect();
    v.sort();
    v
}

pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> anyhow::Result<()> {
    if cond { Ok(()) } else { Err(anyhow!(msg())) }
}

/// What the observer saw of one pod over its lifetime.
#[derive(Clone, Debug, Default)]
pub struct PodHistory {
    pub name: String,
    pub inplace_ready_false: bool,
    pub grace_annotation: bool,
    pub state_annotation: bool,
    pub crash_loop: bool,
    pub ever_ready: bool,
    pub deleted: bool,
    pub max_restarts: i32,
    /// The kubelet's `PodResizeInProgress` condition was seen.
    pub resize_in_progress: bool,
    /// Ready=True was seen together with InPlaceUpdateReady=False (a readiness gate not honoured).
    pub ready_with_gate_false: bool,
    /// The back-off durations a real kubelet names in CrashLoopBackOff messages (`back-off 10s restarting ...`).
    pub backoffs: BTreeSet<String>,
}

/// `back-off 20s restarting failed container=...` → `20s`, from every waiting container's message.
fn backoffs(p: &Pod) -> Vec<String> {
    p.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.message.as_deref())
        .filter_map(|m| {
            m.split("back-off ")
                .nth(1)?
                .split_whitespace()
                .next()
                .map(str::to_string)
        })
        .collect()
}

#[derive(Debug, Default)]
pub struct Observed {
    pub pods: BTreeMap<String, PodHistory>,
    /// Pods (by uid) that had been Ready and are currently not Ready, or deleted while not yet replaced.
    out_of_service: BTreeSet<String>,
    /// The most pods out of service at the same time (among pods that had been Ready before).
    pub max_out_of_service: usize,
}

/// Watches the namespace's pods and records every transient state (the stages of an in-place update).
pub struct Observer {
    state: Arc<Mutex<Observed>>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    pub fn start(env: &Env, ns: &str, name: &str) -> Self {
        let state = Arc::new(Mutex::new(Observed::default()));
        let api = pods(env, ns);
        let cfg = watcher::Config::default().labels(&format!("app={name}"));
        let st = state.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, cfg).boxed();
            while let Some(ev) = stream.next().await {
                let Ok(ev) = ev else { continue };
                let mut s = st.lock().unwrap_or_else(|e| e.into_inner());
                match ev {
                    watcher::Event::Apply(p) | watcher::Event::InitApply(p) => s.apply(&p),
                    watcher::Event::Delete(p) => s.delete(&p),
                    watcher::Event::Init | watcher::Event::InitDone => {}
                }
            }
        });
        Self { state, task }
    }

    pub fn snapshot(&self) -> Observed {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Observed {
            pods: s.pods.clone(),
            out_of_service: s.out_of_service.clone(),
            max_out_of_service: s.max_out_of_service,
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Observed {
    fn apply(&mut self, p: &Pod) {
        let uid = uid(p);
        let h = self.pods.entry(uid.clone()).or_default();
        h.name = p.name_any();
        let ann = p.annotations();
        h.grace_annotation |= ann.contains_key(keys::INPLACE_UPDATE_GRACE_ANNOTATION);
        h.state_annotation |= ann.contains_key(keys::INPLACE_UPDATE_STATE_ANNOTATION);
        let gate_false = condition(p, keys::INPLACE_UPDATE_READY).as_deref() == Some("False");
        h.inplace_ready_false |= gate_false;
        h.ready_with_gate_false |= gate_false && is_ready(p);
        h.crash_loop |= waiting_reason(p).as_deref() == Some("CrashLoopBackOff");
        h.backoffs.extend(backoffs(p));
        h.max_restarts = h.max_restarts.max(restarts(p));
        h.resize_in_progress |= condition(p, "PodResizeInProgress").as_deref() == Some("True");
        let ready = is_ready(p) && p.metadata.deletion_timestamp.is_none();
        if ready {
            h.ever_ready = true;
            self.out_of_service.remove(&uid);
        } else if h.ever_ready {
            self.out_of_service.insert(uid);
        }
        self.max_out_of_service = self.max_out_of_service.max(self.out_of_service.len());
    }

    fn delete(&mut self, p: &Pod) {
        let uid = uid(p);
        self.pods.entry(uid.clone()).or_default().deleted = true;
        self.out_of_service.remove(&uid);
    }
}
