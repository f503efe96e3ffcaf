//! API errors rendered as metav1 `Status` bodies, with the real apiserver's reasons and messages.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::resources::ResourceType;

/// One field error, formatted like apimachinery's `field.Error`.
#[derive(Clone, Debug)]
pub struct FieldErr {
    pub field: String,
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueForbidden`, ...
    pub reason: &'static str,
    /// The full `field: Type: detail` text.
    pub message: String,
}

impl FieldErr {
    pub fn required(field: &str, detail: &str) -> Self {
        Self::build(field, "FieldValueRequired", "Required value".into(), detail)
    }
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self::build(field, "FieldValueForbidden", "Forbidden".into(), detail)
    }
    /// `value` is rendered as given (quote strings yourself with [`quote`]).
    pub fn invalid(field: &str, value: &str, detail: &str) -> Self {
        Self::build(
            field,
            "FieldValueInvalid",
            format!("Invalid value: {value}"),
            detail,
        )
    }
    pub fn duplicate(field: &str, value: &str) -> Self {
        Self::build(
            field,
            "FieldValueDuplicate",
            format!("Duplicate value: {value}"),
            "",
        )
    }
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
        Self::build(
            field,
            "FieldValueNotSupported",
            format!("Unsupported value: {value}"),
            &format!("supported values: {}", list.join(", ")),
        )
    }
    fn build(field: &str, reason: &'static str, body: String, detail: &str) -> Self {
        let mut message = format!("{field}: {body}");
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(detail);
        }
        Self {
            field: field.to_string(),
            reason,
            message,
        }
    }
}

/// Go's `%q`-ish quoting for values in messages.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// Joins field errors like `ErrorList.ToAggregate()`: one → itself, many → `[a, b]`.
pub fn aggregate(errs: &[FieldErr]) -> String {
    match errs {
        [one] => one.message.clone(),
        many => format!(
            "[{}]",
            many.iter()
                .map(|e| e.message.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The `details.causes[].reason` of an `insitu_api` error kind (apimachinery's `field.ErrorType`).
fn cause_reason(kind: &insitu_api::validation::ErrorKind) -> &'static str {
    use insitu_api::validation::ErrorKind as K;
    match kind {
        K::Invalid(_) => "FieldValueInvalid",
        K::Required => "FieldValueRequired",
        K::Forbidden => "FieldValueForbidden",
        K::NotSupported(_) => "FieldValueNotSupported",
        K::Duplicate(_) => "FieldValueDuplicate",
        K::NotFound(_) => "FieldValueNotFound",
    }
}

/// An error answer.
#[derive(Clone, Debug)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

pub type ApiResult<T> = Result<T, ApiError>;

/// `details.causes` of a 422: one per field error, its message without the field path.
fn causes(errs: &[FieldErr]) -> Value {
    errs.iter()
        .map(|e| {
            let message = e
                .message
                .strip_prefix(&format!("{}: ", e.field))
                .unwrap_or(&e.message);
            json!({"reason": e.reason, "message": message, "field": e.field})
        })
        .collect()
}

fn details(rt: &ResourceType, name: &str, kind: &str) -> Value {
    let mut d = json!({ "name": name, "kind": kind });
    if !rt.group.is_empty() {
        d["group"] = Value::String(rt.group.to_string());
    }
    d
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self {
            code: 404,
            reason: "NotFound",
            message: format!("{} \"{}\" not found", rt.qualified(), name),
            details: Some(details(rt, name, rt.resource)),
        }
    }

    /// `namespaces "x" not found` (creating into a missing namespace).
    pub fn namespace_not_found(ns: &str) -> Self {
        Self {
            code: 404,
            reason: "NotFound",
            message: format!("namespaces \"{ns}\" not found"),
            details: Some(json!({"name": ns, "kind": "namespaces"})),
        }
    }

    /// Unknown path or resource type.
    pub fn no_route() -> Self {
        Self {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: Some(json!({})),
        }
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{} \"{}\" already exists", rt.qualified(), name),
            details: Some(details(rt, name, rt.resource)),
        }
    }

    /// The optimistic-concurrency conflict.
    pub fn conflict(rt: &ResourceType, name: &str) -> Self {
        Self::conflict_msg(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn conflict_msg(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                rt.qualified(),
                name,
                why
            ),
            details: Some(details(rt, name, rt.resource)),
        }
    }

    /// 422 `<Kind> "<name>" is invalid: <aggregate>`.
    pub fn invalid(rt: &ResourceType, name: &str, errs: &[FieldErr]) -> Self {
        let mut d = details(rt, name, rt.kind);
        d["causes"] = causes(errs);
        Self {
            code: 422,
            reason: "Invalid",
            message: format!(
                "{} \"{}\" is invalid: {}",
                rt.qualified_kind(),
                name,
                aggregate(errs)
            ),
            details: Some(d),
        }
    }

    /// 422 for a request's options rather than an object (`ListOptions.meta.k8s.io "" is invalid: …`):
    /// apimachinery names no object, so `details` has no name.
    pub fn invalid_options(group: &str, kind: &str, errs: &[FieldErr]) -> Self {
        Self {
            code: 422,
            reason: "Invalid",
            message: format!("{kind}.{group} \"\" is invalid: {}", aggregate(errs)),
            details: Some(json!({"group": group, "kind": kind, "causes": causes(errs)})),
        }
    }

    /// 422 with one message and no field path (a body the CloneSet types cannot hold): one cause carries the
    /// message so that kubectl prints it.
    pub fn invalid_msg(rt: &ResourceType, name: &str, message: &str) -> Self {
        let mut d = details(rt, name, rt.kind);
        d["causes"] = json!([{"reason": "FieldValueInvalid", "message": message}]);
        Self {
            code: 422,
            reason: "Invalid",
            message: format!("{} \"{}\" is invalid: {}", rt.qualified_kind(), name, message),
            details: Some(d),
        }
    }

    /// 422 from `insitu_api` CloneSet validation errors, with one `details.causes` entry per error.
    pub fn invalid_cloneset(
        rt: &ResourceType,
        name: &str,
        errs: &[insitu_api::validation::FieldError],
    ) -> Self {
        let mut seen = std::collections::BTreeSet::new();
        let fields: Vec<FieldErr> = errs
            .iter()
            .filter(|e| seen.insert(e.to_string()))
            .map(|e| FieldErr {
                field: e.field.clone(),
                reason: cause_reason(&e.kind),
                message: e.to_string(),
            })
            .collect();
        Self::invalid(rt, name, &fields)
    }

    /// 403 `<resource> "<name>" is forbidden: <why>` (admission refusals).
    pub fn forbidden(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self {
            code: 403,
            reason: "Forbidden",
            message: format!("{} \"{}\" is forbidden: {}", rt.qualified(), name, why),
            details: Some(details(rt, name, rt.resource)),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn unsupported_media(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `410 Expired` Status (as a body or a watch `ERROR` event).
    pub fn expired(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// The metav1 Status JSON.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // `reason` is `omitempty` (StatusReasonUnknown is "").
        if self.reason.is_empty()
            && let Some(o) = s.as_object_mut()
        {
            o.remove("reason");
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// What kube-apiserver answers when etcd refuses a write over its quota: etcd's error is no storage error it
/// knows (storage/errors `InterpretCreateError`/`InterpretUpdateError` pass it on), so `ErrorToAPIStatus` makes
/// it a 500 with etcd's message and no reason (responsewriters/status.go).
impl From<crate::store::QuotaExceeded> for ApiError {
    fn from(_: crate::store::QuotaExceeded) -> Self {
        ApiError::new(500, "", "etcdserver: mvcc: database space exceeded")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.status()).unwrap_or_default();
        let mut resp = (
            code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        // kube-apiserver sends `details.retryAfterSeconds` with a `Retry-After` header (429 from max-in-flight,
        // 503 while shutting down or timing out).
        if let Some(secs) = self
            .details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64)
            && let Ok(v) = axum::http::HeaderValue::from_str(&secs.to_string())
        {
            resp.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
        }
        resp
    }
}
