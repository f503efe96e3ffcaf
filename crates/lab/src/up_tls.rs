//! `insitu up`'s HTTPS front: a CA and serving certificate for the loopback names generated at each start (the
//! CA goes into the kubeconfig), the embedded apiserver's router served over rustls. TLS is what makes the
//! bearer token usable at all: kubectl (client-go) sends credentials only to `https://` servers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use insitu_controller::webhook::{certs, conntimer, server};
use tower::ServiceExt as _;

/// The names the serving certificate covers: what a kubeconfig for a loopback apiserver may name.
fn names() -> Vec<String> {
    vec!["127.0.0.1".into(), "localhost".into(), "::1".into()]
}

/// A fresh CA + serving certificate (valid a year: the process, not the certificate, bounds the cluster's life).
pub fn generate() -> anyhow::Result<certs::CertBundle> {
    certs::generate(&names(), Duration::from_secs(365 * 24 * 3600), None)
        .context("generating the TLS certificate")
}

/// How long a connection may stall, as kube-apiserver's `http.Server` allows
/// (k8s.io/apiserver/pkg/server/secure_serving.go: `ReadHeaderTimeout` 32 s, which Go's server also gives the
/// TLS handshake).
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// From accepting the TCP connection to the end of the TLS handshake.
    pub handshake: Duration,
    /// A request's headers: from the connection's start for its first request, from the first byte for
    /// later ones (`insitu_controller::webhook::conntimer`).
    pub header_read: Duration,
    /// How long a kept-alive connection waits for the next request's first byte (kube-apiserver's `IdleTimeout`).
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            handshake: Duration::from_secs(32),
            header_read: Duration::from_secs(32),
            idle: conntimer::IDLE_TIMEOUT,
        }
    }
}

/// Binds `addr` and serves `router` over TLS with `bundle`'s certificate until the task is aborted.
pub async fn serve(
    addr: SocketAddr,
    bundle: &certs::CertBundle,
    router: axum::Router,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    serve_with(addr, bundle, router, Timeouts::default()).await
}

/// [`serve`] with explicit [`Timeouts`].
pub async fn serve_with(
    addr: SocketAddr,
    bundle: &certs::CertBundle,
    router: axum::Router,
    timeouts: Timeouts,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let resolver = server::CertResolver::new();
    resolver.set(bundle)?;
    let tls = server::tls_config(resolver)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let handle = tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "apiserver accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let acceptor = acceptor.clone();
            let router = router.clone();
            tokio::spawn(async move {
                let stream = match tokio::time::timeout(timeouts.handshake, acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "apiserver TLS handshake");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "apiserver TLS handshake timed out");
                        return;
                    }
                };
                let (timer, watched) = conntimer::ConnTimer::new(stream, timeouts.idle, timeouts.header_read);
                let io = hyper_util::rt::TokioIo::new(watched);
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    router.clone().oneshot(req.map(axum::body::Body::new))
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .timer(timer)
                    .header_read_timeout(timeouts.header_read)
                    .serve_connection(io, svc)
                    .with_upgrades()
                    .await
                {
                    tracing::debug!(%peer, error = %e, "apiserver connection");
                }
            });
        }
    });
    Ok((local, handle))
}

/// The CA as kubeconfig's `certificate-authority-data` (base64 of the PEM).
pub fn ca_data(bundle: &certs::CertBundle) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bundle.ca_cert.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const SHORT: Timeouts = Timeouts {
        handshake: Duration::from_millis(300),
        header_read: Duration::from_millis(300),
        idle: Duration::from_millis(900),
    };

    async fn started() -> (SocketAddr, certs::CertBundle, tokio::task::JoinHandle<()>) {
        let bundle = generate().expect("certificate");
        let router = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let (addr, handle) = serve_with(addr, &bundle, router, SHORT).await.expect("serving");
        (addr, bundle, handle)
    }

    /// Reads until the server closes the connection; how long that took (or `None` past 5 s).
    async fn closed_after(mut read: impl tokio::io::AsyncRead + Unpin) -> Option<Duration> {
        let start = std::time::Instant::now();
        let mut buf = [0u8; 1024];
        let wait = async {
            loop {
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(5), wait).await.ok()?;
        Some(start.elapsed())
    }

    async fn tls_client(
        addr: SocketAddr,
        bundle: &certs::CertBundle,
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(bundle.ca_cert.as_bytes()) {
            roots.add(c.expect("pem")).expect("root");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(name, tcp)
            .await
            .expect("handshake")
    }

    #[tokio::test]
    async fn a_connection_without_handshake_is_closed() {
        let (addr, _bundle, handle) = started().await;
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let took = closed_after(tcp).await.expect("closed");
        assert!(took >= Duration::from_millis(250), "{took:?}");
        handle.abort();
    }

    #[tokio::test]
    async fn stalled_headers_and_idle_connections_are_closed() {
        let (addr, bundle, handle) = started().await;
        // Half a request line, then nothing: closed at the header deadline.
        let mut tls = tls_client(addr, &bundle).await;
        tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n")
            .await
            .expect("write");
        let took = closed_after(tls).await.expect("closed");
        assert!(took >= Duration::from_millis(250), "{took:?}");
        // A complete request is answered; the idle connection after it is closed at the idle deadline, which is
        // longer than the header deadline (kube-apiserver: 90 s and 32 s).
        let mut tls = tls_client(addr, &bundle).await;
        tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .expect("write");
        let mut buf = vec![0u8; 4096];
        let n = tls.read(&mut buf).await.expect("answer");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        let took = closed_after(tls).await.expect("closed");
        assert!(took >= Duration::from_millis(850), "{took:?}");
        handle.abort();
    }
}
