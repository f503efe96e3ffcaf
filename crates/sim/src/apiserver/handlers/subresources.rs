//! The scale (autoscaling/v1 Scale) and pods/binding subresources.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::storage::storage_rt;
use super::{Mode, Target, check_rv, meta_mut, meta_str, parse_object};
use crate::apiserver::errors::{ApiError, ApiResult, FieldErr, quote};
use crate::apiserver::patch::{self, PatchKind};
use crate::apiserver::{ApiRequest, ApiServer, value_response};
use crate::store::{Object, Write};

impl ApiServer {
    pub(super) fn scale_get(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        self.counters().reads += 1;
        let obj = self
            .store()
            .get(&req.rt.key(), ns, name)
            .ok_or_else(|| ApiError::not_found(req.rt, name))?;
        Ok(value_response(StatusCode::OK, &scale_of(&obj.value())))
    }

    pub(super) fn scale_put(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        let body = patch::parse_body(&req.body, true)?;
        self.scale_write(req, ns, name, |_| Ok(body))
    }

    pub(super) fn scale_patch(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        let smp = storage_rt(req.rt).smp;
        let kind = PatchKind::from_content_type(req.content_type())
            .ok_or_else(|| ApiError::unsupported_media(&patch::accepted(smp)))?;
        if kind == PatchKind::Strategic && !smp {
            return Err(ApiError::unsupported_media(&patch::accepted(false)));
        }
        self.scale_write(req, ns, name, |old| {
            let mut scale = scale_of(old);
            patch::apply(kind, &mut scale, &req.body)?;
            Ok(scale)
        })
    }

    /// The tail both scale writes share: the requested Scale (from the stored object) checked against the
    /// stored resourceVersion, its replicas written into the object, the Scale view of the result returned.
    fn scale_write(
        &self,
        req: &ApiRequest,
        ns: &str,
        name: &str,
        requested: impl FnOnce(&Value) -> ApiResult<Value>,
    ) -> ApiResult<Response> {
        let view = req.rt;
        let rt = storage_rt(view);
        let written = self.write_or_preview(req.dry_run(), &rt.key(), ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(rt, name));
            };
            let old = cur.value();
            let scale = requested(&old)?;
            check_rv(rt, name, &scale, &old)?;
            let replicas = scale_replicas(name, &scale)?;
            let mut new = old.clone();
            set_replicas(&mut new, replicas);
            self.finish_update(
                Target {
                    rt,
                    view,
                    ns,
                    name,
                    fv: None,
                },
                Mode::Main,
                new,
                &old,
                None,
            )
        })?;
        let obj = written.object().map(Object::value).unwrap_or(Value::Null);
        Ok(value_response(StatusCode::OK, &scale_of(&obj)))
    }

    // ---------- binding ----------

    pub(super) fn bind(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        let rt = req.rt;
        let body = parse_object(req)?;
        let bname = meta_str(&body, "name");
        if !bname.is_empty() && bname != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
        let target_kind = body.pointer("/target/kind").and_then(Value::as_str).unwrap_or("");
        let node = body
            .pointer("/target/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut errs = Vec::new();
        if !target_kind.is_empty() && target_kind != "Node" {
            errs.push(FieldErr::invalid(
                "target.kind",
                &quote(target_kind),
                "must be empty or 'Node'",
            ));
        }
        if node.is_empty() {
            errs.push(FieldErr::required("target.name", ""));
        }
        if !errs.is_empty() {
            return Err(ApiError {
                message: format!(
                    "Binding \"{name}\" is invalid: {}",
                    crate::apiserver::errors::aggregate(&errs)
                ),
                ..ApiError::invalid(rt, name, &errs)
            });
        }
        let annotations = body
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .cloned();
        let now = self.now_string();
        self.write_or_preview(req.dry_run(), &rt.key(), ns, name, |cur, _| {
            let Some(cur) = cur else { return Err(ApiError::not_found(rt, name)) };
            let mut pod = cur.value();
            if pod.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null()) {
                return Err(binding_conflict(name, &format!("pod {name} is being deleted, cannot be assigned to a host")));
            }
            let current = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
            if !current.is_empty() {
                return Err(binding_conflict(name, &format!("pod {name} is already assigned to node {}", quote(current))));
            }
            if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("nodeName".into(), json!(node));
            }
            if let Some(ann) = &annotations {
                let meta = meta_mut(&mut pod)?;
                let target = meta.entry("annotations").or_insert_with(|| json!({}));
                if let Some(t) = target.as_object_mut() {
                    for (k, v) in ann {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
            set_condition(&mut pod, json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
            Ok(Write::Put(pod))
        })?;
        Ok(value_response(
            StatusCode::CREATED,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        ))
    }
}

pub(super) fn binding_conflict(name: &str, why: &str) -> ApiError {
    ApiError {
        code: 409,
        reason: "Conflict",
        message: format!("Operation cannot be fulfilled on pods/binding \"{name}\": {why}"),
        details: Some(json!({"name": name, "kind": "pods/binding"})),
    }
}

pub(super) fn set_condition(obj: &mut Value, cond: Value) {
    let Some(o) = obj.as_object_mut() else { return };
    let status = o.entry("status").or_insert_with(|| json!({}));
    let Some(s) = status.as_object_mut() else { return };
    let conds = s.entry("conditions").or_insert_with(|| json!([]));
    let Some(list) = conds.as_array_mut() else { return };
    let ty = cond.get("type").cloned();
    match list.iter_mut().find(|c| c.get("type") == ty.as_ref()) {
        Some(existing) => *existing = cond,
        None => list.push(cond),
    }
}

/// The autoscaling/v1 Scale view of a CloneSet.
pub(super) fn scale_of(obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    let pick = |k: &str| meta.get(k).cloned().unwrap_or(Value::Null);
    let mut status =
        json!({"replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0)});
    if let Some(sel) = obj.pointer("/status/labelSelector").and_then(Value::as_str) {
        status["selector"] = json!(sel);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": pick("name"),
            "namespace": pick("namespace"),
            "uid": pick("uid"),
            "resourceVersion": pick("resourceVersion"),
            "creationTimestamp": pick("creationTimestamp"),
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0)},
        "status": status,
    })
}

pub(super) fn scale_replicas(name: &str, scale: &Value) -> ApiResult<i64> {
    let r = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ApiError::bad_request(format!("spec.replicas: expected an integer, got {v}")))?,
    };
    if r < 0 {
        return Err(ApiError {
            code: 422,
            reason: "Invalid",
            message: format!(
                "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {r}: must be greater than or equal to 0"
            ),
            details: Some(
                json!({"name": name, "group": "autoscaling", "kind": "Scale", "causes": [{
                    "reason": "FieldValueInvalid",
                    "message": format!("Invalid value: {r}: must be greater than or equal to 0"),
                    "field": "spec.replicas",
                }]}),
            ),
        });
    }
    Ok(r)
}

pub(super) fn set_replicas(obj: &mut Value, replicas: i64) {
    if let Some(o) = obj.as_object_mut() {
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.insert("replicas".into(), json!(replicas));
        }
    }
}
