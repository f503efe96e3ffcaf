//! v1alpha1 ↔ v1beta1 conversion: Kruise's mapping (tables) and losslessness (property tests).

use insitu_api::conversion::{PRESERVED_ANNOTATION, V1ALPHA1, V1BETA1, convert, to_v1alpha1, to_v1beta1};
use proptest::prelude::*;
use serde_json::{Value, json};

fn alpha(spec_extra: Value, meta_extra: Value) -> Value {
    let mut spec = json!({
        "replicas": 3,
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
    });
    merge(&mut spec, spec_extra);
    let mut meta = json!({"name": "cs", "namespace": "default"});
    merge(&mut meta, meta_extra);
    json!({"apiVersion": V1ALPHA1, "kind": "CloneSet", "metadata": meta, "spec": spec,
           "status": {"replicas": 3, "readyReplicas": 2, "updateRevision": "cs-abc"}})
}

fn merge(into: &mut Value, extra: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), extra) {
        for (k, v) in b {
            a.insert(k, v);
        }
    }
}

fn beta_of(spec_extra: Value, meta_extra: Value) -> Value {
    let mut v = alpha(spec_extra, meta_extra);
    v["apiVersion"] = json!(V1BETA1);
    v
}

fn has_preserved(v: &Value) -> bool {
    v.pointer("/metadata/annotations")
        .and_then(|a| a.get(PRESERVED_ANNOTATION))
        .is_some()
}

#[test]
fn alpha_in_place_maps_to_rolling_update_with_pod_update_policy() {
    let a = alpha(
        json!({"updateStrategy": {"type": "InPlaceIfPossible", "partition": "50%", "maxUnavailable": 1,
               "maxSurge": 0, "paused": true, "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10},
               "scatterStrategy": [{"key": "zone", "value": "a"}]}}),
        json!({}),
    );
    let b = to_v1beta1(&a).unwrap();
    assert_eq!(b["apiVersion"], V1BETA1);
    assert_eq!(
        b["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {
            "partition": "50%", "maxUnavailable": 1, "maxSurge": 0, "paused": true,
            "podUpdatePolicy": "InPlaceIfPossible", "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10},
            "scatterStrategy": [{"key": "zone", "value": "a"}]}})
    );
    assert_eq!(b["status"], a["status"], "status is the same in both versions");
    assert_eq!(b["spec"]["template"], a["spec"]["template"]);
    assert!(
        !has_preserved(&b),
        "a fully specified v1alpha1 strategy needs nothing kept: {b}"
    );
    assert_eq!(to_v1alpha1(&b).unwrap(), a);
}

#[test]
fn pvc_reuse_is_inverted_and_always_written_in_v1beta1() {
    let b = to_v1beta1(&alpha(json!({}), json!({}))).unwrap();
    assert_eq!(b["spec"]["scaleStrategy"], json!({"enablePVCReuse": true}));
    let b = to_v1beta1(&alpha(
        json!({"scaleStrategy": {"disablePVCReuse": true, "podsToDelete": ["p"]}}),
        json!({}),
    ))
    .unwrap();
    assert_eq!(
        b["spec"]["scaleStrategy"],
        json!({"enablePVCReuse": false, "podsToDelete": ["p"]})
    );
    // v1beta1's default (no reuse) reads as disablePVCReuse in v1alpha1.
    let a = to_v1alpha1(&beta_of(
        json!({"scaleStrategy": {"enablePVCReuse": false}}),
        json!({}),
    ))
    .unwrap();
    assert_eq!(a["spec"]["scaleStrategy"], json!({"disablePVCReuse": true}));
    let a = to_v1alpha1(&beta_of(json!({}), json!({}))).unwrap();
    assert_eq!(a["spec"]["scaleStrategy"], json!({"disablePVCReuse": true}));
}

