//! Delete and deletecollection: preconditions, graceful deletion, propagation finalizers and namespace purge.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::{finalizers_empty, meta_mut, meta_str, present, present_value};
use crate::apiserver::dryrun;
use crate::apiserver::errors::{ApiError, ApiResult, quote};
use crate::apiserver::resources::{self, ResourceType};
use crate::apiserver::{ApiRequest, ApiServer, format_time, json_response, value_response};
use crate::store::{Write, Written};

impl ApiServer {
    pub(super) fn delete(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        let opts = DeleteOpts::parse(req)?;
        let written = self.delete_one(req.rt, ns, name, &opts)?;
        if req.rt.resource == "namespaces" && !opts.dry && matches!(written, Written::Deleted(_)) {
            self.purge_namespace(name);
        }
        Ok(delete_response(req.rt, &written))
    }

    pub(super) fn delete_one(
        &self,
        rt: &'static ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> ApiResult<Written> {
        let now = self.now();
        self.write_or_preview(opts.dry, &rt.key(), ns, name, |cur, _| {
            let Some(cur) = cur else { return Err(ApiError::not_found(rt, name)) };
            let mut obj = cur.value();
            if let Some(uid) = &opts.uid
                && uid != meta_str(&obj, "uid")
            {
                let why = format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                    meta_str(&obj, "uid")
                );
                return Err(kind_conflict(rt, name, &why));
            }
            if let Some(rv) = &opts.rv
                && rv != meta_str(&obj, "resourceVersion")
            {
                let why = format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                    meta_str(&obj, "resourceVersion")
                );
                return Err(kind_conflict(rt, name, &why));
            }
            let grace_opt = opts.grace.map(|g| if g < 0 { 1 } else { g });
            let has_finalizers = !finalizers_empty(&obj);
            let meta = meta_mut(&mut obj)?;
            let existing_ts = meta.get("deletionTimestamp").and_then(Value::as_str).map(str::to_string);
            let existing_grace = meta.get("deletionGracePeriodSeconds").and_then(Value::as_i64).map(|g| if g < 0 { 1 } else { g });
            if let Some(ts) = existing_ts {
                // Already being deleted: only a shorter grace period changes anything.
                let (Some(cur_g), Some(g)) = (existing_grace.filter(|g| *g > 0), grace_opt) else {
                    let ready = existing_grace.unwrap_or(0) == 0 && !has_finalizers;
                    return Ok(if ready { Write::DeleteAs(obj) } else { Write::Keep });
                };
                if g >= cur_g {
                    return Ok(Write::Keep);
                }
                let base = ts.parse::<Timestamp>().unwrap_or(now);
                let shifted = base.checked_sub(SignedDuration::from_secs(cur_g - g)).unwrap_or(base);
                meta.insert("deletionTimestamp".into(), json!(format_time(shifted)));
                meta.insert("deletionGracePeriodSeconds".into(), json!(g));
                return Ok(if g == 0 && !has_finalizers { Write::DeleteAs(obj) } else { Write::Put(obj) });
            }
            // A new deletion: propagation finalizers first.
            let mut finalizers: Vec<Value> =
                meta.get("finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
            let before = finalizers.len();
            match opts.propagation.as_deref() {
                Some("Orphan") => add_finalizer(&mut finalizers, "orphan"),
                Some("Foreground") => add_finalizer(&mut finalizers, "foregroundDeletion"),
                Some("Background") => finalizers.retain(|f| f != "orphan" && f != "foregroundDeletion"),
                _ => {}
            }
            if finalizers.len() != before {
                if finalizers.is_empty() {
                    meta.remove("finalizers");
                } else {
                    meta.insert("finalizers".into(), Value::Array(finalizers.clone()));
                }
            }
            let has_finalizers = !finalizers.is_empty();
            // Pods always go through graceful deletion (maybe with a zero period); other kinds only
            // get marked when finalizers hold them.
            let grace = if rt.is_pod() {
                Some(pod_grace(&obj, grace_opt))
            } else if has_finalizers {
                Some(0)
            } else {
                None
            };
            let Some(grace) = grace else { return Ok(Write::Delete) };
            let meta = meta_mut(&mut obj)?;
            let at = now.checked_add(SignedDuration::from_secs(grace)).unwrap_or(now);
            meta.insert("deletionTimestamp".into(), json!(format_time(at)));
            meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
            if let Some(g) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
                meta.insert("generation".into(), json!(g + 1));
            }
            Ok(if grace == 0 && !has_finalizers { Write::DeleteAs(obj) } else { Write::Put(obj) })
        })
    }

    pub(super) fn purge_namespace(&self, ns: &str) {
        for rt in resources::RESOURCES.iter().filter(|r| r.namespaced) {
            let (items, _) = self.store().list(&rt.key(), Some(ns), |_| true);
            for o in items {
                let _ = self.store().write::<crate::store::QuotaExceeded>(
                    &rt.key(),
                    ns,
                    &o.index.name,
                    |_, _| Ok(Write::Delete),
                );
            }
        }
    }

    pub(super) fn delete_collection(&self, req: &ApiRequest, ns: &str) -> ApiResult<Response> {
        let sel = self.selectors(req)?;
        let opts = DeleteOpts::parse(req)?;
        let (items, rv) = self
            .store()
            .list(&req.rt.key(), req.ns.as_deref(), |idx| sel.matches(idx));
        let mut out = Vec::new();
        for o in items {
            match self.delete_one(req.rt, ns, &o.index.name, &opts) {
                Ok(w) => {
                    if let Some(obj) = w.object() {
                        out.push(present_value(req.rt, obj.value()));
                    }
                }
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let rt = req.rt;
        Ok(value_response(
            StatusCode::OK,
            &json!({"kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(), "metadata": {"resourceVersion": rv.to_string()}, "items": out}),
        ))
    }
}

pub(super) fn add_finalizer(list: &mut Vec<Value>, f: &str) {
    if !list.iter().any(|v| v == f) {
        list.push(json!(f));
    }
}

/// `podStrategy.CheckGracefulDelete`.
pub(super) fn pod_grace(pod: &Value, requested: Option<i64>) -> i64 {
    let mut period = requested.unwrap_or_else(|| {
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    });
    if pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        period = 0;
    }
    if matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Failed" | "Succeeded")
    ) {
        period = 0;
    }
    period.max(0)
}

/// Conflicts from delete preconditions name the kind (`Pod "x"`), as `BeforeDelete` does.
pub(super) fn kind_conflict(rt: &ResourceType, name: &str, why: &str) -> ApiError {
    let mut details = json!({"name": name, "kind": rt.kind});
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    ApiError {
        message: format!(
            "Operation cannot be fulfilled on {} \"{}\": {}",
            rt.qualified_kind(),
            name,
            why
        ),
        details: Some(details),
        ..ApiError::conflict_msg(rt, name, why)
    }
}

pub(super) fn delete_response(rt: &ResourceType, w: &Written) -> Response {
    match w {
        Written::Deleted(o) if !rt.return_deleted => {
            let uid = o.value().pointer("/metadata/uid").cloned().unwrap_or(Value::Null);
            let mut details = json!({"name": o.index.name, "kind": rt.resource, "uid": uid});
            if !rt.group.is_empty() {
                details["group"] = json!(rt.group);
            }
            value_response(
                StatusCode::OK,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
            )
        }
        other => match other.object() {
            Some(o) => json_response(StatusCode::OK, present(rt, o)),
            None => ApiError::internal("delete produced no object").into_response(),
        },
    }
}

/// `DeleteOptions` from the body and query.
pub(super) struct DeleteOpts {
    /// `dryRun=All` in the query or `"dryRun": ["All"]` in the body.
    dry: bool,
    grace: Option<i64>,
    propagation: Option<String>,
    uid: Option<String>,
    rv: Option<String>,
}

impl DeleteOpts {
    pub(super) fn parse(req: &ApiRequest) -> ApiResult<Self> {
        let body: Value = if req.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else if crate::apiserver::protobuf::is_protobuf(req.content_type()) {
            // client-go's typed Delete encodes DeleteOptions in the client's content type.
            crate::apiserver::protobuf::decode(&req.body)?
        } else {
            serde_json::from_slice(&req.body)
                .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
        };
        let grace = match req.q("gracePeriodSeconds") {
            Some(g) => Some(
                g.parse::<i64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds: {g}")))?,
            ),
            None => body.get("gracePeriodSeconds").and_then(Value::as_i64),
        };
        let mut propagation = req.q("propagationPolicy").map(str::to_string).or_else(|| {
            body.get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        let orphan = req
            .q("orphanDependents")
            .map(|v| v == "true")
            .or_else(|| body.get("orphanDependents").and_then(Value::as_bool));
        if propagation.is_none() && orphan == Some(true) {
            propagation = Some("Orphan".into());
        }
        let body_dry: Vec<&str> = body
            .get("dryRun")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(bad) = body_dry.iter().find(|v| **v != "All") {
            let message = format!(
                "dryRun: Unsupported value: [{}]: supported values: \"All\"",
                quote(bad)
            );
            return Err(dryrun::options_invalid(
                "DeleteOptions",
                "dryRun",
                "FieldValueNotSupported",
                &message,
            ));
        }
        Ok(Self {
            dry: req.dry_run() || !body_dry.is_empty(),
            grace,
            propagation,
            uid: body
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string),
            rv: body
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}
