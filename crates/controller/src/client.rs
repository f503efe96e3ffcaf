//! The Kubernetes client: kube's default stack, with a connection pool that keeps few idle connections.
//!
//! kube's client speaks HTTP/1.1 to the apiserver, so each of the executor's concurrent writes (up to 64
//! pod chains) holds a connection of its own, and hyper's pool keeps every one of them after a burst: no
//! per-host limit, 90 s idle timeout. Each idle connection keeps its read buffer, TLS state and channels,
//! ~125 KiB, so a controller held ~8 MB more after a rollout than before it (the session-13 heap profile in
//! `docs/benchmarks.md`). client-go bounds the same thing (`MaxIdleConnsPerHost`, 25 for its HTTP/1.1
//! transports); here at most `MAX_IDLE_PER_HOST` stay open, and they close after `IDLE_TIMEOUT` unused.
//! Connections beyond that are made as a burst needs them, as before.
//!
//! The stack is kube's own (`kube::client::ClientBuilder::try_from`): base URI, timeouts on the connector,
//! TLS (rustls), the retry policy for 429/503/504 when the config asks for it, authentication and extra
//! headers. It leaves out the per-request debug spans. A config this stack does not cover (a proxy, or a client
//! certificate from an exec plugin, which kube's client expires and renews) gets kube's client unchanged.

use std::time::Duration;

use anyhow::Context as _;

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

/// Idle connections kept per apiserver: enough for the controller's watches to reconnect and a quiet
/// reconcile's few writes without a TLS handshake each.
pub const MAX_IDLE_PER_HOST: usize = 8;
/// An idle connection is closed after this long unused (hyper's default is 90 s).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A client for `config`: see the module doc.
pub fn build(config: kube::Config) -> anyhow::Result<kube::Client> {
    if config.proxy_url.is_some() || config.auth_info.exec.is_some() {
        return Ok(kube::Client::try_from(config)?);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let tls = config.rustls_https_connector_with_connector(http)?;
    let mut connector = TimeoutConnector::new(tls);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let hyper_client = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .pool_max_idle_per_host(MAX_IDLE_PER_HOST)
        .pool_idle_timeout(IDLE_TIMEOUT)
        .build(connector);
    let retry = config
        .default_retry
        .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(hyper_client);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// A client from `kubeconfig` (or the usual inference), identifying itself as `insitu/<version> (<component>)`
/// (the User-Agent shows up in audit logs and apiserver metrics).
pub async fn from_kubeconfig(
    kubeconfig: Option<&std::path::Path>,
    component: &str,
) -> anyhow::Result<kube::Client> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    let agent = format!("insitu/{} ({component})", env!("CARGO_PKG_VERSION"));
    config.headers.push((http::header::USER_AGENT, agent.parse()?));
    build(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool's limits take effect on a plain-HTTP server too: a burst of concurrent requests opens one
    /// connection each, and afterwards at most `MAX_IDLE_PER_HOST` stay open.
    #[tokio::test]
    async fn a_burst_leaves_at_most_the_idle_limit_open() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        const BURST: usize = 24;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Accepted connections, and those still open (the server sees the client close one).
        let (accepted, open) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        // Every request is answered only once all of the burst's are in, so each needs its own connection.
        let gate = Arc::new(tokio::sync::Barrier::new(BURST));
        let (acc, op) = (accepted.clone(), open.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                acc.fetch_add(1, Ordering::SeqCst);
                op.fetch_add(1, Ordering::SeqCst);
                let (op, gate) = (op.clone(), gate.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |_req| {
                        let gate = gate.clone();
                        async move {
                            gate.wait().await;
                            let body = bytes::Bytes::from_static(b"{}");
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(
                                http_body_util::Full::new(body),
                            ))
                        }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, svc)
                        .await;
                    op.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        let client = build(kube::Config::new(format!("http://{addr}").parse().unwrap())).unwrap();
        let requests = (0..BURST).map(|_| {
            let client = client.clone();
            async move {
                let req = http::Request::get("/version").body(Vec::new()).unwrap();
                client.request_text(req).await.unwrap()
            }
        });
        futures::future::join_all(requests).await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            BURST,
            "one connection per concurrent request"
        );
        // The pool closes the connections beyond its limit as they come back; the server notices soon after.
        for _ in 0..200 {
            if open.load(Ordering::SeqCst) <= MAX_IDLE_PER_HOST {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(open.load(Ordering::SeqCst), MAX_IDLE_PER_HOST);
    }
}
