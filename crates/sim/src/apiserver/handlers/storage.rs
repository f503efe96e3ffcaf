//! Storage versions: request bodies to stored form, stored objects to the requested version, CloneSet and
//! Advanced StatefulSet admission.

use serde_json::{Value, json};

use crate::apiserver::errors::{ApiError, ApiResult, FieldErr};
use crate::apiserver::metadata_validation;
use crate::apiserver::resources::{self, ResourceType};
use crate::apiserver::{events, secrets, structural};
use crate::store::Object;

pub(super) fn parse_cloneset(rt: &ResourceType, name: &str, v: &Value) -> ApiResult<insitu_api::CloneSet> {
    serde_json::from_value(v.clone()).map_err(|e| ApiError::invalid_msg(rt, name, &format!("body: {e}")))
}

/// The resource whose storage backs `rt` (events.k8s.io Events live in core/v1 form, CloneSets in v1beta1).
pub(super) fn storage_rt(rt: &'static ResourceType) -> &'static ResourceType {
    if rt.is_new_events() {
        return resources::find("", "v1", "events").unwrap_or(rt);
    }
    if rt.is_kruise_workload() || rt.is_image_pull_job() {
        return resources::find(rt.group, CLONESET_STORAGE_VERSION, rt.resource).unwrap_or(rt);
    }
    rt
}

/// An ImagePullJob in another version: its CRD converts with strategy `None`, which only rewrites `apiVersion`.
fn with_api_version(mut v: Value, api_version: &str) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.insert("apiVersion".into(), json!(api_version));
    }
    v
}

/// The CloneSet (and Advanced StatefulSet, ImagePullJob) storage version (Kruise master's).
pub(super) const CLONESET_STORAGE_VERSION: &str = "v1beta1";

/// A CloneSet or Advanced StatefulSet (by its `kind`) converted to `api_version` with
/// `insitu_api::conversion_review::convert_kind` (the function the webhook serves). Conversion only fails on an
/// apiVersion that is not a served version, which the callers have ruled out.
pub(super) fn convert_cloneset(v: Value, api_version: &str) -> Value {
    if v.get("apiVersion").and_then(Value::as_str) == Some(api_version) {
        return v;
    }
    insitu_api::conversion_review::convert_kind(&v, api_version).unwrap_or(v)
}

/// A request body converted to the stored form.
pub(super) fn stored_form(rt: &ResourceType, mut v: Value) -> Value {
    if rt.is_new_events() {
        events::to_core(&v)
    } else if rt.is_kruise_workload() {
        // The body is read in the version it names if that is a served version, else in the URL's.
        let named = v.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        if named != insitu_api::conversion::V1ALPHA1
            && named != insitu_api::conversion::V1BETA1
            && let Some(o) = v.as_object_mut()
        {
            o.insert("apiVersion".into(), json!(rt.api_version()));
        }
        if let Some(o) = v.as_object_mut() {
            // Conversion goes by kind; the URL's kind is the one stored.
            o.insert("kind".into(), json!(rt.kind));
        }
        convert_cloneset(v, &format!("{}/{CLONESET_STORAGE_VERSION}", rt.group))
    } else if rt.is_image_pull_job() {
        with_api_version(v, &format!("{}/{CLONESET_STORAGE_VERSION}", rt.group))
    } else if rt.is_secret() {
        secrets::stored_form(v)
    } else {
        v
    }
}

/// A stored object as `rt`'s clients see it.
pub(in crate::apiserver) fn present_value(rt: &ResourceType, v: Value) -> Value {
    if rt.is_new_events() {
        events::to_new(&v)
    } else if rt.is_kruise_workload() {
        convert_cloneset(v, &rt.api_version())
    } else if rt.is_image_pull_job() {
        with_api_version(v, &rt.api_version())
    } else {
        v
    }
}

/// Stored bytes as `rt`'s clients see them (no copy for the common case).
pub(in crate::apiserver) fn present(rt: &ResourceType, o: &Object) -> bytes::Bytes {
    if rt.is_new_events() {
        bytes::Bytes::from(serde_json::to_vec(&events::to_new(&o.value())).unwrap_or_default())
    } else if (rt.is_kruise_workload() || rt.is_image_pull_job()) && rt.version != CLONESET_STORAGE_VERSION {
        bytes::Bytes::from(serde_json::to_vec(&present_value(rt, o.value())).unwrap_or_default())
    } else {
        o.bytes()
    }
}

