//! CloneSet validation: one test per rule of Kruise's `validateCloneSetSpec`, its webhook test cases
//! (`pkg/webhook/cloneset/validating/validation_test.go`), the template checks, and the CEL rules in the
//! generated CRD.

use insitu_api::CloneSet;
use insitu_api::validation::{aggregate, cel, msg, validate_create, validate_update};
use serde_json::{Value, json};

/// Kruise's `validPodTemplate` CloneSet (`validation_test.go`), as JSON.
fn base() -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": "cs-0", "namespace": "default", "uid": "u1"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {
                    "restartPolicy": "Always",
                    "dnsPolicy": "ClusterFirst",
                    "containers": [{"name": "abc", "image": "image", "imagePullPolicy": "IfNotPresent"}]
                }
            },
            "updateStrategy": {"type": "InPlaceIfPossible", "partition": 2, "maxUnavailable": 1}
        }
    })
}

fn cs(v: Value) -> CloneSet {
    serde_json::from_value(v).expect("test CloneSet deserializes")
}

/// The base CloneSet with `f` applied to its JSON.
fn with(f: impl FnOnce(&mut Value)) -> CloneSet {
    let mut v = base();
    f(&mut v);
    cs(v)
}

fn spec(v: &mut Value) -> &mut Value {
    &mut v["spec"]
}

fn messages(cs: &CloneSet) -> Vec<String> {
    validate_create(cs).iter().map(ToString::to_string).collect()
}

#[track_caller]
fn assert_valid(cs: &CloneSet) {
    let errs = messages(cs);
    assert!(errs.is_empty(), "expected valid, got {errs:#?}");
}

#[track_caller]
fn assert_error(cs: &CloneSet, expected: &str) {
    let errs = messages(cs);
    assert!(
        errs.iter().any(|e| e == expected),
        "expected error\n  {expected}\ngot {errs:#?}"
    );
}

#[track_caller]
fn assert_only_error(cs: &CloneSet, expected: &str) {
    let errs = messages(cs);
    assert_eq!(errs, vec![expected.to_string()]);
}

#[track_caller]
fn assert_update_error(new: &CloneSet, old: &CloneSet, expected: &str) {
    let errs: Vec<String> = validate_update(new, old)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        errs.iter().any(|e| e == expected),
        "expected error\n  {expected}\ngot {errs:#?}"
    );
}

#[track_caller]
fn assert_update_valid(new: &CloneSet, old: &CloneSet) {
    let errs: Vec<String> = validate_update(new, old)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(errs.is_empty(), "expected valid update, got {errs:#?}");
}

// ---------------------------------------------------------------------------------------------------------
// Kruise webhook success cases (§4.5).

#[test]
fn kruise_valid_base_with_pods_to_delete() {
    assert_valid(&with(|v| {
        spec(v)["scaleStrategy"] = json!({"podsToDelete": ["p0"]})
    }));
}

#[test]
fn kruise_valid_max_unavailable_1_max_surge_1() {
    assert_valid(&with(|v| spec(v)["updateStrategy"]["maxSurge"] = json!(1)));
}

#[test]
fn kruise_valid_max_unavailable_0_max_surge_1() {
    assert_valid(&with(|v| {
        spec(v)["updateStrategy"]["maxUnavailable"] = json!(0);
        spec(v)["updateStrategy"]["maxSurge"] = json!(1);
    }));
}

#[test]
fn kruise_valid_max_unavailable_120_percent() {
    assert_valid(&with(|v| {
        spec(v)["updateStrategy"]["maxUnavailable"] = json!("120%")
    }));
}

#[test]
fn kruise_valid_weight_priority() {
    assert_valid(&with(|v| {
        spec(v)["updateStrategy"]["maxUnavailable"] = json!("120%");
        spec(v)["updateStrategy"]["priorityStrategy"] =
            json!({"weightPriority": [{"weight": 20, "matchSelector": {"matchLabels": {"key": "foo"}}}]});
    }));
}

