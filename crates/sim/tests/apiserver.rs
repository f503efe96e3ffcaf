//! The simulated apiserver through a real `kube::Client`, on paused (virtual) tokio time.

mod common;

use std::time::Duration;

use common::{Req, api_err, base, server};

use futures::{StreamExt, TryStreamExt};
use insitu_api::CloneSet;
use insitu_sim::SimClock;
use insitu_sim::apiserver::{ApiServer, ApiServerConfig};
use insitu_sim::store::StoreConfig;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::Status;
use kube::runtime::watcher;
use serde_json::{Value, json};

fn pod(name: &str, labels: Value, node: Option<&str>) -> Pod {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}
    });
    if let Some(n) = node {
        v["spec"]["nodeName"] = json!(n);
    }
    serde_json::from_value(v).expect("pod")
}

fn cloneset(name: &str, replicas: i32) -> CloneSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
        }
    }))
    .expect("cloneset")
}

#[tokio::test(start_paused = true)]
async fn create_get_list_with_selectors_and_defaults() {
    let s = server();
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    let pp = PostParams::default();
    let a = pods
        .create(&pp, &pod("a", json!({"app": "web", "tier": "fe"}), None))
        .await
        .expect("create a");
    pods.create(&pp, &pod("b", json!({"app": "db"}), None))
        .await
        .expect("create b");
    let mut gen_pod = pod("", json!({"app": "web"}), None);
    gen_pod.metadata.name = None;
    gen_pod.metadata.generate_name = Some("web-".into());
    let g = pods.create(&pp, &gen_pod).await.expect("generateName");
    let gname = g.metadata.name.clone().unwrap_or_default();
    assert!(gname.starts_with("web-") && gname.len() == 9, "{gname}");
    assert!(
        gname[4..]
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
    );

    // Server-set metadata and pod defaults.
    assert_eq!(a.metadata.generation, Some(1));
    assert!(a.metadata.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert_eq!(a.metadata.creation_timestamp.as_ref().map(|t| t.0), Some(base()));
    let spec = a.spec.clone().unwrap_or_default();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.priority, Some(0));
    assert_eq!(spec.tolerations.as_ref().map(Vec::len), Some(2));
    let c = &spec.containers[0];
    assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        c.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(
        c.ports.as_ref().and_then(|p| p[0].protocol.clone()).as_deref(),
        Some("TCP")
    );
    let status = a.status.clone().unwrap_or_default();
    assert_eq!(
        (status.phase.as_deref(), status.qos_class.as_deref()),
        (Some("Pending"), Some("BestEffort"))
    );

    let names = |l: kube::core::ObjectList<Pod>| {
        l.items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect::<Vec<_>>()
    };
    let web = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("list");
    assert!(
        web.metadata
            .resource_version
            .as_deref()
            .is_some_and(|rv| !rv.is_empty())
    );
    assert_eq!(names(web), vec!["a".to_string(), gname.clone()]);
    let set = pods
        .list(&ListParams::default().labels("app in (web,db),!tier"))
        .await
        .expect("set-based");
    assert_eq!(names(set), vec!["b".to_string(), gname.clone()]);
    let by_name = pods
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .expect("field");
    assert_eq!(names(by_name), vec!["b".to_string()]);
    let bad = pods
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .expect_err("bad field");
    assert_eq!(api_err(bad).0, 400);
    let all: Api<Pod> = Api::all(s.client());
    assert_eq!(
        all.list(&ListParams::default()).await.expect("all").items.len(),
        3
    );

    let got = pods.get("a").await.expect("get");
    assert_eq!(got.metadata.resource_version, a.metadata.resource_version);
    let (code, reason, msg) = api_err(
        pods.create(&pp, &pod("a", json!({}), None))
            .await
            .expect_err("dup"),
    );
    assert_eq!(
        (code, reason.as_str(), msg.as_str()),
        (409, "AlreadyExists", "pods \"a\" already exists")
    );
    // An invalid object under a taken name: validation answers before storage, as in kube-apiserver.
    let (code, reason, msg) = api_err(
        pods.create(&pp, &pod("a", json!({"bad key!": "x"}), None))
            .await
            .expect_err("invalid dup"),
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"), "{msg}");
    assert!(msg.contains("metadata.labels"), "{msg}");
    let other: Api<Pod> = Api::namespaced(s.client(), "nope");
    let (code, _, msg) = api_err(
        other
            .create(&pp, &pod("x", json!({}), None))
            .await
            .expect_err("no ns"),
    );
    assert_eq!((code, msg.as_str()), (404, "namespaces \"nope\" not found"));
    let (code, _, msg) = api_err(pods.get("zzz").await.expect_err("missing"));
    assert_eq!((code, msg.as_str()), (404, "pods \"zzz\" not found"));
    let stats = s.stats();
    assert_eq!(stats.writes_for("create", "pods"), 6);
    assert_eq!(stats.objects.get("pods"), Some(&3));
}

#[tokio::test(start_paused = true)]
async fn put_conflicts_and_pod_update_rules() {
    let s = server();
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    let pp = PostParams::default();
    let p = pods
        .create(&pp, &pod("p", json!({"app": "x"}), None))
        .await
        .expect("create");

    // Image-only update through PUT: allowed, generation bumps.
    let mut upd = p.clone();
    upd.spec.as_mut().expect("spec").containers[0].image = Some("nginx:1.28".into());
    let updated = pods.replace("p", &pp, &upd).await.expect("image update");
    assert_eq!(updated.metadata.generation, Some(2));
    assert_ne!(updated.metadata.resource_version, p.metadata.resource_version);

    // Stale resourceVersion → 409 Conflict.
    let (code, reason, msg) = api_err(pods.replace("p", &pp, &upd).await.expect_err("stale"));
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(
        msg,
        "Operation cannot be fulfilled on pods \"p\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // Empty resourceVersion = unconditional; label changes are fine.
    let mut uncond = updated.clone();
    uncond.metadata.resource_version = None;
    uncond
        .metadata
        .labels
        .get_or_insert_default()
        .insert("new".into(), "1".into());
    let u2 = pods.replace("p", &pp, &uncond).await.expect("unconditional");
    assert_eq!(u2.metadata.generation, Some(2), "labels do not bump generation");

    // Immutable field → 422 with the real message.
    let mut bad = u2.clone();
    bad.spec.as_mut().expect("spec").containers[0].ports = None;
    let (code, reason, msg) = api_err(pods.replace("p", &pp, &bad).await.expect_err("immutable"));
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(
        msg.starts_with("Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"),
        "{msg}"
    );
    let mut more = u2.clone();
    let extra = more.spec.as_ref().expect("spec").containers[0].clone();
    more.spec
        .as_mut()
        .expect("spec")
        .containers
        .push(k8s_openapi::api::core::v1::Container {
            name: "d".into(),
            ..extra
        });
    let (_, _, msg) = api_err(pods.replace("p", &pp, &more).await.expect_err("add container"));
    assert_eq!(
        msg,
        "Pod \"p\" is invalid: spec.containers: Forbidden: pod updates may not add or remove containers"
    );
    let mut empty = u2.clone();
    empty.spec.as_mut().expect("spec").containers[0].image = Some(String::new());
    let (_, _, msg) = api_err(pods.replace("p", &pp, &empty).await.expect_err("empty image"));
    assert_eq!(
        msg,
        "Pod \"p\" is invalid: spec.containers[0].image: Required value"
    );
    // Toleration additions are allowed, removals are not.
    let tol = json!({"spec": {"tolerations": [{"key": "extra", "operator": "Exists"}]}});
    let (_, _, msg) = api_err(
        pods.patch("p", &PatchParams::default(), &Patch::Merge(&tol))
            .await
            .expect_err("replace tolerations"),
    );
    assert!(msg.contains("spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"), "{msg}");
    let add = json!({"spec": {"tolerations": [{"key": "extra", "operator": "Exists"}]}});
    let p3 = pods
        .patch("p", &PatchParams::default(), &Patch::Strategic(&add))
        .await
        .expect_err("smp replaces tolerations");
    assert_eq!(api_err(p3).0, 422);
}

#[tokio::test(start_paused = true)]
async fn patches_merge_json_strategic_apply() {
    let s = server();
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    let pp = PostParams::default();
    pods.create(&pp, &pod("p", json!({"app": "x", "drop": "me"}), None))
        .await
        .expect("create");
    let ppar = PatchParams::default();

    let m = pods
        .patch(
            "p",
            &ppar,
            &Patch::Merge(json!({"metadata": {"labels": {"drop": null, "k": "v"}}})),
        )
        .await
        .expect("merge");
    let labels = m.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        (labels.get("k").map(String::as_str), labels.contains_key("drop")),
        (Some("v"), false)
    );

    // No-op patch: same resourceVersion.
    let again = pods
        .patch(
            "p",
            &ppar,
            &Patch::Merge(json!({"metadata": {"labels": {"k": "v"}}})),
        )
        .await
        .expect("noop");
    assert_eq!(again.metadata.resource_version, m.metadata.resource_version);

    let jp = json!([
        {"op": "test", "path": "/metadata/labels/k", "value": "v"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f"]}
    ]);
    let (code, _, j) = raw(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        "application/json-patch+json",
        Some(jp),
    )
    .await;
    assert_eq!(
        (code, &j["metadata"]["finalizers"]),
        (200, &json!(["example.com/f"]))
    );
    let failing = json!([{"op": "test", "path": "/metadata/labels/k", "value": "nope"}]);
    let (code, _, st) = raw(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        "application/json-patch+json",
        Some(failing),
    )
    .await;
    assert_eq!((code, st["kind"].as_str()), (422, Some("Status")));

    // Strategic: containers merge by name (image change allowed), finalizers union.
    let smp = json!({"metadata": {"finalizers": ["example.com/g"]}, "spec": {"containers": [{"name": "c", "image": "nginx:1.28"}]}});
    let st = pods
        .patch("p", &ppar, &Patch::Strategic(&smp))
        .await
        .expect("smp");
    let spec = st.spec.clone().unwrap_or_default();
    assert_eq!(spec.containers.len(), 1);
    assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:1.28"));
    assert_eq!(
        spec.containers[0].ports.as_ref().map(Vec::len),
        Some(1),
        "other container fields kept"
    );
    assert_eq!(st.metadata.finalizers.as_ref().map(Vec::len), Some(2));

    // Server-side apply creates when missing.
    let leases: Api<Lease> = Api::default_namespaced(s.client());
    let apply = PatchParams::apply("test");
    let l = leases
        .patch("l1", &apply, &Patch::Apply(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l1"}, "spec": {"holderIdentity": "me"}})))
        .await
        .expect("apply create");
    assert_eq!(l.spec.and_then(|s| s.holder_identity).as_deref(), Some("me"));

    // CRs reject strategic merge patch with 415.
    let cs: Api<CloneSet> = Api::default_namespaced(s.client());
    cs.create(&pp, &cloneset("web", 2)).await.expect("cloneset");
    let (code, reason, msg) = api_err(
        cs.patch("web", &ppar, &Patch::Strategic(json!({"spec": {"replicas": 3}})))
            .await
            .expect_err("smp on CR"),
    );
    assert_eq!((code, reason.as_str()), (415, "UnsupportedMediaType"));
    assert!(msg.contains("accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"), "{msg}");
    let merged = cs
        .patch("web", &ppar, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .expect("merge CR");
    assert_eq!(
        (merged.spec.replicas, merged.metadata.generation),
        (Some(3), Some(2))
    );
}

#[tokio::test(start_paused = true)]
async fn status_subresource_semantics() {
    let s = server();
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    let pp = PostParams::default();
    let p = pods
        .create(&pp, &pod("p", json!({}), Some("n1")))
        .await
        .expect("create");

    // Status written through the main resource is ignored.
    let mut main = p.clone();
    main.status.get_or_insert_default().phase = Some("Running".into());
    let after = pods.replace("p", &pp, &main).await.expect("put");
    assert_eq!(after.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    assert_eq!(
        after.metadata.resource_version, p.metadata.resource_version,
        "no-op write"
    );

    // Status subresource: status changes apply, spec changes are ignored, labels are kept.
    let body = json!({"metadata": {"labels": {"via": "status"}}, "spec": {"nodeName": "other"}, "status": {"phase": "Running", "qosClass": "Guaranteed"}});
    let st = pods
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&body))
        .await
        .expect("status");
    assert_eq!(
        st.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert_eq!(
        st.status.as_ref().and_then(|s| s.qos_class.as_deref()),
        Some("BestEffort"),
        "qosClass is immutable"
    );
    assert_eq!(st.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("n1"));
    assert_eq!(
        st.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("via"))
            .map(String::as_str),
        Some("status")
    );
    assert_eq!(st.metadata.generation, Some(1));

    // CloneSet: status writes don't bump generation, and ignore spec and metadata.
    let cs: Api<CloneSet> = Api::default_namespaced(s.client());
    cs.create(&pp, &cloneset("web", 2)).await.expect("cloneset");
    let body = json!({"metadata": {"labels": {"x": "y"}}, "spec": {"replicas": 9}, "status": {"replicas": 2, "observedGeneration": 1, "labelSelector": "app=web"}});
    let c = cs
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&body))
        .await
        .expect("cs status");
    assert_eq!(
        (
            c.spec.replicas,
            c.metadata.generation,
            c.metadata.labels.is_none()
        ),
        (Some(2), Some(1), true)
    );
    assert_eq!(c.status.as_ref().map(|s| s.replicas), Some(2));
    // And the main resource ignores status.
    let mut m = c.clone();
    m.spec.replicas = Some(4);
    m.status = None;
    let c2 = cs.replace("web", &pp, &m).await.expect("cs put");
    assert_eq!((c2.spec.replicas, c2.metadata.generation), (Some(4), Some(2)));
    assert!(c2.status.is_some());
}

#[tokio::test(start_paused = true)]
async fn graceful_delete_finalizers_and_preconditions() {
    let s = server();
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    let pp = PostParams::default();
    pods.create(&pp, &pod("bound", json!({}), Some("n1")))
        .await
        .expect("create");
    pods.create(&pp, &pod("free", json!({}), None))
        .await
        .expect("create");

    tokio::time::advance(Duration::from_secs(5)).await;
    let d = pods
        .delete("bound", &DeleteParams::default())
        .await
        .expect("delete");
    let obj = d.left().expect("graceful delete returns the pod");
    let ts = obj.metadata.deletion_timestamp.as_ref().map(|t| t.0);
    assert_eq!(
        ts,
        base()
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(35))
            .ok()
    );
    assert_eq!(obj.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get("bound").await.is_ok(), "still there while terminating");
    // A second delete without a shorter grace period changes nothing.
    let again = pods
        .delete("bound", &DeleteParams::default())
        .await
        .expect("again")
        .left()
        .expect("pod");
    assert_eq!(again.metadata.resource_version, obj.metadata.resource_version);
    // Precondition mismatch → 409.
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    assert_eq!(api_err(pods.delete("bound", &dp).await.expect_err("uid")).0, 409);
    // The kubelet's final delete.
    pods.delete("bound", &DeleteParams::default().grace_period(0))
        .await
        .expect("final");
    assert_eq!(api_err(pods.get("bound").await.expect_err("gone")).0, 404);

    // Unscheduled: removed at once (the answer carries the deletion marks, as the real one).
    let gone = pods
        .delete("free", &DeleteParams::default())
        .await
        .expect("delete free")
        .left()
        .expect("pod");
    assert_eq!(
        (
            gone.metadata.deletion_grace_period_seconds,
            gone.metadata.generation
        ),
        (Some(0), Some(2))
    );
    assert!(pods.get_opt("free").await.expect("get").is_none());

    // Finalizers hold the object until removed.
    let mut f = pod("fin", json!({}), None);
    f.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&pp, &f).await.expect("create fin");
    let held = pods
        .delete("fin", &DeleteParams::default())
        .await
        .expect("delete fin")
        .left()
        .expect("pod");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(
        (
            held.metadata.deletion_grace_period_seconds,
            held.metadata.generation
        ),
        (Some(0), Some(2))
    );
    let unhold = json!({"metadata": {"finalizers": null}});
    let last = pods
        .patch("fin", &PatchParams::default(), &Patch::Merge(&unhold))
        .await
        .expect("remove finalizer");
    assert!(last.metadata.finalizers.is_none());
    assert!(pods.get_opt("fin").await.expect("get").is_none());

    let (code, _, msg) = api_err(
        pods.delete("ghost", &DeleteParams::default())
            .await
            .expect_err("missing"),
    );
    assert_eq!((code, msg.as_str()), (404, "pods \"ghost\" not found"));
}

