//! Kruise `pkg/util/lifecycle`: whether a pod is hooked, and `markPodNotReady` (the `KruisePodReady` condition).
//!
//! A pod is hooked when its labels or finalizers carry a lifecycle hook's (`IsPodHooked`, `IsPodAllHooked`).
//!
//! Kruise (`pkg/util/podreadiness`, `lifecycle_utils.go`): while a pod waits in PreparingUpdate (inPlaceUpdate
//! hook) or PreparingDelete (preDelete hook) and that hook has `markPodNotReady: true`, a
//! `{"userAgent":"Lifecycle","key":"preUpdateHook"|"preDeleteHook"}` entry sits in the condition's message (a
//! sorted JSON list) and the condition is False; when the list empties it is True again. Pods without the
//! `KruisePodReady` readiness gate are left alone (Kruise: no-op without the gate).
//!
//! insitu computes the wanted entries from the pod's lifecycle state (level-based, so a write lost between
//! the label patch and the status write is repaired on the next round) and keeps other user agents' entries.

use insitu_api::{CloneSet, LifecycleHook, keys};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::model::plan::Action;
use crate::model::plan::ReadinessMessage;
use crate::model::podmeta::{self as pods, Lc};
use crate::util::strmap::Entries;

impl ReadinessMessage {
    fn lifecycle(key: &str) -> Self {
        ReadinessMessage {
            user_agent: keys::READINESS_USER_AGENT_LIFECYCLE.into(),
            key: key.into(),
        }
    }
}

/// The condition message for `messages` (sorted JSON list, `""` when empty) — byte-exact with Kruise.
pub fn message_json(messages: &[ReadinessMessage]) -> String {
    if messages.is_empty() {
        return String::new();
    }
    serde_json::to_string(messages).unwrap_or_default()
}

/// Any hook of the CloneSet marks pods not ready, so its pods need the `KruisePodReady` gate.
pub(crate) fn wants_gate(cs: &CloneSet) -> bool {
    cs.spec.lifecycle.as_ref().is_some_and(|l| {
        [&l.pre_delete, &l.in_place_update]
            .iter()
            .any(|h| h.as_ref().is_some_and(|h| h.mark_pod_not_ready))
    })
}

/// The pod has the `KruisePodReady` readiness gate.
pub(crate) fn has_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.condition_type == keys::KRUISE_POD_READY))
}

/// The pod's current entries, `None` when the condition is absent. An unparseable message counts as empty
/// (it is rewritten with the wanted entries).
fn current(pod: &Pod) -> Option<Vec<ReadinessMessage>> {
    let c = pods::condition(pod, keys::KRUISE_POD_READY)?;
    let msg = c.message.as_deref().unwrap_or("");
    Some(if msg.is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(msg).unwrap_or_default()
    })
}

/// Whether a pod whose `KruisePodReady` condition is True with no entries (`PodSummary`'s
/// `kruise_ready_clean`) can need a write when its lifecycle state is `state`: only on the way into a
/// Preparing state, whose hook may add an entry. The planner skips `reconcile` (and decoding the pod) otherwise.
pub(crate) fn clean_may_change(state: Lc) -> bool {
    matches!(state, Lc::PreparingUpdate | Lc::PreparingDelete)
}

/// The `SetKruisePodReady` write (if any) that brings the pod's condition in line with lifecycle `state`
/// (the state the pod has, or is being moved to in this plan).
pub(crate) fn reconcile(cs: &CloneSet, pod: &Pod, name: &str, uid: &str, state: Lc) -> Option<Action> {
    // Cheap exits first: this runs for every pod of every plan.
    let cond = pods::condition(pod, keys::KRUISE_POD_READY);
    if cond.is_none() && !wants_gate(cs) {
        return None;
    }
    if !has_gate(pod) {
        return None;
    }
    let have = current(pod);
    let mut want = have.clone().unwrap_or_default();
    let lc = cs.spec.lifecycle.as_ref();
    let mark = |h: Option<&LifecycleHook>| h.is_some_and(|h| h.mark_pod_not_ready);
    let upd = ReadinessMessage::lifecycle(keys::READINESS_KEY_PRE_UPDATE);
    let del = ReadinessMessage::lifecycle(keys::READINESS_KEY_PRE_DELETE);
    // Kruise: PreparingUpdate adds preUpdateHook, Updated removes it; PreparingDelete adds preDeleteHook.
    // Kept while the update runs (Updating), dropped in any settled state.
    let (keep_upd, add_upd) = match state {
        Lc::PreparingUpdate => (true, mark(lc.and_then(|l| l.in_place_update.as_ref()))),
        Lc::Updating => (true, false),
        _ => (false, false),
    };
    let (keep_del, add_del) = match state {
        Lc::PreparingDelete => (true, mark(lc.and_then(|l| l.pre_delete.as_ref()))),
        _ => (false, false),
    };
    want.retain(|m| (*m != upd || keep_upd) && (*m != del || keep_del));
    for (add, m) in [(add_upd, upd), (add_del, del)] {
        if add && !want.contains(&m) {
            want.push(m);
        }
    }
    want.sort();
    want.dedup();
    let status_ok = cond.is_some_and(|c| (c.status == "True") == want.is_empty());
    if have.as_ref() == Some(&want) && status_ok {
        return None;
    }
    Some(Action::SetKruisePodReady {
        pod: name.to_string(),
        uid: uid.to_string(),
        messages: want,
    })
}

