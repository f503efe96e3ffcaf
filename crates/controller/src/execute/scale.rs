//! sync/scale writes: pods and PVCs created and deleted, PVCs handed to their pods, `podsToDelete` trimmed
//! (Kruise `scaleControl`: createPods, deletePods, cleanupPVCs).

use insitu_api::CloneSet;
use insitu_api::keys::events as ev;
use insitu_core::PackedPod;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{Exec, action_err};
use crate::Error;
use crate::error::{is_already_exists, is_status};
use crate::events::Severity;
use crate::expectations::{Expect, pvc_version};
use crate::workload::Workload;

/// A delete that only removes the object it was planned for (same name, new uid: left alone).
fn uid_precondition(uid: &str) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..Default::default()
    }
}

impl Exec<'_> {
    pub(super) async fn create_pod(&self, pod: &PackedPod) -> Result<(), Error> {
        let name = pod.name_any();
        self.ctx.metrics.write("create", "pods");
        match self.pods().create(&PostParams::default(), &pod.unpack()).await {
            Ok(_) => {
                self.expect(Expect::PodCreated(name.clone()));
                let msg = match self.owner {
                    // k8s `StatefulPodControl.recordPodEvent`, which Kruise's StatefulSet keeps.
                    Workload::StatefulSet(_) => {
                        format!(
                            "create Pod {name} in StatefulSet {} successful",
                            self.owner.name()
                        )
                    }
                    Workload::CloneSet(_) => format!("succeed to create pod {name}"),
                };
                self.event(Severity::Normal, ev::SUCCESSFUL_CREATE, msg);
                Ok(())
            }
            Err(e) => {
                let msg = match self.owner {
                    Workload::StatefulSet(_) => format!(
                        "create Pod {name} in StatefulSet {} failed error: {e}",
                        self.owner.name()
                    ),
                    Workload::CloneSet(_) => format!("failed to create pod: {e}, pod: {name}"),
                };
                self.event(Severity::Warning, ev::FAILED_CREATE, msg);
                Err(action_err(format!("create pod {name}"), e))
            }
        }
    }

    pub(super) async fn delete_pod(&self, pod: &str, uid: &str) -> Result<(), Error> {
        self.ctx.metrics.write("delete", "pods");
        match self.pods().delete(pod, &uid_precondition(uid)).await {
            Ok(_) => {
                self.expect(Expect::PodDeleted(pod.to_string()));
                self.mem.resizes.forget(uid);
                let msg = match self.owner {
                    Workload::StatefulSet(_) => {
                        format!("delete Pod {pod} in StatefulSet {} successful", self.owner.name())
                    }
                    Workload::CloneSet(_) => format!("succeed to delete pod {pod}"),
                };
                self.event(Severity::Normal, ev::SUCCESSFUL_DELETE, msg);
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => {
                self.event(
                    Severity::Warning,
                    ev::FAILED_DELETE,
                    format!("failed to delete pod {pod}: {e}"),
                );
                Err(action_err(format!("delete pod {pod}"), e))
            }
        }
    }

    pub(super) async fn create_pvc(&self, pvc: &PersistentVolumeClaim) -> Result<(), Error> {
        let name = pvc.name_any();
        self.ctx.metrics.write("create", "persistentvolumeclaims");
        match self.pvcs().create(&PostParams::default(), pvc).await {
            Ok(_) => {
                self.expect(Expect::PvcCreated(name));
                Ok(())
            }
            // Kruise creates only the PVCs it does not see; one that exists all the same (our cache
            // lagged, or it is not ours) is there for the pod to use. No expectation: a PVC we do not
            // own may never show up in the CloneSet's snapshot.
            Err(e) if is_already_exists(&e) => Ok(()),
            Err(e) => {
                self.event(
                    Severity::Warning,
                    ev::FAILED_CREATE,
                    format!("failed to create pvc: {e}, pvc: {name}"),
                );
                Err(action_err(format!("create pvc {name}"), e))
            }
        }
    }

    /// `with_pod`: the PVC goes with its pod (Kruise deletePods) rather than the disablePVCReuse cleanup of a
    /// PVC whose pod is gone (cleanupPVCs).
    pub(super) async fn delete_pvc(&self, name: &str, uid: &str, with_pod: bool) -> Result<(), Error> {
        self.ctx.metrics.write("delete", "persistentvolumeclaims");
        match self.pvcs().delete(name, &uid_precondition(uid)).await {
            Ok(_) => {
                self.expect(Expect::PvcDeleted(name.to_string()));
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => {
                // Kruise: deletePods vs cleanupPVCs word their failures differently.
                let msg = if with_pod {
                    format!("failed to delete pvc {name}: {e}")
                } else {
                    format!("failed to clean up PVC {name}: {e}")
                };
                self.event(Severity::Warning, ev::FAILED_DELETE, msg);
                Err(action_err(format!("delete pvc {name}"), e))
            }
        }
    }

    /// Kruise `updateClaimOwnerRefToPod`: the CloneSet's ownerReference on the PVC is replaced by a controller
    /// reference to the pod, so the garbage collector deletes the PVC with the pod. Written as a merge patch
    /// of the whole list guarded by the cached resourceVersion (a conflict ends the round; the next one
    /// re-plans from a fresh cache).
    pub(super) async fn release_pvc(
        &self,
        name: &str,
        uid: &str,
        pod: &str,
        pod_uid: &str,
    ) -> Result<(), Error> {
        let Some(cur) = self
            .ctx
            .caches
            .pvcs
            .get(&ObjectRef::<PersistentVolumeClaim>::new(name).within(&self.ns))
            .filter(|c| c.metadata.uid.as_deref() == Some(uid))
        else {
            return Ok(()); // gone (or replaced) meanwhile: nothing to hand over
        };
        let cs_uid = self.cs()?.metadata.uid.clone().unwrap_or_default();
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

    /// Removes names of pods that no longer exist from `spec.scaleStrategy.podsToDelete`.
    pub(super) async fn truncate_pods_to_delete(&self, remove: &[String]) -> Result<(), Error> {
        let current = self
            .cs()?
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
        let guard = match self.cs()?.metadata.resource_version.as_deref() {
            Some(rv) => json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv}),
            None => {
                json!({"op": "test", "path": "/spec/scaleStrategy/podsToDelete", "value": current})
            }
        };
        let patch: json_patch::Patch = serde_json::from_value(json!([
            guard,
            {"op": "replace", "path": "/spec/scaleStrategy/podsToDelete", "value": kept},
        ]))?;
        // The answer is acknowledged, not decoded (`crate::acknowledged`: a deep CloneSet would not decode).
        let resource = kube::api::ApiResource::erase::<CloneSet>(&());
        let api: Api<crate::acknowledged::Acknowledged> =
            Api::namespaced_with(self.ctx.client.clone(), &self.ns, &resource);
        self.ctx.metrics.write("patch", "clonesets");
        api.patch(
            &self.cs()?.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .map_err(|e| action_err("truncate podsToDelete", e))?;
        Ok(())
    }
}
