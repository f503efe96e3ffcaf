//! The webhook's HTTPS server (rustls): `POST /convert` answers ConversionReviews, `POST /mutate-cloneset`
//! AdmissionReviews; the serving certificate can be swapped while running (rotation).

use std::future::Future as _;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use super::conntimer::ConnTimer;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};

use super::budget::{Admission, Budget, Guarded, Limits, Pool};
use super::certs::CertBundle;

/// The serving certificate, swappable while the server runs.
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

impl CertResolver {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(None),
        })
    }

    /// Serves `bundle`'s certificate from the next handshake on.
    pub fn set(&self, bundle: &CertBundle) -> anyhow::Result<()> {
        let key = certified_key(bundle)?;
        if let Ok(mut cur) = self.current.write() {
            *cur = Some(Arc::new(key));
        }
        Ok(())
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().and_then(|c| c.clone())
    }
}

fn certified_key(bundle: &CertBundle) -> anyhow::Result<CertifiedKey> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(bundle.tls_cert.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(bundle.tls_key.as_bytes())?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)?;
    Ok(CertifiedKey::new(certs, signer))
}

/// The rustls server configuration over `resolver`.
pub fn tls_config(resolver: Arc<CertResolver>) -> anyhow::Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Accepts connections on `listener` until the task is dropped, with the default [`Limits`].
pub async fn serve(listener: tokio::net::TcpListener, tls: rustls::ServerConfig) {
    serve_with(listener, tls, Limits::default()).await;
}

/// What every connection shares: the budget and the worker threads.
struct Shared {
    budget: Budget,
    pool: Pool,
    limits: Limits,
}

/// Accepts connections on `listener` until the task is dropped.
pub async fn serve_with(listener: tokio::net::TcpListener, tls: rustls::ServerConfig, limits: Limits) {
    let pool = match Pool::new(limits.workers) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "starting the webhook's worker threads");
            return;
        }
    };
    let shared = Arc::new(Shared {
        budget: Budget::new(limits.clone()),
        pool,
        limits,
    });
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "webhook accept");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        tokio::spawn(connection(acceptor.clone(), tcp, peer, shared.clone()));
    }
}

/// One connection: the TLS handshake within its deadline, then HTTP/1.1 with a header deadline and a write
/// stall deadline (kube-apiserver closes stalled connections the same way; see [`Limits`]).
async fn connection(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
) {
    let limits = &shared.limits;
    let stream = match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "webhook TLS handshake");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "webhook TLS handshake timed out");
            return;
        }
    };
    let (timer, watched) = ConnTimer::new(stream, limits.idle_timeout, limits.header_timeout);
    let io = hyper_util::rt::TokioIo::new(WriteDeadline::new(watched, limits.write_timeout));
    let svc = {
        let shared = shared.clone();
        hyper::service::service_fn(move |req| handle(shared.clone(), req))
    };
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        .timer(timer)
        .header_read_timeout(limits.header_timeout)
        .serve_connection(io, svc)
        .await
    {
        tracing::debug!(%peer, error = %e, "webhook connection");
    }
}

type Reply = Response<Guarded>;

fn reply(code: StatusCode, body: Bytes, admission: Option<Admission>) -> Reply {
    let mut r = Response::new(Guarded::new(body, admission));
    *r.status_mut() = code;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// A `metav1.Status` failure, as kube-apiserver answers errors.
fn status(code: StatusCode, reason: &str, message: &str) -> Reply {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code.as_u16()});
    reply(code, Bytes::from(body.to_string()), None)
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Reply, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    if req.method() == Method::GET && (path == "/healthz" || path == "/readyz") {
        return Ok(reply(StatusCode::OK, Bytes::from_static(b"\"ok\""), None));
    }
    if req.method() != Method::POST {
        return Ok(status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "POST a ConversionReview to /convert or an AdmissionReview to /mutate-cloneset",
        ));
    }
    let convert = match path.as_str() {
        insitu_api::crd::CONVERT_PATH => true,
        super::mutate::MUTATE_PATH => false,
        _ => {
            let message = format!(
                "no webhook at {path} (conversion: {}, CloneSet defaults: {})",
                insitu_api::crd::CONVERT_PATH,
                super::mutate::MUTATE_PATH
            );
            return Ok(status(StatusCode::NOT_FOUND, "NotFound", &message));
        }
    };
    Ok(review(&shared, req, convert).await)
}

