//! Advanced StatefulSet API: conversion (Kruise's mapping, losslessness as property tests), defaults,
//! validation with Kruise's messages, and the CRD.

use insitu_api::conversion::{PRESERVED_ANNOTATION, V1ALPHA1, V1BETA1};
use insitu_api::statefulset::conversion::{convert, to_v1alpha1, to_v1beta1};
use insitu_api::statefulset::validation::{validate_create, validate_update};
use insitu_api::statefulset::{StatefulSet, cel, crd, defaults};
use insitu_api::validation::aggregate;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn sts(api_version: &str, spec_extra: Value) -> Value {
    let mut spec = json!({
        "replicas": 3,
        "serviceName": "web",
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}},
    });
    if let (Some(a), Value::Object(b)) = (spec.as_object_mut(), spec_extra) {
        a.extend(b);
    }
    json!({"apiVersion": api_version, "kind": "StatefulSet",
           "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn preserved(v: &Value) -> Option<Value> {
    let text = v
        .pointer("/metadata/annotations")?
        .get(PRESERVED_ANNOTATION)?
        .as_str()?;
    serde_json::from_str(text).ok()
}

#[test]
fn v1alpha1_fields_carry_over_unchanged_and_the_version_changes() {
    let a = sts(
        V1ALPHA1,
        json!({"podManagementPolicy": "Parallel", "revisionHistoryLimit": 4,
               "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                   "partition": 2, "maxUnavailable": "50%", "podUpdatePolicy": "InPlaceIfPossible", "paused": true,
                   "unorderedUpdate": {"priorityStrategy": {"orderPriority": [{"orderedKey": "k"}]}},
                   "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}, "minReadySeconds": 5}}}),
    );
    let b = to_v1beta1(&a).unwrap();
    assert_eq!(b["apiVersion"], V1BETA1);
    let mut expected = a["spec"].clone();
    // v1beta1 always has a retention policy (Kruise's default, the CRD's default): implied by v1alpha1.
    expected["persistentVolumeClaimRetentionPolicy"] =
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"});
    assert_eq!(
        b["spec"], expected,
        "every v1alpha1 spec field is v1beta1's too, spelt alike"
    );
    assert!(preserved(&b).is_none());
    assert_eq!(to_v1alpha1(&b).unwrap(), a);
}

#[test]
fn v1beta1_only_fields_are_kept_in_the_annotation_and_restored() {
    let mut b = sts(
        V1BETA1,
        json!({"reserveOrdinals": [1, "3-5"], "ordinals": {"start": 2},
               "scaleStrategy": {"maxUnavailable": 2},
               "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
               "volumeClaimUpdateStrategy": {"type": "OnDelete"},
               "lifecycle": {"preDelete": {"finalizersHandler": ["x/y"]}}}),
    );
    b["status"] = json!({"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "currentReplicas": 3,
                         "updatedReplicas": 3, "updatedReadyReplicas": 3, "updatedAvailableReplicas": 3,
                         "volumeClaims": [{"volumeClaimName": "data", "compatibleReplicas": 3,
                                           "compatibleReadyReplicas": 3}], "labelSelector": "app=web"});
    let a = to_v1alpha1(&b).unwrap();
    assert_eq!(a["apiVersion"], V1ALPHA1);
    for f in [
        "reserveOrdinals",
        "ordinals",
        "scaleStrategy",
        "persistentVolumeClaimRetentionPolicy",
        "volumeClaimUpdateStrategy",
        "lifecycle",
    ] {
        assert!(a["spec"].get(f).is_none(), "{f} is not a v1alpha1 field");
    }
    assert!(a["status"].get("volumeClaims").is_none());
    assert_eq!(a["status"]["labelSelector"], "app=web");
    let kept = preserved(&a).expect("the annotation");
    assert_eq!(kept["apiVersion"], V1BETA1);
    assert_eq!(kept["spec"]["reserveOrdinals"], json!([1, "3-5"]));
    assert_eq!(kept["status"]["updatedReadyReplicas"], 3);
    // The typed v1alpha1 object reads it (unknown fields would fail nothing, but they are gone).
    let typed: insitu_api::statefulset::v1alpha1::StatefulSet = serde_json::from_value(a.clone()).unwrap();
    assert_eq!(typed.spec.replicas, Some(3));
    assert_eq!(to_v1beta1(&a).unwrap(), b, "back to v1beta1: the same object");
}

#[test]
fn a_v1alpha1_edit_keeps_the_v1beta1_fields() {
    let b = sts(V1BETA1, json!({"reserveOrdinals": [0], "ordinals": {"start": 1}}));
    let mut a = to_v1alpha1(&b).unwrap();
    a["spec"]["replicas"] = json!(5);
    let back = to_v1beta1(&a).unwrap();
    assert_eq!(back["spec"]["replicas"], 5);
    assert_eq!(back["spec"]["reserveOrdinals"], json!([0]));
    assert_eq!(back["spec"]["ordinals"], json!({"start": 1}));
    assert!(
        back.pointer("/metadata/annotations").is_none(),
        "no annotations map left behind"
    );
}

#[test]
fn the_default_retention_policy_is_implied_and_no_policy_is_kept() {
    let b = sts(
        V1BETA1,
        json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"}}),
    );
    let a = to_v1alpha1(&b).unwrap();
    assert!(
        preserved(&a).is_none(),
        "a defaulted object reads as v1alpha1 without the annotation"
    );
    assert_eq!(to_v1beta1(&a).unwrap(), b);
    let none = sts(V1BETA1, json!({}));
    let a = to_v1alpha1(&none).unwrap();
    assert_eq!(
        preserved(&a).unwrap()["spec"],
        json!({"persistentVolumeClaimRetentionPolicy": null})
    );
    assert_eq!(to_v1beta1(&a).unwrap(), none);
}

#[test]
fn bad_versions_are_refused() {
    let a = sts("apps/v1", json!({}));
    let e = convert(&a, V1BETA1).unwrap_err().to_string();
    assert!(
        e.contains("\"apps/v1\"") && e.contains("apps.kruise.io/v1beta1"),
        "{e}"
    );
    let e = convert(&sts(V1BETA1, json!({})), "apps.kruise.io/v2")
        .unwrap_err()
        .to_string();
    assert!(e.contains("apps.kruise.io/v2"), "{e}");
}

#[test]
fn the_conversion_review_converts_clonesets_and_statefulsets_alike() {
    let b = sts(V1BETA1, json!({"ordinals": {"start": 3}}));
    let cs = json!({"apiVersion": V1ALPHA1, "kind": "CloneSet", "metadata": {"name": "c"},
                    "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {},
                             "updateStrategy": {"type": "InPlaceIfPossible"}}});
    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                        "request": {"uid": "u", "desiredAPIVersion": V1ALPHA1, "objects": [b, cs]}});
    let out = insitu_api::conversion_review::review(&review);
    assert_eq!(out["response"]["result"]["status"], "Success", "{out}");
    let objs = out["response"]["convertedObjects"].as_array().unwrap();
    assert_eq!(objs[0], to_v1alpha1(&b).unwrap());
    assert_eq!(objs[1], cs, "already v1alpha1");
    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                        "request": {"uid": "u", "desiredAPIVersion": "apps.kruise.io/v9", "objects": [b]}});
    let out = insitu_api::conversion_review::review(&review);
    assert_eq!(out["response"]["result"]["status"], "Failure");
    let msg = out["response"]["result"]["message"].as_str().unwrap();
    assert!(msg.starts_with("StatefulSet web: "), "{msg}");
}

