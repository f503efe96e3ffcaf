//! ControllerRevision writes: a new template's revision, a rollback's bump, history cleanup (Kruise
//! `controllerHistory`).

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{Exec, action_err};
use crate::Error;
use crate::error::{is_already_exists, is_status};
use crate::expectations::Expect;

impl Exec<'_> {
    fn revisions(&self) -> Api<ControllerRevision> {
        Api::namespaced(self.ctx.client.clone(), &self.ns)
    }

    pub(super) async fn create_revision(&self, revision: &ControllerRevision) -> Result<(), Error> {
        self.ctx.metrics.write("create", "controllerrevisions");
        match self.revisions().create(&PostParams::default(), revision).await {
            Ok(_) => {}
            Err(e) if is_already_exists(&e) => {} // already there: the next plan sees it
            Err(e) => return Err(action_err(format!("create revision {}", revision.name_any()), e)),
        }
        self.expect(Expect::RevisionCreated(revision.name_any()));
        Ok(())
    }

    /// Rollback to an equal older revision: its `.revision` number is bumped instead of a new one created.
    pub(super) async fn bump_revision(
        &self,
        name: &str,
        revision: i64,
        vct_hash: Option<&str>,
    ) -> Result<(), Error> {
        self.ctx.metrics.write("patch", "controllerrevisions");
        let body = match vct_hash {
            Some(h) => {
                json!({ "revision": revision, "metadata": {"annotations": {insitu_api::keys::VCT_HASH_ANNOTATION: h}} })
            }
            None => json!({ "revision": revision }),
        };
        self.revisions()
            .patch(name, &PatchParams::default(), &Patch::Merge(body))
            .await
            .map_err(|e| action_err(format!("bump revision {name}"), e))?;
        Ok(())
    }

    pub(super) async fn delete_revision(&self, name: &str) -> Result<(), Error> {
        self.ctx.metrics.write("delete", "controllerrevisions");
        match self.revisions().delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(action_err(format!("delete revision {name}"), e)),
        }
    }
}
