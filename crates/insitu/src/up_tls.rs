//! `insitu up`'s HTTPS front: a CA and serving certificate for the loopback names generated at each start (the
//! CA goes into the kubeconfig), the embedded apiserver's router served over rustls. TLS is what makes the
//! bearer token usable at all: kubectl (client-go) sends credentials only to `https://` servers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use insitu_controller::webhook::{certs, server};
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

/// Binds `addr` and serves `router` over TLS with `bundle`'s certificate until the task is aborted.
pub async fn serve(
    addr: SocketAddr,
    bundle: &certs::CertBundle,
    router: axum::Router,
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
                let stream = match acceptor.accept(tcp).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "apiserver TLS handshake");
                        return;
                    }
                };
                let io = hyper_util::rt::TokioIo::new(stream);
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    router.clone().oneshot(req.map(axum::body::Body::new))
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
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
