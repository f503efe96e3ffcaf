//! CloneSet validation: Kruise's webhook rules (`pkg/webhook/cloneset/validating`) as a pure function.

pub mod cel;
pub mod intstr;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::{CloneSet, CloneSetSpec, CloneSetUpdateStrategyType};

/// Kind of a field error, as apimachinery's `field.ErrorType`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Invalid(String),
    Required,
    Forbidden,
    NotSupported(Vec<String>),
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
        match &self.kind {
            ErrorKind::Invalid(v) => write!(f, "{}: Invalid value: {}: {}", self.field, v, self.detail),
            ErrorKind::Required => write!(f, "{}: Required value: {}", self.field, self.detail),
            ErrorKind::Forbidden => write!(f, "{}: Forbidden: {}", self.field, self.detail),
            ErrorKind::NotSupported(vals) => {
                let quoted: Vec<String> = vals.iter().map(|v| format!("\"{v}\"")).collect();
                write!(
                    f,
                    "{}: Unsupported value: {}: supported values: {}",
                    self.field,
                    self.detail,
                    quoted.join(", ")
                )
            }
        }
    }
}

fn invalid(field: &str, value: impl fmt::Display, detail: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        kind: ErrorKind::Invalid(value.to_string()),
        detail: detail.into(),
    }
}

