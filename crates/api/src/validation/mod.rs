//! CloneSet validation: Kruise's webhook rules (`pkg/webhook/cloneset/validating`) as a pure function.
//!
//! The same rules, as far as CEL can express them, are attached to the CRD (`cel.rs`) so that a real apiserver
//! enforces them without a webhook; the embedded apiserver and the controller call [`validate_create`] /
//! [`validate_update`]. Messages and field paths are Kruise's
//! (`pkg/webhook/cloneset/validating/validation.go`, `validateCloneSetSpec`, `ValidateCloneSetV1beta1`),
//! rendered like apimachinery's `field.Error`; where Kruise's message is a bare `Required value` / `Not found`,
//! a short fix hint follows.
//!
//! insitu additions on top of Kruise (rejected values are nonsense Kruise happens to let through):
//! `revisionHistoryLimit`, `minReadySeconds`, `maxUnavailable` and `maxSurge` must not be negative, and a
//! percentage must be a plain non-negative decimal (`"20%"`, `"12.5%"`), not anything Go's `ParseFloat` eats.
//!
//! Not checked here (no API access in a pure function): Kruise's look-up of newly added `podsToDelete` names
//! (pod missing / terminating / owned by another CloneSet). The controller drops names of pods it does not own.

pub mod cel;
pub mod format;
pub mod intstr;
mod selector;
pub mod template;
pub mod v1beta1;

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::{CloneSet, CloneSetSpec, CloneSetUpdateStrategy, CloneSetUpdateStrategyType};

pub(crate) use selector::validate_labels;
pub use selector::{format_selector, selector_matches};
pub(crate) use selector::{selector_is_empty, selector_parse_error, validate_label_selector};

/// Kind of a field error, as apimachinery's `field.ErrorType`. The `String` payloads are the rendered bad value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Invalid(String),
    Required,
    Forbidden,
    /// Supported values; the bad value is in `detail`.
    NotSupported(Vec<String>),
    Duplicate(String),
    NotFound(String),
}

/// One field error: which field, what kind, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub kind: ErrorKind,
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ty, value) = match &self.kind {
            ErrorKind::Invalid(v) => ("Invalid value", Some(v)),
            ErrorKind::Required => ("Required value", None),
            ErrorKind::Forbidden => ("Forbidden", None),
            ErrorKind::Duplicate(v) => ("Duplicate value", Some(v)),
            ErrorKind::NotFound(v) => ("Not found", Some(v)),
            ErrorKind::NotSupported(vals) => {
                let quoted: Vec<String> = vals.iter().map(|v| quote(v)).collect();
                return write!(
                    f,
                    "{}: Unsupported value: {}: supported values: {}",
                    self.field,
                    self.detail,
                    quoted.join(", ")
                );
            }
        };
        write!(f, "{}: {ty}", self.field)?;
        if let Some(v) = value {
            write!(f, ": {v}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// A Go `%q`-style quoted string (what apimachinery prints for a bad string value).
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// A JSON-rendered value (what apimachinery prints for a bad map/struct/list value).
pub(crate) fn json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

pub(crate) fn invalid(field: &str, value: impl fmt::Display, detail: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        kind: ErrorKind::Invalid(value.to_string()),
        detail: detail.into(),
    }
}

pub(crate) fn required(field: &str, detail: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        kind: ErrorKind::Required,
        detail: detail.into(),
    }
}

pub(crate) fn forbidden(field: &str, detail: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        kind: ErrorKind::Forbidden,
        detail: detail.into(),
    }
}

