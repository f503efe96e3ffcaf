//! Authentication of the HTTP front (`insitu up`): a bearer token required on every request (401 otherwise, as
//! kube-apiserver answers a missing or wrong credential) and a loopback `Host` header (a web page that rebinds
//! its DNS name to 127.0.0.1 sends its own name as Host, so it never reaches the API even before the token).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiServer;
use super::errors::ApiError;

/// Paths an unauthenticated client may read (RBAC's `system:public-info-viewer` on a real cluster).
const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

impl ApiServer {
    /// [`ApiServer::router`] behind the bearer-token and Host checks.
    pub fn router_with_token(&self, token: String) -> axum::Router {
        self.router()
            .layer(axum::middleware::from_fn_with_state(Arc::new(token), guard))
    }
}

async fn guard(State(token): State<Arc<String>>, req: Request, next: Next) -> Response {
    // Go's HTTP server refuses a request with two Host headers before any handler runs (net/http `readRequest`).
    if req.headers().get_all(header::HOST).iter().count() > 1 {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::CONNECTION, "close"),
            ],
            "400 Bad Request: too many Host headers",
        )
            .into_response();
    }
    if !loopback_host(req.headers()) {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        return ApiError::new(
            403,
            "Forbidden",
            format!(
                "Host {host:?} is not a loopback address: the embedded cluster only answers requests addressed to 127.0.0.1, ::1 or localhost"
            ),
        )
        .into_response();
    }
    let public = req.method() == axum::http::Method::GET && PUBLIC_PATHS.contains(&req.uri().path());
    let given = bearer_token(req.headers());
    if !public && !given.is_some_and(|g| token_matches(g, &token)) {
        let mut resp = ApiError::new(401, "Unauthorized", "Unauthorized").into_response();
        if given == Some("") {
            let mut warnings = super::warnings::Recorder::default();
            warnings.add(SPACE_BEFORE_TOKEN);
            warnings.write(resp.headers_mut());
        }
        return resp;
    }
    next.run(req).await
}

/// bearertoken.go's `invalidTokenWithSpaceWarning`.
const SPACE_BEFORE_TOKEN: &str =
    "the provided Authorization header contains extra space before the bearer token, and is ignored";

/// The token of an `Authorization` header as kube-apiserver's bearer-token authenticator reads it
/// (authentication/request/bearertoken/bearertoken.go): the header trimmed, split on single spaces into at most
/// three parts, the scheme `bearer` in any case, the token the second part (`Some("")` for `Bearer  x`, which
/// authenticates nobody and gets a warning); `None` without such a header.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = auth.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

/// `Host: 127.0.0.1:6443`, `[::1]:6443`, `localhost` (any port, any 127/8 address).
pub fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        // HTTP/1.0 without Host (or HTTP/2 with :authority only, which hyper maps to Host): nothing to rebind.
        return true;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A non-empty `given` token equal to `token`, compared in constant time.
fn token_matches(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    !a.is_empty() && a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        if let Ok(v) = h.parse() {
            m.insert(header::HOST, v);
        }
        m
    }

    #[test]
    fn bearer_tokens_read_as_kube() {
        let auth = |v: &str| {
            let mut m = HeaderMap::new();
            if let Ok(v) = v.parse() {
                m.insert(header::AUTHORIZATION, v);
            }
            m
        };
        for (header, want) in [
            ("Bearer tok", Some("tok")),
            ("bearer tok", Some("tok")),
            ("BEARER tok", Some("tok")),
            ("  Bearer tok  ", Some("tok")),
            ("Bearer tok extra", Some("tok")),
            ("Bearer  tok", Some("")),
            ("Basic tok", None),
            ("Bearer", None),
        ] {
            assert_eq!(bearer_token(&auth(header)), want, "{header:?}");
        }
        assert!(token_matches("tok", "tok") && !token_matches("", "") && !token_matches("to", "tok"));
    }

    #[test]
    fn loopback_hosts() {
        for ok in [
            "127.0.0.1:6443",
            "127.1.2.3",
            "localhost:1",
            "LOCALHOST",
            "[::1]:6443",
            "[::1]",
        ] {
            assert!(loopback_host(&host(ok)), "{ok}");
        }
        for bad in [
            "evil.example:6443",
            "10.0.0.1:6443",
            "[fe80::1]:1",
            "localhost.evil.example",
            "",
        ] {
            assert!(!loopback_host(&host(bad)), "{bad}");
        }
    }
}
