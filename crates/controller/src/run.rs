//! Wires kube-runtime: watches CloneSets (and, when enabled, Advanced StatefulSets), Pods, ControllerRevisions
//! and PVCs into caches and drives reconciles.

use std::sync::Arc;

use futures::{FutureExt, StreamExt, TryStreamExt};
use insitu_api::CloneSet;
use insitu_core::PackedPod;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt, controller};
use kube::{Api, Resource};

use crate::context::{Server, Stores};
use crate::events::EventSink;
use crate::expectations::Expectations;
use crate::health::Health;
use crate::lenient::{self, Lenient, Placeholder, Reporter};
use crate::reconcile::{Reconciler, error_policy};
use crate::stored::StoredCloneSet;
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

/// What a lenient watch decodes: a cluster object with a placeholder for items that fail to decode.
trait Watched:
    Resource<DynamicType = ()>
    + Placeholder
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<T> Watched for T where
    T: Resource<DynamicType = ()>
        + Placeholder
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// A reflector cache of `api` and the stream of objects it touched (for `owns_stream`). Each item decoded
/// on its own (`lenient`): an undecodable object is reported and left out, the rest syncs. Lean:
/// managedFields are dropped before objects are stored (they are often half the bytes).
fn lean_cache<K>(
    api: Api<Lenient<K>>,
    wc: watcher::Config,
    reporter: Reporter,
    health: Arc<Health>,
) -> (Store<K>, impl futures::Stream<Item = Result<K, watcher::Error>>)
where
    K: Watched,
{
    lean_cache_as(api, wc, |k| k, reporter, health)
}

/// The watcher's events of `S` as events of `K`.
fn map_event<S, K>(ev: watcher::Event<S>, into: impl Fn(S) -> K) -> watcher::Event<K> {
    match ev {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::InitApply(s) => watcher::Event::InitApply(into(s)),
        watcher::Event::Apply(s) => watcher::Event::Apply(into(s)),
        watcher::Event::Delete(s) => watcher::Event::Delete(into(s)),
    }
}

/// `lean_cache` of objects watched as `S` and stored as `K` (CloneSets: watched at the storage version,
/// stored as v1alpha1, see `stored`).
fn lean_cache_as<S, K>(
    api: Api<Lenient<S>>,
    wc: watcher::Config,
    into: fn(S) -> K,
    reporter: Reporter,
    health: Arc<Health>,
) -> (Store<K>, impl futures::Stream<Item = Result<K, watcher::Error>>)
where
    S: Watched,
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let cache = K::plural(&()).into_owned();
    let stream = lenient::decoded(watcher(api, wc), reporter)
        .map_ok(move |ev| map_event(ev, into))
        .inspect(move |r| {
            health.set_failing(&cache, r.is_err());
            if let Ok(watcher::Event::InitDone) = r {
                health.set_synced(&cache);
            }
        })
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
                let yes = insitu_core::inplaceupdate::vertical::resize_subresource(&info.git_version);
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

/// The CloneSets that own `obj`, matched by group and kind whatever the version, as Kubernetes' garbage collector
/// matches owners. kube-runtime's `owns` compares the whole apiVersion, so pods that Kruise created with
/// `apps.kruise.io/v1beta1` owner references (and ours, written with the storage version) would never reach the
/// reconcile.
pub fn owning_clonesets<K: Resource>(obj: &K) -> Vec<ObjectRef<CloneSet>> {
    crate::workload::owners_of_kind(obj, "CloneSet")
}

/// Runs the controller until `shutdown` resolves. Returns when the controller stream ends.
pub async fn run(
    client: kube::Client,
    config: Config,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let health = Arc::new(Health::new(clock.clone(), config.wedged_after));
    run_with(client, config, clock, metrics, health, shutdown).await
}

