//! A request as the handlers see it: the URL resolved to a resource, namespace, name and subresource, and the
//! query decoded.

use std::collections::HashMap;

use axum::http::{HeaderMap, Method, header};
use bytes::Bytes;

use super::resources::{self, ResourceType};

/// A parsed API request.
pub(crate) struct ApiRequest {
    pub method: Method,
    pub rt: &'static ResourceType,
    /// Namespace from the URL (None: cluster-scoped resource, or a cluster-wide list).
    pub ns: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
    pub query: HashMap<String, String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Legacy `/watch/` path prefix.
    pub watch_path: bool,
}

impl ApiRequest {
    pub fn q(&self, key: &str) -> Option<&str> {
        self.query.get(key).map(String::as_str)
    }

    /// `dryRun=All` (validated by `route_request` before any write runs).
    pub fn dry_run(&self) -> bool {
        self.q("dryRun").is_some_and(|v| v.split(',').any(|x| x == "All"))
    }

    /// `timeoutSeconds` as the parameter codec decodes it into `*int64` (`Convert_Slice_string_To_Pointer_int64`):
    /// absent or empty is `None`; anything `strconv.ParseInt` refuses is a 400 with its message.
    pub fn timeout_seconds(&self) -> Result<Option<i64>, super::ApiError> {
        let Some(raw) = self.q("timeoutSeconds").filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        raw.parse::<i64>().map(Some).map_err(|e| {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    "value out of range"
                }
                _ => "invalid syntax",
            };
            super::ApiError::bad_request(format!(
                "strconv.ParseInt: parsing {}: {why}",
                super::errors::quote(raw)
            ))
        })
    }

    pub fn flag(&self, key: &str) -> bool {
        matches!(self.q(key), Some("true" | "1" | "True"))
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn wants_table(&self) -> bool {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| {
                a.split(',')
                    .next()
                    .is_some_and(|first| first.contains("as=Table"))
            })
    }
}

pub(super) fn parse_query(uri: &axum::http::Uri) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let Some(q) = uri.query() else { return out };
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(percent_decode(k), percent_decode(v));
    }
    out
}

pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

type Route<'a> = (&'a str, &'a str, Vec<&'a str>, bool);

/// `/api/v1/...` or `/apis/<g>/<v>/...` → (group, version, rest, legacy-watch-prefix).
pub(super) fn route<'a>(seg: &[&'a str]) -> Option<Route<'a>> {
    let (group, version, rest) = match seg {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (rest, watch) = match rest {
        ["watch", r @ ..] => (r, true),
        r => (r, false),
    };
    if rest.is_empty() {
        return None;
    }
    Some((group, version, rest.to_vec(), watch))
}

type Resolved = (
    &'static ResourceType,
    Option<String>,
    Option<String>,
    Option<String>,
);

pub(super) fn resolve(group: &str, version: &str, rest: &[&str]) -> Option<Resolved> {
    let owned = |s: &&str| s.to_string();
    match rest {
        ["namespaces", ns, resource, tail @ ..]
            if !(group.is_empty() && tail.is_empty() && matches!(*resource, "status" | "finalize")) =>
        {
            let rt = resources::find(group, version, resource)?;
            if !rt.namespaced || tail.len() > 2 {
                return None;
            }
            Some((
                rt,
                Some(ns.to_string()),
                tail.first().map(owned),
                tail.get(1).map(owned),
            ))
        }
        [resource, tail @ ..] => {
            let rt = resources::find(group, version, resource)?;
            if tail.len() > 2 || (rt.namespaced && !tail.is_empty()) {
                return None;
            }
            Some((rt, None, tail.first().map(owned), tail.get(1).map(owned)))
        }
        [] => None,
    }
}

/// A JSON body with invalid UTF-8 as Go's decoder reads it: each invalid byte becomes U+FFFD (encoding/json
/// `unquote`, which kube-apiserver's decoders share), where serde_json would refuse the document. Other bodies
/// (protobuf, CBOR, YAML) are returned as they are.
pub(super) fn go_utf8(body: Bytes, content_type: &str) -> Bytes {
    let ct = content_type.trim_start().to_ascii_lowercase();
    let json =
        ct.is_empty() || (ct.starts_with("application/") && ct.contains("json") && !ct.contains("yaml"));
    if !json || std::str::from_utf8(&body).is_ok() {
        return body;
    }
    let mut out = String::with_capacity(body.len() + 16);
    for chunk in body.utf8_chunks() {
        out.push_str(chunk.valid());
        for _ in chunk.invalid() {
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_becomes_a_replacement_per_byte() {
        let body = Bytes::from_static(b"{\"a\":\"x\xff\xe2\x82y\"}");
        let got = go_utf8(body.clone(), "application/json");
        assert_eq!(&got[..], "{\"a\":\"x\u{fffd}\u{fffd}\u{fffd}y\"}".as_bytes());
        assert_eq!(go_utf8(body.clone(), "application/vnd.kubernetes.protobuf"), body);
        let valid = Bytes::from_static("{\"a\":\"é\"}".as_bytes());
        assert_eq!(go_utf8(valid.clone(), "application/merge-patch+json"), valid);
    }
}
