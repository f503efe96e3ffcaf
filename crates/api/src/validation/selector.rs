//! Label selectors and labels: matching, printing and Kruise's checks of their syntax (apimachinery's
//! `ValidateLabelSelector` and `ValidateLabels`, with the selector parser's own errors).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{FieldError, forbidden, format, invalid, json, quote, required};

pub(crate) fn selector_is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && sel.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// Whether `labels` satisfy `sel` (matchLabels + set-based expressions).
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    if let Some(ml) = &sel.match_labels
        && ml.iter().any(|(k, v)| labels.get(k) != Some(v))
    {
        return false;
    }
    for e in sel.match_expressions.iter().flatten() {
        let vals: BTreeSet<&str> = e.values.iter().flatten().map(String::as_str).collect();
        let got = labels.get(&e.key).map(String::as_str);
        let ok = match e.operator.as_str() {
            "In" => got.is_some_and(|g| vals.contains(g)),
            "NotIn" => got.is_none_or(|g| !vals.contains(g)),
            "Exists" => got.is_some(),
            "DoesNotExist" => got.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Renders a selector as the string form used by `status.labelSelector` (`metav1.FormatLabelSelector`).
pub fn format_selector(sel: &LabelSelector) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        parts.push(format!("{k}={v}"));
    }
    for e in sel.match_expressions.iter().flatten() {
        let mut vals: Vec<&str> = e.values.iter().flatten().map(String::as_str).collect();
        vals.sort_unstable();
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({})", e.key, vals.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, vals.join(",")),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            op => format!("{} {op} ({})", e.key, vals.join(",")),
        });
    }
    parts.join(",")
}

/// apimachinery `ValidateLabels`: keys are qualified names, values label values (errors on `path`).
pub(crate) fn validate_labels(labels: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in labels {
        for m in format::qualified_name(k) {
            errs.push(invalid(path, quote(k), m));
        }
        for m in format::label_value(v) {
            errs.push(invalid(path, quote(v), m));
        }
    }
    errs
}

/// apimachinery `ValidateLabelSelector` (without `AllowInvalidLabelValueInSelector`, as Kruise calls it).
pub(crate) fn validate_label_selector(sel: &LabelSelector, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(ml) = &sel.match_labels {
        errs.extend(validate_labels(ml, &format!("{path}.matchLabels")));
    }
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let nvals = e.values.as_ref().map_or(0, Vec::len);
        match e.operator.as_str() {
            "In" | "NotIn" if nvals == 0 => errs.push(required(
                &format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if nvals > 0 => errs.push(forbidden(
                &format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => errs.push(invalid(
                &format!("{p}.operator"),
                quote(op),
                "not a valid selector operator (use In, NotIn, Exists or DoesNotExist)",
            )),
        }
        for m in format::qualified_name(&e.key) {
            errs.push(invalid(&format!("{p}.key"), quote(&e.key), m));
        }
        for (j, v) in e.values.iter().flatten().enumerate() {
            for m in format::label_value(v) {
                errs.push(invalid(&format!("{p}.values[{j}]"), quote(v), m));
            }
        }
    }
    errs
}

/// The error `metav1.LabelSelectorAsSelector` would return for `sel`, if any (first failing requirement).
pub(crate) fn selector_parse_error(sel: &LabelSelector) -> Option<String> {
    let requirement = |key: &str, op: &str, vals: &[String]| -> Option<String> {
        let mut errs = Vec::new();
        let key_errs = format::qualified_name(key);
        if !key_errs.is_empty() {
            errs.push(format!(
                "key: Invalid value: {}: {}",
                quote(key),
                key_errs.join("; ")
            ));
        }
        match op {
            "in" | "notin" if vals.is_empty() => errs.push(format!(
                "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
                json(vals)
            )),
            "exists" | "!" if !vals.is_empty() => errs.push(format!(
                "values: Invalid value: {}: values set must be empty for exists and does not exist",
                json(vals)
            )),
            _ => {}
        }
        for (i, v) in vals.iter().enumerate() {
            let ve = format::label_value(v);
            if !ve.is_empty() {
                errs.push(format!(
                    "values[{i}][{key}]: Invalid value: {}: {}",
                    quote(v),
                    ve.join("; ")
                ));
            }
        }
        match errs.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many => Some(format!("[{}]", many.join(", "))),
        }
    };
    for (k, v) in sel.match_labels.iter().flatten() {
        if let Some(e) = requirement(k, "=", std::slice::from_ref(v)) {
            return Some(e);
        }
    }
    for e in sel.match_expressions.iter().flatten() {
        let op = match e.operator.as_str() {
            "In" => "in",
            "NotIn" => "notin",
            "Exists" => "exists",
            "DoesNotExist" => "!",
            other => return Some(format!("{} is not a valid label selector operator", quote(other))),
        };
        if let Some(err) = requirement(&e.key, op, e.values.as_deref().unwrap_or_default()) {
            return Some(err);
        }
    }
    None
}
