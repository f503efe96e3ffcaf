//! Kruise's image pre-download for in-place updates, the I/O half: ImagePullJobs created, their revision labelled
//! and the jobs deleted as `core::predownload` plans them, from a cache of the ImagePullJobs on the server.
//!
//! As Kruise's CloneSet controller, this runs only when `PreDownloadImageForInPlaceUpdate` (and `KruiseDaemon`)
//! are on and the server serves `imagepulljobs.apps.kruise.io/v1beta1` (Kruise `DiscoverGVK` at start). Who pulls
//! is not our business: Kruise's ImagePullJob controller with kruise-daemon, or `insitu nodes` in the simulator.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use insitu_api::CloneSet;
use insitu_core::predownload::{self, Input};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::Context;
use crate::error::is_status;
use crate::events::Severity;

/// Kruise's event reasons (Normal, both of them, as Kruise records them).
pub const CREATED_IMAGE_PULL_JOB: &str = "CreatedImagePullJob";
pub const FAILED_CREATE_IMAGE_PULL_JOB: &str = "FailedCreateImagePullJob";

/// The ImagePullJobs the server holds, when pre-download is on.
#[derive(Clone)]
pub struct ImagePullJobs {
    resource: ApiResource,
    store: Store<DynamicObject>,
}

/// The cache of ImagePullJobs and the stream that fills it (never ends on its own).
pub fn cache(
    client: &Client,
    resource: ApiResource,
    namespace: &Option<String>,
) -> (ImagePullJobs, futures::future::BoxFuture<'static, ()>) {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let writer = reflector::store::Writer::<DynamicObject>::new(resource.clone());
    let store = writer.as_reader();
    let stream = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(|o: &mut DynamicObject| o.metadata.managed_fields = None)
        .reflect(writer)
        .for_each(|_| std::future::ready(()))
        .boxed();
    (ImagePullJobs { resource, store }, stream)
}

impl ImagePullJobs {
    /// Names of the jobs whose controller reference is `uid` (Kruise `DeleteJobsForWorkload`'s filter).
    fn owned_by(&self, ns: &str, uid: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .store
            .state()
            .iter()
            .filter(|j| j.metadata.namespace.as_deref() == Some(ns))
            .filter(|j| {
                j.owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.uid == uid)
            })
            .map(|j| j.name_any())
            .collect();
        names.sort();
        names
    }

    fn api(&self, client: &Client, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), ns, &self.resource)
    }
}

/// Kruise's pre-download step for one CloneSet, after the round's revision writes and before its pods are
/// scaled and updated. Errors are logged and evented, never fail the reconcile (Kruise logs them and goes on).
///
/// `created` are the revisions this round just created: Kruise's `getActiveRevisions` creates the update
/// revision and `createImagePullJobsForInPlaceUpdate` uses it in the same round, so the jobs exist as soon as
/// the rollout starts, not one reconcile later when the cache shows the revision (Kruise's e2e gives them 3 s
/// after the CloneSet reports `Updated`).
pub async fn sync(
    ctx: &Context,
    cs: &CloneSet,
    current: &str,
    update: &str,
    created: &[&ControllerRevision],
) {
    let Some(jobs) = &ctx.image_pull_jobs else { return };
    if jobs.store.wait_until_ready().now_or_never().is_none() {
        return; // not synced yet: the next reconcile does it
    }
    let ns = cs.namespace().unwrap_or_default();
    let uid = cs.uid().unwrap_or_default();
    let find = |name: &str| -> Option<Arc<ControllerRevision>> {
        ctx.revisions
            .state()
            .into_iter()
            .find(|r| {
                r.metadata.namespace.as_deref() == Some(ns.as_str())
                    && r.metadata.name.as_deref() == Some(name)
                    && r.owner_references().iter().any(|o| o.uid == uid)
            })
            .or_else(|| {
                created
                    .iter()
                    .find(|r| r.metadata.name.as_deref() == Some(name))
                    .map(|r| Arc::new((*r).clone()))
            })
    };
    let (cur, upd) = (find(current), find(update));
    let owned = jobs.owned_by(&ns, &uid);
    let p = predownload::plan(&Input {
        cs,
        current: cur.as_deref(),
        update: upd.as_deref(),
        owned_jobs: &owned,
        vertical: ctx.config.gates.in_place_workload_vertical_scaling,
    });
    tracing::debug!(cloneset = %format!("{ns}/{}", cs.name_any()), "{}", p.why);
    let api = jobs.api(&ctx.client, &ns);
    for job in &p.create {
        let name = job["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let image = job["spec"]["image"].as_str().unwrap_or_default().to_string();
        let obj: DynamicObject = match serde_json::from_value(job.clone()) {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(error = %e, job = %name, "ImagePullJob does not encode");
                continue;
            }
        };
        ctx.metrics.write("create", "imagepulljobs");
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => ctx.events.emit(
                cs,
                Severity::Normal,
                CREATED_IMAGE_PULL_JOB,
                format!("created ImagePullJob {name} for image: {image}"),
            ),
            Err(e) if is_status(&e, 409) => {}
            Err(e) => ctx.events.emit(
                cs,
                Severity::Normal,
                FAILED_CREATE_IMAGE_PULL_JOB,
                format!("failed to create ImagePullJob {name}: {e}"),
            ),
        }
    }
    if let Some((rev, label)) = &p.label_revision {
        let revs: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = json!({"metadata": {"labels": {*label: "true"}}});
        ctx.metrics.write("patch", "controllerrevisions");
        if let Err(e) = revs
            .patch(rev, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(error = %e, revision = %rev, label, "cannot label the revision");
        }
    }
    for name in &p.delete {
        tracing::info!(job = %name, cloneset = %cs.name_any(), "deleting ImagePullJob for workload");
        ctx.metrics.write("delete", "imagepulljobs");
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => tracing::warn!(error = %e, job = %name, "cannot delete the ImagePullJob"),
        }
    }
}
