//! Hostile input to the embedded apiserver, answered as kube-apiserver answers it: JSON nested as deep as its
//! decoders allow (10,000) and no deeper, without overflowing the stack.

mod common;

use common::{Req, get, send, server};

const CS: &str = "/apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets";
const CS_BETA: &str = "/apis/apps.kruise.io/v1beta1/namespaces/default/clonesets";
const PODS: &str = "/api/v1/namespaces/default/pods";
const MERGE: &str = "application/merge-patch+json";

/// A JSON array nested `depth` deep (text: a deep `serde_json::Value` would overflow a test thread's stack).
fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// A CloneSet whose template (preserved unknown fields) holds a value nesting the document `depth` deep in all.
fn deep_cloneset(name: &str, depth: usize) -> Vec<u8> {
    deep_cloneset_in("v1alpha1", name, depth)
}

fn deep_cloneset_in(version: &str, name: &str, depth: usize) -> Vec<u8> {
    // The value sits in {spec:{template:{metadata:{deep: ...}}}}: four levels of objects.
    format!(
        r#"{{"apiVersion":"apps.kruise.io/{version}","kind":"CloneSet","metadata":{{"name":"{name}"}},"spec":{{"replicas":0,"selector":{{"matchLabels":{{"app":"{name}"}}}},"template":{{"metadata":{{"labels":{{"app":"{name}"}},"deep":{}}},"spec":{{"containers":[{{"name":"c","image":"nginx:1.27"}}]}}}}}}}}"#,
        nested(depth - 4)
    )
    .into_bytes()
}

