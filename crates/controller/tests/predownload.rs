//! Image pre-download for in-place updates end to end on virtual time: the controller creates the ImagePullJob
//! (Kruise's `PreDownloadImageForInPlaceUpdate`), the simulated nodes execute it, and the rollout's later
//! batches start the new image without pulling it.

mod common;

use std::time::Duration;

use common::{Harness, cloneset, run};
use futures::{StreamExt, TryStreamExt};
use insitu_controller::Config;
use insitu_core::FeatureGates;
use insitu_sim::cluster::SimConfig;
use insitu_sim::kubelet::{ImageProfile, ImageProfiles};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;

const NEW: &str = "nginx:1.20.0";

fn jobs_api(h: &Harness) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "apps.kruise.io".into(),
        version: "v1beta1".into(),
        api_version: "apps.kruise.io/v1beta1".into(),
        kind: "ImagePullJob".into(),
        plural: "imagepulljobs".into(),
    };
    Api::namespaced_with(h.client.clone(), "default", &ar)
}

/// Rolls `web` (6 pods, 3 nodes, one pod at a time, pre-download parallelism 3) from nginx:1.19.0 to NEW
/// (a 30 s pull); returns the pods whose kubelet pulled NEW and those that found it already present, and the
/// ImagePullJob's status once it succeeded on the 3 nodes (when `executor`), and the rollout's virtual seconds.
async fn roll(executor: bool) -> (Vec<String>, Vec<String>, Value, u64) {
    let images = ImageProfiles::default().with(
        NEW,
        ImageProfile {
            pull: Duration::from_secs(30),
            ..ImageProfile::default()
        },
    );
    let mut h = Harness::without_controller_with(SimConfig {
        nodes: 3,
        seed: 5,
        images,
        image_pull_jobs: executor,
        ..SimConfig::default()
    })
    .await;
    let gates = FeatureGates::parse("PreDownloadImageForInPlaceUpdate=true").expect("gates");
    h.start_controller_with(Config {
        gates,
        ..Config::default()
    });
    let mut cs = cloneset("web", 6);
    cs.metadata.annotations = Some(
        [(
            "apps.kruise.io/image-predownload-parallelism".to_string(),
            "3".to_string(),
        )]
        .into(),
    );
    h.create(&cs).await;
    h.wait_ready("web", 6, Some("nginx:1.19.0"), 300).await;

    let before = h
        .pods_api()
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .metadata
        .resource_version
        .expect("list resourceVersion");
    h.set_image("web", NEW).await;
    let t0 = tokio::time::Instant::now();
    // The job pulls onto the 3 nodes at once (parallelism 3) and succeeds there.
    let jobs = jobs_api(&h);
    let mut status = Value::Null;
    let mut job_rv = None;
    for _ in 0..120 {
        let list = jobs.list(&ListParams::default()).await.expect("list jobs");
        status = list
            .items
            .first()
            .and_then(|j| j.data.get("status").cloned())
            .unwrap_or(Value::Null);
        if !executor && !list.items.is_empty() {
            assert_eq!(list.items.len(), 1, "one ImagePullJob for the one container");
            job_rv = list.items[0].metadata.resource_version.clone();
            break;
        }
        if status.get("succeeded").and_then(Value::as_i64) == Some(3) {
            break;
        }
        h.sleep(1).await;
    }

    h.wait_ready("web", 6, Some(NEW), 900).await;
    let took = t0.elapsed().as_secs();
    if !executor {
        created_before_any_pod_write(&h, &before, job_rv.as_ref()).await;
    }
    let events: Api<Event> = Api::namespaced(h.client.clone(), "default");
    let evs = events.list(&ListParams::default()).await.expect("events").items;
    let pods = h.pods("web").await;
    let (mut pulled, mut present) = (Vec::new(), Vec::new());
    for p in &pods {
        let name = p.metadata.name.clone().unwrap_or_default();
        let mine = evs
            .iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name.as_str()))
            .filter_map(|e| e.message.as_deref());
        for m in mine {
            if m == format!("Pulling image \"{NEW}\"") {
                pulled.push(name.clone());
            } else if m == format!("Container image \"{NEW}\" already present on machine") {
                present.push(name.clone());
            }
        }
    }
    h.stop();
    (pulled, present, status, took)
}

/// Kruise creates the ImagePullJob in the round that creates the update revision, before that round updates
/// any pod: the job's creation comes before the first pod write of the rollout in the apiserver's order
/// (the embedded apiserver's resourceVersions count its writes, as etcd's revisions do). With nothing executing
/// the job, its resourceVersion (`job_rv`, as first listed) is the one it was created with.
async fn created_before_any_pod_write(h: &Harness, before: &str, job_rv: Option<&String>) {
    let rv =
        |s: Option<&String>| -> u64 { s.and_then(|s| s.parse().ok()).expect("a numeric resourceVersion") };
    let job_rv = rv(job_rv);
    let mut stream = h
        .pods_api()
        .watch(&WatchParams::default(), before)
        .await
        .expect("watch pods")
        .boxed();
    let first = loop {
        match stream.try_next().await.expect("watch event") {
            Some(WatchEvent::Modified(p)) => break p,
            Some(WatchEvent::Bookmark(_)) => continue,
            other => panic!("unexpected first pod event of the rollout: {other:?}"),
        }
    };
    let pod_rv = rv(first.metadata.resource_version.as_ref());
    assert!(
        job_rv < pod_rv,
        "the ImagePullJob (resourceVersion {job_rv}) was created after the rollout's first pod write \
         ({pod_rv}, pod {:?})",
        first.metadata.name
    );
}

#[test]
fn later_batches_start_the_pre_downloaded_image_without_pulling() {
    run(async {
        let (pulled, present, status, with) = roll(true).await;
        assert_eq!(
            status["succeeded"], 3,
            "the ImagePullJob succeeds on the 3 nodes: {status}"
        );
        assert_eq!(status["desired"], 3, "{status}");
        assert_eq!(status["message"], "job has completed", "{status}");
        // Only the first batch's pod pulled NEW (sharing the job's pull under way on its node); every
        // later pod found it already present.
        assert!(pulled.len() <= 1, "pods that pulled {NEW}: {pulled:?}");
        assert_eq!(
            present.len() + pulled.len(),
            6,
            "present {present:?}, pulled {pulled:?}"
        );

        // The same rollout with nothing executing the job (it exists, with no status): the first pod on
        // each of the 3 nodes pulls NEW itself, 30 s in its batch, twice more than with the executor.
        let (pulled, present, status, without) = roll(false).await;
        assert!(status.is_null(), "{status}");
        assert_eq!(pulled.len(), 3, "pods that pulled {NEW}: {pulled:?}");
        assert_eq!(present.len(), 3, "{present:?}");
        eprintln!("rollout of 6 pods: {with} s with the executor, {without} s without");
        assert!(
            with + 50 <= without,
            "the rollout took {with} s with the executor, {without} s without"
        );
    });
}
