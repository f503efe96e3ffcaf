//! kube-apiserver fidelity of the simulated apiserver: dry runs, 422 causes, field validation, metadata
//! validation and size limits, as raw HTTP requests through the router (what kubectl sends).

mod common;

use common::{Req, get, json_req, send, server};
use insitu_sim::SimClock;
use insitu_sim::apiserver::ApiServer;
use serde_json::{Value, json};

const CS: &str = "/apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn cloneset(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
        }
    })
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}})
}

#[tokio::test(start_paused = true)]
async fn dry_run_changes_nothing_on_any_verb() {
    let s = server();
    let merge = "application/merge-patch+json";
    let created = json_req(&s, "POST", CS, "application/json", cloneset("web", 2)).await;
    assert_eq!(created.code, 201, "{}", created.body);
    let rv = s.stats().resource_version;
    let url = format!("{CS}/web");

    // Create: validated and defaulted, named, not stored.
    let a = json_req(
        &s,
        "POST",
        &format!("{CS}?dryRun=All"),
        "application/json",
        cloneset("dry", 1),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.body["metadata"]["name"], "dry");
    assert!(a.body["metadata"]["uid"].is_string());
    assert!(a.body["metadata"].get("resourceVersion").is_none(), "{}", a.body);
    assert_eq!(get(&s, &format!("{CS}/dry")).await.code, 404);
    // ...and still validated.
    let a = json_req(
        &s,
        "POST",
        &format!("{CS}?dryRun=All"),
        "application/json",
        cloneset("dry", -1),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);

    // Update, patch, scale (PUT and PATCH), status, delete: the would-be object, nothing stored.
    let mut body = get(&s, &url).await.body;
    body["spec"]["replicas"] = json!(7);
    let a = json_req(&s, "PUT", &format!("{url}?dryRun=All"), "application/json", body).await;
    assert_eq!(
        (a.code, a.body["spec"]["replicas"].clone()),
        (200, json!(7)),
        "{}",
        a.body
    );
    assert_eq!(a.body["metadata"]["generation"], 2, "the would-be generation");
    let a = json_req(
        &s,
        "PATCH",
        &format!("{url}?dryRun=All"),
        merge,
        json!({"spec": {"replicas": 9}}),
    )
    .await;
    assert_eq!(
        (a.code, a.body["spec"]["replicas"].clone()),
        (200, json!(9)),
        "{}",
        a.body
    );
    let a = json_req(
        &s,
        "PATCH",
        &format!("{url}/scale?dryRun=All"),
        merge,
        json!({"spec": {"replicas": 5}}),
    )
    .await;
    assert_eq!(
        (a.code, a.body["spec"]["replicas"].clone()),
        (200, json!(5)),
        "{}",
        a.body
    );
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 4}});
    let a = json_req(
        &s,
        "PUT",
        &format!("{url}/scale?dryRun=All"),
        "application/json",
        scale,
    )
    .await;
    assert_eq!(
        (a.code, a.body["spec"]["replicas"].clone()),
        (200, json!(4)),
        "{}",
        a.body
    );
    let a = json_req(
        &s,
        "PATCH",
        &format!("{url}/status?dryRun=All"),
        merge,
        json!({"status": {"replicas": 3}}),
    )
    .await;
    assert_eq!(
        (a.code, a.body["status"]["replicas"].clone()),
        (200, json!(3)),
        "{}",
        a.body
    );
    let a = send(
        &s,
        "DELETE",
        &format!("{url}?dryRun=All"),
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    let opts = json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]});
    let a = json_req(&s, "DELETE", &url, "application/json", opts).await;
    assert_eq!(a.code, 200, "{}", a.body);
    let a = send(
        &s,
        "DELETE",
        &format!("{CS}?dryRun=All"),
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);

    // Pods: create, resize, binding, graceful delete.
    let a = json_req(
        &s,
        "POST",
        &format!("{PODS}?dryRun=All"),
        "application/json",
        pod("p"),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(get(&s, &format!("{PODS}/p")).await.code, 404);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dry-ns"}});
    let a = json_req(
        &s,
        "POST",
        "/api/v1/namespaces?dryRun=All",
        "application/json",
        ns,
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(get(&s, "/api/v1/namespaces/dry-ns").await.code, 404);
    let a = send(
        &s,
        "DELETE",
        "/api/v1/namespaces/default?dryRun=All",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(
        get(&s, "/api/v1/namespaces/default").await.body["status"]["phase"],
        "Active"
    );

    assert_eq!(
        s.stats().resource_version,
        rv,
        "no dry run moved the resourceVersion"
    );
    let live = get(&s, &url).await.body;
    assert_eq!(live["spec"]["replicas"], 2);
    assert_eq!(live["metadata"]["generation"], 1);
    assert!(
        live.get("status")
            .is_none_or(|st| st.get("replicas").is_none_or(|r| r != 3))
    );

    // An unknown dryRun value is refused as ValidateDryRun does.
    let a = json_req(
        &s,
        "POST",
        &format!("{CS}?dryRun=Yes"),
        "application/json",
        cloneset("x", 1),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Yes\"]: supported values: \"All\""
    );
    assert_eq!(a.body["details"]["causes"][0]["field"], "dryRun");
    assert_eq!(s.stats().resource_version, rv);
}

#[tokio::test(start_paused = true)]
async fn invalid_answers_carry_causes() {
    let s = server();
    let a = json_req(&s, "POST", CS, "application/json", cloneset("web", -1)).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "CloneSet.apps.kruise.io \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    let cause = &a.body["details"]["causes"][0];
    assert_eq!(cause["field"], "spec.replicas");
    assert_eq!(cause["reason"], "FieldValueInvalid");
    assert_eq!(
        cause["message"],
        "Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(a.body["details"]["kind"], "CloneSet");

    // The scale subresource names the field too.
    assert_eq!(
        json_req(&s, "POST", CS, "application/json", cloneset("web", 1))
            .await
            .code,
        201
    );
    let a = json_req(
        &s,
        "PATCH",
        &format!("{CS}/web/scale"),
        "application/merge-patch+json",
        json!({"spec": {"replicas": -3}}),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(a.body["details"]["causes"][0]["field"], "spec.replicas");
}

#[tokio::test(start_paused = true)]
async fn field_validation_strict_warn_ignore() {
    let s = server();
    assert_eq!(
        json_req(&s, "POST", CS, "application/json", cloneset("web", 2))
            .await
            .code,
        201
    );
    let url = format!("{CS}/web");
    let typo = json!({"spec": {"updateStrategy": {"partiton": 3}}});
    let merge = "application/merge-patch+json";

    // Strict (kubectl's default): a patch whose result has an unknown field is refused, naming it.
    let a = json_req(
        &s,
        "PATCH",
        &format!("{url}?fieldValidation=Strict"),
        merge,
        typo.clone(),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    let msg = a.body["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("\"\" is invalid: patch: Invalid value: "),
        "{msg}"
    );
    assert!(
        msg.ends_with(": strict decoding error: unknown field \"spec.updateStrategy.partiton\""),
        "{msg}"
    );
    assert_eq!(a.body["details"]["causes"][0]["field"], "patch");
    // Strict create: 400 with the decoder's wording.
    let mut body = cloneset("typo", 1);
    body["spec"]["updateStrategy"] = json!({"partiton": 1});
    body["metadata"]["lables"] = json!({"a": "b"});
    let a = json_req(
        &s,
        "POST",
        &format!("{CS}?fieldValidation=Strict"),
        "application/json",
        body.clone(),
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "CloneSet in version \"v1alpha1\" cannot be handled as a CloneSet: strict decoding error: unknown field \"metadata.lables\", unknown field \"spec.updateStrategy.partiton\""
    );

    // Warn: stored (pruned), one Warning header per field.
    let a = json_req(
        &s,
        "PATCH",
        &format!("{url}?fieldValidation=Warn"),
        merge,
        typo.clone(),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(
        a.warnings,
        vec!["299 - \"unknown field \\\"spec.updateStrategy.partiton\\\"\"".to_string()]
    );
    assert!(a.body["spec"]["updateStrategy"].get("partiton").is_none());
    // Ignore: silently dropped.
    let a = json_req(
        &s,
        "PATCH",
        &format!("{url}?fieldValidation=Ignore"),
        merge,
        typo.clone(),
    )
    .await;
    assert_eq!((a.code, a.warnings.len()), (200, 0), "{}", a.body);
    // Unknown directive.
    let a = json_req(&s, "PATCH", &format!("{url}?fieldValidation=Loud"), merge, typo).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loud\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );

    // Built-in kinds: the typed decoder's unknown fields, and its type errors.
    let mut p = pod("p");
    p["spec"]["containers"][0]["imagee"] = json!("nginx");
    let a = json_req(
        &s,
        "POST",
        &format!("{PODS}?fieldValidation=Strict"),
        "application/json",
        p.clone(),
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.containers[0].imagee\""
    );
    let a = json_req(
        &s,
        "POST",
        &format!("{PODS}?fieldValidation=Warn"),
        "application/json",
        p,
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.warnings.len(), 1);
    let mut bad = pod("q");
    bad["status"] = json!({"startTime": "not-a-time"});
    let a = json_req(&s, "POST", PODS, "application/json", bad).await;
    assert_eq!(a.code, 400, "{}", a.body);
    let msg = a.body["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("Pod in version \"v1\" cannot be handled as a Pod: "),
        "{msg}"
    );
}

#[tokio::test(start_paused = true)]
async fn bearer_token_and_loopback_host_required() {
    let s = server();
    let router = s.router_with_token("s3cret".into());
    let call = |path: &str, host: &str, auth: Option<&str>| {
        let mut r = Req::new("GET", path).header("host", host);
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        let router = router.clone();
        async move {
            let a = r.send(&router).await;
            (a.code, a.body)
        }
    };
    let (code, body) = call(PODS, "127.0.0.1:6443", None).await;
    assert_eq!(
        (code, body["reason"].clone()),
        (401, json!("Unauthorized")),
        "{body}"
    );
    assert_eq!(call(PODS, "127.0.0.1:6443", Some("Bearer wrong")).await.0, 401);
    assert_eq!(call(PODS, "127.0.0.1:6443", Some("Basic czNjcmV0")).await.0, 401);
    assert_eq!(call(PODS, "127.0.0.1:6443", Some("Bearer s3cret")).await.0, 200);
    assert_eq!(call(PODS, "localhost:6443", Some("Bearer s3cret")).await.0, 200);
    // kube-apiserver's bearer-token parsing: any case of the scheme; a second space empties the token (401,
    // with its warning); two Host headers are refused by Go's HTTP server before anything else.
    assert_eq!(call(PODS, "127.0.0.1:6443", Some("bearer s3cret")).await.0, 200);
    let a = Req::new("GET", PODS)
        .header("host", "127.0.0.1:6443")
        .header("authorization", "Bearer  s3cret")
        .send(&router)
        .await;
    assert_eq!(a.code, 401);
    assert_eq!(
        a.warnings,
        vec![
            "299 - \"the provided Authorization header contains extra space before the bearer token, and is ignored\""
        ]
    );
    let a = Req::new("GET", PODS)
        .header("host", "127.0.0.1:6443")
        .header("host", "127.0.0.1:6443")
        .header("authorization", "Bearer s3cret")
        .send(&router)
        .await;
    assert_eq!(
        (a.code, a.text.as_str()),
        (400, "400 Bad Request: too many Host headers")
    );
    // DNS rebinding: the right port reached under a foreign name.
    let (code, body) = call(PODS, "attacker.example:6443", Some("Bearer s3cret")).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not a loopback address")
    );
    // Health and version stay public, as RBAC's system:public-info-viewer has them.
    assert_eq!(call("/readyz", "127.0.0.1:6443", None).await.0, 200);
    assert_eq!(call("/version", "127.0.0.1:6443", None).await.0, 200);
    assert_eq!(call("/api", "127.0.0.1:6443", None).await.0, 401);
}

#[tokio::test(start_paused = true)]
async fn a_new_run_expires_old_resource_versions_and_uids() {
    use insitu_sim::apiserver::{ApiServerConfig, RunIdentity};
    let base = common::base();
    let first = ApiServer::with_config(SimClock::new(base, 1.0), ApiServerConfig::default());
    let a = json_req(&first, "POST", PODS, "application/json", pod("p")).await;
    let old_uid = a.body["metadata"]["uid"].clone();
    // Same seed, two runs of `insitu up`: distinct uids, and the old resourceVersion is gone (410).
    let run = |nonce| {
        let config = ApiServerConfig {
            run: Some(RunIdentity {
                nonce,
                first_rv: 1_000_000 * nonce,
            }),
            ..ApiServerConfig::default()
        };
        ApiServer::with_config(SimClock::new(base, 1.0), config)
    };
    let second = run(7);
    let b = json_req(&second, "POST", PODS, "application/json", pod("p")).await;
    assert_ne!(b.body["metadata"]["uid"], old_uid);
    let new_rv: u64 = b.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    assert!(new_rv > 7_000_000, "{new_rv}");
    let third = run(8);
    let c = json_req(&third, "POST", PODS, "application/json", pod("p")).await;
    assert_ne!(c.body["metadata"]["uid"], b.body["metadata"]["uid"]);
    let w = get(
        &third,
        &format!("{PODS}?watch=1&resourceVersion={new_rv}&timeoutSeconds=1"),
    )
    .await;
    // The watch starts, then ends with an ERROR event carrying the 410 Expired Status: clients relist.
    assert_eq!(
        (w.code, w.body["type"].clone()),
        (200, json!("ERROR")),
        "{}",
        w.body
    );
    assert_eq!(
        (
            w.body["object"]["code"].clone(),
            w.body["object"]["reason"].clone()
        ),
        (json!(410), json!("Expired"))
    );
}

#[tokio::test(start_paused = true)]
async fn metadata_validation_as_kube_apiserver() {
    let s = server();
    let mut p = pod("p");
    p["metadata"]["labels"] = json!({"app": "x".repeat(64)});
    let a = json_req(&s, "POST", PODS, "application/json", p).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        format!(
            "Pod \"p\" is invalid: metadata.labels: Invalid value: \"{}\": must be no more than 63 bytes",
            "x".repeat(64)
        )
    );
    assert_eq!(a.body["details"]["causes"][0]["field"], "metadata.labels");
    // A numeric label value does not decode (pods: the typed decoder; CloneSets: the embedded ObjectMeta).
    let mut p = pod("n");
    p["metadata"]["labels"] = json!({"app": 1});
    let a = json_req(&s, "POST", PODS, "application/json", p).await;
    assert_eq!(a.code, 400, "{}", a.body);
    let mut cs = cloneset("n", 1);
    cs["metadata"]["labels"] = json!({"tier": 3});
    let a = json_req(&s, "POST", CS, "application/json", cs).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        a.body["message"]
            .as_str()
            .unwrap_or_default()
            .ends_with("json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string"),
        "{}",
        a.body
    );
    // Annotations: 256 KiB in total, on update too.
    assert_eq!(
        json_req(&s, "POST", PODS, "application/json", pod("ok"))
            .await
            .code,
        201
    );
    let big = json!({"metadata": {"annotations": {"a": "x".repeat(256 * 1024)}}});
    let a = json_req(
        &s,
        "PATCH",
        &format!("{PODS}/ok"),
        "application/merge-patch+json",
        big,
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "Pod \"ok\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
    );
    assert_eq!(a.body["details"]["causes"][0]["reason"], "FieldValueTooLong");
}