#[tokio::test(start_paused = true)]
async fn binding_and_resize() {
    let s = server();
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    let pp = PostParams::default();
    let mut p = pod("p", json!({}), None);
    p.spec.as_mut().expect("spec").containers[0].resources =
        Some(serde_json::from_value(json!({"requests": {"cpu": "100m"}})).expect("res"));
    pods.create(&pp, &p).await.expect("create");

    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
    let st: Status = pods
        .create_subresource("binding", "p", &pp, &binding)
        .await
        .expect("bind");
    assert_eq!(st.code, 201);
    let bound = pods.get("p").await.expect("get");
    assert_eq!(
        bound.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("n1")
    );
    let conds = bound.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let (code, _, msg) = api_err(
        pods.create_subresource::<Value, Status>("binding", "p", &pp, &binding)
            .await
            .expect_err("rebind"),
    );
    assert_eq!(
        (code, msg.as_str()),
        (
            409,
            "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n1\""
        )
    );

    // Resize while the running container reports no resources → rejected.
    let running = json!({"status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "nginx:1.27", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}});
    pods.patch_status("p", &PatchParams::default(), &Patch::Merge(&running))
        .await
        .expect("status");
    let resize = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}]}});
    let (code, _, msg) = api_err(
        pods.patch_resize("p", &PatchParams::default(), &Patch::Strategic(&resize))
            .await
            .expect_err("unsupported"),
    );
    assert_eq!(
        (code, msg.as_str()),
        (
            422,
            "Pod \"p\" is invalid: spec: Forbidden: Pod running on node without support for resize"
        )
    );
    let with_res = json!({"status": {"containerStatuses": [{"name": "c", "image": "nginx:1.27", "imageID": "", "ready": true, "restartCount": 0, "resources": {"requests": {"cpu": "100m"}}, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}});
    pods.patch_status("p", &PatchParams::default(), &Patch::Strategic(&with_res))
        .await
        .expect("status");
    // PodResize admission: the node must exist and have room.
    let resize_err = |p: Api<Pod>, body: Value| async move {
        api_err(
            p.patch_resize("p", &PatchParams::default(), &Patch::Strategic(&body))
                .await
                .expect_err("refused"),
        )
    };
    let (code, _, msg) = resize_err(pods.clone(), resize.clone()).await;
    assert_eq!(
        (code, msg.as_str()),
        (403, "pods \"p\" is forbidden: node \"n1\" not found")
    );
    let nodes: Api<Node> = Api::all(s.client());
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "150m", "memory": "1Gi"}}}),
    )
    .expect("node");
    nodes.create(&pp, &node).await.expect("node");
    let (code, _, msg) = resize_err(pods.clone(), resize.clone()).await;
    assert_eq!(
        (code, msg.as_str()),
        (
            403,
            "pods \"p\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 200, allocatable: 150"
        )
    );
    let grow = json!({"status": {"allocatable": {"cpu": "4", "memory": "1Gi"}}});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&grow))
        .await
        .expect("grow node");
    let r = pods
        .patch_resize("p", &PatchParams::default(), &Patch::Strategic(&resize))
        .await
        .expect("resize");
    let req = r
        .spec
        .as_ref()
        .and_then(|s| s.containers[0].resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .map(|q| q.0.clone());
    assert_eq!(req.as_deref(), Some("200m"));
    assert_eq!(r.metadata.generation, Some(2));
    // Changing QoS class (Burstable → Guaranteed) is rejected.
    let qos = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}});
    let (_, _, msg) = api_err(
        pods.patch_resize("p", &PatchParams::default(), &Patch::Strategic(&qos))
            .await
            .expect_err("qos"),
    );
    assert!(
        msg.contains("Pod QOS Class may not change as a result of resizing"),
        "{msg}"
    );
    // Resources through the main endpoint are immutable.
    let more = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "300m"}}}]}});
    let (code, _, _) = api_err(
        pods.patch("p", &PatchParams::default(), &Patch::Strategic(&more))
            .await
            .expect_err("main"),
    );
    assert_eq!(code, 422);
}