#[test]
fn kruise_valid_in_place_only_image_change() {
    let old = with(|v| {
        spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly");
        spec(v)["template"]["spec"]["containers"][0]["image"] = json!("image1");
    });
    let new = with(|v| spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly"));
    assert_update_valid(&new, &old);
}

#[test]
fn kruise_valid_changing_allowed_fields() {
    let old = cs(base());
    let new = with(|v| {
        let s = spec(v);
        s["replicas"] = json!(5);
        s["template"]["spec"]["containers"][0]["image"] = json!("image2");
        s["template"]["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
        s["scaleStrategy"] = json!({"podsToDelete": ["p0"], "maxUnavailable": 2});
        s["updateStrategy"] = json!({"type": "ReCreate", "partition": "50%", "maxUnavailable": "10%", "maxSurge": 1, "paused": true});
        s["minReadySeconds"] = json!(5);
        s["lifecycle"] = json!({"preDelete": {"markPodNotReady": true}});
        s["revisionHistoryLimit"] = json!(3);
        s["progressDeadlineSeconds"] = json!(600);
        s["volumeClaimTemplates"] =
            json!([{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]);
    });
    assert_update_valid(&new, &old);
}

#[test]
fn kruise_valid_pds_and_min_ready_max_int32() {
    let old = with(|v| {
        spec(v)["updateStrategy"]["type"] = json!("ReCreate");
        spec(v)["progressDeadlineSeconds"] = json!(10);
        spec(v)["minReadySeconds"] = json!(5);
    });
    let new = with(|v| {
        spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly");
        spec(v)["progressDeadlineSeconds"] = json!(i32::MAX);
        spec(v)["minReadySeconds"] = json!(i32::MAX);
    });
    assert_update_valid(&new, &old);
}

#[test]
fn seed_demo_is_valid() {
    let demo: CloneSet =
        serde_saphyr::from_str(include_str!("../../../examples/cloneset-demo.yaml")).unwrap();
    assert_valid(&demo);
}

#[test]
fn minimal_cloneset_is_valid() {
    assert_valid(&cs(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": "m"},
        "spec": {
            "selector": {"matchLabels": {"app": "m"}},
            "template": {"metadata": {"labels": {"app": "m"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
        }
    })));
}

// ---------------------------------------------------------------------------------------------------------
// §1.6 rules, one test each (Kruise's message, exact).

#[test]
fn replicas_must_not_be_negative() {
    assert_only_error(
        &with(|v| spec(v)["replicas"] = json!(-1)),
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
    );
}

#[test]
fn replicas_zero_skips_the_budget_rule() {
    assert_valid(&with(|v| {
        spec(v)["replicas"] = json!(0);
        spec(v)["updateStrategy"]["maxUnavailable"] = json!(0);
    }));
}

#[test]
fn empty_selector_is_rejected() {
    let c = with(|v| spec(v)["selector"] = json!({}));
    assert_only_error(
        &c,
        "spec.selector: Invalid value: {}: empty selector is invalid for cloneset",
    );
    let c = with(|v| spec(v)["selector"] = json!({"matchLabels": {}}));
    assert_error(
        &c,
        "spec.selector: Invalid value: {\"matchLabels\":{}}: empty selector is invalid for cloneset",
    );
}

#[test]
fn selector_must_match_template_labels() {
    // Kruise "invalid-selector".
    let c = with(|v| spec(v)["selector"] = json!({"matchLabels": {"a": "b", "c": "d"}}));
    assert_only_error(
        &c,
        "spec.template.metadata.labels: Invalid value: {\"a\":\"b\"}: `selector` does not match template `labels`",
    );
    let c = with(|v| {
        spec(v)["selector"] =
            json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]})
    });
    assert_only_error(
        &c,
        "spec.template.metadata.labels: Invalid value: {\"a\":\"b\"}: `selector` does not match template `labels`",
    );
    let c = with(|v| spec(v)["template"]["metadata"] = json!({}));
    assert_only_error(
        &c,
        "spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`",
    );
    assert_valid(&with(|v| {
        spec(v)["selector"] = json!({"matchExpressions": [
            {"key": "a", "operator": "In", "values": ["b", "c"]},
            {"key": "x", "operator": "DoesNotExist"},
            {"key": "a", "operator": "Exists"}
        ]})
    }));
}

#[test]
fn selector_must_be_well_formed() {
    let c = with(|v| {
        spec(v)["selector"]["matchExpressions"] = json!([{"key": "a", "operator": "Foo", "values": ["b"]}])
    });
    assert_error(
        &c,
        "spec.selector.matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector operator (use In, NotIn, Exists or DoesNotExist)",
    );
    assert!(
        messages(&c)
            .iter()
            .any(|e| e.starts_with("spec.selector: Invalid value: {")),
        "{:?}",
        messages(&c)
    );
    let c = with(|v| spec(v)["selector"]["matchExpressions"] = json!([{"key": "a", "operator": "In"}]));
    assert_error(
        &c,
        "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
    );
    let c = with(|v| {
        spec(v)["selector"]["matchExpressions"] = json!([{"key": "a", "operator": "Exists", "values": ["b"]}])
    });
    assert_error(
        &c,
        "spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
    );
    let c = with(|v| {
        spec(v)["selector"]["matchLabels"]["bad key"] = json!("x");
        spec(v)["template"]["metadata"]["labels"]["bad key"] = json!("x");
    });
    assert_error(
        &c,
        "spec.selector.matchLabels: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    );
}

#[test]
fn template_labels_must_be_valid() {
    // Kruise "invalid-template": bad label key and no containers.
    let c = with(|v| {
        spec(v)["template"] = json!({
            "metadata": {"labels": {"NoUppercaseOrSpecialCharsLike=Equals": "b"}},
            "spec": {"restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}
        })
    });
    let errs = messages(&c);
    assert!(errs.iter().any(|e| e.starts_with(
        "spec.template.labels: Invalid value: \"NoUppercaseOrSpecialCharsLike=Equals\": name part must consist of alphanumeric characters"
    )));
    assert!(
        errs.contains(
            &"spec.template.spec.containers: Required value: add at least one container".to_string()
        )
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("`selector` does not match template `labels`"))
    );
}

#[test]
fn restart_policy_must_be_always() {
    assert_only_error(
        &with(|v| spec(v)["template"]["spec"]["restartPolicy"] = json!("Never")),
        "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
    );
    assert_valid(&with(|v| {
        spec(v)["template"]["spec"]["restartPolicy"] = json!("")
    }));
}

#[test]
fn active_deadline_seconds_is_forbidden() {
    assert_only_error(
        &with(|v| spec(v)["template"]["spec"]["activeDeadlineSeconds"] = json!(30)),
        "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in cloneset is not Supported",
    );
}

#[test]
fn pods_to_delete_must_be_unique() {
    // Kruise "invalid-podsToDelete-1".
    assert_only_error(
        &with(|v| spec(v)["scaleStrategy"] = json!({"podsToDelete": ["p0", "p0"]})),
        "spec.scaleStrategy.podsToDelete: Invalid value: [\"p0\",\"p0\"]: duplicated items [p0]",
    );
    assert_error(
        &with(|v| spec(v)["scaleStrategy"] = json!({"podsToDelete": ["a", "b", "a", "b", "a"]})),
        "spec.scaleStrategy.podsToDelete: Invalid value: [\"a\",\"b\",\"a\",\"b\",\"a\"]: duplicated items [a b a]",
    );
}

#[test]
fn update_strategy_type_must_be_known() {
    assert_only_error(
        &with(|v| spec(v)["updateStrategy"]["type"] = json!("Foo")),
        "spec.updateStrategy.type: Invalid value: \"Foo\": must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
    );
    // Kruise's "invalid-update-type" uses "", which its mutating webhook turns into ReCreate before validation;
    // insitu has no mutating webhook and treats "" (and absent) as ReCreate.
    assert_valid(&with(|v| spec(v)["updateStrategy"]["type"] = json!("")));
    assert_valid(&with(|v| spec(v)["updateStrategy"]["type"] = json!("ReCreate")));
}

#[test]
fn partition_must_not_be_negative() {
    // Kruise "invalid-partition".
    assert_only_error(
        &with(|v| spec(v)["updateStrategy"]["partition"] = json!(-1)),
        "spec.updateStrategy.partition: Invalid value: -1: must be greater than or equal to 0",
    );
    assert_valid(&with(|v| spec(v)["updateStrategy"]["partition"] = json!("12.5%")));
    assert_valid(&with(|v| spec(v)["updateStrategy"]["partition"] = json!("200%")));
}

#[test]
fn partition_string_must_be_a_percentage() {
    assert_only_error(
        &with(|v| spec(v)["updateStrategy"]["partition"] = json!("5")),
        "spec.updateStrategy.partition: Invalid value: \"5\": failed GetScaledValueFromIntOrPercent for partition: invalid type: string is not a percentage",
    );
    assert_only_error(
        &with(|v| spec(v)["updateStrategy"]["partition"] = json!("-5%")),
        "spec.updateStrategy.partition: Invalid value: \"-5%\": failed GetScaledValueFromIntOrPercent for partition: invalid percentage: use a non-negative number followed by '%', e.g. \"20%\" or \"12.5%\"",
    );
}

#[test]
fn max_surge_string_must_be_a_percentage_on_create_and_update() {
    // Kruise "invalid-cloneset-maxSurge-create" / "-update".
    let bad = with(|v| spec(v)["updateStrategy"]["maxSurge"] = json!("5"));
    let expected = "spec.updateStrategy.maxSurge: Invalid value: \"5\": failed GetScaledValueFromIntOrPercent for maxSurge: invalid type: string is not a percentage";
    assert_only_error(&bad, expected);
    assert_update_error(&bad, &cs(base()), expected);
}

#[test]
fn max_unavailable_string_must_be_a_percentage_on_create_and_update() {
    // Kruise "invalid-cloneset-maxUnavailable-create" / "-update": the bad value counts as 0, so the
    // "both less than 1" rule fires as well (as in Kruise).
    let bad = with(|v| spec(v)["updateStrategy"]["maxUnavailable"] = json!("5"));
    let expected = "spec.updateStrategy.maxUnavailable: Invalid value: \"5\": failed GetScaledValueFromIntOrPercent for maxUnavailable: invalid type: string is not a percentage";
    assert_error(&bad, expected);
    assert_error(
        &bad,
        "spec.updateStrategy.maxUnavailable: Invalid value: \"5\": maxUnavailable and maxSurge should not both be less than 1",
    );
    assert_update_error(&bad, &cs(base()), expected);
    assert_error(
        &with(|v| spec(v)["updateStrategy"]["maxUnavailable"] = json!("abc%")),
        "spec.updateStrategy.maxUnavailable: Invalid value: \"abc%\": failed GetScaledValueFromIntOrPercent for maxUnavailable: invalid percentage: use a non-negative number followed by '%', e.g. \"20%\" or \"12.5%\"",
    );
}

#[test]
fn max_unavailable_and_max_surge_must_not_be_negative() {
    // insitu addition: Kruise lets negative values through.
    assert_only_error(
        &with(|v| {
            spec(v)["updateStrategy"]["maxSurge"] = json!(-1);
        }),
        "spec.updateStrategy.maxSurge: Invalid value: -1: must be greater than or equal to 0",
    );
    assert_error(
        &with(|v| {
            spec(v)["updateStrategy"]["maxUnavailable"] = json!(-1);
            spec(v)["updateStrategy"]["maxSurge"] = json!(1);
        }),
        "spec.updateStrategy.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
    );
}

#[test]
fn max_unavailable_and_max_surge_not_both_below_one() {
    // Kruise "invalid-maxSurge" (both 0) and "invalid-maxUnavailable" (MU 0, no surge).
    assert_only_error(
        &with(|v| {
            spec(v)["updateStrategy"]["maxUnavailable"] = json!(0);
            spec(v)["updateStrategy"]["maxSurge"] = json!(0);
        }),
        "spec.updateStrategy.maxUnavailable: Invalid value: 0: maxUnavailable and maxSurge should not both be less than 1",
    );
    assert_only_error(
        &with(|v| spec(v)["updateStrategy"]["maxUnavailable"] = json!(0)),
        "spec.updateStrategy.maxUnavailable: Invalid value: 0: maxUnavailable and maxSurge should not both be less than 1",
    );
    assert_only_error(
        &with(|v| {
            spec(v)["updateStrategy"]["maxUnavailable"] = json!("0%");
            spec(v)["updateStrategy"]["maxSurge"] = json!("0%");
        }),
        "spec.updateStrategy.maxUnavailable: Invalid value: \"0%\": maxUnavailable and maxSurge should not both be less than 1",
    );
    // Absent maxUnavailable is Kruise's default 20%, which is at least 1 of any positive replica count.
    assert_valid(&with(|v| {
        spec(v)["updateStrategy"] = json!({"maxSurge": 0});
    }));
}

#[test]
fn in_place_only_forbids_max_surge() {
    assert_only_error(
        &with(|v| {
            spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly");
            spec(v)["updateStrategy"]["maxSurge"] = json!(1);
        }),
        "spec.updateStrategy.maxSurge: Invalid value: \"1\": can not use maxSurge with strategy type InPlaceOnly",
    );
    assert_only_error(
        &with(|v| {
            spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly");
            spec(v)["updateStrategy"]["maxSurge"] = json!("10%");
        }),
        "spec.updateStrategy.maxSurge: Invalid value: \"10%\": can not use maxSurge with strategy type InPlaceOnly",
    );
    assert_valid(&with(|v| {
        spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly");
        spec(v)["updateStrategy"]["maxSurge"] = json!("0%");
    }));
}

fn priority(p: Value) -> CloneSet {
    with(|v| spec(v)["updateStrategy"]["priorityStrategy"] = p)
}

#[test]
fn priority_only_one_kind() {
    assert_only_error(
        &priority(json!({
            "weightPriority": [{"weight": 20, "matchSelector": {"matchLabels": {"k": "v"}}}],
            "orderPriority": [{"orderedKey": "k"}]
        })),
        "spec.updateStrategy.priorityStrategy: Required value: only one of weightPriority and orderPriority can be used",
    );
}

#[test]
fn priority_weight_in_range() {
    assert_only_error(
        &priority(json!({"weightPriority": [{"weight": 101, "matchSelector": {"matchLabels": {"k": "v"}}}]})),
        "spec.updateStrategy.priorityStrategy: Required value: weight must be valid number in the range 1-100",
    );
    assert_only_error(
        &priority(json!({"weightPriority": [{"weight": -1, "matchSelector": {"matchLabels": {"k": "v"}}}]})),
        "spec.updateStrategy.priorityStrategy: Required value: weight must be valid number in the range 1-100",
    );
    // Kruise checks `< 0 || > 100`, so 0 passes.
    assert_valid(&priority(
        json!({"weightPriority": [{"weight": 0, "matchSelector": {"matchLabels": {"k": "v"}}}]}),
    ));
}

#[test]
fn priority_selector_not_empty() {
    assert_only_error(
        &priority(json!({"weightPriority": [{"weight": 1, "matchSelector": {}}]})),
        "spec.updateStrategy.priorityStrategy: Required value: selector can not be empty",
    );
}

#[test]
fn priority_selector_valid() {
    assert_only_error(
        &priority(
            json!({"weightPriority": [{"weight": 1, "matchSelector": {"matchExpressions": [{"key": "k", "operator": "Foo"}]}}]}),
        ),
        "spec.updateStrategy.priorityStrategy: Required value: invalid selector \"Foo\" is not a valid label selector operator",
    );
    assert_only_error(
        &priority(
            json!({"weightPriority": [{"weight": 1, "matchSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}]}),
        ),
        "spec.updateStrategy.priorityStrategy: Required value: invalid selector values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
    );
}

#[test]
fn priority_order_key_not_empty() {
    assert_only_error(
        &priority(json!({"orderPriority": [{"orderedKey": ""}]})),
        "spec.updateStrategy.priorityStrategy: Required value: order key can not be empty",
    );
}

#[test]
fn scatter_key_not_empty() {
    assert_only_error(
        &with(|v| spec(v)["updateStrategy"]["scatterStrategy"] = json!([{"key": "", "value": "x"}])),
        "spec.updateStrategy.scatterStrategy: Required value: key should not be empty",
    );
}

#[test]
fn scatter_terms_unique() {
    assert_only_error(
        &with(|v| {
            spec(v)["updateStrategy"]["scatterStrategy"] =
                json!([{"key": "k", "value": "x"}, {"key": "k", "value": "y"}, {"key": "k", "value": "x"}])
        }),
        "spec.updateStrategy.scatterStrategy: Required value: duplicated key=k value=x",
    );
}

#[test]
fn progress_deadline_must_not_be_negative() {
    // Kruise "invalid-negative-progressDeadlineSeconds": also not greater than minReadySeconds (0).
    let c = with(|v| spec(v)["progressDeadlineSeconds"] = json!(-1));
    assert_eq!(
        messages(&c),
        vec![
            "spec.progressDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.progressDeadlineSeconds: Invalid value: -1: must be greater than minReadySeconds",
        ]
    );
}

#[test]
fn progress_deadline_must_exceed_min_ready_seconds() {
    for min_ready in [10, 15] {
        // Kruise "...-equals-to-minReadySeconds" and "...-less-than-minReadySeconds" (on update).
        let old = with(|v| {
            spec(v)["progressDeadlineSeconds"] = json!(10);
            spec(v)["minReadySeconds"] = json!(5);
        });
        let new = with(|v| {
            spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly");
            spec(v)["progressDeadlineSeconds"] = json!(10);
            spec(v)["minReadySeconds"] = json!(min_ready);
        });
        assert_update_error(
            &new,
            &old,
            "spec.progressDeadlineSeconds: Invalid value: 10: must be greater than minReadySeconds",
        );
    }
    assert_valid(&with(|v| {
        spec(v)["progressDeadlineSeconds"] = json!(i32::MAX);
        spec(v)["minReadySeconds"] = json!(i32::MAX);
    }));
}

#[test]
fn revision_history_limit_and_min_ready_seconds_not_negative() {
    // insitu additions.
    assert_only_error(
        &with(|v| spec(v)["revisionHistoryLimit"] = json!(-1)),
        "spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
    );
    assert_only_error(
        &with(|v| spec(v)["minReadySeconds"] = json!(-1)),
        "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
    );
}

#[test]
fn name_must_be_a_dns_subdomain() {
    let c = with(|v| v["metadata"]["name"] = json!("Bad_Name"));
    assert!(
        messages(&c)[0]
            .starts_with("metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"),
        "{:?}",
        messages(&c)
    );
}

// ---------------------------------------------------------------------------------------------------------
// Update-only rules.

#[test]
fn selector_is_immutable() {
    // Kruise "disallowed-field-modification".
    let old = with(|v| {
        spec(v)["selector"] = json!({"matchLabels": {"app": "webserver"}});
        spec(v)["template"]["metadata"]["labels"]["app"] = json!("webserver");
    });
    let new = cs(base());
    assert_update_error(
        &new,
        &old,
        "spec: Forbidden: updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden",
    );
}

#[test]
fn in_place_only_allows_only_image_changes() {
    // Kruise "invalid-cloneset-update-1": image and imagePullPolicy both change.
    let old = with(|v| {
        spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly");
        spec(v)["template"]["spec"]["containers"][0]["image"] = json!("image2");
        spec(v)["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
    });
    let new = with(|v| spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly"));
    assert_update_error(
        &new,
        &old,
        "spec: Forbidden: only allowed to update images in spec for InPlaceOnly, but found replace /containers/0/imagePullPolicy",
    );
    let env = with(|v| {
        spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly");
        spec(v)["template"]["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
    });
    assert_update_error(
        &env,
        &new,
        "spec: Forbidden: only allowed to update images in spec for InPlaceOnly, but found add /containers/0/env",
    );
    // Metadata may change freely; an empty list is the same as none (Go's omitempty).
    let meta = with(|v| {
        spec(v)["updateStrategy"]["type"] = json!("InPlaceOnly");
        spec(v)["template"]["metadata"]["annotations"] = json!({"x": "y"});
        spec(v)["template"]["spec"]["containers"][0]["env"] = json!([]);
    });
    assert_update_valid(&meta, &new);
}

// ---------------------------------------------------------------------------------------------------------
// Pod template checks (the part of ValidatePodTemplateSpec that matters).

fn container(c: Value) -> CloneSet {
    with(|v| spec(v)["template"]["spec"]["containers"][0] = c)
}

#[test]
fn template_needs_containers() {
    assert_only_error(
        &with(|v| spec(v)["template"]["spec"]["containers"] = json!([])),
        "spec.template.spec.containers: Required value: add at least one container",
    );
    assert_only_error(
        &with(|v| {
            spec(v)["template"]
                .as_object_mut()
                .unwrap()
                .remove("spec")
                .map(drop)
                .unwrap_or(())
        }),
        "spec.template.spec.containers: Required value: add at least one container",
    );
}

#[test]
fn container_names_are_dns_labels_and_unique() {
    assert_only_error(
        &container(json!({"name": "Main_1", "image": "x"})),
        "spec.template.spec.containers[0].name: Invalid value: \"Main_1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    );
    assert_only_error(
        &container(json!({"name": "", "image": "x"})),
        "spec.template.spec.containers[0].name: Required value: give every container a name",
    );
    assert_only_error(
        &with(|v| {
            spec(v)["template"]["spec"]["containers"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "abc", "image": "y"}))
        }),
        "spec.template.spec.containers[1].name: Duplicate value: \"abc\": container names must be unique within the pod",
    );
    assert_only_error(
        &with(|v| spec(v)["template"]["spec"]["initContainers"] = json!([{"name": "abc", "image": "y"}])),
        "spec.template.spec.initContainers[0].name: Duplicate value: \"abc\": container names must be unique across containers and initContainers",
    );
}

#[test]
fn container_image_required() {
    assert_only_error(
        &container(json!({"name": "abc"})),
        "spec.template.spec.containers[0].image: Required value: set the container image",
    );
}

#[test]
fn container_ports_in_range() {
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "ports": [{"containerPort": 0}]})),
        "spec.template.spec.containers[0].ports[0].containerPort: Required value: set the port number the container listens on (1-65535)",
    );
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "ports": [{"containerPort": 70000}]})),
        "spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
    );
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "ports": [{"containerPort": 80, "hostPort": -1}]})),
        "spec.template.spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
    );
    assert_only_error(
        &container(
            json!({"name": "abc", "image": "x", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}),
        ),
        "spec.template.spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
    );
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "ports": [
            {"containerPort": 80, "name": "http"}, {"containerPort": 81, "name": "http"}
        ]})),
        "spec.template.spec.containers[0].ports[1].name: Duplicate value: \"http\": port names must be unique within the container",
    );
}