#[test]
fn exclude_preparing_delete_label_and_field() {
    let label = "apps.kruise.io/cloneset-scaling-exclude-preparing-delete";
    let a = alpha(json!({}), json!({"labels": {label: "true", "x": "y"}}));
    let b = to_v1beta1(&a).unwrap();
    assert_eq!(b["spec"]["scaleStrategy"]["excludePreparingDelete"], json!(true));
    assert_eq!(to_v1alpha1(&b).unwrap(), a);
    // v1beta1's field reads as the label in v1alpha1 (what v1alpha1 readers look at), and comes back as it was.
    let b = beta_of(
        json!({"scaleStrategy": {"enablePVCReuse": true, "excludePreparingDelete": true}}),
        json!({}),
    );
    let a = to_v1alpha1(&b).unwrap();
    assert_eq!(a["metadata"]["labels"][label], "true");
    assert_eq!(to_v1beta1(&a).unwrap(), b);
}

#[test]
fn image_pre_download_annotations_become_fields() {
    let a = alpha(
        json!({"updateStrategy": {"type": "InPlaceIfPossible", "partition": 1}}),
        json!({"annotations": {
            "apps.kruise.io/image-predownload-parallelism": "2",
            "apps.kruise.io/image-predownload-timeout-seconds": "600",
            "apps.kruise.io/image-predownload-min-updated-ready-pods": "1"}}),
    );
    let b = to_v1beta1(&a).unwrap();
    assert_eq!(
        b["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"],
        json!({"imagePreDownloadParallelism": 2, "imagePreDownloadTimeoutSeconds": 600,
               "imagePreDownloadMinUpdatedReadyPods": 1})
    );
    assert_eq!(to_v1alpha1(&b).unwrap(), a);
    // The other way: fields become annotations.
    let b = beta_of(
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly",
               "inPlaceUpdateStrategy": {"imagePreDownloadParallelism": 3}}},
               "scaleStrategy": {"enablePVCReuse": true}}),
        json!({}),
    );
    let a = to_v1alpha1(&b).unwrap();
    assert_eq!(a["spec"]["updateStrategy"]["type"], "InPlaceOnly");
    assert_eq!(
        a["metadata"]["annotations"]["apps.kruise.io/image-predownload-parallelism"],
        "3"
    );
    assert_eq!(to_v1beta1(&a).unwrap(), b);
}

#[test]
fn on_delete_round_trips_and_keeps_what_v1alpha1_cannot_say() {
    let b = beta_of(
        json!({"updateStrategy": {"type": "OnDelete"}, "scaleStrategy": {"enablePVCReuse": false}}),
        json!({}),
    );
    let a = to_v1alpha1(&b).unwrap();
    assert_eq!(a["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    assert!(!has_preserved(&a));
    assert_eq!(to_v1beta1(&a).unwrap(), b);

    // OnDelete with rolling parameters: Kruise drops the podUpdatePolicy going to v1alpha1; it is kept here.
    let b = beta_of(
        json!({"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible",
               "maxUnavailable": 2}}, "scaleStrategy": {"enablePVCReuse": true}}),
        json!({}),
    );
    let a = to_v1alpha1(&b).unwrap();
    assert_eq!(
        a["spec"]["updateStrategy"],
        json!({"type": "OnDelete", "maxUnavailable": 2})
    );
    assert!(has_preserved(&a));
    assert_eq!(to_v1beta1(&a).unwrap(), b);
}

#[test]
fn unknown_pod_update_policy_reads_as_recreate_like_kruise() {
    let b = beta_of(
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "Bogus"}}}),
        json!({}),
    );
    let a = to_v1alpha1(&b).unwrap();
    assert_eq!(a["spec"]["updateStrategy"]["type"], "ReCreate");
    assert_eq!(
        to_v1beta1(&a).unwrap(),
        b,
        "and the bad value is back for validation to report"
    );
}

