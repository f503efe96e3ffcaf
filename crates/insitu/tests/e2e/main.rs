//! End-to-end scenarios for the CloneSet controller, against a real kube-apiserver (driven by `e2e/run`) or
//! against the embedded simulated cluster (parity mode). A custom harness (`harness = false`): scenarios run
//! concurrently, each in its own namespace, phase by phase, and the run ends with `N passed, M failed`.
//!
//! Modes, by environment:
//! - `INSITU_E2E_KUBECONFIG=<admin kubeconfig>`: a real cluster prepared by `e2e/run` (controllers, `insitu
//!   nodes`, audit log in `INSITU_E2E_WORKDIR`, ServiceAccount kubeconfig in `INSITU_E2E_SA_KUBECONFIG`).
//! - `INSITU_E2E_SIM=1`: an in-process simulated cluster + controller on virtual time; scenarios that need a
//!   real control plane (RBAC, leader failover, audit) are skipped.
//!   With `INSITU_E2E_REAL_NODE=<node>` the nodes are one real kubelet (`e2e/run --real-nodes`): scenarios
//!   that only simulated nodes can run are skipped with the reason, and kubelet-behaviour scenarios also check
//!   what only a real kubelet can falsify (registry digests, containerIDs, HTTP from the pod IP, ...).
//! - `INSITU_E2E_RECORD_DIR=<dir>`: every scenario's pod states and Events are recorded there (`record.rs`)
//!   for the sim-vs-real parity comparer `e2e/parity`.
//! - neither: prints that it is skipped and exits 0 (so `cargo test --workspace` stays green).
//!
//! Arguments that do not start with `-` filter scenarios by substring.

mod agent_policy;
mod hostile;
mod inplace_meta;
mod paging;
mod realnode;
mod record;
mod scenarios;
mod tools;
mod util;
mod versions;
mod whatif;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::time::Instant;

/// Where the scenarios run.
pub struct Env {
    /// Cluster-admin client.
    pub client: kube::Client,
    /// Present on a real control plane.
    pub real: Option<Real>,
    /// An image the simulated kubelet crash-loops (`insitu nodes --crash-image`).
    pub crash_image: String,
    /// Present when the nodes are one real kubelet (`e2e/run --real-nodes`).
    pub real_node: Option<realnode::RealNode>,
}

/// The real control plane prepared by `e2e/run`.
pub struct Real {
    pub workdir: PathBuf,
    pub sa_kubeconfig: PathBuf,
    pub lease_namespace: String,
    pub lease_name: String,
    /// Identities of the controller replicas (pid files `controller-<identity>.pid` in the workdir).
    pub identities: Vec<String>,
}

impl Real {
    pub async fn sa_client(&self) -> anyhow::Result<kube::Client> {
        let kc = kube::config::Kubeconfig::read_from(&self.sa_kubeconfig)?;
        let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
        // Tag the e2e's own requests with this token, so the audit check can tell them from the controller's.
        cfg.headers.push((http_user_agent(), "insitu-e2e".parse()?));
        Ok(kube::Client::try_from(cfg)?)
    }

    pub fn controller_pid(&self, identity: &str) -> anyhow::Result<u32> {
        let f = self.workdir.join(format!("controller-{identity}.pid"));
        let s = std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        Ok(s.trim().parse()?)
    }

    pub fn controller_logs(&self) -> anyhow::Result<Vec<PathBuf>> {
        Ok(self
            .identities
            .iter()
            .map(|i| self.workdir.join(format!("controller-{i}.log")))
            .collect())
    }
}

fn http_user_agent() -> axum::http::HeaderName {
    axum::http::header::USER_AGENT
}

type ScenarioFn = for<'a> fn(&'a Env, &'a str) -> BoxFuture<'a, anyhow::Result<()>>;

struct Scenario {
    name: &'static str,
    /// Scenarios of one phase run concurrently; phases run in order.
    phase: u8,
    real_only: bool,
    timeout: Duration,
    run: ScenarioFn,
}

