//! CEL `x-kubernetes-validations` on the CRD: the validation rules a real apiserver enforces without a webhook.
//!
//! Every rule mirrors one in `mod.rs`/`template.rs`, with the same message (the apiserver prefixes the field
//! path, and `Required value`/`Forbidden` when a `reason` is given). Rules sit on the narrowest schema node
//! that sees all they need: a field's own node (`self` = the field), or `.spec` for cross-field rules
//! (`self` = spec, `oldSelf` = the previous spec). Only standard CEL macros/functions plus `matches`,
//! `substring` and `double()` are used, so the CRD also loads on older apiservers (no `distinct()` etc.).
//!
//! Limits of CEL here:
//! - `template` and `volumeClaimTemplates` are schemaless in Kruise's CRD, and CEL cannot see fields that are only
//!   preserved as unknown (a rule naming one does not compile). `crd.rs` therefore declares the few template
//!   fields these rules read; everything else stays `x-kubernetes-preserve-unknown-fields` (nothing is pruned).
//! - Rust-only (not expressible, or too costly for the apiserver's static cost budget with bounds that no real
//!   CloneSet would hit): the InPlaceOnly "only images may change" diff of the whole template spec (CEL cannot
//!   compare undeclared fields); Kruise's API look-ups of newly added `podsToDelete` pods; volume-source
//!   counting; template label key/value syntax; env var names and `valueFrom`; volumeMounts naming an existing
//!   volume/VCT and unique mount paths; port-name syntax/uniqueness; probe details beyond the handler count.
//! - A few messages are static where Kruise interpolates values (`duplicated items [..]`,
//!   `duplicated key=.. value=..`, `invalid selector ..`): CEL messages cannot name the offending item cheaply.
//! - Lists, maps and strings that rules iterate are bounded (`maxItems`/`maxProperties`/`maxLength`, see
//!   `crd::bounds`) so the static cost estimate fits; `podsToDelete` (256 names per edit) is the tightest.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::format;
use super::msg;

mod container;
mod update_strategy;

use container::container_rules;
use update_strategy::update_strategy_rules;

/// A CEL rule placed on a schema node.
#[derive(Clone, Debug)]
pub struct Rule {
    /// Schema node relative to `.spec`: dotted property names, `[]` for a list's items (`""` = spec itself).
    pub path: String,
    pub rule: String,
    pub message: String,
    /// `fieldPath`, relative to the node (reported instead of the node's own path).
    pub field_path: Option<String>,
    /// `FieldValueRequired` / `FieldValueForbidden` / `FieldValueDuplicate` (default: `FieldValueInvalid`).
    pub reason: Option<&'static str>,
}

pub(crate) fn r(path: impl Into<String>, rule: impl Into<String>, message: impl Into<String>) -> Rule {
    Rule {
        path: path.into(),
        rule: rule.into(),
        message: message.into(),
        field_path: None,
        reason: None,
    }
}

impl Rule {
    pub(crate) fn at(mut self, field_path: impl Into<String>) -> Self {
        self.field_path = Some(field_path.into());
        self
    }
    pub(crate) fn reason(mut self, reason: &'static str) -> Self {
        self.reason = Some(reason);
        self
    }
    pub(crate) fn required(self) -> Self {
        self.reason("FieldValueRequired")
    }
    pub(crate) fn forbidden(self) -> Self {
        self.reason("FieldValueForbidden")
    }
}

/// `^[0-9]+(\.[0-9]+)?%$` as a CEL string literal.
pub(crate) const PCT: &str = r"'^[0-9]+(\\.[0-9]+)?%$'";
const DNS_LABEL: &str = "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'";
/// Label key: optional DNS-subdomain prefix and `/`, then a 1-63 character name part.
const QUALIFIED_NAME: &str = r"'^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'";
const LABEL_VALUE: &str = "'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'";

const REPLICAS: &str = "(has(self.replicas) ? self.replicas : 1)";

fn label_key_msg() -> String {
    format!(
        "label keys must be qualified names: name part {}, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        format::regex_error(
            format::QUALIFIED_NAME_MSG,
            format::QUALIFIED_NAME_FMT,
            &["MyName", "my.name", "123-abc"]
        )
    )
}

fn label_value_msg() -> String {
    format::regex_error(
        format::LABEL_VALUE_MSG,
        format::LABEL_VALUE_FMT,
        &["MyValue", "my_value", "12345"],
    )
}

fn dns_label_msg() -> String {
    format::regex_error(
        format::DNS1123_LABEL_MSG,
        format::DNS1123_LABEL_FMT,
        &["my-name", "123-abc"],
    )
}