#[test]
fn an_edit_through_the_other_version_wins_over_the_kept_spelling() {
    let b = beta_of(
        json!({"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}},
               "scaleStrategy": {"enablePVCReuse": true}}),
        json!({}),
    );
    let mut a = to_v1alpha1(&b).unwrap();
    a["spec"]["updateStrategy"]["type"] = json!("InPlaceIfPossible");
    let b2 = to_v1beta1(&a).unwrap();
    assert_eq!(b2["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(
        b2["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"],
        "InPlaceIfPossible"
    );
    assert!(!has_preserved(&b2), "the stale kept part is dropped: {b2}");
}

#[test]
fn defaulted_objects_carry_no_preserved_annotation() {
    let a = alpha(
        json!({"updateStrategy": {"type": "ReCreate", "partition": 0, "maxUnavailable": "20%", "maxSurge": 0}}),
        json!({}),
    );
    assert!(!has_preserved(&to_v1beta1(&a).unwrap()));
    let b = beta_of(
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "ReCreate",
               "partition": 0, "maxUnavailable": "20%", "maxSurge": 0}}, "scaleStrategy": {"enablePVCReuse": false}}),
        json!({}),
    );
    assert!(!has_preserved(&to_v1alpha1(&b).unwrap()));
}

#[test]
fn bad_versions_are_refused_with_the_fix() {
    let mut a = alpha(json!({}), json!({}));
    let err = convert(&a, "apps.kruise.io/v2").unwrap_err().to_string();
    assert!(err.contains("apps.kruise.io/v1beta1"), "{err}");
    a["apiVersion"] = json!("apps/v1");
    assert!(to_v1beta1(&a).is_err());
    assert_eq!(
        convert(&alpha(json!({}), json!({})), V1ALPHA1).unwrap(),
        alpha(json!({}), json!({}))
    );
}

// ---- property tests: the round trip is the identity ----

fn intstr() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i64..20).prop_map(|i| json!(i)),
        (0u32..=100).prop_map(|p| json!(format!("{p}%"))),
    ]
}

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop_oneof![Just(None), s.prop_map(Some)].boxed()
}

fn put(m: &mut serde_json::Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_string(), v);
    }
}

fn rolling_fields() -> impl Strategy<Value = serde_json::Map<String, Value>> {
    (
        opt(intstr()),
        opt(intstr()),
        opt(intstr()),
        opt(any::<bool>().prop_map(|b| json!(b))),
        opt(Just(
            json!({"weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"k": "v"}}}]}),
        )),
        opt(Just(json!([{"key": "zone", "value": "a"}]))),
    )
        .prop_map(|(p, mu, ms, paused, prio, scatter)| {
            let mut m = serde_json::Map::new();
            put(&mut m, "partition", p);
            put(&mut m, "maxUnavailable", mu);
            put(&mut m, "maxSurge", ms);
            put(&mut m, "paused", paused);
            put(&mut m, "priorityStrategy", prio);
            put(&mut m, "scatterStrategy", scatter);
            m
        })
}

fn predownload_annotations() -> impl Strategy<Value = serde_json::Map<String, Value>> {
    (
        opt(prop_oneof![Just("2"), Just("0"), Just("50%"), Just("x")]),
        opt(prop_oneof![Just("600"), Just("abc")]),
        opt(prop_oneof![Just("1"), Just("-1")]),
        opt(Just("keep-me")),
    )
        .prop_map(|(p, t, m, other)| {
            let mut a = serde_json::Map::new();
            put(
                &mut a,
                "apps.kruise.io/image-predownload-parallelism",
                p.map(|s| json!(s)),
            );
            put(
                &mut a,
                "apps.kruise.io/image-predownload-timeout-seconds",
                t.map(|s| json!(s)),
            );
            put(
                &mut a,
                "apps.kruise.io/image-predownload-min-updated-ready-pods",
                m.map(|s| json!(s)),
            );
            put(&mut a, "note", other.map(|s| json!(s)));
            a
        })
}

fn labels() -> impl Strategy<Value = Option<Value>> {
    opt(prop_oneof![Just("true"), Just("false")]).prop_map(|v| {
        v.map(|v| json!({"app": "x", "apps.kruise.io/cloneset-scaling-exclude-preparing-delete": v}))
    })
}

fn meta(labels: Option<Value>, annotations: serde_json::Map<String, Value>) -> Value {
    let mut m =
        json!({"name": "cs", "namespace": "ns", "uid": "u-1", "resourceVersion": "7", "generation": 2});
    if let Some(l) = labels {
        m["labels"] = l;
    }
    if !annotations.is_empty() {
        m["annotations"] = Value::Object(annotations);
    }
    m
}

fn object(api_version: &str, meta: Value, update: Option<Value>, scale: Option<Value>) -> Value {
    let mut spec = json!({
        "replicas": 4,
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i",
                     "someFutureField": {"kept": true}}]}},
        "minReadySeconds": 3,
    });
    if let Some(u) = update {
        spec["updateStrategy"] = u;
    }
    if let Some(s) = scale {
        spec["scaleStrategy"] = s;
    }
    json!({"apiVersion": api_version, "kind": "CloneSet", "metadata": meta, "spec": spec,
           "status": {"observedGeneration": 2, "replicas": 4, "readyReplicas": 4, "availableReplicas": 4,
                      "updatedReplicas": 1, "updatedReadyReplicas": 1, "conditions": [{"type": "Progressing",
                      "status": "True", "reason": "CloneSetUpdated"}]}})
}

