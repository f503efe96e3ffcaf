//! REST verbs (get, list, create, update, patch, delete) and the status, scale, binding and resize subresources.

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

use super::dryrun;
use super::errors::{ApiError, ApiResult, FieldErr, quote};
use super::fieldvalidation::{FieldCheck, Source};
use super::patch::{self, PatchKind};
use super::resources::{self, ResourceType};
use super::selectors::{FieldSelector, LabelSelector, Selectors};
use super::{
    ApiRequest, ApiServer, events, format_time, json_response, pods, structural, table, value_response, watch,
};
use super::{limits, metadata_validation, pod_streams};
use crate::store::{Object, Write, Written};

/// The object a write addresses.
#[derive(Clone, Copy)]
struct Target<'a> {
    /// The stored resource.
    rt: &'static ResourceType,
    /// The resource (version) the request named, which admission runs in.
    view: &'static ResourceType,
    ns: &'a str,
    name: &'a str,
}

/// The node a resized pod runs on.
struct ResizeNode {
    name: String,
    node: Option<Value>,
}

/// Which endpoint a write came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Main,
    Status,
    Resize,
}

pub(super) fn rt_namespaces() -> &'static ResourceType {
    resources::find("", "v1", "namespaces").unwrap_or(&resources::RESOURCES[1])
}

pub(super) fn rt_crds() -> &'static ResourceType {
    resources::find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .unwrap_or(&resources::RESOURCES[9])
}

fn meta_mut(obj: &mut Value) -> ApiResult<&mut Map<String, Value>> {
    let Some(o) = obj.as_object_mut() else {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    };
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

fn meta_str<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn finalizers_empty(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
}

fn copy_field(dst: &mut Map<String, Value>, src: Option<&Value>, key: &str) {
    match src.and_then(|s| s.get(key)) {
        Some(v) => dst.insert(key.to_string(), v.clone()),
        None => dst.remove(key),
    };
}

fn without(v: &Value, keys: &[&str]) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !keys.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn name_errors(name: &str, label: bool) -> Vec<FieldErr> {
    let max = if label { 63 } else { 253 };
    let mut errs = Vec::new();
    if name.len() > max {
        errs.push(FieldErr::invalid(
            "metadata.name",
            &quote(name),
            &format!("must be no more than {max} characters"),
        ));
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok_chars = name.chars().all(|c| alnum(c) || c == '-' || (!label && c == '.'));
    let ends_ok = name.starts_with(alnum) && name.ends_with(alnum);
    let parts_ok = label
        || name
            .split('.')
            .all(|p| p.starts_with(alnum) && p.ends_with(alnum));
    if !(ok_chars && ends_ok && parts_ok) {
        errs.push(FieldErr::invalid(
            "metadata.name",
            &quote(name),
            if label { LABEL_MSG } else { SUBDOMAIN_MSG },
        ));
    }
    errs
}

fn parse_object(req: &ApiRequest) -> ApiResult<Value> {
    let ct = req.content_type().to_ascii_lowercase();
    if ct.starts_with("application/vnd.kubernetes.protobuf") || ct.starts_with("application/cbor") {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (the simulated apiserver does not decode protobuf; use `kubectl apply -f`)",
        ));
    }
    let v = patch::parse_body(&req.body, ct.contains("yaml"))?;
    if !v.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    }
    Ok(v)
}

impl ApiServer {
    pub(super) fn handle(&self, req: ApiRequest) -> Response {
        match self.route_request(&req) {
            Ok(r) => r,
            Err(e) => e.into_response(),
        }
    }

