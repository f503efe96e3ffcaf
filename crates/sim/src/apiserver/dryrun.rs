//! `dryRun=All` on every write verb: the write closure (validation, admission, defaulting) runs under the
//! store lock as for a real write, then the decision is discarded instead of committed, as kube-apiserver's
//! `DryRunnableStorage` does: nothing stored, no watch event, no resourceVersion bump, the would-be object
//! returned.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use super::errors::{ApiError, ApiResult, quote};
use super::{ApiRequest, ApiServer};
use crate::store::{ObjIndex, Object, Write, Written};

/// The request's `dryRun` option: `Ok(true)` for `All`, `Ok(false)` when absent; anything else is the 422
/// `ValidateDryRun` answers (`<Verb>Options.meta.k8s.io "" is invalid: dryRun: Unsupported value: ...`).
pub(super) fn requested(req: &ApiRequest, options_kind: &str) -> ApiResult<bool> {
    let values: Vec<&str> = req
        .q("dryRun")
        .map(|v| v.split(',').filter(|v| !v.is_empty()).collect())
        .unwrap_or_default();
    if values.is_empty() {
        return Ok(false);
    }
    if values.iter().all(|v| *v == "All") {
        return Ok(true);
    }
    let shown: Vec<String> = values.iter().map(|v| quote(v)).collect();
    let message = format!(
        "dryRun: Unsupported value: [{}]: supported values: \"All\"",
        shown.join(",")
    );
    Err(options_invalid(
        options_kind,
        "dryRun",
        "FieldValueNotSupported",
        &message,
    ))
}

/// The 422 for an invalid `CreateOptions`/`UpdateOptions`/`PatchOptions`/`DeleteOptions` field.
pub(super) fn options_invalid(
    options_kind: &str,
    field: &str,
    reason: &'static str,
    message: &str,
) -> ApiError {
    let detail = message
        .strip_prefix(&format!("{field}: "))
        .unwrap_or(message)
        .to_string();
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("{options_kind}.meta.k8s.io \"\" is invalid: {message}"),
        details: Some(json!({
            "group": "meta.k8s.io",
            "kind": options_kind,
            "causes": [{"reason": reason, "message": detail, "field": field}],
        })),
    }
}

/// Which options kind a write method validates (for the messages above).
pub(super) fn options_kind(method: &axum::http::Method) -> &'static str {
    match *method {
        axum::http::Method::POST => "CreateOptions",
        axum::http::Method::PUT => "UpdateOptions",
        axum::http::Method::PATCH => "PatchOptions",
        _ => "DeleteOptions",
    }
}

/// The closure's verdict smuggled out of [`crate::store::Store::write`] so that nothing is committed.
enum Verdict {
    Refused(ApiError),
    Decided(Option<Object>, Write),
}

impl From<crate::store::QuotaExceeded> for Verdict {
    fn from(e: crate::store::QuotaExceeded) -> Self {
        Verdict::Refused(e.into())
    }
}

impl ApiServer {
    /// [`crate::store::Store::write`], or (for `dry`) the same closure run on the current object with the
    /// decision returned as what the write would have done.
    pub(super) fn write_or_preview(
        &self,
        dry: bool,
        key: &str,
        ns: &str,
        name: &str,
        f: impl FnOnce(Option<&Object>, u64) -> ApiResult<Write>,
    ) -> ApiResult<Written> {
        if !dry {
            return self.store().write(key, ns, name, f);
        }
        let res = self.store().write(key, ns, name, |cur, rv| match f(cur, rv) {
            Ok(w) => Err(Verdict::Decided(cur.cloned(), w)),
            Err(e) => Err(Verdict::Refused(e)),
        });
        match res {
            Ok(_) => Err(ApiError::internal("dry run committed a write")),
            Err(Verdict::Refused(e)) => Err(e),
            Err(Verdict::Decided(cur, w)) => Ok(preview(cur, w, ns, name)),
        }
    }
}

/// What a write would have produced. Updates keep the current resourceVersion (the real dry-run update returns
/// the object as `tryUpdate` left it); creates have none.
fn preview(cur: Option<Object>, w: Write, ns: &str, name: &str) -> Written {
    let rv = cur.as_ref().map(|c| c.index.rv).unwrap_or(0);
    match w {
        Write::Keep => Written::Unchanged(cur),
        Write::Delete => match cur {
            Some(c) => Written::Deleted(c),
            None => Written::Unchanged(None),
        },
        Write::DeleteAs(v) => match cur {
            Some(_) => Written::Deleted(object(&v, ns, name, rv)),
            None => Written::Unchanged(None),
        },
        Write::Put(mut v) => match cur {
            Some(c) => {
                if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("resourceVersion".into(), json!(c.index.rv.to_string()));
                }
                Written::Updated(object(&v, ns, name, rv))
            }
            None => Written::Created(object(&v, ns, name, 0)),
        },
    }
}

fn object(v: &Value, ns: &str, name: &str, rv: u64) -> Object {
    Object::new(
        Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
        Arc::new(ObjIndex {
            namespace: ns.to_string(),
            name: name.to_string(),
            rv,
            ..ObjIndex::default()
        }),
    )
}
