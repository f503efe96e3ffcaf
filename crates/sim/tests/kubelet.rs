//! Kubelet, scheduler, volume binder and GC against the in-memory apiserver, on virtual time.

use std::sync::Arc;
use std::time::Duration;

use insitu_sim::cluster::{SimCluster, SimConfig};
use insitu_sim::kubelet::{ImageFailure, ImageProfile, ImageProfiles, image_id};
use insitu_sim::{Clock, SimClock};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolumeClaim, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const GATE: &str = "InPlaceUpdateReady";

fn base() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The seed tutorial's container, as a bare pod with the CloneSet readiness gate.
fn seed_pod(name: &str, image: &str, gate: bool) -> Pod {
    let mut v = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "nginx-demo"}},
        "spec": {
            "containers": [{
                "name": "nginx",
                "image": image,
                "ports": [{"containerPort": 80}],
                "env": [{"name": "VERSION", "value": "v1.0"}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "initialDelaySeconds": 5, "periodSeconds": 3},
                "livenessProbe": {"httpGet": {"path": "/", "port": 80}, "initialDelaySeconds": 10, "periodSeconds": 5},
                "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 5"]}}}
            }]
        }
    });
    if gate {
        v["spec"]["readinessGates"] = json!([{"conditionType": GATE}]);
    }
    serde_json::from_value(v).unwrap_or_default()
}

async fn start(images: ImageProfiles) -> (SimCluster, Arc<SimClock>, Api<Pod>) {
    let clock = SimClock::new(base(), 1.0);
    let config = SimConfig {
        nodes: 2,
        seed: 42,
        images,
        ..SimConfig::default()
    };
    let cluster = SimCluster::start(config, clock.clone())
        .await
        .expect("cluster starts");
    let pods = Api::namespaced(cluster.client.clone(), "default");
    (cluster, clock, pods)
}

/// Polls (every 100 ms of cluster time) until `pred` holds; returns the pod and the cluster time it took.
async fn wait_for(
    clock: &SimClock,
    pods: &Api<Pod>,
    name: &str,
    what: &str,
    pred: impl Fn(&Pod) -> bool,
) -> (Pod, f64) {
    let t0 = clock.now();
    for _ in 0..6000 {
        if let Ok(Some(p)) = pods.get_opt(name).await
            && pred(&p)
        {
            return (p, clock.now().duration_since(t0).as_secs_f64());
        }
        clock.sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {name}: {what}");
}

async fn wait_gone(clock: &SimClock, pods: &Api<Pod>, name: &str) -> f64 {
    let t0 = clock.now();
    for _ in 0..6000 {
        if matches!(pods.get_opt(name).await, Ok(None)) {
            return clock.now().duration_since(t0).as_secs_f64();
        }
        clock.sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {name} to be deleted");
}

fn cond<'a>(p: &'a Pod, t: &str) -> Option<&'a PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
}

fn cond_is(p: &Pod, t: &str, status: &str) -> bool {
    cond(p, t).is_some_and(|c| c.status == status)
}

fn container(p: &Pod) -> k8s_openapi::api::core::v1::ContainerStatus {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first().cloned())
        .unwrap_or_default()
}

fn waiting_reason(p: &Pod) -> Option<String> {
    container(p).state?.waiting?.reason
}

/// Sets the readiness-gate condition through `pods/status`, as the CloneSet controller does.
async fn set_gate(pods: &Api<Pod>, name: &str, status: &str) {
    for _ in 0..10 {
        let Ok(mut p) = pods.get(name).await else { continue };
        let st = p.status.get_or_insert_with(Default::default);
        let conds = st.conditions.get_or_insert_with(Vec::new);
        conds.retain(|c| c.type_ != GATE);
        conds.push(PodCondition {
            type_: GATE.into(),
            status: status.into(),
            reason: (status == "False").then(|| "StartInPlaceUpdate".into()),
            ..Default::default()
        });
        if pods
            .replace_status(name, &PostParams::default(), &p)
            .await
            .is_ok()
        {
            return;
        }
    }
    panic!("could not set {GATE}");
}

fn near(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() <= 1.0
}

