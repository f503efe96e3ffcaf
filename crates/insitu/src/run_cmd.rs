//! `insitu run`: the controller against a real cluster, with `/metrics`, `/healthz` and `/readyz`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::routing::get;
use std::time::Duration;

use axum::http::StatusCode;
use insitu_controller::health::{Health, Leadership, Verdict};
use insitu_controller::leader::{LeaderElectionConfig, LeaderElector};
use insitu_controller::{Config, Metrics, SystemClock};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Only watch this namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Address for /metrics, /healthz, /readyz. Loopback by default (a local run exposes nothing); in a
    /// cluster give `0.0.0.0:8080` so the kubelet's probes and Prometheus reach it (deploy/ does).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub metrics_addr: SocketAddr,
    /// Seconds running reconciles get after SIGTERM before the controller stops anyway (keep it below the
    /// pod's terminationGracePeriodSeconds, 30 in deploy/, so the Lease is released before SIGKILL).
    #[arg(long, default_value_t = 20)]
    pub shutdown_timeout_seconds: u64,
    /// Kruise feature gates, e.g. `CloneSetPartitionRollback=true`.
    #[arg(long, default_value = "")]
    pub feature_gates: String,
    /// Concurrent CloneSet reconciles.
    #[arg(long, default_value_t = 3)]
    pub workers: u16,
    /// Elect a leader on a coordination.k8s.io Lease; only the leader runs the controller. A replica that loses
    /// the lease exits with status 1 (to be restarted as a standby).
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "insitu-system")]
    pub lease_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "insitu-cloneset-controller")]
    pub lease_name: String,
    /// This replica's identity in the Lease (default: $POD_NAME, else hostname + random suffix).
    #[arg(long, env = "POD_NAME")]
    pub leader_identity: Option<String>,
    /// Seconds a non-renewed Lease blocks the standbys.
    #[arg(long, default_value_t = 15)]
    pub lease_duration_seconds: u64,
    /// Seconds a leader keeps trying to renew before it steps down.
    #[arg(long, default_value_t = 10)]
    pub renew_deadline_seconds: u64,
    /// Seconds between acquire/renew attempts.
    #[arg(long, default_value_t = 2)]
    pub retry_period_seconds: u64,
    /// Where the CloneSet conversion webhook (HTTPS) listens.
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_addr: SocketAddr,
    /// For a controller outside the cluster: the URL the apiserver calls for conversions (written into the
    /// CRD), e.g. `https://127.0.0.1:9443/convert`. Default: the in-cluster Service (`--webhook-service`).
    #[arg(long)]
    pub webhook_url: Option<String>,
    /// The webhook's Service, `namespace/name` (port 443, path /convert), as deploy/webhook.yaml creates it.
    #[arg(long, default_value = "insitu-system/insitu-webhook")]
    pub webhook_service: String,
    /// The Secret (`namespace/name`) holding the webhook's CA and serving certificate, shared by replicas.
    #[arg(long, default_value = "insitu-system/insitu-webhook-certs")]
    pub webhook_secret: String,
    /// Lifetime of the generated certificates; they are renewed when a third of it is left.
    #[arg(long, default_value_t = 365 * 24 * 3600)]
    pub webhook_cert_validity_seconds: u64,
    /// How the caches fill at start and after a watch expires: `stream` (a watch with sendInitialEvents: objects
    /// one at a time, no whole-list response held in memory), `list` (one LIST from the watch cache), or `auto`
    /// (stream where the server serves it, probed once at start).
    #[arg(long, default_value = "list")]
    pub initial_list: insitu_controller::initial_list::InitialList,
    /// Do not serve the conversion webhook (then v1alpha1 requests fail on a real apiserver whose CRD stores
    /// v1beta1, unless something else converts).
    #[arg(long)]
    pub no_webhook: bool,
    /// The workloads to control, comma-separated: `cloneset` (always on) and `statefulset`, Kruise's Advanced
    /// StatefulSet (`statefulsets.apps.kruise.io`): a first slice, off by default until Kruise's StatefulSet
    /// specs run against it (what works and what is not built yet: docs/advanced-statefulset.md). Needs its
    /// CRD (`insitu crd`) and RBAC for statefulsets and their status.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cloneset")]
    pub workloads: Vec<Workload>,
}

