//! A list request's paging (`limit`, `continue`) and its continue tokens, as kube-apiserver reads and writes
//! them.
//!
//! The token is kube-apiserver's: unpadded URL-safe base64 of `{"v":"meta.k8s.io/v1","rv":N,"start":K}`,
//! `K` the key to resume at; `"rv":-1` continues at the latest state. kube-apiserver ignores `limit` when
//! `resourceVersion=0` (the watch cache then serves the whole list: client-go informers list that way) and
//! refuses `resourceVersion` (other than 0) next to `continue`. An exact list (`resourceVersionMatch=Exact`,
//! or the legacy form: a resourceVersion with a limit) reads the state at that version: a
//! kept snapshot, or the live state if the resource has not changed since; otherwise `410 Expired`, which
//! kube-apiserver answers once etcd has compacted the version (the sim keeps no older states).

use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::errors::{ApiError, ApiResult, FieldErr, quote};
use super::{ApiRequest, value_response};
use crate::store::{Cursor, Page};

const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// What a list request asks of paging.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Paging {
    /// Objects per page; 0: all.
    pub limit: usize,
    /// The page a `continue` token names, or the state an exact-resourceVersion list reads.
    pub from: Option<Cursor>,
    /// An exact-resourceVersion list (not a continuation): its expiry is "too old", not a new token.
    pub exact: bool,
    /// The resourceVersion the list must not be older than (exact or not), if one was given.
    pub min_rv: Option<u64>,
}

