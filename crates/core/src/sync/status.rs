//! CloneSet status (Kruise `cloneset_status.go`, `calculateStatus`): counts, currentRevision promotion,
//! conditions, write-only-when-changed.

use std::time::Duration;

use insitu_api::{CloneSet, CloneSetCondition, CloneSetStatus, keys};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::model::pods::PodFacts;

pub(crate) const REASON_AVAILABLE: &str = "CloneSetAvailable";
pub(crate) const REASON_PAUSED: &str = "CloneSetPaused";
pub(crate) const REASON_PARTITION_AVAILABLE: &str = "ProgressPartitionAvailable";
pub(crate) const REASON_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
pub(crate) const REASON_UPDATED: &str = "CloneSetUpdated";

/// Kruise `SetCloneSetCondition`: no change when status and reason are unchanged; a reason change with the
/// same status keeps `lastTransitionTime`.
pub(crate) fn set_condition(conds: &mut Vec<CloneSetCondition>, mut c: CloneSetCondition) {
    if let Some(old) = conds.iter_mut().find(|o| o.type_ == c.type_) {
        if old.status == c.status && old.reason == c.reason {
            return;
        }
        if old.status == c.status {
            c.last_transition_time = old.last_transition_time.clone();
        }
        *old = c;
    } else {
        conds.push(c);
    }
}

fn cond(type_: &str, status: &str, reason: &str, message: String, now: Timestamp) -> CloneSetCondition {
    CloneSetCondition {
        type_: type_.into(),
        status: status.into(),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: reason.into(),
        message,
    }
}

/// Inputs of the status computation that the planner decided.
pub(crate) struct StatusInput<'a> {
    pub update_revision: &'a str,
    pub current_revision: &'a str,
    pub collision_count: i32,
    pub expected_updated: i32,
    pub label_selector: String,
    pub failed_scale: Option<String>,
    pub failed_update: Option<String>,
}

/// Kruise `calculateStatus` + Progressing (`cloneset_status.go`). Returns the new status and an optional
/// requeue (minReadySeconds to elapse, progress deadline).
pub(crate) fn compute(
    cs: &CloneSet,
    facts: &[PodFacts],
    input: &StatusInput,
    now: Timestamp,
) -> (CloneSetStatus, Option<Duration>) {
    let old = cs.status.clone().unwrap_or_default();
    let spec_replicas = cs.spec.replicas();
    let mut st = CloneSetStatus {
        observed_generation: cs.metadata.generation.unwrap_or(0),
        update_revision: input.update_revision.to_string(),
        current_revision: input.current_revision.to_string(),
        collision_count: Some(input.collision_count),
        label_selector: input.label_selector.clone(),
        conditions: old.conditions.clone(),
        ..Default::default()
    };
    let mut requeue: Option<Duration> = None;
    for f in facts {
        st.replicas += 1;
        if f.update_ready {
            st.ready_replicas += 1;
        }
        if f.available {
            st.available_replicas += 1;
        }
        if f.updated {
            st.updated_replicas += 1;
            if f.update_ready {
                st.updated_ready_replicas += 1;
            }
            if f.available {
                st.updated_available_replicas += 1;
            }
        }
        if let Some(d) = f.available_in {
            // Look again when minReadySeconds has elapsed (Kruise requeues after minReadySeconds).
            let d = Duration::try_from(d.saturating_add(SignedDuration::from_millis(1))).unwrap_or_default();
            requeue = Some(requeue.map_or(d, |r| r.min(d)));
        }
    }
    st.expected_updated_replicas = input.expected_updated;
    if st.updated_replicas == st.replicas && st.replicas == spec_replicas {
        st.current_revision = st.update_revision.clone();
    }
    if let Some(msg) = &input.failed_scale {
        set_failure(&mut st.conditions, keys::conditions::FAILED_SCALE, msg, now);
    }
    if let Some(msg) = &input.failed_update {
        set_failure(&mut st.conditions, keys::conditions::FAILED_UPDATE, msg, now);
    }
    if let Some(d) = progressing(cs, &mut st, now) {
        requeue = Some(requeue.map_or(d, |r| r.min(d)));
    }
    (st, requeue)
}