/// Joins errors the way the apiserver reports an aggregate (`field.ErrorList.ToAggregate`): `[e1, e2]` or just
/// `e1`, identical messages once.
pub fn aggregate(errs: &[FieldError]) -> String {
    let mut seen = BTreeSet::new();
    let msgs: Vec<String> = errs
        .iter()
        .map(ToString::to_string)
        .filter(|m| seen.insert(m.clone()))
        .collect();
    match msgs.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Messages shared by the Rust rules and the CEL rules.
pub mod msg {
    pub const NONNEGATIVE: &str = "must be greater than or equal to 0";
    pub const EMPTY_SELECTOR: &str = "empty selector is invalid for cloneset";
    pub const SELECTOR_MISMATCH: &str = "`selector` does not match template `labels`";
    pub const ACTIVE_DEADLINE: &str = "activeDeadlineSeconds in cloneset is not Supported";
    pub const BAD_TYPE: &str = "must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'";
    pub const INPLACEONLY_SURGE: &str = "can not use maxSurge with strategy type InPlaceOnly";
    pub const BAD_TYPE_V1BETA1: &str = "must be 'RollingUpdate' or 'OnDelete'";
    pub const BAD_POD_UPDATE_POLICY: &str = "must be 'ReCreate', 'InPlaceIfPossible' or 'InPlaceOnly'";
    pub const INPLACEONLY_SURGE_V1BETA1: &str = "can not use maxSurge with podUpdatePolicy InPlaceOnly";
    pub const PARALLELISM_PERCENT: &str = "imagePreDownloadParallelism does not support percentage value";
    pub const PARALLELISM_NEGATIVE: &str = "imagePreDownloadParallelism must be non-negative";
    pub const MU_MS_LT1: &str = "maxUnavailable and maxSurge should not both be less than 1";
    pub const PDS_MIN_READY: &str = "must be greater than minReadySeconds";
    pub const ONLY_ONE_PRIORITY: &str = "only one of weightPriority and orderPriority can be used";
    pub const WEIGHT_RANGE: &str = "weight must be valid number in the range 1-100";
    pub const SELECTOR_CAN_NOT_BE_EMPTY: &str = "selector can not be empty";
    pub const ORDER_KEY_EMPTY: &str = "order key can not be empty";
    pub const SCATTER_KEY_EMPTY: &str = "key should not be empty";
    pub const IMMUTABLE: &str = "updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden";

    /// `"5"`-style strings: Kruise v1.9+ rejects them (they used to mean 5%).
    pub fn not_percent(field: &str) -> String {
        format!("failed GetScaledValueFromIntOrPercent for {field}: invalid type: string is not a percentage")
    }

    /// A `%` string whose number is not a plain non-negative decimal.
    pub fn bad_percent(field: &str) -> String {
        format!(
            "failed GetScaledValueFromIntOrPercent for {field}: invalid percentage: use a non-negative number followed by '%', e.g. \"20%\" or \"12.5%\""
        )
    }
}

/// Rules that hold for every CloneSet (create and update). Kruise: `validateCloneSet` → `validateCloneSetSpec`.
pub fn validate_create(cs: &CloneSet) -> Vec<FieldError> {
    let mut errs = validate_meta(cs);
    errs.extend(validate_spec(&cs.spec));
    errs
}

/// The rules the controller checks on the CloneSet it reconciles (v1alpha1, the form either served version is
/// read in): the create rules, except that `type: OnDelete` (a v1beta1 CloneSet read as v1alpha1) is allowed.
pub fn validate_reconciled(cs: &CloneSet) -> Vec<FieldError> {
    let on_delete = cs.spec.update_strategy.as_ref().and_then(|u| u.strategy_type())
        == Some(CloneSetUpdateStrategyType::OnDelete);
    validate_create(cs)
        .into_iter()
        .filter(|e| !(on_delete && e.field == "spec.updateStrategy.type"))
        .collect()
}

/// Update-only rules, then the create rules on the new object. Kruise: `validateCloneSetUpdate`.
pub fn validate_update(new: &CloneSet, old: &CloneSet) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // Kruise resets every mutable field to the old value and compares the rest: in v1alpha1 only the selector.
    if new.spec.selector != old.spec.selector {
        errs.push(forbidden("spec", msg::IMMUTABLE));
    }
    let strategy = new.spec.update_strategy();
    if strategy.strategy_type() == Some(CloneSetUpdateStrategyType::InPlaceOnly) {
        // Kruise: core/cloneset_core.go ValidateCloneSetUpdate — only image replaces in template.spec.
        let old_spec = normalized(&old.spec.template.spec);
        let new_spec = normalized(&new.spec.template.spec);
        if let Some((op, path)) = template_spec_ops(&old_spec, &new_spec)
            .into_iter()
            .find(|(op, path)| !(op == "replace" && is_container_image_path(path)))
        {
            errs.push(forbidden(
                "spec",
                format!("only allowed to update images in spec for InPlaceOnly, but found {op} {path}"),
            ));
        }
    }
    errs.extend(validate_create(new));
    errs
}