    fn route_request(&self, req: &ApiRequest) -> ApiResult<Response> {
        let rt = req.rt;
        if matches!(
            req.method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        ) {
            dryrun::requested(req, dryrun::options_kind(&req.method))?;
        }
        if rt.namespaced && req.ns.is_none() {
            return if req.method == Method::GET && req.name.is_none() {
                self.list_or_watch(req)
            } else {
                Err(ApiError::method_not_allowed())
            };
        }
        let ns = req.ns.clone().unwrap_or_default();
        let Some(name) = req.name.clone() else {
            return match req.method {
                Method::GET => self.list_or_watch(req),
                Method::POST => {
                    let fv = FieldCheck::from_request(req)?;
                    Ok(fv.finish(self.create(req, &ns, &fv)?))
                }
                Method::DELETE => self.delete_collection(req, &ns),
                _ => Err(ApiError::method_not_allowed()),
            };
        };
        if req.watch_path {
            return self.list_or_watch(req);
        }
        match req.sub.as_deref() {
            None => match req.method {
                Method::GET => self.get(req, &ns, &name),
                Method::PUT => {
                    let fv = FieldCheck::from_request(req)?;
                    Ok(fv.finish(self.update(req, &ns, &name, Mode::Main, &fv)?))
                }
                Method::PATCH => {
                    let fv = FieldCheck::from_request(req)?;
                    Ok(fv.finish(self.patch(req, &ns, &name, Mode::Main, &fv)?))
                }
                Method::DELETE => self.delete(req, &ns, &name),
                _ => Err(ApiError::method_not_allowed()),
            },
            Some(sub) if pod_streams::handles(rt.is_pod(), sub) => self.pod_stream(req, &ns, &name, sub),
            Some(sub) if !rt.has_sub(sub) => Err(ApiError::no_route()),
            Some("scale") => match req.method {
                Method::GET => self.scale_get(req, &ns, &name),
                Method::PUT => self.scale_put(req, &ns, &name),
                Method::PATCH => self.scale_patch(req, &ns, &name),
                _ => Err(ApiError::method_not_allowed()),
            },
            Some("binding") => match req.method {
                Method::POST => self.bind(req, &ns, &name),
                _ => Err(ApiError::method_not_allowed()),
            },
            Some(sub) => {
                let mode = if sub == "resize" {
                    Mode::Resize
                } else {
                    Mode::Status
                };
                match req.method {
                    Method::GET => self.get(req, &ns, &name),
                    Method::PUT => {
                        let fv = FieldCheck::from_request(req)?;
                        Ok(fv.finish(self.update(req, &ns, &name, mode, &fv)?))
                    }
                    Method::PATCH => {
                        let fv = FieldCheck::from_request(req)?;
                        Ok(fv.finish(self.patch(req, &ns, &name, mode, &fv)?))
                    }
                    _ => Err(ApiError::method_not_allowed()),
                }
            }
        }
    }

    // ---------- reads ----------

    fn get(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        self.counters().reads += 1;
        let obj = self
            .store()
            .get(&req.rt.key(), ns, name)
            .ok_or_else(|| ApiError::not_found(req.rt, name))?;
        if req.wants_table() {
            let v = present_value(req.rt, obj.value());
            return Ok(table::response(&table::list(
                req,
                &[v],
                &obj.index.rv.to_string(),
                self.now(),
            )));
        }
        Ok(json_response(StatusCode::OK, present(req.rt, &obj)))
    }

    fn selectors(&self, req: &ApiRequest) -> ApiResult<Selectors> {
        let mut fields = FieldSelector::parse(req.q("fieldSelector").unwrap_or(""), req.rt)?;
        if req.watch_path
            && let Some(name) = &req.name
        {
            let both = format!("{},metadata.name={name}", req.q("fieldSelector").unwrap_or(""));
            fields = FieldSelector::parse(&both, req.rt)?;
        }
        Ok(Selectors {
            labels: LabelSelector::parse(req.q("labelSelector").unwrap_or(""))?,
            fields,
        })
    }

