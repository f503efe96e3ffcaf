//! What `insitu status` shows of a rollout: progress numbers, the current batch, the verdict, one text frame.
//!
//! Pure functions of a CloneSet and its pods, so the frames can be asserted in tests. The verdict follows
//! kubectl-kruise's CloneSet status viewer (partition, observedGeneration, ready replicas) and adds what
//! `kubectl rollout status` does for Deployments: updated pods must also be available, and a
//! `Progressing=False/ProgressDeadlineExceeded` condition (Kruise v1.9 progressDeadlineSeconds) is a failure.

use std::fmt::Write as _;

use insitu_api::{CloneSet, CloneSetCondition, keys};
use insitu_core::explain::podtable;
use insitu_core::{budget, revision};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

/// Kruise's reason on `Progressing=False` once progressDeadlineSeconds passed without progress.
pub const DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// The numbers of the progress line, from the CloneSet's spec and status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub replicas: i32,
    pub pods: i32,
    pub ready: i32,
    pub available: i32,
    pub updated: i32,
    pub updated_ready: i32,
    pub updated_available: i32,
    /// Pods kept at the current revision (`updateStrategy.partition`, percent rounded up as Kruise does).
    pub partition: i32,
    /// Pods the rollout moves to the update revision: replicas − partition.
    pub target: i32,
    pub max_unavailable: i32,
    pub paused: bool,
    /// The controller has seen the latest spec (status.observedGeneration ≥ metadata.generation).
    pub observed: bool,
}

impl Progress {
    pub fn of(cs: &CloneSet) -> Self {
        let st = cs.status.clone().unwrap_or_default();
        let replicas = cs.spec.replicas();
        let us = cs.spec.update_strategy();
        let partition = budget::partition(us.partition.as_ref(), replicas);
        let (_, max_unavailable) = budget::surge_and_unavailable(&cs.spec);
        Progress {
            replicas,
            pods: st.replicas,
            ready: st.ready_replicas,
            available: st.available_replicas,
            updated: st.updated_replicas,
            updated_ready: st.updated_ready_replicas,
            updated_available: st.updated_available_replicas,
            partition,
            target: (replicas - partition).max(0),
            max_unavailable,
            paused: us.paused,
            observed: st.observed_generation >= cs.metadata.generation.unwrap_or(0)
                && st.observed_generation > 0,
        }
    }
}

/// Where the rollout stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Waiting(String),
    Done(String),
    Failed(String),
}

impl Verdict {
    pub fn message(&self) -> &str {
        match self {
            Verdict::Waiting(m) | Verdict::Done(m) | Verdict::Failed(m) => m,
        }
    }
}

fn condition<'a>(cs: &'a CloneSet, ty: &str) -> Option<&'a CloneSetCondition> {
    cs.status.as_ref()?.conditions.iter().find(|c| c.type_ == ty)
}

/// The verdict. `rollout_since` is when the update revision was created: a `FailedUpdate` condition
/// (Kruise keeps it, never clears it) set since then is this rollout's failure, an older one is history.
pub fn verdict(cs: &CloneSet, rollout_since: Option<Timestamp>) -> Verdict {
    let name = cs.name_any();
    let p = Progress::of(cs);
    let st = cs.status.clone().unwrap_or_default();
    if let Some(c) = condition(cs, keys::conditions::PROGRESSING)
        .filter(|c| c.status == "False" && c.reason == DEADLINE_EXCEEDED)
    {
        return Verdict::Failed(format!(
            "cloneset {name:?} exceeded its progress deadline: {}",
            c.message
        ));
    }
    if let (Some(c), Some(since)) = (condition(cs, keys::conditions::FAILED_UPDATE), rollout_since)
        && c.status == "True"
        && c.last_transition_time.as_ref().is_some_and(|t| t.0 >= since)
    {
        return Verdict::Failed(format!("cloneset {name:?} failed to update pods: {}", c.message));
    }
    if !p.observed {
        return Verdict::Waiting("Waiting for CloneSet spec update to be observed...".into());
    }
    let paused = if p.paused {
        format!(" (paused: `insitu rollout resume cloneset/{name}` continues it)")
    } else {
        String::new()
    };
    let what = if p.partition > 0 {
        "partitioned roll out"
    } else {
        "rollout"
    };
    if p.updated < p.target {
        return Verdict::Waiting(format!(
            "Waiting for {what} to finish: {} out of {} new pods have been updated...{paused}",
            p.updated, p.target
        ));
    }
    if p.updated_available < p.target {
        return Verdict::Waiting(format!(
            "Waiting for {what} to finish: {} of {} updated pods are available...",
            p.updated_available, p.target
        ));
    }
    if p.pods > p.replicas {
        return Verdict::Waiting(format!(
            "Waiting for {what} to finish: {} old pods are pending termination...",
            p.pods - p.replicas
        ));
    }
    if p.ready < p.replicas {
        return Verdict::Waiting(format!(
            "Waiting for {} pods to be ready...",
            p.replicas - p.ready
        ));
    }
    if p.partition > 0 {
        return Verdict::Done(format!(
            "partitioned roll out complete: {} new pods have been updated, partition keeps {} at revision {}",
            p.updated, p.partition, st.current_revision
        ));
    }
    Verdict::Done(format!(
        "CloneSet rolling update complete {} pods at revision {}...",
        p.available, st.update_revision
    ))
}