#[tokio::test(start_paused = true)]
async fn size_limits_never_abort() {
    let s = server();
    // Request bodies over 3 MiB: 413.
    let mut p = pod("huge");
    p["metadata"]["annotations"] = json!({"a": "x".repeat(4 * 1024 * 1024)});
    let a = json_req(&s, "POST", PODS, "application/json", p).await;
    assert_eq!(a.code, 413, "{}", a.body);
    assert_eq!(a.body["message"], "Request entity too large: limit is 3145728");
    // A ConfigMap over 1 MiB of data: ConfigMap validation's own limit.
    let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": "x".repeat(2 * 1024 * 1024)}});
    let a = json_req(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        c.clone(),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "ConfigMap \"big\" is invalid: []: Too long: may not be more than 1048576 bytes"
    );
    // A small JSON patch of copies cannot grow an object without bound.
    c["data"] = json!({"k": "x".repeat(512 * 1024)});
    assert_eq!(
        json_req(
            &s,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            c
        )
        .await
        .code,
        201
    );
    let ops: Vec<Value> = (0..24)
        .map(|i| json!({"op": "copy", "from": "/data/k", "path": format!("/data/k{i}")}))
        .collect();
    let a = json_req(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/big",
        "application/json-patch+json",
        json!(ops),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "the server rejected our request due to an error in our request"
    );
    // Two copies stay under the copy limit but not under etcd's 1.5 MiB (an Event: no kind-specific limit).
    let ev = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
                    "reason": "R", "message": "x".repeat(600 * 1024)});
    let events = "/api/v1/namespaces/default/events";
    assert_eq!(
        json_req(&s, "POST", events, "application/json", ev).await.code,
        201
    );
    let ops = json!([{"op": "copy", "from": "/message", "path": "/reason"}, {"op": "copy", "from": "/message", "path": "/action"}]);
    let a = json_req(
        &s,
        "PATCH",
        &format!("{events}/e"),
        "application/json-patch+json",
        ops,
    )
    .await;
    assert_eq!(
        (a.code, a.body["message"].clone()),
        (500, json!("etcdserver: request is too large")),
        "{}",
        a.body
    );
    // No reason: kube-apiserver v1.37.2 sends none for etcd's error.
    assert!(a.body.get("reason").is_none(), "{}", a.body);
    // Too many operations.
    let ops: Vec<Value> = (0..10_001)
        .map(|_| json!({"op": "test", "path": "/kind", "value": "ConfigMap"}))
        .collect();
    let a = json_req(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/big",
        "application/json-patch+json",
        json!(ops),
    )
    .await;
    assert_eq!(a.code, 413, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    let live = get(&s, "/api/v1/namespaces/default/configmaps/big").await.body;
    assert_eq!(live["data"].as_object().map(|m| m.len()), Some(1));
}