macro_rules! scenario {
    ($name:ident, $phase:expr, $real_only:expr, $secs:expr) => {
        Scenario {
            name: stringify!($name),
            phase: $phase,
            real_only: $real_only,
            timeout: Duration::from_secs($secs),
            run: |env, ns| scenarios::$name(env, ns).boxed(),
        }
    };
    ($module:ident :: $name:ident, $phase:expr, $real_only:expr, $secs:expr) => {
        Scenario {
            name: stringify!($name),
            phase: $phase,
            real_only: $real_only,
            timeout: Duration::from_secs($secs),
            run: |env, ns| $module::$name(env, ns).boxed(),
        }
    };
}

fn all_scenarios() -> Vec<Scenario> {
    vec![
        scenario!(rbac, 1, true, 60),
        // The node agent's ServiceAccount against deploy/agent/'s RBAC and admission policy.
        scenario!(agent_policy::agent_least_privilege, 1, true, 120),
        scenario!(crd_validation, 1, false, 60),
        scenario!(paging::paging, 1, false, 60),
        scenario!(seed, 1, false, 360),
        scenario!(recreate, 1, false, 240),
        scenario!(partition, 1, false, 300),
        scenario!(pause_resume, 1, false, 240),
        scenario!(rollback, 1, false, 300),
        scenario!(scale, 1, false, 240),
        scenario!(broken_image, 1, false, 300),
        scenario!(pvc, 1, false, 300),
        scenario!(env_from_label, 1, false, 240),
        scenario!(launch_priority, 1, false, 300),
        scenario!(resize, 1, false, 300),
        scenario!(versions::v1beta1, 1, false, 240),
        scenario!(tools::tools, 1, false, 360),
        scenario!(hostile::hostile_parity, 1, true, 180),
        // Disruptive: kills the leading controller; runs alone.
        scenario!(leader_kill, 2, true, 360),
        // Reads the audit log of everything above.
        scenario!(api_hygiene, 3, true, 60),
        // Predicted vs actual rollouts: timing-sensitive, so alone after everything else.
        scenario!(whatif::whatif, 4, false, 900),
    ]
}

fn main() -> ExitCode {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let crash_image = std::env::var("INSITU_E2E_CRASH_IMAGE").unwrap_or_else(|_| "nginx:1.21.0-crash".into());
    let result = if let Ok(kubeconfig) = std::env::var("INSITU_E2E_KUBECONFIG") {
        let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => return fail_setup(e.into()),
        };
        rt.block_on(async {
            let env = real_env(PathBuf::from(kubeconfig), crash_image).await?;
            Ok::<_, anyhow::Error>(run_all(Arc::new(env), &filters).await)
        })
    } else if std::env::var("INSITU_E2E_SIM").is_ok_and(|v| v == "1") {
        let rt = match insitu_lab::simtime::runtime() {
            Ok(rt) => rt,
            Err(e) => return fail_setup(e.into()),
        };
        rt.block_on(async {
            let (env, _cluster) = sim_env(crash_image).await?;
            Ok::<_, anyhow::Error>(run_all(Arc::new(env), &filters).await)
        })
    } else {
        println!(
            "e2e: skipped (set INSITU_E2E_KUBECONFIG via ./e2e/run, or INSITU_E2E_SIM=1 for the embedded cluster)"
        );
        return ExitCode::SUCCESS;
    };
    match result {
        Ok((passed, failed)) => {
            println!("{passed} passed, {failed} failed");
            if failed == 0 && passed > 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => fail_setup(e),
    }
}

fn fail_setup(e: anyhow::Error) -> ExitCode {
    println!("e2e setup failed: {e:#}");
    println!("0 passed, 1 failed");
    ExitCode::FAILURE
}

async fn real_env(kubeconfig: PathBuf, crash_image: String) -> anyhow::Result<Env> {
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    let client = kube::Client::try_from(cfg)?;
    let var =
        |k: &str| std::env::var(k).with_context(|| format!("{k} must be set with INSITU_E2E_KUBECONFIG"));
    let real = Real {
        workdir: PathBuf::from(var("INSITU_E2E_WORKDIR")?),
        sa_kubeconfig: PathBuf::from(var("INSITU_E2E_SA_KUBECONFIG")?),
        lease_namespace: std::env::var("INSITU_E2E_LEASE_NAMESPACE")
            .unwrap_or_else(|_| "insitu-system".into()),
        lease_name: std::env::var("INSITU_E2E_LEASE_NAME")
            .unwrap_or_else(|_| "insitu-cloneset-controller".into()),
        identities: var("INSITU_E2E_CONTROLLERS")?
            .split(',')
            .map(str::to_string)
            .collect(),
    };
    Ok(Env {
        client,
        real: Some(real),
        crash_image,
        real_node: realnode::RealNode::from_env()?,
    })
}

