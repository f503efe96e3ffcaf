//! The status write that ends a round (Kruise `updateCloneSetStatus`, `updateStatefulSetStatus`).

use insitu_api::CloneSet;
use insitu_api::statefulset::StatefulSet;
use kube::Api;
use kube::api::{ApiResource, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;

use super::{Exec, action_err};
use crate::Error;
use crate::acknowledged::Acknowledged;
use crate::workload::Workload;

impl Exec<'_> {
    /// Writes the planned status of the workload (CloneSet or Advanced StatefulSet), in v1beta1 where served.
    pub(super) async fn write_status(&self, status: &impl Serialize) -> Result<(), Error> {
        let ctx = self.ctx;
        // A JSON patch `add /status` replaces the whole status atomically, clearing fields we no longer set.
        // The status is the same in both versions (conversion carries it verbatim).
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/status", "value": status}]))?;
        let started = std::time::Instant::now();
        let (name, pp) = (self.owner.name(), PatchParams::default());
        // The answer is acknowledged, not decoded (`crate::acknowledged`: a deep object would not decode).
        let resource = match self.owner {
            Workload::CloneSet(_) => {
                ctx.metrics.write("patch", "clonesets/status");
                ctx.server
                    .status_resource
                    .clone()
                    .unwrap_or_else(|| ApiResource::erase::<CloneSet>(&()))
            }
            Workload::StatefulSet(_) => {
                ctx.metrics.write("patch", "statefulsets/status");
                ApiResource::erase::<StatefulSet>(&())
            }
        };
        let written = Api::<Acknowledged>::namespaced_with(ctx.client.clone(), &self.ns, &resource)
            .patch_status(&name, &pp, &Patch::<()>::Json(patch))
            .await
            .map(|_| ());
        written.map_err(|e| action_err(format!("write {} status", self.owner.kind()), e))?;
        tracing::debug!(workload = %self.key, ms = started.elapsed().as_millis() as u64, "status written");
        Ok(())
    }
}
