//! The in-memory apiserver: an axum Router speaking the Kubernetes REST API over the versioned [`Store`].
//!
//! Served in-process (`kube::Client::new(router)`, no sockets, works on paused tokio time) or on
//! 127.0.0.1 for kubectl. Semantics follow kube-apiserver: resourceVersions, 409/410/422 Status errors,
//! pod update rules, status/scale/binding/resize subresources, graceful deletion and finalizers.

mod auth;
mod discovery;
mod dryrun;
mod duplicates;
mod errors;
mod events;
pub mod faults;
mod fieldvalidation;
mod handlers;
mod labelparse;
mod limits;
mod metadata_validation;
mod nesting;
pub mod network;
mod openapi;
mod openapi_builtin;
mod paging;
mod patch;
mod pod_streams;
mod pods;
mod protobuf;
mod request;
mod resources;
mod secrets;
mod selectors;
mod structural;
mod table;
mod warnings;
mod watch;
mod webhookconfigs;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::Timestamp;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use crate::Clock;
use crate::store::{Store, StoreConfig};
pub use errors::ApiError;
pub use network::{AcceptedWrite, Partition};
pub(crate) use request::ApiRequest;
use request::{parse_query, percent_decode, resolve, route};
use resources::RESOURCES;

/// Request and object counters, for benchmarks and tests.
#[derive(Clone, Debug, Default)]
pub struct ApiStats {
    /// Writes by (verb, resource[/subresource]); verbs are `create`, `update`, `patch`, `delete`,
    /// `deletecollection`; resources are plural names, group-qualified outside the core group
    /// (`pods`, `pods/status`, `clonesets.apps.kruise.io/scale`). Failed writes count too.
    pub writes: BTreeMap<(String, String), u64>,
    /// Get requests (including subresource gets).
    pub reads: u64,
    /// List requests.
    pub lists: u64,
    /// Watch requests started.
    pub watches: u64,
    /// Watches currently open.
    pub active_watches: u64,
    /// Requests answered with an error status (>= 400).
    pub errors: u64,
    /// Requests refused as invalid (422), oracle clients' excepted: a client under test should never send one.
    pub invalid: u64,
    /// Unknown fields dropped from built-in kinds' writes (as kube-apiserver's typed decoder drops them), by
    /// `<resource> <field path>` (`pods spec.containers[0].imagee`): nothing the sim's components or the
    /// controller write should land here.
    pub pruned: BTreeMap<String, u64>,
    /// Stored objects by resource (same naming as `writes`).
    pub objects: BTreeMap<String, usize>,
    /// The current global resourceVersion.
    pub resource_version: u64,
}

impl ApiStats {
    /// Writes of one verb on one resource (e.g. `("update", "pods")`).
    pub fn writes_for(&self, verb: &str, resource: &str) -> u64 {
        self.writes
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// All writes.
    pub fn total_writes(&self) -> u64 {
        self.writes.values().sum()
    }
}

/// Tuning for [`ApiServer::with_config`].
#[derive(Clone, Copy, Debug)]
pub struct ApiServerConfig {
    /// Seed for uids and generated names (same seed, same names).
    pub seed: u64,
    pub store: StoreConfig,
    /// What makes one run of a long-lived cluster (`insitu up`) distinct from the previous ones; `None` (tests,
    /// benchmarks, torture: reproducible from the seed) keeps everything a function of the seed.
    pub run: Option<RunIdentity>,
}

/// A run's identity, so that clients of a restarted cluster do not mistake it for the old one, as they cannot
/// with a real cluster: uids differ across runs (the nonce is mixed into the uid generator's seed), and every
/// resourceVersion of this run is above `first_rv`, which is above any of earlier runs' (a wall-clock count of
/// microseconds), while watches from below it get 410 Expired, so that clients relist instead of resuming an
/// old cluster's event stream.
#[derive(Clone, Copy, Debug)]
pub struct RunIdentity {
    pub nonce: u64,
    pub first_rv: u64,
}

impl RunIdentity {
    /// From the wall clock and `nonce` (the caller's OS randomness).
    pub fn now(nonce: u64) -> Self {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(1);
        Self {
            nonce,
            first_rv: micros.max(1),
        }
    }
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            seed: 0x5eed,
            store: StoreConfig::default(),
            run: None,
        }
    }
}

#[derive(Default)]
struct Counters {
    writes: BTreeMap<(String, String), u64>,
    reads: u64,
    lists: u64,
    watches: u64,
    active_watches: u64,
    errors: u64,
    invalid: u64,
    pruned: BTreeMap<String, u64>,
}

struct Inner {
    clock: Arc<dyn Clock>,
    store: Store,
    rng: Mutex<ChaCha8Rng>,
    counters: Mutex<Counters>,
    faults: faults::Faults,
    network: network::Network,
}