// ---- property tests: both round trips are the identity ----

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop::option::of(s)
}

fn intstr() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i32..10).prop_map(|i| json!(i)),
        (0u32..101).prop_map(|p| json!(format!("{p}%")))
    ]
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_string(), v);
    }
}

fn update_strategy() -> impl Strategy<Value = Option<Value>> {
    let rolling = (
        opt(0i32..5),
        opt(intstr()),
        opt(prop::sample::select(vec![
            "ReCreate",
            "InPlaceIfPossible",
            "InPlaceOnly",
        ])),
        any::<bool>(),
        opt(0i32..30),
        opt(0i32..300),
        any::<bool>(),
    )
        .prop_map(|(p, mu, policy, paused, grace, mrs, unordered)| {
            let mut m = Map::new();
            put(&mut m, "partition", p.map(|v| json!(v)));
            put(&mut m, "maxUnavailable", mu);
            put(&mut m, "podUpdatePolicy", policy.map(|v| json!(v)));
            if paused {
                m.insert("paused".into(), json!(true));
            }
            put(
                &mut m,
                "inPlaceUpdateStrategy",
                grace.map(|g| json!({"gracePeriodSeconds": g})),
            );
            put(&mut m, "minReadySeconds", mrs.map(|v| json!(v)));
            if unordered {
                m.insert(
                    "unorderedUpdate".into(),
                    json!({"priorityStrategy": {"weightPriority": [
                    {"weight": 50, "matchSelector": {"matchLabels": {"k": "v"}}}]}}),
                );
            }
            Value::Object(m)
        });
    opt((
        opt(prop::sample::select(vec!["RollingUpdate", "OnDelete"])),
        opt(rolling),
    )
        .prop_map(|(t, ru)| {
            let mut m = Map::new();
            put(&mut m, "type", t.map(|v| json!(v)));
            put(&mut m, "rollingUpdate", ru);
            Value::Object(m)
        }))
}