/// `x` (an int-or-percent) scaled against replicas, compared with 0: `op` is `<` or `>`, `bad` the result for a
/// malformed percentage (Kruise counts a value it cannot parse as 0).
fn scaled_cmp(x: &str, op: &str, bad: bool) -> String {
    let pct = format!("double({x}.substring(0, size({x}) - 1)) * double({REPLICAS})");
    let (int_cmp, pct_cmp) = match op {
        "<" => (format!("{x} < 1"), format!("{pct} <= 0.0")),
        _ => (format!("{x} > 0"), format!("{pct} > 0.0")),
    };
    let pct_expr = if bad {
        format!("(!{x}.matches({PCT}) || {pct_cmp})")
    } else {
        format!("({x}.matches({PCT}) && {pct_cmp})")
    };
    format!("(type({x}) == int ? {int_cmp} : {pct_expr})")
}

/// Rules for an int-or-percent field of `updateStrategy`.
fn int_or_percent(path: &str, name: &str, nonnegative_int: bool) -> Vec<Rule> {
    let mut out = vec![
        r(
            path,
            "type(self) == int || self.endsWith('%')",
            msg::not_percent(name),
        ),
        r(
            path,
            format!("type(self) == int || !self.endsWith('%') || self.matches({PCT})"),
            msg::bad_percent(name),
        ),
    ];
    if nonnegative_int {
        out.push(r(path, "type(self) != int || self >= 0", msg::NONNEGATIVE));
    }
    out
}

/// The served CloneSet versions, whose update strategies are shaped differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1alpha1,
    V1beta1,
}

/// The rules of v1alpha1's schema.
pub fn rules() -> Vec<Rule> {
    rules_for(Version::V1alpha1)
}

/// The rules of one version's schema: v1beta1's are v1alpha1's re-pathed under `updateStrategy.rollingUpdate`,
/// with its own type and `podUpdatePolicy` checks and the pre-download fields (Kruise `ValidateCloneSetV1beta1`).
pub fn rules_for(version: Version) -> Vec<Rule> {
    let mut out = number_rules();
    out.extend(selector_rules());
    out.extend(template_rules());
    // Scale strategy.
    out.push(r(
        "scaleStrategy.podsToDelete",
        "self.all(n, self.exists_one(m, m == n))",
        "duplicated items: list every pod name once",
    ));

    out.extend(update_strategy_rules(version));

    // Transition rules (update only).
    out.push(r("", "self.selector == oldSelf.selector", msg::IMMUTABLE).forbidden());
    out
}

/// Counts and durations that cannot be negative, and the progress deadline against `minReadySeconds`.
fn number_rules() -> Vec<Rule> {
    vec![
        r("replicas", "self >= 0", msg::NONNEGATIVE),
        r("progressDeadlineSeconds", "self >= 0", msg::NONNEGATIVE),
        r(
            "",
            "!has(self.progressDeadlineSeconds) || self.progressDeadlineSeconds == 2147483647 || self.progressDeadlineSeconds > (has(self.minReadySeconds) ? self.minReadySeconds : 0)",
            msg::PDS_MIN_READY,
        )
        .at(".progressDeadlineSeconds"),
        r("revisionHistoryLimit", "self >= 0", msg::NONNEGATIVE),
        r("minReadySeconds", "self >= 0", msg::NONNEGATIVE),
    ]
}