#[tokio::test(start_paused = true)]
async fn cloneset_validation_and_scale() {
    let s = server();
    let cs: Api<CloneSet> = Api::default_namespaced(s.client());
    let pp = PostParams::default();
    let mut bad = cloneset("bad", 1);
    bad.spec.template.metadata.get_or_insert_default().labels =
        Some([("app".to_string(), "other".to_string())].into());
    let (code, reason, msg) = api_err(cs.create(&pp, &bad).await.expect_err("selector mismatch"));
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(
        msg.starts_with("CloneSet.apps.kruise.io \"bad\" is invalid: "),
        "{msg}"
    );
    assert!(msg.contains("does not match template"), "{msg}");
    let raw: Api<kube::api::DynamicObject> =
        Api::default_namespaced_with(s.client(), &kube::api::ApiResource::erase::<CloneSet>(&()));
    let junk: kube::api::DynamicObject = serde_json::from_value(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "junk"}, "spec": {"replicas": "many"}})).expect("dyn");
    let (code, _, msg) = api_err(raw.create(&pp, &junk).await.expect_err("undecodable"));
    assert_eq!(code, 422);
    // The structural schema's type check, worded as the CRD handler words it.
    assert_eq!(
        msg,
        "CloneSet.apps.kruise.io \"junk\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
    );

    let created = cs.create(&pp, &cloneset("web", 2)).await.expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    cs.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 2, "labelSelector": "app=web"}})),
    )
    .await
    .expect("status");
    let scale = cs.get_scale("web").await.expect("get scale");
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let st = scale.status.clone().unwrap_or_default();
    assert_eq!((st.replicas, st.selector.as_deref()), (2, Some("app=web")));
    let patched = cs
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("patch scale");
    assert_eq!(patched.spec.and_then(|s| s.replicas), Some(5));
    let now = cs.get("web").await.expect("get");
    assert_eq!((now.spec.replicas, now.metadata.generation), (Some(5), Some(2)));
    // PUT with a stale resourceVersion → 409.
    let stale: Scale = scale;
    let (code, _, msg) = api_err(
        cs.replace_scale("web", &pp, &stale)
            .await
            .expect_err("stale scale"),
    );
    assert_eq!(code, 409);
    assert!(
        msg.starts_with("Operation cannot be fulfilled on clonesets.apps.kruise.io \"web\""),
        "{msg}"
    );
    let neg = cs
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await
        .expect_err("negative");
    assert_eq!(api_err(neg).0, 422);
    assert_eq!(s.stats().writes_for("patch", "clonesets.apps.kruise.io/scale"), 2);
}