#[tokio::test(start_paused = true)]
async fn seed_pod_runs_updates_in_place_and_terminates() {
    let (cluster, clock, pods) = start(ImageProfiles::default()).await;
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let node = nodes.get("sim-node-0").await.expect("node registered");
    let ready = node.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(ready.iter().any(|c| c.type_ == "Ready" && c.status == "True"));

    pods.create(&PostParams::default(), &seed_pod("demo", "nginx:1.19.0", true))
        .await
        .expect("create");

    // Bound, Running; containers ready at pull 2s + start 1s + initialDelay 5s.
    let (p, secs) = wait_for(&clock, &pods, "demo", "running", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    assert!(near(secs, 3.0), "running after {secs}s");
    let spec = p.spec.clone().unwrap_or_default();
    assert_eq!(spec.node_name.as_deref(), Some("sim-node-0"));
    let status = p.status.clone().unwrap_or_default();
    let ip = status.pod_ip.clone().unwrap_or_default();
    assert!(ip.starts_with("10."), "pod IP {ip}");
    assert_eq!(status.host_ip.as_deref(), Some("172.16.0.2"));
    assert!(status.start_time.is_some());
    assert!(cond_is(&p, "PodScheduled", "True") && cond_is(&p, "Initialized", "True"));
    assert!(cond_is(&p, "PodReadyToStartContainers", "True"));
    let r = cond(&p, "Ready").cloned().unwrap_or_default();
    assert_eq!(r.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        r.message.as_deref(),
        Some("containers with unready status: [nginx]")
    );
    let c = container(&p);
    assert_eq!(c.image, "docker.io/library/nginx:1.19.0");
    assert_eq!(c.image_id, image_id("nginx:1.19.0"));
    assert!(c.started == Some(true) && !c.ready && c.resources.is_some());
    let uid = p.metadata.uid.clone();
    let first_id = c.container_id.clone();

    let (p, secs2) = wait_for(&clock, &pods, "demo", "containers ready", |p| {
        cond_is(p, "ContainersReady", "True")
    })
    .await;
    assert!(near(secs + secs2, 8.0), "ready after {}s", secs + secs2);
    let r = cond(&p, "Ready").cloned().unwrap_or_default();
    assert_eq!(r.status, "False");
    assert_eq!(r.reason.as_deref(), Some("ReadinessGatesNotReady"));
    assert_eq!(
        r.message.as_deref(),
        Some("corresponding condition of pod readiness gate \"InPlaceUpdateReady\" does not exist.")
    );

    // The controller's gate condition flips Ready, and the kubelet keeps it untouched.
    set_gate(&pods, "demo", "True").await;
    let (_, secs) = wait_for(&clock, &pods, "demo", "ready", |p| cond_is(p, "Ready", "True")).await;
    assert!(secs < 1.0);
    set_gate(&pods, "demo", "False").await;
    let (p, _) = wait_for(&clock, &pods, "demo", "gate not ready", |p| {
        cond_is(p, "Ready", "False")
    })
    .await;
    assert_eq!(
        cond(&p, "Ready").and_then(|c| c.message.as_deref()),
        Some("the status of pod readiness gate \"InPlaceUpdateReady\" is not \"True\", but False")
    );
    assert!(cond_is(&p, GATE, "False"));

    // In-place update: only the image changes.
    let patch = json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.21.0"}]);
    pods.patch(
        "demo",
        &PatchParams::default(),
        &Patch::<()>::Json(serde_json::from_value(patch).unwrap_or_default()),
    )
    .await
    .expect("patch image");
    let (p, secs) = wait_for(&clock, &pods, "demo", "container killed", |p| {
        container(p).state.is_some_and(|s| s.terminated.is_some())
    })
    .await;
    assert!(near(secs, 5.0), "preStop took {secs}s");
    let term = container(&p).state.and_then(|s| s.terminated).unwrap_or_default();
    assert_eq!((term.exit_code, term.reason.as_deref()), (0, Some("Completed")));
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    let (p, secs2) = wait_for(&clock, &pods, "demo", "restarted", |p| {
        container(p).restart_count == 1
    })
    .await;
    assert!(near(secs + secs2, 8.0), "restarted after {}s", secs + secs2);
    let c = container(&p);
    assert_eq!(c.image_id, image_id("nginx:1.21.0"));
    assert_eq!(c.image, "docker.io/library/nginx:1.21.0");
    assert_ne!(c.container_id, first_id);
    assert_eq!(
        c.last_state
            .and_then(|l| l.terminated)
            .and_then(|t| t.container_id),
        first_id
    );
    assert_eq!(p.metadata.uid, uid);
    assert_eq!(p.status.as_ref().and_then(|s| s.pod_ip.clone()), Some(ip));
    let (_, secs3) = wait_for(&clock, &pods, "demo", "ready again", |p| {
        cond_is(p, "ContainersReady", "True")
    })
    .await;
    assert!(near(secs3, 5.0), "ready {secs3}s after restart");
    set_gate(&pods, "demo", "True").await;
    wait_for(&clock, &pods, "demo", "ready", |p| cond_is(p, "Ready", "True")).await;

    // Events, like the kubelet's.
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "default");
    let evs = events
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let has = |reason: &str, msg: &str| {
        evs.iter().any(|e| {
            e.reason.as_deref() == Some(reason) && e.message.as_deref().is_some_and(|m| m.contains(msg))
        })
    };
    assert!(has(
        "Scheduled",
        "Successfully assigned default/demo to sim-node-0"
    ));
    assert!(has(
        "Killing",
        "Container nginx definition changed, will be restarted"
    ));
    assert!(has("Pulling", "Pulling image \"nginx:1.21.0\""));
    assert!(has("Pulled", "Successfully pulled image \"nginx:1.21.0\""));
    assert!(has("Created", "Created container: nginx"));
    assert!(has("Started", "Started container nginx"));
    assert!(evs.iter().all(|e| e.reporting_component.is_some()));

    // Graceful delete: preStop 5 s, then the kubelet finishes the deletion.
    pods.delete("demo", &DeleteParams::default())
        .await
        .expect("delete");
    let secs = wait_gone(&clock, &pods, "demo").await;
    assert!(near(secs, 5.0), "deleted after {secs}s");
}

