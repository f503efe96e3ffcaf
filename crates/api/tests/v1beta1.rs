//! v1beta1: Kruise's `ValidateCloneSetV1beta1` messages and paths, and the CRD serving both versions.

use insitu_api::v1beta1::CloneSet;
use insitu_api::validation::{aggregate, v1beta1 as v};
use serde_json::{Value, json};

fn cs(update: Value) -> CloneSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "updateStrategy": update,
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        }
    }))
    .expect("cloneset")
}

fn errors(update: Value) -> String {
    aggregate(&v::validate_create(&cs(update)))
}

#[test]
fn valid_v1beta1_strategies_pass() {
    for update in [
        json!({}),
        json!({"type": "OnDelete"}),
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "partition": "50%",
               "maxUnavailable": 1, "inPlaceUpdateStrategy": {"gracePeriodSeconds": 3, "imagePreDownloadParallelism": 2}}}),
        json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly", "maxSurge": 0}}),
    ] {
        assert!(
            v::validate_create(&cs(update.clone())).is_empty(),
            "{update}: {}",
            errors(update.clone())
        );
    }
}

#[test]
fn type_and_pod_update_policy_have_kruise_messages() {
    assert_eq!(
        errors(json!({"type": "InPlaceIfPossible"})),
        "spec.updateStrategy.type: Invalid value: \"InPlaceIfPossible\": must be 'RollingUpdate' or 'OnDelete'"
    );
    assert_eq!(
        errors(json!({"rollingUpdate": {"podUpdatePolicy": "Sometimes"}})),
        "spec.updateStrategy.rollingUpdate.podUpdatePolicy: Invalid value: \"Sometimes\": must be 'ReCreate', 'InPlaceIfPossible' or 'InPlaceOnly'"
    );
}

#[test]
fn rolling_rules_are_repathed_under_rolling_update() {
    let e = errors(json!({"rollingUpdate": {"partition": "5"}}));
    assert!(
        e.contains("spec.updateStrategy.rollingUpdate.partition: Invalid value: \"5\": failed GetScaledValueFromIntOrPercent for partition: invalid type: string is not a percentage"),
        "{e}"
    );
    let e = errors(json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly", "maxSurge": 1}}));
    assert!(
        e.contains("spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: \"1\": can not use maxSurge with podUpdatePolicy InPlaceOnly"),
        "{e}"
    );
    let e = errors(json!({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}));
    assert!(
        e.contains("spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: maxUnavailable and maxSurge should not both be less than 1"),
        "{e}"
    );
}

#[test]
fn pre_download_fields_are_checked() {
    let e =
        errors(json!({"rollingUpdate": {"inPlaceUpdateStrategy": {"imagePreDownloadParallelism": "50%"}}}));
    assert_eq!(
        e,
        "spec.updateStrategy.rollingUpdate.inPlaceUpdateStrategy.imagePreDownloadParallelism: Invalid value: \"50%\": imagePreDownloadParallelism does not support percentage value"
    );
    let e = errors(
        json!({"rollingUpdate": {"inPlaceUpdateStrategy": {"imagePreDownloadParallelism": -1,
               "imagePreDownloadTimeoutSeconds": -5}}}),
    );
    assert!(
        e.contains("imagePreDownloadParallelism must be non-negative"),
        "{e}"
    );
    assert!(
        e.contains("spec.updateStrategy.rollingUpdate.inPlaceUpdateStrategy.imagePreDownloadTimeoutSeconds: Invalid value: -5: must be greater than or equal to 0"),
        "{e}"
    );
}

#[test]
fn the_selector_is_immutable_in_v1beta1_too() {
    let old = cs(json!({}));
    let mut new = old.clone();
    new.spec.selector.match_labels = Some([("app".to_string(), "other".to_string())].into());
    let e = aggregate(&v::validate_update(&new, &old));
    assert!(
        e.starts_with("[spec: Forbidden: updates to cloneset spec for fields other than"),
        "{e}"
    );
}

#[test]
fn the_crd_serves_both_versions_and_stores_v1beta1() {
    let crd = serde_json::to_value(insitu_api::crd::crd()).expect("crd");
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let shape: Vec<(String, bool, bool)> = versions
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_string(),
                v["served"].as_bool().unwrap_or(false),
                v["storage"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [("v1alpha1".into(), true, false), ("v1beta1".into(), true, true)]
    );
    assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook");
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"],
        json!({"namespace": "insitu-system", "name": "insitu-webhook", "path": "/convert", "port": 443})
    );
    assert_eq!(
        versions[0]["additionalPrinterColumns"],
        versions[1]["additionalPrinterColumns"]
    );
    assert_eq!(versions[0]["subresources"], versions[1]["subresources"]);
    let beta = &versions[1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    let ru = &beta["updateStrategy"]["properties"]["rollingUpdate"]["properties"];
    assert_eq!(ru["podUpdatePolicy"]["default"], "ReCreate");
    assert_eq!(ru["maxUnavailable"]["default"], "20%");
    assert_eq!(
        beta["updateStrategy"]["properties"]["type"]["default"],
        "RollingUpdate"
    );
    assert_eq!(
        beta["scaleStrategy"]["properties"]["enablePVCReuse"]["default"],
        false
    );
    let type_rules = beta["updateStrategy"]["properties"]["type"]["x-kubernetes-validations"].to_string();
    assert!(
        type_rules.contains("must be 'RollingUpdate' or 'OnDelete'"),
        "{type_rules}"
    );
    let url = insitu_api::crd::crd_for(&insitu_api::crd::WebhookTarget::Url(
        "https://127.0.0.1:9443/convert".into(),
    ));
    let url = serde_json::to_value(url).expect("crd");
    assert_eq!(
        url["spec"]["conversion"]["webhook"]["clientConfig"],
        json!({"url": "https://127.0.0.1:9443/convert"})
    );
}