#[tokio::test(start_paused = true)]
async fn watch_from_resource_version_and_too_old() {
    let config = ApiServerConfig {
        store: StoreConfig {
            history_capacity: 4,
            watch_buffer: 16,
            ..StoreConfig::default()
        },
        ..ApiServerConfig::default()
    };
    let s = ApiServer::with_config(SimClock::new(base(), 1.0), config);
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    let pp = PostParams::default();
    pods.create(&pp, &pod("a", json!({"app": "w"}), None))
        .await
        .expect("a");
    let list = pods.list(&ListParams::default()).await.expect("list");
    let rv = list.metadata.resource_version.clone().unwrap_or_default();
    pods.create(&pp, &pod("b", json!({"app": "w"}), None))
        .await
        .expect("b");
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "gone"}}})),
    )
    .await
    .expect("relabel");
    pods.delete("b", &DeleteParams::default())
        .await
        .expect("delete b");

    // Replay after the list RV, with a label selector: b ADDED, a leaves the selector (DELETED), b DELETED.
    let wp = WatchParams::default().labels("app=w").timeout(5);
    let events: Vec<_> = pods
        .watch(&wp, &rv)
        .await
        .expect("watch")
        .take(3)
        .try_collect()
        .await
        .expect("events");
    let summary: Vec<(String, String)> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(p) => ("ADDED".into(), p.metadata.name.clone().unwrap_or_default()),
            WatchEvent::Modified(p) => ("MODIFIED".into(), p.metadata.name.clone().unwrap_or_default()),
            WatchEvent::Deleted(p) => ("DELETED".into(), p.metadata.name.clone().unwrap_or_default()),
            other => (format!("{other:?}"), String::new()),
        })
        .collect();
    let want: Vec<(String, String)> = [("ADDED", "b"), ("DELETED", "a"), ("DELETED", "b")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(summary, want);

    // The watch ends after timeoutSeconds (virtual time).
    let mut live = pods
        .watch(
            &WatchParams::default().timeout(5),
            &s.stats().resource_version.to_string(),
        )
        .await
        .expect("watch")
        .boxed();
    assert!(live.next().await.is_none());
    // Without timeoutSeconds the server ends it after 30 to 60 minutes (minRequestTimeout x (1 + rand)).
    let started = tokio::time::Instant::now();
    let uri = format!(
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion={}",
        s.stats().resource_version
    );
    let req = http::Request::get(uri).body(Vec::new()).expect("request");
    let body = s.client().request_text(req).await.expect("watch");
    assert!(body.is_empty(), "{body}");
    let lasted = started.elapsed();
    assert!(
        lasted >= Duration::from_secs(1800) && lasted < Duration::from_secs(3601),
        "{lasted:?}"
    );

    // Push the first events out of the 4-event history: 410 Expired as an ERROR event.
    for i in 0..5 {
        pods.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"i": i.to_string()}}})),
        )
        .await
        .expect("churn");
    }
    let mut old = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    match old.next().await {
        Some(Ok(WatchEvent::Error(e))) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message
                    .starts_with(&format!("too old resource version: {rv} (")),
                "{}",
                e.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn watcher_relists_after_lag_and_expiry() {
    let config = ApiServerConfig {
        store: StoreConfig {
            history_capacity: 4,
            watch_buffer: 16,
            ..StoreConfig::default()
        },
        ..ApiServerConfig::default()
    };
    let s = ApiServer::with_config(SimClock::new(base(), 1.0), config);
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    pods.create(&PostParams::default(), &pod("a", json!({}), None))
        .await
        .expect("a");
    let mut w = watcher(pods.clone(), watcher::Config::default().timeout(30)).boxed();
    // Initial list.
    loop {
        match w.next().await {
            Some(Ok(watcher::Event::InitDone)) => break,
            Some(_) => {}
            None => panic!("watcher ended"),
        }
    }
    // Let the watcher start its watch (poll briefly), then churn past both the broadcast buffer and the history.
    assert!(
        tokio::time::timeout(Duration::from_millis(10), w.next())
            .await
            .is_err()
    );
    for i in 0..40 {
        pods.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"i": i.to_string()}}})),
        )
        .await
        .expect("churn");
    }
    let mut saw_error = false;
    let mut relisted = false;
    for _ in 0..200 {
        match tokio::time::timeout(Duration::from_secs(120), w.next()).await {
            Ok(Some(Err(_))) => saw_error = true,
            Ok(Some(Ok(watcher::Event::Init))) => relisted = true,
            Ok(Some(Ok(watcher::Event::InitApply(p) | watcher::Event::Apply(p)))) => {
                if p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("i"))
                    .map(String::as_str)
                    == Some("39")
                {
                    break;
                }
            }
            Ok(Some(Ok(_))) => {}
            Ok(None) | Err(_) => panic!("watcher stalled"),
        }
    }
    assert!(relisted, "the watcher relisted");
    assert!(saw_error, "the watcher saw the 410");
}