#[test]
fn env_names_valid() {
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "env": [{"name": "1BAD", "value": "v"}]})),
        "spec.template.spec.containers[0].env[0].name: Invalid value: \"1BAD\": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')",
    );
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "env": [{"name": "", "value": "v"}]})),
        "spec.template.spec.containers[0].env[0].name: Required value: give every environment variable a name",
    );
    assert_only_error(
        &container(
            json!({"name": "abc", "image": "x", "env": [{"name": "A", "value": "v", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}),
        ),
        "spec.template.spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
    );
}

#[test]
fn volumes_unique_and_mounts_resolve() {
    let c = with(|v| {
        spec(v)["template"]["spec"]["volumes"] =
            json!([{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]);
    });
    assert_only_error(
        &c,
        "spec.template.spec.volumes[1].name: Duplicate value: \"data\": volume names (including volumeClaimTemplates names) must be unique",
    );
    let c = with(|v| spec(v)["template"]["spec"]["volumes"] = json!([{"name": "data"}]));
    assert_only_error(
        &c,
        "spec.template.spec.volumes[0]: Required value: must specify a volume type",
    );
    let c = with(|v| {
        spec(v)["template"]["spec"]["volumes"] =
            json!([{"name": "data", "emptyDir": {}, "hostPath": {"path": "/x"}}])
    });
    assert_only_error(
        &c,
        "spec.template.spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
    );
    let c = container(
        json!({"name": "abc", "image": "x", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}),
    );
    assert_only_error(
        &c,
        "spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"data\": add a volume named \"data\" to spec.template.spec.volumes or a volumeClaimTemplate named \"data\"",
    );
    // A volumeClaimTemplate counts as a volume (Kruise mocks it into the template).
    let with_vct = with(|v| {
        spec(v)["template"]["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "data", "mountPath": "/d"}]);
        spec(v)["volumeClaimTemplates"] =
            json!([{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]);
    });
    assert_valid(&with_vct);
    let clash = with(|v| {
        spec(v)["template"]["spec"]["volumes"] = json!([{"name": "data", "emptyDir": {}}]);
        spec(v)["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"}}]);
    });
    assert_only_error(
        &clash,
        "spec.template.spec.volumes[1].name: Duplicate value: \"data\": volume names (including volumeClaimTemplates names) must be unique",
    );
    let dup_mount = with(|v| {
        spec(v)["template"]["spec"]["volumes"] =
            json!([{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]);
        spec(v)["template"]["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "a", "mountPath": "/d"}, {"name": "b", "mountPath": "/d"}]);
    });
    assert_only_error(
        &dup_mount,
        "spec.template.spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/d\": must be unique",
    );
}

#[test]
fn probes_have_exactly_one_handler() {
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "readinessProbe": {"periodSeconds": 3}})),
        "spec.template.spec.containers[0].readinessProbe: Required value: must specify a handler type",
    );
    assert_only_error(
        &container(
            json!({"name": "abc", "image": "x", "livenessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}}),
        ),
        "spec.template.spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
    );
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "startupProbe": {"httpGet": {"port": 0}}})),
        "spec.template.spec.containers[0].startupProbe.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive",
    );
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "livenessProbe": {"exec": {}}})),
        "spec.template.spec.containers[0].livenessProbe.exec.command: Required value: give the command to run",
    );
    assert_only_error(
        &container(json!({"name": "abc", "image": "x", "lifecycle": {"preStop": {}}})),
        "spec.template.spec.containers[0].lifecycle.preStop: Required value: must specify a handler type",
    );
    assert_only_error(
        &container(
            json!({"name": "abc", "image": "x", "livenessProbe": {"tcpSocket": {"port": "http"}, "successThreshold": 2}}),
        ),
        "spec.template.spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
    );
}