/// The simulated apiserver. Cheap to clone (shared state).
#[derive(Clone)]
pub struct ApiServer {
    inner: Arc<Inner>,
}

const GENERATE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl ApiServer {
    /// A new apiserver with namespaces `default`, `kube-system`, `kube-node-lease` and the CloneSet CRD.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self::with_config(clock, ApiServerConfig::default())
    }

    /// As [`ApiServer::new`], with explicit seed and store tuning.
    pub fn with_config(clock: Arc<dyn Clock>, config: ApiServerConfig) -> Self {
        let store = Store::new(config.store);
        for rt in RESOURCES {
            // Events: one per pod transition, hardly ever read back; compressed, 1.5 KB → ~0.2 KB each.
            // Pods: the other kind that scales with the cluster; LZ4 against the first pod (the rest are alike)
            // costs a few microseconds per read or write, against tens for the JSON work around each.
            if matches!(rt.key().as_str(), "/events" | "/pods") {
                store.register_packed(&rt.key(), resources::indexer_for(rt));
            } else {
                store.register(&rt.key(), resources::indexer_for(rt));
            }
        }
        let mut seed = config.seed;
        if let Some(run) = config.run {
            store.start_at(run.first_rv);
            seed ^= run.nonce;
        }
        let server = Self {
            inner: Arc::new(Inner {
                clock,
                store,
                rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
                counters: Mutex::new(Counters::default()),
                faults: faults::Faults::new(config.seed),
                network: network::Network::default(),
            }),
        };
        server.bootstrap();
        server
    }

    fn bootstrap(&self) {
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let _ = self.create_value(handlers::rt_namespaces(), "", body);
        }
        if let Ok(crd) = serde_json::to_value(insitu_api::crd::crd()) {
            let _ = self.create_value(handlers::rt_crds(), "", crd);
        }
        if let Ok(crd) = serde_json::to_value(insitu_api::statefulset::crd::crd()) {
            let _ = self.create_value(handlers::rt_crds(), "", crd);
        }
    }

    /// The full REST API.
    pub fn router(&self) -> axum::Router {
        axum::Router::new().fallback(dispatch).with_state(self.clone())
    }

    /// An in-process client over [`ApiServer::router`]; must be called inside a tokio runtime.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }

    /// An in-process client the fault injector leaves alone: for test oracles (e.g. `insitu torture`'s
    /// checker and scenario driver), which observe and act as a user, not as the client under test.
    pub fn oracle_client(&self) -> kube::Client {
        let router = self
            .router()
            .layer(axum::middleware::map_request(|mut req: Request| async move {
                req.headers_mut()
                    .insert(ORACLE_HEADER, axum::http::HeaderValue::from_static("1"));
                req
            }));
        kube::Client::new(router, "default")
    }

    /// Serves plain HTTP on `addr` (use port 0 for a free port); returns the bound address.
    pub async fn serve(
        &self,
        addr: SocketAddr,
    ) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let router = self.router();
        let handle = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::warn!(error = %e, "sim apiserver stopped");
            }
        });
        Ok((local, handle))
    }

    /// Stores `body` without the create-time validation, as etcd holds objects written before a validation
    /// existed (or through another path): the tool to test that clients survive what a real apiserver may
    /// serve. Returns the stored object.
    pub fn create_unvalidated(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: &str,
        body: Value,
    ) -> Result<Value, ApiError> {
        let rt = resources::find(group, version, resource)
            .ok_or_else(|| ApiError::bad_request(format!("no resource {group}/{version}/{resource}")))?;
        self.create_value(rt, namespace, body).map(|o| o.value())
    }

    /// The fault injector (no rules unless a test or `insitu torture` adds some).
    pub fn faults(&self) -> &faults::Faults {
        &self.inner.faults
    }

    /// Request counters and object counts.
    pub fn stats(&self) -> ApiStats {
        let c = self.counters();
        let counts = self.inner.store.counts();
        let objects = RESOURCES
            .iter()
            .map(|rt| (rt.qualified(), counts.get(&rt.key()).copied().unwrap_or(0)))
            .collect();
        ApiStats {
            writes: c.writes.clone(),
            reads: c.reads,
            lists: c.lists,
            watches: c.watches,
            active_watches: c.active_watches,
            errors: c.errors,
            invalid: c.invalid,
            pruned: c.pruned.clone(),
            objects,
            resource_version: self.inner.store.current_rv(),
        }
    }

    fn count_pruned(&self, fields: Vec<String>) {
        if fields.is_empty() {
            return;
        }
        let mut c = self.counters();
        for f in fields {
            *c.pruned.entry(f).or_default() += 1;
        }
    }

    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.inner.counters.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// An RFC 3339 timestamp with second precision, as metav1.Time serializes.
    pub(crate) fn now_string(&self) -> String {
        format_time(self.now())
    }

    pub(crate) fn new_uid(&self) -> String {
        let mut b = [0u8; 16];
        self.inner
            .rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fill_bytes(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }

    /// A number in [0, 1) from the server's seeded generator.
    pub(crate) fn random_fraction(&self) -> f64 {
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        f64::from(rng.next_u32()) / (f64::from(u32::MAX) + 1.0)
    }

    pub(crate) fn random_suffix(&self) -> String {
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        (0..5)
            .map(|_| GENERATE_ALPHABET[(rng.next_u32() as usize) % GENERATE_ALPHABET.len()] as char)
            .collect()
    }

    fn count_write(&self, verb: &str, resource: String) {
        *self
            .counters()
            .writes
            .entry((verb.to_string(), resource))
            .or_insert(0) += 1;
    }

    pub(crate) fn watch_started(&self) {
        let mut c = self.counters();
        c.watches += 1;
        c.active_watches += 1;
    }

    pub(crate) fn watch_ended(&self) {
        let mut c = self.counters();
        c.active_watches = c.active_watches.saturating_sub(1);
    }
}

