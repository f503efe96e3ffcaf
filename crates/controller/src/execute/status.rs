//! The CloneSet status write that ends a round (Kruise `updateCloneSetStatus`).

use insitu_api::{CloneSet, CloneSetStatus};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{Exec, action_err};
use crate::Error;
use crate::acknowledged::Acknowledged;

impl Exec<'_> {
    /// Writes the planned status of the CloneSet.
    pub(super) async fn write_status(&self, status: &CloneSetStatus) -> Result<(), Error> {
        let ctx = self.ctx;
        // A JSON patch `add /status` replaces the whole status atomically, clearing fields we no longer set.
        // The status is the same in both versions (conversion carries it verbatim).
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/status", "value": status}]))?;
        ctx.metrics.write("patch", "clonesets/status");
        let started = std::time::Instant::now();
        let (name, pp) = (self.cs.name_any(), PatchParams::default());
        // The answer is acknowledged, not decoded (`crate::acknowledged`: a deep CloneSet would not decode).
        let resource = ctx
            .server
            .status_resource
            .clone()
            .unwrap_or_else(|| kube::api::ApiResource::erase::<CloneSet>(&()));
        let written = Api::<Acknowledged>::namespaced_with(ctx.client.clone(), &self.ns, &resource)
            .patch_status(&name, &pp, &Patch::<()>::Json(patch))
            .await
            .map(|_| ());
        written.map_err(|e| action_err("write CloneSet status", e))?;
        tracing::debug!(cloneset = %self.key, ms = started.elapsed().as_millis() as u64, "status written");
        Ok(())
    }
}