fn alpha_spec() -> impl Strategy<Value = Map<String, Value>> {
    (
        opt(0i32..10),
        opt("[a-z]{1,8}"),
        opt(prop::sample::select(vec!["OrderedReady", "Parallel"])),
        update_strategy(),
        opt(0i32..20),
        any::<bool>(),
    )
        .prop_map(|(replicas, svc, pmp, us, rhl, vct)| {
            let mut m = Map::new();
            m.insert("selector".into(), json!({"matchLabels": {"app": "x"}}));
            m.insert(
                "template".into(),
                json!({"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "nginx", "unknownField": 1}]}}),
            );
            put(&mut m, "replicas", replicas.map(|v| json!(v)));
            put(&mut m, "serviceName", svc.map(|v| json!(v)));
            put(&mut m, "podManagementPolicy", pmp.map(|v| json!(v)));
            put(&mut m, "updateStrategy", us);
            put(&mut m, "revisionHistoryLimit", rhl.map(|v| json!(v)));
            if vct {
                m.insert(
                    "volumeClaimTemplates".into(),
                    json!([{"metadata": {"name": "data"},
                    "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]),
                );
            }
            m
        })
}

fn beta_only_spec() -> impl Strategy<Value = Map<String, Value>> {
    (
        opt(prop::collection::vec(
            prop_oneof![(0i32..9).prop_map(|i| json!(i)), Just(json!("3-5"))],
            0..3,
        )),
        opt(0i32..5),
        opt(intstr()),
        opt((
            prop::sample::select(vec!["Retain", "Delete"]),
            prop::sample::select(vec!["Retain", "Delete"]),
        )),
        opt(prop::sample::select(vec!["OnDelete", "OnPodRollingUpdate"])),
        any::<bool>(),
    )
        .prop_map(|(ro, start, smu, pvc, vcus, lifecycle)| {
            let mut m = Map::new();
            put(&mut m, "reserveOrdinals", ro.map(Value::from));
            put(&mut m, "ordinals", start.map(|s| json!({"start": s})));
            put(&mut m, "scaleStrategy", smu.map(|v| json!({"maxUnavailable": v})));
            put(
                &mut m,
                "persistentVolumeClaimRetentionPolicy",
                pvc.map(|(d, s)| json!({"whenDeleted": d, "whenScaled": s})),
            );
            put(
                &mut m,
                "volumeClaimUpdateStrategy",
                vcus.map(|t| json!({"type": t})),
            );
            if lifecycle {
                m.insert(
                    "lifecycle".into(),
                    json!({"inPlaceUpdate": {"labelsHandler": {"hold": "true"}}}),
                );
            }
            m
        })
}

fn status(beta: bool) -> impl Strategy<Value = Option<Value>> {
    opt((0i32..5, 0i32..5, any::<bool>(), 0i64..9).prop_map(move |(r, u, extra, generation)| {
        let mut s = json!({"observedGeneration": generation, "replicas": r, "readyReplicas": r, "availableReplicas": r,
                           "currentReplicas": r, "updatedReplicas": u, "currentRevision": "web-1",
                           "updateRevision": "web-2", "labelSelector": "app=x",
                           "conditions": [{"type": "FailedCreatePod", "status": "True", "reason": "r"}]});
        if beta && extra {
            s["updatedReadyReplicas"] = json!(u);
            s["updatedAvailableReplicas"] = json!(u);
            s["volumeClaims"] = json!([{"volumeClaimName": "data", "compatibleReplicas": u,
                                        "compatibleReadyReplicas": u}]);
        }
        s
    }))
}

fn metadata() -> impl Strategy<Value = Option<Value>> {
    opt((any::<bool>(), any::<bool>()).prop_map(|(labels, annotations)| {
        let mut m = json!({"name": "web", "namespace": "ns", "resourceVersion": "7"});
        if labels {
            m["labels"] = json!({"team": "a"});
        }
        if annotations {
            m["annotations"] = json!({"note": "kept"});
        }
        m
    }))
}

fn object(api_version: &str, meta: Option<Value>, spec: Map<String, Value>, status: Option<Value>) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": "StatefulSet", "spec": spec});
    if let Some(m) = meta {
        o["metadata"] = m;
    }
    if let Some(s) = status {
        o["status"] = s;
    }
    o
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn v1alpha1_to_v1beta1_and_back_is_the_identity(meta in metadata(), spec in alpha_spec(), st in status(false)) {
        let a = object(V1ALPHA1, meta, spec, st);
        let b = to_v1beta1(&a).unwrap();
        prop_assert_eq!(&b["apiVersion"], V1BETA1);
        prop_assert!(preserved(&b).is_none());
        prop_assert_eq!(to_v1alpha1(&b).unwrap(), a);
    }

    #[test]
    fn v1beta1_to_v1alpha1_and_back_is_the_identity(
        meta in metadata(), spec in alpha_spec(), extra in beta_only_spec(), st in status(true)
    ) {
        let mut spec = spec;
        spec.extend(extra);
        let b = object(V1BETA1, meta, spec, st);
        let a = to_v1alpha1(&b).unwrap();
        // The v1alpha1 object decodes as the v1alpha1 type with nothing left over.
        let mut decodable = a.clone();
        if decodable.get("metadata").is_none() {
            decodable["metadata"] = json!({});
        }
        let typed: insitu_api::statefulset::v1alpha1::StatefulSet = serde_json::from_value(decodable).unwrap();
        prop_assert_eq!(typed.spec.replicas, b["spec"].get("replicas").and_then(Value::as_i64).map(|r| r as i32));
        prop_assert_eq!(to_v1beta1(&a).unwrap(), b.clone());
        // And a v1alpha1 object made by conversion survives a second round too.
        prop_assert_eq!(to_v1alpha1(&to_v1beta1(&a).unwrap()).unwrap(), a);
    }

    #[test]
    fn typed_round_trips_keep_every_field(spec in alpha_spec(), extra in beta_only_spec(), st in status(true)) {
        let mut spec = spec;
        spec.extend(extra);
        let b = object(V1BETA1, Some(json!({"name": "web"})), spec, st);
        let typed: StatefulSet = serde_json::from_value(b).unwrap();
        let alpha = insitu_api::statefulset::conversion::statefulset_to_v1alpha1(&typed).unwrap();
        let back = insitu_api::statefulset::conversion::statefulset_to_v1beta1(&alpha).unwrap();
        prop_assert_eq!(serde_json::to_value(back).unwrap(), serde_json::to_value(typed).unwrap());
    }
}

// ---- defaults ----

#[test]
fn defaults_are_kruises_for_v1beta1() {
    let out = defaults::admit(&sts(V1BETA1, json!({"replicas": null})), None);
    let s = &out["spec"];
    assert_eq!(s["replicas"], 1);
    assert_eq!(s["revisionHistoryLimit"], 10);
    assert_eq!(s["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        s["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1,
               "podUpdatePolicy": "ReCreate", "minReadySeconds": 0}})
    );
    assert_eq!(
        s["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert!(
        s.get("volumeClaimUpdateStrategy").is_none(),
        "StatefulSetAutoResizePVCGate is off"
    );
    // Template defaults, as for CloneSets: imagePullPolicy Always for in-place updates.
    assert_eq!(
        s["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    assert_eq!(s["template"]["spec"]["restartPolicy"], "Always");
    let again = defaults::admit(&out, Some(&out));
    assert_eq!(again, out, "defaults are idempotent");
}

#[test]
fn on_delete_gets_no_rolling_update_and_v1alpha1_no_retention_policy() {
    let out = defaults::admit(
        &sts(
            V1ALPHA1,
            json!({"updateStrategy": {"type": "OnDelete"},
                                                     "podManagementPolicy": ""}),
        ),
        None,
    );
    assert_eq!(out["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    assert_eq!(
        out["spec"]["podManagementPolicy"], "OrderedReady",
        "an empty string is defaulted as in Go"
    );
    assert!(out["spec"].get("persistentVolumeClaimRetentionPolicy").is_none());
    assert!(
        preserved(&out).is_none(),
        "defaulting a v1alpha1 object writes no preserved annotation"
    );
}

#[test]
fn an_update_that_keeps_the_template_does_not_default_it() {
    let old = sts(V1BETA1, json!({}));
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(4);
    let out = defaults::admit(&new, Some(&old));
    assert!(
        out["spec"]["template"]["spec"]["containers"][0]
            .get("imagePullPolicy")
            .is_none()
    );
    assert_eq!(out["spec"]["updateStrategy"]["type"], "RollingUpdate");
    // Through the shared webhook entry point too.
    let admitted = insitu_api::defaults::admit_request(&new, Some(&old)).unwrap();
    assert_eq!(admitted.object, out);
}

// ---- validation ----

fn defaulted(spec_extra: Value) -> StatefulSet {
    serde_json::from_value(defaults::admit(&sts(V1BETA1, spec_extra), None)).unwrap()
}

#[test]
fn a_defaulted_statefulset_is_valid() {
    assert_eq!(validate_create(&defaulted(json!({}))), vec![]);
    let parallel = defaulted(
        json!({"podManagementPolicy": "Parallel", "reserveOrdinals": [1, "4-6"],
        "scaleStrategy": {"maxUnavailable": "50%"},
        "updateStrategy": {"rollingUpdate": {"maxUnavailable": 2, "podUpdatePolicy": "InPlaceIfPossible",
            "unorderedUpdate": {"priorityStrategy": {"orderPriority": [{"orderedKey": "k"}]}}}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
            "containers": [{"name": "nginx", "image": "nginx:1.25"}]}}}),
    );
    assert_eq!(validate_create(&parallel), vec![]);
}

#[test]
fn kruise_messages_for_bad_specs() {
    let cases = [
        (
            json!({"podManagementPolicy": "Sometimes"}),
            "spec.podManagementPolicy: Invalid value: \"Sometimes\": must be 'OrderedReady' or 'Parallel'",
        ),
        (
            json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}}),
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 2: can only work with Parallel PodManagementPolicyType",
        ),
        (
            json!({"updateStrategy": {"rollingUpdate": {"minReadySeconds": 301}}}),
            "spec.updateStrategy.rollingUpdate.minReadySeconds: Invalid value: 301: must be no more than 300 seconds",
        ),
        (
            json!({"updateStrategy": {"rollingUpdate": {"partition": -1}}}),
            "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}),
            "spec.template.spec.readinessGates: Invalid value: null: must contains InPlaceUpdateReady when podUpdatePolicy is InPlaceOnly",
        ),
        (
            json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "Sometimes"}}}),
            "spec.updateStrategy.rollingUpdate.podUpdatePolicy: Invalid value: \"Sometimes\": must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
        ),
        (
            json!({"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}}}),
            "spec.updateStrategy.rollingUpdate: Invalid value: {\"partition\":1}: only allowed for updateStrategy 'RollingUpdate'",
        ),
        (
            json!({"updateStrategy": {"rollingUpdate": {"unorderedUpdate": {}}}}),
            "spec.updateStrategy.rollingUpdate.unorderedUpdate: Required value: unorderedUpdate can only work with Parallel PodManagementPolicyType",
        ),
        (
            json!({"reserveOrdinals": ["5-3"]}),
            "spec: Invalid value: [\"5-3\"]: 0 th reserve ordinal is invalid: 5-3, err = invalid range 5-3",
        ),
        (
            json!({"reserveOrdinals": [2, -1]}),
            "spec: Invalid value: [2,-1]: 1 th reserve ordinal is negative: -1",
        ),
        (
            json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Keep"}}),
            "spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\"",
        ),
        (
            json!({"replicas": -2}),
            "spec.replicas: Invalid value: -2: must be greater than or equal to 0",
        ),
        (
            json!({"selector": {}}),
            "spec.selector: Invalid value: {}: empty selector is invalid for statefulset",
        ),
        (
            json!({"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"activeDeadlineSeconds": 5,
               "containers": [{"name": "nginx", "image": "nginx"}]}}}),
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported",
        ),
    ];
    for (extra, want) in cases {
        let errs = validate_create(&defaulted(extra.clone()));
        let all = aggregate(&errs);
        assert!(
            errs.iter().any(|e| e.to_string() == want),
            "{extra}: want {want}\n got {all}"
        );
    }
}