#[tokio::test(start_paused = true)]
async fn streaming_list_and_events() {
    let s = server();
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    pods.create(&PostParams::default(), &pod("a", json!({}), None))
        .await
        .expect("a");
    let mut w = watcher(pods.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
            Ok(Some(Ok(watcher::Event::InitApply(p)))) => seen.push(p.metadata.name.unwrap_or_default()),
            Ok(Some(Ok(watcher::Event::InitDone))) => break,
            Ok(Some(_)) => {}
            _ => panic!("no initial-events-end bookmark"),
        }
    }
    assert_eq!(seen, vec!["a".to_string()]);

    let events: Api<Event> = Api::default_namespaced(s.client());
    let ev: Event = serde_json::from_value(json!({
        "metadata": {"name": "a.1"}, "involvedObject": {"kind": "Pod", "name": "a", "namespace": "default"},
        "reason": "Scheduled", "message": "hi", "type": "Normal", "count": 1
    }))
    .expect("event");
    events.create(&PostParams::default(), &ev).await.expect("event");
    let found = events
        .list(&ListParams::default().fields("involvedObject.kind=Pod,involvedObject.name=a"))
        .await
        .expect("list");
    assert_eq!(found.items.len(), 1);
    let none = events
        .list(&ListParams::default().fields("involvedObject.name=b"))
        .await
        .expect("list");
    assert!(none.items.is_empty());

    // events.k8s.io/v1 is a view of the same storage (the kube Recorder writes there; describe reads core).
    let new_events: Api<k8s_openapi::api::events::v1::Event> = Api::default_namespaced(s.client());
    let ne: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "a.2"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Pod", "name": "a", "namespace": "default"},
        "reason": "Started", "note": "started", "type": "Normal", "action": "Start",
        "reportingController": "insitu", "reportingInstance": "insitu-0"
    }))
    .expect("new event");
    new_events
        .create(&PostParams::default(), &ne)
        .await
        .expect("create events.k8s.io");
    let series = json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:10.000000Z"}});
    new_events
        .patch("a.2", &PatchParams::default(), &Patch::Merge(&series))
        .await
        .expect("series patch");
    let core = events.get("a.2").await.expect("core view");
    assert_eq!(core.message.as_deref(), Some("started"));
    assert_eq!(core.involved_object.name.as_deref(), Some("a"));
    assert_eq!(core.reporting_component.as_deref(), Some("insitu"));
    assert_eq!(core.series.as_ref().and_then(|s| s.count), Some(2));
    let both = events
        .list(&ListParams::default().fields("involvedObject.name=a"))
        .await
        .expect("list");
    assert_eq!(both.items.len(), 2);
    let regarding = new_events
        .list(&ListParams::default().fields("regarding.name=a,reason=Started"))
        .await
        .expect("list");
    assert_eq!(regarding.items.len(), 1);
    assert_eq!(regarding.items[0].note.as_deref(), Some("started"));
}