#[tokio::test(start_paused = true)]
async fn crashing_image_backs_off() {
    let crash = ImageProfile {
        fail: ImageFailure::CrashAfter(Duration::from_secs(3)),
        ..ImageProfile::default()
    };
    let (_cluster, clock, pods) = start(ImageProfiles::default().with("crashy:*", crash)).await;
    pods.create(&PostParams::default(), &seed_pod("crash", "crashy:1", false))
        .await
        .expect("create");
    // Runs at 3 s, crashes at 6, restarts at once (7), crashes at 10, back-off 10 s → 21, then 20 s → 45, 40 s → 89.
    let t0 = clock.now();
    let mut restarts = vec![];
    let mut saw_backoff = false;
    let mut last = 0;
    while clock.now().duration_since(t0).as_secs() < 100 {
        if let Ok(p) = pods.get("crash").await {
            let c = container(&p);
            saw_backoff |= waiting_reason(&p).as_deref() == Some("CrashLoopBackOff");
            assert!(!c.ready);
            if c.restart_count != last {
                last = c.restart_count;
                restarts.push(clock.now().duration_since(t0).as_secs_f64());
                let t = c.last_state.and_then(|l| l.terminated).unwrap_or_default();
                assert_eq!((t.exit_code, t.reason.as_deref()), (1, Some("Error")));
            }
        }
        clock.sleep(Duration::from_millis(250)).await;
    }
    assert!(saw_backoff);
    let expected = [7.0, 21.0, 45.0, 89.0];
    assert_eq!(restarts.len(), expected.len(), "{restarts:?}");
    for (a, e) in restarts.iter().zip(expected) {
        assert!(near(*a, e), "{restarts:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn unpullable_image_backs_off_and_pod_stays_pending() {
    let bad = ImageProfile {
        fail: ImageFailure::NeverPulls,
        ..ImageProfile::default()
    };
    let (_cluster, clock, pods) = start(ImageProfiles::default().with("nginx:nope", bad)).await;
    pods.create(&PostParams::default(), &seed_pod("bad", "nginx:nope", false))
        .await
        .expect("create");
    wait_for(&clock, &pods, "bad", "ErrImagePull", |p| {
        waiting_reason(p).as_deref() == Some("ErrImagePull")
    })
    .await;
    let (p, _) = wait_for(&clock, &pods, "bad", "ImagePullBackOff", |p| {
        waiting_reason(p).as_deref() == Some("ImagePullBackOff")
    })
    .await;
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    // Fix the image: it starts.
    let patch = json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.19.0"}]);
    pods.patch(
        "bad",
        &PatchParams::default(),
        &Patch::<()>::Json(serde_json::from_value(patch).unwrap_or_default()),
    )
    .await
    .expect("patch");
    wait_for(&clock, &pods, "bad", "running", |p| {
        cond_is(p, "ContainersReady", "True")
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn scheduler_spreads_and_respects_scheduler_name() {
    let (cluster, clock, pods) = start(ImageProfiles::default()).await;
    for i in 0..4 {
        pods.create(
            &PostParams::default(),
            &seed_pod(&format!("p{i}"), "nginx:1.19.0", false),
        )
        .await
        .expect("create");
    }
    let mut other = seed_pod("other", "nginx:1.19.0", false);
    if let Some(s) = &mut other.spec {
        s.scheduler_name = Some("my-scheduler".into());
    }
    pods.create(&PostParams::default(), &other).await.expect("create");
    clock.sleep(Duration::from_secs(10)).await;
    let list = pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let on = |n: &str| {
        list.iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(n))
            .count()
    };
    assert_eq!((on("sim-node-0"), on("sim-node-1")), (2, 2));
    let other = list
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("other"))
        .cloned()
        .unwrap_or_default();
    assert!(other.spec.and_then(|s| s.node_name).is_none());
    // Unique pod IPs.
    let mut ips: Vec<String> = list
        .iter()
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .collect();
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 4);
    // Leases are renewed every 10 s.
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-node-lease");
    let renew = |l: Lease| l.spec.and_then(|s| s.renew_time).map(|t| t.0);
    let r1 = renew(leases.get("sim-node-0").await.expect("lease"));
    clock.sleep(Duration::from_secs(11)).await;
    let r2 = renew(leases.get("sim-node-0").await.expect("lease"));
    assert!(r2 > r1, "{r1:?} → {r2:?}");
}

#[tokio::test(start_paused = true)]
async fn pod_waits_for_its_claim_which_is_bound_and_goes_with_its_owner_pod() {
    let (cluster, clock, pods) = start(ImageProfiles::default()).await;
    let mut pod = seed_pod("db", "nginx:1.19.0", false);
    if let Some(s) = &mut pod.spec {
        s.volumes = Some(vec![
            serde_json::from_value(
                json!({"name": "data", "persistentVolumeClaim": {"claimName": "data-db"}}),
            )
            .unwrap_or_default(),
        ]);
    }
    let pod = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    // No claim: the scheduler leaves the pod pending, as the real VolumeBinding plugin does.
    let (p, _) = wait_for(&clock, &pods, "db", "unschedulable", |p| {
        cond_is(p, "PodScheduled", "False")
    })
    .await;
    let msg = cond(&p, "PodScheduled")
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        msg.contains("persistentvolumeclaim \"data-db\" not found"),
        "{msg}"
    );
    clock.sleep(Duration::from_secs(5)).await;
    assert!(
        pods.get("db")
            .await
            .expect("get")
            .spec
            .and_then(|s| s.node_name)
            .is_none()
    );
    // The claim appears, owned by the pod: the binder binds it, then the pod is scheduled and runs.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), "default");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data-db", "namespace": "default", "ownerReferences": [{
            "apiVersion": "v1", "kind": "Pod", "name": "db",
            "uid": pod.metadata.uid.clone().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true
        }]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim");
    claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("create claim");
    wait_for(&clock, &pods, "db", "running", |p| {
        cond_is(p, "ContainersReady", "True")
    })
    .await;
    let bound = claims.get("data-db").await.expect("get claim");
    let status = bound.status.unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Bound"));
    assert_eq!(
        status
            .capacity
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("1Gi".to_string())
    );
    assert!(
        bound
            .spec
            .and_then(|s| s.volume_name)
            .is_some_and(|v| v.starts_with("pvc-"))
    );
    // Owned by the pod (Kruise disablePVCReuse hands claims over so): collected once the pod is gone.
    pods.delete("db", &DeleteParams::default())
        .await
        .expect("delete pod");
    wait_gone(&clock, &pods, "db").await;
    for _ in 0..100 {
        if claims.get_opt("data-db").await.ok().flatten().is_none() {
            return;
        }
        clock.sleep(Duration::from_millis(100)).await;
    }
    panic!("the claim outlived its owner pod");
}

