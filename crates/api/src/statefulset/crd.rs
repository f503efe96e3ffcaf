//! The Advanced StatefulSet CRD (`statefulsets.apps.kruise.io`): v1alpha1 and v1beta1 (storage), as Kruise's
//! `config/crd/bases/apps.kruise.io_statefulsets.yaml` names and columns it, with insitu's additions as for the
//! CloneSet CRD (`crate::crd`): the few template fields the CEL rules read declared (unknown fields still
//! preserved), bounds for the CEL cost budget, the static defaults of `SetDefaultsStatefulSet`, CEL rules
//! (`super::cel`) and conversion by insitu's webhook.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use crate::crd::{WebhookTarget, bounds, conversion_config, default_webhook_target, template_schema};
use crate::validation::cel::node_mut;

/// The CRD's name.
pub const CRD_NAME: &str = "statefulsets.apps.kruise.io";

/// Most readiness gates a template may list (the CEL readiness-gate rule iterates them).
const READINESS_GATES: u64 = 32;
/// Most `reserveOrdinals` entries.
const RESERVE_ORDINALS: u64 = 1024;

fn set(spec: &mut Value, path: &str, key: &str, value: Value) {
    let node = node_mut(spec, path).unwrap_or_else(|| panic!("no schema node spec.{path}"));
    node[key] = value;
}

/// Template schema, bounds and defaults of one version's `.spec` schema (`beta`: v1beta1's own fields too).
fn shape_spec(spec: &mut Value, beta: bool) {
    use bounds::*;
    let mut template = template_schema();
    template["properties"]["spec"]["properties"]["readinessGates"] = json!({
        "type": "array", "maxItems": READINESS_GATES,
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                   "properties": { "conditionType": { "type": "string", "maxLength": DNS_SUBDOMAIN } } }
    });
    spec["properties"]["template"] = template;
    set(
        spec,
        "volumeClaimTemplates",
        "items",
        json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "metadata": { "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                          "properties": { "name": { "type": "string", "maxLength": DNS_LABEL } } } } }),
    );
    let p = "updateStrategy.rollingUpdate.unorderedUpdate.priorityStrategy";
    let mut max_items = vec![
        ("volumeClaimTemplates".to_string(), VCTS),
        ("selector.matchExpressions".into(), SELECTOR_EXPRESSIONS),
        ("selector.matchExpressions[].values".into(), SELECTOR_VALUES),
        (format!("{p}.weightPriority"), STRATEGY_TERMS),
        (format!("{p}.orderPriority"), STRATEGY_TERMS),
        (
            format!("{p}.weightPriority[].matchSelector.matchExpressions"),
            SELECTOR_EXPRESSIONS,
        ),
    ];
    let mut max_len = vec![
        ("selector.matchExpressions[].key".to_string(), LABEL_KEY),
        ("selector.matchExpressions[].operator".into(), SHORT_STRING),
        ("selector.matchExpressions[].values[]".into(), LABEL_VALUE),
        ("podManagementPolicy".into(), SHORT_STRING),
        ("serviceName".into(), DNS_SUBDOMAIN),
        ("updateStrategy.type".into(), SHORT_STRING),
        (
            "updateStrategy.rollingUpdate.podUpdatePolicy".into(),
            SHORT_STRING,
        ),
        ("updateStrategy.rollingUpdate.maxUnavailable".into(), SHORT_STRING),
        (format!("{p}.orderPriority[].orderedKey"), LABEL_KEY),
    ];
    let mut defaults: Vec<(&str, Value)> = vec![
        ("replicas", json!(1)),
        ("revisionHistoryLimit", json!(10)),
        ("podManagementPolicy", json!("OrderedReady")),
        ("updateStrategy", json!({})),
        ("updateStrategy.type", json!("RollingUpdate")),
        // `rollingUpdate` itself is created by Kruise only for `RollingUpdate`, which a schema cannot say: its
        // fields are defaulted when it is there.
        ("updateStrategy.rollingUpdate.partition", json!(0)),
        ("updateStrategy.rollingUpdate.maxUnavailable", json!(1)),
        ("updateStrategy.rollingUpdate.podUpdatePolicy", json!("ReCreate")),
        ("updateStrategy.rollingUpdate.minReadySeconds", json!(0)),
    ];
    if beta {
        max_items.push(("reserveOrdinals".into(), RESERVE_ORDINALS));
        max_len.push(("reserveOrdinals[]".into(), SHORT_STRING));
        max_len.push(("scaleStrategy.maxUnavailable".into(), SHORT_STRING));
        max_len.push((
            "persistentVolumeClaimRetentionPolicy.whenDeleted".into(),
            SHORT_STRING,
        ));
        max_len.push((
            "persistentVolumeClaimRetentionPolicy.whenScaled".into(),
            SHORT_STRING,
        ));
        // `StatefulSetAutoDeletePVC` is on by default in Kruise: the policy is always there, `Retain`/`Retain`.
        defaults.push(("persistentVolumeClaimRetentionPolicy", json!({})));
        defaults.push((
            "persistentVolumeClaimRetentionPolicy.whenDeleted",
            json!("Retain"),
        ));
        defaults.push(("persistentVolumeClaimRetentionPolicy.whenScaled", json!("Retain")));
    }
    for (path, max) in max_items {
        set(spec, &path, "maxItems", json!(max));
    }
    set(
        spec,
        "selector.matchLabels",
        "maxProperties",
        json!(SELECTOR_LABELS),
    );
    if let Some(m) = node_mut(spec, "selector.matchLabels") {
        m["additionalProperties"]["maxLength"] = json!(LABEL_VALUE);
    }
    for (path, max) in max_len {
        set(spec, &path, "maxLength", json!(max));
    }
    for (path, value) in defaults {
        set(spec, path, "default", value);
    }
}

fn shaped_version(crd: &CustomResourceDefinition, beta: bool) -> Option<Value> {
    let v = serde_json::to_value(crd).ok()?;
    let mut ver = v.pointer("/spec/versions/0")?.clone();
    if let Some(spec) = ver.pointer_mut("/schema/openAPIV3Schema/properties/spec") {
        shape_spec(spec, beta);
        super::cel::attach_to_spec(spec);
    }
    ver["served"] = json!(true);
    ver["storage"] = json!(beta);
    Some(ver)
}

/// The Advanced StatefulSet CRD, converted by the webhook `insitu run` serves at the default target (built once
/// per process).
pub fn crd() -> CustomResourceDefinition {
    static CRD: std::sync::OnceLock<CustomResourceDefinition> = std::sync::OnceLock::new();
    CRD.get_or_init(|| crd_for(&default_webhook_target())).clone()
}

/// The CRD with the conversion webhook at `target`.
pub fn crd_for(target: &WebhookTarget) -> CustomResourceDefinition {
    let alpha = super::v1alpha1::StatefulSet::crd();
    let Ok(mut v) = serde_json::to_value(&alpha) else {
        return alpha;
    };
    let (Some(a), Some(b)) = (
        shaped_version(&alpha, false),
        shaped_version(&super::StatefulSet::crd(), true),
    ) else {
        return alpha;
    };
    v["spec"]["versions"] = json!([a, b]);
    v["spec"]["conversion"] = conversion_config(target, None);
    serde_json::from_value(v).unwrap_or(alpha)
}