/// The template spec as Go's `json.Marshal` would see it: nulls and empty lists dropped (all `omitempty`).
pub(crate) fn normalized<T: serde::Serialize>(v: &T) -> serde_json::Value {
    fn prune(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.retain(|_, x| !(x.is_null() || x.as_array().is_some_and(Vec::is_empty)));
                m.values_mut().for_each(prune);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(prune),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(v).unwrap_or_default();
    prune(&mut v);
    v
}

pub(crate) fn is_container_image_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/containers/") else {
        return false;
    };
    let Some((idx, tail)) = rest.split_once('/') else {
        return false;
    };
    !idx.is_empty() && idx.bytes().all(|b| b.is_ascii_digit()) && tail == "image"
}

/// A minimal RFC 6902 diff listing (op, path) like Kruise's jsonpatch: objects are compared key by key,
/// arrays element by element (extra/missing elements are add/remove), other values are replaced.
pub fn template_spec_ops(old: &serde_json::Value, new: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(old: &serde_json::Value, new: &serde_json::Value, path: String, out: &mut Vec<(String, String)>) {
        use serde_json::Value::*;
        match (old, new) {
            (Object(a), Object(b)) => {
                for (k, va) in a {
                    let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                    match b.get(k) {
                        Some(vb) => walk(va, vb, p, out),
                        None => out.push(("remove".into(), p)),
                    }
                }
                for k in b.keys().filter(|k| !a.contains_key(*k)) {
                    out.push((
                        "add".into(),
                        format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")),
                    ));
                }
            }
            (Array(a), Array(b)) => {
                for i in 0..a.len().max(b.len()) {
                    let p = format!("{path}/{i}");
                    match (a.get(i), b.get(i)) {
                        (Some(x), Some(y)) => walk(x, y, p, out),
                        (Some(_), None) => out.push(("remove".into(), p)),
                        (None, Some(_)) => out.push(("add".into(), p)),
                        (None, None) => {}
                    }
                }
            }
            (a, b) if a == b => {}
            _ => out.push(("replace".into(), path)),
        }
    }
    let mut out = Vec::new();
    walk(old, new, String::new(), &mut out);
    out
}

/// Kruise's `ValidateObjectMeta(..., NameIsDNSSubdomain, ...)`: the name part that matters here.
fn validate_meta(cs: &CloneSet) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(name) = cs.metadata.name.as_deref().filter(|n| !n.is_empty()) {
        for m in format::dns1123_subdomain(name) {
            errs.push(invalid("metadata.name", quote(name), m));
        }
    }
    errs
}

fn validate_spec(spec: &CloneSetSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let replicas = spec.replicas();
    if replicas < 0 {
        errs.push(invalid("spec.replicas", replicas, msg::NONNEGATIVE));
    }

    selector_and_template(
        &spec.selector,
        &spec.template,
        &spec.volume_claim_templates,
        &Messages {
            empty_selector: msg::EMPTY_SELECTOR,
            unparsable_selector: "the selector cannot be parsed: fix the errors reported for spec.selector.*",
            active_deadline: msg::ACTIVE_DEADLINE,
        },
        &mut errs,
    );

    if let Some(scale) = &spec.scale_strategy {
        let mut seen = BTreeSet::new();
        let dups: Vec<&str> = scale
            .pods_to_delete
            .iter()
            .filter(|n| !seen.insert(n.as_str()))
            .map(String::as_str)
            .collect();
        if !dups.is_empty() {
            errs.push(invalid(
                "spec.scaleStrategy.podsToDelete",
                json(&scale.pods_to_delete),
                format!("duplicated items [{}]", dups.join(" ")),
            ));
        }
    }

    validate_update_strategy(&spec.update_strategy(), replicas, &mut errs);

    if let Some(pds) = spec.progress_deadline_seconds {
        if pds < 0 {
            errs.push(invalid("spec.progressDeadlineSeconds", pds, msg::NONNEGATIVE));
        }
        if pds != i32::MAX && pds <= spec.min_ready_seconds() {
            errs.push(invalid("spec.progressDeadlineSeconds", pds, msg::PDS_MIN_READY));
        }
    }
    // insitu additions (Kruise does not check these).
    if let Some(v) = spec.revision_history_limit.filter(|v| *v < 0) {
        errs.push(invalid("spec.revisionHistoryLimit", v, msg::NONNEGATIVE));
    }
    if let Some(v) = spec.min_ready_seconds.filter(|v| *v < 0) {
        errs.push(invalid("spec.minReadySeconds", v, msg::NONNEGATIVE));
    }
    errs
}

