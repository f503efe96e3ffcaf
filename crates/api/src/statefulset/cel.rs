//! CEL `x-kubernetes-validations` for the Advanced StatefulSet CRD: the rules of `super::validation` that CEL
//! can say, with Kruise's messages, so that a real apiserver enforces them without a validating webhook.
//!
//! Kruise's own CRD has none (its validating webhook does it all). The selector and pod-template rules are the
//! CloneSet ones (`crate::validation::cel`), with the StatefulSet wording. Static where Kruise interpolates a
//! value: the readiness-gate message (names both in-place policies) and the `reserveOrdinals` messages (name no
//! index); not in CEL: a range's `A <= B` and the InPlaceOnly "only images may change" template diff.

use serde_json::{Value, json};

use super::validation::smsg;
use crate::validation::cel::{Rule, r, selector_rules, template_rules};
use crate::validation::{format, msg};

const RU: &str = "updateStrategy.rollingUpdate";

/// `!has(a) || !has(a.b) || ...` for a dotted path under `self`: true when any step is absent.
fn absent(path: &str) -> String {
    let mut out = Vec::new();
    let mut at = String::from("self");
    for seg in path.split('.') {
        out.push(format!("!has({at}.{seg})"));
        at = format!("{at}.{seg}");
    }
    out.join(" || ")
}

const PARALLEL: &str = "(has(self.podManagementPolicy) && self.podManagementPolicy == 'Parallel')";

/// An int-or-percent `maxUnavailable` at `path`: a non-negative integer or `N%`, at least 1 of 1 pod, and
/// exactly 1 unless the pods are managed in `Parallel`.
fn max_unavailable(path: &str) -> Vec<Rule> {
    let field = format!("{path}.maxUnavailable");
    vec![
        r(field.clone(), "type(self) != int || self >= 0", msg::NONNEGATIVE),
        r(
            field.clone(),
            "type(self) == int || self.matches('^[0-9]+%$')",
            format::regex_error(smsg::PERCENT, "[0-9]+%", &["1%", "93%"]),
        ),
        r(
            field.clone(),
            "type(self) == int ? self >= 1 : !self.matches('^0+%$')",
            smsg::LESS_THAN_ONE,
        ),
        r(
            "",
            format!(
                "{PARALLEL} || {} || (type(self.{field}) == int && self.{field} == 1)",
                absent(&field)
            ),
            smsg::PARALLEL_ONLY,
        )
        .at(format!(".{field}")),
    ]
}

/// The rules of the StatefulSet `.spec` schema (the same for both versions; v1alpha1's schema lacks the
/// v1beta1-only nodes, so rules on those are left out of it by [`rules_for`]).
pub fn rules() -> Vec<Rule> {
    let mut out: Vec<Rule> = selector_rules()
        .into_iter()
        .chain(template_rules())
        .map(|mut rule| {
            if rule.message == msg::EMPTY_SELECTOR {
                rule.message = smsg::EMPTY_SELECTOR.into();
            }
            if rule.message == msg::ACTIVE_DEADLINE {
                rule.message = smsg::ACTIVE_DEADLINE.into();
            }
            rule
        })
        .collect();
    out.push(r("replicas", "self >= 0", msg::NONNEGATIVE));
    out.push(r(
        "podManagementPolicy",
        "self in ['OrderedReady', 'Parallel']",
        smsg::BAD_POD_MANAGEMENT,
    ));
    out.push(r(
        "updateStrategy",
        "!has(self.type) || self.type in ['RollingUpdate', 'OnDelete']",
        smsg::BAD_TYPE,
    ));
    out.push(
        r(
            "updateStrategy",
            "!has(self.type) || self.type != 'OnDelete' || !has(self.rollingUpdate)",
            smsg::ROLLING_ONLY,
        )
        .at(".rollingUpdate"),
    );
    out.push(r(format!("{RU}.partition"), "self >= 0", msg::NONNEGATIVE));
    out.push(r(format!("{RU}.minReadySeconds"), "self >= 0", msg::NONNEGATIVE));
    out.push(r(
        format!("{RU}.minReadySeconds"),
        "self <= 300",
        smsg::MIN_READY_MAX,
    ));
    out.push(r(
        format!("{RU}.podUpdatePolicy"),
        "self in ['ReCreate', 'InPlaceIfPossible', 'InPlaceOnly']",
        smsg::BAD_POD_UPDATE_POLICY,
    ));
    let policy = format!("self.{RU}.podUpdatePolicy");
    out.push(
        r(
            "",
            format!(
                "{} || !({policy} in ['InPlaceIfPossible', 'InPlaceOnly']) || (has(self.template.spec) && has(self.template.spec.readinessGates) && self.template.spec.readinessGates.exists(g, has(g.conditionType) && g.conditionType == 'InPlaceUpdateReady'))",
                absent(&format!("{RU}.podUpdatePolicy"))
            ),
            smsg::readiness_gate("InPlaceIfPossible or InPlaceOnly"),
        )
        .at(".template.spec.readinessGates"),
    );
    out.extend(max_unavailable(RU));
    out.push(
        r(
            "",
            format!("{PARALLEL} || {}", absent(&format!("{RU}.unorderedUpdate"))),
            smsg::UNORDERED_PARALLEL_ONLY,
        )
        .at(format!(".{RU}.unorderedUpdate"))
        .required(),
    );
    out.extend(priority_rules());
    out.extend(max_unavailable("scaleStrategy"));
    for f in ["whenDeleted", "whenScaled"] {
        out.push(r(
            format!("persistentVolumeClaimRetentionPolicy.{f}"),
            "self in ['Retain', 'Delete']",
            "supported values: \"Retain\", \"Delete\"",
        ));
    }
    out.push(r(
        "reserveOrdinals[]",
        "type(self) == int ? self >= 0 : self.matches('^[0-9]+-[0-9]+$')",
        "a reserve ordinal is a non-negative integer or a range 'A-B' of them",
    ));
    let opt = |f: &str| format!("(has(self.{f}) ? self.{f} : '')");
    let old = |f: &str| format!("(has(oldSelf.{f}) ? oldSelf.{f} : '')");
    out.push(
        r(
            "",
            format!(
                "self.selector == oldSelf.selector && {} == {} && {} == {}",
                opt("serviceName"),
                old("serviceName"),
                opt("podManagementPolicy"),
                old("podManagementPolicy")
            ),
            smsg::IMMUTABLE,
        )
        .forbidden(),
    );
    out
}

