//! The what-if's report: duration and batches, in place vs recreated with the reason per group, peaks, the
//! resizes a node cannot fit, and the assumptions; as text or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use insitu_core::explain::podwhy;
use insitu_core::{FeatureGates, input};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use super::observe::{Observed, PodFate, Sample};

/// Pods whose update started within this many seconds of the previous one's belong to the same batch.
const BATCH_GAP: f64 = 1.0;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Batch {
    pub start: f64,
    /// `None`: some pod of the batch never finished (the rollout stalled).
    pub end: Option<f64>,
    pub pods: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// `in-place`, `recreate` or `unchanged`.
    pub decision: String,
    pub reason: String,
    pub pods: usize,
    /// Up to three pod names.
    pub examples: Vec<String>,
}

/// A pod whose resize its node does not admit, and what then happens.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pending {
    pub pod: String,
    pub node: String,
    /// `Infeasible` or `Deferred` (the kubelet's `PodResizePending` reason).
    pub reason: String,
    pub message: String,
    pub then: String,
}

/// One strategy's predicted rollout.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub strategy: String,
    pub predicted_seconds: f64,
    /// False: the rollout stalls (see `resizePending` and the groups) and `predictedSeconds` is when it stopped
    /// moving.
    pub completes: bool,
    pub batches: Vec<Batch>,
    pub in_place: usize,
    pub recreated: usize,
    pub unchanged: usize,
    pub groups: Vec<Group>,
    pub peak_unavailable: usize,
    pub peak_extra_pods: usize,
    pub peak_extra_cpu_milli: i64,
    pub peak_extra_memory_bytes: i64,
    pub peak_extra_cpu_percent: f64,
    pub peak_extra_memory_percent: f64,
    pub resize_pending: Vec<Pending>,
    pub pods: Vec<PodFate>,
    pub timeline: Vec<Sample>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub cloneset: String,
    pub replicas: usize,
    pub change: Vec<String>,
    pub source: String,
    pub nodes: usize,
    pub assumptions: Vec<String>,
    pub notes: Vec<String>,
    pub runs: Vec<Run>,
    pub wall_seconds: f64,
}

/// Batches from the pods' start times: a gap over [`BATCH_GAP`] starts the next one.
pub fn batches(pods: &[PodFate]) -> Vec<Batch> {
    let mut started: Vec<&PodFate> = pods.iter().filter(|p| p.start.is_some()).collect();
    started.sort_by(|a, b| a.start.unwrap_or(0.0).total_cmp(&b.start.unwrap_or(0.0)));
    let mut out: Vec<Batch> = Vec::new();
    let mut last = f64::NEG_INFINITY;
    for p in started {
        let s = p.start.unwrap_or(0.0);
        match out.last_mut() {
            Some(b) if s - last <= BATCH_GAP => {
                b.pods += 1;
                b.end = b.end.zip(p.end).map(|(x, y)| x.max(y));
            }
            _ => out.push(Batch {
                start: s,
                end: p.end,
                pods: 1,
            }),
        }
        last = s;
    }
    out
}

fn strip_owners(mut v: Value) -> Value {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("ownerReferences");
        m.remove("uid");
    }
    v
}

/// Per pod, why the planner updates it the way it does (Kruise's in-place calculation, `insitu explain`'s
/// answer), against the CloneSet after the change and every revision the controller had.
pub fn planner_reasons(pods: &[Pod], sim_docs: &[Value]) -> BTreeMap<String, (String, String)> {
    let mut docs: Vec<Value> = sim_docs.iter().cloned().map(strip_owners).collect();
    for p in pods {
        let mut v = serde_json::to_value(p).unwrap_or_default();
        v["kind"] = "Pod".into();
        v["apiVersion"] = "v1".into();
        docs.push(strip_owners(v));
    }
    let Ok(inp) = input::snapshot_from_objects(docs, Timestamp::now(), FeatureGates::default()) else {
        return BTreeMap::new();
    };
    let plan = insitu_core::plan(&inp.snapshot);
    podwhy::pods(&inp.snapshot, &plan)
        .into_iter()
        .map(|w| {
            let why = match &w.refusal {
                Some(r) => r.describe(),
                None if w.next == "in place" => "the template change can be applied in place".into(),
                None if w.next == "up to date" => "already at the update revision".into(),
                None => w.waits.join("; "),
            };
            (w.name, (w.next.to_string(), why))
        })
        .collect()
}

