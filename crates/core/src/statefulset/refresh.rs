//! Kruise `refreshPodState` for an Advanced StatefulSet's pod (`stateful_set_control.go`): the in-place
//! engine's refresh (grace period, next container batch, `InPlaceUpdateReady`; Kruise
//! `pkg/util/inplaceupdate` `Refresh`) and the lifecycle transitions.

use std::sync::Arc;

use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;

use super::Sts;
use super::podstate::{self as ps, name};
use crate::inplaceupdate::{self, Grace};
use crate::model::plan::{Action, UpdateReason};

impl<'a> Sts<'a> {
    /// Refreshes `pod` once per round; true when a lifecycle transition was planned (Kruise's
    /// `refreshPodState` "updated", which holds back the rolling update for this round).
    pub(super) fn refresh(&mut self, pod: &'a Arc<Pod>) -> bool {
        let key = name(pod);
        if let Some(done) = self.refreshed.get(key) {
            return *done;
        }
        let completed = self.inplace_refresh(pod);
        let moved = self.lifecycle_refresh(pod, completed);
        self.refreshed.insert(key, moved);
        moved
    }

    /// Kruise `realControl.Refresh`; returns whether the in-place update (if any) is complete.
    fn inplace_refresh(&mut self, pod: &Pod) -> bool {
        let now = self.s.now;
        if let Some(g) = ps::grace(pod) {
            match inplaceupdate::finish_grace(pod, ps::revision(pod), g, ps::state(pod), now) {
                Grace::Wait(d) => self.requeue_after(d),
                Grace::Finish(m) | Grace::Stale(m, _) => {
                    self.why(format!(
                        "pod {}: grace period over → patch images {:?}",
                        name(pod),
                        m.container_images
                    ));
                    self.push_update(pod, m, UpdateReason::FinishGracePeriod);
                }
                Grace::Abandon(m) => {
                    self.why(format!(
                        "pod {}: template changed during the grace period → drop it",
                        name(pod)
                    ));
                    self.push_update(pod, m, UpdateReason::AbandonGracePeriod);
                }
                Grace::Invalid(e) => self.why(format!("pod {}: {e}", name(pod))),
            }
            return false;
        }
        if let Some(state) = ps::state(pod) {
            let parsed = match inplaceupdate::parse_state(state) {
                Ok(st) => st,
                Err(e) => {
                    self.why(format!("pod {}: {e}", name(pod)));
                    return false;
                }
            };
            if let Err(e) = inplaceupdate::containers_completed(pod, &parsed) {
                if ps::lifecycle(pod) == keys::lifecycle::UPDATING {
                    self.why(format!("pod {}: in-place update not done: {e}", name(pod)));
                }
                return false;
            }
            if inplaceupdate::has_next_batch(&parsed) {
                match inplaceupdate::next_batch(pod, parsed, now) {
                    Ok(m) => {
                        self.why(format!(
                            "pod {}: previous batch done → next container batch",
                            name(pod)
                        ));
                        self.push_update(pod, m, UpdateReason::NextBatch);
                    }
                    Err(e) => self.why(format!("pod {}: next batch waits: {e}", name(pod))),
                }
                return false;
            }
        }
        if ps::has_inplace_gate(pod) && !ps::inplace_ready(pod) {
            self.plan.actions.push(Action::SetInPlaceUpdateReady {
                pod: name(pod).to_string(),
                uid: ps::uid(pod).to_string(),
                ready: true,
            });
        }
        true
    }

    /// The lifecycle half of Kruise `refreshPodState`.
    fn lifecycle_refresh(&mut self, pod: &Pod, completed: bool) -> bool {
        let lc = self.set.spec.lifecycle.as_ref();
        let ipu_hook = lc.and_then(|l| l.in_place_update.as_ref());
        let labels = &pod.metadata.labels;
        let all_hooked = |h| crate::lifecycle::is_all_hooked(h, labels.into(), &pod.metadata);
        let updated_or_normal = || {
            if lc.is_some() && !all_hooked(ipu_hook) {
                keys::lifecycle::UPDATED
            } else {
                keys::lifecycle::NORMAL
            }
        };
        let next = match ps::lifecycle(pod) {
            keys::lifecycle::PREPARING_NORMAL => {
                let pre_normal = lc.and_then(|l| l.pre_normal.as_ref());
                (pre_normal.is_none() || all_hooked(pre_normal)).then_some(keys::lifecycle::NORMAL)
            }
            // Kruise #1156: rolled back while PreparingUpdate, the pod is at the update revision already.
            keys::lifecycle::PREPARING_UPDATE => {
                (ps::revision(pod) == self.plan.update_revision).then(updated_or_normal)
            }
            keys::lifecycle::UPDATING => completed.then(updated_or_normal),
            keys::lifecycle::UPDATED => {
                (ipu_hook.is_none() || all_hooked(ipu_hook)).then_some(keys::lifecycle::NORMAL)
            }
            _ => None,
        };
        let Some(state) = next else { return false };
        self.why(format!(
            "pod {}: lifecycle {} → {state}",
            name(pod),
            ps::lifecycle(pod)
        ));
        let a = self.lifecycle_patch(pod, state);
        self.plan.actions.push(a);
        true
    }

    pub(super) fn push_update(
        &mut self,
        pod: &Pod,
        mutation: crate::model::plan::PodMutation,
        reason: UpdateReason,
    ) {
        self.plan.actions.push(Action::UpdatePod {
            pod: name(pod).to_string(),
            uid: ps::uid(pod).to_string(),
            mutation,
            reason,
        });
    }
}
