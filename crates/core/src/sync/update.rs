//! Kruise `pkg/controller/cloneset/sync/cloneset_update.go`: which pods update this round, in place or by
//! recreate, within maxUnavailable.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use insitu_api::{CloneSetUpdateStrategyType, keys};
use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;

use crate::inplaceupdate::{self, StartTemplate};
use crate::model::plan::{Action, PodMutation, PodRefusal, UpdateReason};
use crate::model::pods::{Lc, PodFacts};
use crate::model::summary::RevisionKey;
use crate::recreate::Refusal;
use crate::revision::{self, short_hash};
use crate::sync::budget::Unavailable;
use crate::sync::sort;

use super::Planner;
use crate::lifecycle::is_hooked;

impl Planner<'_> {
    /// Kruise `realControl.Update` (`sync/cloneset_update.go`).
    pub(super) fn update(
        &mut self,
        facts: &[PodFacts],
        stype: CloneSetUpdateStrategyType,
        current: &Arc<ControllerRevision>,
        update: &Arc<ControllerRevision>,
        rev_by_hash: &HashMap<&str, &Arc<ControllerRevision>>,
    ) {
        let update_name = update.metadata.name.clone().unwrap_or_default();
        let current_name = current.metadata.name.clone().unwrap_or_default();
        let mut refreshed = 0usize;
        for f in facts {
            if self.refresh(f) {
                refreshed += 1;
            }
        }
        if refreshed > 0 {
            self.why(format!(
                "refreshed {refreshed} pod(s): update waits for the next round"
            ));
            return;
        }
        if stype == CloneSetUpdateStrategyType::OnDelete {
            // Kruise: after the refresh (58a5d52fb), OnDelete updates nothing; deleted pods come back at the
            // update revision through scale.
            self.why("updateStrategy.type OnDelete: pods take the update revision only when deleted");
            return;
        }
        let spec = &self.cs.spec;
        let strategy = spec.update_strategy.clone().unwrap_or_default();
        if strategy.paused {
            self.why("updateStrategy.paused: no pod is updated");
            return;
        }
        let b = self.budget(facts, false, self.gates.exclude_preparing_delete);
        self.plan.budget = b.clone();
        self.explain_budget(&b, "update");
        if b.update_num == 0 {
            return;
        }
        let forward = b.update_num > 0;
        let (target, target_name) = if forward {
            (update, &update_name)
        } else {
            (current, &current_name)
        };
        let mut cand: Vec<usize> = Vec::new();
        for (i, f) in facts.iter().enumerate() {
            // Forward: pods not at the update revision; rollback: pods at it.
            if f.updated == forward {
                continue;
            }
            let can = match f.lc {
                Lc::PreparingDelete => false,
                Lc::Updated => true,
                _ => !f.has_grace,
            };
            if can {
                cand.push(i);
            }
        }
        let target_key = RevisionKey::new(target_name);
        let at_target = |f: &PodFacts| {
            if forward {
                f.updated
            } else {
                f.at_revision(&target_key)
            }
        };
        // Kruise limitUpdateIndexes looks at no more than `bound` candidates, so only those are ordered:
        // O(candidates + bound·log bound) instead of sorting every candidate.
        let unavailable = Unavailable::count(facts.iter().map(|f| (f.available, at_target(f))));
        let bound = unavailable.scan_bound(&b, cand.len());
        sort::update_candidates_prefix(
            facts,
            &mut cand,
            strategy.priority_strategy.as_ref(),
            &strategy.scatter_strategy,
            bound,
        );
        let avail: Vec<bool> = cand[..bound].iter().map(|&i| facts[i].available).collect();
        let n = unavailable.admit(&b, &avail);
        self.why(format!(
            "{} candidate(s) for revision {target_name}; {n} may update now (updateMaxUnavailable {})",
            cand.len(),
            b.update_max_unavailable
        ));
        let grace = strategy
            .in_place_update_strategy
            .as_ref()
            .and_then(|s| s.grace_period_seconds)
            .unwrap_or(0);
        let label = if self.gates.cloneset_short_hash {
            short_hash(target_name).to_string()
        } else {
            target_name.to_string()
        };
        let mut ctx = UpdateCtx {
            stype,
            target_name,
            target_vct: self
                .gates
                .recreate_pod_when_change_vct
                .then(|| revision::vct_hash_of(target))
                .flatten(),
            target_tpl: revision::template_value(target),
            rev_by_hash,
            grace,
            label,
            cache: Vec::new(),
            in_place: Vec::new(),
            recreate: Vec::new(),
        };
        let mut errors = Vec::new();
        for &i in cand.iter().take(n) {
            if let Err(e) = self.update_pod(&facts[i], &mut ctx) {
                self.why(e.clone());
                errors.push(e);
            }
        }
        if !ctx.in_place.is_empty() {
            let images = ctx.cache.iter().find_map(|(_, c)| c.as_ref().ok()).map(|s| {
                let r = &s.tpl.spec.resources;
                if r.is_empty() {
                    format!("{:?}", s.tpl.spec.images)
                } else {
                    format!(
                        "{:?}, resize {}",
                        s.tpl.spec.images,
                        crate::inplaceupdate::vertical::describe(r)
                    )
                }
            });
            self.why(format!(
                "in-place update to {target_name} (images {}{}): {}",
                images.unwrap_or_default(),
                if grace > 0 {
                    format!(", grace {grace}s")
                } else {
                    String::new()
                },
                ctx.in_place.join(", ")
            ));
            if grace > 0 {
                self.requeue_after(Duration::from_secs(u64::try_from(grace).unwrap_or(0)));
            }
        }
        if !ctx.recreate.is_empty() {
            self.why(format!(
                "recreate for {target_name} (label specified-delete): {}",
                ctx.recreate.join(", ")
            ));
        }
        if !errors.is_empty() {
            self.failed_update = Some(errors.join("; "));
        }
    }

    /// Kruise `updatePod` for one selected pod.
    fn update_pod<'c>(&mut self, f: &PodFacts<'c>, ctx: &mut UpdateCtx<'c>) -> Result<(), String> {
        let now = self.s.now;
        if ctx.stype != CloneSetUpdateStrategyType::ReCreate {
            let old = if f.revision().is_empty() {
                None
            } else {
                ctx.rev_by_hash.get(short_hash(f.revision()))
            };
            let key = old.map_or("", |o| short_hash(o.metadata.name.as_deref().unwrap_or_default()));
            let cached = match ctx.cache.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    let vertical = self.gates.in_place_workload_vertical_scaling;
                    let t = match (old, ctx.target_tpl) {
                        (Some(old), Some(t)) => match revision::template_value(old) {
                            Some(o) => vct_check(old, ctx.target_vct, ctx.stype)
                                .map_err(Refusal::volume_claim_templates)
                                .and_then(|()| {
                                    inplaceupdate::calculate(o, t, vertical)
                                        .map_err(|m| Refusal::from_templates(m, o, t, vertical))
                                }),
                            None => Err(Refusal::other("old revision has no template".into())),
                        },
                        (None, _) => Err(Refusal::other(format!(
                            "old revision {:?} of the pod not found",
                            f.revision()
                        ))),
                        (_, None) => Err(Refusal::other("target revision has no template".into())),
                    };
                    let t = t.map(|spec| {
                        let tpl = StartTemplate::new(spec, ctx.target_name, &ctx.label, ctx.grace, now);
                        let shared = tpl.same_for_every_pod().then(|| tpl.mutation(&f.pod()));
                        Start { tpl, shared }
                    });
                    ctx.cache.push((key, t));
                    ctx.cache.len() - 1
                }
            };
            match &ctx.cache[cached].1 {
                Ok(start) => {
                    let lc = self.cs.spec.lifecycle.as_ref();
                    let hook = lc.and_then(|l| l.in_place_update.as_ref());
                    match f.lc {
                        Lc::None | Lc::PreparingNormal | Lc::Normal => {
                            if is_hooked(hook, f.labels(), f.meta()) {
                                self.why(format!(
                                    "pod {}: inPlaceUpdate hook present → PreparingUpdate",
                                    f.name()
                                ));
                                self.mark_not_ready(f, Lc::PreparingUpdate);
                                let patch = self.lifecycle_patch(f, keys::lifecycle::PREPARING_UPDATE);
                                self.plan.actions.push(patch);
                                return Ok(());
                            }
                        }
                        Lc::Updated => {
                            // Kruise UpdatePodLifecycleWithHandler: re-apply the hook labels.
                            let mut a = self.lifecycle_patch(f, keys::lifecycle::PREPARING_UPDATE);
                            if let (Action::PatchPodMetadata { labels, .. }, Some(h)) = (&mut a, hook) {
                                for (k, v) in &h.labels_handler {
                                    labels.insert(k.clone(), Some(v.clone()));
                                }
                            }
                            self.why(format!(
                                "pod {}: Updated → PreparingUpdate (hook re-applied)",
                                f.name()
                            ));
                            self.mark_not_ready(f, Lc::PreparingUpdate);
                            self.plan.actions.push(a);
                            return Ok(());
                        }
                        Lc::PreparingUpdate => {
                            if is_hooked(hook, f.labels(), f.meta()) {
                                self.why(format!(
                                    "pod {}: PreparingUpdate, waiting for the inPlaceUpdate hook",
                                    f.name()
                                ));
                                return Ok(());
                            }
                        }
                        Lc::Updating => {}
                        Lc::PreparingDelete | Lc::Other => {
                            let (n, st) = (f.name(), f.lifecycle());
                            return Err(format!("not allowed to in-place update pod {n} in state {st}"));
                        }
                    }
                    let m = match &start.shared {
                        Some(m) => m.clone(),
                        None => start.tpl.mutation(&f.pod()),
                    };
                    // Kruise CheckPodNeedsBeUnready: a resize without RestartContainer keeps serving.
                    if f.has_gate() && start.tpl.spec.needs_unready(&f.pod()) {
                        self.plan.actions.push(Action::SetInPlaceUpdateReady {
                            pod: f.name().to_string(),
                            uid: f.uid().to_string(),
                            ready: false,
                        });
                    }
                    self.push_update(f, m, UpdateReason::StartInPlaceUpdate);
                    ctx.in_place.push(f.name());
                    return Ok(());
                }
                Err(refusal) => {
                    let why = &refusal.message;
                    let refusal = refusal.clone();
                    if ctx.stype == CloneSetUpdateStrategyType::InPlaceOnly {
                        self.plan.refusals.push(PodRefusal {
                            pod: f.name().to_string(),
                            in_place_only: true,
                            refusal,
                        });
                        return Err(format!(
                            "find Pod {} update strategy is InPlaceOnly but can not update in-place ({why})",
                            f.name()
                        ));
                    }
                    self.why(format!(
                        "pod {}: cannot update in place ({}) → recreate",
                        f.name(),
                        refusal.describe()
                    ));
                    if f.labels().get(keys::SPECIFIED_DELETE_LABEL) != Some("true") {
                        self.plan.refusals.push(PodRefusal {
                            pod: f.name().to_string(),
                            in_place_only: false,
                            refusal,
                        });
                    }
                }
            }
        }
        if f.labels().get(keys::SPECIFIED_DELETE_LABEL) == Some("true") {
            return Ok(());
        }
        ctx.recreate.push(f.name());
        let mut labels = BTreeMap::new();
        labels.insert(keys::SPECIFIED_DELETE_LABEL.to_string(), Some("true".to_string()));
        self.plan.actions.push(Action::PatchPodMetadata {
            pod: f.name().to_string(),
            uid: f.uid().to_string(),
            labels,
            annotations: BTreeMap::new(),
            reason: UpdateReason::Recreate,
        });
        Ok(())
    }
}

