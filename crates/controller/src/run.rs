//! Wires kube-runtime: watches CloneSets, Pods, ControllerRevisions and PVCs into caches and drives reconciles.

use std::sync::Arc;

use futures::StreamExt;
use insitu_api::CloneSet;
use insitu_core::PackedPod;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt, controller};
use kube::{Api, Resource};

use crate::events::EventSink;
use crate::expectations::Expectations;
use crate::reconcile::{error_policy, reconcile};
use crate::{Clock, Config, Context, Metrics};

fn api<K>(client: &kube::Client, ns: &Option<String>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A reflector cache of `api` and the stream of objects it touched (for `owns_stream`). Lean: managedFields
/// are dropped before objects are stored (they are often half the bytes).
fn lean_cache<K>(api: Api<K>) -> (Store<K>, impl futures::Stream<Item = Result<K, watcher::Error>>)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, writer) = reflector::store::<K>();
    let stream = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(|o: &mut K| o.meta_mut().managed_fields = None)
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// Kruise reads the server version once at start (`ShouldUpdateResourceByResize`); an unreadable version
/// means the pre-1.32 path (resources in the pod update), as in Kruise.
async fn resize_subresource(client: &kube::Client) -> bool {
    for attempt in 0..3u64 {
        match client.apiserver_version().await {
            Ok(info) => {
                let yes = insitu_core::vertical::resize_subresource(&info.git_version);
                tracing::info!(
                    version = %info.git_version,
                    resize_subresource = yes,
                    "server version: resizes go through {}",
                    if yes { "pods/resize" } else { "the pod update" }
                );
                return yes;
            }
            Err(e) => {
                tracing::warn!(error = %e, attempt, "cannot read the server version");
                tokio::time::sleep(std::time::Duration::from_millis(200 * (attempt + 1))).await;
            }
        }
    }
    tracing::warn!("server version unknown: resizes go through the pod update (Kruise's pre-1.32 path)");
    false
}

/// Runs the controller until `shutdown` resolves. Returns when the controller stream ends.
pub async fn run(
    client: kube::Client,
    config: Config,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let clonesets: Api<CloneSet> = api(&client, &config.namespace);
    // Pods are cached packed (`PackedPod`): what a plan reads of every pod is in its summary and metadata.
    let pods: Api<PackedPod> = api(&client, &config.namespace);
    let revisions: Api<ControllerRevision> = api(&client, &config.namespace);
    let pvcs: Api<PersistentVolumeClaim> = api(&client, &config.namespace);

    let (pod_store, pod_stream) = lean_cache(pods);
    let (rev_store, rev_stream) = lean_cache(revisions);
    // Kruise watches PVCs and maps them to their owner, so the scale expectations on PVCs get observed and a
    // change to an owned PVC (e.g. deleted behind our back) triggers a reconcile.
    let (pvc_store, pvc_stream) = lean_cache(pvcs);

    // Nodes only for their labels (Kruise's topology-spread scale-down ranker); node changes trigger nothing.
    let (node_store, node_writer) = reflector::store::<Node>();
    let node_stream = watcher(
        Api::<Node>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .modify(|n: &mut Node| {
        n.metadata.managed_fields = None;
        n.metadata.annotations = None;
        n.spec = None;
        n.status = None;
    })
    .reflect(node_writer)
    .for_each(|_| std::future::ready(()));

    let resize_subresource = resize_subresource(&client).await;
    let controller = Controller::new(clonesets, watcher::Config::default().any_semantic())
        .with_config(controller::Config::default().concurrency(config.workers));
    let ctx = Arc::new(Context {
        events: EventSink::new(client.clone(), clock.clone(), metrics.clone(), config.events),
        client,
        clonesets: controller.store(),
        pods: pod_store,
        revisions: rev_store,
        nodes: node_store,
        pvcs: pvc_store,
        summaries: Default::default(),
        barriers: Default::default(),
        warned: Default::default(),
        clock,
        expectations: Expectations::default(),
        metrics,
        config,
        resize_subresource,
    });
    let controller = controller
        .owns_stream(pod_stream)
        .owns_stream(rev_stream)
        .owns_stream(pvc_stream)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "controller event");
            }
        });
    // The node reflector lives as long as the controller (it never ends on its own).
    futures::pin_mut!(controller, node_stream);
    futures::future::select(controller, node_stream).await;
}