fn depth_of(text: &str) -> usize {
    let (mut d, mut max) = (0usize, 0usize);
    let mut in_str = false;
    let mut esc = false;
    for c in text.bytes() {
        match (in_str, esc, c) {
            (true, true, _) => esc = false,
            (true, false, b'\\') => esc = true,
            (true, false, b'"') => in_str = false,
            (true, ..) => {}
            (false, _, b'"') => in_str = true,
            (false, _, b'{' | b'[') => {
                d += 1;
                max = max.max(d);
            }
            (false, _, b'}' | b']') => d = d.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_levels_are_stored_served_patched_and_deleted() {
    let s = server();
    // Written in the storage version: no conversion webhook on the way.
    let a = send(
        &s,
        "POST",
        CS_BETA,
        "application/json",
        deep_cloneset_in("v1beta1", "deep", 10_000),
    )
    .await;
    assert_eq!(a.code, 201, "{}", &a.text[..a.text.len().min(300)]);
    // Served back as deep as it was sent. (In v1alpha1, kube-apiserver's conversion webhook answer would be too
    // deep: it fails such reads, the embedded apiserver serves them; docs/embedded-cluster.md.)
    for base in [CS_BETA] {
        let a = get(&s, &format!("{base}/deep")).await;
        assert_eq!(a.code, 200);
        assert_eq!(depth_of(&a.text), 10_000, "{base}");
        let list = get(&s, base).await;
        assert_eq!((list.code, depth_of(&list.text)), (200, 10_002), "{base}");
        let watch = get(&s, &format!("{base}?watch=true&timeoutSeconds=1")).await;
        assert_eq!((watch.code, depth_of(&watch.text)), (200, 10_001), "{base}");
    }
    // A merge patch as deep, on top of the deep object: applied.
    let patch = format!(
        r#"{{"spec":{{"template":{{"metadata":{{"other":{}}}}}}}}}"#,
        nested(9_996)
    );
    let a = send(&s, "PATCH", &format!("{CS_BETA}/deep"), MERGE, patch.into_bytes()).await;
    assert_eq!(a.code, 200, "{}", &a.text[..a.text.len().min(300)]);
    assert!(a.text.contains("\"other\":[[[["), "{}", &a.text[..300]);
    let a = send(
        &s,
        "DELETE",
        &format!("{CS_BETA}/deep"),
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(a.code, 200, "{}", &a.text[..a.text.len().min(300)]);
    assert_eq!(get(&s, &format!("{CS_BETA}/deep")).await.code, 404);
}

#[tokio::test(start_paused = true)]
async fn past_ten_thousand_levels_refused_as_kube() {
    let s = server();
    let a = send(
        &s,
        "POST",
        CS,
        "application/json",
        deep_cloneset("deeper", 10_001),
    )
    .await;
    assert_eq!(a.code, 400, "{}", &a.text[..a.text.len().min(300)]);
    assert_eq!(
        a.body["message"],
        "the object provided is unrecognized (must be of type CloneSet): couldn't get version/kind; json parse \
         error: invalid character '[' exceeded max depth ({\"apiVersion\":\"apps.kruise.io/ ...)"
    );
    let pod = |extra: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p"}},"spec":{{"containers":[{{"name":"c","image":"x"}}],"extra":{extra}}}}}"#
        )
        .into_bytes()
    };
    // A deep unknown field of a pod, within the limit: stored without it (the typed decoder drops it), warned.
    let a = send(&s, "POST", PODS, "application/json", pod(&nested(9_990))).await;
    assert_eq!(a.code, 201, "{}", &a.text[..a.text.len().min(300)]);
    assert_eq!(a.warnings, vec!["299 - \"unknown field \\\"spec.extra\\\"\""]);
    assert!(a.body["spec"].get("extra").is_none());
    let a = send(&s, "POST", PODS, "application/json", pod(&nested(10_000))).await;
    assert_eq!(a.code, 400);
    assert!(a.text.contains(
        "(must be of type Pod): couldn't get version/kind; json parse error: invalid character '[' exceeded max depth ("
    ));
    // Patches: `validateAndTranscodePatch` refuses them as invalid JSON, whatever the format and directive (the
    // answers of kube-apiserver v1.37.2 to the same requests).
    let deep_patch = format!(r#"{{"metadata":{{"x":{}}}}}"#, nested(10_000)).into_bytes();
    for (ct, query) in [
        (MERGE, ""),
        (MERGE, "?fieldValidation=Ignore"),
        ("application/strategic-merge-patch+json", ""),
    ] {
        let a = send(&s, "PATCH", &format!("{PODS}/p{query}"), ct, deep_patch.clone()).await;
        assert_eq!(
            (a.code, a.body["message"].as_str()),
            (400, Some("invalid JSON patch")),
            "{ct}{query}"
        );
    }
    let ops = format!(
        r#"[{{"op":"add","path":"/metadata/x","value":{}}}]"#,
        nested(9_999)
    )
    .into_bytes();
    let a = send(
        &s,
        "PATCH",
        &format!("{PODS}/p"),
        "application/json-patch+json",
        ops,
    )
    .await;
    assert_eq!(a.body["message"], "invalid JSON patch");
    let a = send(&s, "PATCH", &format!("{PODS}/p"), MERGE, b"{\"x\":".to_vec()).await;
    assert_eq!(
        (a.code, a.body["message"].as_str()),
        (400, Some("invalid JSON patch"))
    );
}

/// A write in v1alpha1 is converted to the storage version by the conversion webhook, whose answer wraps the
/// object in three more levels: kube-apiserver v1.37.2 fails it past 9,997 (its answer to the same request).
#[tokio::test(start_paused = true)]
async fn conversion_webhook_answers_past_the_limit_fail_as_kube() {
    let s = server();
    let a = send(&s, "POST", CS, "application/json", deep_cloneset("edge", 9_997)).await;
    assert_eq!(a.code, 201, "{}", &a.text[..a.text.len().min(300)]);
    let a = send(&s, "POST", CS, "application/json", deep_cloneset("over", 9_998)).await;
    assert_eq!(a.code, 500, "{}", &a.text[..a.text.len().min(300)]);
    assert_eq!(
        a.body["message"],
        "conversion webhook for apps.kruise.io/v1alpha1, Kind=CloneSet failed: couldn't get version/kind; json \
         parse error: invalid character '[' exceeded max depth"
    );
    assert!(a.body.get("reason").is_none(), "{}", a.text);
}

/// Repeated fields of a built-in kind's body are decoded over each other, as Go's typed decoder does
/// (kube-apiserver v1.37.2 stores `{"a":"1","b":"2"}` for this body); a CloneSet's keep the last.
#[tokio::test(start_paused = true)]
async fn repeated_fields_merge_in_built_in_kinds_only() {
    let s = server();
    let cm = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1"},"data":{"b":"2"}}"#;
    let cms = "/api/v1/namespaces/default/configmaps";
    for query in ["", "?fieldValidation=Ignore"] {
        let _ = send(
            &s,
            "DELETE",
            &format!("{cms}/dup"),
            "application/json",
            Vec::new(),
        )
        .await;
        let a = send(
            &s,
            "POST",
            &format!("{cms}{query}"),
            "application/json",
            cm.to_vec(),
        )
        .await;
        assert_eq!(a.code, 201, "{}", a.text);
        assert_eq!(a.body["data"], serde_json::json!({"a": "1", "b": "2"}), "{query}");
    }
    let cs = br#"{"apiVersion":"apps.kruise.io/v1alpha1","kind":"CloneSet","metadata":{"name":"dup","labels":{"a":"1"},"labels":{"b":"2"}},"spec":{"replicas":0,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}}}"#;
    let a = send(&s, "POST", CS, "application/json", cs.to_vec()).await;
    assert_eq!(a.code, 201, "{}", a.text);
    assert_eq!(a.body["metadata"]["labels"], serde_json::json!({"b": "2"}));
}

/// A JSON patch whose paths build depth its body does not have: the result past 10,000 is refused as
/// kube-apiserver v1.37.2 refuses it (422, the patch library's failure), without overflowing the stack.
#[tokio::test(start_paused = true)]
async fn json_patch_building_depth_is_refused_past_the_limit() {
    let s = server();
    let a = send(&s, "POST", CS, "application/json", deep_cloneset("grow", 9_990)).await;
    assert_eq!(a.code, 201);
    // The stored value's innermost array is at /spec/template/metadata/deep/0/0/.../0 (9,985 zeros).
    let inner = "/0".repeat(9_985);
    let path = format!("/spec/template/metadata/deep{inner}");
    let ops = format!(r#"[{{"op":"add","path":"{path}/-","value":{}}}]"#, nested(20));
    let a = Req::new("PATCH", &format!("{CS}/grow"))
        .header("accept", "application/json")
        .body("application/json-patch+json", ops.into_bytes())
        .send(&s.router())
        .await;
    assert_eq!(a.code, 422, "{}", &a.text[..a.text.len().min(300)]);
    assert_eq!(
        a.body["message"],
        "the server rejected our request due to an error in our request"
    );
}

/// A store over its quota answers as kube-apiserver passes etcd's `mvcc: database space exceeded` on: 500, no
/// reason; deletes still go through and make room again.
#[tokio::test(start_paused = true)]
async fn quota_refuses_writes_as_etcd_through_kube() {
    use insitu_sim::apiserver::{ApiServer, ApiServerConfig};
    use insitu_sim::store::StoreConfig;
    let config = ApiServerConfig {
        store: StoreConfig {
            quota_bytes: Some(64 * 1024),
            ..StoreConfig::default()
        },
        ..ApiServerConfig::default()
    };
    let s = ApiServer::with_config(insitu_sim::SimClock::new(common::base(), 1.0), config);
    let pod = |name: String| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","labels":{{"x":"y"}}}},"spec":{{"containers":[{{"name":"c","image":"nginx:1.27"}}]}}}}"#
        )
        .into_bytes()
    };
    let mut created = 0;
    let refused = loop {
        let a = send(&s, "POST", PODS, "application/json", pod(format!("p{created}"))).await;
        if a.code != 201 {
            break a;
        }
        created += 1;
        assert!(created < 1000, "the quota never refused a write");
    };
    assert!(created > 10, "{created}");
    assert_eq!(refused.code, 500, "{}", refused.text);
    assert_eq!(
        refused.body["message"],
        "etcdserver: mvcc: database space exceeded"
    );
    assert!(refused.body.get("reason").is_none(), "{}", refused.text);
    // An update that grows the object past the quota is refused too; one that shrinks it is not.
    let grow = format!(
        r#"{{"metadata":{{"annotations":{{"a":"{}"}}}}}}"#,
        "b".repeat(2000)
    );
    let a = send(&s, "PATCH", &format!("{PODS}/p0"), MERGE, grow.into_bytes()).await;
    assert_eq!(a.code, 500, "{}", a.text);
    let shrink = br#"{"metadata":{"labels":null}}"#;
    let a = send(&s, "PATCH", &format!("{PODS}/p0"), MERGE, shrink.to_vec()).await;
    assert_eq!(a.code, 200, "a shrinking update: {}", a.text);
    let a = send(
        &s,
        "DELETE",
        &format!("{PODS}/p1?gracePeriodSeconds=0"),
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.text);
    let a = send(&s, "POST", PODS, "application/json", pod("again".into())).await;
    assert_eq!(a.code, 201, "{}", a.text);
    assert!(s.stats().objects.get("pods").is_some_and(|n| *n == created));
}

/// core/v1 Events keep their legacy validation: any name that is a valid path segment is stored, however long
/// (kube-apiserver's `ValidateEventCreate` skips the DNS rule for v1); events.k8s.io/v1 writes are strict.
#[tokio::test(start_paused = true)]
async fn legacy_event_names_as_kube() {
    let s = server();
    let event = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Event","metadata":{{"name":"{name}"}},"involvedObject":{{"kind":"Pod","name":"p","namespace":"default"}},"reason":"R","message":"m"}}"#
        )
        .into_bytes()
    };
    let events = "/api/v1/namespaces/default/events";
    let long = format!("Pod.{}", "x".repeat(300));
    let a = send(&s, "POST", events, "application/json", event(&long)).await;
    assert_eq!(a.code, 201, "{}", a.text);
    assert_eq!(get(&s, &format!("{events}/{long}")).await.code, 200);
    let a = send(&s, "POST", events, "application/json", event("a%b")).await;
    assert_eq!(a.code, 422, "{}", a.text);
    assert_eq!(
        a.body["message"],
        "Event \"a%b\" is invalid: metadata.name: Invalid value: \"a%b\": may not contain '%'"
    );
    let new = format!(
        r#"{{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{{"name":"{long}y"}},"eventTime":"2026-01-01T00:00:00.000000Z","reportingController":"c","reportingInstance":"i","action":"A","reason":"R","type":"Normal","regarding":{{"kind":"Pod","name":"p","namespace":"default"}}}}"#
    );
    let a = send(
        &s,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        "application/json",
        new.into_bytes(),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.text);
}