/// `UpdatePriorityStrategy.FieldsValidation` on `unorderedUpdate.priorityStrategy`, as for CloneSets.
fn priority_rules() -> Vec<Rule> {
    let p = format!("{RU}.unorderedUpdate.priorityStrategy");
    vec![
        r(
            p.clone(),
            "!has(self.weightPriority) || size(self.weightPriority) == 0 || !has(self.orderPriority) || size(self.orderPriority) == 0",
            msg::ONLY_ONE_PRIORITY,
        )
        .required(),
        r(
            format!("{p}.weightPriority[]"),
            "self.weight >= 0 && self.weight <= 100",
            msg::WEIGHT_RANGE,
        )
        .required(),
        r(
            format!("{p}.weightPriority[]"),
            "(has(self.matchSelector.matchLabels) && size(self.matchSelector.matchLabels) > 0) || (has(self.matchSelector.matchExpressions) && size(self.matchSelector.matchExpressions) > 0)",
            msg::SELECTOR_CAN_NOT_BE_EMPTY,
        )
        .required(),
        r(
            format!("{p}.orderPriority[]"),
            "size(self.orderedKey) > 0",
            msg::ORDER_KEY_EMPTY,
        )
        .required(),
    ]
}

/// v1beta1's spec fields that v1alpha1 lacks.
const BETA_ONLY: [&str; 6] = [
    "volumeClaimUpdateStrategy",
    "reserveOrdinals",
    "lifecycle",
    "scaleStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "ordinals",
];

/// The rules that fit `spec`'s schema: a rule on a node the schema lacks, or a `.spec` rule reading a field
/// it lacks (v1alpha1 has none of v1beta1's own fields), is left out, since CEL cannot name undeclared fields.
pub fn rules_for(spec: &mut Value) -> Vec<Rule> {
    let declared = |spec: &mut Value, f: &str| crate::validation::cel::node_mut(spec, f).is_some();
    let missing: Vec<&str> = BETA_ONLY.into_iter().filter(|f| !declared(spec, f)).collect();
    rules()
        .into_iter()
        .filter(|rule| {
            declared(spec, &rule.path) && !missing.iter().any(|f| rule.rule.contains(&format!("self.{f}")))
        })
        .collect()
}

/// Adds the rules to a `.spec` schema (as JSON).
pub fn attach_to_spec(spec: &mut Value) {
    for rule in rules_for(spec) {
        let node = crate::validation::cel::node_mut(spec, &rule.path)
            .unwrap_or_else(|| panic!("CEL rule on unknown schema node spec.{}", rule.path));
        let mut v = json!({ "rule": rule.rule, "message": rule.message });
        if let Some(fp) = &rule.field_path {
            v["fieldPath"] = json!(fp);
        }
        if let Some(reason) = rule.reason {
            v["reason"] = json!(reason);
        }
        let list = node
            .as_object_mut()
            .expect("schema node is an object")
            .entry("x-kubernetes-validations")
            .or_insert_with(|| json!([]));
        list.as_array_mut().expect("validations list").push(v);
    }
}