/// The embedded cluster: sim apiserver + scheduler + kubelet + GC, and the controller, in-process on virtual
/// time, with the same crash-image rule as `e2e/run` gives `insitu nodes`.
async fn sim_env(crash_image: String) -> anyhow::Result<(Env, insitu_sim::cluster::SimCluster)> {
    use insitu_sim::kubelet::{ImageFailure, ImageProfile, ImageProfiles};
    let clock = insitu_sim::SimClock::new(k8s_openapi::jiff::Timestamp::now(), 1.0);
    let crash = ImageProfile {
        // Same as `insitu nodes --crash-after-seconds` default: exits before any readiness probe passes.
        fail: ImageFailure::CrashAfter(Duration::from_millis(500)),
        ..ImageProfile::default()
    };
    let config = insitu_sim::cluster::SimConfig {
        nodes: 3,
        seed: 1,
        images: ImageProfiles::default().with("*-crash", crash),
        ..Default::default()
    };
    let cluster = insitu_sim::cluster::SimCluster::start(config, clock.clone()).await?;
    let client = cluster.client.clone();
    tokio::spawn(insitu_controller::run(
        client.clone(),
        insitu_controller::Config::default(),
        Arc::new(insitu_lab::simtime::SharedClock(clock)),
        Arc::new(insitu_controller::Metrics::new()),
        std::future::pending::<()>(),
    ));
    let env = Env {
        client,
        real: None,
        crash_image,
        real_node: None,
    };
    Ok((env, cluster))
}

async fn run_all(env: Arc<Env>, filters: &[String]) -> (usize, usize) {
    let mode = match (&env.real, &env.real_node) {
        (Some(_), Some(n)) => format!("real control plane, real node {}", n.name),
        (Some(_), None) => "real control plane, simulated nodes".into(),
        _ => "embedded simulated cluster".into(),
    };
    println!("e2e: running on the {mode}");
    let record_dir = std::env::var_os("INSITU_E2E_RECORD_DIR").map(PathBuf::from);
    let selected: Vec<Scenario> = all_scenarios()
        .into_iter()
        .filter(|s| filters.is_empty() || filters.iter().any(|f| s.name.contains(f.as_str())))
        .collect();
    let (mut passed, mut failed) = (0, 0);
    for phase in 1..=4u8 {
        let mut set = tokio::task::JoinSet::new();
        for s in selected.iter().filter(|s| s.phase == phase) {
            if s.real_only && env.real.is_none() {
                println!("SKIP {} (needs a real control plane)", s.name);
                continue;
            }
            if let (Some(_), Some(why)) = (&env.real_node, realnode::skip_reason(s.name)) {
                println!("SKIP {} (not on a real node: {why})", s.name);
                continue;
            }
            let env = env.clone();
            let record_dir = record_dir.clone();
            let (name, timeout, run) = (s.name, s.timeout, s.run);
            set.spawn(async move {
                let ns = format!("e2e-{}", name.replace('_', "-"));
                let start = Instant::now();
                let mut recorder = None;
                let res = async {
                    util::ensure_namespace(&env, &ns).await?;
                    recorder = record_dir.map(|d| record::Recorder::start(&env, &ns, name, d));
                    match tokio::time::timeout(timeout, run(&env, &ns)).await {
                        Ok(r) => r,
                        Err(_) => Err(anyhow::anyhow!("scenario timed out after {timeout:?}")),
                    }
                }
                .await;
                let secs = start.elapsed().as_secs_f64();
                if let Some(r) = recorder
                    && let Err(e) = r.finish(res.is_ok())
                {
                    println!("e2e: recording {name} failed: {e:#}");
                }
                match &res {
                    Ok(()) => println!("PASS {name} ({secs:.1}s)"),
                    Err(e) => println!("FAIL {name} ({secs:.1}s): {e:#}"),
                }
                res.is_ok()
            });
        }
        while let Some(r) = set.join_next().await {
            match r {
                Ok(true) => passed += 1,
                _ => failed += 1,
            }
        }
    }
    (passed, failed)
}
