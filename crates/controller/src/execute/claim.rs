//! claimPods writes: release of a pod that no longer matches, adoption of one that references us without a
//! controller (Kruise `claimPods`, Kubernetes' ControllerRefManager).

use insitu_api::CloneSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{Exec, action_err};
use crate::Error;
use crate::error::is_status;
use crate::expectations::{Expect, pod_version};
use crate::lenient::Lenient;

impl Exec<'_> {
    /// Kruise claimPods release, written as Kubernetes' ControllerRefManager writes it: a strategic merge patch
    /// deleting our ownerReference by uid, with the pod's uid as precondition (a replacement of the same
    /// name is left alone). Gone (404), or Invalid (422: a new pod of that name, as ControllerRefManager
    /// reads it) counts as released.
    pub(super) async fn release_pod(&self, pod: &str, uid: &str) -> Result<(), Error> {
        let cs_uid = self.cs()?.metadata.uid.clone().unwrap_or_default();
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
    pub(super) async fn adopt_pod(&self, pod: &str, uid: &str) -> Result<(), Error> {
        // Read leniently: a CloneSet nested past serde_json's 128 levels still decodes (`crate::lenient`).
        let api: Api<Lenient<CloneSet>> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let fresh = match api
            .get(&self.cs()?.name_any())
            .await
            .map_err(|e| action_err(format!("adopt pod {pod}: read CloneSet"), e))?
        {
            Lenient::Ok(cs) => cs,
            Lenient::Bad(b) => {
                return Err(Error::Invalid(format!(
                    "can't adopt pod {pod}: CloneSet {} does not decode: {}",
                    self.key, b.error
                )));
            }
        };
        if fresh.metadata.uid != self.cs()?.metadata.uid || fresh.metadata.deletion_timestamp.is_some() {
            return Err(Error::Invalid(format!(
                "can't adopt pod {pod}: CloneSet {} is gone or being deleted",
                self.key
            )));
        }
        let patch = json!({
            "metadata": {
                "ownerReferences": [insitu_core::revision::controller_ref(self.cs()?)],
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
}
