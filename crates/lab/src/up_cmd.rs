//! `insitu up`: the embedded simulated cluster plus the controller, served on 127.0.0.1 for plain `kubectl`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use insitu_controller::{Config, Metrics};
use insitu_sim::apiserver::{ApiServerConfig, RunIdentity};
use insitu_sim::cluster::{SimCluster, SimConfig};
use insitu_sim::store::StoreConfig;
use k8s_openapi::jiff::Timestamp;

use crate::simtime::SharedClock;
use crate::{up_kubeconfig, up_tls};

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Address of the simulated apiserver (HTTPS with a certificate generated at start, loopback only).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub addr: SocketAddr,
    /// Where to write the kubeconfig for kubectl (mode 0600, holding this run's bearer token). An existing file
    /// is only replaced if an earlier `insitu up` wrote it; a symbolic link is never written through.
    #[arg(long, default_value = "insitu.kubeconfig")]
    pub kubeconfig: std::path::PathBuf,
    /// Replace the --kubeconfig file even if `insitu up` did not write it.
    #[arg(long)]
    pub force: bool,
    /// Simulated nodes.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Seed for the simulated cluster's randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Do not run the CloneSet controller (to run `insitu run` against the sim separately: the namespace
    /// `insitu-system`, where it keeps its webhook Secret and Lease, is created as deploy/ would create it, and the
    /// command to start it is printed).
    #[arg(long)]
    pub no_controller: bool,
    /// Cluster time runs this many times as fast as real time (grace periods, probes, pulls, progress
    /// deadlines); 1 is real time. Timestamps the cluster writes run ahead of the wall clock by as much.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Serve the embedded controller's Prometheus `/metrics` on this address (loopback), e.g. 127.0.0.1:8080.
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// The most bytes of JSON the cluster's objects may take together, as etcd's flag of this name bounds a
    /// real cluster's: a write past it is refused as kube-apiserver passes etcd's refusal on (500,
    /// `etcdserver: mvcc: database space exceeded`). The default keeps the process under 1 GiB of memory
    /// whatever is applied: a CloneSet of 2147483647 replicas stops at about 40,000 pods (a debug build: 40,549
    /// pods and 27,770 Events, peak RSS 795 MiB, then steady at 690 MiB while the controller retries); 0: no
    /// bound.
    #[arg(long, default_value_t = DEFAULT_QUOTA_BYTES)]
    pub quota_backend_bytes: u64,
    #[command(flatten)]
    pub images: crate::image_flags::ImageFlags,
}

/// `--quota-backend-bytes`' default: 96 MiB of objects' JSON.
const DEFAULT_QUOTA_BYTES: u64 = 96 << 20;

/// `path` made absolute against the current directory (what `insitu up` prints must work from anywhere).
fn absolute(path: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The seed's example CloneSet, by absolute path: under the current directory, else in the source tree this
/// binary was built from; `None` when neither has it.
fn example_path() -> Option<std::path::PathBuf> {
    let rel = std::path::Path::new("examples/cloneset-demo.yaml");
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    [rel.to_path_buf(), built]
        .into_iter()
        .find(|p| p.is_file())
        .map(|p| std::fs::canonicalize(&p).unwrap_or_else(|_| absolute(&p)))
}

/// Serves `/metrics` of the embedded controller.
async fn serve_metrics(addr: SocketAddr, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "--metrics-addr {addr} is not a loopback address: keep the embedded cluster's endpoints on 127.0.0.1"
    );
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move { metrics.render() }),
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding --metrics-addr {addr}"))?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(())
}

/// The runtime for `--speed`: real time on all cores at 1; otherwise tokio's paused clock paced to
/// `speed` × real time (as `insitu demo --speed`), on one thread.
fn runtime(speed: f64) -> anyhow::Result<tokio::runtime::Runtime> {
    anyhow::ensure!(
        speed.is_finite() && speed > 0.0,
        "--speed {speed}: give a positive factor, e.g. --speed 10 (ten times real time)"
    );
    if speed == 1.0 {
        return Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?);
    }
    Ok(crate::simtime::runtime()?)
}

