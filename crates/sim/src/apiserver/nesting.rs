//! Request bodies nested deeper than Kubernetes' decoders allow, refused with kube-apiserver's messages; and
//! which requests run on a deep stack ([`crate::deep`]) because their body or a stored object nests deeply.

use axum::http::Method;

use super::errors::ApiError;
use super::patch::PatchKind;
use super::{ApiRequest, ApiServer};
use crate::deep::{self, EXCEEDED, MAX_DEPTH};

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
    let depth = if written && json {
        deep::nesting(&req.body)
    } else {
        0
    };
    if depth > MAX_DEPTH {
        return Handling::Refused(too_deep(req, patch));
    }
    let json_patch = req.method == Method::PATCH && patch == Some(PatchKind::Json);
    if depth > deep::SHALLOW || json_patch || server.store().holds_deep(&req.rt.key()) {
        Handling::Deep
    } else {
        Handling::Inline
    }
}

/// kube-apiserver's answer to a body nesting past [`MAX_DEPTH`]. A create or update body fails in the
/// serializer's `Interpret` (apimachinery runtime/serializer/json/meta.go), reported by `transformDecodeError`
/// (apiserver endpoints/handlers/rest.go); a patch fails where `applyJSPatch`, `strategicPatchObject` or the
/// apply patcher first decodes it (endpoints/handlers/patch.go), which depends on the `fieldValidation` directive.
fn too_deep(req: &ApiRequest, patch: Option<PatchKind>) -> ApiError {
    if req.method != Method::PATCH {
        let kind = match req.sub.as_deref() {
            Some("scale") => "Scale",
            Some("binding") => "Binding",
            _ => req.rt.kind,
        };
        return ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse \
             error: {EXCEEDED} ({})",
            summarize(&req.body)
        ));
    }
    let ignore = req.q("fieldValidation") == Some("Ignore");
    ApiError::bad_request(match patch {
        Some(PatchKind::Json) if ignore => EXCEEDED.to_string(),
        Some(PatchKind::Merge) if ignore => "Invalid JSON Patch".to_string(),
        Some(PatchKind::Strategic) => EXCEEDED.to_string(),
        Some(PatchKind::Apply) => {
            format!("error decoding patch: error converting YAML to JSON: yaml: {EXCEEDED} of {MAX_DEPTH}")
        }
        _ => format!("error decoding patch: {EXCEEDED}"),
    })
}

/// Refuses a JSON patch's result nesting past [`MAX_DEPTH`] (its paths can add depth its body does not have), as
/// `jsonPatcher.applyPatchToCurrentObject` does when `runtime.DecodeInto` fails on it: 422 on `patch`.
pub(super) fn check_patched(obj: &serde_json::Value) -> Result<(), ApiError> {
    if deep::value_nesting(obj) > MAX_DEPTH {
        let why = format!("couldn't get version/kind; json parse error: {EXCEEDED}");
        return Err(super::fieldvalidation::patch_invalid(obj, &why));
    }
    Ok(())
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
