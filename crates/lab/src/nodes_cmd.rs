//! `insitu nodes`: simulated nodes (kubelet, plus scheduler and optionally GC) against any apiserver, like kwok.
//!
//! Registers `--count` Node objects with Lease heartbeats, binds pending pods through `pods/binding`, runs their
//! containers on a real-time clock and writes pod status as a kubelet does, and finalises graceful deletes.
//! Image behaviour is configurable by glob (`--crash-image`, `--pull-fail-image`, `--exit-image`) so e2e suites
//! can roll out a broken version. The nodes also act as kruise-daemon's container-meta controller (env from
//! metadata restarts, `apps.kruise.io/runtime-containers-meta`) unless `--kruise-daemon false`, and execute
//! Kruise's ImagePullJobs as its ImagePullJob controller and kruise-daemon would, unless `--image-pull-jobs false`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use insitu_sim::Clock;
use insitu_sim::cluster::{NodesConfig, run_nodes};
use insitu_sim::gc::{self, GcConfig};
use insitu_sim::kubelet::{ImageProfile, ImageProfiles};
use insitu_sim::scheduler::{self, SchedulerConfig};
use k8s_openapi::jiff::Timestamp;

use crate::image_flags::{ImageFlags, secs};
use insitu_controller::client::from_kubeconfig;

#[derive(clap::Args, Debug, Clone)]
pub struct NodesArgs {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Number of simulated nodes.
    #[arg(long, default_value_t = 3)]
    pub count: usize,
    /// Node name prefix (`<prefix>0`, `<prefix>1`, ...).
    #[arg(long, default_value = "sim-node-")]
    pub node_prefix: String,
    /// Seed for container IDs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Seconds to pull an image onto a node (once per node and image).
    #[arg(long, default_value_t = 2.0)]
    pub pull_seconds: f64,
    /// Seconds from "image present" to "container running".
    #[arg(long, default_value_t = 1.0)]
    pub start_seconds: f64,
    #[command(flatten)]
    pub failures: ImageFlags,
    /// Also act as kruise-daemon's container-meta controller on these nodes: restart containers whose env
    /// from a pod label/annotation changed during an in-place update, and report
    /// `apps.kruise.io/runtime-containers-meta` for pods with such env.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub kruise_daemon: bool,
    /// Also execute Kruise's ImagePullJobs (`imagepulljobs.apps.kruise.io`, where served) on these nodes, as
    /// Kruise's ImagePullJob controller and kruise-daemon do: pull the image onto the selected nodes and write
    /// the job's status. Turn it off where Kruise's own controller runs, or in all but one `insitu nodes`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub image_pull_jobs: bool,
    /// Node lease renewal interval in seconds (0 disables heartbeats).
    #[arg(long, default_value_t = 10)]
    pub heartbeat_seconds: u64,
    /// Also run the simulated scheduler (binds pods via `pods/binding`); disable when a kube-scheduler runs.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub scheduler: bool,
    /// Also bind new PersistentVolumeClaims at once, like a dynamic provisioner (the simulated scheduler waits
    /// for bound claims); disable on clusters with a real provisioner.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub volumes: bool,
    /// Also run the simulated garbage collector (CloneSet → Pods/ControllerRevisions cascade), for clusters
    /// without kube-controller-manager.
    #[arg(long)]
    pub gc: bool,
    /// Do not record kubelet/scheduler Events.
    #[arg(long)]
    pub no_events: bool,
}

impl NodesArgs {
    /// The image behaviour these flags describe; a malformed `--image-digest` is an error naming it.
    pub fn images(&self) -> anyhow::Result<ImageProfiles> {
        let default = ImageProfile {
            pull: secs(self.pull_seconds),
            start: secs(self.start_seconds),
            ..ImageProfile::default()
        };
        let profiles = ImageProfiles {
            default,
            ..ImageProfiles::default()
        };
        self.failures.profiles(profiles)
    }

    /// The kubelet configuration these flags describe.
    pub fn config(&self) -> anyhow::Result<NodesConfig> {
        Ok(NodesConfig {
            nodes: self.count,
            node_prefix: self.node_prefix.clone(),
            seed: self.seed,
            images: self.images()?,
            heartbeat: (self.heartbeat_seconds > 0).then(|| Duration::from_secs(self.heartbeat_seconds)),
            events: !self.no_events,
            kruise_daemon: self.kruise_daemon,
            image_pull_jobs: self.image_pull_jobs,
            ..NodesConfig::default()
        })
    }
}

pub fn main(args: NodesArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let client = from_kubeconfig(args.kubeconfig.as_deref(), "nodes").await?;
        // Real time: a SimClock at speed 1 on an unpaused runtime.
        let clock: Arc<dyn Clock> = insitu_sim::SimClock::new(Timestamp::now(), 1.0);
        let config = args.config()?;
        tracing::info!(
            nodes = config.nodes,
            prefix = %config.node_prefix,
            scheduler = args.scheduler,
            gc = args.gc,
            volumes = args.volumes,
            crash_images = ?args.failures.crash_images,
            pull_fail_images = ?args.failures.pull_fail_images,
            exit_images = ?args.failures.exit_images,
            kruise_daemon = args.kruise_daemon,
            image_pull_jobs = args.image_pull_jobs,
            "starting simulated nodes"
        );
        let mut tasks = tokio::task::JoinSet::new();
        if args.scheduler {
            let cfg = SchedulerConfig {
                events: !args.no_events,
                ..SchedulerConfig::default()
            };
            tasks.spawn(scheduler::run(client.clone(), clock.clone(), cfg));
        }
        if args.volumes {
            tasks.spawn(insitu_sim::volumes::run(client.clone(), clock.clone()));
        }
        if args.gc {
            tasks.spawn(gc::run(client.clone(), clock.clone(), GcConfig::default()));
        }
        tokio::select! {
            r = run_nodes(client, clock, config) => {
                r?;
                anyhow::bail!("simulated nodes stopped");
            }
            _ = tokio::signal::ctrl_c() => {}
            _ = sigterm() => {}
        }
        tracing::info!("stopping simulated nodes");
        Ok(ExitCode::SUCCESS)
    })
}

async fn sigterm() {
    #[cfg(unix)]
    {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
            return;
        }
    }
    std::future::pending::<()>().await;
}