fn alpha_object() -> impl Strategy<Value = Value> {
    let update = opt((
        opt(prop_oneof![
            Just("ReCreate"),
            Just("InPlaceIfPossible"),
            Just("InPlaceOnly"),
            Just("OnDelete"),
            Just(""),
        ]),
        rolling_fields(),
        opt(opt((0i32..30).prop_map(|g| json!(g)))),
    ));
    let scale = opt((
        opt(Just(json!(["p-1", "p-2"]))),
        opt(intstr()),
        opt(any::<bool>()),
    ));
    (update, scale, labels(), predownload_annotations()).prop_map(|(u, s, l, a)| {
        let update = u.map(|(ty, mut m, ips)| {
            put(&mut m, "type", ty.map(|t| json!(t)));
            if let Some(g) = ips {
                let mut i = serde_json::Map::new();
                put(&mut i, "gracePeriodSeconds", g);
                m.insert("inPlaceUpdateStrategy".into(), Value::Object(i));
            }
            Value::Object(m)
        });
        let scale = s.map(|(ptd, mu, disable)| {
            let mut m = serde_json::Map::new();
            put(&mut m, "podsToDelete", ptd);
            put(&mut m, "maxUnavailable", mu);
            put(&mut m, "disablePVCReuse", disable.map(|b| json!(b)));
            Value::Object(m)
        });
        object(V1ALPHA1, meta(l, a), update, scale)
    })
}

