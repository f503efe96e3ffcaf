//! Heap profile of the controller's pod cache: the bytes a cached pod costs, by part, counted with dhat.
//!
//! `cargo run --release -p insitu-controller --example pod_cache [PODS]` (default 10,000). The pods are what
//! a CloneSet's pods look like after an in-place update on kube-apiserver v1.37 (the fields its admission and
//! a kubelet fill in, Kruise's labels and in-place state annotation), each with its own name, UID, node, IPs,
//! times and container ID. The figures are bytes the program asked for (dhat counts requests); jemalloc
//! rounds each request up to its size class, so resident memory is ~10–20% more.

use std::sync::Arc;

use insitu_api::CloneSet;
use insitu_controller::snapshot::SummaryCache;
use insitu_core::PackedPod;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::{reflector, watcher};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const OWNER_UID: &str = "4c9666d9-43b0-49ad-8198-b44e7795dc4b";

fn pod_json(i: usize) -> String {
    let name = format!("web-{i:05x}");
    let (a, b) = (i / 250, i % 250);
    let conditions: Vec<serde_json::Value> = [
        "InPlaceUpdateReady",
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| {
        let at = format!("2026-12-03T10:4{}:{:02}Z", i % 10, i % 60);
        serde_json::json!({"type": t, "status": "True", "lastTransitionTime": at})
    })
    .collect();
    let cid = format!(
        "{:064x}",
        (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
    );
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "generateName": "web-", "namespace": "default",
            "uid": format!("981fc355-58d7-415b-a779-{i:012x}"), "resourceVersion": format!("{}", 1_796_294_033 + i),
            "creationTimestamp": "2026-12-03T10:34:24Z",
            "labels": {"app": "web", "apps.kruise.io/cloneset-instance-id": &name[4..],
                "controller-revision-hash": "web-cfd9b4b7d", "lifecycle.apps.kruise.io/state": "Normal",
                "pod-template-hash": "cfd9b4b7d"},
            "annotations": {
                "lifecycle.apps.kruise.io/timestamp": "2026-12-03T10:34:24Z",
                "apps.kruise.io/inplace-update-state": format!(
                    "{{\"revision\":\"web-cfd9b4b7d\",\"updateTimestamp\":\"2026-12-03T10:40:0{}Z\",\
                     \"lastContainerStatuses\":{{\"web\":{{\"imageID\":\"docker.io/library/nginx@sha256:\
                     87a5ae7899618b7475c3a662bba5c73da914c6621d6e6ec3f8bccbeb1df8a326\"}}}},\
                     \"updateImages\":true}}", i % 10)
            },
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                "uid": OWNER_UID, "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "containers": [{"name": "web", "image": "nginx:1.20.0", "imagePullPolicy": "IfNotPresent",
                "resources": {}, "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "name": format!("kube-api-access-{}", &name[4..]), "readOnly": true}]}],
            "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "nodeName": format!("node-{}", i % 100),
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
            "readinessGates": [{"conditionType": "InPlaceUpdateReady"}], "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "tolerationSeconds": 300},
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
                    "tolerationSeconds": 300}],
            "volumes": [{"name": format!("kube-api-access-{}", &name[4..]), "projected": {"defaultMode": 420,
                "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}]
        },
        "status": {
            "conditions": conditions,
            "containerStatuses": [{"containerID": format!("containerd://{cid}"),
                "image": "docker.io/library/nginx:1.20.0",
                "imageID": "docker.io/library/nginx@sha256:87a5ae7899618b7475c3a662bba5c73da914c6621d6e6ec3f8bccbeb1df8a326",
                "lastState": {"terminated": {"containerID": format!("containerd://{}", &cid[..60]), "exitCode": 0,
                    "reason": "Completed", "startedAt": "2026-12-03T10:34:27Z", "finishedAt": "2026-12-03T10:40:01Z"}},
                "name": "web", "ready": true, "restartCount": 1, "started": true,
                "state": {"running": {"startedAt": format!("2026-12-03T10:40:{:02}Z", i % 60)}}}],
            "hostIP": format!("172.16.{a}.{b}"), "hostIPs": [{"ip": format!("172.16.{a}.{b}")}],
            "phase": "Running", "podIP": format!("10.{a}.{b}.7"), "podIPs": [{"ip": format!("10.{a}.{b}.7")}],
            "qosClass": "BestEffort", "startTime": "2026-12-03T10:34:24Z"
        }
    })
    .to_string()
}

