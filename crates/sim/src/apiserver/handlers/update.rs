//! Update and patch: the update strategy shared by PUT and PATCH on the main, status and resize endpoints.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::storage::{admit_cloneset, storage_rt, stored_form};
use super::{
    Mode, ResizeNode, Target, check_rv, copy_field, finalizers_empty, meta_mut, meta_str, present_value,
    request_object, rt_namespaces, without, written_response,
};
use crate::apiserver::errors::{ApiError, ApiResult, FieldErr, quote};
use crate::apiserver::fieldvalidation::{FieldCheck, Source};
use crate::apiserver::patch::{self, PatchKind};
use crate::apiserver::resources::{self, ResourceType};
use crate::apiserver::{ApiRequest, ApiServer, events, pods, secrets, structural};
use crate::apiserver::{limits, metadata_validation, webhookconfigs};
use crate::store::Write;

impl ApiServer {
    pub(super) fn update(
        &self,
        req: &ApiRequest,
        ns: &str,
        name: &str,
        mode: Mode,
        fv: &FieldCheck,
    ) -> ApiResult<Response> {
        let rt = storage_rt(req.rt);
        let mut raw = request_object(req, fv)?;
        fv.check(req.rt, &mut raw, Source::Body)?;
        let body = stored_form(req.rt, raw);
        if rt.create_on_update {
            // Checked outside the store lock (the store is not re-entrant).
            self.ensure_namespace(rt, ns)?;
        }
        let node = self.resize_node(rt, ns, name, mode);
        let mut create = false;
        let written = self.write_or_preview(req.dry_run(), &rt.key(), ns, name, |cur, _| {
            let Some(cur) = cur else {
                if rt.create_on_update && mode == Mode::Main {
                    create = true;
                    return self
                        .prepare_create(
                            Target {
                                rt,
                                view: req.rt,
                                ns,
                                name,
                                fv: Some(fv),
                            },
                            body,
                        )
                        .map(Write::Put);
                }
                return Err(ApiError::not_found(rt, name));
            };
            let target = Target {
                rt,
                view: req.rt,
                ns,
                name,
                fv: Some(fv),
            };
            let old = cur.value();
            self.checked_update(
                target,
                mode,
                body,
                &old,
                node.as_ref(),
                cur.len() + req.body.len(),
            )
        })?;
        written_response(req.rt, created_or_ok(create), &written)
    }

    pub(super) fn patch(
        &self,
        req: &ApiRequest,
        ns: &str,
        name: &str,
        mode: Mode,
        fv: &FieldCheck,
    ) -> ApiResult<Response> {
        let view = req.rt;
        let rt = storage_rt(view);
        let kind = PatchKind::from_content_type(req.content_type())
            .ok_or_else(|| ApiError::unsupported_media(&patch::accepted(rt.smp)))?;
        if kind == PatchKind::Strategic && !rt.smp {
            return Err(ApiError::unsupported_media(&patch::accepted(false)));
        }
        if kind == PatchKind::Apply {
            self.ensure_namespace(rt, ns)?;
        }
        let node = self.resize_node(rt, ns, name, mode);
        let mut create = false;
        let written = self.write_or_preview(req.dry_run(), &rt.key(), ns, name, |cur, _| {
            let Some(cur) = cur else {
                if kind == PatchKind::Apply && mode == Mode::Main {
                    let mut raw = patch::parse_body(&req.body, true)?;
                    fv.check(view, &mut raw, Source::Body)?;
                    let body = stored_form(view, raw);
                    create = true;
                    return self
                        .prepare_create(
                            Target {
                                rt,
                                view,
                                ns,
                                name,
                                fv: Some(fv),
                            },
                            body,
                        )
                        .map(Write::Put);
                }
                return Err(ApiError::not_found(rt, name));
            };
            let old = cur.value();
            // Patches apply to the object as the client sees it.
            let mut new = present_value(view, old.clone());
            patch::apply(kind, &mut new, &req.body)?;
            fv.check(view, &mut new, Source::Patch)?;
            let new = stored_form(view, new);
            // A JSON patch's copy ops may grow the object beyond the request's own bytes.
            let copies = if kind == PatchKind::Json {
                limits::JSON_PATCH_MAX_COPY_BYTES
            } else {
                0
            };
            let target = Target {
                rt,
                view,
                ns,
                name,
                fv: Some(fv),
            };
            let bound = cur.len() + req.body.len() + copies;
            self.checked_update(target, mode, new, &old, node.as_ref(), bound)
        })?;
        written_response(view, created_or_ok(create), &written)
    }