fn set_failure(conds: &mut Vec<CloneSetCondition>, type_: &str, msg: &str, now: Timestamp) {
    let c = CloneSetCondition {
        type_: type_.into(),
        status: "True".into(),
        last_update_time: None,
        last_transition_time: Some(Time(now)),
        reason: String::new(),
        message: msg.into(),
    };
    if let Some(o) = conds.iter_mut().find(|o| o.type_ == type_) {
        if o.message != msg {
            *o = c;
        }
    } else {
        conds.push(c);
    }
}

/// The Progressing condition (Kruise v1.9 `calculateProgressingStatus`), only with progressDeadlineSeconds
/// set and not MaxInt32. DeadlineExceeded is sticky until the CloneSet becomes available, paused or
/// partition-available; otherwise the deadline counts from the condition's lastUpdateTime.
fn progressing(cs: &CloneSet, st: &mut CloneSetStatus, now: Timestamp) -> Option<Duration> {
    let pds = match cs.spec.progress_deadline_seconds {
        Some(p) if p != i32::MAX => p,
        _ => {
            st.conditions.retain(|c| c.type_ != keys::conditions::PROGRESSING);
            return None;
        }
    };
    let replicas = cs.spec.replicas();
    let paused = cs.spec.update_strategy.as_ref().is_some_and(|u| u.paused);
    let p = keys::conditions::PROGRESSING;
    let deadline_of = |c: &CloneSetCondition| {
        let since = c.last_update_time.as_ref().map_or(Timestamp::UNIX_EPOCH, |t| t.0);
        since
            .saturating_add(SignedDuration::from_secs(i64::from(pds)))
            .unwrap_or(Timestamp::MAX)
    };
    let existing = st.conditions.iter().find(|c| c.type_ == p).cloned();
    if st.current_revision == st.update_revision
        && st.replicas == replicas
        && st.updated_replicas == replicas
        && st.updated_available_replicas == replicas
    {
        set_condition(
            &mut st.conditions,
            cond(p, "True", REASON_AVAILABLE, "CloneSet is available".into(), now),
        );
        return None;
    }
    if paused {
        set_condition(
            &mut st.conditions,
            cond(p, "True", REASON_PAUSED, "CloneSet is paused".into(), now),
        );
        return None;
    }
    if st.expected_updated_replicas < replicas
        && st.expected_updated_replicas <= st.updated_available_replicas
    {
        let msg = "CloneSet has been paused due to partition ready".to_string();
        set_condition(
            &mut st.conditions,
            cond(p, "True", REASON_PARTITION_AVAILABLE, msg, now),
        );
        return None;
    }
    if existing
        .as_ref()
        .is_some_and(|c| c.reason == REASON_DEADLINE_EXCEEDED || deadline_of(c) < now)
    {
        let msg = format!(
            "CloneSet revision {} has timed out progressing",
            st.update_revision
        );
        set_condition(
            &mut st.conditions,
            cond(p, "False", REASON_DEADLINE_EXCEEDED, msg, now),
        );
        return None;
    }
    set_condition(
        &mut st.conditions,
        cond(p, "True", REASON_UPDATED, "CloneSet is progressing".into(), now),
    );
    // Kruise getRequeueSecondsFromCondition: deadline − now, plus 1s against timer skew.
    let c = st.conditions.iter().find(|c| c.type_ == p)?;
    let after = now.duration_until(deadline_of(c));
    let after = if after < SignedDuration::from_secs(1) {
        after
    } else {
        after + SignedDuration::from_secs(1)
    };
    Duration::try_from(after).ok().filter(|d| !d.is_zero())
}

/// Kruise `inconsistentStatus`: write only when a counted field, a revision, the selector, a newer
/// generation or the Progressing condition's status/reason changed.
pub(crate) fn inconsistent(old: Option<&CloneSetStatus>, new: &CloneSetStatus) -> bool {
    let Some(old) = old else { return true };
    let prog = |s: &CloneSetStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == keys::conditions::PROGRESSING)
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    new.observed_generation > old.observed_generation
        || old.replicas != new.replicas
        || old.ready_replicas != new.ready_replicas
        || old.available_replicas != new.available_replicas
        || old.updated_ready_replicas != new.updated_ready_replicas
        || old.updated_replicas != new.updated_replicas
        || old.updated_available_replicas != new.updated_available_replicas
        || old.expected_updated_replicas != new.expected_updated_replicas
        || old.update_revision != new.update_revision
        || old.current_revision != new.current_revision
        || old.label_selector != new.label_selector
        || prog(old) != prog(new)
}