/// CloneSet admission in the request's version, as the CRD handler does: the version's structural schema
/// (pruning, defaults), Kruise's defaulting webhook and validation run on the object as the client sent it; the result is stored in v1beta1
/// (with v1beta1's defaults, which a real apiserver applies when it reads the object back).
pub(super) fn admit_cloneset(
    view: &ResourceType,
    name: &str,
    obj: Value,
    old: Option<&Value>,
    warn: impl FnOnce(Vec<String>),
) -> ApiResult<Value> {
    let mut v = present_value(view, obj);
    metadata_validation::cloneset_meta_types(view, &v)?;
    structural::apply(&mut v);
    // Kruise's mutating webhook (mcloneset.kb.io; `insitu run` serves the same function at /mutate-cloneset)
    // runs after the schema defaults and before validation, on the object in the version the client wrote.
    let old_view = old.map(|o| present_value(view, o.clone()));
    let admitted = insitu_api::defaults::admit_request(&v, old_view.as_ref()).map_err(|errs| {
        // As kube-apiserver reports a webhook's denial (`webhookerrors.ToStatusErr`): the webhook's Status, its
        // message prefixed with the webhook's name.
        ApiError::new(
            422,
            "Invalid",
            format!(
                "admission webhook \"{}\" denied the request: {}",
                insitu_api::crd::MUTATING_WEBHOOK_NAME,
                insitu_api::validation::aggregate(&errs)
            ),
        )
    })?;
    v = admitted.object;
    warn(admitted.warnings);
    // The schema's required fields, checked after admission as the CRD handler's validation does.
    let missing: Vec<FieldErr> = structural::missing_required(&v)
        .iter()
        .map(|f| FieldErr::required(f, ""))
        .collect();
    if !missing.is_empty() {
        return Err(ApiError::invalid(view, name, &missing));
    }
    if view.is_advanced_statefulset() {
        validate_statefulset(view, name, &v, old)?;
        conversion_depth(view, &v)?;
        let mut stored = stored_form(view, v);
        structural::apply(&mut stored);
        return Ok(stored);
    }
    let errs = match (view.version, old) {
        ("v1beta1", None) => {
            let cs = parse_as::<insitu_api::v1beta1::CloneSet>(view, name, &v)?;
            insitu_api::validation::v1beta1::validate_create(&cs)
        }
        ("v1beta1", Some(old)) => {
            let new_cs = parse_as::<insitu_api::v1beta1::CloneSet>(view, name, &v)?;
            let old_cs = parse_as(view, name, &present_value(view, old.clone()))?;
            insitu_api::validation::v1beta1::validate_update(&new_cs, &old_cs)
        }
        (_, None) => insitu_api::validation::validate_create(&parse_cloneset(view, name, &v)?),
        (_, Some(old)) => {
            let new_cs = parse_cloneset(view, name, &v)?;
            let old_cs = parse_cloneset(view, name, &present_value(view, old.clone()))?;
            // Validation ratcheting (GA in 1.33): an unchanged type that v1alpha1 rejects (OnDelete, set through
            // v1beta1) does not block other changes made through v1alpha1.
            let type_of =
                |c: &insitu_api::CloneSet| c.spec.update_strategy.as_ref().and_then(|u| u.type_.clone());
            let same_type = type_of(&new_cs) == type_of(&old_cs);
            insitu_api::validation::validate_update(&new_cs, &old_cs)
                .into_iter()
                .filter(|e| !(same_type && e.field == "spec.updateStrategy.type"))
                .collect()
        }
    };
    if !errs.is_empty() {
        return Err(ApiError::invalid_cloneset(view, name, &errs));
    }
    conversion_depth(view, &v)?;
    let mut stored = stored_form(view, v);
    structural::apply(&mut stored);
    Ok(stored)
}

/// Levels a conversion webhook's answer adds above the object (`{"response":{"convertedObjects":[ … ]}}`).
const REVIEW_LEVELS: usize = 3;

/// A write in a version other than the storage one goes through the conversion webhook, whose answer
/// kube-apiserver decodes with Go's depth limit: an object nested deeper than `MAX_DEPTH - 3` fails there, with
/// the converter's 500 (k8s.io/apiextensions-apiserver `pkg/apiserver/conversion/webhook_converter.go`; seen
/// on kube-apiserver v1.37.2 with insitu's webhook: "conversion webhook for apps.kruise.io/v1alpha1,
/// Kind=CloneSet failed: couldn't get version/kind; json parse error: invalid character '[' exceeded max
/// depth"). Reads in another version fail alike there; here they are served (docs/embedded-cluster.md).
fn conversion_depth(view: &ResourceType, v: &Value) -> ApiResult<()> {
    if view.version == CLONESET_STORAGE_VERSION
        || crate::deep::value_nesting(v) + REVIEW_LEVELS <= crate::deep::MAX_DEPTH
    {
        return Ok(());
    }
    let text = serde_json::to_vec(v).unwrap_or_default();
    let wrapped = [b"[[[".as_slice(), &text].concat();
    let bracket = crate::deep::scan(&wrapped).1.unwrap_or(b'{');
    Err(ApiError::new(
        500,
        "",
        format!(
            "conversion webhook for {}/{}, Kind={} failed: couldn't get version/kind; json parse error: {}",
            view.group,
            view.version,
            view.kind,
            crate::deep::exceeded(bracket)
        ),
    ))
}

/// Kruise's Advanced StatefulSet webhook validation (`insitu_api::statefulset::validation`), which reads the
/// object (and the old one) in v1beta1 whatever version the client wrote.
fn validate_statefulset(view: &ResourceType, name: &str, v: &Value, old: Option<&Value>) -> ApiResult<()> {
    let beta = |o: &Value| -> ApiResult<insitu_api::statefulset::StatefulSet> {
        let converted = convert_cloneset(o.clone(), insitu_api::conversion::V1BETA1);
        parse_as(view, name, &converted)
    };
    let new = beta(v)?;
    let errs = match old {
        None => insitu_api::statefulset::validation::validate_create(&new),
        Some(old) => insitu_api::statefulset::validation::validate_update(&new, &beta(old)?),
    };
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_cloneset(view, name, &errs))
    }
}

pub(super) fn parse_as<T: serde::de::DeserializeOwned>(
    rt: &ResourceType,
    name: &str,
    v: &Value,
) -> ApiResult<T> {
    serde_json::from_value(v.clone()).map_err(|e| ApiError::invalid_msg(rt, name, &format!("body: {e}")))
}
