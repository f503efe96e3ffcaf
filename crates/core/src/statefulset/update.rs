//! The rolling update of an Advanced StatefulSet (Kruise `rollingUpdateStatefulsetPods`,
//! `handleSpecifiedDeletedPods`, `inPlaceUpdatePod`, `stateful_update_utils.go` `sortPodsToUpdate`): from the
//! highest ordinal down to `partition`, at most `maxUnavailable` unavailable, in place through the shared
//! engine (`inplaceupdate`) when `podUpdatePolicy` allows it, otherwise by deleting the pod.

use std::collections::BTreeSet;
use std::sync::Arc;

use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;

use super::podstate::{self as ps, name};
use super::scale::scaled;
use super::{Slot, Sts, min_ready_seconds, rolling};
use crate::inplaceupdate::{self, StartTemplate};
use crate::model::plan::{Action, PodRefusal, UpdateReason};
use crate::recreate::Refusal;
use crate::revision::{self, ActiveRevisions};

/// What became of one pod the update reached.
enum InPlace {
    /// Updated (or moved towards it through a lifecycle hook): in place.
    Yes,
    /// Not in place: recreate.
    No,
    /// InPlaceOnly and the change cannot go in place: the round ends with this error.
    Refused(String),
}

impl<'a> Sts<'a> {
    /// Kruise `rollingUpdateStatefulsetPods`.
    pub(super) fn rolling_update(
        &mut self,
        slots: &[Slot<'a>],
        condemned: &[&'a Arc<Pod>],
        revs: &ActiveRevisions,
    ) {
        // Kruise refreshes every pod before updating; a lifecycle transition ends the step for this round.
        let mut moved = false;
        for slot in slots {
            if let Slot::Pod(p) = slot {
                moved |= self.refresh(p);
            }
        }
        for p in condemned {
            moved |= self.refresh(p);
        }
        if moved {
            self.why("pods moved lifecycle state: the update waits for the next round");
            return;
        }
        let ru = rolling(self.set).cloned().unwrap_or_default();
        if ru.paused {
            self.why("updateStrategy.rollingUpdate.paused: no pod is updated");
            return;
        }
        let replicas = self.set.spec.replicas.unwrap_or(1);
        let max_unavailable = ru
            .max_unavailable
            .as_ref()
            .map_or(1, |v| scaled(v, replicas, false))
            .max(1);
        let min_ready = min_ready_seconds(self.set);
        let mut unavailable: BTreeSet<String> = BTreeSet::new();
        let set_name = self.set.metadata.name.as_deref().unwrap_or_default();
        for slot in slots {
            let p = match slot {
                Slot::Pod(p) => p,
                // Kruise fills a missing ordinal with the pod it creates (this round or a later one): not
                // healthy, so unavailable.
                Slot::Missing(ord) => {
                    unavailable.insert(super::pod_name(set_name, *ord));
                    continue;
                }
                Slot::Reserved => continue,
            };
            let (avail, wait) = ps::available(p, min_ready, self.s.now);
            if !ps::healthy(p) || ps::update_completed(p).is_err() || !avail {
                unavailable.insert(name(p).to_string());
                if let Some(w) = wait {
                    self.requeue_after(w);
                }
            }
        }
        let update = self.plan.update_revision.clone();
        let current = self.plan.current_revision.clone();
        let specified = self.specified_deletes(slots, max_unavailable, &mut unavailable, &current, &update);
        let order = sort_to_update(
            ru.partition.unwrap_or(0),
            ru.unordered_update.is_some(),
            replicas,
            slots,
            &update,
        );
        self.why(format!(
            "rolling update to {update}: partition {}, maxUnavailable {max_unavailable}, {} unavailable",
            ru.partition.unwrap_or(0),
            unavailable.len()
        ));
        for i in order {
            let Slot::Pod(pod) = &slots[i] else { continue };
            if ps::revision(pod) == update {
                continue;
            }
            if unavailable.len() >= usize::try_from(max_unavailable).unwrap_or(1)
                && !unavailable.contains(name(pod))
            {
                self.why(format!(
                    "pod {}: waits, {} pod(s) unavailable ({:?}) and maxUnavailable is {max_unavailable}",
                    name(pod),
                    unavailable.len(),
                    unavailable
                ));
                return;
            }
            if specified.contains(name(pod)) || ps::terminating(pod) {
                continue;
            }
            let decrease = match self.in_place(pod, revs) {
                InPlace::Yes => true,
                InPlace::Refused(e) => {
                    self.why(e.clone());
                    self.plan.error = Some(e);
                    return;
                }
                InPlace::No => self.delete_pod(pod, &format!("update to revision {update}")).1,
            };
            unavailable.insert(name(pod).to_string());
            if decrease && ps::revision(pod) == current {
                self.current_delta -= 1;
            }
        }
    }

    /// Kruise `handleSpecifiedDeletedPods`: pods labelled `apps.kruise.io/specified-delete` are deleted within
    /// maxUnavailable, whatever the partition.
    fn specified_deletes(
        &mut self,
        slots: &[Slot<'a>],
        max_unavailable: i32,
        unavailable: &mut BTreeSet<String>,
        current: &str,
        update: &str,
    ) -> BTreeSet<&'a str> {
        let mut out = BTreeSet::new();
        for slot in slots.iter().rev() {
            let Slot::Pod(pod) = slot else { continue };
            if ps::label(pod, keys::SPECIFIED_DELETE_LABEL).is_none() {
                continue;
            }
            if unavailable.len() >= usize::try_from(max_unavailable).unwrap_or(1)
                && !unavailable.contains(name(pod))
            {
                continue;
            }
            out.insert(name(pod));
            let (_, deleting) = self.delete_pod(pod, "specified delete");
            if deleting {
                if ps::revision(pod) == current {
                    self.current_delta -= 1;
                } else if ps::revision(pod) == update {
                    self.updated_delta -= 1;
                }
            }
            unavailable.insert(name(pod).to_string());
        }
        out
    }

    /// Kruise `inPlaceUpdatePod`: `podUpdatePolicy` InPlaceIfPossible or InPlaceOnly, the pod's revision
    /// known, and the change one the engine can apply in place (`inplaceupdate::calculate`).
    fn in_place(&mut self, pod: &Pod, revs: &ActiveRevisions) -> InPlace {
        let Some(ru) = rolling(self.set) else {
            return InPlace::No;
        };
        let policy = ru.pod_update_policy.as_deref().unwrap_or("ReCreate");
        if policy != "InPlaceIfPossible" && policy != "InPlaceOnly" {
            return InPlace::No;
        }
        let only = policy == "InPlaceOnly";
        let old = revs
            .all
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(ps::revision(pod)));
        let spec = match (
            old.and_then(|o| revision::template_value(o)),
            revision::template_value(&revs.update),
        ) {
            (Some(o), Some(t)) => {
                inplaceupdate::calculate(o, t, self.s.gates.in_place_workload_vertical_scaling).map_err(|m| {
                    Refusal::from_templates(m, o, t, self.s.gates.in_place_workload_vertical_scaling)
                })
            }
            _ => Err(Refusal::other(format!(
                "old revision {:?} of the pod not found",
                ps::revision(pod)
            ))),
        };
        let spec = match spec {
            Ok(spec) => spec,
            Err(refusal) => {
                self.why(format!(
                    "pod {}: cannot update in place ({})",
                    name(pod),
                    refusal.describe()
                ));
                self.plan.refusals.push(PodRefusal {
                    pod: name(pod).to_string(),
                    in_place_only: only,
                    refusal,
                });
                return if only {
                    InPlace::Refused(format!(
                        "find strategy is InPlaceOnly but Pod {} can not update in-place",
                        name(pod)
                    ))
                } else {
                    InPlace::No
                };
            }
        };
        if let Some(done) = self.in_place_hook(pod) {
            return done;
        }
        let grace = ru
            .in_place_update_strategy
            .as_ref()
            .and_then(|s| s.grace_period_seconds)
            .unwrap_or(0);
        let update = self.plan.update_revision.clone();
        let tpl = StartTemplate::new(spec, &update, &update, grace, self.s.now);
        if ps::has_inplace_gate(pod) && tpl.spec.needs_unready(pod) {
            self.plan.actions.push(Action::SetInPlaceUpdateReady {
                pod: name(pod).to_string(),
                uid: ps::uid(pod).to_string(),
                ready: false,
            });
        }
        self.why(format!(
            "pod {}: in-place update to {update} (images {:?}{})",
            name(pod),
            tpl.spec.images,
            if grace > 0 {
                format!(", grace {grace}s")
            } else {
                String::new()
            }
        ));
        if grace > 0 {
            self.requeue_after(std::time::Duration::from_secs(u64::try_from(grace).unwrap_or(0)));
        }
        let m = tpl.mutation(pod);
        self.push_update(pod, m, UpdateReason::StartInPlaceUpdate);
        InPlace::Yes
    }

    /// The lifecycle part of Kruise `inPlaceUpdatePod`: `Some` when the pod goes to (or waits in)
    /// `PreparingUpdate` instead of updating now, or may not be updated in its state.
    fn in_place_hook(&mut self, pod: &Pod) -> Option<InPlace> {
        let hook = self
            .set
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.in_place_update.as_ref());
        let labels = &pod.metadata.labels;
        let hooked = crate::lifecycle::is_hooked(hook, labels.into(), &pod.metadata);
        match ps::lifecycle(pod) {
            "" | keys::lifecycle::PREPARING_NORMAL | keys::lifecycle::NORMAL if hooked => {
                self.why(format!(
                    "pod {}: inPlaceUpdate hook present → PreparingUpdate",
                    name(pod)
                ));
                let a = self.lifecycle_patch(pod, keys::lifecycle::PREPARING_UPDATE);
                self.plan.actions.push(a);
                Some(InPlace::Yes)
            }
            "" | keys::lifecycle::PREPARING_NORMAL | keys::lifecycle::NORMAL | keys::lifecycle::UPDATING => {
                None
            }
            keys::lifecycle::UPDATED => {
                let mut a = self.lifecycle_patch(pod, keys::lifecycle::PREPARING_UPDATE);
                if let (Action::PatchPodMetadata { labels, .. }, Some(h)) = (&mut a, hook) {
                    for (k, v) in &h.labels_handler {
                        labels.insert(k.clone(), Some(v.clone()));
                    }
                }
                self.plan.actions.push(a);
                Some(InPlace::Yes)
            }
            keys::lifecycle::PREPARING_UPDATE if hooked => Some(InPlace::Yes),
            keys::lifecycle::PREPARING_UPDATE => None,
            other => Some(InPlace::Refused(format!(
                "not allowed to in-place update pod {} in state {other}",
                name(pod)
            ))),
        }
    }
}