/// The messages that differ between the workloads in [`selector_and_template`].
pub(crate) struct Messages {
    pub empty_selector: &'static str,
    pub unparsable_selector: &'static str,
    pub active_deadline: &'static str,
}

/// The selector (well-formed, non-empty, matching the template's labels), then the template itself, its
/// restart policy and `activeDeadlineSeconds`: the checks CloneSet's and Advanced StatefulSet's webhooks share
/// (Kruise's `validateSpecSelector` / `validateStatefulSetSpec` with the workload's template validation).
pub(crate) fn selector_and_template(
    selector: &LabelSelector,
    template: &PodTemplateSpec,
    volume_claim_templates: &[k8s_openapi::api::core::v1::PersistentVolumeClaim],
    messages: &Messages,
    errs: &mut Vec<FieldError>,
) {
    errs.extend(validate_label_selector(selector, "spec.selector"));
    let empty = selector_is_empty(selector);
    if empty {
        errs.push(invalid("spec.selector", json(selector), messages.empty_selector));
    }
    if selector_parse_error(selector).is_some() {
        // Kruise skips the template checks when the selector does not parse.
        errs.push(invalid(
            "spec.selector",
            json(selector),
            messages.unparsable_selector,
        ));
    } else {
        let labels = template::template_labels(template);
        if !empty && !selector_matches(selector, &labels) {
            let shown = match template.metadata.as_ref().and_then(|m| m.labels.as_ref()) {
                Some(l) => json(l),
                None => "null".into(),
            };
            errs.push(invalid(
                "spec.template.metadata.labels",
                shown,
                msg::SELECTOR_MISMATCH,
            ));
        }
        let vcts = template::vct_names(volume_claim_templates);
        errs.extend(template::validate_template(template, &vcts, "spec.template"));
    }
    let pod = template.spec.as_ref();
    if let Some(rp) = pod.and_then(|p| p.restart_policy.as_deref())
        && !rp.is_empty()
        && rp != "Always"
    {
        errs.push(FieldError {
            field: "spec.template.spec.restartPolicy".into(),
            kind: ErrorKind::NotSupported(vec!["Always".into()]),
            detail: quote(rp),
        });
    }
    if pod.and_then(|p| p.active_deadline_seconds).is_some() {
        errs.push(forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            messages.active_deadline,
        ));
    }
}

/// Whether `s` is a plain non-negative decimal percentage: `^[0-9]+(\.[0-9]+)?%$`.
pub(crate) fn is_plain_percent(s: &str) -> bool {
    let Some(num) = s.strip_suffix('%') else {
        return false;
    };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (num, None),
    };
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
    digits(int) && frac.is_none_or(digits)
}

/// Scales an int-or-percent field as Kruise's webhook does, reporting format errors; a bad value counts as 0.
fn scaled(name: &str, v: &IntOrString, replicas: i32, nonnegative: bool, errs: &mut Vec<FieldError>) -> i32 {
    let field = format!("spec.updateStrategy.{name}");
    match v {
        IntOrString::Int(i) => {
            if nonnegative && *i < 0 {
                errs.push(invalid(&field, i, msg::NONNEGATIVE));
            }
            *i
        }
        IntOrString::String(s) if !s.ends_with('%') => {
            errs.push(invalid(&field, quote(s), msg::not_percent(name)));
            0
        }
        IntOrString::String(s) if !is_plain_percent(s) => {
            errs.push(invalid(&field, quote(s), msg::bad_percent(name)));
            0
        }
        IntOrString::String(_) => intstr::scaled_value(v, replicas, true).unwrap_or(0),
    }
}

