//! `insitu nodes`: simulated nodes (kubelet, plus scheduler and optionally GC) against any apiserver, like kwok.
//!
//! Registers `--count` Node objects with Lease heartbeats, binds pending pods through `pods/binding`, runs their
//! containers on a real-time clock and writes pod status as a kubelet does, and finalises graceful deletes.
//! Image behaviour is configurable by glob (`--crash-image`, `--pull-fail-image`, `--exit-image`) so e2e suites
//! can roll out a broken version. The nodes also act as kruise-daemon's container-meta controller (env from
//! metadata restarts, `apps.kruise.io/runtime-containers-meta`) unless `--kruise-daemon false`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use insitu_sim::Clock;
use insitu_sim::cluster::{NodesConfig, run_nodes};
use insitu_sim::gc::{self, GcConfig};
use insitu_sim::kubelet::{ImageFailure, ImageProfile, ImageProfiles};
use insitu_sim::scheduler::{self, SchedulerConfig};
use k8s_openapi::jiff::Timestamp;

use crate::run_cmd::client_from;

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
    /// Images matching this glob (`*` wildcards; raw or normalized reference) exit with code 1 shortly after
    /// every start → CrashLoopBackOff. Repeatable, or comma-separated in $INSITU_NODES_CRASH_IMAGES.
    #[arg(
        long = "crash-image",
        value_name = "GLOB",
        env = "INSITU_NODES_CRASH_IMAGES",
        value_delimiter = ','
    )]
    pub crash_images: Vec<String>,
    /// Seconds a crashing image runs before it exits (below a readiness probe's initial delay, the pod never
    /// turns Ready, like an application that fails at startup).
    #[arg(long, default_value_t = 0.5)]
    pub crash_after_seconds: f64,
    /// Images matching this glob never pull → ErrImagePull / ImagePullBackOff. Repeatable, or comma-separated in
    /// $INSITU_NODES_PULL_FAIL_IMAGES.
    #[arg(
        long = "pull-fail-image",
        value_name = "GLOB",
        env = "INSITU_NODES_PULL_FAIL_IMAGES",
        value_delimiter = ','
    )]
    pub pull_fail_images: Vec<String>,
    /// Images matching this glob have a default command that exits 0 at once (e.g. busybox's `sh` with no
    /// terminal): a container that sets no `command` is Completed, then CrashLoopBackOff under restartPolicy
    /// Always. Repeatable, or comma-separated in $INSITU_NODES_EXIT_IMAGES.
    #[arg(
        long = "exit-image",
        value_name = "GLOB",
        env = "INSITU_NODES_EXIT_IMAGES",
        value_delimiter = ','
    )]
    pub exit_images: Vec<String>,
    /// Also act as kruise-daemon's container-meta controller on these nodes: restart containers whose env
    /// from a pod label/annotation changed during an in-place update, and report
    /// `apps.kruise.io/runtime-containers-meta` for pods with such env.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub kruise_daemon: bool,
    /// The registry's digest of a tag, `REF=sha256:<64 hex>` (repeatable): the kubelet reports it as the
    /// container's imageID, so two tags of one digest report the same imageID (an image re-tagged).
    #[arg(long = "image-digest", value_name = "REF=DIGEST")]
    pub image_digests: Vec<String>,
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

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

impl NodesArgs {
    /// The image behaviour these flags describe; a malformed `--image-digest` is an error naming it.
    pub fn images(&self) -> anyhow::Result<ImageProfiles> {
        let default = ImageProfile {
            pull: secs(self.pull_seconds),
            start: secs(self.start_seconds),
            ..ImageProfile::default()
        };
        let mut profiles = ImageProfiles {
            default,
            ..ImageProfiles::default()
        };
        for glob in self.crash_images.iter().filter(|g| !g.is_empty()) {
            let fail = ImageFailure::CrashAfter(secs(self.crash_after_seconds));
            profiles = profiles.with(glob.clone(), ImageProfile { fail, ..default });
        }
        for glob in self.pull_fail_images.iter().filter(|g| !g.is_empty()) {
            let fail = ImageFailure::NeverPulls;
            profiles = profiles.with(glob.clone(), ImageProfile { fail, ..default });
        }
        for glob in self.exit_images.iter().filter(|g| !g.is_empty()) {
            let fail = ImageFailure::ExitsAtOnce;
            profiles = profiles.with(glob.clone(), ImageProfile { fail, ..default });
        }
        for spec in &self.image_digests {
            let (reference, digest) = spec.split_once('=').ok_or_else(|| {
                anyhow::anyhow!(
                    "--image-digest {spec:?}: expected REF=sha256:<64 hex>, e.g. nginx:alpine=sha256:…"
                )
            })?;
            profiles = profiles
                .with_digest(reference.trim(), digest.trim())
                .map_err(|e| anyhow::anyhow!("--image-digest {spec:?}: {e}"))?;
        }
        Ok(profiles)
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
            ..NodesConfig::default()
        })
    }
}

pub fn main(args: NodesArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let client = client_from(args.kubeconfig.as_deref(), "nodes").await?;
        // Real time: a SimClock at speed 1 on an unpaused runtime.
        let clock: Arc<dyn Clock> = insitu_sim::SimClock::new(Timestamp::now(), 1.0);
        let config = args.config()?;
        tracing::info!(
            nodes = config.nodes,
            prefix = %config.node_prefix,
            scheduler = args.scheduler,
            gc = args.gc,
            volumes = args.volumes,
            crash_images = ?args.crash_images,
            pull_fail_images = ?args.pull_fail_images,
            exit_images = ?args.exit_images,
            kruise_daemon = args.kruise_daemon,
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