pub fn main(args: UpArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.addr.ip().is_loopback(),
        "--addr {} is not a loopback address: the simulated apiserver is for this machine only, keep it on 127.0.0.1",
        args.addr
    );
    let images = args.images.profiles(SimConfig::default().images)?;
    let rt = runtime(args.speed)?;
    rt.block_on(async move {
        if args.speed != 1.0 {
            crate::simtime::spawn_pacer(args.speed);
        }
        let clock = insitu_sim::SimClock::new(Timestamp::now(), 1.0);
        let cluster = SimCluster::start(
            SimConfig {
                nodes: args.nodes,
                seed: args.seed,
                images,
                apiserver: ApiServerConfig {
                    run: Some(RunIdentity::now(u64::from_le_bytes(
                        up_kubeconfig::random_bytes::<8>()?,
                    ))),
                    store: StoreConfig {
                        quota_bytes: (args.quota_backend_bytes > 0)
                            .then(|| usize::try_from(args.quota_backend_bytes).unwrap_or(usize::MAX)),
                        ..StoreConfig::default()
                    },
                    ..ApiServerConfig::default()
                },
                ..Default::default()
            },
            clock.clone(),
        )
        .await
        .context("starting the simulated cluster")?;
        let token = up_kubeconfig::new_token()?;
        let certs = up_tls::generate()?;
        let router = cluster.apiserver.router_with_token(token.clone());
        let (addr, server) = up_tls::serve(args.addr, &certs, router).await?;
        let kubeconfig = absolute(&args.kubeconfig);
        let contents = up_kubeconfig::kubeconfig_yaml(addr, &up_tls::ca_data(&certs), &token);
        up_kubeconfig::write(&kubeconfig, &contents, args.force)?;
        let metrics = Arc::new(Metrics::new());
        if let Some(m) = args.metrics_addr {
            serve_metrics(m, metrics.clone()).await?;
        }
        let speed = if args.speed == 1.0 {
            String::new()
        } else {
            format!(", cluster time at {}x real time", args.speed)
        };
        println!(
            "simulated cluster up: {} nodes, apiserver https://{addr}{speed}",
            args.nodes
        );
        if let Some(m) = args.metrics_addr {
            println!("  controller metrics: http://{m}/metrics");
        }
        println!("  export KUBECONFIG={}", kubeconfig.display());
        match example_path() {
            Some(p) => println!("  kubectl apply -f {}", p.display()),
            None => println!("  kubectl apply -f <the insitu repository>/examples/cloneset-demo.yaml"),
        }
        if args.no_controller {
            install_namespace(&cluster.client).await?;
            println!(
                "  insitu run --kubeconfig {} --webhook-addr 127.0.0.1:9443 --webhook-url https://127.0.0.1:9443 --metrics-addr 127.0.0.1:8080",
                kubeconfig.display()
            );
        }
        println!("Ctrl-C to stop.");
        if args.no_controller {
            let _ = tokio::signal::ctrl_c().await;
        } else {
            insitu_controller::run(
                cluster.client.clone(),
                Config::default(),
                Arc::new(SharedClock(clock)),
                metrics,
                async {
                    let _ = tokio::signal::ctrl_c().await;
                },
            )
            .await;
        }
        server.abort();
        drop(cluster);
        Ok(ExitCode::SUCCESS)
    })
}

/// The namespace deploy/ creates for the controller (its webhook Secret, its Lease): what `insitu run` expects
/// to find on a cluster it is installed on (`insitu run --lease-namespace`'s default).
async fn install_namespace(client: &kube::Client) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": "insitu-system"}}))?;
    match namespaces.create(&kube::api::PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).context("creating the namespace insitu-system"),
    }
}
