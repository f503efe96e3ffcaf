//! CEL `x-kubernetes-validations` on the CRD: the validation rules a real apiserver enforces without a webhook.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, ValidationRule,
};

/// A CEL rule with the message Kruise's webhook gives for the same mistake.
pub struct Rule {
    pub rule: &'static str,
    pub message: &'static str,
    pub field_path: Option<&'static str>,
}

/// Rules on `.spec` (self = spec, oldSelf = previous spec).
pub const SPEC_RULES: &[Rule] = &[
    Rule {
        rule: "!has(self.replicas) || self.replicas >= 0",
        message: "must be greater than or equal to 0",
        field_path: Some(".replicas"),
    },
    Rule {
        rule: "(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",
        message: "empty selector is invalid for cloneset",
        field_path: Some(".selector"),
    },
    Rule {
        rule: "!has(self.updateStrategy) || !has(self.updateStrategy.type) || self.updateStrategy.type in ['ReCreate', 'InPlaceIfPossible', 'InPlaceOnly']",
        message: "must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
        field_path: Some(".updateStrategy"),
    },
];

/// Transition rules on `.spec` (need `oldSelf`).
pub const SPEC_TRANSITION_RULES: &[Rule] = &[Rule {
    rule: "self.selector == oldSelf.selector",
    message: "updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden",
    field_path: None,
}];

fn to_rule(r: &Rule) -> ValidationRule {
    ValidationRule {
        rule: r.rule.to_string(),
        message: Some(r.message.to_string()),
        field_path: r.field_path.map(str::to_string),
        ..Default::default()
    }
}

/// Adds the rules to every version's `.spec` schema.
pub fn attach(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        let Some(spec) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|root| root.properties.as_mut())
            .and_then(|props| props.get_mut("spec"))
        else {
            continue;
        };
        let rules: Vec<ValidationRule> = SPEC_RULES
            .iter()
            .chain(SPEC_TRANSITION_RULES)
            .map(to_rule)
            .collect();
        let spec: &mut JSONSchemaProps = spec;
        spec.x_kubernetes_validations = Some(rules);
    }
}
