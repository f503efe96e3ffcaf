//! Executes a plan: each action becomes one API write (plus a re-read on conflict), recorded as an expectation.
//!
//! Order: PVC cleanup and revisions first (pods reference them), then image pre-download for the update
//! revision (`predownload`), then pod creations in Kruise's slow-start batches (each pod after its PVCs), then
//! per-pod chains run concurrently (actions on one pod stay in order, e.g. InPlaceUpdateReady=False before the
//! pod PUT, a pod's delete before its PVCs'), then spec fixes. The first failure ends the round; the next
//! reconcile re-plans from fresh caches.

mod claim;
mod conditions;
mod inplace;
mod podwrite;
mod revisions;
mod scale;
mod status;
mod update;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use insitu_api::CloneSet;
use insitu_api::statefulset::StatefulSet;
use insitu_core::statefulset::StatefulSetPlan;
use insitu_core::{Action, PackedPod, Plan, UpdateReason};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use crate::events::{Severity, Warned};
use crate::expectations::{Expect, pod_version};
use crate::predownload::ImagePullJobs;
use crate::resize::Counted;
use crate::workload::Workload;
use crate::{Context, Error};

/// Max pod chains written at once.
const POD_CONCURRENCY: usize = 64;
/// Re-reads after 409 Conflict before giving up for this round.
const CONFLICT_RETRIES: usize = 5;

fn action_err(action: impl Into<String>, source: kube::Error) -> Error {
    Error::Action {
        action: action.into(),
        source,
    }
}

/// The executor's memory across rounds, kept by the reconciler.
#[derive(Default)]
pub struct Memory {
    /// Plan warnings already reported, per CloneSet UID and reason.
    pub warned: Warned,
    /// Resize outcomes already counted in `insitu_resize_total`, per pod (see `resize`).
    pub resizes: Counted,
}

/// Runs every action of `plan` for `cs`, then writes the status when it changed. The launch-priority barrier
/// steps are not run here: the reconcile runs them first (`barrier`), whatever the expectations say.
pub async fn execute(
    ctx: &Context,
    mem: &Memory,
    jobs: Option<&ImagePullJobs>,
    cs: &CloneSet,
    plan: &Plan,
) -> Result<(), Error> {
    let ns = cs.namespace().unwrap_or_default();
    let key = format!("{ns}/{}", cs.name_any());
    let x = Exec {
        ctx,
        mem,
        owner: Workload::CloneSet(cs),
        ns: ns.clone(),
        key,
        written: Mutex::new(HashMap::new()),
        update_revision: &plan.update_revision,
        refusals: &plan.refusals,
    };
    crate::recreate::refused_in_place_only(ctx, &mem.warned, cs, &plan.refusals, &plan.update_revision);
    crate::resize::observed(&ctx.metrics, &mem.resizes, &plan.resizes);
    // Once per CloneSet (UID) and reason: a condition the user must fix, not a per-reconcile message.
    for w in &plan.warnings {
        let uid = cs.uid().unwrap_or_default();
        if mem.warned.first_time(&uid, &w.reason) {
            x.event(Severity::Warning, &w.reason, w.message.clone());
        }
    }

    x.run_actions(&plan.actions, jobs).await?;
    if let Some(status) = &plan.status {
        x.write_status(status).await?;
    }
    Ok(())
}

/// Runs every action of an Advanced StatefulSet's plan, then writes its status when it changed. The same
/// writes as a CloneSet's (pods, PVCs, revisions, the in-place steps), with the set as their owner.
pub async fn execute_statefulset(
    ctx: &Context,
    mem: &Memory,
    set: &StatefulSet,
    plan: &StatefulSetPlan,
) -> Result<(), Error> {
    let x = Exec {
        ctx,
        mem,
        owner: Workload::StatefulSet(set),
        ns: set.namespace().unwrap_or_default(),
        key: Workload::StatefulSet(set).key(),
        written: Mutex::new(HashMap::new()),
        update_revision: &plan.update_revision,
        refusals: &plan.refusals,
    };
    x.run_actions(&plan.actions, None).await?;
    if let Some(status) = &plan.status {
        x.write_status(status).await?;
    }
    Ok(())
}

struct Exec<'a> {
    ctx: &'a Context,
    mem: &'a Memory,
    owner: Workload<'a>,
    ns: String,
    key: String,
    /// Pods as our own writes of this round returned them: the next action of a pod's chain starts from
    /// here when the cache has not caught up yet (else e.g. the pod PUT right after the
    /// InPlaceUpdateReady=False status write would always be refused with 409 and need a re-read).
    /// Kept whole (not packed like the cache): at most one pod per chain in flight, removed at its end.
    written: Mutex<HashMap<String, Arc<Pod>>>,
    /// The plan's update revision: events name the revision pods go to (the CloneSet's stored status still
    /// names the previous one in the first round of a rollout).
    update_revision: &'a str,
    /// Why pods are recreated this round (the fields that kept them from going in place).
    refusals: &'a [insitu_core::PodRefusal],
}

