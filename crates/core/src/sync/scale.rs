//! Kruise `pkg/controller/cloneset/sync/cloneset_scale.go`: PreparingDelete comeback, scale up with instance
//! ids and PVCs, specified delete, scale down.

use std::collections::{BTreeSet, HashSet};

use insitu_api::keys;
use k8s_openapi::api::apps::v1::ControllerRevision;

use crate::PackedPod;
use crate::model::plan::{Action, Budget};
use crate::model::pods::{self, Lc, PodFacts};
use crate::model::summary::PodSummary;
use crate::sync::sort;

use super::{MAX_CREATES_PER_ROUND, Planner};
use crate::lifecycle::is_hooked;

impl Planner<'_> {
    /// Kruise `deletePods`: a pod with the preDelete hook goes to PreparingDelete; others are deleted.
    pub(super) fn delete_pods(&mut self, victims: &[&PodFacts], why: &str) -> bool {
        let hook = self
            .cs
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_delete.as_ref());
        let mut modified = false;
        for f in victims {
            if is_hooked(hook, f.labels(), f.meta()) {
                if f.lc != Lc::PreparingDelete {
                    self.why(format!(
                        "pod {}: preDelete hook present → PreparingDelete ({why})",
                        f.name()
                    ));
                    self.mark_not_ready(f, Lc::PreparingDelete);
                    let patch = self.lifecycle_patch(f, keys::lifecycle::PREPARING_DELETE);
                    self.plan.actions.push(patch);
                    modified = true;
                }
                continue;
            }
            self.why(format!("delete pod {} ({why})", f.name()));
            self.plan.actions.push(Action::DeletePod {
                pod: f.name().to_string(),
                uid: f.uid().to_string(),
                reason: why.to_string(),
            });
            modified = true;
            // Kruise deletePods: the pod's PVCs (same instance-id) go with it.
            let id = pods::instance_id(f.labels());
            if id.is_empty() {
                continue;
            }
            for pvc in &self.pvcs {
                if pods::instance_id(&pvc.metadata.labels) != id {
                    continue;
                }
                let name = pvc.metadata.name.clone().unwrap_or_default();
                self.plan
                    .explanation
                    .push(format!("delete PVC {name} with pod {}", f.name()));
                self.plan.actions.push(Action::DeletePvc {
                    name,
                    uid: pvc.metadata.uid.clone().unwrap_or_default(),
                    pod: Some(f.name().to_string()),
                    reason: why.to_string(),
                });
            }
        }
        modified
    }

    /// `spec.replicas` beyond the instance-id space can never be reached: say so (the pods that fit are
    /// still created).
    pub(super) fn id_space_check(&mut self, replicas: i32, pods: usize) {
        if u64::try_from(replicas).unwrap_or(0) > pods::ID_SPACE {
            self.warn(
                keys::events::INSTANCE_IDS_EXHAUSTED,
                format!(
                    "spec.replicas {replicas} exceeds the {} instance ids (5 characters of 27): at most {} pods can exist, {pods} do; lower spec.replicas",
                    pods::ID_SPACE,
                    pods::ID_SPACE
                ),
            );
        }
    }

    /// Fewer fresh instance ids than pods to create: the id space is (nearly) full.
    pub(super) fn ids_exhausted(&mut self, missing: usize, taken: usize) {
        self.warn(
            keys::events::INSTANCE_IDS_EXHAUSTED,
            format!(
                "no free instance id for {missing} pod(s): {taken} of the {} ids are taken; lower spec.replicas or delete pods",
                pods::ID_SPACE
            ),
        );
    }

    /// Kruise `realControl.Scale` (`sync/cloneset_scale.go`). Returns true when it planned any write.
    pub(super) fn scale(
        &mut self,
        all: &[PodSummary],
        facts: &[PodFacts],
        current: &ControllerRevision,
        update: &ControllerRevision,
        current_name: &str,
        update_name: &str,
    ) -> bool {
        let cs = self.cs;
        let spec = &cs.spec;
        let replicas = spec.replicas();
        // One pass: pods specified for deletion, pods in PreparingDelete (usually none of either).
        let (mut specified, mut pre_delete, mut num_to_delete) = (Vec::new(), Vec::new(), 0usize);
        for f in facts {
            if f.specified_delete {
                specified.push(f);
            }
            if f.preparing_delete() {
                pre_delete.push(f);
            }
            num_to_delete += usize::from(f.specified_delete || f.preparing_delete());
        }
        if self.cancel_preparing_delete(facts, &pre_delete, replicas, num_to_delete) {
            return true;
        }

        let exclude_pd = self.gates.exclude_preparing_delete
            || cs
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(keys::SCALING_EXCLUDE_PREPARING_DELETE_LABEL))
                == Some(&"true".to_string());
        let b = self.budget(facts, self.gates.preparing_update_as_update, exclude_pd);
        self.plan.budget = b.clone();
        self.explain_budget(&b, "scale");
        if b.scale_up_num > b.scale_up_limit {
            self.why(format!(
                "{}: scaleUp is limited because of scaleStrategy.maxUnavailable, limit: {}",
                keys::events::SCALE_UP_LIMITED,
                b.scale_up_limit
            ));
        }

        if b.scale_up_num > 0 {
            return match self.scale_up_ids(&b, all, facts) {
                Ok((ids, n_current)) => {
                    self.create_pods(&ids, n_current, current, update, current_name, update_name);
                    true
                }
                Err(planned) => planned,
            };
        }

        if !pre_delete.is_empty() && self.delete_pods(&pre_delete, "PreparingDelete and no longer hooked") {
            return true;
        }

        if self.delete_specified(&b, specified) {
            return true;
        }
        if b.scale_down_num > 0 {
            return self.scale_down(&b, facts, num_to_delete);
        }
        false
    }

    /// Kruise managePreparingDelete: pods waiting in PreparingDelete come back when replicas need them,
    /// unless a preDelete/inPlaceUpdate hook marks pods not ready (no regret then). True when it planned a write.
    fn cancel_preparing_delete(
        &mut self,
        facts: &[PodFacts],
        pre_delete: &[&PodFacts],
        replicas: i32,
        num_to_delete: usize,
    ) -> bool {
        let lc = self.cs.spec.lifecycle.as_ref();
        let mark = lc.is_some_and(|l| {
            [&l.pre_delete, &l.in_place_update]
                .iter()
                .any(|h| h.as_ref().is_some_and(|h| h.mark_pod_not_ready))
        });
        if !mark {
            let mut diff = i64::from(replicas) - facts.len() as i64 + num_to_delete as i64;
            let mut modified = false;
            for f in pre_delete {
                if diff <= 0 {
                    break;
                }
                if f.specified_delete {
                    continue;
                }
                self.why(format!(
                    "pod {}: deletion cancelled, replicas need it → PreparingNormal",
                    f.name()
                ));
                let patch = self.lifecycle_patch(f, keys::lifecycle::PREPARING_NORMAL);
                self.plan.actions.push(patch);
                modified = true;
                diff -= 1;
            }
            if modified {
                return true;
            }
        }
        false
    }

    /// Kruise scale up, part one: how many pods this round and their instance ids (Kruise
    /// `getOrGenAvailableIDs`), with the count at the current revision. `Err(planned)` ends the scale step.
    fn scale_up_ids(
        &mut self,
        b: &Budget,
        all: &[PodSummary],
        facts: &[PodFacts],
    ) -> Result<(Vec<String>, usize), bool> {
        let cs = self.cs;
        let replicas = cs.spec.replicas();
        let wanted = usize::try_from(b.scale_up_limit).unwrap_or(0);
        if wanted == 0 {
            self.why(format!(
                "need {} more pod(s) but the scale-up limit is 0: wait",
                b.scale_up_num
            ));
            return Err(false);
        }
        self.id_space_check(replicas, all.len());
        // Bounded work per round whatever `replicas` says: Kruise creates in slow-start batches anyway,
        // and the next round (triggered by the created pods) plans the next batch.
        let n = wanted.min(MAX_CREATES_PER_ROUND);
        if n < wanted {
            self.why(format!(
                "need {wanted} more pod(s): create {n} this round (at most {MAX_CREATES_PER_ROUND} per round), the rest next rounds"
            ));
        }
        let n_current = usize::try_from(b.scale_up_num_old_revision).unwrap_or(0).min(n);
        let taken: HashSet<String> = all
            .iter()
            .filter_map(|p| p.labels().get(keys::INSTANCE_ID_LABEL).map(str::to_string))
            .chain(all.iter().filter_map(|p| {
                let name = p.meta().name.as_deref()?;
                let cs_name = cs.metadata.name.as_deref()?;
                name.strip_prefix(cs_name)?.strip_prefix('-').map(str::to_string)
            }))
            .collect();
        let seed = format!(
            "{}/{}/{}/{}",
            cs.metadata.uid.as_deref().unwrap_or_default(),
            cs.metadata.name.as_deref().unwrap_or_default(),
            self.s.now.as_nanosecond(),
            all.len()
        );
        // Kruise getOrGenAvailableIDs: ids of PVCs no active pod uses come back first.
        let active_ids: HashSet<&str> = facts.iter().map(|f| pods::instance_id(f.labels())).collect();
        let pvc_ids: BTreeSet<&str> = self
            .pvcs
            .iter()
            .map(|p| pods::instance_id(&p.metadata.labels))
            .filter(|id| !id.is_empty())
            .collect();
        // A reused id names the pod `<cs>-<id>` again. While an old pod of that name still exists
        // (terminating, Succeeded/Failed) the create can only fail with AlreadyExists, as Kruise's does
        // until the old pod is gone: such ids go last, and wait rather than fail (the old pod's removal
        // triggers the next round).
        let cs_name = cs.metadata.name.as_deref().unwrap_or_default();
        let busy: HashSet<&str> = if pvc_ids.iter().any(|id| !active_ids.contains(id)) {
            let names: HashSet<&str> = all.iter().map(PodSummary::name).collect();
            pvc_ids
                .iter()
                .copied()
                .filter(|id| names.contains(format!("{cs_name}-{id}").as_str()))
                .collect()
        } else {
            HashSet::new()
        };
        let mut reusable: Vec<&str> = pvc_ids.iter().copied().collect();
        reusable.sort_by_key(|id| busy.contains(id));
        let mut ids = pods::available_ids(&seed, n, &reusable, &active_ids, &taken);
        if ids.len() < n {
            self.ids_exhausted(n - ids.len(), taken.len());
        }
        let reused: Vec<&str> = ids
            .iter()
            .map(String::as_str)
            .filter(|id| pvc_ids.contains(id))
            .collect();
        if !reused.is_empty() {
            self.why(format!(
                "reuse instance id(s) {} of PVC(s) without an active pod",
                reused.join(", ")
            ));
        }
        let mut waiting = Vec::new();
        ids.retain(|id| {
            let wait = busy.contains(id.as_str());
            if wait {
                waiting.push(format!("{cs_name}-{id}"));
            }
            !wait
        });
        if !waiting.is_empty() {
            self.why(format!(
                "pod(s) {} still exist: their replacements with the same name and PVCs wait",
                waiting.join(", ")
            ));
        }
        if ids.is_empty() {
            return Err(true);
        }
        let n = ids.len();
        let n_current = n_current.min(n);
        Ok((ids, n_current))
    }

    /// Kruise scale up, part two (`createPods`): each pod after its missing PVCs, the first `n_current` at
    /// the current revision.
    fn create_pods(
        &mut self,
        ids: &[String],
        n_current: usize,
        current: &ControllerRevision,
        update: &ControllerRevision,
        current_name: &str,
        update_name: &str,
    ) {
        let cs = self.cs;
        let n = ids.len();
        let existing: HashSet<&str> = self
            .pvcs
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        let cur_tpl = self.template_of(current, update);
        let upd_tpl = &cs.spec.template;
        let mut pvcs_created = 0usize;
        for (i, id) in ids.iter().enumerate() {
            let (tpl, rev) = if i < n_current {
                (&cur_tpl, current_name)
            } else {
                (upd_tpl, update_name)
            };
            // Kruise createOnePod: the pod's missing PVCs are created before it.
            for vct in &cs.spec.volume_claim_templates {
                if vct.metadata.name.as_deref().is_none_or(str::is_empty) {
                    continue;
                }
                let pvc = pods::new_pvc(cs, vct, id);
                if existing.contains(pvc.metadata.name.as_deref().unwrap_or_default()) {
                    continue;
                }
                pvcs_created += 1;
                self.plan.actions.push(Action::CreatePvc { pvc: Box::new(pvc) });
            }
            let pod = pods::new_pod(cs, tpl, rev, id, self.s.now, self.gates.cloneset_short_hash);
            self.plan.actions.push(Action::CreatePod {
                pod: Box::new(PackedPod::pack(pod)),
                revision: rev.to_string(),
            });
        }
        self.why(format!(
            "create {n} pod(s): {n_current} at current revision {current_name}, {} at update revision {update_name}",
            n - n_current
        ));
        if pvcs_created > 0 {
            self.why(format!(
                "create {pvcs_created} PVC(s) from volumeClaimTemplates, each before its pod"
            ));
        }
    }

    /// Kruise: pods in `scaleStrategy.podsToDelete` (or labelled specified-delete) go first, ready ones within
    /// the deleteReadyLimit. True when it planned a write.
    fn delete_specified(&mut self, b: &Budget, specified: Vec<&PodFacts>) -> bool {
        let specified: Vec<&PodFacts> = specified.into_iter().filter(|f| !f.preparing_delete()).collect();
        if specified.is_empty() {
            return false;
        }
        let mut ready = 0i32;
        let mut victims = Vec::new();
        for f in &specified {
            if !f.normal_ready {
                victims.push(*f);
            } else if ready < b.delete_ready_limit {
                ready += 1;
                victims.push(*f);
            }
        }
        if victims.len() < specified.len() {
            self.why(format!(
                "{} ready pod(s) specified for deletion wait: deleteReadyLimit {}",
                specified.len() - victims.len(),
                b.delete_ready_limit
            ));
        }
        if self.delete_pods(&victims, "specified delete") {
            return true;
        }
        false
    }

    /// Kruise scale down: victims by the scale-down ranking, old revision first, ready ones within the
    /// deleteReadyLimit.
    fn scale_down(&mut self, b: &Budget, facts: &[PodFacts], num_to_delete: usize) -> bool {
        let cs = self.cs;
        if num_to_delete > 0 {
            self.why("scale down skipped while pods are specified for deletion or in PreparingDelete");
            return false;
        }
        let (mut upd, mut old): (Vec<&PodFacts>, Vec<&PodFacts>) = facts.iter().partition(|f| f.updated);
        let total = usize::try_from(b.scale_down_num).unwrap_or(0);
        let old_n = usize::try_from(b.scale_down_num_old_revision).unwrap_or(0);
        // Kruise: the spread ranker when the template has topologySpreadConstraints.
        let keys: Vec<&str> = cs
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .map(|c| c.iter().map(|c| c.topology_key.as_str()).collect())
            .unwrap_or_default();
        let topology = (!keys.is_empty()).then_some(sort::Topology {
            keys: &keys,
            nodes: &self.s.nodes,
        });
        fn choose<'p, 'f>(
            v: &mut [&'p PodFacts<'f>],
            n: usize,
            topology: Option<sort::Topology>,
        ) -> Vec<&'p PodFacts<'f>> {
            if n < v.len() {
                // Only the first n victims are needed in order.
                sort::scale_down_prefix(v, n, topology);
            }
            v.iter().take(n).copied().collect()
        }
        let mut chosen: Vec<&PodFacts> = if old_n >= total {
            choose(&mut old, total, topology)
        } else if old_n > 0 {
            let mut c = choose(&mut old, old_n, topology);
            c.extend(choose(&mut upd, total - old_n, topology));
            c
        } else {
            choose(&mut upd, total, topology)
        };
        let mut ready = 0i32;
        chosen.retain(|f| {
            if !f.normal_ready {
                true
            } else if ready < b.delete_ready_limit {
                ready += 1;
                true
            } else {
                false
            }
        });
        if chosen.len() < total {
            self.why(format!(
                "scale down {total}: {} ready pod(s) kept by deleteReadyLimit {}",
                total - chosen.len(),
                b.delete_ready_limit
            ));
        }
        self.delete_pods(&chosen, "scale down")
    }
}
