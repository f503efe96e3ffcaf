//! Scaling an Advanced StatefulSet: each replica in ordinal order (Kruise `processReplica`), then the
//! condemned pods, highest ordinal first (`processCondemned`), under `podManagementPolicy` and
//! `scaleStrategy.maxUnavailable` (`stateful_set_control.go`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::podstate::{self as ps, name};
use super::{Flow, Slot, Sts, claims, min_ready_seconds, monotonic, new_pod, rolling};
use crate::model::plan::Action;
use crate::model::summary::PackedPod;
use crate::revision::{self, ActiveRevisions};

/// Kruise `GetValueFromIntOrPercent` (round down when `up` is false, up otherwise); a bad value is 0.
pub(super) fn scaled(v: &IntOrString, total: i32, up: bool) -> i32 {
    match v {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let Some(pct) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return 0;
            };
            let x = pct * i64::from(total);
            let r = if up {
                (x + 99).div_euclid(100)
            } else {
                x.div_euclid(100)
            };
            i32::try_from(r).unwrap_or(0)
        }
    }
}

/// Kruise `decreaseAndCheckMaxUnavailable`.
fn spend(budget: &mut Option<i32>) -> bool {
    match budget {
        None => false,
        Some(v) => {
            *v -= 1;
            *v <= 0
        }
    }
}

impl<'a> Sts<'a> {
    /// Kruise `getScaleMaxUnavailable`: `scaleStrategy.maxUnavailable` of replicas, at least 1.
    fn scale_max_unavailable(&self) -> Option<i32> {
        let v = self.set.spec.scale_strategy.as_ref()?.max_unavailable.as_ref()?;
        Some(scaled(v, self.set.spec.replicas.unwrap_or(1), false).max(1))
    }

    /// Kruise `isCurrentRevisionNeeded`: whether the pod created for slot `i` starts at the current
    /// revision (below the partition) rather than the update revision.
    fn current_revision_needed(
        &self,
        slots: &[Slot],
        i: usize,
        ord: i32,
        created: &[Option<bool>],
        update: &str,
    ) -> bool {
        if super::strategy_type(self.set) != "RollingUpdate" {
            return false;
        }
        let Some(ru) = rolling(self.set) else {
            let start = self.set.spec.ordinals.as_ref().map_or(0, |o| o.start);
            let current = self.set.status.as_ref().map_or(0, |s| s.current_replicas);
            return ord < start + current;
        };
        let partition = ru.partition.unwrap_or(0);
        if ru.unordered_update.is_none() {
            // Every slot below this one is (or will be) filled, except the reserved ones.
            let below = slots[..i].iter().filter(|s| !matches!(s, Slot::Reserved)).count();
            return i32::try_from(below + 1).unwrap_or(i32::MAX) <= partition;
        }
        let not_updated = slots
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .filter(|&(j, s)| match s {
                Slot::Pod(p) => ps::revision(p) != update,
                Slot::Missing(_) => created[j] == Some(true),
                Slot::Reserved => false,
            })
            .count();
        i32::try_from(not_updated).unwrap_or(i32::MAX) < partition
    }

    /// Kruise `processReplica` over every slot (`runForAllWithBreak`).
    pub(super) fn replicas(&mut self, slots: &[Slot<'a>], revs: &ActiveRevisions) -> Flow {
        let mono = monotonic(self.set);
        let mut budget = self.scale_max_unavailable();
        // Slot → whether the pod created for it this round is at the current revision.
        let mut created: Vec<Option<bool>> = vec![None; slots.len()];
        let update = revs.update.metadata.name.clone().unwrap_or_default();
        for (i, slot) in slots.iter().enumerate() {
            let flow = match slot {
                Slot::Reserved => Flow::Next,
                Slot::Missing(ord) => {
                    let at_current = self.current_revision_needed(slots, i, *ord, &created, &update);
                    created[i] = Some(at_current);
                    self.create(*ord, at_current, revs, mono, &mut budget)
                }
                Slot::Pod(pod) => self.replica(pod, mono, &mut budget),
            };
            match flow {
                Flow::Next => {}
                Flow::Break => {
                    self.why("scaleStrategy.maxUnavailable reached: no more pods this round");
                    break;
                }
                Flow::Exit => return Flow::Exit,
            }
        }
        Flow::Next
    }

    /// The missing pod of ordinal `ord`: its PVCs, then the pod (Kruise `CreateStatefulPod`).
    fn create(
        &mut self,
        ord: i32,
        at_current: bool,
        revs: &ActiveRevisions,
        mono: bool,
        budget: &mut Option<i32>,
    ) -> Flow {
        let rev = if at_current { &revs.current } else { &revs.update };
        let rev_name = rev.metadata.name.clone().unwrap_or_default();
        let template = if at_current {
            revision::template_of(rev).unwrap_or_else(|| self.set.spec.template.clone())
        } else {
            self.set.spec.template.clone()
        };
        if self.claims_to_create(ord, None) == Flow::Exit {
            return Flow::Exit;
        }
        let pod = new_pod(self.set, &template, &rev_name, ord, &self.now_rfc3339);
        self.why(format!(
            "create pod {} at revision {rev_name}{}",
            name(&pod),
            if at_current { " (below the partition)" } else { "" }
        ));
        self.plan.actions.push(Action::CreatePod {
            pod: Box::new(PackedPod::pack(pod)),
            revision: rev_name,
        });
        if mono {
            self.why("podManagementPolicy OrderedReady: one pod at a time");
            return Flow::Exit;
        }
        if spend(budget) { Flow::Break } else { Flow::Next }
    }

    /// Kruise `createPersistentVolumeClaims`: a CreatePvc for each claim of `ord` not there yet. A claim
    /// being deleted holds the pod back (k8s: "pvc is being deleted").
    fn claims_to_create(&mut self, ord: i32, pod: Option<&Pod>) -> Flow {
        for claim in claims(self.set, ord) {
            let cname = claim.metadata.name.clone().unwrap_or_default();
            match self
                .s
                .pvcs
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(cname.as_str()))
            {
                Some(c) if c.metadata.deletion_timestamp.is_some() => {
                    self.why(format!(
                        "pvc {cname} is being deleted: pod of ordinal {ord} waits"
                    ));
                    return Flow::Exit;
                }
                Some(_) => {}
                None => {
                    if let Some(p) = pod {
                        self.why(format!(
                            "pod {} is Pending: create its missing pvc {cname}",
                            name(p)
                        ));
                    } else {
                        self.why(format!("create pvc {cname}"));
                    }
                    self.plan.actions.push(Action::CreatePvc { pvc: Box::new(claim) });
                }
            }
        }
        Flow::Next
    }