fn validate_update_strategy(strategy: &CloneSetUpdateStrategy, replicas: i32, errs: &mut Vec<FieldError>) {
    let ty = strategy.strategy_type();
    // OnDelete is v1beta1's (Kruise's v1alpha1 webhook rejects it); see `validate_reconciled`.
    if ty.is_none() || ty == Some(CloneSetUpdateStrategyType::OnDelete) {
        errs.push(invalid(
            "spec.updateStrategy.type",
            quote(strategy.type_.as_deref().unwrap_or_default()),
            msg::BAD_TYPE,
        ));
    }

    // Partition: Kruise checks the scaled value (so an int), after the format.
    if let Some(p) = &strategy.partition {
        let partition = scaled("partition", p, replicas, false, errs);
        if partition < 0 {
            errs.push(invalid(
                "spec.updateStrategy.partition",
                partition,
                msg::NONNEGATIVE,
            ));
        }
    }

    if let Some(p) = &strategy.priority_strategy
        && let Some(e) = priority_error(p)
    {
        errs.push(required("spec.updateStrategy.priorityStrategy", e));
    }
    if let Some(e) = scatter_error(&strategy.scatter_strategy) {
        errs.push(required("spec.updateStrategy.scatterStrategy", e));
    }

    let max_unavailable = match &strategy.max_unavailable {
        // Kruise's mutating webhook defaults it to 20% before validation.
        None => intstr::scaled_value(&intstr::percent("20%"), replicas, true).unwrap_or(1),
        Some(mu) => scaled("maxUnavailable", mu, replicas, true, errs),
    };
    let mut max_surge = 0;
    if let Some(ms) = &strategy.max_surge {
        max_surge = scaled("maxSurge", ms, replicas, true, errs);
        if ty == Some(CloneSetUpdateStrategyType::InPlaceOnly) && max_surge > 0 {
            let shown = match ms {
                IntOrString::Int(i) => i.to_string(),
                IntOrString::String(s) => s.clone(),
            };
            errs.push(invalid(
                "spec.updateStrategy.maxSurge",
                quote(&shown),
                msg::INPLACEONLY_SURGE,
            ));
        }
    }
    if replicas > 0 && max_unavailable < 1 && max_surge < 1 {
        let shown = strategy
            .max_unavailable
            .as_ref()
            .map_or_else(|| "null".to_string(), json);
        errs.push(invalid(
            "spec.updateStrategy.maxUnavailable",
            shown,
            msg::MU_MS_LT1,
        ));
    }
}

/// `UpdatePriorityStrategy.FieldsValidation`: the first problem.
pub(crate) fn priority_error(p: &crate::UpdatePriorityStrategy) -> Option<String> {
    if !p.weight_priority.is_empty() && !p.order_priority.is_empty() {
        return Some(msg::ONLY_ONE_PRIORITY.into());
    }
    for w in &p.weight_priority {
        if w.weight < 0 || w.weight > 100 {
            return Some(msg::WEIGHT_RANGE.into());
        }
        if selector_is_empty(&w.match_selector) {
            return Some(msg::SELECTOR_CAN_NOT_BE_EMPTY.into());
        }
        if let Some(e) = selector_parse_error(&w.match_selector) {
            return Some(format!("invalid selector {e}"));
        }
    }
    if p.order_priority.iter().any(|o| o.ordered_key.is_empty()) {
        return Some(msg::ORDER_KEY_EMPTY.into());
    }
    None
}

/// `UpdateScatterStrategy.FieldsValidation`: the first problem.
fn scatter_error(terms: &[crate::UpdateScatterTerm]) -> Option<String> {
    let mut seen = BTreeSet::new();
    for t in terms {
        if t.key.is_empty() {
            return Some(msg::SCATTER_KEY_EMPTY.into());
        }
        if !seen.insert((t.key.as_str(), t.value.as_str())) {
            return Some(format!("duplicated key={} value={}", t.key, t.value));
        }
    }
    None
}