/// A raw request through the router. `ct` is the Content-Type for writes, the Accept header for reads.
async fn raw(s: &ApiServer, method: &str, uri: &str, ct: &str, body: Option<Value>) -> (u16, String, Value) {
    let r = Req::new(method, uri);
    let r = match body {
        Some(v) => r
            .header("accept", "application/json")
            .body(ct, v.to_string().into_bytes()),
        None => r.header("accept", ct),
    };
    let a = r.send(&s.router()).await;
    (a.code, a.content_type, a.body)
}

#[tokio::test(start_paused = true)]
async fn kubectl_shapes_discovery_tables_version() {
    let s = server();
    let (code, ct, v) = raw(
        &s,
        "GET",
        "/apis",
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        None,
    )
    .await;
    assert_eq!(
        (code, ct.as_str()),
        (
            200,
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        )
    );
    let groups: Vec<&str> = v["items"]
        .as_array()
        .map(|a| a.iter().filter_map(|g| g["metadata"]["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(groups.contains(&"apps.kruise.io"), "{groups:?}");
    let (_, ct, v) = raw(&s, "GET", "/apis", "application/json", None).await;
    assert_eq!(
        (ct.as_str(), v["kind"].as_str()),
        ("application/json", Some("APIGroupList"))
    );
    let (_, _, v) = raw(
        &s,
        "GET",
        "/apis/apps.kruise.io/v1alpha1",
        "application/json",
        None,
    )
    .await;
    let names: Vec<&str> = v["resources"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        names,
        vec![
            "clonesets",
            "clonesets/status",
            "clonesets/scale",
            "statefulsets",
            "statefulsets/status",
            "statefulsets/scale",
            "imagepulljobs",
            "imagepulljobs/status"
        ]
    );
    let (code, ct, _) = raw(
        &s,
        "GET",
        "/openapi/v2",
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        None,
    )
    .await;
    assert_eq!(
        (code, ct.as_str()),
        (200, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    );
    let (_, _, v) = raw(&s, "GET", "/version", "application/json", None).await;
    assert_eq!(v["gitVersion"], "v1.37.2-insitu-sim");

    let cs: Api<CloneSet> = Api::default_namespaced(s.client());
    cs.create(&PostParams::default(), &cloneset("nginx-demo", 3))
        .await
        .expect("cs");
    tokio::time::advance(Duration::from_secs(65)).await;
    let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let (code, ct, t) = raw(
        &s,
        "GET",
        "/apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets/nginx-demo",
        table_accept,
        None,
    )
    .await;
    assert_eq!(
        (code, ct.as_str(), t["kind"].as_str()),
        (200, "application/json;as=Table;v=v1;g=meta.k8s.io", Some("Table"))
    );
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        &cols[..8],
        &[
            "Name",
            "DESIRED",
            "UPDATED",
            "UPDATED_READY",
            "UPDATED_AVAILABLE",
            "READY",
            "TOTAL",
            "AGE"
        ]
    );
    assert_eq!(t["rows"][0]["cells"][0], "nginx-demo");
    assert_eq!(t["rows"][0]["cells"][1], 3);
    assert_eq!(t["rows"][0]["cells"][7], "65s");
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");

    let pods: Api<Pod> = Api::default_namespaced(s.client());
    pods.create(&PostParams::default(), &pod("p1", json!({}), Some("n1")))
        .await
        .expect("pod");
    let (_, _, t) = raw(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods?limit=500",
        table_accept,
        None,
    )
    .await;
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "p1", "0/1", "Pending", "0", "0s", "<none>", "n1", "<none>", "<none>"
        ])
    );

    // kubectl scale: merge patch on /scale.
    let (code, _, v) = raw(
        &s,
        "PATCH",
        "/apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets/nginx-demo/scale",
        "application/merge-patch+json",
        Some(json!({"spec": {"replicas": 5}})),
    )
    .await;
    assert_eq!(
        (code, v["kind"].as_str(), v["spec"]["replicas"].as_i64()),
        (200, Some("Scale"), Some(5))
    );
    let (code, _, v) = raw(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods/p1/log",
        "application/json",
        None,
    )
    .await;
    // A pod whose container has not started: the kubelet's answer, not a NotFound.
    assert_eq!((code, v["kind"].as_str()), (400, Some("Status")));
    assert!(
        v["message"]
            .as_str()
            .unwrap_or_default()
            .ends_with("is waiting to start: ContainerCreating"),
        "{v}"
    );
    let (code, _, v) = raw(&s, "GET", "/healthz", "text/plain", None).await;
    assert_eq!((code, v), (200, Value::Null));
}

