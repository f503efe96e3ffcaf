//! The pod conditions the controller owns (`InPlaceUpdateReady`, `KruisePodReady`) and metadata entries set in
//! the same pods/status write.

use std::collections::BTreeMap;

use insitu_api::keys;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Applies merge-patch-like entries (`None` removes); true when anything changed.
pub(super) fn set_entries(
    map: &mut BTreeMap<String, String>,
    entries: &BTreeMap<String, Option<String>>,
) -> bool {
    let mut changed = false;
    for (k, v) in entries {
        changed |= match v {
            Some(v) => map.insert(k.clone(), v.clone()).as_ref() != Some(v),
            None => map.remove(k).is_some(),
        };
    }
    changed
}

/// A pod condition the controller owns (`InPlaceUpdateReady`, `KruisePodReady`).
pub(super) struct Cond {
    pub type_: &'static str,
    pub ready: bool,
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl Cond {
    pub fn inplace_update_ready(ready: bool) -> Self {
        Cond {
            type_: keys::INPLACE_UPDATE_READY,
            ready,
            reason: (!ready).then(|| keys::INPLACE_UPDATE_READY_REASON.to_string()),
            message: None,
        }
    }
}

pub(super) fn set_condition(pod: &mut Pod, cond: &Cond, now: &Time) -> bool {
    let status = pod.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let ready = cond.ready;
    let want = if ready { "True" } else { "False" };
    let changed = match conditions.iter_mut().find(|c| c.type_ == cond.type_) {
        Some(c) if c.status == want && c.reason == cond.reason && c.message == cond.message => false,
        Some(c) => {
            if c.status != want {
                c.last_transition_time = Some(now.clone());
            }
            c.status = want.into();
            c.reason = cond.reason.clone();
            c.message = cond.message.clone();
            true
        }
        None => {
            conditions.push(PodCondition {
                type_: cond.type_.into(),
                status: want.into(),
                reason: cond.reason.clone(),
                message: cond.message.clone(),
                last_transition_time: Some(now.clone()),
                ..Default::default()
            });
            true
        }
    };
    if changed && !ready {
        // Kruise: util.SetPodReadyCondition — drop Ready now instead of waiting for the kubelet,
        // so Service endpoints remove the pod before its containers are touched.
        let containers_ready = conditions
            .iter()
            .any(|c| c.type_ == "ContainersReady" && c.status == "True");
        if containers_ready && let Some(c) = conditions.iter_mut().find(|c| c.type_ == "Ready") {
            if c.status != "False" {
                c.last_transition_time = Some(now.clone());
            }
            c.status = "False".into();
            c.reason = Some("ReadinessGatesNotReady".into());
            c.message = Some(format!(
                "the status of pod readiness gate \"{}\" is not \"True\", but False",
                cond.type_
            ));
        }
    }
    changed
}