/// Whether `pod` is controlled by `cs` (its controller ownerReference carries the CloneSet's UID).
pub fn owned(cs: &CloneSet, pod: &Pod) -> bool {
    let uid = cs.metadata.uid.as_deref();
    pod.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.kind == "CloneSet" && Some(o.uid.as_str()) == uid)
}

fn at_update_revision(cs: &CloneSet, pod: &Pod) -> bool {
    let update = cs
        .status
        .as_ref()
        .map(|s| s.update_revision.as_str())
        .unwrap_or("");
    pod.labels()
        .get(keys::CONTROLLER_REVISION_HASH_LABEL)
        .is_some_and(|l| revision::equal_to_revision(l, update))
}

/// The current batch: pods moving to the update revision right now (in a seed stage, or at the update
/// revision and not yet Ready), and the pods still waiting for their turn.
pub fn batch(cs: &CloneSet, pods: &[&Pod]) -> (Vec<(String, &'static str)>, usize) {
    let mut in_flight = Vec::new();
    let mut waiting = 0;
    for p in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let stage = podtable::stage(p);
        let updated = at_update_revision(cs, p);
        if stage != "None" {
            in_flight.push((p.name_any(), stage));
        } else if updated && podtable::ready(p) != "True" {
            in_flight.push((p.name_any(), "starting"));
        } else if !updated {
            waiting += 1;
        }
    }
    in_flight.sort();
    (in_flight, waiting)
}

/// A progress bar: `#` updated and available, `+` updated not yet available, `.` the rest of replicas.
pub fn bar(p: &Progress, width: usize) -> String {
    let of = |n: i32| {
        if p.replicas <= 0 {
            return 0;
        }
        (n.clamp(0, p.replicas) as usize * width) / p.replicas as usize
    };
    let done = of(p.updated_available);
    let moving = of(p.updated).max(done) - done;
    format!(
        "[{}{}{}]",
        "#".repeat(done),
        "+".repeat(moving),
        ".".repeat(width - done - moving)
    )
}

/// Containers waiting for a reason a user must see (CrashLoopBackOff, ImagePullBackOff, ...), per pod.
fn problems(pods: &[&Pod]) -> Vec<String> {
    let mut out = Vec::new();
    for p in pods {
        let statuses = p.status.as_ref().and_then(|s| s.container_statuses.as_ref());
        for cs in statuses.into_iter().flatten() {
            let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
                continue;
            };
            let reason = w.reason.as_deref().unwrap_or("");
            if reason.is_empty() || reason == "ContainerCreating" || reason == "PodInitializing" {
                continue;
            }
            let msg = w.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
            out.push(format!("{} container {}: {reason}{msg}", p.name_any(), cs.name));
        }
    }
    out.sort();
    out
}

/// Short revision name: the hash after the CloneSet name.
fn short(rev: &str) -> &str {
    revision::short_hash(rev)
}