async fn create_cloneset(cluster: &SimCluster) -> (Api<insitu_api::CloneSet>, OwnerReference) {
    let cs: insitu_api::CloneSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": "nginx-demo", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "nginx-demo"}},
            "template": {
                "metadata": {"labels": {"app": "nginx-demo"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.19.0"}]}
            }
        }
    }))
    .expect("cloneset");
    let clonesets: Api<insitu_api::CloneSet> = Api::namespaced(cluster.client.clone(), "default");
    let cs = clonesets
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let owner = OwnerReference {
        api_version: "apps.kruise.io/v1alpha1".into(),
        kind: "CloneSet".into(),
        name: "nginx-demo".into(),
        uid: cs.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    (clonesets, owner)
}

/// A CloneSet with one owned pod (running) and one owned ControllerRevision, plus an unowned pod.
async fn owned_objects(
    cluster: &SimCluster,
    clock: &SimClock,
    pods: &Api<Pod>,
) -> (Api<insitu_api::CloneSet>, Api<ControllerRevision>) {
    let (clonesets, owner) = create_cloneset(cluster).await;
    let mut pod = seed_pod("owned", "nginx:1.19.0", false);
    pod.metadata.owner_references = Some(vec![owner.clone()]);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    pods.create(
        &PostParams::default(),
        &seed_pod("unowned", "nginx:1.19.0", false),
    )
    .await
    .expect("create pod");
    let revisions: Api<ControllerRevision> = Api::namespaced(cluster.client.clone(), "default");
    let rev: ControllerRevision = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "nginx-demo-abc", "namespace": "default", "ownerReferences": [owner]},
        "revision": 1
    }))
    .expect("revision");
    revisions
        .create(&PostParams::default(), &rev)
        .await
        .expect("create revision");
    wait_for(clock, pods, "owned", "running", |p| {
        cond_is(p, "ContainersReady", "True")
    })
    .await;
    (clonesets, revisions)
}

