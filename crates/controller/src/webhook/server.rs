//! The webhook's HTTPS server (rustls): `POST /convert` answers ConversionReviews, `POST /mutate-cloneset`
//! AdmissionReviews; the serving certificate can be swapped while running (rotation).

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde_json::{Value, json};

use super::certs::CertBundle;

/// Largest request body accepted (a ConversionReview carries whole CloneSets; the apiserver caps objects at
/// 1.5 MiB, a list conversion carries several).
const MAX_BODY: usize = 64 << 20;

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

/// Accepts connections on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, tls: rustls::ServerConfig) {
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
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "webhook TLS handshake");
                    return;
                }
            };
            let io = hyper_util::rt::TokioIo::new(stream);
            let svc = hyper::service::service_fn(handle);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, svc)
                .await
            {
                tracing::debug!(%peer, error = %e, "webhook connection");
            }
        });
    }
}

fn reply(code: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = code;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    if req.method() == Method::GET && (path == "/healthz" || path == "/readyz") {
        return Ok(reply(StatusCode::OK, &json!("ok")));
    }
    if req.method() != Method::POST {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"message": "POST a ConversionReview to /convert or an AdmissionReview to /mutate-cloneset"}),
        ));
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Ok(reply(
                StatusCode::BAD_REQUEST,
                &json!({"message": format!("reading the body: {e}")}),
            ));
        }
    };
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return Ok(reply(
                StatusCode::BAD_REQUEST,
                &json!({"message": format!("the body is not JSON: {e}")}),
            ));
        }
    };
    Ok(match path.as_str() {
        insitu_api::crd::CONVERT_PATH => {
            let started = std::time::Instant::now();
            let out = reply(StatusCode::OK, &insitu_api::conversion::review(&parsed));
            tracing::debug!(
                bytes = body.len(),
                convert_us = started.elapsed().as_micros() as u64,
                "conversion review answered"
            );
            out
        }
        super::mutate::MUTATE_PATH => reply(StatusCode::OK, &super::mutate::review(&parsed)),
        _ => reply(
            StatusCode::NOT_FOUND,
            &json!({"message": format!(
                "no webhook at {path} (conversion: {}, CloneSet defaults: {})",
                insitu_api::crd::CONVERT_PATH,
                super::mutate::MUTATE_PATH
            )}),
        ),
    })
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
}
