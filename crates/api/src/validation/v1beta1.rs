//! v1beta1 CloneSet validation: Kruise's `ValidateCloneSetV1beta1` / `ValidateCloneSetUpdateV1beta1`.
//!
//! The rules are v1alpha1's re-pathed under `spec.updateStrategy.rollingUpdate`, so they run on the object
//! converted to v1alpha1 (`crate::conversion`) and the field paths are mapped back; on top come v1beta1's own:
//! `type` is `RollingUpdate`, `OnDelete` or empty, `podUpdatePolicy` one of the three pod policies, and the
//! pre-download fields non-negative integers. As in Kruise, an update is not run through the v1alpha1
//! "InPlaceOnly changes only images" guard (`ValidateCloneSetUpdateV1beta1` skips the core control).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{FieldError, forbidden, invalid, msg, quote, validate_create as validate_alpha};
use crate::v1beta1::{CloneSet, CloneSetSpec};

const US: &str = "spec.updateStrategy";
const RU: &str = "spec.updateStrategy.rollingUpdate";

/// Create rules (and the rules every update also meets).
pub fn validate_create(cs: &CloneSet) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let strategy = cs.spec.update_strategy.clone().unwrap_or_default();
    if strategy.strategy_type().is_none() {
        errs.push(invalid(
            &format!("{US}.type"),
            quote(strategy.type_.as_deref().unwrap_or_default()),
            msg::BAD_TYPE_V1BETA1,
        ));
    }
    if let Some(ru) = &strategy.rolling_update {
        let policy = ru.pod_update_policy.as_deref().unwrap_or_default();
        if !matches!(policy, "" | "ReCreate" | "InPlaceIfPossible" | "InPlaceOnly") {
            errs.push(invalid(
                &format!("{RU}.podUpdatePolicy"),
                quote(policy),
                msg::BAD_POD_UPDATE_POLICY,
            ));
        }
        if let Some(ips) = &ru.in_place_update_strategy {
            pre_download_errors(ips, &mut errs);
        }
    }
    match crate::conversion::cloneset_to_v1alpha1(cs) {
        Ok(alpha) => errs.extend(validate_alpha(&alpha).into_iter().filter_map(repath)),
        Err(e) => errs.push(invalid(
            "spec",
            quote(&e),
            "the object does not decode as a CloneSet",
        )),
    }
    errs
}

/// Update rules: the selector is immutable (every other spec field may change), then the create rules.
pub fn validate_update(new: &CloneSet, old: &CloneSet) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if immutable_part(&new.spec) != immutable_part(&old.spec) {
        errs.push(forbidden("spec", msg::IMMUTABLE));
    }
    errs.extend(validate_create(new));
    errs
}

fn immutable_part(spec: &CloneSetSpec) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
    &spec.selector
}

/// A v1alpha1 error as v1beta1 reports it: rolling fields under `rollingUpdate`, the type check replaced by
/// v1beta1's own (done above), Kruise's v1beta1 wording for InPlaceOnly + maxSurge.
fn repath(mut e: FieldError) -> Option<FieldError> {
    if e.field == format!("{US}.type") {
        return None;
    }
    if let Some(rest) = e.field.strip_prefix(&format!("{US}.")) {
        e.field = format!("{RU}.{rest}");
    }
    if e.detail == msg::INPLACEONLY_SURGE {
        e.detail = msg::INPLACEONLY_SURGE_V1BETA1.to_string();
    }
    Some(e)
}

fn pre_download_errors(ips: &crate::v1beta1::InPlaceUpdateStrategy, errs: &mut Vec<FieldError>) {
    let base = format!("{RU}.inPlaceUpdateStrategy");
    match &ips.image_pre_download_parallelism {
        Some(IntOrString::String(s)) if s.ends_with('%') => errs.push(invalid(
            &format!("{base}.imagePreDownloadParallelism"),
            quote(s),
            msg::PARALLELISM_PERCENT,
        )),
        Some(IntOrString::String(s)) => match s.parse::<i32>() {
            Err(e) => errs.push(invalid(
                &format!("{base}.imagePreDownloadParallelism"),
                quote(s),
                format!("imagePreDownloadParallelism must be a valid integer: {e}"),
            )),
            Ok(n) if n < 0 => errs.push(invalid(
                &format!("{base}.imagePreDownloadParallelism"),
                quote(s),
                msg::PARALLELISM_NEGATIVE,
            )),
            Ok(_) => {}
        },
        Some(IntOrString::Int(n)) if *n < 0 => errs.push(invalid(
            &format!("{base}.imagePreDownloadParallelism"),
            n,
            msg::PARALLELISM_NEGATIVE,
        )),
        _ => {}
    }
    for (name, v) in [
        (
            "imagePreDownloadTimeoutSeconds",
            ips.image_pre_download_timeout_seconds,
        ),
        (
            "imagePreDownloadMinUpdatedReadyPods",
            ips.image_pre_download_min_updated_ready_pods,
        ),
    ] {
        if let Some(n) = v
            && n < 0
        {
            errs.push(invalid(&format!("{base}.{name}"), n, msg::NONNEGATIVE));
        }
    }
}
