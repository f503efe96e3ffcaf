//! Kruise's ImagePullJob semantics, pure: the spec as its controller reads it, the nodes a job targets, one
//! node's pull as kruise-daemon runs it (attempts, timeouts, back-off, deadline) and the job's status.

use std::collections::BTreeMap;
use std::time::Duration;

use insitu_api::validation::selector_matches;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::super::image::normalize_image;
use super::super::runtime::{add, since};

/// kruise-daemon's defaults for a tag without `pullPolicy` (`defaultImagePullingTimeout`, `…BackoffLimit`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
pub const DEFAULT_BACKOFF_LIMIT: u32 = 3;
/// kruise-daemon's back-off between attempts: 1 s doubling, at most 30 s.
const FIRST_STEP: Duration = Duration::from_secs(1);
const MAX_STEP: Duration = Duration::from_secs(30);
/// The controller's per-tag deadline for `completionPolicy.type: Never` (`defaultActiveDeadlineSecondsForNever`).
const NEVER_ACTIVE_DEADLINE_SECONDS: i64 = 1800;

/// `spec.selector`: node names, or a label selector on the nodes (their NodeImages carry the node's labels).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeSelector {
    /// `names` when present (even empty: Kruise tests `Names != nil`).
    pub names: Option<Vec<String>>,
    pub labels: LabelSelector,
}

/// What the controller and daemon read of an ImagePullJob's spec.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobSpec {
    pub image: String,
    pub selector: Option<NodeSelector>,
    pub pod_selector: Option<LabelSelector>,
    /// `parallelism` as `IntOrString.IntValue()` reads it (default 1).
    pub parallelism: i64,
    pub timeout_seconds: Option<i64>,
    pub backoff_limit: Option<i64>,
    /// `completionPolicy.type: Never`: the job never completes and keeps pulling onto new nodes.
    pub never: bool,
    pub active_deadline_seconds: Option<i64>,
    pub ttl_seconds_after_finished: Option<i64>,
}

fn int(v: Option<&Value>) -> Option<i64> {
    v.and_then(Value::as_i64)
}

/// Go `intstr.IntOrString.IntValue()`: an int, or a string parsed with `Atoi` (0 when it is not a number).
fn int_value(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        other => other.as_i64().unwrap_or(0),
    }
}

fn label_selector(v: &Value) -> LabelSelector {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

impl JobSpec {
    /// Reads `spec` (the CRD's schema has checked its types).
    pub fn parse(spec: &Value) -> Self {
        let pull = spec.get("pullPolicy");
        let completion = spec.get("completionPolicy");
        Self {
            image: spec
                .get("image")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            selector: spec
                .get("selector")
                .filter(|v| !v.is_null())
                .map(|s| NodeSelector {
                    names: s
                        .get("names")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()),
                    labels: label_selector(s),
                }),
            pod_selector: spec
                .get("podSelector")
                .filter(|v| !v.is_null())
                .map(label_selector),
            parallelism: spec.get("parallelism").map_or(1, int_value),
            timeout_seconds: int(pull.and_then(|p| p.get("timeoutSeconds"))),
            backoff_limit: int(pull.and_then(|p| p.get("backoffLimit"))),
            never: completion.and_then(|c| c.get("type")).and_then(Value::as_str) == Some("Never"),
            active_deadline_seconds: int(completion.and_then(|c| c.get("activeDeadlineSeconds"))),
            ttl_seconds_after_finished: int(completion.and_then(|c| c.get("ttlSecondsAfterFinished"))),
        }
    }

    /// The image as kruise-daemon names it (`NormalizeImageRefToNameTag`: `docker.io/library/nginx:alpine`).
    pub fn image_ref(&self) -> String {
        normalize_image(&self.image)
    }

    /// The deadline the controller gives each node's pull (`getImagePullPolicy`): the job's
    /// `activeDeadlineSeconds`, or under `Never` 1800 s (the timeout when longer).
    fn tag_deadline_seconds(&self) -> Option<i64> {
        if self.never {
            Some(self.timeout_seconds.map_or(NEVER_ACTIVE_DEADLINE_SECONDS, |t| {
                t.max(NEVER_ACTIVE_DEADLINE_SECONDS)
            }))
        } else {
            self.active_deadline_seconds
        }
    }
}