/// Kruise `sortPodsToUpdate`: slot indexes to look at, highest first, down to `partition` (ordered); or,
/// with `unorderedUpdate`, pods already at the update revision (or terminating) first, then the rest, at
/// most `replicas - partition` of them. The priority sort of `unorderedUpdate.priorityStrategy` is not
/// applied yet (docs/advanced-statefulset.md).
fn sort_to_update(
    partition: i32,
    unordered: bool,
    replicas: i32,
    slots: &[Slot],
    update: &str,
) -> Vec<usize> {
    let max_update = usize::try_from(replicas - partition).unwrap_or(0);
    if max_update == 0 {
        return Vec::new();
    }
    let min = usize::try_from(partition).unwrap_or(0);
    let filled = |i: &usize| matches!(slots[*i], Slot::Pod(_));
    if !unordered {
        return (min..slots.len()).rev().filter(filled).take(max_update).collect();
    }
    let (mut done, mut waiting) = (Vec::new(), Vec::new());
    for i in (0..slots.len()).rev().filter(filled) {
        let Slot::Pod(p) = &slots[i] else { continue };
        if ps::terminating(p) || ps::revision(p) == update {
            done.push(i);
        } else {
            waiting.push(i);
        }
    }
    done.extend(waiting);
    done.truncate(max_update);
    done
}