/// The reason shown for a pod's observed decision.
fn reason(f: &PodFate, strategy: &str, planner: Option<&(String, String)>) -> String {
    let (next, why) = planner.map_or(("", ""), |(n, w)| (n.as_str(), w.as_str()));
    match f.decision.as_str() {
        "recreate" if strategy == "ReCreate" => "updateStrategy.type ReCreate".into(),
        "recreate" if next == "recreate" => why.to_string(),
        "in-place" if next == "in place" => why.to_string(),
        "unchanged" if next == "up to date" => why.to_string(),
        "unchanged" if !why.is_empty() => format!("not updated: {why}"),
        _ if next.is_empty() => "(no planner answer)".into(),
        _ => format!("{} (the planner alone said: {next}, {why})", f.decision),
    }
}

/// Groups pods by decision and reason.
pub fn groups(pods: &[PodFate], strategy: &str, planner: &BTreeMap<String, (String, String)>) -> Vec<Group> {
    let mut map: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for f in pods {
        let r = reason(f, strategy, planner.get(&f.name));
        map.entry((f.decision.clone(), r))
            .or_default()
            .push(f.name.clone());
    }
    map.into_iter()
        .map(|((decision, reason), names)| Group {
            decision,
            reason,
            pods: names.len(),
            examples: names.into_iter().take(3).collect(),
        })
        .collect()
}

/// What a stuck resize meets: the apiserver refuses a pod whose requests exceed its node's allocatable
/// (PodResize admission), the kubelet defers one that does not fit beside the node's other pods or calls it
/// infeasible (its `PodResizePending` condition).
fn stuck_resize(
    p: &Pod,
    new_req: (i64, i64),
    allocatable: Option<(i64, i64)>,
) -> Option<(String, String, String)> {
    if let Some((reason, message)) = insitu_core::inplaceupdate::vertical::resize_pending(p) {
        let waits = podwhy::stage(p).1;
        let then = if waits.is_empty() {
            "the kubelet retries the resize".into()
        } else {
            waits.join("; ")
        };
        return Some((reason, message, then));
    }
    let (cpu, mem) = allocatable?;
    (new_req.0 > cpu || new_req.1 > mem).then(|| {
        (
            "Refused".to_string(),
            format!(
                "requests cpu {}m / memory {} exceed the node's allocatable cpu {cpu}m / memory {}",
                new_req.0,
                mib(new_req.1),
                mib(mem)
            ),
            "the apiserver refuses the pods/resize: the controller retries every round (Kruise updatePodInPlace fails, FailedUpdatePodInPlace); the pod keeps its old resources and revision, no recreate".to_string(),
        )
    })
}

/// Pods whose update started and never ended because of their resize, and what then happens.
pub fn pending(obs: &Observed, nodes: &super::sim::NodeMap, new_req: (i64, i64)) -> Vec<Pending> {
    let stuck: std::collections::BTreeSet<&str> = obs
        .pods
        .iter()
        .filter(|f| f.start.is_some() && f.end.is_none())
        .map(|f| f.name.as_str())
        .collect();
    obs.final_pods
        .iter()
        .filter(|p| p.metadata.name.as_deref().is_some_and(|n| stuck.contains(n)))
        .filter_map(|p| {
            let sim_node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let node = nodes.to_live.get(&sim_node).cloned().unwrap_or(sim_node);
            let alloc = nodes.allocatable.get(&node).copied().or(nodes.capacity);
            let (reason, message, then) = stuck_resize(p, new_req, alloc)?;
            Some(Pending {
                pod: p.metadata.name.clone().unwrap_or_default(),
                node,
                reason,
                message,
                then,
            })
        })
        .collect()
}