#[tokio::test(start_paused = true)]
async fn gc_deletes_dependents_of_deleted_cloneset() {
    let (cluster, clock, pods) = start(ImageProfiles::default()).await;
    let (clonesets, revisions) = owned_objects(&cluster, &clock, &pods).await;
    clonesets
        .delete("nginx-demo", &DeleteParams::default())
        .await
        .expect("delete cloneset");
    let secs = wait_gone(&clock, &pods, "owned").await;
    assert!(near(secs, 5.0), "gone after {secs}s (preStop 5 s)");
    assert!(pods.get_opt("unowned").await.ok().flatten().is_some());
    assert!(revisions.get_opt("nginx-demo-abc").await.ok().flatten().is_none());
}

#[tokio::test(start_paused = true)]
async fn gc_foreground_and_orphan() {
    let (cluster, clock, pods) = start(ImageProfiles::default()).await;
    let (clonesets, revisions) = owned_objects(&cluster, &clock, &pods).await;
    clonesets
        .delete("nginx-demo", &DeleteParams::foreground())
        .await
        .expect("delete cloneset");
    clock.sleep(Duration::from_secs(1)).await;
    let cs = clonesets.get_opt("nginx-demo").await.ok().flatten();
    assert!(
        cs.is_some_and(|c| c.metadata.deletion_timestamp.is_some()),
        "owner waits for its dependents"
    );
    wait_gone(&clock, &pods, "owned").await;
    clock.sleep(Duration::from_secs(1)).await;
    assert!(
        clonesets.get_opt("nginx-demo").await.ok().flatten().is_none(),
        "owner gone after dependents"
    );
    assert!(revisions.get_opt("nginx-demo-abc").await.ok().flatten().is_none());

    let (clonesets, owner) = create_cloneset(&cluster).await;
    let mut pod = seed_pod("orphan", "nginx:1.19.0", false);
    pod.metadata.owner_references = Some(vec![owner]);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    clonesets
        .delete("nginx-demo", &DeleteParams::orphan())
        .await
        .expect("delete cloneset");
    clock.sleep(Duration::from_secs(2)).await;
    assert!(clonesets.get_opt("nginx-demo").await.ok().flatten().is_none());
    let p = pods.get("orphan").await.expect("orphan kept");
    assert!(p.metadata.owner_references.unwrap_or_default().is_empty());
    assert!(p.metadata.deletion_timestamp.is_none());
}