/// Query parameters and bodies kube-apiserver v1.37.2 answers differently from a lenient server (its answers to
/// the same requests): bad `timeoutSeconds`, malformed selectors, invalid UTF-8.
#[tokio::test(start_paused = true)]
async fn malformed_parameters_and_bodies_as_kube() {
    let s = server();
    let cms = "/api/v1/namespaces/default/configmaps";
    for url in [
        format!("{cms}?timeoutSeconds=abc"),
        format!("{cms}?watch=true&timeoutSeconds=abc"),
    ] {
        let a = get(&s, &url).await;
        assert_eq!(
            (a.code, a.body["message"].as_str()),
            (400, Some("strconv.ParseInt: parsing \"abc\": invalid syntax")),
            "{url}"
        );
    }
    // A negative timeout: one ERROR event, then the end of the stream.
    let a = get(&s, &format!("{cms}?watch=true&timeoutSeconds=-1")).await;
    assert_eq!(a.code, 200);
    let event: serde_json::Value = serde_json::from_str(a.text.trim()).unwrap_or_default();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["message"], "context deadline exceeded");
    assert_eq!(event["object"]["code"], 500);
    for (query, want) in [
        (
            "labelSelector=a%3Db%3Dc",
            "found '=', expected: ',' or 'end of string'",
        ),
        ("labelSelector=a,,b", "found ',', expected: identifier after ','"),
        (
            "fieldSelector=metadata.name%3Da%3Db",
            "invalid field selector: unescaped character in value: 61",
        ),
    ] {
        let a = get(&s, &format!("{PODS}?{query}")).await;
        assert_eq!((a.code, a.body["message"].as_str()), (400, Some(want)), "{query}");
    }
    // Invalid UTF-8 in a JSON body: each invalid byte stored as U+FFFD, as Go's decoder reads it.
    let body = b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"u8\"},\"data\":{\"a\":\"x\xff\xe2\x82y\"}}";
    let a = send(&s, "POST", cms, "application/json", body.to_vec()).await;
    assert_eq!(a.code, 201, "{}", a.text);
    assert_eq!(a.body["data"]["a"], "x\u{fffd}\u{fffd}\u{fffd}y");
}