/// One frame: header, progress line, batch, pod table (the seed's monitor), problems, verdict.
pub fn frame(cs: &CloneSet, pods: &[&Pod], verdict: &Verdict) -> String {
    let p = Progress::of(cs);
    let st = cs.status.clone().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  update revision {} (current {})  generation {} (observed {})",
        crate::target::display(&cs.name_any()),
        short(&st.update_revision),
        short(&st.current_revision),
        cs.metadata.generation.unwrap_or(0),
        st.observed_generation
    );
    let _ = writeln!(
        out,
        "{}  updated {}/{}  updated-ready {}/{}  available {}/{}  partition {}{}",
        bar(&p, 30),
        p.updated,
        p.replicas,
        p.updated_ready,
        p.replicas,
        p.available,
        p.replicas,
        p.partition,
        if p.paused { "  PAUSED" } else { "" }
    );
    let (in_flight, waiting) = batch(cs, pods);
    let names: Vec<String> = in_flight.iter().map(|(n, s)| format!("{n} ({s})")).collect();
    let _ = writeln!(
        out,
        "batch: {} in flight (maxUnavailable {}){}; {waiting} pods still at the current revision",
        in_flight.len(),
        p.max_unavailable,
        if names.is_empty() {
            String::new()
        } else {
            format!(": {}", names.join(", "))
        }
    );
    out.push_str(&podtable::table(pods));
    for line in problems(pods) {
        let _ = writeln!(out, "! {line}");
    }
    let _ = writeln!(out, "{}", verdict.message());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use insitu_api::CloneSetStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn cs(replicas: i32, st: CloneSetStatus) -> CloneSet {
        let mut c: CloneSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "web", "generation": 2},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        }))
        .unwrap();
        c.status = Some(CloneSetStatus {
            observed_generation: 2,
            update_revision: "web-new".into(),
            current_revision: "web-old".into(),
            ..st
        });
        c
    }

    fn counts(updated: i32, updated_available: i32, ready: i32) -> CloneSetStatus {
        CloneSetStatus {
            replicas: 3,
            ready_replicas: ready,
            available_replicas: ready,
            updated_replicas: updated,
            updated_ready_replicas: updated_available,
            updated_available_replicas: updated_available,
            ..Default::default()
        }
    }

    fn failed_update(at: i64) -> CloneSetCondition {
        CloneSetCondition {
            type_: keys::conditions::FAILED_UPDATE.into(),
            status: "True".into(),
            last_transition_time: Some(Time(Timestamp::from_second(at).unwrap())),
            message: "pod web-x cannot be updated in place".into(),
            ..Default::default()
        }
    }

    #[test]
    fn waits_for_updated_then_available_then_completes() {
        let v = |st| verdict(&cs(3, st), None);
        assert!(matches!(v(counts(1, 0, 2)), Verdict::Waiting(m) if m.contains("1 out of 3 new pods")));
        assert!(
            matches!(v(counts(3, 2, 2)), Verdict::Waiting(m) if m.contains("2 of 3 updated pods are available"))
        );
        assert!(
            matches!(v(counts(3, 3, 3)), Verdict::Done(m) if m.contains("complete 3 pods at revision web-new"))
        );
        let mut unobserved = cs(3, counts(3, 3, 3));
        unobserved.metadata.generation = Some(3);
        assert!(
            matches!(verdict(&unobserved, None), Verdict::Waiting(m) if m.contains("spec update to be observed"))
        );
    }

    #[test]
    fn partition_completes_early_and_paused_says_how_to_resume() {
        let mut c = cs(3, counts(1, 1, 3));
        c.spec.update_strategy = Some(insitu_api::CloneSetUpdateStrategy {
            partition: Some(IntOrString::Int(2)),
            ..Default::default()
        });
        assert!(matches!(verdict(&c, None), Verdict::Done(m) if m.contains("partition keeps 2")));
        assert_eq!(Progress::of(&c).target, 1);
        let mut p = cs(3, counts(0, 0, 3));
        p.spec.update_strategy = Some(insitu_api::CloneSetUpdateStrategy {
            paused: true,
            ..Default::default()
        });
        assert!(
            matches!(verdict(&p, None), Verdict::Waiting(m) if m.contains("rollout resume cloneset/web"))
        );
    }

    #[test]
    fn deadline_and_a_fresh_failed_update_fail_an_old_one_does_not() {
        let mut st = counts(1, 0, 2);
        st.conditions.push(CloneSetCondition {
            type_: keys::conditions::PROGRESSING.into(),
            status: "False".into(),
            reason: DEADLINE_EXCEEDED.into(),
            message: "CloneSet revision web-new has timed out progressing".into(),
            ..Default::default()
        });
        assert!(
            matches!(verdict(&cs(3, st), None), Verdict::Failed(m) if m.contains("exceeded its progress deadline"))
        );
        let since = Timestamp::from_second(1_000).unwrap();
        let mut st = counts(1, 0, 2);
        st.conditions.push(failed_update(900));
        assert!(matches!(
            verdict(&cs(3, st.clone()), Some(since)),
            Verdict::Waiting(_)
        ));
        st.conditions[0] = failed_update(1_001);
        assert!(
            matches!(verdict(&cs(3, st), Some(since)), Verdict::Failed(m) if m.contains("cannot be updated in place"))
        );
    }

    #[test]
    fn bar_shows_available_then_moving() {
        let p = Progress::of(&cs(3, counts(2, 1, 3)));
        assert_eq!(bar(&p, 6), "[##++..]");
    }
}