/// Joins errors the way the apiserver reports an aggregate: `[e1, e2]` or just `e1`.
pub fn aggregate(errs: &[FieldError]) -> String {
    match errs {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Rules that hold for every CloneSet (create and update). Kruise: `validateCloneSetSpec`.
pub fn validate_create(cs: &CloneSet) -> Vec<FieldError> {
    validate_spec(&cs.spec)
}

/// Create rules plus the update-only ones. Kruise: `validateCloneSetUpdate`.
pub fn validate_update(new: &CloneSet, old: &CloneSet) -> Vec<FieldError> {
    let mut errs = validate_spec(&new.spec);
    if new.spec.selector != old.spec.selector {
        errs.push(FieldError {
            field: "spec".into(),
            kind: ErrorKind::Forbidden,
            detail: "updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden".into(),
        });
    }
    let strategy = new.spec.update_strategy();
    if strategy.strategy_type() == Some(CloneSetUpdateStrategyType::InPlaceOnly) {
        // Kruise: core/cloneset_core.go ValidateCloneSetUpdate — only image replaces in template.spec.
        let old_spec = serde_json::to_value(&old.spec.template.spec).unwrap_or_default();
        let new_spec = serde_json::to_value(&new.spec.template.spec).unwrap_or_default();
        for (op, path) in template_spec_ops(&old_spec, &new_spec) {
            if !(op == "replace" && is_container_image_path(&path)) {
                errs.push(FieldError {
                    field: "spec".into(),
                    kind: ErrorKind::Forbidden,
                    detail: format!(
                        "only allowed to update images in spec for InPlaceOnly, but found {op} {path}"
                    ),
                });
                break;
            }
        }
    }
    errs
}

fn is_container_image_path(path: &str) -> bool {
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

fn selector_is_empty(sel: &LabelSelector) -> bool {
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

fn validate_spec(spec: &CloneSetSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let replicas = spec.replicas();
    if replicas < 0 {
        errs.push(invalid(
            "spec.replicas",
            replicas,
            "must be greater than or equal to 0",
        ));
    }
    if selector_is_empty(&spec.selector) {
        errs.push(invalid(
            "spec.selector",
            "{}",
            "empty selector is invalid for cloneset",
        ));
    } else {
        let labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        if !selector_matches(&spec.selector, &labels) {
            errs.push(invalid(
                "spec.template.metadata.labels",
                format!("{labels:?}"),
                "`selector` does not match template `labels`",
            ));
        }
    }
    match &spec.template.spec {
        None => errs.push(FieldError {
            field: "spec.template.spec".into(),
            kind: ErrorKind::Required,
            detail: "a pod template spec with at least one container is required".into(),
        }),
        Some(pod) => {
            if pod.containers.is_empty() {
                errs.push(FieldError {
                    field: "spec.template.spec.containers".into(),
                    kind: ErrorKind::Required,
                    detail: "at least one container is required".into(),
                });
            }
            let mut names = BTreeSet::new();
            for (i, c) in pod.containers.iter().enumerate() {
                if c.name.is_empty() {
                    errs.push(FieldError {
                        field: format!("spec.template.spec.containers[{i}].name"),
                        kind: ErrorKind::Required,
                        detail: "give every container a name".into(),
                    });
                } else if !names.insert(c.name.clone()) {
                    errs.push(FieldError {
                        field: format!("spec.template.spec.containers[{i}].name"),
                        kind: ErrorKind::Invalid(format!("\"{}\"", c.name)),
                        detail: "Duplicate value".into(),
                    });
                }
                if c.image.as_deref().is_none_or(str::is_empty) {
                    errs.push(FieldError {
                        field: format!("spec.template.spec.containers[{i}].image"),
                        kind: ErrorKind::Required,
                        detail: "set the container image".into(),
                    });
                }
            }
            if let Some(rp) = pod.restart_policy.as_deref()
                && !rp.is_empty()
                && rp != "Always"
            {
                errs.push(FieldError {
                    field: "spec.template.spec.restartPolicy".into(),
                    kind: ErrorKind::NotSupported(vec!["Always".into()]),
                    detail: format!("\"{rp}\""),
                });
            }
            if pod.active_deadline_seconds.is_some() {
                errs.push(FieldError {
                    field: "spec.template.spec.activeDeadlineSeconds".into(),
                    kind: ErrorKind::Forbidden,
                    detail: "activeDeadlineSeconds in cloneset is not Supported".into(),
                });
            }
        }
    }
    if let Some(scale) = &spec.scale_strategy {
        let mut seen = BTreeSet::new();
        let dups: Vec<&String> = scale.pods_to_delete.iter().filter(|n| !seen.insert(*n)).collect();
        if !dups.is_empty() {
            errs.push(invalid(
                "spec.scaleStrategy.podsToDelete",
                format!("{:?}", scale.pods_to_delete),
                format!("duplicated items {dups:?}"),
            ));
        }
    }
    let strategy = spec.update_strategy();
    let ty = strategy.strategy_type();
    if ty.is_none() {
        errs.push(invalid(
            "spec.updateStrategy.type",
            strategy.type_.clone().unwrap_or_default(),
            "must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
        ));
    }
    let scaled = |name: &str,
                  v: &Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
                  errs: &mut Vec<FieldError>|
     -> i32 {
        match v {
            None => 0,
            Some(v) => match intstr::scaled_value(v, replicas, true) {
                Ok(n) => n,
                Err(e) => {
                    errs.push(invalid(
                        &format!("spec.updateStrategy.{name}"),
                        intstr::display(v),
                        format!("failed GetScaledValueFromIntOrPercent for {name}: {e}"),
                    ));
                    0
                }
            },
        }
    };
    let partition = scaled("partition", &strategy.partition, &mut errs);
    if partition < 0 {
        errs.push(invalid(
            "spec.updateStrategy.partition",
            partition,
            "partition cannot be negative",
        ));
    }
    let max_unavailable = match &strategy.max_unavailable {
        None => intstr::scaled_value(&intstr::percent("20%"), replicas, true).unwrap_or(1),
        mu => scaled("maxUnavailable", mu, &mut errs),
    };
    let max_surge = scaled("maxSurge", &strategy.max_surge, &mut errs);
    if ty == Some(CloneSetUpdateStrategyType::InPlaceOnly) && max_surge > 0 {
        errs.push(invalid(
            "spec.updateStrategy.maxSurge",
            max_surge,
            "can not use maxSurge with strategy type InPlaceOnly",
        ));
    }
    if replicas > 0 && max_unavailable < 1 && max_surge < 1 {
        errs.push(invalid(
            "spec.updateStrategy.maxUnavailable",
            max_unavailable,
            "maxUnavailable and maxSurge should not both be less than 1",
        ));
    }
    if let Some(p) = &strategy.priority_strategy {
        let req = |detail: &str| FieldError {
            field: "spec.updateStrategy.priorityStrategy".into(),
            kind: ErrorKind::Required,
            detail: detail.into(),
        };
        if !p.weight_priority.is_empty() && !p.order_priority.is_empty() {
            errs.push(req("only one of weightPriority and orderPriority can be used"));
        }
        for w in &p.weight_priority {
            if w.weight < 0 || w.weight > 100 {
                errs.push(req("weight must be valid number in the range 1-100"));
            }
            if selector_is_empty(&w.match_selector) {
                errs.push(req("selector can not be empty"));
            }
        }
        for o in &p.order_priority {
            if o.ordered_key.is_empty() {
                errs.push(req("order key can not be empty"));
            }
        }
    }
    let mut seen = BTreeSet::new();
    for term in &strategy.scatter_strategy {
        if term.key.is_empty() {
            errs.push(invalid(
                "spec.updateStrategy.scatterStrategy",
                "",
                "key should not be empty",
            ));
        } else if !seen.insert((term.key.clone(), term.value.clone())) {
            errs.push(invalid(
                "spec.updateStrategy.scatterStrategy",
                format!("{}={}", term.key, term.value),
                format!("duplicated key={} value={}", term.key, term.value),
            ));
        }
    }
    if let Some(pds) = spec.progress_deadline_seconds {
        if pds < 0 {
            errs.push(invalid(
                "spec.progressDeadlineSeconds",
                pds,
                "must be greater than or equal to 0",
            ));
        } else if pds != i32::MAX && pds <= spec.min_ready_seconds() {
            errs.push(invalid(
                "spec.progressDeadlineSeconds",
                pds,
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs
}