/// A workload `insitu run` can control.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// CloneSets (`clonesets.apps.kruise.io`).
    Cloneset,
    /// Advanced StatefulSets (`statefulsets.apps.kruise.io`).
    Statefulset,
}

fn split_ref(s: &str, what: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() => Ok((ns.into(), name.into())),
        _ => anyhow::bail!("{what} {s:?}: give it as namespace/name"),
    }
}

/// The webhook configuration from the flags (None with `--no-webhook`).
fn webhook_config(args: &RunArgs) -> anyhow::Result<Option<insitu_controller::webhook::WebhookConfig>> {
    if args.no_webhook {
        return Ok(None);
    }
    let target = match &args.webhook_url {
        Some(url) if url.starts_with("https://") => insitu_api::crd::WebhookTarget::Url(url.clone()),
        Some(url) => anyhow::bail!("--webhook-url {url:?}: the apiserver only calls https:// webhooks"),
        None => {
            let (namespace, name) = split_ref(&args.webhook_service, "--webhook-service")?;
            insitu_api::crd::WebhookTarget::Service {
                namespace,
                name,
                port: 443,
            }
        }
    };
    let (secret_namespace, secret_name) = split_ref(&args.webhook_secret, "--webhook-secret")?;
    Ok(Some(insitu_controller::webhook::WebhookConfig {
        addr: args.webhook_addr,
        target,
        secret_namespace,
        secret_name,
        validity: Duration::from_secs(args.webhook_cert_validity_seconds.max(60)),
        patch_crd: true,
    }))
}

/// Why the controller stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Running,
    Signal,
    LostLease,
}

/// SIGINT or SIGTERM (Kubernetes stops pods with SIGTERM).
pub(crate) async fn termination_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A probe answer: 200 with `ok`, or 503 with the reasons.
fn probe(v: Verdict) -> (StatusCode, String) {
    let code = if v.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, v.body())
}

/// Keeps `insitu_leader` and the readiness standing in step with the elector.
fn publish_leadership(elector: &LeaderElector, health: &Arc<Health>, metrics: &Arc<Metrics>) {
    let (mut leading, mut ok) = (elector.subscribe(), elector.rounds_ok());
    let (health, metrics) = (health.clone(), metrics.clone());
    tokio::spawn(async move {
        loop {
            let (l, o) = (*leading.borrow_and_update(), *ok.borrow_and_update());
            metrics.leader.set(i64::from(l));
            health.set_leadership(if l {
                Leadership::Leading
            } else {
                Leadership::Standby(o)
            });
            tokio::select! {
                r = leading.changed() => if r.is_err() { break },
                r = ok.changed() => if r.is_err() { break },
            }
        }
        metrics.leader.set(0);
    });
}

/// Hands the Lease back, bounded (an unreachable apiserver must not hold the exit).
async fn release(elector: LeaderElector) {
    if tokio::time::timeout(Duration::from_secs(5), elector.release())
        .await
        .is_err()
    {
        tracing::warn!("could not release the leader lease within 5s: it expires on its own");
    }
}

/// `$POD_NAME` is taken by clap; otherwise hostname plus a random suffix, as client-go does.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "insitu".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{host}_{:08x}", nanos ^ std::process::id().rotate_left(16))
}

pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Before the runtime's threads exist: their arenas are made with it.
    crate::allocator::set_dirty_decay(crate::allocator::CONTROLLER_DIRTY_DECAY_MS);
    crate::allocator::disable_thread_cache();
    let gates = insitu_core::FeatureGates::parse(&args.feature_gates).map_err(anyhow::Error::msg)?;
    if !args.workloads.contains(&Workload::Cloneset) {
        // The caches and the executor are the CloneSet controller's; the StatefulSet controller rides on them.
        anyhow::bail!("--workloads must include cloneset (the CloneSet controller always runs)");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_start(|| {
            crate::allocator::disable_thread_cache();
        })
        .build()?;
    let webhook = webhook_config(&args)?;
    rt.block_on(async move {
        let client = insitu_controller::client::from_kubeconfig(args.kubeconfig.as_deref(), "controller").await?;
        // Every replica (standbys too) serves the conversion webhook: the apiserver may call any of them.
        let webhook_ready = match webhook {
            Some(cfg) => Some(insitu_controller::webhook::start(client.clone(), cfg).await?.ready),
            None => None,
        };
        let metrics = Arc::new(Metrics::new());
        metrics.set_allocator_stats(crate::allocator::stats);
        let config = Config {
            namespace: args.namespace.clone(),
            gates,
            workers: args.workers,
            shutdown_timeout: Duration::from_secs(args.shutdown_timeout_seconds),
            initial_list: args.initial_list,
            statefulset: args.workloads.contains(&Workload::Statefulset),
            ..Config::default()
        };
        let health = Arc::new(Health::new(Arc::new(SystemClock), config.wedged_after));
        let m = metrics.clone();
        let (live, ready) = (health.clone(), health.clone());
        let wh = webhook_ready.clone();
        let app = Router::new()
            .route("/metrics", get(move || async move { m.render() }))
            .route("/healthz", get(move || async move { probe(live.live()) }))
            .route(
                "/readyz",
                get(move || {
                    use axum::response::IntoResponse as _;
                    // Ready once the conversion webhook answers over TLS and the CRD trusts its CA, too.
                    let webhook_ok = wh.as_ref().is_none_or(|r| *r.borrow());
                    let resp = probe(ready.ready()).into_response();
                    async move {
                        if webhook_ok {
                            resp
                        } else {
                            (axum::http::StatusCode::SERVICE_UNAVAILABLE, "conversion webhook not ready").into_response()
                        }
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind(args.metrics_addr)
            .await
            .with_context(|| format!("binding {}", args.metrics_addr))?;
        tracing::info!(addr = %args.metrics_addr, "serving /metrics /healthz /readyz");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        if let Some(mut r) = webhook_ready {
            // v1alpha1 reads need the conversion webhook (storage is v1beta1): start watching once it answers.
            tracing::info!("waiting for the conversion webhook to answer");
            tokio::select! {
                res = r.wait_for(|ok| *ok) => { res.map_err(|_| anyhow::anyhow!("the conversion webhook stopped"))?; }
                _ = termination_signal() => return Ok(ExitCode::SUCCESS),
            }
            tracing::info!("conversion webhook ready");
        }
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(Stop::Running);
        let elector = if args.leader_elect {
            let identity = args.leader_identity.clone().unwrap_or_else(default_identity);
            let le = LeaderElectionConfig {
                lease_duration: Duration::from_secs(args.lease_duration_seconds.max(1)),
                renew_deadline: Duration::from_secs(args.renew_deadline_seconds.max(1)),
                retry_period: Duration::from_secs(args.retry_period_seconds.max(1)),
                ..LeaderElectionConfig::new(&args.lease_namespace, &args.lease_name, &identity)
            };
            tracing::info!(%identity, lease = %format!("{}/{}", le.namespace, le.name), "waiting for leadership");
            let elector = LeaderElector::spawn(client.clone(), le);
            health.set_leadership(Leadership::Standby(true));
            publish_leadership(&elector, &health, &metrics);
            let mut leading = elector.subscribe();
            tokio::select! {
                r = leading.wait_for(|l| *l) => {
                    if r.is_err() {
                        anyhow::bail!("leader election stopped before acquiring the lease");
                    }
                }
                _ = termination_signal() => {
                    release(elector).await;
                    return Ok(ExitCode::SUCCESS);
                }
            }
            let tx = stop_tx.clone();
            tokio::spawn(async move {
                // A closed channel (elector gone) counts as lost, too.
                let _ = leading.wait_for(|l| !*l).await;
                tx.send_if_modified(|s| {
                    let first = *s == Stop::Running;
                    if first {
                        *s = Stop::LostLease;
                    }
                    first
                });
            });
            Some(elector)
        } else {
            None
        };
        tokio::spawn(async move {
            termination_signal().await;
            stop_tx.send_if_modified(|s| {
                let first = *s == Stop::Running;
                if first {
                    *s = Stop::Signal;
                }
                first
            });
        });
        let mut rx = stop_rx.clone();
        insitu_controller::run_with(client, config, Arc::new(SystemClock), metrics, health, async move {
            let _ = rx.wait_for(|s| *s != Stop::Running).await;
        })
        .await;
        let stop = *stop_rx.borrow();
        if stop == Stop::LostLease {
            tracing::error!("leadership lost; exiting so that this replica restarts as a standby");
            return Ok(ExitCode::from(1));
        }
        if let Some(elector) = elector {
            release(elector).await;
        }
        Ok(ExitCode::SUCCESS)
    })
}
