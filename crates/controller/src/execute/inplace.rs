//! inplaceupdate writes: the pod update that starts an in-place update (with its resize), the
//! `InPlaceUpdateReady` / `KruisePodReady` conditions, and the update-duration metric (Kruise
//! `inplaceupdate.Update`, `markPodNotReady`).

use std::collections::BTreeMap;

use insitu_api::inplace::InPlaceUpdateState;
use insitu_api::keys::{self, events as ev};
use insitu_core::{PodMutation, ReadinessMessage, UpdateReason, lifecycle};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::conditions::{Cond, set_condition, set_entries};
use super::podwrite::Target;
use super::{Exec, action_err};
use crate::Error;
use crate::events::Severity;
use crate::expectations::{Expect, pod_version};
use crate::metrics::cs_labels;

impl Exec<'_> {
    /// `UpdatePod`: starts an in-place update (or finishes its grace period), with Kruise's events and
    /// `kruise_inplace_update_total` / `_failed_total`.
    pub(super) async fn start_inplace_update(
        &self,
        pod: &str,
        uid: &str,
        mutation: &PodMutation,
        reason: UpdateReason,
    ) -> Result<(), Error> {
        let m = &self.ctx.metrics;
        let result = self.update_pod(pod, uid, mutation).await;
        let revision = mutation
            .labels
            .get(keys::CONTROLLER_REVISION_HASH_LABEL)
            .cloned()
            .flatten()
            .unwrap_or_default();
        let labels = cs_labels(&self.ns, &self.owner.name());
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
        result
    }

    /// Lifecycle `markPodNotReady`: `KruisePodReady` False with the hooks' messages, True when none is left.
    pub(super) async fn set_kruise_pod_ready(
        &self,
        pod: &str,
        uid: &str,
        messages: &[ReadinessMessage],
    ) -> Result<(), Error> {
        let now = Time(self.ctx.clock.now());
        let message = lifecycle::message_json(messages);
        let want = Cond {
            type_: keys::KRUISE_POD_READY,
            ready: messages.is_empty(),
            reason: None,
            message: (!message.is_empty()).then_some(message),
        };
        let mutate = |p: &mut Pod| set_condition(p, &want, &now);
        self.read_modify_write(pod, uid, Target::Status, &mutate).await?;
        Ok(())
    }

    async fn update_pod(&self, name: &str, uid: &str, mutation: &PodMutation) -> Result<(), Error> {
        // Kruise updatePodInPlace: the resize patch first, then the pod write (which then carries the
        // resources already, so it changes none). A refused resize fails the whole start: the pod stays at
        // its revision and the next round tries again (FailedUpdatePodInPlace names the server's reason).
        let resizes = !mutation.container_resources.is_empty();
        if self.ctx.server.resize_subresource && resizes {
            self.resize_pod(name, uid, &mutation.container_resources).await?;
        }
        // The state's imageIDs are those of the pod as written, not as planned (Kruise records them from the
        // pod it fetched for the write).
        let restamp = mutation
            .annotations
            .get(keys::INPLACE_UPDATE_STATE_ANNOTATION)
            .is_some_and(Option::is_some);
        let mutate = |pod: &mut Pod| {
            let before = pod.clone();
            mutation.apply(pod);
            if restamp {
                insitu_core::inplaceupdate::restamp_last_container_statuses(pod);
                let batch = mutation.container_images.keys().map(String::as_str);
                insitu_core::inplaceupdate::record_pending_restarts(&before, pod, batch);
            }
            *pod != before
        };
        let written = self.read_modify_write(name, uid, Target::Pod, &mutate).await;
        if resizes && !self.ctx.server.resize_subresource {
            // Before 1.32 the resources go in the pod update itself (Kruise ShouldUpdateResourceByResize).
            self.ctx
                .metrics
                .resize(if written.is_ok() { "requested" } else { "failed" });
        }
        written?;
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
        let Some(mut patch) = insitu_core::inplaceupdate::vertical::resize_patch(&pod, resources) else {
            return Ok(());
        };
        // A replaced pod (same name, new uid) fails validation instead of being resized.
        patch["metadata"] = json!({ "uid": uid });
        self.ctx.metrics.write("patch", "pods/resize");
        let written = api
            .patch_subresource("resize", name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await;
        self.ctx
            .metrics
            .resize(if written.is_ok() { "requested" } else { "failed" });
        let written = written.map_err(|e| action_err(format!("resize pod {name}"), e))?;
        self.expect(Expect::PodVersion(
            name.to_string(),
            pod_version(&written.metadata),
        ));
        self.remember(&written);
        Ok(())
    }

    pub(super) async fn set_inplace_ready(&self, name: &str, uid: &str, ready: bool) -> Result<(), Error> {
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
    pub(super) async fn set_inplace_ready_with(
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
                .get_or_create(&cs_labels(&self.ns, &self.owner.name()))
                .observe(secs);
        }
    }
}
