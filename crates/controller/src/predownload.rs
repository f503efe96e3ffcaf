//! Kruise's image pre-download for in-place updates, the I/O half: a cache of the ImagePullJobs on the server
//! (the snapshot gives the planner the CloneSet's), and the plan's pre-download steps carried out: ImagePullJobs
//! created, the update revision labelled, the jobs deleted.
//!
//! As Kruise's CloneSet controller, this runs only when `PreDownloadImageForInPlaceUpdate` (and `KruiseDaemon`)
//! are on and the server serves `imagepulljobs.apps.kruise.io/v1beta1` (Kruise `DiscoverGVK` at start). Who pulls
//! is not our business: Kruise's ImagePullJob controller with kruise-daemon, or `insitu nodes` in the simulator.

use futures::{FutureExt, StreamExt};
use insitu_api::CloneSet;
use insitu_core::Action;
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
    /// Names of the jobs whose controller reference is `uid` (Kruise `DeleteJobsForWorkload`'s filter), once
    /// the cache has synced (until then the round plans no pre-download step; the next one does).
    pub fn owned_by(&self, ns: &str, uid: &str) -> Option<Vec<String>> {
        self.store.wait_until_ready().now_or_never()?.ok()?;
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
        Some(names)
    }

    fn api(&self, client: &Client, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), ns, &self.resource)
    }
}

/// Carries out the plan's pre-download steps for one CloneSet, after the round's revision writes and before its
/// pods are scaled and updated. Errors are logged and evented, never fail the reconcile (Kruise logs them and
/// goes on).
pub async fn run(ctx: &Context, jobs: Option<&ImagePullJobs>, cs: &CloneSet, steps: &[&Action]) {
    let Some(jobs) = jobs else { return };
    let ns = cs.namespace().unwrap_or_default();
    let api = jobs.api(&ctx.client, &ns);
    for step in steps {
        match step {
            Action::CreateImagePullJob { name, image, job } => {
                create(ctx, &api, cs, name, image, job).await;
            }
            Action::LabelRevision { name, label } => {
                let revs: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
                let patch = json!({"metadata": {"labels": {label: "true"}}});
                ctx.metrics.write("patch", "controllerrevisions");
                if let Err(e) = revs
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::warn!(error = %e, revision = %name, label, "cannot label the revision");
                }
            }
            Action::DeleteImagePullJob { name } => {
                tracing::info!(job = %name, cloneset = %cs.name_any(), "deleting ImagePullJob for workload");
                ctx.metrics.write("delete", "imagepulljobs");
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(e) if is_status(&e, 404) => {}
                    Err(e) => tracing::warn!(error = %e, job = %name, "cannot delete the ImagePullJob"),
                }
            }
            _ => {}
        }
    }
}

async fn create(
    ctx: &Context,
    api: &Api<DynamicObject>,
    cs: &CloneSet,
    name: &str,
    image: &str,
    job: &serde_json::Value,
) {
    let obj: DynamicObject = match serde_json::from_value(job.clone()) {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %e, job = %name, "ImagePullJob does not encode");
            return;
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
