//! Planning cost for one CloneSet with 1k / 10k / 100k pods: mid-rollout (half the pods updated, 10% may
//! start an in-place update this round) and steady (all updated, state annotations present, nothing to do).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use insitu_api::CloneSet;
use insitu_core::revision::active_revisions;
use insitu_core::{FeatureGates, Snapshot};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

fn cloneset(replicas: usize, image: &str) -> CloneSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-web", "generation": 2},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": image}]}},
            "updateStrategy": {"type": "InPlaceIfPossible", "maxUnavailable": "10%",
                               "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}},
        }
    }))
    .unwrap()
}

fn snapshot(n: usize, steady: bool) -> Snapshot {
    let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
    let old = cloneset(n, "nginx:1");
    let r1 = active_revisions(&old, &[]).update;
    let mut cs = cloneset(n, "nginx:2");
    let r2 = active_revisions(&cs, std::slice::from_ref(&r1)).update;
    let (r1n, r2n) = (
        r1.metadata.name.clone().unwrap(),
        r2.metadata.name.clone().unwrap(),
    );
    let pods: Vec<Arc<Pod>> = (0..n)
        .map(|i| {
            let (rev, img) = if steady || i % 2 == 0 { (&r2n, "nginx:2") } else { (&r1n, "nginx:1") };
            let state = format!(
                r#"{{"revision":"{r2n}","updateTimestamp":"2026-01-01T00:00:00Z","lastContainerStatuses":{{"web":{{"imageID":"id:nginx:1"}}}},"updateImages":true,"containerBatchesRecord":[{{"timestamp":"2026-01-01T00:00:10Z","containers":["web"]}}]}}"#
            );
            let p: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("web-{i:06}"), "namespace": "default", "uid": format!("u{i}"),
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                    "labels": {"app": "web", "controller-revision-hash": rev,
                               "pod-template-hash": rev.rsplit('-').next().unwrap(),
                               "apps.kruise.io/cloneset-instance-id": format!("{i:06}"),
                               "lifecycle.apps.kruise.io/state": "Normal"},
                    "annotations": {"apps.kruise.io/inplace-update-state": state}},
                "spec": {"nodeName": format!("node-{}", i % 100), "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                         "containers": [{"name": "web", "image": img}]},
                "status": {"phase": "Running",
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:10Z"},
                        {"type": "InPlaceUpdateReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}],
                    "containerStatuses": [{"name": "web", "image": format!("docker.io/library/{img}"),
                        "imageID": format!("id:{img}"), "ready": true, "restartCount": 0}]}
            }))
            .unwrap();
            Arc::new(p)
        })
        .collect();
    cs.status = Some(insitu_api::CloneSetStatus {
        observed_generation: 2,
        replicas: n as i32,
        current_revision: if steady { r2n.clone() } else { r1n.clone() },
        update_revision: r2n.clone(),
        ..Default::default()
    });
    Snapshot {
        cloneset: Arc::new(cs),
        pods,
        revisions: vec![r1, r2],
        now,
        gates: FeatureGates::default(),
    }
}

fn bench(c: &mut Criterion) {
    for (name, steady) in [("rollout", false), ("steady", true)] {
        let mut g = c.benchmark_group(format!("plan/{name}"));
        g.sample_size(10);
        for n in [1_000usize, 10_000, 100_000] {
            let s = snapshot(n, steady);
            let p = insitu_core::plan(&s);
            assert_eq!(p.actions.is_empty(), steady, "{name}: {:?}", p.explanation);
            g.bench_with_input(BenchmarkId::from_parameter(n), &s, |b, s| {
                b.iter(|| insitu_core::plan(black_box(s)))
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