#[test]
fn init_containers_and_ephemeral_containers() {
    assert_only_error(
        &with(|v| {
            spec(v)["template"]["spec"]["initContainers"] =
                json!([{"name": "init", "image": "x", "readinessProbe": {"exec": {"command": ["true"]}}}])
        }),
        "spec.template.spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
    );
    // A sidecar (restartPolicy Always) may have probes.
    assert_valid(&with(|v| {
        spec(v)["template"]["spec"]["initContainers"] = json!([
            {"name": "side", "image": "x", "restartPolicy": "Always", "readinessProbe": {"exec": {"command": ["true"]}}}
        ])
    }));
    assert_only_error(
        &with(|v| {
            spec(v)["template"]["spec"]["ephemeralContainers"] = json!([{"name": "dbg", "image": "x"}])
        }),
        "spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template",
    );
}

// ---------------------------------------------------------------------------------------------------------
// Error rendering.

#[test]
fn aggregate_joins_and_dedups_like_apimachinery() {
    let c = with(|v| {
        spec(v)["replicas"] = json!(-1);
        spec(v)["updateStrategy"]["type"] = json!("Foo");
    });
    let errs = validate_create(&c);
    assert_eq!(
        aggregate(&errs),
        "[spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.updateStrategy.type: Invalid value: \"Foo\": must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'"
            .to_string()
            + "]"
    );
    let twice = [errs[0].clone(), errs[0].clone()];
    assert_eq!(
        aggregate(&twice),
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
}

// ---------------------------------------------------------------------------------------------------------
// CEL rules in the CRD.

fn committed_crd() -> Value {
    // The first document: the CloneSet CRD (the Advanced StatefulSet CRD follows it).
    let yaml = include_str!("../../../deploy/crd.yaml");
    let first = yaml.split("\n---\n").next().unwrap_or_default();
    serde_saphyr::from_str(first).expect("deploy/crd.yaml parses")
}

fn spec_schema(crd: &mut Value) -> &mut Value {
    crd.pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .expect("spec schema")
}

#[test]
fn crd_yaml_contains_every_cel_rule_where_it_belongs() {
    let mut crd = committed_crd();
    let spec = spec_schema(&mut crd);
    let rules = cel::rules();
    assert!(rules.len() > 60, "{} rules", rules.len());
    for rule in &rules {
        let node = cel::node_mut(spec, &rule.path).unwrap_or_else(|| panic!("no node spec.{}", rule.path));
        let list = node["x-kubernetes-validations"]
            .as_array()
            .unwrap_or_else(|| panic!("no rules on spec.{}", rule.path));
        let found = list.iter().any(|v| {
            v["rule"] == json!(rule.rule)
                && v["message"] == json!(rule.message)
                && v.get("fieldPath").and_then(Value::as_str) == rule.field_path.as_deref()
                && v.get("reason").and_then(Value::as_str) == rule.reason
        });
        assert!(found, "rule missing on spec.{}: {}", rule.path, rule.rule);
    }
}

#[test]
fn crd_has_a_cel_rule_for_each_kruise_message() {
    let rules = cel::rules();
    let has = |m: &str| rules.iter().any(|r| r.message == m);
    for m in [
        msg::NONNEGATIVE,
        msg::EMPTY_SELECTOR,
        msg::SELECTOR_MISMATCH,
        msg::ACTIVE_DEADLINE,
        msg::BAD_TYPE,
        msg::INPLACEONLY_SURGE,
        msg::MU_MS_LT1,
        msg::PDS_MIN_READY,
        msg::ONLY_ONE_PRIORITY,
        msg::WEIGHT_RANGE,
        msg::SELECTOR_CAN_NOT_BE_EMPTY,
        msg::ORDER_KEY_EMPTY,
        msg::SCATTER_KEY_EMPTY,
        msg::IMMUTABLE,
    ] {
        assert!(has(m), "no CEL rule with message {m:?}");
    }
    for f in ["partition", "maxUnavailable", "maxSurge"] {
        assert!(has(&msg::not_percent(f)), "{f}");
        assert!(has(&msg::bad_percent(f)), "{f}");
    }
    let spec_rules: Vec<_> = rules.iter().filter(|r| r.path.is_empty()).collect();
    assert!(spec_rules.iter().any(|r| r.rule == "self.selector == oldSelf.selector"
        && r.reason == Some("FieldValueForbidden")));
    let replicas = rules.iter().find(|r| r.path == "replicas").unwrap();
    assert_eq!(replicas.rule, "self >= 0");
    let ty = rules.iter().find(|r| r.path == "updateStrategy.type").unwrap();
    assert!(ty.rule.contains("'ReCreate', 'InPlaceIfPossible', 'InPlaceOnly'"));
    let pods = rules
        .iter()
        .find(|r| r.path == "scaleStrategy.podsToDelete")
        .unwrap();
    assert!(pods.rule.contains("exists_one"));
}

#[test]
fn crd_defaults_and_template_schema() {
    let mut crd = committed_crd();
    let spec = spec_schema(&mut crd);
    let default = |spec: &mut Value, path: &str| cel::node_mut(spec, path).unwrap()["default"].clone();
    assert_eq!(default(spec, "replicas"), json!(1));
    assert_eq!(default(spec, "revisionHistoryLimit"), json!(10));
    assert_eq!(default(spec, "updateStrategy"), json!({}));
    assert_eq!(default(spec, "updateStrategy.type"), json!("ReCreate"));
    assert_eq!(default(spec, "updateStrategy.partition"), json!(0));
    assert_eq!(default(spec, "updateStrategy.maxUnavailable"), json!("20%"));
    assert_eq!(default(spec, "updateStrategy.maxSurge"), json!(0));
    // Nothing in the template is defaulted, and every declared template object keeps unknown fields.
    fn walk(node: &Value, path: &str) {
        if node["type"] == "object" && node.get("additionalProperties").is_none() {
            assert_eq!(
                node["x-kubernetes-preserve-unknown-fields"],
                json!(true),
                "{path} would prune unknown fields"
            );
        }
        assert!(node.get("default").is_none(), "{path} has a default");
        for (k, v) in node["properties"].as_object().into_iter().flatten() {
            walk(v, &format!("{path}.{k}"));
        }
        if let Some(items) = node.get("items") {
            walk(items, &format!("{path}[]"));
        }
    }
    walk(cel::node_mut(spec, "template").unwrap(), "spec.template");
    walk(
        cel::node_mut(spec, "volumeClaimTemplates[]").unwrap(),
        "spec.volumeClaimTemplates[]",
    );
}