/// Kruise `lifecycle.IsPodHooked`: any hook label (k=v) or finalizer present.
pub(crate) fn is_hooked(hook: Option<&LifecycleHook>, labels: Entries<'_>, pod: &ObjectMeta) -> bool {
    let Some(h) = hook else { return false };
    let fins = pod.finalizers.as_deref().unwrap_or_default();
    h.finalizers_handler.iter().any(|f| fins.contains(f))
        || h.labels_handler.iter().any(|(k, v)| labels.get(k) == Some(v))
}

/// Kruise `lifecycle.IsPodAllHooked`: every hook label and finalizer present (false without a hook).
pub(crate) fn is_all_hooked(hook: Option<&LifecycleHook>, labels: Entries<'_>, pod: &ObjectMeta) -> bool {
    let Some(h) = hook else { return false };
    let fins = pod.finalizers.as_deref().unwrap_or_default();
    h.finalizers_handler.iter().all(|f| fins.contains(f))
        && h.labels_handler.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cs(mark_update: bool, mark_delete: bool) -> CloneSet {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "cs", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}},
                     "lifecycle": {
                        "inPlaceUpdate": {"labelsHandler": {"hold": "true"}, "markPodNotReady": mark_update},
                        "preDelete": {"finalizersHandler": ["x/y"], "markPodNotReady": mark_delete}}}
        }))
        .unwrap()
    }

    fn pod(gate: bool, cond: Option<(&str, &str)>) -> Pod {
        let mut p = serde_json::json!({"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": []},
                                       "status": {"conditions": []}});
        if gate {
            p["spec"]["readinessGates"] = serde_json::json!([{"conditionType": "KruisePodReady"}]);
        }
        if let Some((status, message)) = cond {
            p["status"]["conditions"] =
                serde_json::json!([{"type": "KruisePodReady", "status": status, "message": message}]);
        }
        serde_json::from_value(p).unwrap()
    }

    fn msgs(a: Option<Action>) -> Option<Vec<String>> {
        match a? {
            Action::SetKruisePodReady { messages, .. } => {
                Some(messages.iter().map(|m| m.key.clone()).collect())
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn message_is_kruise_json() {
        let m = vec![ReadinessMessage::lifecycle("preUpdateHook")];
        assert_eq!(
            message_json(&m),
            r#"[{"userAgent":"Lifecycle","key":"preUpdateHook"}]"#
        );
        assert_eq!(message_json(&[]), "");
    }

    #[test]
    fn a_clean_condition_changes_only_in_preparing_states() {
        let states = [
            Lc::None,
            Lc::PreparingNormal,
            Lc::Normal,
            Lc::PreparingUpdate,
            Lc::Updating,
            Lc::Updated,
            Lc::PreparingDelete,
            Lc::Other,
        ];
        for (mu, md) in [(false, false), (true, false), (false, true), (true, true)] {
            for st in states {
                let a = reconcile(&cs(mu, md), &pod(true, Some(("True", ""))), "p", "u", st);
                if !clean_may_change(st) {
                    assert_eq!(a, None, "{st:?} with hooks marking ({mu}, {md})");
                }
            }
        }
    }

    #[test]
    fn missing_condition_is_created_true() {
        let a = reconcile(&cs(true, false), &pod(true, None), "p", "u", Lc::Normal);
        assert_eq!(msgs(a), Some(vec![]));
    }

    #[test]
    fn no_gate_no_write() {
        assert_eq!(
            reconcile(&cs(true, true), &pod(false, None), "p", "u", Lc::PreparingUpdate),
            None
        );
    }

    #[test]
    fn preparing_update_adds_the_key_and_updated_removes_it() {
        let c = cs(true, false);
        let a = reconcile(&c, &pod(true, Some(("True", ""))), "p", "u", Lc::PreparingUpdate);
        assert_eq!(msgs(a), Some(vec!["preUpdateHook".to_string()]));
        let held = r#"[{"userAgent":"Lifecycle","key":"preUpdateHook"}]"#;
        assert_eq!(
            reconcile(&c, &pod(true, Some(("False", held))), "p", "u", Lc::Updating),
            None
        );
        let a = reconcile(&c, &pod(true, Some(("False", held))), "p", "u", Lc::Updated);
        assert_eq!(msgs(a), Some(vec![]));
    }

    #[test]
    fn without_mark_nothing_is_added_but_other_agents_are_kept() {
        let c = cs(false, false);
        let other = r#"[{"userAgent":"Other","key":"x"}]"#;
        assert_eq!(
            reconcile(
                &c,
                &pod(true, Some(("False", other))),
                "p",
                "u",
                Lc::PreparingUpdate
            ),
            None
        );
        let both = r#"[{"userAgent":"Lifecycle","key":"preDeleteHook"},{"userAgent":"Other","key":"x"}]"#;
        let a = reconcile(&c, &pod(true, Some(("False", both))), "p", "u", Lc::Normal);
        assert_eq!(msgs(a), Some(vec!["x".to_string()]));
    }

    #[test]
    fn preparing_delete_adds_its_key() {
        let a = reconcile(
            &cs(false, true),
            &pod(true, Some(("True", ""))),
            "p",
            "u",
            Lc::PreparingDelete,
        );
        assert_eq!(msgs(a), Some(vec!["preDeleteHook".to_string()]));
    }
}