    fn list_or_watch(&self, req: &ApiRequest) -> ApiResult<Response> {
        let sel = self.selectors(req)?;
        if req.flag("watch") || req.watch_path {
            return watch::serve(self, req, sel);
        }
        self.counters().lists += 1;
        let (items, rv) = self
            .store()
            .list(&req.rt.key(), req.ns.as_deref(), |idx| sel.matches(idx));
        if req.wants_table() {
            let values: Vec<Value> = items.iter().map(|o| present_value(req.rt, o.value())).collect();
            return Ok(table::response(&table::list(
                req,
                &values,
                &rv.to_string(),
                self.now(),
            )));
        }
        let rt = req.rt;
        let mut buf = format!(
            r#"{{"kind":"{}List","apiVersion":"{}","metadata":{{"resourceVersion":"{}"}},"items":["#,
            rt.kind,
            rt.api_version(),
            rv
        )
        .into_bytes();
        let total: usize = items.iter().map(|o| o.bytes.len() + 1).sum();
        buf.reserve(total + 2);
        for (i, o) in items.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(&present(rt, o));
        }
        buf.extend_from_slice(b"]}");
        Ok(json_response(StatusCode::OK, buf))
    }

    // ---------- create ----------

    fn create(&self, req: &ApiRequest, ns: &str, fv: &FieldCheck) -> ApiResult<Response> {
        let raw = parse_object(req)?;
        fv.check(req.rt, &raw, Source::Body)?;
        let body = stored_form(req.rt, raw);
        let obj = self.create_value_as(req.rt, ns, body, req.dry_run(), req.body.len())?;
        Ok(json_response(StatusCode::CREATED, present(req.rt, &obj)))
    }

    /// Creates an object (used by POST, by PUT/apply on a missing object, and at bootstrap).
    pub(super) fn create_value(
        &self,
        view: &'static ResourceType,
        ns: &str,
        body: Value,
    ) -> ApiResult<Object> {
        self.create_value_as(view, ns, body, false, 0)
    }

    /// [`ApiServer::create_value`], or its dry run. `bound` is the request body's size: the created object is
    /// about as large, so it is only serialized to be measured against etcd's limit when that body was near it.
    fn create_value_as(
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
                if cur.is_some() {
                    return Err(ApiError::already_exists(rt, &candidate));
                }
                let target = Target {
                    rt,
                    view,
                    ns,
                    name: &candidate,
                };
                let obj = self.prepare_create(target, body.clone())?;
                limits::check_object(&obj, bound)?;
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

    fn prepare_create(&self, target: Target<'_>, mut obj: Value) -> ApiResult<Value> {
        let Target { rt, view, ns, name } = target;
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
        let mut errs = name_errors(name, rt.resource == "namespaces");
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
            ("apps.kruise.io", _) => {
                if let Some(o) = obj.as_object_mut() {
                    o.remove("status");
                }
                obj = admit_cloneset(view, name, obj, None)?;
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
            ("", "persistentvolumeclaims") => {
                if let Some(o) = obj.as_object_mut() {
                    o.insert("status".into(), json!({"phase": "Pending"}));
                }
            }
            ("apiextensions.k8s.io", _) => crd_status(&mut obj, &now),
            _ => {}
        }
        Ok(obj)
    }

    // ---------- update / patch ----------

    fn update(
        &self,
        req: &ApiRequest,
        ns: &str,
        name: &str,
        mode: Mode,
        fv: &FieldCheck,
    ) -> ApiResult<Response> {
        let rt = storage_rt(req.rt);
        let raw = parse_object(req)?;
        fv.check(req.rt, &raw, Source::Body)?;
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
                            },
                            body,
                        )
                        .map(Write::Put);
                }
                return Err(ApiError::not_found(rt, name));
            };
            let old = cur.value();
            check_rv(rt, name, &body, &old)?;
            let target = Target {
                rt,
                view: req.rt,
                ns,
                name,
            };
            let w = self.finish_update(target, mode, body, &old, node.as_ref())?;
            if let Write::Put(v) = &w {
                limits::check_object(v, cur.bytes.len() + req.body.len())?;
            }
            Ok(w)
        })?;
        let code = if create {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        written_response(req.rt, code, &written)
    }

    fn patch(
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
                    let raw = patch::parse_body(&req.body, true)?;
                    fv.check(view, &raw, Source::Body)?;
                    let body = stored_form(view, raw);
                    create = true;
                    return self
                        .prepare_create(Target { rt, view, ns, name }, body)
                        .map(Write::Put);
                }
                return Err(ApiError::not_found(rt, name));
            };
            let old = cur.value();
            // Patches apply to the object as the client sees it.
            let mut new = present_value(view, old.clone());
            patch::apply(kind, &mut new, &req.body)?;
            fv.check(view, &new, Source::Patch)?;
            let new = stored_form(view, new);
            check_rv(rt, name, &new, &old)?;
            let w = self.finish_update(Target { rt, view, ns, name }, mode, new, &old, node.as_ref())?;
            if let Write::Put(v) = &w {
                let copies = if kind == PatchKind::Json {
                    limits::JSON_PATCH_MAX_COPY_BYTES
                } else {
                    0
                };
                limits::check_object(v, cur.bytes.len() + req.body.len() + copies)?;
            }
            Ok(w)
        })?;
        let code = if create {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        written_response(view, code, &written)
    }

    /// The update strategy shared by PUT and PATCH: server-managed metadata, status/spec split,
    /// validation, generation, no-op detection and finalizer-driven deletion.
    fn finish_update(
        &self,
        target: Target<'_>,
        mode: Mode,
        mut new: Value,
        old: &Value,
        resize_node: Option<&ResizeNode>,
    ) -> ApiResult<Write> {
        let Target { rt, view, ns, name } = target;
        {
            let meta = meta_mut(&mut new)?;
            match meta.get("name").and_then(Value::as_str) {
                None | Some("") => {
                    meta.insert("name".into(), json!(name));
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
                if rt.is_cloneset() || rt.group == "apiextensions.k8s.io" {
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
        if rt.is_cloneset() {
            if mode == Mode::Main {
                new = admit_cloneset(view, name, new, Some(old))?;
            } else {
                structural::apply(&mut new);
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
    fn resize_node(&self, rt: &ResourceType, ns: &str, name: &str, mode: Mode) -> Option<ResizeNode> {
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

    fn ensure_namespace(&self, rt: &ResourceType, ns: &str) -> ApiResult<()> {
        if rt.namespaced && self.store().get(&rt_namespaces().key(), "", ns).is_none() {
            return Err(ApiError::namespace_not_found(ns));
        }
        Ok(())
    }

    // ---------- delete ----------

    fn delete(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        let opts = DeleteOpts::parse(req)?;
        let written = self.delete_one(req.rt, ns, name, &opts)?;
        if req.rt.resource == "namespaces" && !opts.dry && matches!(written, Written::Deleted(_)) {
            self.purge_namespace(name);
        }
        Ok(delete_response(req.rt, &written))
    }

    fn delete_one(
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

    fn purge_namespace(&self, ns: &str) {
        for rt in resources::RESOURCES.iter().filter(|r| r.namespaced) {
            let (items, _) = self.store().list(&rt.key(), Some(ns), |_| true);
            for o in items {
                let _ = self
                    .store()
                    .write::<()>(&rt.key(), ns, &o.index.name, |_, _| Ok(Write::Delete));
            }
        }
    }

    fn delete_collection(&self, req: &ApiRequest, ns: &str) -> ApiResult<Response> {
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

    // ---------- scale ----------

    fn scale_get(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        self.counters().reads += 1;
        let obj = self
            .store()
            .get(&req.rt.key(), ns, name)
            .ok_or_else(|| ApiError::not_found(req.rt, name))?;
        Ok(value_response(StatusCode::OK, &scale_of(&obj.value())))
    }

    fn scale_put(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        let view = req.rt;
        let rt = storage_rt(view);
        let body = patch::parse_body(&req.body, true)?;
        let written = self.write_or_preview(req.dry_run(), &rt.key(), ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(rt, name));
            };
            let old = cur.value();
            check_rv(rt, name, &body, &old)?;
            let replicas = scale_replicas(name, &body)?;
            let mut new = old.clone();
            set_replicas(&mut new, replicas);
            self.finish_update(Target { rt, view, ns, name }, Mode::Main, new, &old, None)
        })?;
        let obj = written.object().map(Object::value).unwrap_or(Value::Null);
        Ok(value_response(StatusCode::OK, &scale_of(&obj)))
    }

    fn scale_patch(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        let view = req.rt;
        let rt = storage_rt(view);
        let kind = PatchKind::from_content_type(req.content_type())
            .ok_or_else(|| ApiError::unsupported_media(&patch::accepted(rt.smp)))?;
        if kind == PatchKind::Strategic && !rt.smp {
            return Err(ApiError::unsupported_media(&patch::accepted(false)));
        }
        let written = self.write_or_preview(req.dry_run(), &rt.key(), ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(rt, name));
            };
            let old = cur.value();
            let mut scale = scale_of(&old);
            patch::apply(kind, &mut scale, &req.body)?;
            check_rv(rt, name, &scale, &old)?;
            let replicas = scale_replicas(name, &scale)?;
            let mut new = old.clone();
            set_replicas(&mut new, replicas);
            self.finish_update(Target { rt, view, ns, name }, Mode::Main, new, &old, None)
        })?;
        let obj = written.object().map(Object::value).unwrap_or(Value::Null);
        Ok(value_response(StatusCode::OK, &scale_of(&obj)))
    }

    // ---------- binding ----------

    fn bind(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
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
                    super::errors::aggregate(&errs)
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

fn add_finalizer(list: &mut Vec<Value>, f: &str) {
    if !list.iter().any(|v| v == f) {
        list.push(json!(f));
    }
}

/// `podStrategy.CheckGracefulDelete`.
fn pod_grace(pod: &Value, requested: Option<i64>) -> i64 {
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
fn kind_conflict(rt: &ResourceType, name: &str, why: &str) -> ApiError {
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

fn binding_conflict(name: &str, why: &str) -> ApiError {
    ApiError {
        code: 409,
        reason: "Conflict",
        message: format!("Operation cannot be fulfilled on pods/binding \"{name}\": {why}"),
        details: Some(json!({"name": name, "kind": "pods/binding"})),
    }
}

fn set_condition(obj: &mut Value, cond: Value) {
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

fn check_rv(rt: &ResourceType, name: &str, new: &Value, old: &Value) -> ApiResult<()> {
    let want = meta_str(new, "resourceVersion");
    if !want.is_empty() && want != meta_str(old, "resourceVersion") {
        return Err(ApiError::conflict(rt, name));
    }
    Ok(())
}

fn parse_cloneset(rt: &ResourceType, name: &str, v: &Value) -> ApiResult<insitu_api::CloneSet> {
    serde_json::from_value(v.clone()).map_err(|e| ApiError::invalid_msg(rt, name, &format!("body: {e}")))
}

fn crd_status(obj: &mut Value, now: &str) {
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

/// The autoscaling/v1 Scale view of a CloneSet.
fn scale_of(obj: &Value) -> Value {
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

fn scale_replicas(name: &str, scale: &Value) -> ApiResult<i64> {
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

fn set_replicas(obj: &mut Value, replicas: i64) {
    if let Some(o) = obj.as_object_mut() {
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.insert("replicas".into(), json!(replicas));
        }
    }
}

/// The resource whose storage backs `rt` (events.k8s.io Events live in core/v1 form, CloneSets in v1beta1).
fn storage_rt(rt: &'static ResourceType) -> &'static ResourceType {
    if rt.is_new_events() {
        return resources::find("", "v1", "events").unwrap_or(rt);
    }
    if rt.is_cloneset() {
        return resources::find(rt.group, CLONESET_STORAGE_VERSION, rt.resource).unwrap_or(rt);
    }
    rt
}

/// The CloneSet storage version (Kruise master's).
const CLONESET_STORAGE_VERSION: &str = "v1beta1";

/// A CloneSet converted to `api_version` with `insitu_api::conversion` (the functions the webhook serves).
/// Conversion only fails on an apiVersion that is not a CloneSet version, which the callers have ruled out.
fn convert_cloneset(v: Value, api_version: &str) -> Value {
    if v.get("apiVersion").and_then(Value::as_str) == Some(api_version) {
        return v;
    }
    insitu_api::conversion::convert(&v, api_version).unwrap_or(v)
}

/// A request body converted to the stored form.
fn stored_form(rt: &ResourceType, mut v: Value) -> Value {
    if rt.is_new_events() {
        events::to_core(&v)
    } else if rt.is_cloneset() {
        // The body is read in the version it names if that is a CloneSet version, else in the URL's.
        let named = v.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        if named != insitu_api::conversion::V1ALPHA1
            && named != insitu_api::conversion::V1BETA1
            && let Some(o) = v.as_object_mut()
        {
            o.insert("apiVersion".into(), json!(rt.api_version()));
        }
        convert_cloneset(v, &format!("{}/{CLONESET_STORAGE_VERSION}", rt.group))
    } else {
        v
    }
}

/// A stored object as `rt`'s clients see it.
pub(super) fn present_value(rt: &ResourceType, v: Value) -> Value {
    if rt.is_new_events() {
        events::to_new(&v)
    } else if rt.is_cloneset() {
        convert_cloneset(v, &rt.api_version())
    } else {
        v
    }
}

/// Stored bytes as `rt`'s clients see them (no copy for the common case).
pub(super) fn present(rt: &ResourceType, o: &Object) -> bytes::Bytes {
    if rt.is_new_events() {
        bytes::Bytes::from(serde_json::to_vec(&events::to_new(&o.value())).unwrap_or_default())
    } else if rt.is_cloneset() && rt.version != CLONESET_STORAGE_VERSION {
        bytes::Bytes::from(serde_json::to_vec(&present_value(rt, o.value())).unwrap_or_default())
    } else {
        o.bytes.clone()
    }
}

/// CloneSet admission in the request's version, as the CRD handler does: the version's structural schema
/// (pruning, defaults) and validation run on the object as the client sent it; the result is stored in v1beta1
/// (with v1beta1's defaults, which a real apiserver applies when it reads the object back).
fn admit_cloneset(view: &ResourceType, name: &str, obj: Value, old: Option<&Value>) -> ApiResult<Value> {
    let mut v = present_value(view, obj);
    metadata_validation::cloneset_meta_types(view, &v)?;
    structural::apply(&mut v);
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
    let mut stored = stored_form(view, v);
    structural::apply(&mut stored);
    Ok(stored)
}

fn parse_as<T: serde::de::DeserializeOwned>(rt: &ResourceType, name: &str, v: &Value) -> ApiResult<T> {
    serde_json::from_value(v.clone()).map_err(|e| ApiError::invalid_msg(rt, name, &format!("body: {e}")))
}

fn written_response(rt: &ResourceType, code: StatusCode, w: &Written) -> ApiResult<Response> {
    match w.object() {
        Some(o) => Ok(json_response(code, present(rt, o))),
        None => Err(ApiError::internal("write produced no object")),
    }
}

fn delete_response(rt: &ResourceType, w: &Written) -> Response {
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
struct DeleteOpts {
    /// `dryRun=All` in the query or `"dryRun": ["All"]` in the body.
    dry: bool,
    grace: Option<i64>,
    propagation: Option<String>,
    uid: Option<String>,
    rv: Option<String>,
}

impl DeleteOpts {
    fn parse(req: &ApiRequest) -> ApiResult<Self> {
        let body: Value = if req.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
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