#[test]
fn updates_may_change_only_what_kruise_allows() {
    let old = defaulted(json!({}));
    let mut new = old.clone();
    new.spec.replicas = Some(7);
    new.spec.reserve_ordinals = vec![k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0)];
    new.spec.ordinals = Some(insitu_api::statefulset::v1beta1::StatefulSetOrdinals { start: 2 });
    assert_eq!(validate_update(&new, &old), vec![]);
    let mut bad = old.clone();
    bad.spec.service_name = Some("other".into());
    let errs = aggregate(&validate_update(&bad, &old));
    assert!(
        errs.starts_with("spec: Forbidden: updates to statefulset spec for fields other than 'replicas'"),
        "{errs}"
    );
}

#[test]
fn in_place_only_allows_image_changes_only() {
    let old = defaulted(
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
            "containers": [{"name": "nginx", "image": "nginx:1.25"}]}}}),
    );
    let mut new = old.clone();
    new.spec.template.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.26".into());
    assert_eq!(validate_update(&new, &old), vec![]);
    new.spec.template.spec.as_mut().unwrap().containers[0].args = Some(vec!["-v".into()]);
    let errs = aggregate(&validate_update(&new, &old));
    assert!(
        errs.contains("invalid template modified with InPlaceOnly strategy: add /containers/0/args"),
        "{errs}"
    );
}