/// A node as the job sees it (its NodeImage: the node's name and labels).
pub struct NodeInfo<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// A pod as `GetNodeImagesForJob` reads it.
pub struct PodInfo<'a> {
    pub namespace: &'a str,
    pub labels: Option<&'a BTreeMap<String, String>>,
    /// Index of its node in the node list.
    pub node: usize,
    /// Kruise `IsPodActive`: not Succeeded/Failed and no deletionTimestamp.
    pub active: bool,
}

/// Kruise `GetNodeImagesForJob`: the nodes (indexes, in name order) a job in `namespace` pulls onto.
/// `podSelector`: the nodes of its namespace's active pods that match; else `selector.names`, its label
/// selector, or every node. Only nodes with a NodeImage count, i.e. nodes this daemon runs.
pub fn targets<'a>(
    spec: &JobSpec,
    namespace: &str,
    nodes: &[NodeInfo<'_>],
    pods: impl Iterator<Item = PodInfo<'a>>,
) -> Vec<usize> {
    let empty = BTreeMap::new();
    let mut out: Vec<usize> = if let Some(sel) = &spec.pod_selector {
        let mut on: Vec<usize> = pods
            .filter(|p| p.active && p.namespace == namespace && p.node < nodes.len())
            .filter(|p| selector_matches(sel, p.labels.unwrap_or(&empty)))
            .map(|p| p.node)
            .collect();
        on.sort_unstable();
        on.dedup();
        on
    } else {
        (0..nodes.len())
            .filter(|&i| match &spec.selector {
                None => true,
                Some(NodeSelector {
                    names: Some(names), ..
                }) => names.iter().any(|n| n == nodes[i].name),
                Some(s) => selector_matches(&s.labels, nodes[i].labels),
            })
            .collect()
    };
    out.sort_by(|a, b| nodes[*a].name.cmp(nodes[*b].name));
    out
}

/// What one node's pull needs to know.
pub struct PullInput<'a> {
    /// When the daemon's worker starts (the controller synced the tag into the NodeImage).
    pub start: Timestamp,
    /// The image's pull time on this node.
    pub pull: Duration,
    /// The registry never serves the image (`--pull-fail-image`).
    pub never_pulls: bool,
    /// When the image is (or a pull under way makes it) present on the node.
    pub present: Option<Timestamp>,
    pub spec: &'a JobSpec,
}

/// How one node's pull ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullOutcome {
    /// When the daemon reports `Succeeded` or `Failed`.
    pub done_at: Timestamp,
    pub ok: bool,
    /// The last attempt's error (`Failed` only).
    pub message: String,
    /// When the image lands in the node's store (`ok` only).
    pub present_at: Option<Timestamp>,
}

/// kruise-daemon's pull worker (`pullWorker.Run`): up to `backoffLimit + 1` attempts of at most `timeoutSeconds`
/// each (cut to the tag's deadline), 1 s doubling to 30 s between attempts (also after the last one, before the
/// worker reports the failure). An image already present succeeds at once (re-pulling it costs nothing here);
/// a pull already under way on the node (the kubelet's) is shared, as containerd shares its content fetches.
pub fn run_pull(i: &PullInput<'_>) -> PullOutcome {
    let spec = i.spec;
    let secs = |s: i64| Duration::from_secs(u64::try_from(s.max(0)).unwrap_or(0));
    let timeout = spec.timeout_seconds.map_or(DEFAULT_TIMEOUT, secs);
    let limit = spec
        .backoff_limit
        .filter(|b| *b >= 0)
        .map_or(DEFAULT_BACKOFF_LIMIT, |b| u32::try_from(b).unwrap_or(u32::MAX));
    let deadline = spec.tag_deadline_seconds().map(|s| add(i.start, secs(s)));
    let image = spec.image_ref();
    let fail = |at: Timestamp, message: String| PullOutcome {
        done_at: at,
        ok: false,
        message,
        present_at: None,
    };
    let (mut t, mut step, mut last) = (i.start, FIRST_STEP, String::new());
    for _ in 0..=limit.min(1000) {
        let mut once = timeout;
        if let Some(d) = deadline {
            if t >= d {
                return fail(t, "pulling exceeds the activeDeadlineSeconds".into());
            }
            once = once.min(since(d, t));
        }
        let canceled = format!("pulling image {image} is canceled");
        let ends = if i.never_pulls {
            if i.pull > once {
                Err((add(t, once), canceled))
            } else {
                Err((add(t, i.pull), not_found(&image)))
            }
        } else {
            let d = i.present.map_or(i.pull, |p| since(p, t).min(i.pull));
            if d <= once {
                Ok(add(t, d))
            } else {
                Err((add(t, once), canceled))
            }
        };
        match ends {
            Ok(at) => {
                return PullOutcome {
                    done_at: at,
                    ok: true,
                    message: String::new(),
                    present_at: Some(at),
                };
            }
            Err((at, msg)) => {
                last = msg;
                t = add(at, step);
                step = (step * 2).min(MAX_STEP);
            }
        }
    }
    fail(t, last)
}