#[tokio::test(start_paused = true)]
async fn resize_is_reported_in_status() {
    let (_cluster, clock, pods) = start(ImageProfiles::default()).await;
    let mut pod = seed_pod("sized", "nginx:1.19.0", false);
    if let Some(s) = &mut pod.spec {
        s.containers[0].resources = serde_json::from_value(json!({
            "requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "200m", "memory": "128Mi"}
        }))
        .ok();
    }
    pods.create(&PostParams::default(), &pod).await.expect("create");
    let (p, _) = wait_for(&clock, &pods, "sized", "running", |p| {
        cond_is(p, "ContainersReady", "True")
    })
    .await;
    let c = container(&p);
    let cpu = |m: Option<
        &std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| { m.and_then(|m| m.get("cpu")).map(|q| q.0.clone()) };
    assert_eq!(cpu(c.allocated_resources.as_ref()), Some("100m".into()));
    assert_eq!(
        cpu(c.resources.as_ref().and_then(|r| r.limits.as_ref())),
        Some("200m".into())
    );
    let patch = json!({"spec": {"containers": [{"name": "nginx", "resources": {
        "requests": {"cpu": "150m", "memory": "64Mi"}, "limits": {"cpu": "300m", "memory": "128Mi"}}}]}});
    pods.patch_subresource(
        "resize",
        "sized",
        &PatchParams::default(),
        &Patch::Strategic(&patch),
    )
    .await
    .expect("resize accepted (status reports resources)");
    let (p, secs) = wait_for(&clock, &pods, "sized", "resized", |p| {
        cpu(container(p).resources.as_ref().and_then(|r| r.requests.as_ref())).as_deref() == Some("150m")
    })
    .await;
    assert!(secs < 1.0);
    let c = container(&p);
    assert_eq!(cpu(c.allocated_resources.as_ref()), Some("150m".into()));
    assert_eq!(c.restart_count, 0, "cpu resize needs no restart");
}

#[tokio::test(start_paused = true)]
async fn pod_deleted_while_pulling_goes_away_at_once() {
    let slow = ImageProfile {
        pull: Duration::from_secs(60),
        ..ImageProfile::default()
    };
    let (cluster, clock, pods) = start(ImageProfiles::default().with("huge:*", slow)).await;
    pods.create(&PostParams::default(), &seed_pod("slow", "huge:1", false))
        .await
        .expect("create");
    let (p, _) = wait_for(&clock, &pods, "slow", "pending", |p| {
        waiting_reason(p).as_deref() == Some("ContainerCreating")
            && p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some()
    })
    .await;
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    pods.delete("slow", &DeleteParams::default())
        .await
        .expect("delete");
    let secs = wait_gone(&clock, &pods, "slow").await;
    assert!(secs < 1.0, "gone after {secs}s");
    // Events can be switched off, and the kubelet recorded Pulling here.
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "default");
    let evs = events
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    assert!(evs.iter().any(|e| e.reason.as_deref() == Some("Pulling")
        && e.source.as_ref().and_then(|s| s.host.as_deref()) == Some("sim-node-0")));
}