#[tokio::test(start_paused = true)]
async fn pod_log_and_unsupported_streams() {
    let s = server();
    assert_eq!(
        json_req(&s, "POST", PODS, "application/json", pod("p"))
            .await
            .code,
        201
    );
    let status = json!({"status": {"containerStatuses": [{"name": "c", "image": "nginx:1.27", "imageID": "", "ready": true,
        "restartCount": 1, "state": {"running": {"startedAt": "2026-01-01T00:01:00Z"}},
        "lastState": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": "2026-01-01T00:00:10Z", "finishedAt": "2026-01-01T00:00:59Z"}}}]}});
    let a = json_req(
        &s,
        "PATCH",
        &format!("{PODS}/p/status"),
        "application/merge-patch+json",
        status,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    let text = |uri: String| {
        let router = s.router();
        async move {
            let a = Req::new("GET", &uri).send(&router).await;
            (a.code, a.text)
        }
    };
    let (code, log) = text(format!("{PODS}/p/log")).await;
    assert_eq!(code, 200, "{log}");
    assert_eq!(
        log,
        "2026-01-01T00:01:00Z simulated container c started (image nginx:1.27)\n"
    );
    let (code, log) = text(format!("{PODS}/p/log?previous=true")).await;
    assert_eq!(code, 200, "{log}");
    assert!(
        log.ends_with("2026-01-01T00:00:59Z simulated container c exited with code 0 (Completed)\n"),
        "{log}"
    );
    let (code, body) = text(format!("{PODS}/p/exec?command=sh&stdin=true")).await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("pods/exec is not supported by the simulated cluster: its containers run no processes"),
        "{body}"
    );
    assert_eq!(text(format!("{PODS}/nope/log")).await.0, 404);
}

#[tokio::test(start_paused = true)]
async fn duplicate_json_fields_as_the_strict_decoder_reports_them() {
    let s = server();
    // serde_json would keep the last `replicas` silently; kube-apiserver names both repeated fields.
    let body = br#"{"apiVersion":"apps.kruise.io/v1alpha1","kind":"CloneSet","metadata":{"name":"dup","labels":{"a":"1","a":"2"}},
        "spec":{"replicas":1,"replicas":5,"selector":{"matchLabels":{"app":"dup"}},
        "template":{"metadata":{"labels":{"app":"dup"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}}}"#;
    let a = send(
        &s,
        "POST",
        &format!("{CS}?fieldValidation=Strict"),
        "application/json",
        body.to_vec(),
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "CloneSet in version \"v1alpha1\" cannot be handled as a CloneSet: strict decoding error: duplicate field \"metadata.labels.a\", duplicate field \"spec.replicas\""
    );
    assert!(get(&s, &format!("{CS}/dup")).await.code == 404);
    // Warn: stored with the last value, one warning per repeated field.
    let a = send(
        &s,
        "POST",
        &format!("{CS}?fieldValidation=Warn"),
        "application/json",
        body.to_vec(),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.body["spec"]["replicas"], 5);
    assert_eq!(
        a.warnings,
        vec![
            "299 - \"duplicate field \\\"metadata.labels.a\\\"\"".to_string(),
            "299 - \"duplicate field \\\"spec.replicas\\\"\"".to_string(),
        ]
    );
    // A built-in kind, on update (PUT), with a path into a list.
    let a = json_req(&s, "POST", PODS, "application/json", pod("p")).await;
    assert_eq!(a.code, 201, "{}", a.body);
    // The stored pod with its image repeated: an allowed update (an image change) but for the repetition.
    let stored = get(&s, &format!("{PODS}/p")).await.body.to_string();
    let put = stored.replacen(
        r#""image":"nginx:1.27""#,
        r#""image":"nginx:1.27","image":"nginx:1.28""#,
        1,
    );
    assert_ne!(put, stored);
    let put = put.into_bytes();
    let a = send(
        &s,
        "PUT",
        &format!("{PODS}/p?fieldValidation=Strict"),
        "application/json",
        put.to_vec(),
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: duplicate field \"spec.containers[0].image\""
    );
    // Ignore: the last one wins, silently.
    let a = send(
        &s,
        "PUT",
        &format!("{PODS}/p?fieldValidation=Ignore"),
        "application/json",
        put.to_vec(),
    )
    .await;
    assert_eq!((a.code, a.warnings.len()), (200, 0), "{}", a.body);
    assert_eq!(a.body["spec"]["containers"][0]["image"], "nginx:1.28");
}

/// Lists page as kube-apiserver's do: `limit` objects in key order, continue tokens read at the first page's
/// resourceVersion, `remainingItemCount` only without selectors, `limit` ignored at `resourceVersion=0`, the
/// same in a Table (kubectl's chunked `get`), and kube-apiserver's 400s for a bad token.
#[tokio::test(start_paused = true)]
async fn lists_page_with_limit_and_continue() {
    const CM: &str = "/api/v1/namespaces/default/configmaps";
    let s = server();
    for name in ["a", "b", "c", "d", "e"] {
        let odd = ["a", "c", "e"].contains(&name).to_string();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "labels": {"odd": odd}}});
        let a = json_req(&s, "POST", CM, "application/json", cm).await;
        assert_eq!(a.code, 201, "{}", a.text);
    }
    let names = |b: &Value| -> Vec<String> {
        b["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let first = get(&s, &format!("{CM}?limit=2")).await;
    assert_eq!(
        (first.code, names(&first.body)),
        (200, vec!["a".into(), "b".into()])
    );
    assert_eq!(first.body["metadata"]["remainingItemCount"], 3);
    let rv = first.body["metadata"]["resourceVersion"].clone();
    let token = first.body["metadata"]["continue"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!token.is_empty(), "{}", first.text);

    // A write between pages is not seen by the rest of the list.
    let merge = "application/merge-patch+json";
    let a = json_req(
        &s,
        "PATCH",
        &format!("{CM}/c"),
        merge,
        json!({"data": {"k": "v"}}),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.text);
    let second = get(&s, &format!("{CM}?limit=2&continue={token}")).await;
    assert_eq!(names(&second.body), ["c", "d"]);
    assert_eq!(second.body["items"][0].get("data"), None);
    assert_eq!(second.body["metadata"]["resourceVersion"], rv);
    assert_eq!(second.body["metadata"]["remainingItemCount"], 1);
    let token2 = second.body["metadata"]["continue"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let third = get(&s, &format!("{CM}?limit=2&continue={token2}")).await;
    assert_eq!(names(&third.body), ["e"]);
    assert_eq!(third.body["metadata"].get("continue"), None, "{}", third.text);

    // resourceVersion=0 is served whole (kube-apiserver's watch cache ignores the limit).
    let all = get(&s, &format!("{CM}?limit=2&resourceVersion=0")).await;
    assert_eq!(names(&all.body).len(), 5);
    assert_eq!(all.body["metadata"].get("continue"), None);
    // With a selector, the count of what remains is not reported.
    let odd = get(&s, &format!("{CM}?limit=1&labelSelector=odd%3Dtrue")).await;
    assert_eq!(names(&odd.body), ["a"]);
    assert!(odd.body["metadata"]["continue"].is_string());
    assert_eq!(odd.body["metadata"].get("remainingItemCount"), None);
    // kubectl's chunked get: a Table page carries the token.
    let table = Req::new("GET", &format!("{CM}?limit=2"))
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .send(&s.router())
        .await;
    assert_eq!(table.body["kind"], "Table", "{}", table.text);
    assert_eq!(table.body["rows"].as_array().map(Vec::len), Some(2));
    assert!(table.body["metadata"]["continue"].is_string(), "{}", table.text);

    // Exact reads: the current state is served at its resourceVersion; the first page's state, gone since
    // its list finished and a configmap changed, is expired (kube-apiserver: once etcd compacted it).
    let now = get(&s, CM).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let exact = get(
        &s,
        &format!("{CM}?resourceVersion={now}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!((exact.code, names(&exact.body).len()), (200, 5), "{}", exact.text);
    assert_eq!(exact.body["metadata"]["resourceVersion"], now.as_str());
    let old = rv.as_str().unwrap_or_default();
    // A resourceVersion not reached yet is asked for directly or by a continue token.
    let future = {
        use base64::Engine;
        let token = r#"{"v":"meta.k8s.io/v1","rv":999999,"start":"a\u0000"}"#;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token)
    };
    let too_old = "The resourceVersion for the provided list is too old.";
    let too_large = format!("Timeout: Too large resource version: 999999, current: {now}");
    let invalid = "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: ";
    for (query, code, reason, message) in [
        (
            format!("resourceVersion={old}&resourceVersionMatch=Exact"),
            410,
            "Expired",
            too_old.to_string(),
        ),
        (
            format!("resourceVersion={old}&limit=2"),
            410,
            "Expired",
            too_old.to_string(),
        ),
        (
            "resourceVersion=999999".to_string(),
            504,
            "Timeout",
            too_large.clone(),
        ),
        (format!("continue={future}"), 504, "Timeout", too_large.clone()),
        (
            "resourceVersionMatch=Exact".to_string(),
            422,
            "Invalid",
            format!(
                "{invalid}Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
            ),
        ),
        (
            "resourceVersion=1&resourceVersionMatch=Newest".to_string(),
            422,
            "Invalid",
            format!(
                "{invalid}Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\""
            ),
        ),
    ] {
        let a = get(&s, &format!("{CM}?{query}")).await;
        let got = (a.code, a.body["reason"].as_str(), a.body["message"].as_str());
        assert_eq!(got, (code, Some(reason), Some(message.as_str())), "{query}");
    }
    for (query, message) in [
        (
            "resourceVersion=x",
            "invalid resource version: resourceVersion: Invalid value: \"x\": strconv.ParseUint: parsing \"x\": invalid syntax",
        ),
        (
            "continue=abc!",
            "invalid continue token: continue key is not valid: ",
        ),
        (
            &format!("continue={token}&resourceVersion=5") as &str,
            "specifying resource version is not allowed when using continue",
        ),
        ("limit=x", "strconv.ParseInt: parsing \"x\": invalid syntax"),
    ] {
        let a = get(&s, &format!("{CM}?{query}")).await;
        assert_eq!(
            (a.code, a.body["reason"].as_str()),
            (400, Some("BadRequest")),
            "{query}"
        );
        let got = a.body["message"].as_str().unwrap_or_default();
        assert!(got.starts_with(message), "{query}: {got}");
    }
}