/// RFC 3339, seconds, `Z`.
pub(crate) fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(crate) fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], body.into()).into_response()
}

pub(crate) fn value_response(code: StatusCode, v: &Value) -> Response {
    json_response(code, serde_json::to_vec(v).unwrap_or_default())
}

/// Marks requests of [`ApiServer::oracle_client`] (never faulted).
const ORACLE_HEADER: &str = "x-insitu-sim-oracle";

async fn dispatch(State(server): State<ApiServer>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = parse_query(&parts.uri);
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let seg: Vec<&str> = segs.iter().map(String::as_str).collect();
    if let Some(resp) = discovery::serve(&server, &parts.method, &seg, &parts.headers, &query) {
        return resp;
    }
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limits::REQUEST_BODY_LIMIT) {
        return limits::body_too_large().into_response();
    }
    let body = match axum::body::to_bytes(body, limits::REQUEST_BODY_LIMIT).await {
        Ok(b) => b,
        Err(e) if e.to_string().contains("length limit") => return limits::body_too_large().into_response(),
        Err(e) => return ApiError::bad_request(format!("reading request body: {e}")).into_response(),
    };
    let api = match route(&seg) {
        Some(r) => r,
        None => return ApiError::no_route().into_response(),
    };
    let (group, version, rest, watch_path) = api;
    let Some((rt, ns, name, sub)) = resolve(group, version, &rest) else {
        return ApiError::no_route().into_response();
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let body = request::go_utf8(body, content_type);
    let request = ApiRequest {
        method: parts.method.clone(),
        rt,
        ns,
        name,
        sub,
        query,
        headers: parts.headers,
        body,
        watch_path,
    };
    let verb = write_verb(&request);
    let (latency, fault) = if request.headers.contains_key(ORACLE_HEADER) {
        (None, None)
    } else {
        server.inner.faults.decide(&request)
    };
    if let Some(d) = latency {
        tokio::time::sleep(d).await;
    }
    if let Some(e) = fault {
        server.counters().errors += 1;
        return e.into_response();
    }
    let oracle = request.headers.contains_key(ORACLE_HEADER);
    let named = request
        .headers
        .get(network::CLIENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (namespace, name) = (request.ns.clone(), request.name.clone());
    let resp = match nesting::handling(&server, &request) {
        nesting::Handling::Inline => server.handle(request),
        nesting::Handling::Deep => crate::deep::run(|| server.handle(request)),
        nesting::Handling::Refused(e) => e.into_response(),
    };
    if resp.status().as_u16() >= 400 {
        server.counters().errors += 1;
    }
    if resp.status().as_u16() == 422 && !oracle {
        server.counters().invalid += 1;
        tracing::debug!(?verb, "request refused as invalid (422)");
    }
    if let Some((verb, res)) = verb {
        if let Some(client) = named
            && resp.status().as_u16() < 400
        {
            server.inner.network.record(AcceptedWrite {
                client,
                verb: verb.to_string(),
                resource: res.clone(),
                namespace,
                name,
            });
        }
        server.count_write(verb, res);
    }
    resp
}

fn write_verb(r: &ApiRequest) -> Option<(&'static str, String)> {
    let res = match &r.sub {
        Some(s) => format!("{}/{}", r.rt.qualified(), s),
        None => r.rt.qualified(),
    };
    let verb = match (&r.method, r.name.is_some(), r.sub.as_deref()) {
        (&Method::POST, false, _) => "create",
        (&Method::POST, true, Some(_)) => "create",
        (&Method::PUT, true, _) => "update",
        (&Method::PATCH, true, _) => "patch",
        (&Method::DELETE, true, None) => "delete",
        (&Method::DELETE, false, None) => "deletecollection",
        _ => return None,
    };
    Some((verb, res))
}
