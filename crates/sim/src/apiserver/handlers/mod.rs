//! REST verbs (get, list, create, update, patch, delete) and the status, scale, binding and resize subresources:
//! routing and the helpers the verbs share.

mod create;
mod delete;
mod read;
mod storage;
mod subresources;
mod update;

pub(super) use storage::{present, present_value};

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::dryrun;
use super::duplicates;
use super::errors::{ApiError, ApiResult};
use super::fieldvalidation::FieldCheck;
use super::patch;
use super::pod_streams;
use super::protobuf;
use super::resources::{self, ResourceType};
use super::{ApiRequest, ApiServer, json_response};
use crate::store::Written;

/// The object a write addresses.
#[derive(Clone, Copy)]
struct Target<'a> {
    /// The stored resource.
    rt: &'static ResourceType,
    /// The resource (version) the request named, which admission runs in.
    view: &'static ResourceType,
    ns: &'a str,
    name: &'a str,
    /// The write's field check, which also collects admission's warnings (`None`: a write with no client).
    fv: Option<&'a FieldCheck>,
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
    // Both are entries of the static table (a test in resources.rs checks it), so no request can miss them.
    resources::find("", "v1", "namespaces").expect("namespaces are in RESOURCES")
}

pub(super) fn rt_crds() -> &'static ResourceType {
    resources::find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .expect("customresourcedefinitions are in RESOURCES")
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

/// The request's object: the body the field check's duplicate scan already parsed, else [`parse_object`]. A
/// built-in kind's JSON body with repeated keys is read as its typed decoder reads it
/// ([`duplicates::parse_typed`]: the repeated values merge), a custom resource's keeps the last value.
fn request_object(req: &ApiRequest, fv: &FieldCheck) -> ApiResult<Value> {
    let typed = !req.rt.is_kruise_workload() && !req.rt.is_image_pull_job();
    let scanned = fv.take_body();
    let json = req
        .content_type()
        .to_ascii_lowercase()
        .starts_with("application/json");
    // Repeated keys were found, or not looked for (`fieldValidation=Ignore`: no scan parsed the body).
    if typed
        && json
        && (fv.repeats_fields() || scanned.is_none())
        && let Ok(v) = duplicates::parse_typed(&req.body)
        && v.is_object()
    {
        return Ok(v);
    }
    match scanned {
        Some(v) if v.is_object() => Ok(v),
        _ => parse_object(req),
    }
}

fn parse_object(req: &ApiRequest) -> ApiResult<Value> {
    let ct = req.content_type().to_ascii_lowercase();
    if protobuf::is_protobuf(&ct) {
        return protobuf::decode(&req.body);
    }
    if ct.starts_with("application/cbor") {
        // client-go retries a 415 for a CBOR body with JSON.
        return Err(ApiError::unsupported_media(&[
            "application/json",
            "application/yaml",
        ]));
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
        if !req
            .sub
            .as_deref()
            .is_some_and(|s| pod_streams::handles(rt.is_pod(), s))
        {
            protobuf::check_accept(&req.headers)?;
        }
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
                    Ok(self.field_checked(&fv, self.create(req, &ns, &fv)))
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
                    Ok(self.field_checked(&fv, self.update(req, &ns, &name, Mode::Main, &fv)))
                }
                Method::PATCH => {
                    let fv = FieldCheck::from_request(req)?;
                    Ok(self.field_checked(&fv, self.patch(req, &ns, &name, Mode::Main, &fv)))
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
                        Ok(self.field_checked(&fv, self.update(req, &ns, &name, mode, &fv)))
                    }
                    Method::PATCH => {
                        let fv = FieldCheck::from_request(req)?;
                        Ok(self.field_checked(&fv, self.patch(req, &ns, &name, mode, &fv)))
                    }
                    _ => Err(ApiError::method_not_allowed()),
                }
            }
        }
    }
}

impl ApiServer {
    /// A field-checked write's response: its `Warning` headers, and the unknown fields it lost counted in
    /// [`crate::apiserver::ApiStats::pruned`]. A refused write keeps the warnings collected before the refusal
    /// (kube-apiserver writes each warning's header as it is recorded, e.g. a webhook's, then the error).
    fn field_checked(&self, fv: &FieldCheck, resp: ApiResult<Response>) -> Response {
        match resp {
            Ok(resp) => {
                self.count_pruned(fv.pruned());
                fv.finish(resp)
            }
            Err(e) => fv.finish(axum::response::IntoResponse::into_response(e)),
        }
    }
}

fn check_rv(rt: &ResourceType, name: &str, new: &Value, old: &Value) -> ApiResult<()> {
    let want = meta_str(new, "resourceVersion");
    if !want.is_empty() && want != meta_str(old, "resourceVersion") {
        return Err(ApiError::conflict(rt, name));
    }
    Ok(())
}

fn written_response(rt: &ResourceType, code: StatusCode, w: &Written) -> ApiResult<Response> {
    match w.object() {
        Some(o) => Ok(json_response(code, present(rt, o))),
        None => Err(ApiError::internal("write produced no object")),
    }
}