fn live() -> i64 {
    dhat::HeapStats::get().curr_bytes as i64
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let raw: Vec<String> = (0..n).map(pod_json).collect();
    let json_bytes: usize = raw.iter().map(String::len).sum();
    let per = |bytes: i64| bytes as f64 / n as f64;

    // The parts, each measured alone.
    let t = live();
    let metas: Vec<ObjectMeta> = raw
        .iter()
        .map(|r| {
            serde_json::from_str::<Pod>(r)
                .map(|p| p.metadata)
                .unwrap_or_default()
        })
        .collect();
    let meta_heap = live() - t - (metas.capacity() * size_of::<ObjectMeta>()) as i64;
    drop(metas);

    let t = live();
    let mut packed: Vec<Arc<PackedPod>> = Vec::with_capacity(n);
    packed.extend(
        raw.iter()
            .filter_map(|r| serde_json::from_str(r).ok())
            .map(Arc::new),
    );
    // The `Arc`s and what they hold, as the store keeps them (its map's slots aside).
    let packed_all = live() - t - (n * size_of::<Arc<PackedPod>>()) as i64;
    let bodies: usize = packed.iter().map(|p| p.packed_len()).sum();
    drop(packed);

    // The cache as the controller holds it: the reflector's store, then the summaries a snapshot keeps.
    let t = live();
    let (reader, mut writer) = reflector::store::<PackedPod>();
    writer.apply_watcher_event(&watcher::Event::Init);
    for r in &raw {
        if let Ok(p) = serde_json::from_str::<PackedPod>(r) {
            writer.apply_watcher_event(&watcher::Event::InitApply(p));
        }
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let store = live() - t;
    let cs: CloneSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "default", "uid": OWNER_UID},
        "spec": {"replicas": n, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.20.0"}]}}}
    }))
    .expect("a valid CloneSet");
    let t = live();
    let cache = SummaryCache::default();
    let state: Vec<Arc<PackedPod>> = reader.state();
    let (summaries, _) = cache.refresh(&cs, &state, |_| true);
    drop(summaries);
    drop(state);
    let summaries = live() - t;

    println!("pod cache heap profile, {n} pods (bytes requested, dhat; per pod)");
    println!(
        "  pod as JSON from the apiserver (managedFields aside)  {:>8.0}",
        json_bytes as f64 / n as f64
    );
    println!(
        "  Arc<PackedPod>, whole (struct + heap)                 {:>8.0}",
        per(packed_all)
    );
    println!(
        "    Arc + struct (metadata, summary facts, body ptrs)   {:>8}",
        size_of::<PackedPod>() + 16
    );
    println!(
        "    metadata heap (names, labels, annotations, owner)   {:>8.0}",
        per(meta_heap)
    );
    println!(
        "    spec + status, LZ4 against the reference            {:>8.0}",
        per(bodies as i64)
    );
    println!(
        "    other (node name, the shared reference)             {:>8.0}",
        per(packed_all - meta_heap - bodies as i64) - (size_of::<PackedPod>() + 16) as f64
    );
    println!(
        "  reflector store (Arc + map + ObjectRef), whole        {:>8.0}",
        per(store)
    );
    println!(
        "    of which beyond the Arc<PackedPod> (map, keys)      {:>8.0}",
        per(store - packed_all)
    );
    println!(
        "  snapshot summaries kept between reconciles            {:>8.0}",
        per(summaries)
    );
    println!(
        "  cache total                                           {:>8.0}",
        per(store + summaries)
    );
    println!(
        "  cache total for {n} pods                             {:>8.1} MiB",
        (store + summaries) as f64 / (1 << 20) as f64
    );
    drop(cache);
    drop(reader);
}