// ---- the CRD ----

#[test]
fn crd_is_kruises_shape_with_conversion_by_insitu() {
    let c = serde_json::to_value(crd::crd()).unwrap();
    assert_eq!(c["metadata"]["name"], crd::CRD_NAME);
    assert_eq!(c["spec"]["names"]["shortNames"], json!(["sts", "asts"]));
    assert_eq!(c["spec"]["scope"], "Namespaced");
    assert_eq!(c["spec"]["conversion"]["strategy"], "Webhook");
    assert_eq!(
        c["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"],
        "/convert"
    );
    let versions = c["spec"]["versions"].as_array().unwrap();
    let names: Vec<(&str, bool, bool)> = versions
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap(),
                v["served"] == true,
                v["storage"] == true,
            )
        })
        .collect();
    assert_eq!(names, [("v1alpha1", true, false), ("v1beta1", true, true)]);
    for v in versions {
        let scale = &v["subresources"]["scale"];
        assert_eq!(scale["specReplicasPath"], ".spec.replicas");
        assert_eq!(scale["statusReplicasPath"], ".status.replicas");
        assert_eq!(scale["labelSelectorPath"], ".status.labelSelector");
        assert_eq!(v["subresources"]["status"], json!({}));
        let cols: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            cols,
            [
                "DESIRED",
                "CURRENT",
                "UPDATED",
                "READY",
                "AGE",
                "CONTAINERS",
                "IMAGES"
            ]
        );
    }
}

