//! Advanced StatefulSet validation: Kruise's webhook rules (`pkg/webhook/statefulset/validating/
//! statefulset_validation.go`, `validateStatefulSet`, `ValidateStatefulSetUpdate`) as pure functions on the
//! v1beta1 object after the defaults (`super::defaults`), as Kruise's webhooks see it.
//!
//! Messages and field paths are Kruise's. The CRD carries the same rules as CEL where CEL can say them
//! (`super::cel`). Not checked here: the `StatefulSetAutoResizePVCGate` storage-class look-ups (the gate is off
//! by default) and the deletion protection label (`policy.kruise.io/delete-protection`), which needs a look-up
//! of the set's pods.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::v1beta1::{StatefulSet, StatefulSetSpec};
use crate::validation::{
    ErrorKind, FieldError, Messages, forbidden, format, invalid, json, msg, normalized, quote, required,
    template_spec_ops,
};

/// Kruise's messages for Advanced StatefulSets (shared with the CEL rules).
pub mod smsg {
    pub const EMPTY_SELECTOR: &str = "empty selector is invalid for statefulset";
    pub const ACTIVE_DEADLINE: &str = "activeDeadlineSeconds in StatefulSet is not Supported";
    pub const BAD_POD_MANAGEMENT: &str = "must be 'OrderedReady' or 'Parallel'";
    pub const BAD_TYPE: &str = "must be 'RollingUpdate' or 'OnDelete'";
    pub const ROLLING_ONLY: &str = "only allowed for updateStrategy 'RollingUpdate'";
    pub const MIN_READY_MAX: &str = "must be no more than 300 seconds";
    /// Kruise's wording, quotes as they are.
    pub const BAD_POD_UPDATE_POLICY: &str = "must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'";
    pub const PARALLEL_ONLY: &str = "can only work with Parallel PodManagementPolicyType";
    pub const UNORDERED_PARALLEL_ONLY: &str =
        "unorderedUpdate can only work with Parallel PodManagementPolicyType";
    pub const LESS_THAN_ONE: &str = "should not be less than 1";
    pub const IMMUTABLE: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'reserveOrdinals', 'lifecycle', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy', `volumeClaimTemplates`, `VolumeClaimUpdateStrategy` and 'updateStrategy' are forbidden";
    /// apimachinery `IsValidPercent`.
    pub const PERCENT: &str = "a valid percent string must be a numeric string followed by an ending '%'";

    /// `must contains InPlaceUpdateReady when podUpdatePolicy is <policy>`.
    pub fn readiness_gate(policy: &str) -> String {
        format!("must contains InPlaceUpdateReady when podUpdatePolicy is {policy}")
    }
}

/// The readiness gate Kruise requires on in-place templates (`appspub.InPlaceUpdateReady`).
pub const IN_PLACE_UPDATE_READY: &str = "InPlaceUpdateReady";

const RU: &str = "spec.updateStrategy.rollingUpdate";

/// `validateStatefulSet`: the rules for every CREATE and UPDATE.
pub fn validate_create(sts: &StatefulSet) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(name) = sts.metadata.name.as_deref().filter(|n| !n.is_empty()) {
        for m in format::dns1123_subdomain(name) {
            errs.push(invalid("metadata.name", quote(name), m));
        }
    }
    errs.extend(validate_spec(&sts.spec));
    errs
}

/// `ValidateStatefulSetUpdate` and the InPlaceOnly template guard, then the create rules on the new object.
pub fn validate_update(new: &StatefulSet, old: &StatefulSet) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // Kruise resets every field an update may change to its old value and compares the rest.
    let fixed = |s: &StatefulSetSpec| {
        (
            s.selector.clone(),
            s.service_name.clone().unwrap_or_default(),
            s.pod_management_policy.clone().unwrap_or_default(),
        )
    };
    if fixed(&new.spec) != fixed(&old.spec) {
        errs.push(forbidden("spec", smsg::IMMUTABLE));
    }
    let in_place_only = new
        .spec
        .update_strategy
        .as_ref()
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.pod_update_policy.as_deref())
        == Some("InPlaceOnly");
    if in_place_only {
        let ops = template_spec_ops(
            &normalized(&old.spec.template.spec),
            &normalized(&new.spec.template.spec),
        );
        if let Some((op, path)) = ops
            .into_iter()
            .find(|(op, path)| !(op == "replace" && crate::validation::is_container_image_path(path)))
        {
            errs.push(forbidden(
                "spec.template",
                format!(
                    "invalid template modified with InPlaceOnly strategy: {op} {path}, currently only image update is allowed for InPlaceOnly"
                ),
            ));
        }
    }
    errs.extend(validate_create(new));
    errs
}