#[tokio::test(start_paused = true)]
async fn restarted_kubelet_adopts_running_pods() {
    let clock = SimClock::new(base(), 1.0);
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let apiserver = insitu_sim::apiserver::ApiServer::new(dyn_clock.clone());
    let client = apiserver.client();
    let config = insitu_sim::kubelet::KubeletConfig {
        nodes: 1,
        ..Default::default()
    };
    let first = tokio::spawn(insitu_sim::cluster::run_nodes(
        client.clone(),
        dyn_clock.clone(),
        config.clone(),
    ));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut pod = seed_pod("direct", "nginx:1.19.0", false);
    if let Some(s) = &mut pod.spec {
        s.node_name = Some("sim-node-0".into());
    }
    pods.create(&PostParams::default(), &pod).await.expect("create");
    let (before, _) = wait_for(&clock, &pods, "direct", "ready", |p| cond_is(p, "Ready", "True")).await;
    assert!(cond_is(&before, "PodScheduled", "True"));
    first.abort();
    let _ = first.await;
    let second = tokio::spawn(insitu_sim::cluster::run_nodes(client, dyn_clock, config));
    clock.sleep(Duration::from_secs(30)).await;
    let after = pods.get("direct").await.expect("pod");
    assert!(cond_is(&after, "Ready", "True"));
    let (b, a) = (container(&before), container(&after));
    assert_eq!(
        (a.container_id, a.restart_count),
        (b.container_id, b.restart_count)
    );
    assert_eq!(
        after.status.and_then(|s| s.pod_ip),
        before.status.and_then(|s| s.pod_ip)
    );
    second.abort();
}

/// The kubelet's status writes carry metadata and status only (the apiserver keeps the stored spec, as
/// kube-apiserver's pod status strategy does), and it keeps the written resourceVersion without decoding the
/// response: so a pod's whole start and an in-place restart take no conflict and leave the spec as written.
#[tokio::test(start_paused = true)]
async fn status_writes_keep_the_spec_and_never_conflict_with_themselves() {
    let (cluster, clock, pods) = start(ImageProfiles::default()).await;
    // The nodes' own start (their first Lease reads find none) is not this test's business.
    clock.sleep(Duration::from_secs(1)).await;
    let errors_before = cluster.apiserver.stats().errors;
    let created = seed_pod("w", "nginx:1.19.0", false);
    pods.create(&PostParams::default(), &created)
        .await
        .expect("create");
    let (running, _) = wait_for(&clock, &pods, "w", "Ready", |p| cond_is(p, "Ready", "True")).await;
    let stats = cluster.apiserver.stats();
    let status_writes = stats
        .writes
        .get(&("update".to_string(), "pods/status".to_string()))
        .copied()
        .unwrap_or(0);
    assert!(
        status_writes >= 3,
        "pending, running and ready are written: {status_writes}"
    );
    assert_eq!(
        stats.errors - errors_before,
        0,
        "no status write conflicted or failed"
    );
    assert_eq!(
        serde_json::to_value(&running.spec).unwrap_or_default()["containers"][0]["readinessProbe"],
        json!({"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"}, "initialDelaySeconds": 5, "periodSeconds": 3,
               "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}),
        "the spec is the created one (with the apiserver's defaults)"
    );

    // An in-place image change: the kubelet restarts the container and reports the new image.
    let patch = json!({"spec": {"containers": [{"name": "nginx", "image": "nginx:1.20.0"}]}});
    pods.patch("w", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("image patch");
    let (updated, _) = wait_for(&clock, &pods, "w", "new image running and Ready", |p| {
        container(p).image == "docker.io/library/nginx:1.20.0" && cond_is(p, "Ready", "True")
    })
    .await;
    assert_eq!(container(&updated).restart_count, 1);
    assert_eq!(updated.metadata.uid, running.metadata.uid);
    let spec = updated.spec.unwrap_or_default();
    assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:1.20.0"));
    assert!(
        spec.containers[0].lifecycle.is_some(),
        "the rest of the spec is kept"
    );
}
