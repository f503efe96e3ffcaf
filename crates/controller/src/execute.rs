//! Executes a plan: each action becomes one API write (plus a re-read on conflict), recorded as an expectation.
//!
//! Order: PVC cleanup and revisions first (pods reference them), then pod creations in Kruise's slow-start
//! batches (each pod after its PVCs), then per-pod chains run concurrently (actions on one pod stay in order,
//! e.g. InPlaceUpdateReady=False before the pod PUT, a pod's delete before its PVCs'), then spec fixes. The
//! first failure ends the round; the next reconcile re-plans from fresh caches.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::stream::{self, StreamExt};
use insitu_api::keys::{self, events as ev};
use insitu_api::{CloneSet, inplace::InPlaceUpdateState};
use insitu_core::plan::UpdateReason;
use insitu_core::readiness;
use insitu_core::{Action, PackedPod, Plan, PodMutation};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::error::{is_already_exists, is_status};
use crate::events::Severity;
use crate::expectations::{Expect, pod_version, pvc_version};
use crate::metrics::cs_labels;
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

/// Runs every action of `plan` for `cs`, then writes the status when it changed.
pub async fn execute(ctx: &Context, cs: &CloneSet, plan: &Plan) -> Result<(), Error> {
    let ns = cs.namespace().unwrap_or_default();
    let key = format!("{ns}/{}", cs.name_any());
    let x = Exec {
        ctx,
        cs,
        ns: ns.clone(),
        key,
        written: Mutex::new(HashMap::new()),
        update_revision: &plan.update_revision,
        refusals: &plan.refusals,
    };
    crate::recreate::refused_in_place_only(ctx, cs, &plan.refusals, &plan.update_revision);
    // Once per CloneSet (UID) and reason: a condition the user must fix, not a per-reconcile message.
    for w in &plan.warnings {
        let uid = cs.uid().unwrap_or_default();
        if ctx.warned.first_time(&uid, &w.reason) {
            x.event(Severity::Warning, &w.reason, w.message.clone());
        }
    }

    // Each creation unit is a pod preceded by its PVCs (Kruise createOnePod: PVCs first, in order).
    let mut creates: Vec<Vec<&Action>> = Vec::new();
    let mut pvcs_of_next_pod: Vec<&Action> = Vec::new();
    let mut chains: BTreeMap<&str, Vec<&Action>> = BTreeMap::new();
    let mut tail = Vec::new();
    for action in &plan.actions {
        match action {
            // Kruise cleanupPVCs runs before anything else of the round.
            Action::CreateRevision { .. }
            | Action::BumpRevision { .. }
            | Action::DeleteRevision { .. }
            | Action::ReleasePvc { .. }
            | Action::DeletePvc { pod: None, .. } => x.run(action).await?,
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
            | Action::PatchPodMetadata { pod, .. } => chains.entry(pod.as_str()).or_default().push(action),
            Action::TruncatePodsToDelete { .. } => tail.push(action),
        }
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
        let futs: Vec<_> = now.iter().map(|unit| x.run_chain(unit.clone())).collect();
        let results: Vec<Result<(), Error>> = stream::iter(futs)
            .buffer_unordered(POD_CONCURRENCY)
            .collect()
            .await;
        results.into_iter().collect::<Result<Vec<()>, Error>>()?;
        rest = later;
        batch *= 2;
    }

    let futs: Vec<_> = chains.into_values().map(|chain| x.run_chain(chain)).collect();
    let results: Vec<Result<(), Error>> = stream::iter(futs)
        .buffer_unordered(POD_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>, Error>>()?;

    for a in tail {
        x.run(a).await?;
    }

    if let Some(status) = &plan.status {
        // A JSON patch `add /status` replaces the whole status atomically, clearing fields we no longer set.
        // The status is the same in both versions (conversion carries it verbatim).
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/status", "value": status}]))?;
        ctx.metrics.write("patch", "clonesets/status");
        let started = std::time::Instant::now();
        let (name, pp) = (cs.name_any(), PatchParams::default());
        let written = match &ctx.status_resource {
            Some(ar) => Api::<kube::api::DynamicObject>::namespaced_with(ctx.client.clone(), &ns, ar)
                .patch_status(&name, &pp, &Patch::<()>::Json(patch))
                .await
                .map(|_| ()),
            None => Api::<CloneSet>::namespaced(ctx.client.clone(), &ns)
                .patch_status(&name, &pp, &Patch::<()>::Json(patch))
                .await
                .map(|_| ()),
        };
        written.map_err(|e| action_err("write CloneSet status", e))?;
        tracing::debug!(cloneset = %x.key, ms = started.elapsed().as_millis() as u64, "status written");
    }
    Ok(())
}

/// Which endpoint a read-modify-write goes to.
#[derive(Clone, Copy)]
enum Target {
    Pod,
    Status,
}

/// Applies merge-patch-like entries (`None` removes); true when anything changed.
fn set_entries(map: &mut BTreeMap<String, String>, entries: &BTreeMap<String, Option<String>>) -> bool {
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
struct Cond {
    type_: &'static str,
    ready: bool,
    reason: Option<String>,
    message: Option<String>,
}

impl Cond {
    fn inplace_update_ready(ready: bool) -> Self {
        Cond {
            type_: keys::INPLACE_UPDATE_READY,
            ready,
            reason: (!ready).then(|| keys::INPLACE_UPDATE_READY_REASON.to_string()),
            message: None,
        }
    }
}

fn set_condition(pod: &mut Pod, cond: &Cond, now: &Time) -> bool {
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

struct Exec<'a> {
    ctx: &'a Context,
    cs: &'a CloneSet,
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

impl Exec<'_> {
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
        self.ctx.events.emit(self.cs, severity, reason, message);
    }

    /// The cached pod (unpacked), if it is still the one the plan was made for; our own newer write of it,
    /// if any.
    fn cached(&self, name: &str, uid: &str) -> Option<Pod> {
        let cache = self
            .ctx
            .pods
            .get(&ObjectRef::<PackedPod>::new(name).within(&self.ns))
            .filter(|p| p.metadata.uid.as_deref() == Some(uid));
        let ours = self
            .written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .filter(|p| p.metadata.uid.as_deref() == Some(uid))
            .cloned();
        match (cache, ours) {
            (Some(c), Some(o)) if pod_version(&o.metadata) > pod_version(&c.metadata) => Some((*o).clone()),
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

    async fn run(&self, action: &Action) -> Result<(), Error> {
        let m = &self.ctx.metrics;
        match action {
            Action::CreateRevision { revision } => {
                let api: Api<ControllerRevision> = Api::namespaced(self.ctx.client.clone(), &self.ns);
                m.write("create", "controllerrevisions");
                match api.create(&PostParams::default(), revision).await {
                    Ok(_) => {}
                    Err(e) if is_already_exists(&e) => {} // already there: the next plan sees it
                    Err(e) => return Err(action_err(format!("create revision {}", revision.name_any()), e)),
                }
                self.expect(Expect::RevisionCreated(revision.name_any()));
            }
            Action::BumpRevision {
                name,
                revision,
                vct_hash,
            } => {
                let api: Api<ControllerRevision> = Api::namespaced(self.ctx.client.clone(), &self.ns);
                m.write("patch", "controllerrevisions");
                let body = match vct_hash {
                    Some(h) => {
                        json!({ "revision": revision, "metadata": {"annotations": {insitu_api::keys::VCT_HASH_ANNOTATION: h}} })
                    }
                    None => json!({ "revision": revision }),
                };
                api.patch(name, &PatchParams::default(), &Patch::Merge(body))
                    .await
                    .map_err(|e| action_err(format!("bump revision {name}"), e))?;
            }
            Action::DeleteRevision { name } => {
                let api: Api<ControllerRevision> = Api::namespaced(self.ctx.client.clone(), &self.ns);
                m.write("delete", "controllerrevisions");
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(e) if is_status(&e, 404) => {}
                    Err(e) => return Err(action_err(format!("delete revision {name}"), e)),
                }
            }
            Action::CreatePod { pod, .. } => {
                let name = pod.name_any();
                m.write("create", "pods");
                match self.pods().create(&PostParams::default(), &pod.unpack()).await {
                    Ok(_) => {
                        self.expect(Expect::PodCreated(name.clone()));
                        self.event(
                            Severity::Normal,
                            ev::SUCCESSFUL_CREATE,
                            format!("succeed to create pod {name}"),
                        );
                    }
                    Err(e) => {
                        self.event(
                            Severity::Warning,
                            ev::FAILED_CREATE,
                            format!("failed to create pod: {e}, pod: {name}"),
                        );
                        return Err(action_err(format!("create pod {name}"), e));
                    }
                }
            }
            Action::DeletePod { pod, uid, .. } => {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid.clone()),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                m.write("delete", "pods");
                match self.pods().delete(pod, &dp).await {
                    Ok(_) => {
                        self.expect(Expect::PodDeleted(pod.clone()));
                        self.event(
                            Severity::Normal,
                            ev::SUCCESSFUL_DELETE,
                            format!("succeed to delete pod {pod}"),
                        );
                    }
                    Err(e) if is_status(&e, 404) => {}
                    Err(e) => {
                        self.event(
                            Severity::Warning,
                            ev::FAILED_DELETE,
                            format!("failed to delete pod {pod}: {e}"),
                        );
                        return Err(action_err(format!("delete pod {pod}"), e));
                    }
                }
            }
            Action::CreatePvc { pvc } => {
                let name = pvc.name_any();
                m.write("create", "persistentvolumeclaims");
                match self.pvcs().create(&PostParams::default(), pvc).await {
                    Ok(_) => self.expect(Expect::PvcCreated(name)),
                    // Kruise creates only the PVCs it does not see; one that exists all the same (our cache
                    // lagged, or it is not ours) is there for the pod to use. No expectation: a PVC we do not
                    // own may never show up in the CloneSet's snapshot.
                    Err(e) if is_already_exists(&e) => {}
                    Err(e) => {
                        self.event(
                            Severity::Warning,
                            ev::FAILED_CREATE,
                            format!("failed to create pvc: {e}, pvc: {name}"),
                        );
                        return Err(action_err(format!("create pvc {name}"), e));
                    }
                }
            }
            Action::DeletePvc { name, uid, pod, .. } => {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid.clone()),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                m.write("delete", "persistentvolumeclaims");
                match self.pvcs().delete(name, &dp).await {
                    Ok(_) => self.expect(Expect::PvcDeleted(name.clone())),
                    Err(e) if is_status(&e, 404) => {}
                    Err(e) => {
                        // Kruise: deletePods vs cleanupPVCs word their failures differently.
                        let msg = match pod {
                            Some(_) => format!("failed to delete pvc {name}: {e}"),
                            None => format!("failed to clean up PVC {name}: {e}"),
                        };
                        self.event(Severity::Warning, ev::FAILED_DELETE, msg);
                        return Err(action_err(format!("delete pvc {name}"), e));
                    }
                }
            }
            Action::ReleasePvc {
                name,
                uid,
                pod,
                pod_uid,
            } => self.release_pvc(name, uid, pod, pod_uid).await?,
            Action::SetInPlaceUpdateReady { pod, uid, ready } => {
                self.set_inplace_ready(pod, uid, *ready).await?
            }
            Action::SetKruisePodReady { pod, uid, messages } => {
                let now = Time(self.ctx.clock.now());
                let message = readiness::message_json(messages);
                let want = Cond {
                    type_: keys::KRUISE_POD_READY,
                    ready: messages.is_empty(),
                    reason: None,
                    message: (!message.is_empty()).then_some(message),
                };
                let mutate = |p: &mut Pod| set_condition(p, &want, &now);
                self.read_modify_write(pod, uid, Target::Status, &mutate).await?;
            }
            Action::UpdatePod {
                pod,
                uid,
                mutation,
                reason,
            } => {
                let result = self.update_pod(pod, uid, mutation).await;
                let revision = mutation
                    .labels
                    .get(keys::CONTROLLER_REVISION_HASH_LABEL)
                    .cloned()
                    .flatten()
                    .unwrap_or_default();
                let labels = cs_labels(&self.ns, &self.cs.name_any());
                match (&result, reason) {
                    (Ok(()), UpdateReason::StartInPlaceUpdate) => {
                        m.inplace_update.get_or_create(&labels).inc();
                        self.event(
                            Severity::Normal,
                            ev::SUCCESSFUL_UPDATE_POD_IN_PLACE,
                            format!("successfully update pod {pod} in-place(revision {revision})"),
                        );
                    }
                    (Err(e), UpdateReason::StartInPlaceUpdate | UpdateReason::FinishGracePeriod) => {
                        m.inplace_update_failed.get_or_create(&labels).inc();
                        self.event(
                            Severity::Warning,
                            ev::FAILED_UPDATE_POD_IN_PLACE,
                            format!("failed to update pod {pod} in-place(revision {revision}): {e}"),
                        );
                    }
                    _ => {}
                }
                result?;
            }
            Action::PatchPodMetadata {
                pod,
                uid,
                labels,
                annotations,
                reason,
            } => {
                let patch = json!({
                    "metadata": { "uid": uid, "labels": labels, "annotations": annotations }
                });
                m.write("patch", "pods");
                let result = self
                    .pods()
                    .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                let revision = self.update_revision;
                match (result, reason) {
                    (Ok(p), r) => {
                        self.expect(Expect::PodVersion(pod.clone(), pod_version(&p.metadata)));
                        self.remember(&p);
                        if *r == UpdateReason::Recreate {
                            m.recreate_update
                                .get_or_create(&cs_labels(&self.ns, &self.cs.name_any()))
                                .inc();
                            if let Some(why) = self.refusals.iter().find(|w| &w.pod == pod) {
                                crate::recreate::recreated(self.ctx, self.cs, &p, why, revision);
                            }
                            self.event(
                                Severity::Normal,
                                ev::SUCCESSFUL_UPDATE_POD_RECREATE,
                                format!("successfully patch pod {pod} specified-delete for update(revision {revision})"),
                            );
                        }
                    }
                    (Err(e), r) => {
                        if *r == UpdateReason::Recreate {
                            self.event(
                                Severity::Warning,
                                ev::FAILED_UPDATE_POD_RECREATE,
                                format!("failed to patch pod specified-delete {pod} for update(revision {revision}): {e}"),
                            );
                        }
                        return Err(action_err(format!("patch pod {pod}"), e));
                    }
                }
            }
            Action::ReleasePod { pod, uid } => self.release_pod(pod, uid).await?,
            Action::AdoptPod { pod, uid } => self.adopt_pod(pod, uid).await?,
            Action::TruncatePodsToDelete { remove } => {
                let current = self
                    .cs
                    .spec
                    .scale_strategy
                    .as_ref()
                    .map(|s| s.pods_to_delete.clone())
                    .unwrap_or_default();
                let kept: Vec<&String> = current.iter().filter(|n| !remove.contains(n)).collect();
                // Guarded by the resourceVersion we planned from: a CloneSet changed since (a stale cache) gets a
                // 409 Conflict and the next round re-plans, as any optimistic write does. A JSON-patch `test` op
                // would guard the list alone, but kube-apiserver answers its failure with a 422 Invalid, which
                // reads as a malformed request (found by `insitu torture`, seeds 3058 and 3214).
                let guard = match self.cs.metadata.resource_version.as_deref() {
                    Some(rv) => json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv}),
                    None => {
                        json!({"op": "test", "path": "/spec/scaleStrategy/podsToDelete", "value": current})
                    }
                };
                let patch: json_patch::Patch = serde_json::from_value(json!([
                    guard,
                    {"op": "replace", "path": "/spec/scaleStrategy/podsToDelete", "value": kept},
                ]))?;
                let api: Api<CloneSet> = Api::namespaced(self.ctx.client.clone(), &self.ns);
                m.write("patch", "clonesets");
                api.patch(
                    &self.cs.name_any(),
                    &PatchParams::default(),
                    &Patch::<()>::Json(patch),
                )
                .await
                .map_err(|e| action_err("truncate podsToDelete", e))?;
            }
        }
        Ok(())
    }

    /// Kruise claimPods release, written as Kubernetes' ControllerRefManager writes it: a strategic merge patch
    /// deleting our ownerReference by uid, with the pod's uid as precondition (a replacement of the same
    /// name is left alone). Gone (404), or Invalid (422: a new pod of that name, as ControllerRefManager
    /// reads it) counts as released.
    async fn release_pod(&self, pod: &str, uid: &str) -> Result<(), Error> {
        let cs_uid = self.cs.metadata.uid.clone().unwrap_or_default();
        let patch = json!({
            "metadata": {
                "ownerReferences": [{"$patch": "delete", "uid": cs_uid}],
                "uid": uid,
            }
        });
        match self.patch_owner_refs(pod, &patch).await {
            Ok(p) => {
                self.expect(Expect::PodVersion(pod.to_string(), pod_version(&p.metadata)));
                Ok(())
            }
            Err(e) if is_status(&e, 404) || is_status(&e, 422) => Ok(()),
            Err(e) => Err(action_err(format!("release pod {pod}"), e)),
        }
    }

    /// The strategic-merge patch of a pod's ownerReferences that release and adoption both send.
    async fn patch_owner_refs(&self, pod: &str, patch: &serde_json::Value) -> Result<Pod, kube::Error> {
        self.ctx.metrics.write("patch", "pods");
        self.pods()
            .patch(pod, &PatchParams::default(), &Patch::Strategic(patch))
            .await
    }

    /// Kruise claimPods adoption: first a fresh read of the CloneSet (refmanager `canAdopt`: same uid, not
    /// deleting), then ControllerRefManager's patch setting our controller reference, pod uid as precondition.
    async fn adopt_pod(&self, pod: &str, uid: &str) -> Result<(), Error> {
        let api: Api<CloneSet> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let fresh = api
            .get(&self.cs.name_any())
            .await
            .map_err(|e| action_err(format!("adopt pod {pod}: read CloneSet"), e))?;
        if fresh.metadata.uid != self.cs.metadata.uid || fresh.metadata.deletion_timestamp.is_some() {
            return Err(Error::Invalid(format!(
                "can't adopt pod {pod}: CloneSet {} is gone or being deleted",
                self.key
            )));
        }
        let patch = json!({
            "metadata": {
                "ownerReferences": [insitu_core::revision::controller_ref(self.cs)],
                "uid": uid,
            }
        });
        match self.patch_owner_refs(pod, &patch).await {
            Ok(p) => {
                self.expect(Expect::PodVersion(pod.to_string(), pod_version(&p.metadata)));
                self.remember(&p);
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(action_err(format!("adopt pod {pod}"), e)),
        }
    }

    /// Kruise `updateClaimOwnerRefToPod`: the CloneSet's ownerReference on the PVC is replaced by a controller
    /// reference to the pod, so the garbage collector deletes the PVC with the pod. Written as a merge patch
    /// of the whole list guarded by the cached resourceVersion (a conflict ends the round; the next one
    /// re-plans from a fresh cache).
    async fn release_pvc(&self, name: &str, uid: &str, pod: &str, pod_uid: &str) -> Result<(), Error> {
        let Some(cur) = self
            .ctx
            .pvcs
            .get(&ObjectRef::<PersistentVolumeClaim>::new(name).within(&self.ns))
            .filter(|c| c.metadata.uid.as_deref() == Some(uid))
        else {
            return Ok(()); // gone (or replaced) meanwhile: nothing to hand over
        };
        let cs_uid = self.cs.metadata.uid.clone().unwrap_or_default();
        let mut refs: Vec<OwnerReference> = cur
            .owner_references()
            .iter()
            .filter(|r| r.uid != cs_uid)
            .cloned()
            .collect();
        if !refs.iter().any(|r| r.uid == pod_uid) {
            refs.push(OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.to_string(),
                uid: pod_uid.to_string(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            });
        }
        let patch = json!({
            "metadata": {
                "uid": uid,
                "resourceVersion": cur.metadata.resource_version,
                "ownerReferences": refs,
            }
        });
        self.ctx.metrics.write("patch", "persistentvolumeclaims");
        match self
            .pvcs()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(c) => {
                self.expect(Expect::PvcVersion(name.to_string(), pvc_version(&c)));
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => {
                self.event(
                    Severity::Warning,
                    ev::FAILED_UPDATE,
                    format!("failed to update PVC {name}: {e}"),
                );
                Err(action_err(format!("hand pvc {name} over to pod {pod}"), e))
            }
        }
    }

    /// GET-free read-modify-write: start from the cache, re-read only after a conflict (Kruise: RetryOnConflict).
    /// `mutate` returns false when the pod already looks right (no write).
    async fn read_modify_write(
        &self,
        name: &str,
        uid: &str,
        target: Target,
        mutate: &(dyn Fn(&mut Pod) -> bool + Send + Sync),
    ) -> Result<Pod, Error> {
        let what = match target {
            Target::Pod => "update pod",
            Target::Status => "update pod status",
        };
        let api = self.pods();
        let mut pod = match self.cached(name, uid) {
            Some(p) => p,
            None => api
                .get(name)
                .await
                .map_err(|e| action_err(format!("{what} {name}"), e))?,
        };
        for attempt in 0..=CONFLICT_RETRIES {
            if pod.metadata.uid.as_deref() != Some(uid) {
                return Err(Error::Invalid(format!(
                    "pod {name} was replaced (uid changed) before {what}"
                )));
            }
            if !mutate(&mut pod) {
                return Ok(pod);
            }
            let result = match target {
                Target::Pod => {
                    self.ctx.metrics.write("update", "pods");
                    api.replace(name, &PostParams::default(), &pod).await
                }
                Target::Status => {
                    self.ctx.metrics.write("update", "pods/status");
                    api.replace_status(name, &PostParams::default(), &pod).await
                }
            };
            match result {
                Ok(written) => {
                    self.expect(Expect::PodVersion(
                        name.to_string(),
                        pod_version(&written.metadata),
                    ));
                    self.remember(&written);
                    return Ok(written);
                }
                Err(e) if is_status(&e, 409) && attempt < CONFLICT_RETRIES => {
                    pod = api
                        .get(name)
                        .await
                        .map_err(|e| action_err(format!("{what} {name}"), e))?;
                }
                Err(e) => return Err(action_err(format!("{what} {name}"), e)),
            }
        }
        Err(Error::Invalid(format!("{what} {name}: too many conflicts")))
    }

    async fn update_pod(&self, name: &str, uid: &str, mutation: &PodMutation) -> Result<(), Error> {
        // Kruise updatePodInPlace: the resize patch first, then the pod write (which then carries the
        // resources already, so it changes none). A refused resize fails the whole start: the pod stays at
        // its revision and the next round tries again (FailedUpdatePodInPlace names the server's reason).
        if self.ctx.resize_subresource && !mutation.container_resources.is_empty() {
            self.resize_pod(name, uid, &mutation.container_resources).await?;
        }
        let mutate = |pod: &mut Pod| {
            let before = pod.clone();
            mutation.apply(pod);
            *pod != before
        };
        self.read_modify_write(name, uid, Target::Pod, &mutate).await?;
        Ok(())
    }

    /// Strategic-merge patch of `pods/resize` with the cpu/memory that still differ (Kruise
    /// `GenerateResourcePatch` + `PatchPodResource`).
    async fn resize_pod(
        &self,
        name: &str,
        uid: &str,
        resources: &BTreeMap<String, k8s_openapi::api::core::v1::ResourceRequirements>,
    ) -> Result<(), Error> {
        let api = self.pods();
        let pod = match self.cached(name, uid) {
            Some(p) => p,
            None => api
                .get(name)
                .await
                .map_err(|e| action_err(format!("resize pod {name}"), e))?,
        };
        let Some(mut patch) = insitu_core::vertical::resize_patch(&pod, resources) else {
            return Ok(());
        };
        // A replaced pod (same name, new uid) fails validation instead of being resized.
        patch["metadata"] = json!({ "uid": uid });
        self.ctx.metrics.write("patch", "pods/resize");
        let written = api
            .patch_subresource("resize", name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map_err(|e| action_err(format!("resize pod {name}"), e))?;
        self.expect(Expect::PodVersion(
            name.to_string(),
            pod_version(&written.metadata),
        ));
        self.remember(&written);
        Ok(())
    }

    async fn set_inplace_ready(&self, name: &str, uid: &str, ready: bool) -> Result<(), Error> {
        let now = Time(self.ctx.clock.now());
        let want = Cond::inplace_update_ready(ready);
        let mutate = |pod: &mut Pod| set_condition(pod, &want, &now);
        let written = self.read_modify_write(name, uid, Target::Status, &mutate).await?;
        if ready {
            self.observe_duration(&written);
        }
        Ok(())
    }

    /// InPlaceUpdateReady=True and metadata changes (label/annotation → value, or `None` to remove) in one
    /// pods/status write.
    async fn set_inplace_ready_with(
        &self,
        name: &str,
        uid: &str,
        labels: &BTreeMap<String, Option<String>>,
        annotations: &BTreeMap<String, Option<String>>,
    ) -> Result<(), Error> {
        let now = Time(self.ctx.clock.now());
        let want = Cond::inplace_update_ready(true);
        let mutate = |pod: &mut Pod| {
            let condition = set_condition(pod, &want, &now);
            let meta = &mut pod.metadata;
            let labels = set_entries(meta.labels.get_or_insert_with(Default::default), labels);
            let annotations = set_entries(meta.annotations.get_or_insert_with(Default::default), annotations);
            condition | labels | annotations
        };
        let written = self.read_modify_write(name, uid, Target::Status, &mutate).await?;
        self.observe_duration(&written);
        Ok(())
    }

    /// `kruise_inplace_update_duration_seconds`: from the state annotation's updateTimestamp to now.
    fn observe_duration(&self, pod: &Pod) {
        let Some(state) = pod
            .annotations()
            .get(keys::INPLACE_UPDATE_STATE_ANNOTATION)
            .and_then(|s| serde_json::from_str::<InPlaceUpdateState>(s).ok())
        else {
            return;
        };
        let secs = self
            .ctx
            .clock
            .now()
            .duration_since(state.update_timestamp.0)
            .as_secs_f64();
        if secs >= 0.0 {
            self.ctx
                .metrics
                .inplace_update_duration
                .get_or_create(&cs_labels(&self.ns, &self.cs.name_any()))
                .observe(secs);
        }
    }
}