/// The selector's own syntax, and the template's labels matching it.
pub(crate) fn selector_rules() -> Vec<Rule> {
    let labels = "self.template.metadata.labels";
    let has_labels = "has(self.template.metadata) && has(self.template.metadata.labels)";
    vec![
        r(
            "selector",
            "(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",
            msg::EMPTY_SELECTOR,
        ),
        r(
            "selector.matchLabels",
            format!("self.all(k, size(k) <= 317 && k.matches({QUALIFIED_NAME}))"),
            label_key_msg(),
        ),
        r(
            "selector.matchLabels",
            format!("self.all(k, self[k].matches({LABEL_VALUE}))"),
            label_value_msg(),
        ),
        r(
            "selector.matchExpressions[]",
            "self.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist']",
            "not a valid selector operator (use In, NotIn, Exists or DoesNotExist)",
        )
        .at(".operator"),
        r(
            "selector.matchExpressions[]",
            "!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",
            "must be specified when `operator` is 'In' or 'NotIn'",
        )
        .at(".values")
        .required(),
        r(
            "selector.matchExpressions[]",
            "!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )
        .at(".values")
        .forbidden(),
        r(
            "selector.matchExpressions[]",
            format!("size(self.key) <= 317 && self.key.matches({QUALIFIED_NAME})"),
            label_key_msg(),
        )
        .at(".key"),
        r(
            "selector.matchExpressions[]",
            format!("!has(self.values) || self.values.all(v, v.matches({LABEL_VALUE}))"),
            label_value_msg(),
        )
        .at(".values"),
        r(
            "",
            format!(
                "(!has(self.selector.matchLabels) || self.selector.matchLabels.all(k, {has_labels} && k in {labels} && {labels}[k] == self.selector.matchLabels[k])) && \
                 (!has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, \
                   e.operator == 'In' ? (!has(e.values) || size(e.values) == 0 || ({has_labels} && e.key in {labels} && {labels}[e.key] in e.values)) : \
                   e.operator == 'NotIn' ? (!({has_labels} && e.key in {labels}) || !has(e.values) || !({labels}[e.key] in e.values)) : \
                   e.operator == 'Exists' ? ({has_labels} && e.key in {labels}) : \
                   e.operator == 'DoesNotExist' ? !({has_labels} && e.key in {labels}) : true))"
            ),
            msg::SELECTOR_MISMATCH,
        )
        .at(".template.metadata.labels"),
    ]
}

/// The pod template (containers, restart policy, volumes) and the volumeClaimTemplates beside it.
pub(crate) fn template_rules() -> Vec<Rule> {
    let mut out = vec![
        r(
            "template",
            "has(self.spec) && has(self.spec.containers) && size(self.spec.containers) > 0",
            "add at least one container",
        )
        .at(".spec.containers")
        .required(),
        r(
            "template.spec.restartPolicy",
            "self == '' || self == 'Always'",
            "supported values: \"Always\"",
        ),
        r("template.spec", "!has(self.activeDeadlineSeconds)", msg::ACTIVE_DEADLINE)
            .at(".activeDeadlineSeconds")
            .forbidden(),
        r(
            "template.spec",
            "!has(self.ephemeralContainers) || size(self.ephemeralContainers) == 0",
            "ephemeral containers not allowed in pod template",
        )
        .at(".ephemeralContainers")
        .forbidden(),
        r(
            "template.spec.containers",
            "self.all(c, !has(c.name) || self.exists_one(d, has(d.name) && d.name == c.name))",
            "duplicate container name: container names must be unique within the pod",
        ),
        r(
            "template.spec",
            "!has(self.initContainers) || self.initContainers.all(c, !has(c.name) || (self.initContainers.exists_one(d, has(d.name) && d.name == c.name) && (!has(self.containers) || !self.containers.exists(d, has(d.name) && d.name == c.name))))",
            "duplicate container name: container names must be unique across containers and initContainers",
        )
        .at(".initContainers"),
        r("template.spec.volumes[]", "has(self.name) && size(self.name) > 0", "give every volume a name")
            .at(".name")
            .required(),
        r(
            "template.spec.volumes[]",
            format!("!has(self.name) || size(self.name) == 0 || self.name.matches({DNS_LABEL})"),
            dns_label_msg(),
        )
        .at(".name"),
        r(
            "template.spec.volumes",
            "self.all(v, !has(v.name) || self.exists_one(w, has(w.name) && w.name == v.name))",
            "duplicate volume name: volume names (including volumeClaimTemplates names) must be unique",
        ),
        r(
            "volumeClaimTemplates[]",
            "has(self.metadata) && has(self.metadata.name) && size(self.metadata.name) > 0",
            "give every volumeClaimTemplate a name (it is also the volume name to mount)",
        )
        .at(".metadata.name")
        .required(),
        r(
            "volumeClaimTemplates",
            "self.all(t, !has(t.metadata) || !has(t.metadata.name) || self.exists_one(u, has(u.metadata) && has(u.metadata.name) && u.metadata.name == t.metadata.name))",
            "duplicate volume name: volume names (including volumeClaimTemplates names) must be unique",
        ),
        r(
            "",
            "!has(self.volumeClaimTemplates) || !has(self.template.spec) || !has(self.template.spec.volumes) || self.volumeClaimTemplates.all(t, !has(t.metadata) || !has(t.metadata.name) || !self.template.spec.volumes.exists(v, has(v.name) && v.name == t.metadata.name))",
            "duplicate volume name: volume names (including volumeClaimTemplates names) must be unique",
        )
        .at(".volumeClaimTemplates"),
    ];
    out.extend(container_rules("template.spec.containers[]", false));
    out.extend(container_rules("template.spec.initContainers[]", true));
    out
}

/// Finds a schema node by a `Rule::path`-style path under `node`.
pub fn node_mut<'a>(mut node: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    if path.is_empty() {
        return Some(node);
    }
    for seg in path.split('.') {
        let (name, items) = match seg.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (seg, false),
        };
        node = node.get_mut("properties")?.get_mut(name)?;
        if items {
            node = node.get_mut("items")?;
        }
    }
    Some(node)
}

/// Adds every rule of `version` to its `.spec` schema (as JSON). Panics if a rule names a node the schema lacks
/// (a bug).
pub fn attach_to_spec(spec: &mut Value, version: Version) {
    for rule in rules_for(version) {
        let node = node_mut(spec, &rule.path)
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

/// Adds the rules to every version's `.spec` schema.
pub fn attach(crd: &mut CustomResourceDefinition) {
    let Ok(mut v) = serde_json::to_value(&*crd) else {
        return;
    };
    for version in v["spec"]["versions"].as_array_mut().into_iter().flatten() {
        let which = if version["name"] == "v1beta1" {
            Version::V1beta1
        } else {
            Version::V1alpha1
        };
        if let Some(spec) = version.pointer_mut("/schema/openAPIV3Schema/properties/spec") {
            attach_to_spec(spec, which);
        }
    }
    if let Ok(c) = serde_json::from_value(v) {
        *crd = c;
    }
}