    /// Kruise `processReplica` for a pod that exists.
    fn replica(&mut self, pod: &'a Arc<Pod>, mono: bool, budget: &mut Option<i32>) -> Flow {
        let phase = ps::phase(pod);
        if phase == "Failed" || phase == "Succeeded" {
            if spend(budget) {
                return Flow::Break;
            }
            if !ps::terminating(pod) {
                self.delete_pod(pod, &format!("pod phase {phase}: recreate it"));
            }
            return if mono { Flow::Exit } else { Flow::Next };
        }
        if phase == "Pending" {
            let ord = super::ordinal(name(pod)).unwrap_or(0);
            if self.claims_to_create(ord, Some(pod)) == Flow::Exit {
                return Flow::Exit;
            }
        }
        if ps::terminating(pod) {
            if mono {
                self.why(format!("pod {} is terminating: wait (OrderedReady)", name(pod)));
                return Flow::Exit;
            }
            if spend(budget) {
                return Flow::Break;
            }
        }
        self.refresh(pod);
        if mono || budget.is_some() {
            let (avail, wait) = ps::available(pod, min_ready_seconds(self.set), self.s.now);
            if !avail {
                if let Some(w) = wait {
                    self.requeue_after(w);
                }
                if mono {
                    self.why(format!(
                        "pod {} is not Running and available yet: wait (OrderedReady)",
                        name(pod)
                    ));
                    return Flow::Exit;
                }
                if spend(budget) {
                    return Flow::Break;
                }
            }
        }
        Flow::Next
    }

    /// Kruise `processCondemned` for each pod beyond the replicas, highest ordinal first (`runForAll`:
    /// one at a time when monotonic, all at once otherwise).
    pub(super) fn condemned(&mut self, slots: &[Slot<'a>], condemned: &[&'a Arc<Pod>]) -> Flow {
        let mono = monotonic(self.set);
        let first_unhealthy = first_unhealthy(slots, condemned);
        let min_ready = min_ready_seconds(self.set);
        for pod in condemned {
            let first = first_unhealthy.is_some_and(|f| Arc::ptr_eq(f, pod));
            if ps::terminating(pod) {
                if mono {
                    self.why(format!(
                        "pod {} is terminating: wait before the next scale-down",
                        name(pod)
                    ));
                    return Flow::Exit;
                }
                continue;
            }
            if mono && !first && !ps::running_and_ready(pod) {
                self.why(format!(
                    "pod {} must be Running and Ready before scale-down",
                    name(pod)
                ));
                return Flow::Exit;
            }
            let (avail, wait) = ps::available(pod, min_ready, self.s.now);
            if mono && !first && !avail {
                if let Some(w) = wait {
                    self.requeue_after(w);
                }
                self.why(format!("pod {} must be available before scale-down", name(pod)));
                return Flow::Exit;
            }
            let (modified, _) = self.delete_pod(pod, "scale down");
            if mono && modified {
                return Flow::Exit;
            }
        }
        Flow::Next
    }
}

/// The unhealthy pod of lowest ordinal among replicas and condemned (Kruise `firstUnhealthyPod`).
fn first_unhealthy<'a>(slots: &[Slot<'a>], condemned: &[&'a Arc<Pod>]) -> Option<&'a Arc<Pod>> {
    slots
        .iter()
        .filter_map(|s| match s {
            Slot::Pod(p) => Some(*p),
            _ => None,
        })
        .chain(condemned.iter().copied())
        .filter(|p| !ps::healthy(p))
        .min_by_key(|p| super::ordinal(name(p)).unwrap_or(i32::MAX))
}
