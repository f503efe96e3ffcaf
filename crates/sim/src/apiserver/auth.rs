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
    if !public && !token_matches(req.headers(), &token) {
        return ApiError::new(401, "Unauthorized", "Unauthorized").into_response();
    }
    next.run(req).await
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

/// `Authorization: Bearer <token>`, compared in constant time.
fn token_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