fn percent(extra: i64, base: i64) -> f64 {
    if base > 0 {
        100.0 * extra as f64 / base as f64
    } else {
        0.0
    }
}

/// One run's figures from what was observed.
pub fn run(
    strategy: &str,
    obs: Observed,
    planner: &BTreeMap<String, (String, String)>,
    nodes: &super::sim::NodeMap,
    new_req: (i64, i64),
) -> Run {
    let count = |d: &str| obs.pods.iter().filter(|p| p.decision == d).count();
    Run {
        strategy: strategy.into(),
        predicted_seconds: obs.seconds,
        completes: obs.done,
        batches: batches(&obs.pods),
        in_place: count("in-place"),
        recreated: count("recreate"),
        unchanged: count("unchanged"),
        groups: groups(&obs.pods, strategy, planner),
        peak_unavailable: obs.peak_unavailable,
        peak_extra_pods: obs.peak_extra_pods,
        peak_extra_cpu_milli: obs.peak_extra_cpu_milli,
        peak_extra_memory_bytes: obs.peak_extra_memory_bytes,
        peak_extra_cpu_percent: percent(obs.peak_extra_cpu_milli, obs.base_cpu_milli),
        peak_extra_memory_percent: percent(obs.peak_extra_memory_bytes, obs.base_memory_bytes),
        resize_pending: pending(&obs, nodes, new_req),
        timeline: obs.timeline.clone(),
        pods: obs.pods,
    }
}

fn mib(b: i64) -> String {
    format!("{:.0}Mi", b as f64 / (1024.0 * 1024.0))
}

fn render_run(s: &mut String, r: &Run) {
    let _ = writeln!(s, "\n{}:", r.strategy);
    if r.completes {
        let _ = writeln!(s, "  predicted duration      {:.1} s", r.predicted_seconds);
    } else {
        let _ = writeln!(
            s,
            "  predicted duration      does not complete: nothing moves after {:.1} s",
            r.predicted_seconds
        );
    }
    let _ = writeln!(
        s,
        "  pods                    {} in place, {} recreated, {} unchanged",
        r.in_place, r.recreated, r.unchanged
    );
    for g in &r.groups {
        let _ = writeln!(
            s,
            "    {:>5} {:<9} {} (e.g. {})",
            g.pods,
            g.decision,
            g.reason,
            g.examples.join(", ")
        );
    }
    let _ = writeln!(s, "  peak out of service     {} pods", r.peak_unavailable);
    let _ = writeln!(
        s,
        "  peak extra              {} pods, cpu +{}m (+{:.0}%), memory +{} (+{:.0}%)",
        r.peak_extra_pods,
        r.peak_extra_cpu_milli,
        r.peak_extra_cpu_percent,
        mib(r.peak_extra_memory_bytes),
        r.peak_extra_memory_percent
    );
    let _ = writeln!(s, "  batches                 {}", r.batches.len());
    let shown = 12;
    for (i, b) in r.batches.iter().enumerate().take(shown) {
        let end = b.end.map_or("not done".to_string(), |e| format!("{e:7.1} s"));
        let _ = writeln!(
            s,
            "    #{:<3} start {:7.1} s  end {end}  {} pods",
            i + 1,
            b.start,
            b.pods
        );
    }
    if r.batches.len() > shown {
        let _ = writeln!(
            s,
            "    … {} more (-o json lists them all)",
            r.batches.len() - shown
        );
    }
    if !r.resize_pending.is_empty() {
        let _ = writeln!(s, "  resizes the node cannot fit: {}", r.resize_pending.len());
        for p in r.resize_pending.iter().take(5) {
            let _ = writeln!(
                s,
                "    {} on {}: {} ({}); then: {}",
                p.pod, p.node, p.reason, p.message, p.then
            );
        }
    }
}