/// Serves on 127.0.0.1:$INSITU_SIM_PORT (default 18080) for $INSITU_SIM_SECS seconds, for manual kubectl runs:
/// `cargo test -p insitu-sim --test apiserver serve_for_kubectl -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "manual: serves on a real port"]
async fn serve_for_kubectl() {
    let port: u16 = std::env::var("INSITU_SIM_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(18080);
    let secs: u64 = std::env::var("INSITU_SIM_SECS")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(600);
    let s = ApiServer::new(SimClock::new(Timestamp::now(), 1.0));
    let (addr, _h) = s.serve(([127, 0, 0, 1], port).into()).await.expect("bind");
    println!("serving on http://{addr}");
    tokio::time::sleep(Duration::from_secs(secs)).await;
}

/// Rough throughput/memory check: `INSITU_SIM_PODS=100000 cargo test -p insitu-sim --release --test apiserver
/// many_pods -- --ignored --nocapture`.
#[tokio::test(start_paused = true)]
#[ignore = "slow: scale check"]
async fn many_pods() {
    let n: usize = std::env::var("INSITU_SIM_PODS")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(20_000);
    let s = server();
    let pods: Api<Pod> = Api::default_namespaced(s.client());
    let mut w = watcher(pods.clone(), watcher::Config::default()).boxed();
    let counter = tokio::spawn(async move {
        let mut seen = 0usize;
        while let Some(ev) = w.next().await {
            if let Ok(watcher::Event::Apply(_)) = ev {
                seen += 1;
            }
        }
        seen
    });
    let t = std::time::Instant::now();
    let pp = PostParams::default();
    for i in 0..n {
        let labels = json!({"app": format!("a{}", i % 10)});
        pods.create(&pp, &pod(&format!("p-{i}"), labels, Some("n1")))
            .await
            .expect("create");
    }
    let created = t.elapsed();
    let t = std::time::Instant::now();
    let all = pods.list(&ListParams::default()).await.expect("list");
    let listed = t.elapsed();
    let t = std::time::Instant::now();
    let some = pods
        .list(&ListParams::default().labels("app=a3"))
        .await
        .expect("list");
    let filtered = t.elapsed();
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS")).map(str::to_string))
        .unwrap_or_default();
    println!(
        "{n} pods: create {created:?} ({:.0}/s), list all {listed:?} ({} items), list 1/10 {filtered:?} ({}), {rss}",
        n as f64 / created.as_secs_f64(),
        all.items.len(),
        some.items.len()
    );
    counter.abort();
    assert_eq!(all.items.len(), n);
}

/// The tutorial's kubectl commands against the sim over HTTP. Needs `e2e/bin/kubectl` (skips otherwise):
/// `cargo test -p insitu-sim --test apiserver kubectl_tutorial -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs e2e/bin/kubectl and a real port"]
async fn kubectl_tutorial() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let kubectl = root.join("e2e/bin/kubectl");
    if !kubectl.exists() {
        eprintln!("skipping: {} not found", kubectl.display());
        return;
    }
    let s = ApiServer::new(SimClock::new(Timestamp::now(), 1.0));
    let (addr, _h) = s.serve(([127, 0, 0, 1], 0).into()).await.expect("bind");
    let cache = std::env::temp_dir().join(format!("insitu-kubectl-{}", addr.port()));
    let run = |args: Vec<String>| {
        let kubectl = kubectl.clone();
        let cache = cache.clone();
        let server = format!("http://{addr}");
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new(&kubectl)
                .arg("-s")
                .arg(&server)
                .args(&args)
                .env("KUBECACHEDIR", &cache)
                .env("KUBECONFIG", "/dev/null")
                .output()
                .expect("run kubectl");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            println!("$ kubectl {}\n{text}", args.join(" "));
            (out.status.success(), text)
        })
    };
    let sh = |cmd: &str| cmd.split(' ').map(str::to_string).collect::<Vec<_>>();
    let demo = root.join("examples/cloneset-demo.yaml").display().to_string();

    let (ok, out) = run(vec!["apply".into(), "-f".into(), demo.clone()])
        .await
        .expect("join");
    assert!(
        ok && out.contains("cloneset.apps.kruise.io/nginx-demo created"),
        "{out}"
    );
    // Applied again: kubectl's three-way merge patch for a custom resource (a JSON merge patch) replaces lists
    // whole, and the live containers carry the defaults Kruise's defaulting webhook added (imagePullPolicy,
    // probe thresholds, ...), so kubectl sends the file's list and says "configured", as against kruise-manager;
    // the webhook defaults it again and nothing changes (the generation stays 1).
    let (ok, out) = run(vec!["apply".into(), "-f".into(), demo.clone()])
        .await
        .expect("join");
    assert!(ok && out.contains("nginx-demo configured"), "{out}");
    let (ok, out) = run(vec![
        "get".into(),
        "cloneset".into(),
        "nginx-demo".into(),
        "-o".into(),
        "jsonpath={.metadata.generation}".into(),
    ])
    .await
    .expect("join");
    assert!(ok && out.trim() == "1", "{out}");
    let (ok, out) = run(sh("get cloneset nginx-demo -o wide")).await.expect("join");
    assert!(
        ok && out.contains("DESIRED") && out.contains("IMAGES") && out.contains("nginx:1.19.0"),
        "{out}"
    );
    let (ok, out) = run(sh("scale cloneset nginx-demo --replicas=5"))
        .await
        .expect("join");
    assert!(ok && out.contains("scaled"), "{out}");
    let (ok, out) = run(vec![
        "patch".into(),
        "cloneset".into(),
        "nginx-demo".into(),
        "--type=merge".into(),
        "-p".into(),
        r#"{"spec":{"replicas":4}}"#.into(),
    ])
    .await
    .expect("join");
    assert!(ok && out.contains("patched"), "{out}");
    let (ok, out) = run(vec![
        "patch".into(),
        "cloneset".into(),
        "nginx-demo".into(),
        "--type=merge".into(),
        "-p".into(),
        r#"{"spec":{"replicas":4}}"#.into(),
    ])
    .await
    .expect("join");
    assert!(ok && out.contains("patched (no change)"), "{out}");
    let (ok, out) = run(vec![
        "patch".into(),
        "cloneset".into(),
        "nginx-demo".into(),
        "-p".into(),
        r#"{"spec":{"replicas":4}}"#.into(),
    ])
    .await
    .expect("join");
    assert!(
        !ok && out.contains("UnsupportedMediaType") || out.contains("is not supported"),
        "{out}"
    );
    let (ok, out) = run(vec![
        "get".into(),
        "cloneset".into(),
        "nginx-demo".into(),
        "-o".into(),
        "jsonpath={.spec.replicas}".into(),
    ])
    .await
    .expect("join");
    assert!(ok && out.trim() == "4", "{out}");

    // A watch sees the next change, then the server-side timeout ends it.
    let watch = run(sh("get cloneset nginx-demo -w --request-timeout=3s"));
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (ok, _) = run(sh("scale cloneset nginx-demo --replicas=6"))
        .await
        .expect("join");
    assert!(ok);
    let (_, out) = watch.await.expect("join");
    assert!(
        out.lines().filter(|l| l.starts_with("nginx-demo")).count() >= 2,
        "{out}"
    );

    let pod = cache.join("pod.yaml");
    std::fs::create_dir_all(&cache).expect("cache dir");
    std::fs::write(&pod, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    image: nginx:1.27\n").expect("write");
    let (ok, out) = run(vec!["apply".into(), "-f".into(), pod.display().to_string()])
        .await
        .expect("join");
    assert!(ok && out.contains("pod/web created"), "{out}");
    let (ok, out) = run(sh("get pods -l app=web")).await.expect("join");
    assert!(
        ok && out.contains("READY") && out.contains("0/1") && out.contains("Pending"),
        "{out}"
    );
    let (ok, _) = run(vec![
        "patch".into(),
        "pod".into(),
        "web".into(),
        "--subresource=status".into(),
        "--type=merge".into(),
        "-p".into(),
        r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#.into(),
    ])
    .await
    .expect("join");
    assert!(ok);
    let (ok, out) = run(sh("wait --for=condition=Ready pod/web --timeout=5s"))
        .await
        .expect("join");
    assert!(ok && out.contains("condition met"), "{out}");
    let (ok, out) = run(sh("delete pod web --wait=false")).await.expect("join");
    assert!(ok && out.contains("deleted"), "{out}");
    let (ok, out) = run(sh("get pod web")).await.expect("join");
    assert!(ok && out.contains("Terminating"), "{out}");
    let (ok, out) = run(sh("delete cloneset nginx-demo")).await.expect("join");
    assert!(ok && out.contains("deleted"), "{out}");
    let (ok, out) = run(sh("get cloneset")).await.expect("join");
    assert!(ok && out.contains("No resources found"), "{out}");
    let _ = std::fs::remove_dir_all(&cache);
}