fn beta_object() -> impl Strategy<Value = Value> {
    let ips = opt((
        opt((0i32..30).prop_map(|g| json!(g))),
        opt(prop_oneof![Just(json!(2)), Just(json!("3")), Just(json!(0))]),
        opt((0i32..900).prop_map(|t| json!(t))),
        opt((0i32..5).prop_map(|t| json!(t))),
    ));
    let rolling = opt((
        rolling_fields(),
        opt(prop_oneof![
            Just("ReCreate"),
            Just("InPlaceIfPossible"),
            Just("InPlaceOnly"),
            Just(""),
        ]),
        ips,
    ));
    let update = opt((
        opt(prop_oneof![Just("RollingUpdate"), Just("OnDelete"), Just("")]),
        rolling,
    ));
    let scale = opt((
        opt(Just(json!(["p-1"]))),
        opt(intstr()),
        opt(any::<bool>()),
        opt(any::<bool>()),
    ));
    (update, scale, labels(), predownload_annotations()).prop_map(|(u, s, l, a)| {
        let update = u.map(|(ty, ru)| {
            let mut m = serde_json::Map::new();
            put(&mut m, "type", ty.map(|t| json!(t)));
            if let Some((mut r, policy, ips)) = ru {
                put(&mut r, "podUpdatePolicy", policy.map(|p| json!(p)));
                if let Some((g, par, t, min)) = ips {
                    let mut i = serde_json::Map::new();
                    put(&mut i, "gracePeriodSeconds", g);
                    put(&mut i, "imagePreDownloadParallelism", par);
                    put(&mut i, "imagePreDownloadTimeoutSeconds", t);
                    put(&mut i, "imagePreDownloadMinUpdatedReadyPods", min);
                    r.insert("inPlaceUpdateStrategy".into(), Value::Object(i));
                }
                m.insert("rollingUpdate".into(), Value::Object(r));
            }
            Value::Object(m)
        });
        let scale = s.map(|(ptd, mu, enable, exclude)| {
            let mut m = serde_json::Map::new();
            put(&mut m, "podsToDelete", ptd);
            put(&mut m, "maxUnavailable", mu);
            put(&mut m, "enablePVCReuse", enable.map(|b| json!(b)));
            put(&mut m, "excludePreparingDelete", exclude.map(|b| json!(b)));
            Value::Object(m)
        });
        object(V1BETA1, meta(l, a), update, scale)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn v1alpha1_to_v1beta1_and_back_is_the_identity(a in alpha_object()) {
        let b = to_v1beta1(&a).unwrap();
        prop_assert_eq!(&b["apiVersion"], V1BETA1);
        prop_assert_eq!(&b["status"], &a["status"]);
        prop_assert_eq!(&b["spec"]["template"], &a["spec"]["template"]);
        let back = to_v1alpha1(&b).unwrap();
        prop_assert_eq!(back, a);
    }

    #[test]
    fn v1beta1_to_v1alpha1_and_back_is_the_identity(b in beta_object()) {
        let a = to_v1alpha1(&b).unwrap();
        prop_assert_eq!(&a["apiVersion"], V1ALPHA1);
        prop_assert_eq!(&a["status"], &b["status"]);
        let back = to_v1beta1(&a).unwrap();
        prop_assert_eq!(back, b);
    }

    #[test]
    fn converting_twice_the_same_way_is_stable(a in alpha_object()) {
        let b = to_v1beta1(&a).unwrap();
        prop_assert_eq!(to_v1beta1(&b).unwrap(), b.clone());
        let a2 = to_v1alpha1(&b).unwrap();
        prop_assert_eq!(to_v1beta1(&a2).unwrap(), b);
    }
}

#[test]
fn conversion_review_converts_every_object_or_fails_naming_it() {
    let a = alpha(json!({}), json!({}));
    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "r-1", "desiredAPIVersion": V1BETA1, "objects": [a.clone(), a]}});
    let out = insitu_api::conversion_review::review(&review);
    assert_eq!(out["kind"], "ConversionReview");
    assert_eq!(out["response"]["uid"], "r-1");
    assert_eq!(out["response"]["result"]["status"], "Success");
    let objs = out["response"]["convertedObjects"].as_array().unwrap();
    assert_eq!(objs.len(), 2);
    assert!(objs.iter().all(|o| o["apiVersion"] == V1BETA1));

    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "r-2", "desiredAPIVersion": "apps.kruise.io/v9", "objects": [alpha(json!({}), json!({}))]}});
    let out = insitu_api::conversion_review::review(&review);
    assert_eq!(out["response"]["result"]["status"], "Failure");
    let msg = out["response"]["result"]["message"].as_str().unwrap();
    assert!(msg.contains("CloneSet cs") && msg.contains("v1beta1"), "{msg}");
}

