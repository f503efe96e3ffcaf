//! Helpers shared by the sim's integration tests: an apiserver on a fixed virtual clock and raw HTTP requests
//! through its router, shaped as kubectl sends them.
#![allow(dead_code)]

use insitu_sim::SimClock;
use insitu_sim::apiserver::ApiServer;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tower::ServiceExt;

/// The virtual clock's start (fixed, so logs and timestamps can be asserted).
pub fn base() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

pub fn server() -> ApiServer {
    ApiServer::new(SimClock::new(base(), 1.0))
}

/// An API error's code, reason and message (any other error fails the test).
pub fn api_err(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// An answer: status code, content type, `Warning` headers, the body as text and as JSON (Null if it is not).
pub struct Answer {
    pub code: u16,
    pub content_type: String,
    pub warnings: Vec<String>,
    pub text: String,
    pub body: Value,
}

/// A raw request, built up header by header and sent through a router.
pub struct Req {
    builder: axum::http::request::Builder,
    body: Vec<u8>,
}

impl Req {
    pub fn new(method: &str, uri: &str) -> Self {
        Self {
            builder: axum::http::Request::builder().method(method).uri(uri),
            body: Vec::new(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.builder = self.builder.header(name, value);
        self
    }

    /// A body with its Content-Type.
    pub fn body(self, content_type: &str, body: Vec<u8>) -> Self {
        let mut r = self.header("content-type", content_type);
        r.body = body;
        r
    }

    pub async fn send(self, router: &axum::Router) -> Answer {
        let req = self
            .builder
            .body(axum::body::Body::from(self.body))
            .expect("request");
        let resp = router.clone().oneshot(req).await.expect("response");
        let header = |name: &str| {
            resp.headers()
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_string))
                .collect::<Vec<_>>()
        };
        let code = resp.status().as_u16();
        let content_type = header("content-type").concat();
        let warnings = header("warning");
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        Answer {
            code,
            content_type,
            warnings,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }
}

/// A JSON-answered request; `ct` is the body's Content-Type.
pub async fn send(s: &ApiServer, method: &str, uri: &str, ct: &str, body: Vec<u8>) -> Answer {
    Req::new(method, uri)
        .header("accept", "application/json")
        .body(ct, body)
        .send(&s.router())
        .await
}

pub async fn json_req(s: &ApiServer, method: &str, uri: &str, ct: &str, body: Value) -> Answer {
    send(s, method, uri, ct, body.to_string().into_bytes()).await
}

pub async fn get(s: &ApiServer, uri: &str) -> Answer {
    send(s, "GET", uri, "application/json", Vec::new()).await
}
