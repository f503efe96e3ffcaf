//! sync/update metadata writes: the specified-delete label of a recreate update, lifecycle state labels,
//! the revision-hash backfill (Kruise `updatePod` for non-in-place pods, lifecycle `PatchPodLifecycle`).

use std::collections::BTreeMap;

use insitu_api::keys::events as ev;
use insitu_core::UpdateReason;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{Exec, action_err};
use crate::Error;
use crate::events::Severity;
use crate::expectations::{Expect, pod_version};
use crate::metrics::cs_labels;

impl Exec<'_> {
    /// Merge patch of a pod's labels/annotations (`None` removes), guarded by its uid.
    pub(super) async fn patch_pod_metadata(
        &self,
        pod: &str,
        uid: &str,
        labels: &BTreeMap<String, Option<String>>,
        annotations: &BTreeMap<String, Option<String>>,
        reason: UpdateReason,
    ) -> Result<(), Error> {
        let m = &self.ctx.metrics;
        let patch = json!({
            "metadata": { "uid": uid, "labels": labels, "annotations": annotations }
        });
        m.write("patch", "pods");
        let result = self
            .pods()
            .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        let revision = self.update_revision;
        let recreate = reason == UpdateReason::Recreate;
        match result {
            Ok(p) => {
                self.expect(Expect::PodVersion(pod.to_string(), pod_version(&p.metadata)));
                self.remember(&p);
                if recreate {
                    m.recreate_update
                        .get_or_create(&cs_labels(&self.ns, &self.owner.name()))
                        .inc();
                    if let Some(why) = self.refusals.iter().find(|w| w.pod == pod) {
                        crate::recreate::recreated(self.ctx, self.owner, &p, why, revision);
                    }
                    self.event(
                        Severity::Normal,
                        ev::SUCCESSFUL_UPDATE_POD_RECREATE,
                        format!(
                            "successfully patch pod {pod} specified-delete for update(revision {revision})"
                        ),
                    );
                }
                Ok(())
            }
            Err(e) => {
                if recreate {
                    self.event(
                        Severity::Warning,
                        ev::FAILED_UPDATE_POD_RECREATE,
                        format!(
                            "failed to patch pod specified-delete {pod} for update(revision {revision}): {e}"
                        ),
                    );
                }
                Err(action_err(format!("patch pod {pod}"), e))
            }
        }
    }
}
