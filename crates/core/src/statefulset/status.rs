//! The status of an Advanced StatefulSet (Kruise `stateful_set_control.go`: `updateStatus`,
//! `computeReplicaStatus`; `stateful_set_utils.go`: `completeRollingUpdate`, `inconsistentStatus`).

use insitu_api::statefulset::StatefulSetStatus;
use insitu_api::validation::format_selector;

use super::podstate as ps;
use super::{Sts, min_ready_seconds};
use crate::revision::ActiveRevisions;

impl Sts<'_> {
    /// The status Kruise computes for this round: counts over the pods (those with an ordinal), the
    /// revisions, the adjustments for pods this round updates or deletes, and a completed rollout.
    pub(super) fn status(&self, revs: &ActiveRevisions, collision_count: i32) -> StatefulSetStatus {
        let set = self.set;
        let min_ready = min_ready_seconds(set);
        let mut st = StatefulSetStatus {
            observed_generation: set.metadata.generation.unwrap_or(0),
            current_revision: revs.current.metadata.name.clone().unwrap_or_default(),
            update_revision: revs.update.metadata.name.clone().unwrap_or_default(),
            collision_count: Some(collision_count),
            label_selector: format_selector(&set.spec.selector),
            ..Default::default()
        };
        for pod in &self.s.pods {
            if super::ordinal(ps::name(pod)).is_none() || ps::phase(pod).is_empty() {
                continue;
            }
            st.replicas += 1;
            let rev = ps::revision(pod);
            let (avail, _) = ps::available(pod, min_ready, self.s.now);
            if ps::running_and_ready(pod) {
                st.ready_replicas += 1;
                if avail {
                    st.available_replicas += 1;
                }
                if rev == st.update_revision {
                    st.updated_ready_replicas += 1;
                    if avail {
                        st.updated_available_replicas += 1;
                    }
                }
            }
            if !ps::terminating(pod) {
                if rev == st.current_revision {
                    st.current_replicas += 1;
                }
                if rev == st.update_revision {
                    st.updated_replicas += 1;
                }
            }
        }
        st.current_replicas += self.current_delta;
        st.updated_replicas += self.updated_delta;
        // Kruise `completeRollingUpdate`.
        if super::strategy_type(set) == "RollingUpdate"
            && st.updated_replicas == st.replicas
            && st.ready_replicas == st.replicas
        {
            st.current_replicas = st.updated_replicas;
            st.current_revision = st.update_revision.clone();
        }
        st
    }
}

/// Kruise `inconsistentStatus`: whether `new` differs from the stored status in what Kruise compares.
pub(super) fn inconsistent(old: Option<&StatefulSetStatus>, new: &StatefulSetStatus) -> bool {
    let Some(old) = old else { return true };
    new.observed_generation > old.observed_generation
        || new.replicas != old.replicas
        || new.current_replicas != old.current_replicas
        || new.ready_replicas != old.ready_replicas
        || new.available_replicas != old.available_replicas
        || new.updated_replicas != old.updated_replicas
        || new.current_revision != old.current_revision
        || new.update_revision != old.update_revision
        || new.label_selector != old.label_selector
        // Not in Kruise's list, which writes them with the fields above; compared so a status never lags.
        || new.updated_ready_replicas != old.updated_ready_replicas
        || new.updated_available_replicas != old.updated_available_replicas
}