/// Patches and updates that lose the object's name, or set a deletion timestamp, refused as kube-apiserver
/// v1.37.2 refuses them (its answers to the same requests on a ConfigMap).
#[tokio::test(start_paused = true)]
async fn patches_losing_the_name_or_setting_deletion_as_kube() {
    let s = server();
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t1"},"data":{"a":"b"}}"#;
    assert_eq!(
        send(&s, "POST", cms, "application/json", cm.to_vec()).await.code,
        201
    );
    let url = format!("{cms}/t1");
    let undeterminable = "the name of the object (t1 based on URL) was undeterminable: name must be provided";
    for (ct, patch) in [
        (MERGE, r#"{"metadata":null}"#),
        (MERGE, r#"{"metadata":{"name":null}}"#),
        (
            "application/json-patch+json",
            r#"[{"op":"remove","path":"/metadata/name"}]"#,
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"remove","path":"/metadata"}]"#,
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"$patch":"replace","data":{"x":"y"}}"#,
        ),
        ("application/strategic-merge-patch+json", r#"{"$patch":"delete"}"#),
    ] {
        let a = send(&s, "PATCH", &url, ct, patch.as_bytes().to_vec()).await;
        assert_eq!(
            (a.code, a.body["message"].as_str()),
            (400, Some(undeterminable)),
            "{ct} {patch}"
        );
    }
    let put = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{},"data":{"a":"c"}}"#;
    let a = send(&s, "PUT", &url, "application/json", put.to_vec()).await;
    assert_eq!((a.code, a.body["message"].as_str()), (400, Some(undeterminable)));
    let a = send(
        &s,
        "PATCH",
        &url,
        MERGE,
        br#"{"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"}}"#.to_vec(),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.text);
    assert_eq!(
        a.body["message"],
        "ConfigMap \"t1\" is invalid: metadata.deletionTimestamp: Invalid value: \"2026-01-01T00:00:00Z\": field is immutable"
    );
    assert_eq!(
        send(&s, "PATCH", &url, MERGE, br#"{"metadata":{}}"#.to_vec())
            .await
            .code,
        200
    );
}