/// Kruise `CanVCTemplateInplaceUpdate` under `RecreatePodWhenChangeVCTInCloneSetGate`
/// (`pkg/util/volumeclaimtemplate/volume_templates_hash.go`, called from
/// `defaultCalculateInPlaceUpdateSpec`): both revisions carry the volumeClaimTemplates hash and they differ →
/// not in place. InPlaceOnly ignores it (Kruise `IgnoreVolumeClaimTemplatesHashDiff`).
fn vct_check(
    old: &ControllerRevision,
    target_vct: Option<&str>,
    stype: CloneSetUpdateStrategyType,
) -> Result<(), String> {
    let (Some(new), Some(old_hash)) = (target_vct, revision::vct_hash_of(old)) else {
        return Ok(());
    };
    if stype == CloneSetUpdateStrategyType::InPlaceOnly || new == old_hash {
        return Ok(());
    }
    Err(format!(
        "spec.volumeClaimTemplates changed (annotation {} {old_hash:?} → {new:?}) and RecreatePodWhenChangeVCTInCloneSetGate is on: new PVCs need a new pod",
        keys::VCT_HASH_ANNOTATION
    ))
}

/// Per-round state of the update step: the in-place start templates cached per old revision.
struct UpdateCtx<'a> {
    stype: CloneSetUpdateStrategyType,
    target_name: &'a str,
    /// The target revision's volumeClaimTemplates hash, when `RecreatePodWhenChangeVCTInCloneSetGate` is on.
    target_vct: Option<&'a str>,
    target_tpl: Option<&'a Value>,
    rev_by_hash: &'a HashMap<&'a str, &'a Arc<ControllerRevision>>,
    grace: i32,
    label: String,
    /// Keyed by the old revision's short hash, in first-use order (pods come from a handful of revisions,
    /// so a scan beats hashing, and the first template explains the round deterministically).
    cache: Vec<(&'a str, Result<Start, Refusal>)>,
    in_place: Vec<&'a str>,
    recreate: Vec<&'a str>,
}

/// An in-place start from one old revision, and its pod write when that is the same for every pod.
struct Start {
    tpl: StartTemplate,
    shared: Option<PodMutation>,
}
