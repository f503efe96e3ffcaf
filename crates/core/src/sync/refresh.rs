//! Kruise `refreshPodState`: in-place grace, completion and next batches, lifecycle transitions, hash backfill.

use std::collections::BTreeMap;

use insitu_api::keys;

use crate::inplaceupdate::{self, Grace};
use crate::lifecycle;
use crate::model::plan::{Action, ResizeOutcome, ResizeSeen, UpdateReason, Warning};
use crate::model::pods::{Lc, PodFacts};
use crate::model::summary::InFlight;
use crate::revision::short_hash;

use super::Planner;
use crate::lifecycle::is_all_hooked;

impl Planner<'_> {
    /// Kruise `refreshPodState` (in-place Refresh, lifecycle transitions, hash backfill) for one pod.
    /// Hot path: allocates and parses the state annotation only when something can change.
    pub(super) fn refresh(&mut self, f: &PodFacts) -> bool {
        let now = self.s.now;
        let before = self.plan.actions.len();
        let ipu_true = f.ipu_true();
        // In-place Refresh (Kruise `pkg/util/inplaceupdate/inplace_update.go`, `realControl.Refresh`).
        let mut containers_done = true;
        // Whether the containers are done, for the Updating → Normal check (None: not looked at).
        let mut completed: Option<bool> = None;
        if let Some(g) = f.grace() {
            containers_done = false;
            match inplaceupdate::finish_grace(&f.pod(), f.revision(), g, f.state(), now) {
                Grace::Wait(d) => self.requeue_after(d),
                Grace::Finish(m) => {
                    self.why(format!(
                        "pod {}: grace period over → patch images {:?}{}",
                        f.name(),
                        m.container_images,
                        if m.container_resources.is_empty() {
                            String::new()
                        } else {
                            format!(
                                ", resize {}",
                                crate::inplaceupdate::vertical::describe(&m.container_resources)
                            )
                        }
                    ));
                    self.push_update(f, m, UpdateReason::FinishGracePeriod);
                }
                Grace::Abandon(m) => {
                    self.why(format!(
                        "pod {}: template changed during the grace period → drop it",
                        f.name()
                    ));
                    self.push_update(f, m, UpdateReason::AbandonGracePeriod);
                }
                Grace::Invalid(e) => self.why(format!("pod {}: {e}", f.name())),
                Grace::Stale(m, why) => {
                    self.plan.warnings.push(Warning {
                        reason: keys::events::STALE_INPLACE_UPDATE_GRACE.to_string(),
                        message: format!("pod {}: {why}", f.name()),
                    });
                    self.why(format!("pod {}: {why}", f.name()));
                    self.push_update(f, m, UpdateReason::FinishGracePeriod);
                }
            }
        } else if f.has_state && (f.lc == Lc::Updating || !ipu_true) {
            // Pending batches only exist while InPlaceUpdateReady is not True (Kruise sets it True once
            // every batch is done), so a ready pod outside `Updating` needs no look at the state. For exactly
            // these pods the summary made the completion check, once per pod version (`InFlight`).
            match f.in_flight {
                InFlight::Unchecked => {}
                InFlight::Done => {
                    completed = Some(true);
                    self.saw_resize(f, ResizeOutcome::Completed);
                }
                InFlight::Waiting | InFlight::Invalid => {
                    containers_done = false;
                    completed = Some(false);
                }
                InFlight::NoNodeAgent => {
                    containers_done = false;
                    completed = Some(false);
                    let msg = format!(
                        "pod {}: a container's env reads a changed label/annotation (env from metadata) and needs a node agent (kruise-daemon) to restart it, but the pod has no {}: nothing will restart it, the update waits; run kruise-daemon (or `insitu nodes`) on the node, or recreate the pod",
                        f.name(),
                        insitu_api::containermeta::RUNTIME_CONTAINERS_META_ANNOTATION
                    );
                    self.why(msg.clone());
                    self.plan.warnings.push(crate::model::plan::Warning {
                        reason: crate::model::plan::NO_NODE_AGENT.into(),
                        message: msg,
                    });
                }
                InFlight::ResizePending => {
                    containers_done = false;
                    completed = Some(false);
                    // Kruise keeps waiting for the status to report the resources; say why.
                    if let Some((reason, message)) = crate::inplaceupdate::vertical::resize_pending(&f.pod())
                    {
                        self.why(format!(
                            "pod {}: resize pending on its node ({reason}: {message}); the update completes once the kubelet applies it",
                            f.name()
                        ));
                        match reason.as_str() {
                            "Deferred" => self.saw_resize(f, ResizeOutcome::Deferred),
                            "Infeasible" => self.saw_resize(f, ResizeOutcome::Infeasible),
                            _ => {}
                        }
                    }
                }
                InFlight::NextBatch => {
                    containers_done = false;
                    completed = Some(false);
                    // Rare (multi-container batches), so the state is parsed again here.
                    let state = f.state().unwrap_or_default();
                    match inplaceupdate::parse_state(state)
                        .and_then(|st| inplaceupdate::next_batch(&f.pod(), st, now))
                    {
                        Ok(m) => {
                            self.why(format!(
                                "pod {}: previous batch done → next container batch",
                                f.name()
                            ));
                            self.push_update(f, m, UpdateReason::NextBatch);
                        }
                        Err(e) => self.why(format!("pod {}: next batch waits: {e}", f.name())),
                    }
                }
            }
        }
        if containers_done && !ipu_true && f.has_gate() {
            self.plan.actions.push(Action::SetInPlaceUpdateReady {
                pod: f.name().to_string(),
                uid: f.uid().to_string(),
                ready: true,
            });
        }

        // Lifecycle transitions (Kruise `sync/cloneset_update.go`, `refreshPodState`; `pkg/util/lifecycle`).
        let lc = self.cs.spec.lifecycle.as_ref();
        let ipu_hook = lc.and_then(|l| l.in_place_update.as_ref());
        let updated_or_normal = || {
            if lc.is_some() && !is_all_hooked(ipu_hook, f.labels(), f.meta()) {
                keys::lifecycle::UPDATED
            } else {
                keys::lifecycle::NORMAL
            }
        };
        let next_state = match f.lc {
            Lc::PreparingNormal => {
                // Kruise v1.9 (#1485): without a preNormal hook, wait until the pod is scheduled.
                let ok = match lc.and_then(|l| l.pre_normal.as_ref()) {
                    Some(h) => is_all_hooked(Some(h), f.labels(), f.meta()),
                    None => f.node_assigned,
                };
                ok.then_some(keys::lifecycle::NORMAL)
            }
            // Kruise EqualToRevisionHash(pod, updateRevision), which is what `updated` is.
            Lc::PreparingUpdate => f.updated.then(updated_or_normal),
            Lc::Updating => {
                // Kruise DefaultCheckInPlaceUpdateCompleted: no grace, no pending batch, containers done.
                let ok = f.grace().is_none() && completed.is_none_or(|done| done);
                ok.then(updated_or_normal)
            }
            Lc::Updated => (ipu_hook.is_none() || is_all_hooked(ipu_hook, f.labels(), f.meta()))
                .then_some(keys::lifecycle::NORMAL),
            _ => None,
        };
        // Lifecycle markPodNotReady: KruisePodReady follows the state the pod is in or moves to.
        // (`lifecycle::reconcile` does nothing for a pod without the KruisePodReady gate.)
        if (f.has_kruise_ready || self.mark_not_ready) && f.has_kruise_gate {
            let target = next_state.map_or(f.lc, Lc::parse);
            // A True condition without entries stays so outside the Preparing states: no need to decode
            // the pod to find that out (this runs for every gated pod of every plan).
            let settled = f.kruise_ready_clean && !lifecycle::clean_may_change(target);
            if !settled && let Some(a) = lifecycle::reconcile(self.cs, &f.pod(), f.name(), f.uid(), target) {
                self.why(format!(
                    "pod {}: KruisePodReady follows lifecycle {target:?}",
                    f.name()
                ));
                self.plan.actions.push(a);
            }
        }
        if let Some(st) = next_state {
            self.why(format!("pod {}: lifecycle {} → {st}", f.name(), f.lifecycle()));
            let patch = self.lifecycle_patch(f, st);
            self.plan.actions.push(patch);
        }

        // Kruise fixPodTemplateHashLabel.
        if f.has_revision && !f.has_template_hash {
            let mut labels = BTreeMap::new();
            labels.insert(
                keys::POD_TEMPLATE_HASH_LABEL.to_string(),
                Some(short_hash(f.revision()).to_string()),
            );
            self.plan.actions.push(Action::PatchPodMetadata {
                pod: f.name().to_string(),
                uid: f.uid().to_string(),
                labels,
                annotations: BTreeMap::new(),
                reason: UpdateReason::BackfillHash,
            });
        }
        self.plan.actions.len() > before
    }

    /// Reports a resize outcome for `insitu_resize_total` when this pod's in-place update resizes (the
    /// state's `updateResources`); parsed only here, when an update completes or a resize is held.
    fn saw_resize(&mut self, f: &PodFacts, outcome: ResizeOutcome) {
        let Some(st) = f.state().and_then(|s| inplaceupdate::parse_state(s).ok()) else {
            return;
        };
        if st.update_resources {
            self.plan.resizes.push(ResizeSeen {
                pod: f.name().to_string(),
                uid: f.uid().to_string(),
                update: format!("{}@{}", st.revision, st.update_timestamp.0),
                outcome,
            });
        }
    }
}