impl<'a> Exec<'a> {
    /// The actions of a plan, in the executor's order (see the module's comment). Shared by both workloads.
    async fn run_actions(&self, actions: &[Action], jobs: Option<&ImagePullJobs>) -> Result<(), Error> {
        // Each creation unit is a pod preceded by its PVCs (Kruise createOnePod: PVCs first, in order).
        let mut creates: Vec<Vec<&Action>> = Vec::new();
        let mut pvcs_of_next_pod: Vec<&Action> = Vec::new();
        let mut chains: BTreeMap<&str, Vec<&Action>> = BTreeMap::new();
        let mut tail = Vec::new();
        let mut predownload = Vec::new();
        for action in actions {
            match action {
                // Kruise cleanupPVCs runs before anything else of the round.
                Action::CreateRevision { .. }
                | Action::BumpRevision { .. }
                | Action::DeleteRevision { .. }
                | Action::ReleasePvc { .. }
                | Action::DeletePvc { pod: None, .. } => self.run(action).await?,
                Action::CreatePvc { .. } => pvcs_of_next_pod.push(action),
                Action::CreatePod { .. } => {
                    let mut unit = std::mem::take(&mut pvcs_of_next_pod);
                    unit.push(action);
                    creates.push(unit);
                }
                Action::DeletePvc { pod: Some(pod), .. }
                | Action::ReleasePod { pod, .. }
                | Action::AdoptPod { pod, .. }
                | Action::DeletePod { pod, .. }
                | Action::SetInPlaceUpdateReady { pod, .. }
                | Action::SetKruisePodReady { pod, .. }
                | Action::UpdatePod { pod, .. }
                | Action::PatchPodMetadata { pod, .. } => {
                    chains.entry(pod.as_str()).or_default().push(action)
                }
                Action::TruncatePodsToDelete { .. } => tail.push(action),
                Action::CreateImagePullJob { .. }
                | Action::LabelRevision { .. }
                | Action::DeleteImagePullJob { .. } => predownload.push(action),
                // Run by the reconcile before the expectations gate (`barrier`).
                Action::LaunchBarrier { .. } => {}
            }
        }
        // Kruise: pre-download for the new revision once it exists, before scaling and updating (its own errors
        // never fail the round).
        if let Some(cs) = self.owner.cloneset() {
            crate::predownload::run(self.ctx, jobs, cs, &predownload).await;
        }
        if !pvcs_of_next_pod.is_empty() {
            // PVCs with no pod after them (the planner does not plan that): create them all the same.
            creates.push(pvcs_of_next_pod);
        }

        // Kruise: DoItSlowly — batches of 1, 2, 4, … stopping at the first failed batch.
        let mut batch = 1usize;
        let mut rest = creates.as_slice();
        while !rest.is_empty() {
            let (now, later) = rest.split_at(batch.min(rest.len()));
            self.run_chains(now.iter().cloned()).await?;
            rest = later;
            batch *= 2;
        }

        self.run_chains(chains.into_values()).await?;

        for a in tail {
            self.run(a).await?;
        }
        Ok(())
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.ctx.client.clone(), &self.ns)
    }

    fn pvcs(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.ctx.client.clone(), &self.ns)
    }

    fn expect(&self, what: Expect) {
        self.ctx
            .expectations
            .expect(&self.key, what, self.ctx.clock.now());
    }

    fn event(&self, severity: Severity, reason: &str, message: String) {
        self.ctx.events.emit_on(self.owner, severity, reason, message);
    }

    /// The CloneSet, for the actions only a CloneSet's plan has.
    fn cs(&self) -> Result<&'a CloneSet, Error> {
        self.owner.cloneset().ok_or_else(|| {
            Error::Invalid(format!(
                "{}: a CloneSet-only action in a {} plan",
                self.key,
                self.owner.kind()
            ))
        })
    }

    /// The cached pod (unpacked), if it is still the one the plan was made for; our own newer write of it,
    /// if any.
    fn cached(&self, name: &str, uid: &str) -> Option<Pod> {
        let cache = self
            .ctx
            .caches
            .pods
            .get(&ObjectRef::<PackedPod>::new(name).within(&self.ns))
            .filter(|p| p.meta().uid.as_deref() == Some(uid));
        let ours = self
            .written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .filter(|p| p.metadata.uid.as_deref() == Some(uid))
            .cloned();
        match (cache, ours) {
            (Some(c), Some(o)) if pod_version(&o.metadata) > pod_version(c.meta()) => Some((*o).clone()),
            (None, Some(o)) => Some((*o).clone()),
            (c, _) => c.map(|c| c.unpack()),
        }
    }

    /// Remembers a pod as one of our writes returned it.
    fn remember(&self, pod: &Pod) {
        if let Some(name) = &pod.metadata.name {
            let mut pod = pod.clone();
            pod.metadata.managed_fields = None;
            self.written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone(), Arc::new(pod));
        }
    }

    /// Runs `chains` at most POD_CONCURRENCY at a time, each to its end; the first error (in completion order)
    /// is returned once all have run. Futures are made as slots free up: collecting them first would hold
    /// every chain's future at once (~10 KB each: 1 GB for the 100,000 creates of a 100k-pod scale-up).
    async fn run_chains<'b>(&self, mut chains: impl Iterator<Item = Vec<&'b Action>>) -> Result<(), Error> {
        let mut running = FuturesUnordered::new();
        let mut first_err = None;
        loop {
            while running.len() < POD_CONCURRENCY {
                match chains.next() {
                    Some(chain) => running.push(self.run_chain(chain)),
                    None => break,
                }
            }
            match running.next().await {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                None => break,
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    async fn run_chain(&self, chain: Vec<&Action>) -> Result<(), Error> {
        let mut result = Ok(());
        let mut i = 0;
        while i < chain.len() {
            // InPlaceUpdateReady=True followed by the lifecycle label (Updating → Normal) of the same pod:
            // one pods/status write carries both (the status endpoint keeps metadata changes, except
            // ownerReferences), so an in-place update costs 3 pod writes instead of 4.
            if let (
                Action::SetInPlaceUpdateReady {
                    pod,
                    uid,
                    ready: true,
                },
                Some(Action::PatchPodMetadata {
                    pod: pod2,
                    uid: uid2,
                    labels,
                    annotations,
                    reason: UpdateReason::Lifecycle,
                }),
            ) = (chain[i], chain.get(i + 1).copied())
                && pod == pod2
                && uid == uid2
            {
                result = self.set_inplace_ready_with(pod, uid, labels, annotations).await;
                i += 2;
            } else {
                result = self.run(chain[i]).await;
                i += 1;
            }
            if result.is_err() {
                break;
            }
        }
        // Only the rest of this chain needed our copy (at most POD_CONCURRENCY pods are held at once).
        if let Some(
            Action::DeletePod { pod, .. }
            | Action::SetInPlaceUpdateReady { pod, .. }
            | Action::SetKruisePodReady { pod, .. }
            | Action::UpdatePod { pod, .. }
            | Action::PatchPodMetadata { pod, .. },
        ) = chain.first()
        {
            self.written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(pod.as_str());
        }
        result
    }

    /// One action: the write it stands for, by Kruise's domain (revisions, sync/scale, claimPods,
    /// sync/update, inplaceupdate).
    async fn run(&self, action: &Action) -> Result<(), Error> {
        match action {
            Action::CreateRevision { revision } => self.create_revision(revision).await,
            Action::BumpRevision {
                name,
                revision,
                vct_hash,
            } => self.bump_revision(name, *revision, vct_hash.as_deref()).await,
            Action::DeleteRevision { name } => self.delete_revision(name).await,
            Action::CreatePod { pod, .. } => self.create_pod(pod).await,
            Action::DeletePod { pod, uid, .. } => self.delete_pod(pod, uid).await,
            Action::CreatePvc { pvc } => self.create_pvc(pvc).await,
            Action::DeletePvc { name, uid, pod, .. } => self.delete_pvc(name, uid, pod.is_some()).await,
            Action::ReleasePvc {
                name,
                uid,
                pod,
                pod_uid,
            } => self.release_pvc(name, uid, pod, pod_uid).await,
            Action::SetInPlaceUpdateReady { pod, uid, ready } => {
                self.set_inplace_ready(pod, uid, *ready).await
            }
            Action::SetKruisePodReady { pod, uid, messages } => {
                self.set_kruise_pod_ready(pod, uid, messages).await
            }
            Action::UpdatePod {
                pod,
                uid,
                mutation,
                reason,
            } => self.start_inplace_update(pod, uid, mutation, *reason).await,
            Action::PatchPodMetadata {
                pod,
                uid,
                labels,
                annotations,
                reason,
            } => {
                self.patch_pod_metadata(pod, uid, labels, annotations, *reason)
                    .await
            }
            Action::ReleasePod { pod, uid } => self.release_pod(pod, uid).await,
            Action::AdoptPod { pod, uid } => self.adopt_pod(pod, uid).await,
            Action::TruncatePodsToDelete { remove } => self.truncate_pods_to_delete(remove).await,
            // Routed apart by `execute`: the barrier before the gate, pre-download after the revisions.
            Action::LaunchBarrier { .. }
            | Action::CreateImagePullJob { .. }
            | Action::LabelRevision { .. }
            | Action::DeleteImagePullJob { .. } => Ok(()),
        }
    }
}