/// Admits a review into the budget, reads its body, and answers it on a worker thread.
async fn review(shared: &Shared, req: Request<Incoming>, convert: bool) -> Reply {
    let limits = &shared.limits;
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limits.max_body) {
        return too_large(limits.max_body);
    }
    // Without a length (chunked), the most a body may take is reserved.
    let reserve = declared.unwrap_or(limits.max_body);
    let Some(admission) = shared.budget.admit(reserve).await else {
        // client-go's REST client (which kube-apiserver calls webhooks with) sleeps for `Retry-After` and
        // retries a 429 (`rest/with_retry.go`, `checkWait`), within the call's deadline.
        let mut r = status(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            "the webhook is busy with other reviews; retry",
        );
        r.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from_static("1"),
        );
        return r;
    };
    let body = match tokio::time::timeout(limits.body_timeout, read_body(req.into_body(), reserve)).await {
        Ok(Ok(b)) => b,
        Ok(Err(BodyError::TooLarge)) => return too_large(reserve),
        Ok(Err(BodyError::Read(e))) => {
            return status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("reading the body: {e}"),
            );
        }
        Err(_) => {
            let message = format!("the body was not received within {:?}", limits.body_timeout);
            return status(StatusCode::REQUEST_TIMEOUT, "Timeout", &message);
        }
    };
    let answered = shared
        .pool
        .run(move || {
            let started = std::time::Instant::now();
            let out = if convert {
                insitu_api::conversion_review::review_json(&body)
            } else {
                super::mutate::review_json(&body)
            };
            tracing::debug!(
                bytes = body.len(),
                convert,
                work_us = started.elapsed().as_micros() as u64,
                "review answered"
            );
            drop(body);
            (out, admission)
        })
        .await;
    match answered {
        Some((Ok(out), admission)) => reply(StatusCode::OK, Bytes::from(out), Some(admission)),
        Some((Err(message), _)) => status(StatusCode::BAD_REQUEST, "BadRequest", &message),
        None => status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            "the review could not be answered (a worker failed)",
        ),
    }
}

fn too_large(limit: usize) -> Reply {
    status(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        &format!("the request body is larger than {limit} bytes"),
    )
}

enum BodyError {
    TooLarge,
    Read(hyper::Error),
}

/// Reads a body of at most `limit` bytes into one buffer (sized up front when the length is known).
async fn read_body(mut body: Incoming, limit: usize) -> Result<Vec<u8>, BodyError> {
    use hyper::body::Body as _;
    let expected = body.size_hint().exact().and_then(|n| usize::try_from(n).ok());
    let mut buf = Vec::with_capacity(expected.unwrap_or(0).min(limit));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BodyError::Read)?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf)
}