/// The report as text.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "insitu whatif {} — {} replicas on {} node(s), from {}; nothing was written to the cluster",
        r.cloneset, r.replicas, r.nodes, r.source
    );
    let _ = writeln!(s, "change: {}", r.change.join("; "));
    for run in &r.runs {
        render_run(&mut s, run);
    }
    let _ = writeln!(s, "\nassumptions:");
    for a in &r.assumptions {
        let _ = writeln!(s, "  - {a}");
    }
    if !r.notes.is_empty() {
        let _ = writeln!(s, "notes:");
        for n in &r.notes {
            let _ = writeln!(s, "  - {n}");
        }
    }
    let _ = writeln!(s, "(simulated in {:.1} s of wall time)", r.wall_seconds);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fate(name: &str, decision: &str, start: Option<f64>, end: Option<f64>) -> PodFate {
        PodFate {
            name: name.into(),
            node: "n".into(),
            decision: decision.into(),
            start,
            end,
        }
    }

    #[test]
    fn batches_split_on_gaps() {
        let pods = [
            fate("a", "in-place", Some(0.5), Some(10.0)),
            fate("b", "in-place", Some(0.6), Some(11.0)),
            fate("c", "in-place", Some(11.5), Some(20.0)),
            fate("d", "in-place", Some(12.0), None),
            fate("e", "unchanged", None, None),
        ];
        let b = batches(&pods);
        assert_eq!(
            b,
            vec![
                Batch {
                    start: 0.5,
                    end: Some(11.0),
                    pods: 2
                },
                Batch {
                    start: 11.5,
                    end: None,
                    pods: 2
                },
            ]
        );
    }

    #[test]
    fn groups_by_decision_and_reason() {
        let pods = [
            fate("a", "in-place", Some(0.0), Some(1.0)),
            fate("b", "in-place", Some(0.0), Some(1.0)),
            fate("c", "recreate", Some(0.0), Some(1.0)),
            fate("d", "unchanged", None, None),
        ];
        let planner: BTreeMap<String, (String, String)> = [
            ("a", "in place", "the template change can be applied in place"),
            ("b", "in place", "the template change can be applied in place"),
            ("c", "in place", "the template change can be applied in place"),
            ("d", "nothing", "the partition"),
        ]
        .into_iter()
        .map(|(n, a, b)| (n.to_string(), (a.to_string(), b.to_string())))
        .collect();
        let g = groups(&pods, "InPlaceIfPossible", &planner);
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].decision, "in-place");
        assert_eq!(g[0].pods, 2);
        assert!(
            g[1].reason.contains("the planner alone said: in place"),
            "{}",
            g[1].reason
        );
        assert_eq!(g[2].reason, "not updated: the partition");
        let g = groups(&pods[2..3], "ReCreate", &planner);
        assert_eq!(g[0].reason, "updateStrategy.type ReCreate");
    }

    #[test]
    fn render_says_what_it_predicts() {
        let obs = Observed {
            seconds: 42.0,
            done: true,
            pods: vec![fate("a", "in-place", Some(0.0), Some(40.0))],
            peak_unavailable: 1,
            base_cpu_milli: 1000,
            peak_extra_cpu_milli: 100,
            ..Observed::default()
        };
        let run = run(
            "InPlaceIfPossible",
            obs,
            &BTreeMap::new(),
            &Default::default(),
            (0, 0),
        );
        assert!((run.peak_extra_cpu_percent - 10.0).abs() < 1e-9);
        let r = Report {
            cloneset: "d/web".into(),
            replicas: 1,
            change: vec!["set image app=x".into()],
            source: "a dump".into(),
            nodes: 1,
            assumptions: vec!["pull 2 s".into()],
            notes: vec![],
            runs: vec![run],
            wall_seconds: 0.1,
        };
        let text = render(&r);
        assert!(text.contains("predicted duration      42.0 s"), "{text}");
        assert!(text.contains("1 in place, 0 recreated, 0 unchanged"), "{text}");
        assert!(text.contains("- pull 2 s"), "{text}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["runs"][0]["predictedSeconds"], 42.0);
        assert_eq!(json["runs"][0]["batches"][0]["pods"], 1);
    }
}