#[test]
fn every_cel_rule_is_on_v1beta1_and_v1alpha1_has_those_its_schema_can_hold() {
    let yaml = include_str!("../../../deploy/crd.yaml");
    let doc = yaml
        .split("\n---\n")
        .nth(1)
        .expect("deploy/crd.yaml holds the StatefulSet CRD second");
    let mut c: Value = serde_saphyr::from_str(doc).unwrap();
    assert_eq!(c["metadata"]["name"], crd::CRD_NAME);
    let count = |spec: &Value| spec.to_string().matches("\"rule\":").count();
    let mut beta = c
        .pointer("/spec/versions/1/schema/openAPIV3Schema/properties/spec")
        .unwrap()
        .clone();
    assert_eq!(count(&beta), cel::rules().len());
    assert_eq!(cel::rules_for(&mut beta).len(), cel::rules().len());
    let alpha = c
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .unwrap();
    let alpha_rules = cel::rules_for(alpha);
    assert_eq!(count(alpha), alpha_rules.len());
    assert!(alpha_rules.len() < cel::rules().len());
    assert!(
        alpha_rules
            .iter()
            .all(|r| !r.rule.contains("scaleStrategy") && !r.path.starts_with("reserveOrdinals"))
    );
    assert!(
        !alpha.to_string().contains("Retain"),
        "v1alpha1 has no retention policy default"
    );
}