/// An IO whose writes may stall for at most `timeout`: a peer that stops reading its answer is cut off,
/// and the answer's memory (held until written) freed.
struct WriteDeadline<IO> {
    io: IO,
    timeout: std::time::Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<IO> WriteDeadline<IO> {
    fn new(io: IO, timeout: std::time::Duration) -> Self {
        Self {
            io,
            timeout,
            stalled: None,
        }
    }

    /// After a write returned `Pending`: an error once the stall has lasted `timeout`.
    fn stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the peer read nothing for {timeout:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        match polled {
            Poll::Pending => self.stall(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for WriteDeadline<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.progress(cx, polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.progress(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_shutdown(cx);
        self.progress(cx, polled)
    }
}

/// POSTs a one-object ConversionReview to our own server, trusting `ca_pem`: the readiness check.
pub async fn self_check(addr: SocketAddr, server_name: &str, ca_pem: &str) -> anyhow::Result<()> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let target = if addr.ip().is_unspecified() {
        SocketAddr::from(([127, 0, 0, 1], addr.port()))
    } else {
        addr
    };
    let tcp = tokio::net::TcpStream::connect(target).await?;
    let name = ServerName::try_from(server_name.to_string())?;
    let tls = connector.connect(name, tcp).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "insitu-self-check", "desiredAPIVersion": insitu_api::conversion::V1ALPHA1, "objects": [
            {"apiVersion": insitu_api::conversion::V1BETA1, "kind": "CloneSet", "metadata": {"name": "self-check"},
             "spec": {"updateStrategy": {"type": "RollingUpdate"}}}
        ]}
    });
    let req = Request::post(insitu_api::crd::CONVERT_PATH)
        .header(hyper::header::HOST, server_name)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(review.to_string())))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    let v: Value = serde_json::from_slice(&body)?;
    if status != StatusCode::OK || v.pointer("/response/result/status") != Some(&json!("Success")) {
        anyhow::bail!("conversion webhook self-check answered {status}: {v}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn bundle() -> CertBundle {
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        super::super::certs::generate(&names, Duration::from_secs(3600), None).unwrap()
    }

    /// A server with `limits` on a loopback port: its address, its CA, its task.
    async fn start(limits: Limits) -> (SocketAddr, String, tokio::task::JoinHandle<()>) {
        let b = bundle();
        let resolver = CertResolver::new();
        resolver.set(&b).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(serve_with(listener, tls_config(resolver).unwrap(), limits));
        (addr, b.ca_cert, task)
    }

    async fn tls(addr: SocketAddr, ca: &str) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, ServerName};
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let cfg =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap()
    }

    type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

    async fn client(addr: SocketAddr, ca: &str) -> Sender {
        let io = hyper_util::rt::TokioIo::new(tls(addr, ca).await);
        let (sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        sender
    }

    async fn send(
        sender: &mut Sender,
        method: Method,
        path: &str,
        body: Vec<u8>,
    ) -> (StatusCode, hyper::HeaderMap, Bytes) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, "localhost")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        let (parts, body) = resp.into_parts();
        (
            parts.status,
            parts.headers,
            body.collect().await.unwrap().to_bytes(),
        )
    }

    fn review_of(n: usize) -> Vec<u8> {
        let objects: Vec<Value> = (0..n)
            .map(|i| {
                json!({"apiVersion": insitu_api::conversion::V1ALPHA1, "kind": "CloneSet",
                "metadata": {"name": format!("cs-{i}"), "namespace": "default"},
                "spec": {"replicas": 1, "updateStrategy": {"type": "InPlaceIfPossible"}}})
            })
            .collect();
        serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u", "desiredAPIVersion": insitu_api::conversion::V1BETA1, "objects": objects}}))
        .unwrap()
    }

    #[tokio::test]
    async fn answers_conversions_over_tls_and_serves_a_rotated_certificate() {
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let first =
            super::super::certs::generate(&names, std::time::Duration::from_secs(3600), None).unwrap();
        let resolver = CertResolver::new();
        resolver.set(&first).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(serve(listener, tls_config(resolver.clone()).unwrap()));
        self_check(addr, "localhost", &first.ca_cert)
            .await
            .expect("self-check with the CA");

        // Rotation: the next handshake presents the new certificate; a client trusting only the old CA fails.
        let second =
            super::super::certs::generate(&names, std::time::Duration::from_secs(3600), None).unwrap();
        resolver.set(&second).unwrap();
        self_check(addr, "127.0.0.1", &second.ca_cert)
            .await
            .expect("self-check with the new CA");
        assert!(self_check(addr, "localhost", &first.ca_cert).await.is_err());
        task.abort();
    }

    #[tokio::test]
    async fn health_answers_while_a_large_review_is_converted() {
        // The test's runtime has one thread: were the conversion done on it, no /healthz could be answered
        // until it ends.
        let (addr, ca, task) = start(Limits::default()).await;
        let mut health = client(addr, &ca).await;
        let mut post = client(addr, &ca).await;
        let body = review_of(20_000);
        let convert = tokio::spawn(async move { send(&mut post, Method::POST, "/convert", body).await });
        let mut answered_meanwhile = 0;
        while !convert.is_finished() {
            let (code, _, _) = send(&mut health, Method::GET, "/healthz", Vec::new()).await;
            assert_eq!(code, StatusCode::OK);
            if !convert.is_finished() {
                answered_meanwhile += 1;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (code, _, out) = convert.await.unwrap();
        assert_eq!(code, StatusCode::OK);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["response"]["result"]["status"], "Success");
        assert_eq!(
            out["response"]["convertedObjects"].as_array().unwrap().len(),
            20_000
        );
        assert!(
            answered_meanwhile > 0,
            "/healthz was not answered during the review"
        );
        task.abort();
    }

    #[tokio::test]
    async fn overload_is_answered_429_with_retry_after_and_large_bodies_413() {
        let (addr, ca, task) = start(Limits {
            max_body: 4096,
            byte_budget: 1000,
            queue_wait: Duration::from_millis(100),
            ..Limits::default()
        })
        .await;
        // A review that declares 1,000 bytes and sends none holds the whole budget.
        let mut stalled = tls(addr, &ca).await;
        stalled
            .write_all(b"POST /convert HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n")
            .await
            .unwrap();
        stalled.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut other = client(addr, &ca).await;
        let (code, headers, body) = send(&mut other, Method::POST, "/convert", review_of(1)).await;
        assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{body:?}");
        assert_eq!(headers.get(hyper::header::RETRY_AFTER).unwrap(), "1");
        let status: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["reason"], "TooManyRequests");
        // Health is not part of the budget.
        assert_eq!(
            send(&mut other, Method::GET, "/readyz", Vec::new()).await.0,
            StatusCode::OK
        );
        // Past the body limit: refused before anything is read.
        let (code, _, _) = send(&mut other, Method::POST, "/convert", vec![b' '; 5000]).await;
        assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);
        // The stalled review gives its budget back once it is answered: then the other one fits.
        stalled.write_all(&[b' '; 1000]).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), stalled.read_buf(&mut answer)).await;
        assert!(
            String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 400"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        let (code, _, _) = send(&mut other, Method::POST, "/convert", review_of(1)).await;
        assert_eq!(code, StatusCode::OK);
        task.abort();
    }

    #[tokio::test]
    async fn a_body_not_received_in_time_is_answered_408() {
        let (addr, ca, task) = start(Limits {
            body_timeout: Duration::from_millis(200),
            ..Limits::default()
        })
        .await;
        let mut conn = tls(addr, &ca).await;
        conn.write_all(
            b"POST /mutate-cloneset HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n{\"a\"",
        )
        .await
        .unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), conn.read_buf(&mut answer))
            .await
            .expect("answered")
            .unwrap();
        assert!(
            String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_never_says_hello_is_closed_after_the_handshake_deadline() {
        let (addr, _ca, task) = start(Limits::default()).await;
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut buf = [0u8; 16];
        // Closed by the server: end of stream (or a reset), not a hang.
        let read = tcp.read(&mut buf).await;
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(32) && waited < Duration::from_secs(40),
            "closed after {waited:?}"
        );
        task.abort();
    }

    #[tokio::test]
    async fn silent_connections_close_at_the_header_deadline_and_idle_ones_at_the_idle_deadline() {
        let (addr, ca, task) = start(Limits {
            header_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_millis(900),
            ..Limits::default()
        })
        .await;
        // After the handshake, no request at all.
        let mut silent = tls(addr, &ca).await;
        let started = std::time::Instant::now();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), silent.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "the silent connection is still open");
        assert!(started.elapsed() >= Duration::from_millis(300));
        // One request answered, then idle: closed as well.
        let mut idle = tls(addr, &ca).await;
        idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let started = std::time::Instant::now();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), idle.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "the idle connection is still open");
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "{:?}",
            started.elapsed()
        );
        assert!(String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 200"));
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_stops_reading_is_cut_off() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut io = WriteDeadline::new(ours, Duration::from_secs(32));
        let started = tokio::time::Instant::now();
        let err = io.write_all(&[0u8; 1024]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_secs(32));
    }
}