fn validate_spec(spec: &StatefulSetSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
    match spec.pod_management_policy.as_deref().unwrap_or_default() {
        "" => errs.push(required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(invalid(
            "spec.podManagementPolicy",
            quote(other),
            smsg::BAD_POD_MANAGEMENT,
        )),
    }
    reserve_ordinals(spec, &mut errs);
    if let Some(mu) = spec
        .scale_strategy
        .as_ref()
        .and_then(|s| s.max_unavailable.as_ref())
    {
        max_unavailable(mu, parallel, "spec.scaleStrategy.maxUnavailable", &mut errs);
    }
    update_strategy(spec, parallel, &mut errs);
    if let Some(p) = &spec.persistent_volume_claim_retention_policy {
        for (name, v) in [("whenDeleted", &p.when_deleted), ("whenScaled", &p.when_scaled)] {
            let v = v.as_deref().unwrap_or_default();
            if v != "Retain" && v != "Delete" {
                errs.push(FieldError {
                    field: format!("spec.persistentVolumeClaimRetentionPolicy.{name}"),
                    kind: ErrorKind::NotSupported(vec!["Retain".into(), "Delete".into()]),
                    detail: quote(v),
                });
            }
        }
    }
    let replicas = spec.replicas.unwrap_or(1);
    if replicas < 0 {
        errs.push(invalid("spec.replicas", replicas, msg::NONNEGATIVE));
    }
    selector_and_template(spec, &mut errs);
    errs
}

/// `validateSpecSelector` (with `ValidatePodTemplateSpecForStatefulSet`), the restart policy and
/// `activeDeadlineSeconds`.
fn selector_and_template(spec: &StatefulSetSpec, errs: &mut Vec<FieldError>) {
    crate::validation::selector_and_template(
        &spec.selector,
        &spec.template,
        &spec.volume_claim_templates,
        &Messages {
            empty_selector: smsg::EMPTY_SELECTOR,
            unparsable_selector: "",
            active_deadline: smsg::ACTIVE_DEADLINE,
        },
        errs,
    );
}

/// `validateReserveOrdinals`: integers not negative, strings `A-B` ranges with `A <= B`.
fn reserve_ordinals(spec: &StatefulSetSpec, errs: &mut Vec<FieldError>) {
    let shown = || json(&spec.reserve_ordinals);
    for (i, elem) in spec.reserve_ordinals.iter().enumerate() {
        match elem {
            IntOrString::String(s) => {
                let parts: Vec<&str> = s.split('-').collect();
                let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
                let well_formed = parts.len() == 2 && parts.iter().all(|p| digits(p));
                if !well_formed {
                    errs.push(invalid(
                        "spec",
                        shown(),
                        format!("{i} th reserve ordinal is not a valid range: {s}"),
                    ));
                }
                if let Err(e) = parse_range(s) {
                    errs.push(invalid(
                        "spec",
                        shown(),
                        format!("{i} th reserve ordinal is invalid: {s}, err = {e}"),
                    ));
                }
            }
            IntOrString::Int(n) if *n < 0 => errs.push(invalid(
                "spec",
                shown(),
                format!("{i} th reserve ordinal is negative: {n}"),
            )),
            IntOrString::Int(_) => {}
        }
    }
}

/// Kruise `apiutil.ParseRange`: `start-end` with integers, `start <= end`.
pub fn parse_range(s: &str) -> Result<(i64, i64), String> {
    let parts: Vec<&str> = s.split('-').collect();
    let [a, b] = parts.as_slice() else {
        return Err(format!("invalid range {s}"));
    };
    let num = |p: &str| {
        p.parse::<i64>()
            .map_err(|_| format!("strconv.Atoi: parsing {}: invalid syntax", quote(p)))
    };
    let (start, end) = (num(a)?, num(b)?);
    if start > end {
        return Err(format!("invalid range {s}"));
    }
    Ok((start, end))
}

/// `validateUpdateStrategyType` and what it calls.
fn update_strategy(spec: &StatefulSetSpec, parallel: bool, errs: &mut Vec<FieldError>) {
    let us = spec.update_strategy.clone().unwrap_or_default();
    match us.type_.as_deref().unwrap_or_default() {
        "" => errs.push(required("spec.updateStrategy", "")),
        "OnDelete" => {
            if let Some(ru) = &us.rolling_update {
                errs.push(invalid(RU, json(ru), smsg::ROLLING_ONLY));
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = &us.rolling_update {
                rolling_update(spec, ru, parallel, errs);
            }
        }
        _ => errs.push(invalid("spec.updateStrategy", json(&us), smsg::BAD_TYPE)),
    }
}

fn rolling_update(
    spec: &StatefulSetSpec,
    ru: &super::v1beta1::RollingUpdateStatefulSetStrategy,
    parallel: bool,
    errs: &mut Vec<FieldError>,
) {
    let partition = ru.partition.unwrap_or(0);
    if partition < 0 {
        errs.push(invalid(&format!("{RU}.partition"), partition, msg::NONNEGATIVE));
    }
    let min_ready = ru.min_ready_seconds.unwrap_or(0);
    if min_ready < 0 {
        errs.push(invalid(
            &format!("{RU}.minReadySeconds"),
            min_ready,
            msg::NONNEGATIVE,
        ));
    }
    if min_ready > 300 {
        errs.push(invalid(
            &format!("{RU}.minReadySeconds"),
            min_ready,
            smsg::MIN_READY_MAX,
        ));
    }
    match &ru.max_unavailable {
        None => errs.push(required(&format!("{RU}.maxUnavailable"), "")),
        Some(mu) => max_unavailable(mu, parallel, &format!("{RU}.maxUnavailable"), errs),
    }
    match ru.pod_update_policy.as_deref().unwrap_or_default() {
        "" => errs.push(required(&format!("{RU}.podUpdatePolicy"), "")),
        "ReCreate" => {}
        policy @ ("InPlaceIfPossible" | "InPlaceOnly") => {
            let gates = spec
                .template
                .spec
                .as_ref()
                .and_then(|p| p.readiness_gates.clone())
                .unwrap_or_default();
            if !gates.iter().any(|g| g.condition_type == IN_PLACE_UPDATE_READY) {
                let shown = if gates.is_empty() {
                    "null".into()
                } else {
                    json(&gates)
                };
                errs.push(invalid(
                    "spec.template.spec.readinessGates",
                    shown,
                    smsg::readiness_gate(policy),
                ));
            }
        }
        other => errs.push(invalid(
            &format!("{RU}.podUpdatePolicy"),
            quote(other),
            smsg::BAD_POD_UPDATE_POLICY,
        )),
    }
    if let Some(uu) = &ru.unordered_update {
        if !parallel {
            errs.push(required(
                &format!("{RU}.unorderedUpdate"),
                smsg::UNORDERED_PARALLEL_ONLY,
            ));
        }
        if let Some(e) = uu
            .priority_strategy
            .as_ref()
            .and_then(crate::validation::priority_error)
        {
            errs.push(required(&format!("{RU}.unorderedUpdate.priorityStrategy"), e));
        }
    }
}

/// `validateMaxUnavailableField`: a non-negative integer or a percentage, at least 1 of 1 pod (rounded up),
/// and exactly `1` unless the pods are managed in `Parallel`.
fn max_unavailable(mu: &IntOrString, parallel: bool, field: &str, errs: &mut Vec<FieldError>) {
    let shown = match mu {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s.clone(),
    };
    let scaled = match mu {
        IntOrString::Int(i) => {
            if *i < 0 {
                errs.push(invalid(field, i, msg::NONNEGATIVE));
            }
            Ok(i64::from(*i))
        }
        IntOrString::String(s) => {
            let pct = s.strip_suffix('%');
            let valid = pct.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            if !valid {
                errs.push(invalid(
                    field,
                    &shown,
                    format::regex_error(smsg::PERCENT, "[0-9]+%", &["1%", "93%"]),
                ));
            }
            match pct.map(str::parse::<i64>) {
                // GetValueFromIntOrPercent(v, 1, roundUp): ceil(p * 1 / 100).
                Some(Ok(p)) => Ok((p + 99).div_euclid(100)),
                Some(Err(_)) => Err(format!(
                    "invalid value {}: strconv.Atoi: parsing {}: invalid syntax",
                    quote(s),
                    quote(pct.unwrap_or_default())
                )),
                None => Err("invalid type: string is not a percentage".to_string()),
            }
        }
    };
    match scaled {
        Err(e) => errs.push(invalid(
            field,
            &shown,
            format!("getValueFromIntOrPercent error: invalid value for IntOrString: {e}"),
        )),
        Ok(n) if n < 1 => errs.push(invalid(field, n, smsg::LESS_THAN_ONE)),
        Ok(_) => {}
    }
    if !parallel && *mu != IntOrString::Int(1) {
        errs.push(invalid(field, &shown, smsg::PARALLEL_ONLY));
    }
}