/// A ConversionReview of one v1alpha1 CloneSet carrying `extra` (raw JSON) under `spec.template.metadata.deep`:
/// the object nests `4 + depth of extra` levels (object, spec, template, metadata).
fn review_with_template_value(extra: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"d","desiredAPIVersion":"{V1BETA1}","objects":[{{"apiVersion":"{V1ALPHA1}","kind":"CloneSet","metadata":{{"name":"deep"}},"spec":{{"replicas":1,"template":{{"metadata":{{"deep":{extra}}}}},"updateStrategy":{{"type":"InPlaceIfPossible"}}}}}}]}}}}"#
    )
    .into_bytes()
}

#[test]
fn objects_nested_as_deep_as_kubernetes_allows_convert_and_deeper_ones_are_refused_by_name() {
    use insitu_api::conversion_review::review_json;
    use insitu_api::jsondepth::{self, MAX_DEPTH, nested_objects};
    // 200 levels under the template's metadata (kept verbatim, as the CRD preserves unknown fields there): on
    // an ordinary test thread.
    let out = review_json(&review_with_template_value(&nested_objects(200))).unwrap();
    let out: Value = jsondepth::from_slice(&out).unwrap();
    assert_eq!(
        out["response"]["result"]["status"], "Success",
        "{}",
        out["response"]["result"]
    );
    let obj = &out["response"]["convertedObjects"][0];
    assert_eq!(obj["apiVersion"], V1BETA1);
    let kept = serde_json::to_string(&obj["spec"]["template"]["metadata"]["deep"]).unwrap();
    assert_eq!(kept, nested_objects(200));

    // Exactly at the limit: converted (on a deep stack, as the webhook's workers run it).
    let at_limit = review_with_template_value(&nested_objects(MAX_DEPTH - 4));
    let out = jsondepth::on_deep_stack(|| review_json(&at_limit).unwrap());
    let success = br#""result":{"status":"Success"}"#;
    assert!(out.windows(success.len()).any(|w| w == success));
    // The object is MAX_DEPTH deep inside the review's three levels (review, response, convertedObjects).
    assert_eq!(jsondepth::check(&out, usize::MAX), Ok(MAX_DEPTH + 3));

    // One level more: a Failure naming the object and the limit, no crash.
    let past = review_with_template_value(&nested_objects(MAX_DEPTH - 3));
    let out: Value =
        serde_json::from_slice(&jsondepth::on_deep_stack(|| review_json(&past).unwrap())).unwrap();
    assert_eq!(out["response"]["result"]["status"], "Failure");
    let msg = out["response"]["result"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("CloneSet deep:") && msg.contains("max depth of 10000"),
        "{msg}"
    );
}

#[test]
fn a_review_that_is_not_one_is_an_error_and_missing_parts_a_failure() {
    use insitu_api::conversion_review::review_json;
    assert!(review_json(b"[1, 2]").is_err());
    assert!(review_json(br#"{"request": {"objects": 5}}"#).is_err());
    let out: Value = serde_json::from_slice(&review_json(br#"{"request": {"uid": "x"}}"#).unwrap()).unwrap();
    assert_eq!(out["response"]["uid"], "x");
    assert_eq!(out["response"]["result"]["status"], "Failure");
    assert!(
        out["response"]["result"]["message"]
            .as_str()
            .unwrap()
            .contains("desiredAPIVersion")
    );
    // objects before desiredAPIVersion (any order of fields is read).
    let body = format!(
        r#"{{"request": {{"objects": [{}], "desiredAPIVersion": "{V1BETA1}", "uid": "y"}}}}"#,
        alpha(json!({}), json!({}))
    );
    let out: Value = serde_json::from_slice(&review_json(body.as_bytes()).unwrap()).unwrap();
    assert_eq!(out["response"]["result"]["status"], "Success");
    assert_eq!(out["response"]["convertedObjects"][0]["apiVersion"], V1BETA1);
}
