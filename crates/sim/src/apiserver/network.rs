//! The network between a named client and the apiserver: partitions (a client's requests refused, or hanging until
//! the partition heals or the client's 30 s connect timeout), and the log of the writes the apiserver accepted from
//! each named client, to check who acted when (e.g. that a deposed leader wrote nothing after its successor took
//! over).
//!
//! A partition acts before the request reaches the apiserver, as a cut cable does: a refused request fails with a
//! transport error (no Status), a hanging one is either delivered once the partition heals (TCP retransmission) or
//! fails with a timeout; the client dropping it (a cancelled request) means it is never delivered.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::Response;

use super::ApiServer;

/// Names the client of a request made through [`ApiServer::client_as`].
pub(crate) const CLIENT_HEADER: &str = "x-insitu-sim-client";

/// How long a request waits in a hanging partition before the client gives up (kube's connect timeout).
pub const HANG_TIMEOUT: Duration = Duration::from_secs(30);

/// How a partitioned client's requests fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partition {
    /// At once, as a refused connection.
    Refused,
    /// They hang: delivered if the partition heals within [`HANG_TIMEOUT`], else a timeout error.
    Hang,
}

/// A write the apiserver accepted (status < 400) from a named client, in the order they were applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedWrite {
    pub client: String,
    /// `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// As [`super::ApiStats::writes`] names them (`pods`, `leases.coordination.k8s.io`, `pods/status`, ...).
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

#[derive(Default)]
pub(crate) struct Network {
    partitions: Mutex<BTreeMap<String, Partition>>,
    accepted: Mutex<Vec<AcceptedWrite>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Network {
    fn partition_of(&self, client: &str) -> Option<Partition> {
        lock(&self.partitions).get(client).copied()
    }

    /// Waits for (or refuses) the crossing of one request of `client`.
    async fn cross(&self, client: &str) -> Result<(), std::io::Error> {
        let started = tokio::time::Instant::now();
        loop {
            match self.partition_of(client) {
                None => return Ok(()),
                Some(Partition::Refused) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        format!("connection refused ({client} partitioned from the apiserver)"),
                    ));
                }
                Some(Partition::Hang) if started.elapsed() >= HANG_TIMEOUT => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("timed out ({client} partitioned from the apiserver)"),
                    ));
                }
                Some(Partition::Hang) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    pub(crate) fn record(&self, write: AcceptedWrite) {
        lock(&self.accepted).push(write);
    }
}

impl ApiServer {
    /// An in-process client whose requests carry the name `client` (faults apply as to [`ApiServer::client`]):
    /// it can be partitioned ([`ApiServer::partition`]) and its accepted writes are logged
    /// ([`ApiServer::accepted_writes`]).
    pub fn client_as(&self, client: &str) -> kube::Client {
        let name = HeaderValue::from_str(client).unwrap_or_else(|_| HeaderValue::from_static("invalid"));
        kube::Client::new(
            Named {
                server: self.clone(),
                client: client.to_string(),
                header: name,
            },
            "default",
        )
    }

    /// Cuts `client` off from the apiserver.
    pub fn partition(&self, client: &str, how: Partition) {
        lock(&self.inner.network.partitions).insert(client.to_string(), how);
    }

    /// Ends `client`'s partition.
    pub fn heal(&self, client: &str) {
        lock(&self.inner.network.partitions).remove(client);
    }

    /// Every write accepted from a named client so far, in the order applied.
    pub fn accepted_writes(&self) -> Vec<AcceptedWrite> {
        lock(&self.inner.network.accepted).clone()
    }
}

/// The transport of a named client.
#[derive(Clone)]
struct Named {
    server: ApiServer,
    client: String,
    header: HeaderValue,
}

impl<B> tower::Service<axum::http::Request<B>> for Named
where
    B: axum::body::HttpBody<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response, std::io::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            this.server.inner.network.cross(&this.client).await?;
            let (mut parts, body) = req.into_parts();
            parts.headers.insert(CLIENT_HEADER, this.header.clone());
            let req = Request::from_parts(parts, axum::body::Body::new(body));
            let resp: Result<Response, Infallible> =
                tower::ServiceExt::oneshot(this.server.router(), req).await;
            Ok(resp.unwrap_or_else(|e| match e {}))
        })
    }
}
