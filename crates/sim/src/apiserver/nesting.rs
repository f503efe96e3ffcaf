//! Request bodies nested deeper than Kubernetes' decoders allow, refused with kube-apiserver's messages; and
//! which requests run on a deep stack ([`crate::deep`]) because their body or a stored object nests deeply.

use axum::http::Method;

use super::errors::ApiError;
use super::patch::{INVALID_PATCH, PatchKind};
use super::{ApiRequest, ApiServer};
use crate::deep::{self, MAX_DEPTH};

/// Where a request is handled.
pub(super) enum Handling {
    /// On the worker that received it.
    Inline,
    /// On a deep stack ([`deep::run`]).
    Deep,
    /// Refused: its body nests past [`MAX_DEPTH`].
    Refused(ApiError),
}

/// How `req` is handled: a JSON body nesting past [`MAX_DEPTH`] is refused; a body past [`deep::SHALLOW`], a
/// JSON patch (its paths can build depth the body does not have), or a resource holding a deep object is
/// handled on a deep stack.
pub(super) fn handling(server: &ApiServer, req: &ApiRequest) -> Handling {
    let ct = req.content_type().to_ascii_lowercase();
    let patch = PatchKind::from_content_type(&ct);
    let json = match patch {
        // Apply bodies are YAML or JSON; a JSON one is YAML flow style, nested as JSON.
        Some(PatchKind::Apply) => req.body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{'),
        Some(_) => true,
        None => ct.is_empty() || ct.starts_with("application/json"),
    };
    let written = matches!(req.method, Method::POST | Method::PUT | Method::PATCH);
    let (depth, past) = if written && json {
        deep::scan(&req.body)
    } else {
        (0, None)
    };
    if let Some(bracket) = past {
        return Handling::Refused(too_deep(req, patch, bracket));
    }
    let json_patch = req.method == Method::PATCH && patch == Some(PatchKind::Json);
    if depth > deep::SHALLOW || json_patch || server.store().holds_deep(&req.rt.key()) {
        Handling::Deep
    } else {
        Handling::Inline
    }
}

/// kube-apiserver's answer to a body nesting past [`MAX_DEPTH`] (`bracket`: the one that went past). A create
/// or update body fails in the serializer's `Interpret` (apimachinery runtime/serializer/json/meta.go), reported
/// by `transformDecodeError` (apiserver endpoints/handlers/rest.go); a patch fails `validateAndTranscodePatch`
/// (endpoints/handlers/patch.go): `json.Valid` for JSON patch formats, yaml's depth limit for apply.
fn too_deep(req: &ApiRequest, patch: Option<PatchKind>, bracket: u8) -> ApiError {
    if req.method != Method::PATCH {
        let kind = match req.sub.as_deref() {
            Some("scale") => "Scale",
            Some("binding") => "Binding",
            _ => req.rt.kind,
        };
        return ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse \
             error: {} ({})",
            deep::exceeded(bracket),
            summarize(&req.body)
        ));
    }
    ApiError::bad_request(match patch {
        Some(PatchKind::Apply) => {
            format!(
                "error decoding patch: error converting YAML to JSON: yaml: exceeded max depth of {MAX_DEPTH}"
            )
        }
        _ => INVALID_PATCH.to_string(),
    })
}

/// `summarizeData(body, 30)` (endpoints/handlers/rest.go): an object's first 30 bytes, anything else's in hex.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let head = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".to_string(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarizes_as_kube() {
        assert_eq!(summarize(b""), "<empty>");
        assert_eq!(summarize(b"{\"a\":1}"), "{\"a\":1}");
        assert_eq!(
            summarize(br#"{"apiVersion":"v1","kind":"Pod","metadata":{}}"#),
            r#"{"apiVersion":"v1","kind":"Pod ..."#
        );
        assert_eq!(summarize(b"[[1]]"), "5b5b315d5d");
    }
}