    /// The tail PUT and PATCH share: the precondition on resourceVersion, the update strategy, then the
    /// object size limit (`size_bound`: the stored bytes plus what the request could add).
    fn checked_update(
        &self,
        target: Target<'_>,
        mode: Mode,
        new: Value,
        old: &Value,
        node: Option<&ResizeNode>,
        size_bound: usize,
    ) -> ApiResult<Write> {
        check_rv(target.rt, target.name, &new, old)?;
        let w = self.finish_update(target, mode, new, old, node)?;
        if let Write::Put(v) = &w {
            limits::check_object(v, size_bound)?;
        }
        Ok(w)
    }

    /// The update strategy shared by PUT and PATCH: server-managed metadata, status/spec split,
    /// validation, generation, no-op detection and finalizer-driven deletion.
    pub(super) fn finish_update(
        &self,
        target: Target<'_>,
        mode: Mode,
        mut new: Value,
        old: &Value,
        resize_node: Option<&ResizeNode>,
    ) -> ApiResult<Write> {
        let Target {
            rt,
            view,
            ns,
            name,
            fv: warnings,
        } = target;
        {
            let meta = meta_mut(&mut new)?;
            // `checkName` (endpoints/handlers/rest.go), for PUT and PATCH alike: a body or patch result without a
            // name (`{"metadata":null}`, a strategic `$patch: replace` at the root, ...) is refused.
            match meta.get("name").and_then(Value::as_str) {
                None | Some("") => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({name} based on URL) was undeterminable: name must be provided"
                    )));
                }
                Some(n) if n != name => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                Some(_) => {}
            }
            if rt.namespaced {
                match meta.get("namespace").and_then(Value::as_str) {
                    None | Some("") => {
                        meta.insert("namespace".into(), json!(ns));
                    }
                    Some(n) if n != ns => {
                        return Err(ApiError::bad_request(
                            "the namespace of the provided object does not match the namespace sent on the request",
                        ));
                    }
                    Some(_) => {}
                }
            } else {
                meta.remove("namespace");
            }
            let old_meta = old.get("metadata");
            let old_uid = meta_str(old, "uid");
            match meta.get("uid").and_then(Value::as_str) {
                None | Some("") => {
                    meta.insert("uid".into(), json!(old_uid));
                }
                Some(u) if u != old_uid => {
                    let e = FieldErr::invalid("metadata.uid", &quote(u), "field is immutable");
                    return Err(ApiError::invalid(rt, name, &[e]));
                }
                Some(_) => {}
            }
            immutable_deletion(rt, name, meta, old_meta)?;
            for k in [
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "resourceVersion",
            ] {
                copy_field(meta, old_meta, k);
            }
            meta.remove("managedFields");
            meta.remove("selfLink");
        }
        if let Some(o) = new.as_object_mut() {
            o.insert("kind".into(), json!(rt.kind));
            o.insert("apiVersion".into(), json!(rt.api_version()));
        }
        match mode {
            Mode::Main => {
                if rt.has_sub("status")
                    && let Some(o) = new.as_object_mut()
                {
                    copy_field(o, Some(old), "status");
                }
                if rt.is_pod() {
                    pods::default_spec(&mut new);
                }
                if rt.group.is_empty() && rt.resource == "events" {
                    events::default_core(&mut new);
                }
            }
            Mode::Status => {
                if rt.is_kruise_workload() || rt.is_image_pull_job() || rt.group == "apiextensions.k8s.io" {
                    let status = new.get("status").cloned();
                    new = old.clone();
                    if let Some(o) = new.as_object_mut() {
                        match status {
                            Some(s) => o.insert("status".into(), s),
                            None => o.remove("status"),
                        };
                    }
                } else if let Some(o) = new.as_object_mut() {
                    copy_field(o, Some(old), "spec");
                    if rt.is_pod() {
                        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                            copy_field(m, old.get("metadata"), "ownerReferences");
                        }
                        let qos = old.pointer("/status/qosClass").cloned();
                        if let (Some(q), Some(s)) = (qos, o.get_mut("status").and_then(Value::as_object_mut))
                        {
                            s.insert("qosClass".into(), q);
                        }
                    }
                }
            }
            Mode::Resize => {
                new = pods::resize(&new, old).map_err(|errs| ApiError::invalid(rt, name, &errs))?;
                // PodResize admission (after validation): the node must exist and fit the new requests.
                if let Some(rn) = resize_node.filter(|rn| !rn.name.is_empty()) {
                    let Some(node) = &rn.node else {
                        return Err(ApiError::forbidden(
                            rt,
                            name,
                            &format!("node {} not found", quote(&rn.name)),
                        ));
                    };
                    if new != *old
                        && let Err(why) = pods::check_allocatable(&new, node)
                    {
                        let mut e = ApiError::forbidden(rt, name, &why);
                        if let Some(d) = e.details.as_mut() {
                            d["causes"] = json!([{"reason": "NodeCapacity"}]);
                        }
                        return Err(e);
                    }
                }
            }
        }
        if rt.is_kruise_workload() {
            if mode == Mode::Main {
                new = admit_cloneset(view, name, new, Some(old), |w| {
                    if let Some(fv) = warnings {
                        fv.warn(w);
                    }
                })?;
            } else {
                structural::apply(&mut new);
            }
        }
        if rt.group == "admissionregistration.k8s.io" {
            let mutating = rt.resource == "mutatingwebhookconfigurations";
            webhookconfigs::default(&mut new, mutating);
            let errs = webhookconfigs::validate(&new, mutating);
            if !errs.is_empty() {
                return Err(ApiError::invalid(rt, name, &errs));
            }
        }
        if rt.is_secret() {
            let errs = secrets::validate_update(&new, old);
            if !errs.is_empty() {
                return Err(ApiError::invalid(rt, name, &errs));
            }
        }
        if mode == Mode::Main && rt.is_pod() {
            let errs = pods::validate_update(&new, old);
            if !errs.is_empty() {
                return Err(ApiError::invalid(rt, name, &errs));
            }
        }
        let errs = metadata_validation::validate(&new);
        if !errs.is_empty() {
            return Err(ApiError::invalid(rt, name, &errs));
        }
        if rt.generation {
            let changed = if rt.is_pod() {
                new.get("spec") != old.get("spec")
            } else {
                without(&new, &["metadata", "status"]) != without(old, &["metadata", "status"])
            };
            if changed {
                let g = old
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    + 1;
                meta_mut(&mut new)?.insert("generation".into(), json!(g));
            }
        }
        if new == *old {
            return Ok(Write::Keep);
        }
        let deleting = new
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null());
        let grace_zero = old
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            == Some(0);
        if deleting && grace_zero && finalizers_empty(&new) {
            return Ok(Write::DeleteAs(new));
        }
        Ok(Write::Put(new))
    }

    /// For resize writes: the pod's node (prefetched outside the store lock).
    pub(super) fn resize_node(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        mode: Mode,
    ) -> Option<ResizeNode> {
        if mode != Mode::Resize {
            return None;
        }
        let pod = self.store().get(&rt.key(), ns, name)?.value();
        let node_name = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let nodes = resources::find("", "v1", "nodes")?;
        let node = self.store().get(&nodes.key(), "", &node_name).map(|o| o.value());
        Some(ResizeNode {
            name: node_name,
            node,
        })
    }

    pub(super) fn ensure_namespace(&self, rt: &ResourceType, ns: &str) -> ApiResult<()> {
        if rt.namespaced && self.store().get(&rt_namespaces().key(), "", ns).is_none() {
            return Err(ApiError::namespace_not_found(ns));
        }
        Ok(())
    }
}