/// `ValidateListOptions` of apimachinery: `resourceVersionMatch` needs a `resourceVersion`, excludes
/// `continue`, is `Exact` or `NotOlderThan`, and `Exact` is never at resourceVersion 0.
fn validate(rv: &str, rvm: &str, has_continue: bool) -> ApiResult<()> {
    if rvm.is_empty() {
        return Ok(());
    }
    let field = "resourceVersionMatch";
    let mut errs = Vec::new();
    if rv.is_empty() {
        errs.push(FieldErr::forbidden(
            field,
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    if has_continue {
        errs.push(FieldErr::forbidden(
            field,
            "resourceVersionMatch is forbidden when continue is provided",
        ));
    }
    if rvm != "Exact" && rvm != "NotOlderThan" {
        errs.push(FieldErr::not_supported(
            field,
            &quote(rvm),
            &["Exact", "NotOlderThan", ""],
        ));
    }
    if rvm == "Exact" && rv == "0" {
        errs.push(FieldErr::forbidden(
            field,
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_options("meta.k8s.io", "ListOptions", &errs))
    }
}

/// Reads `limit`, `continue`, `resourceVersion` and `resourceVersionMatch` of a list request.
pub fn parse(req: &ApiRequest) -> ApiResult<Paging> {
    let rv = req.q("resourceVersion").unwrap_or("");
    let rvm = req.q("resourceVersionMatch").unwrap_or("");
    let token = req.q("continue").filter(|s| !s.is_empty());
    validate(rv, rvm, token.is_some())?;
    let limit = match req.q("limit").filter(|s| !s.is_empty()) {
        None => 0,
        Some(s) => s
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("strconv.ParseInt: parsing {s:?}: invalid syntax")))?,
    };
    // kube-apiserver's cacher: "the limit is ignored for requests that set RV == 0".
    let limit = if rv == "0" {
        0
    } else {
        usize::try_from(limit).unwrap_or(0)
    };
    if let Some(token) = token {
        let cursor =
            decode(token).map_err(|e| ApiError::bad_request(format!("invalid continue token: {e}")))?;
        if !rv.is_empty() && rv != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        return Ok(Paging {
            limit,
            from: Some(cursor),
            ..Paging::default()
        });
    }
    let min_rv = match rv {
        "" | "0" => None,
        rv => Some(rv.parse::<u64>().map_err(|e| {
            let why = if e.to_string().contains("too large") {
                "value out of range"
            } else {
                "invalid syntax"
            };
            ApiError::bad_request(format!(
                "invalid resource version: resourceVersion: Invalid value: {q}: strconv.ParseUint: parsing {q}: {why}",
                q = quote(rv)
            ))
        })?),
    };
    // An exact read: `resourceVersionMatch=Exact`, or (legacy) a resourceVersion other than 0 with a limit.
    // Any other resourceVersion is "not older than", which the latest state always is.
    let exact = rvm == "Exact" || (rvm.is_empty() && limit > 0 && min_rv.is_some());
    Ok(Paging {
        limit,
        from: min_rv.filter(|_| exact).map(|n| Cursor {
            rv: Some(n),
            start: String::new(),
        }),
        exact,
        min_rv,
    })
}

/// kube-apiserver's answer to a list at a resourceVersion it has not reached (after waiting 3 s for its
/// watch cache to catch up, which the sim's store never needs to).
pub fn too_large(rv: u64, current: u64) -> ApiError {
    let mut e = ApiError::new(
        504,
        "Timeout",
        format!("Timeout: Too large resource version: {rv}, current: {current}"),
    );
    e.details = Some(json!({
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }));
    e
}

/// The continue token resuming at `cursor`.
pub fn encode(cursor: &Cursor) -> String {
    let rv = cursor.rv.map_or(-1, |rv| i64::try_from(rv).unwrap_or(i64::MAX));
    // Field order and escapes as Go's encoding/json writes kube-apiserver's `continueToken`.
    let start = Value::String(cursor.start.clone());
    let token = format!(r#"{{"v":"{TOKEN_VERSION}","rv":{rv},"start":{start}}}"#);
    URL_SAFE_NO_PAD.encode(token)
}

/// Decodes a continue token, with kube-apiserver's error texts.
pub fn decode(token: &str) -> Result<Cursor, String> {
    const INVALID: &str = "continue key is not valid";
    let bytes = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| format!("{INVALID}: {e}"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| format!("{INVALID}: {e}"))?;
    let version = v.get("v").and_then(Value::as_str).unwrap_or("");
    if version != TOKEN_VERSION {
        return Err(format!(
            "{INVALID}: server does not recognize this encoded version {version}"
        ));
    }
    let rv = v.get("rv").and_then(Value::as_i64).unwrap_or(0);
    if rv == 0 {
        return Err(format!(
            "{INVALID}: incorrect encoded start resourceVersion (version {TOKEN_VERSION})"
        ));
    }
    let start = v.get("start").and_then(Value::as_str).unwrap_or("");
    if start.is_empty() {
        return Err(format!(
            "{INVALID}: encoded start key empty (version {TOKEN_VERSION})"
        ));
    }
    // kube-apiserver refuses a key that path cleaning would change (it could range above the list's prefix).
    let key = start.strip_prefix('/').unwrap_or(start);
    if key
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == "..")
    {
        return Err(format!("{INVALID}: {start}"));
    }
    Ok(Cursor {
        rv: u64::try_from(rv).ok(),
        start: key.to_string(),
    })
}

/// A list's `metadata`: its resourceVersion and, while objects remain, the continue token and (for a list
/// without selectors, whose count kube-apiserver knows) how many remain.
pub fn list_meta(page: &Page, selectors: bool) -> Value {
    let mut meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some(next) = &page.next {
        meta["continue"] = Value::String(encode(next));
        if !selectors {
            meta["remainingItemCount"] = json!(page.remaining);
        }
    }
    meta
}

/// kube-apiserver's `410 Expired` for an exact-resourceVersion list whose state is gone (etcd compacted it).
pub fn too_old() -> ApiError {
    ApiError::new(
        410,
        "Expired",
        "The resourceVersion for the provided list is too old.",
    )
}

/// kube-apiserver's `410 Expired` for a continue token whose state is gone: the Status carries a token
/// continuing at the latest state (`"rv":-1`), which the client may use to finish an inconsistent list.
pub fn expired(start: String) -> Response {
    let token = encode(&Cursor { rv: None, start });
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {"continue": token},
        "status": "Failure",
        "message": "The provided continue parameter is too old to display a consistent list result. You can \
                    start a new list without the continue parameter, or use the continue token in this \
                    response to retrieve the remainder of the results. Continuing with the provided token \
                    results in an inconsistent list - objects that were created, modified, or deleted \
                    between the time the first chunk was returned and now may show up in the list.",
        "reason": "Expired",
        "code": 410,
    });
    value_response(StatusCode::GONE, &status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_read_as_kube_apiservers() {
        let c = Cursor {
            rv: Some(42),
            start: "default/web-1\0".into(),
        };
        let t = encode(&c);
        let raw = URL_SAFE_NO_PAD.decode(&t).expect("base64");
        assert_eq!(
            String::from_utf8_lossy(&raw),
            r#"{"v":"meta.k8s.io/v1","rv":42,"start":"default/web-1\u0000"}"#
        );
        let v: Value = serde_json::from_slice(&raw).expect("json");
        assert_eq!(
            v,
            json!({"v": "meta.k8s.io/v1", "rv": 42, "start": "default/web-1\u{0}"})
        );
        assert_eq!(decode(&t), Ok(c));
        let latest = Cursor {
            rv: None,
            start: "a\0".into(),
        };
        assert!(encode(&latest).len() > 4);
        assert_eq!(decode(&encode(&latest)), Ok(latest));
    }

    #[test]
    fn bad_tokens_are_named() {
        let enc = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        assert!(
            decode("%%")
                .unwrap_err()
                .starts_with("continue key is not valid: ")
        );
        let e = decode(&enc(json!({"v": "meta.k8s.io/v2", "rv": 1, "start": "a"}))).unwrap_err();
        assert!(
            e.contains("server does not recognize this encoded version meta.k8s.io/v2"),
            "{e}"
        );
        let e = decode(&enc(json!({"v": "meta.k8s.io/v1", "rv": 0, "start": "a"}))).unwrap_err();
        assert!(e.contains("incorrect encoded start resourceVersion"), "{e}");
        let e = decode(&enc(json!({"v": "meta.k8s.io/v1", "rv": 3, "start": ""}))).unwrap_err();
        assert!(e.contains("encoded start key empty"), "{e}");
        let e = decode(&enc(
            json!({"v": "meta.k8s.io/v1", "rv": 3, "start": "../kube-system/x"}),
        ))
        .unwrap_err();
        assert!(e.ends_with(": ../kube-system/x"), "{e}");
        // kube-apiserver's own tokens may start with '/'.
        let c = decode(&enc(
            json!({"v": "meta.k8s.io/v1", "rv": 3, "start": "/web-1\u{0}"}),
        ));
        assert_eq!(c.map(|c| c.start), Ok("web-1\0".to_string()));
    }
}
