//! The in-memory apiserver: an axum Router speaking the Kubernetes REST API.
//! (temporary stub: the full implementation is in progress)

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::Clock;

/// Request and object counters.
#[derive(Clone, Debug, Default)]
pub struct ApiStats {
    /// Writes by (verb, resource[/subresource]).
    pub writes: BTreeMap<(String, String), u64>,
    /// Read requests (get/list).
    pub reads: u64,
    /// Watch requests started.
    pub watches: u64,
    /// Objects stored, by resource.
    pub objects: BTreeMap<String, usize>,
}

/// The simulated apiserver.
#[derive(Clone)]
pub struct ApiServer {
    inner: Arc<Inner>,
}

struct Inner {
    _clock: Arc<dyn Clock>,
}

impl ApiServer {
    /// A new apiserver with the default namespaces.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            inner: Arc::new(Inner { _clock: clock }),
        }
    }
    /// The full REST API as a Router.
    pub fn router(&self) -> axum::Router {
        axum::Router::new()
    }
    /// An in-process client; must be called in a tokio runtime.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }
    /// Serve plain HTTP on `addr`.
    pub async fn serve(
        &self,
        addr: SocketAddr,
    ) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let router = self.router();
        let h = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok((local, h))
    }
    /// Request counters.
    pub fn stats(&self) -> ApiStats {
        ApiStats::default()
    }
}