/// 201 when a PUT or an apply patch created the object, else 200.
fn created_or_ok(create: bool) -> StatusCode {
    if create {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

/// `BeforeUpdate` keeps an existing deletion timestamp and grace period whatever the update says, and
/// `ValidateObjectMetaAccessorUpdate` refuses one the update adds or changes (422 `field is immutable`).
fn immutable_deletion(
    rt: &ResourceType,
    name: &str,
    meta: &serde_json::Map<String, Value>,
    old_meta: Option<&Value>,
) -> ApiResult<()> {
    let old = |k: &str| old_meta.and_then(|m| m.get(k)).filter(|v| !v.is_null());
    let new = |k: &str| meta.get(k).filter(|v| !v.is_null());
    let mut errs = Vec::new();
    if let (None, Some(ts)) = (old("deletionTimestamp"), new("deletionTimestamp")) {
        // A metav1.Time renders as RFC 3339 in seconds, whatever precision the client sent.
        let shown = ts
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map_or_else(|| ts.to_string(), crate::apiserver::format_time);
        errs.push(FieldErr::invalid(
            "metadata.deletionTimestamp",
            &quote(&shown),
            "field is immutable",
        ));
    }
    let old_grace = old("deletionGracePeriodSeconds");
    if let Some(g) = new("deletionGracePeriodSeconds")
        && old_grace != Some(g)
    {
        errs.push(FieldErr::invalid(
            "metadata.deletionGracePeriodSeconds",
            &g.to_string(),
            "field is immutable",
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(rt, name, &errs))
    }
}
