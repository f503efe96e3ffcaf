//! Parity recorder: per scenario, the sequence of distinct pod states and the Events' reasons, for
//! `e2e/parity` to compare simulated nodes against a real kubelet (timing aside).
//!
//! A pod state is what a kubelet decides, as flat fields: `phase`, `terminating`, `cond:<type>` (status), and
//! per container `c:<name>:ready|started|state|last|restarts` (state: waiting reason, running, terminated
//! reason + exit code; last: lastState likewise). Names, UIDs, IPs and times are left out: pods are named by
//! the order they appeared (`pod1`, `pod2`, ...). Recording stops when the scenario cleans up (`freeze`):
//! how far the teardown of its pods got before the scenario ended is timing, not behaviour.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Event, Pod};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::Env;

#[derive(Default)]
struct Recording {
    /// uid → the pod's alias (`pod<N>`, by first appearance).
    aliases: BTreeMap<String, String>,
    /// alias → distinct consecutive states.
    states: BTreeMap<String, Vec<BTreeMap<String, String>>>,
    /// Events by alias of the pod they regard (or `other`): reasons in order of first sight, each once.
    events: BTreeMap<String, Vec<String>>,
    /// Event names already counted (an Event's count update is the same occurrence).
    seen_events: BTreeSet<String>,
}

/// Namespaces whose scenario is cleaning up.
static FROZEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Stops recording namespace `ns` (called by `util::cleanup`).
pub fn freeze(ns: &str) {
    FROZEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ns.to_string());
}

fn frozen(ns: &str) -> bool {
    FROZEN.lock().unwrap_or_else(|e| e.into_inner()).contains(ns)
}

/// Records the pods and Events of one scenario's namespace until `finish`.
pub struct Recorder {
    rec: Arc<Mutex<Recording>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    out: PathBuf,
}

fn container_state(s: Option<&ContainerState>) -> String {
    let Some(s) = s else { return "none".into() };
    if let Some(w) = &s.waiting {
        return format!("waiting:{}", w.reason.as_deref().unwrap_or(""));
    }
    if s.running.is_some() {
        return "running".into();
    }
    if let Some(t) = &s.terminated {
        return format!("terminated:{}:{}", t.reason.as_deref().unwrap_or(""), t.exit_code);
    }
    "none".into()
}

fn container(out: &mut BTreeMap<String, String>, c: &ContainerStatus) {
    let k = |f: &str| format!("c:{}:{f}", c.name);
    out.insert(k("ready"), c.ready.to_string());
    out.insert(k("started"), c.started.unwrap_or(false).to_string());
    out.insert(k("state"), container_state(c.state.as_ref()));
    out.insert(k("last"), container_state(c.last_state.as_ref()));
    out.insert(k("restarts"), c.restart_count.to_string());
}

/// The kubelet-owned facts of a pod (see the module doc).
pub fn pod_state(p: &Pod) -> BTreeMap<String, String> {
    let st = p.status.clone().unwrap_or_default();
    let mut out = BTreeMap::new();
    out.insert("phase".into(), st.phase.clone().unwrap_or_default());
    out.insert(
        "terminating".into(),
        p.metadata.deletion_timestamp.is_some().to_string(),
    );
    for c in st.conditions.iter().flatten() {
        out.insert(format!("cond:{}", c.type_), c.status.clone());
    }
    for c in st.container_statuses.iter().flatten() {
        container(&mut out, c);
    }
    out
}

impl Recording {
    fn alias(&mut self, uid: &str) -> String {
        let n = self.aliases.len() + 1;
        self.aliases
            .entry(uid.to_string())
            .or_insert_with(|| format!("pod{n}"))
            .clone()
    }

    fn pod(&mut self, p: &Pod) {
        let alias = self.alias(&p.uid().unwrap_or_default());
        let line = pod_state(p);
        let v = self.states.entry(alias).or_default();
        if v.last() != Some(&line) {
            v.push(line);
        }
    }

    fn event(&mut self, e: &Event) {
        if !self.seen_events.insert(e.name_any()) {
            return;
        }
        let about = match (
            e.involved_object.kind.as_deref(),
            e.involved_object.uid.as_deref(),
        ) {
            (Some("Pod"), Some(uid)) => self.alias(uid),
            (kind, _) => kind.unwrap_or("other").to_string(),
        };
        let reason = format!(
            "{}:{}",
            e.type_.as_deref().unwrap_or(""),
            e.reason.as_deref().unwrap_or("")
        );
        let v = self.events.entry(about).or_default();
        if !v.contains(&reason) {
            v.push(reason);
        }
    }
}

impl Recorder {
    /// Starts recording namespace `ns` into `<dir>/<scenario>.json` (written by `finish`).
    pub fn start(env: &Env, ns: &str, scenario: &str, dir: PathBuf) -> Self {
        let rec = Arc::new(Mutex::new(Recording::default()));
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
        let events: Api<Event> = Api::namespaced(env.client.clone(), ns);
        FROZEN.lock().unwrap_or_else(|e| e.into_inner()).remove(ns);
        let r = rec.clone();
        let pns = ns.to_string();
        let pod_task = tokio::spawn(async move {
            let mut s = watcher(pods, watcher::Config::default()).boxed();
            while let Some(ev) = s.next().await {
                let Ok(ev) = ev else { continue };
                if frozen(&pns) {
                    break;
                }
                if let watcher::Event::Apply(p) | watcher::Event::InitApply(p) | watcher::Event::Delete(p) =
                    ev
                {
                    r.lock().unwrap_or_else(|e| e.into_inner()).pod(&p);
                }
            }
        });
        let r = rec.clone();
        let ens = ns.to_string();
        let event_task = tokio::spawn(async move {
            let mut s = watcher(events, watcher::Config::default()).boxed();
            while let Some(ev) = s.next().await {
                let Ok(ev) = ev else { continue };
                if frozen(&ens) {
                    break;
                }
                if let watcher::Event::Apply(e) | watcher::Event::InitApply(e) = ev {
                    r.lock().unwrap_or_else(|e| e.into_inner()).event(&e);
                }
            }
        });
        Self {
            rec,
            tasks: vec![pod_task, event_task],
            out: dir.join(format!("{scenario}.json")),
        }
    }

    /// Stops recording and writes the file; `passed` is recorded too (a failed run's sequence is not parity).
    pub fn finish(self, passed: bool) -> anyhow::Result<()> {
        for t in &self.tasks {
            t.abort();
        }
        let r = self.rec.lock().unwrap_or_else(|e| e.into_inner());
        let doc: Value = json!({"passed": passed, "pods": r.states, "events": r.events});
        if let Some(d) = self.out.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(&self.out, serde_json::to_string_pretty(&doc)?)?;
        Ok(())
    }
}