/// `run`, reporting to `health` (for `/healthz` and `/readyz`). Once `shutdown` resolves, running reconciles
/// get `config.shutdown_timeout` to finish (kube-runtime's graceful shutdown), then the controller stops
/// regardless: a reconcile waiting on a cache that cannot sync never holds the process.
pub async fn run_with(
    client: kube::Client,
    config: Config,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let shutdown = shutdown.shared();
    let drain = config.shutdown_timeout;
    let deadline = {
        let shutdown = shutdown.clone();
        async move {
            shutdown.await;
            tokio::time::sleep(drain).await;
            tracing::warn!(
                timeout_s = drain.as_secs(),
                "reconciles still running at the shutdown deadline: stopping anyway"
            );
        }
    };
    let events = EventSink::new(client.clone(), clock.clone(), metrics.clone(), config.events);
    let reporter = Reporter::new(metrics.clone(), events.clone());
    // Pods are cached packed (`PackedPod`): what a plan reads of every pod is in its summary and metadata.
    let pods: Api<Lenient<PackedPod>> = api(&client, &config.namespace);
    let revisions: Api<Lenient<ControllerRevision>> = api(&client, &config.namespace);
    let pvcs: Api<Lenient<PersistentVolumeClaim>> = api(&client, &config.namespace);

    let wc = crate::initial_list::config(config.initial_list, &api(&client, &config.namespace)).await;
    // Kruise: the server's v1beta1 resources, read once at start (CloneSet watch and status, ImagePullJobs).
    let v1beta1 = crate::discovery::kruise_v1beta1(&client).await;
    let (cs_store, cs_stream) = if crate::discovery::served(&v1beta1, "clonesets", None).is_some() {
        let api: Api<Lenient<StoredCloneSet>> = api(&client, &config.namespace);
        let (store, stream) = lean_cache_as(api, wc.clone(), |s| s.0, reporter.clone(), health.clone());
        (store, stream.boxed())
    } else {
        let api: Api<Lenient<CloneSet>> = api(&client, &config.namespace);
        let (store, stream) = lean_cache(api, wc.clone(), reporter.clone(), health.clone());
        (store, stream.boxed())
    };
    let (pod_store, pod_stream) = lean_cache(pods, wc.clone(), reporter.clone(), health.clone());
    let (rev_store, rev_stream) = lean_cache(revisions, wc.clone(), reporter.clone(), health.clone());
    // The Advanced StatefulSet controller shares these caches: their touched objects are fanned out to it as
    // references to the sets owning them (no second watch of the same pods).
    let (sts_tx, sts_rx) = futures::channel::mpsc::unbounded();
    let fan = move |owners: Vec<ObjectRef<insitu_api::statefulset::StatefulSet>>| {
        for o in owners {
            let _ = sts_tx.unbounded_send(o);
        }
    };
    let (fan_pods, fan_revs, fan_pvcs) = (fan.clone(), fan.clone(), fan);
    let pod_stream = pod_stream.inspect(move |r| {
        if let Ok(p) = r {
            fan_pods(crate::statefulset::owning_statefulsets(p));
        }
    });
    let rev_stream = rev_stream.inspect(move |r| {
        if let Ok(o) = r {
            fan_revs(crate::statefulset::owning_statefulsets(o));
        }
    });
    // Kruise watches PVCs and maps them to their owner, so the scale expectations on PVCs get observed and a
    // change to an owned PVC (e.g. deleted behind our back) triggers a reconcile.
    let (pvc_store, pvc_stream) = lean_cache(pvcs, wc.clone(), reporter.clone(), health.clone());
    let pvc_stream = pvc_stream.inspect(move |r| {
        if let Ok(c) = r {
            fan_pvcs(crate::statefulset::owning_statefulsets(c));
        }
    });
    let sts = config.statefulset.then(|| {
        let api: Api<Lenient<insitu_api::statefulset::StatefulSet>> = api(&client, &config.namespace);
        lean_cache(api, wc.clone(), reporter.clone(), health.clone())
    });

    // Nodes only for their labels (Kruise's topology-spread scale-down ranker); node changes trigger nothing.
    let (node_store, node_writer) = reflector::store::<Node>();
    let node_stream = lenient::decoded(
        watcher(Api::<Lenient<Node>>::all(client.clone()), wc.clone()),
        reporter,
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
    // Kruise: pre-download only with its gates on and the ImagePullJob kind served (discovered once at start).
    let gates = &config.gates;
    let ipj_resource = if gates.pre_download_image_for_in_place_update && gates.kruise_daemon {
        crate::discovery::served(&v1beta1, "imagepulljobs", None)
    } else {
        None
    };
    // Kruise master's controller works on v1beta1, the storage version: its status writes need no conversion.
    // Writing v1alpha1 costs the apiserver three conversion-webhook calls per write (to v1alpha1 to patch, back
    // to v1beta1 to store, the response), each a round trip into this process: 0.7–1.6 s per status write on a
    // loaded 2-core machine, against ~0.1 s for a pod write (Kruise's 3 s status.replicas specs missed it).
    let status_resource = crate::discovery::served(&v1beta1, "clonesets", Some("status"));
    let (image_pull_jobs, ipj_stream) = match ipj_resource {
        Some(r) => {
            tracing::info!("image pre-download on: ImagePullJobs for in-place updates");
            let (jobs, stream) = crate::predownload::cache(&client, r, &config.namespace);
            (Some(jobs), stream)
        }
        None => (None, futures::future::pending::<()>().boxed()),
    };
    let reconciler = crate::reconcile::reconciler(config.offload.clone());
    let controller = Controller::for_stream(cs_stream, cs_store)
        .with_config(controller::Config::default().concurrency(config.workers));
    let ctx = Context {
        events,
        client,
        caches: Stores {
            clonesets: controller.store(),
            pods: pod_store,
            revisions: rev_store,
            nodes: node_store,
            pvcs: pvc_store,
        },
        server: Server {
            resize_subresource,
            status_resource,
        },
        clock,
        expectations: Expectations::default(),
        metrics,
        health,
        config,
    };
    let ctx = Arc::new(Reconciler::new(ctx, image_pull_jobs));
    let statefulsets = match sts {
        Some((store, stream)) => Controller::for_stream(stream, store)
            .with_config(controller::Config::default().concurrency(ctx.ctx.config.workers))
            .reconcile_on(sts_rx)
            .graceful_shutdown_on(shutdown.clone())
            .run(
                crate::statefulset::reconcile,
                crate::statefulset::error_policy,
                ctx.clone(),
            )
            .for_each(|res| async move {
                if let Err(e) = res {
                    tracing::debug!(error = %e, "statefulset controller event");
                }
            })
            .boxed(),
        None => {
            drop(sts_rx);
            futures::future::ready(()).boxed()
        }
    };
    let controller = controller
        .watches_stream(pod_stream, |p| owning_clonesets(&p))
        .watches_stream(rev_stream, |r| owning_clonesets(&r))
        .watches_stream(pvc_stream, |c| owning_clonesets(&c))
        .graceful_shutdown_on(shutdown)
        .run(reconciler, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "controller event");
            }
        });
    // The node reflector lives as long as the controller (it never ends on its own).
    let background = futures::future::join(node_stream, ipj_stream);
    // The StatefulSet controller ends with the CloneSet controller (both stop on `shutdown`).
    let controller = futures::future::join(controller, statefulsets);
    futures::pin_mut!(controller, background, deadline);
    futures::future::select(futures::future::select(controller, background), deadline).await;
}
