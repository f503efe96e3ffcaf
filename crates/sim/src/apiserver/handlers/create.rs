//! Create: name generation, server-set metadata, name validation and per-kind create defaults.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::storage::{admit_cloneset, storage_rt, stored_form};
use super::{Target, meta_mut, present, request_object, rt_namespaces};
use crate::apiserver::errors::{ApiError, ApiResult, FieldErr, quote};
use crate::apiserver::fieldvalidation::{FieldCheck, Source};
use crate::apiserver::metadata_validation::name_errors;
use crate::apiserver::resources::ResourceType;
use crate::apiserver::{ApiRequest, ApiServer, events, json_response, pods, secrets};
use crate::apiserver::{limits, metadata_validation, webhookconfigs};
use crate::store::{Object, Write};

/// `content.IsPathSegmentName` (apimachinery api/validate/content/path.go) as `metadata.name` errors.
fn path_segment_errors(name: &str) -> Vec<FieldErr> {
    let invalid = |why: String| vec![FieldErr::invalid("metadata.name", &quote(name), &why)];
    if matches!(name, "." | "..") {
        return invalid(format!("may not be '{name}'"));
    }
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(*bad))
        .flat_map(|bad| invalid(format!("may not contain '{bad}'")))
        .collect()
}

impl ApiServer {
    pub(super) fn create(&self, req: &ApiRequest, ns: &str, fv: &FieldCheck) -> ApiResult<Response> {
        let mut raw = request_object(req, fv)?;
        fv.check(req.rt, &mut raw, Source::Body)?;
        let body = stored_form(req.rt, raw);
        let obj = self.create_value_as(req.rt, ns, body, req.dry_run(), req.body.len())?;
        Ok(json_response(StatusCode::CREATED, present(req.rt, &obj)))
    }

    /// Creates an object (used by POST, by PUT/apply on a missing object, and at bootstrap).
    pub(in crate::apiserver) fn create_value(
        &self,
        view: &'static ResourceType,
        ns: &str,
        body: Value,
    ) -> ApiResult<Object> {
        self.create_value_as(view, ns, body, false, 0)
    }

    /// [`ApiServer::create_value`], or its dry run. `bound` is the request body's size: the created object is
    /// about as large, so it is only serialized to be measured against etcd's limit when that body was near it.
    pub(super) fn create_value_as(
        &self,
        view: &'static ResourceType,
        ns: &str,
        mut body: Value,
        dry: bool,
        bound: usize,
    ) -> ApiResult<Object> {
        let rt = storage_rt(view);
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
        if !kind.is_empty() && kind != rt.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        let meta = meta_mut(&mut body)?;
        if rt.namespaced {
            let body_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            if self.store().get(&rt_namespaces().key(), "", ns).is_none() {
                return Err(ApiError::namespace_not_found(ns));
            }
        }
        let name = meta.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let generate = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() && generate.is_empty() {
            let e = FieldErr::required("metadata.name", "name or generateName is required");
            return Err(ApiError::invalid(rt, "", &[e]));
        }
        let key = rt.key();
        let mut attempt = 0;
        loop {
            let candidate = if name.is_empty() {
                format!("{generate}{}", self.random_suffix())
            } else {
                name.clone()
            };
            let res = self.write_or_preview(dry, &key, ns, &candidate, |cur, _| {
                let target = Target {
                    rt,
                    view,
                    ns,
                    name: &candidate,
                    fv: None,
                };
                // Admission and validation first, then storage: kube-apiserver's create handler
                // (apiserver/pkg/registry/generic/registry/store.go, Store.Create) runs BeforeCreate's
                // validation and etcd's request-size check before the txn that reports AlreadyExists, so an
                // invalid object under a taken name gets 422, not 409.
                let obj = self.prepare_create(target, body.clone())?;
                limits::check_object(&obj, bound)?;
                if cur.is_some() {
                    return Err(ApiError::already_exists(rt, &candidate));
                }
                Ok(Write::Put(obj))
            });
            match res {
                Err(e) if e.reason == "AlreadyExists" && name.is_empty() && attempt < 8 => attempt += 1,
                Err(e) => return Err(e),
                Ok(w) => {
                    return w
                        .object()
                        .cloned()
                        .ok_or_else(|| ApiError::internal("create produced no object"));
                }
            }
        }
    }