/// containerd's answer for a reference the registry does not have (the CRI error kruise-daemon reports).
fn not_found(image: &str) -> String {
    format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": {image}: not found"
    )
}

/// One targeted node's state as the controller reads its NodeImage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    /// The job's tag is not in the node's NodeImage spec yet.
    NotSynced,
    /// Synced; the daemon reports `Waiting`/`Pulling` (or nothing yet).
    Pulling,
    Succeeded,
    Failed,
}

/// `ImagePullJobStatus` (v1beta1 = v1alpha1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobStatus {
    pub start_time: Option<Timestamp>,
    pub completion_time: Option<Timestamp>,
    pub desired: usize,
    pub active: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub message: String,
    pub failed_nodes: Vec<String>,
}

fn time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl JobStatus {
    /// The status as the Go struct serializes (`omitempty` on the times, message and failedNodes).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "desired": self.desired,
            "active": self.active,
            "succeeded": self.succeeded,
            "failed": self.failed,
        });
        if let Some(t) = self.start_time {
            v["startTime"] = json!(time(t));
        }
        if let Some(t) = self.completion_time {
            v["completionTime"] = json!(time(t));
        }
        if !self.message.is_empty() {
            v["message"] = json!(self.message);
        }
        if !self.failed_nodes.is_empty() {
            v["failedNodes"] = json!(self.failed_nodes);
        }
        v
    }
}

/// Kruise `calculateStatus`: the job's status over its targets (`(node name, state)`, in name order) and the
/// names of the targets not synced yet (sorted). With `activeDeadlineSeconds` run out (not under `Never`),
/// the job completes and every node not done counts as failed.
pub fn calculate(
    spec: &JobSpec,
    start: Option<Timestamp>,
    now: Timestamp,
    targets: &[(&str, NodeState)],
) -> (JobStatus, Vec<String>) {
    let start = start.unwrap_or(now);
    let mut st = JobStatus {
        start_time: Some(start),
        desired: targets.len(),
        ..Default::default()
    };
    let pick = |want: NodeState| -> Vec<String> {
        targets
            .iter()
            .filter(|(_, s)| *s == want)
            .map(|(n, _)| n.to_string())
            .collect()
    };
    let (pulling, succeeded, mut failed, not_synced) = (
        pick(NodeState::Pulling),
        pick(NodeState::Succeeded),
        pick(NodeState::Failed),
        pick(NodeState::NotSynced),
    );
    if !spec.never
        && let Some(ads) = spec.active_deadline_seconds
        && st.desired != succeeded.len() + failed.len()
        && since(now, start).as_secs_f64() >= ads as f64
    {
        st.completion_time = Some(now);
        st.succeeded = succeeded.len();
        failed.extend(pulling);
        failed.extend(not_synced);
        st.failed = failed.len();
        st.failed_nodes = failed;
        st.message = "job exceeds activeDeadlineSeconds".into();
        return (st, Vec::new());
    }
    st.active = pulling.len();
    st.succeeded = succeeded.len();
    st.failed = failed.len();
    st.failed_nodes = failed;
    if !spec.never && st.desired == st.succeeded + st.failed {
        st.completion_time = Some(now);
    }
    st.message = if st.completion_time.is_some() {
        "job has completed".into()
    } else if st.desired == 0 {
        "job is running, no progress".into()
    } else {
        format!(
            "job is running, progress {:.1}%",
            100.0 * (st.succeeded + st.failed) as f64 / st.desired as f64
        )
    };
    st.failed_nodes.sort();
    (st, not_synced)
}

/// How many more nodes to hand the image to (`syncNodeImages`): `parallelism - active`, at most the rest.
pub fn to_sync(spec: &JobSpec, status: &JobStatus, not_synced: usize) -> usize {
    let free = spec.parallelism - i64::try_from(status.active).unwrap_or(i64::MAX);
    usize::try_from(free.max(0)).unwrap_or(0).min(not_synced)
}
