//! `insitu up`: the embedded simulated cluster plus the controller, served on 127.0.0.1 for plain `kubectl`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use insitu_controller::{Config, Metrics};
use insitu_sim::cluster::{SimCluster, SimConfig};
use k8s_openapi::jiff::Timestamp;

use crate::simtime::SharedClock;

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Address of the simulated apiserver (plain HTTP, loopback only).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub addr: SocketAddr,
    /// Where to write the kubeconfig for kubectl.
    #[arg(long, default_value = "insitu.kubeconfig")]
    pub kubeconfig: std::path::PathBuf,
    /// Simulated nodes.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Seed for the simulated cluster's randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Do not run the CloneSet controller (to run `insitu run` against the sim separately).
    #[arg(long)]
    pub no_controller: bool,
}

/// A kubeconfig pointing kubectl at the simulated apiserver.
pub fn kubeconfig_yaml(addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: insitu-sim\n  cluster:\n    server: http://{addr}\ncontexts:\n- name: insitu-sim\n  context:\n    cluster: insitu-sim\n    user: insitu\n    namespace: default\ncurrent-context: insitu-sim\nusers:\n- name: insitu\n  user: {{}}\n"
    )
}

pub fn main(args: UpArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.addr.ip().is_loopback(),
        "--addr {} is not a loopback address: the simulated apiserver has no authentication, keep it on 127.0.0.1",
        args.addr
    );
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let clock = insitu_sim::SimClock::new(Timestamp::now(), 1.0);
        let cluster = SimCluster::start(
            SimConfig {
                nodes: args.nodes,
                seed: args.seed,
                ..Default::default()
            },
            clock.clone(),
        )
        .await
        .context("starting the simulated cluster")?;
        let (addr, server) = cluster
            .apiserver
            .serve(args.addr)
            .await
            .with_context(|| format!("binding {}", args.addr))?;
        std::fs::write(&args.kubeconfig, kubeconfig_yaml(addr))
            .with_context(|| format!("writing {}", args.kubeconfig.display()))?;
        println!(
            "simulated cluster up: {} nodes, apiserver http://{addr}",
            args.nodes
        );
        println!("  export KUBECONFIG={}", args.kubeconfig.display());
        println!("  kubectl apply -f examples/cloneset-demo.yaml");
        println!("Ctrl-C to stop.");
        let metrics = Arc::new(Metrics::new());
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