    pub(super) fn prepare_create(&self, target: Target<'_>, mut obj: Value) -> ApiResult<Value> {
        let Target {
            rt, view, ns, name, ..
        } = target;
        let now = self.now_string();
        let uid = self.new_uid();
        {
            let meta = meta_mut(&mut obj)?;
            if meta
                .get("resourceVersion")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
            {
                return Err(ApiError::internal(
                    "resourceVersion should not be set on objects to be created",
                ));
            }
            meta.insert("name".into(), json!(name));
            if rt.namespaced {
                meta.insert("namespace".into(), json!(ns));
            } else {
                meta.remove("namespace");
            }
            meta.insert("uid".into(), json!(uid));
            meta.insert("creationTimestamp".into(), json!(now));
            for k in [
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "managedFields",
                "selfLink",
                "resourceVersion",
            ] {
                meta.remove(k);
            }
            if rt.generation {
                meta.insert("generation".into(), json!(1));
            } else {
                meta.remove("generation");
            }
        }
        // core/v1 Events keep their legacy validation (pkg/apis/core/validation/events.go,
        // `ValidateEventCreate`): no DNS rule nor length limit on the name, only `BeforeCreate`'s path-segment
        // check (registry/rest/create.go `validatePathSegment`); events.k8s.io/v1 writes are strict.
        let legacy_event = view.group.is_empty() && view.resource == "events";
        let mut errs = if legacy_event {
            path_segment_errors(name)
        } else {
            name_errors(name, rt.resource == "namespaces")
        };
        errs.extend(metadata_validation::validate(&obj));
        if !errs.is_empty() {
            return Err(ApiError::invalid(rt, name, &errs));
        }
        if let Some(o) = obj.as_object_mut() {
            o.insert("kind".into(), json!(rt.kind));
            o.insert("apiVersion".into(), json!(rt.api_version()));
        }
        match (rt.group, rt.resource) {
            ("", "pods") => {
                let errs = pods::validate_create(&obj);
                if !errs.is_empty() {
                    return Err(ApiError::invalid(rt, name, &errs));
                }
                pods::default_create(&mut obj);
            }
            ("apps.kruise.io", "clonesets" | "statefulsets") => {
                if let Some(o) = obj.as_object_mut() {
                    o.remove("status");
                }
                obj = admit_cloneset(view, name, obj, None, |_| {})?;
            }
            // A custom resource with a status subresource: the main endpoint drops status on create.
            ("apps.kruise.io", _) => {
                if let Some(o) = obj.as_object_mut() {
                    o.remove("status");
                }
            }
            ("", "namespaces") => {
                if let Some(o) = obj.as_object_mut() {
                    let meta = o.entry("metadata").or_insert_with(|| json!({}));
                    if let Some(m) = meta.as_object_mut() {
                        let labels = m.entry("labels").or_insert_with(|| json!({}));
                        if let Some(l) = labels.as_object_mut() {
                            l.insert("kubernetes.io/metadata.name".into(), json!(name));
                        }
                    }
                    o.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
                    o.insert("status".into(), json!({"phase": "Active"}));
                }
            }
            ("", "events") => events::default_core(&mut obj),
            ("", "secrets") => {
                let errs = secrets::validate(&obj);
                if !errs.is_empty() {
                    return Err(ApiError::invalid(rt, name, &errs));
                }
            }
            ("", "persistentvolumeclaims") => {
                if let Some(o) = obj.as_object_mut() {
                    o.insert("status".into(), json!({"phase": "Pending"}));
                }
            }
            ("apiextensions.k8s.io", _) => crd_status(&mut obj, &now),
            ("admissionregistration.k8s.io", resource) => {
                let mutating = resource == "mutatingwebhookconfigurations";
                webhookconfigs::default(&mut obj, mutating);
                let errs = webhookconfigs::validate(&obj, mutating);
                if !errs.is_empty() {
                    return Err(ApiError::invalid(rt, name, &errs));
                }
            }
            _ => {}
        }
        Ok(obj)
    }
}

pub(super) fn crd_status(obj: &mut Value, now: &str) {
    let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let versions: Vec<Value> = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| vs.iter().filter_map(|v| v.get("name").cloned()).collect())
        .unwrap_or_default();
    if let Some(o) = obj.as_object_mut() {
        o.insert(
            "status".into(),
            json!({
                "acceptedNames": names,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now}
                ],
                "storedVersions": versions,
            }),
        );
    }
}
