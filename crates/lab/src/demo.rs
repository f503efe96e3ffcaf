//! `insitu demo`: the seed tutorial on an embedded simulated cluster — create, wait Ready, image change in place,
//! watch it roll one pod at a time, verify name/UID/IP kept and one restart each.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use insitu_api::CloneSet;
use insitu_controller::{Config, Metrics};
use insitu_core::explain::podtable;
use insitu_sim::Clock as _;
use insitu_sim::cluster::{SimCluster, SimConfig};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde::Serialize;

use crate::simtime;

/// The seed's CloneSet, applied unchanged.
pub const SEED_YAML: &str = include_str!("../../../examples/cloneset-demo.yaml");
const NEW_IMAGE: &str = "nginx:1.20.0";

#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Print the verification as one JSON object on stdout (the live view goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Cluster seconds per real second; 0 runs as fast as possible. The seed's timings are kept either way.
    #[arg(long, default_value_t = 5.0)]
    pub speed: f64,
    /// Seed for the simulated cluster's randomness (IDs, container IDs).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated nodes.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Give up after this many cluster seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// One pod's identity and update evidence, as in the seed's before/after check.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct PodRecord {
    pub name: String,
    pub uid: String,
    pub ip: String,
    pub image: String,
    pub restarts: i32,
}

/// The demo's verdict (`--json`).
#[derive(Clone, Debug, Serialize)]
pub struct DemoReport {
    pub pods_before: Vec<PodRecord>,
    pub pods_after: Vec<PodRecord>,
    pub in_place: bool,
    pub max_unavailable_seen: usize,
    pub duration_seconds: f64,
}

impl DemoReport {
    /// Every seed check: same names/UIDs/IPs, all on the new image, exactly one restart each, ≤1 unavailable.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.pods_before.len() != 3 || self.pods_after.len() != 3 {
            out.push(format!(
                "expected 3 pods before and after, got {} and {}",
                self.pods_before.len(),
                self.pods_after.len()
            ));
        }
        for (b, a) in self.pods_before.iter().zip(&self.pods_after) {
            if (&b.name, &b.uid, &b.ip) != (&a.name, &a.uid, &a.ip) {
                out.push(format!(
                    "pod {} changed identity: {}/{}/{} -> {}/{}/{}",
                    b.name, b.name, b.uid, b.ip, a.name, a.uid, a.ip
                ));
            }
            if a.image != NEW_IMAGE {
                out.push(format!("pod {} runs {} instead of {NEW_IMAGE}", a.name, a.image));
            }
            if a.restarts != 1 {
                out.push(format!(
                    "pod {} restarted {} times, expected 1",
                    a.name, a.restarts
                ));
            }
        }
        if self.max_unavailable_seen > 1 {
            out.push(format!(
                "{} pods were unavailable at once (maxUnavailable is 1)",
                self.max_unavailable_seen
            ));
        }
        out
    }
}

fn record(p: &Pod) -> PodRecord {
    PodRecord {
        name: p.name_any(),
        uid: p.uid().unwrap_or_default(),
        ip: podtable::ip(p),
        image: podtable::image(p),
        restarts: podtable::restarts(p),
    }
}

/// Where the live view goes: stdout normally, stderr with `--json`.
struct Out {
    json: bool,
}

impl Out {
    fn line(&self, s: impl AsRef<str>) {
        if self.json {
            eprintln!("{}", s.as_ref());
        } else {
            println!("{}", s.as_ref());
            let _ = std::io::stdout().flush();
        }
    }
}

pub fn main(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let rt = simtime::runtime().context("starting the runtime")?;
    let report = rt.block_on(run(args.clone()))?;
    let problems = report.problems();
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs the whole scenario; returns the verification report (also printed as text).
pub async fn run(args: DemoArgs) -> anyhow::Result<DemoReport> {
    let out = Out { json: args.json };
    simtime::spawn_pacer(args.speed);
    let base = Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH);
    let clock = insitu_sim::SimClock::new(base, 1.0);
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
    let client = cluster.client.clone();
    let metrics = Arc::new(Metrics::new());
    let (controller, stop_tx) =
        simtime::spawn_controller(client.clone(), Config::default(), &clock, metrics.clone());
    let wall = Instant::now();
    let t0 = clock.now();
    let elapsed = |clock: &insitu_sim::SimClock| clock.now().duration_since(t0).as_secs_f64();

    out.line(format!(
        "insitu demo — embedded simulated cluster ({} nodes, seed {}), controller running in-process",
        args.nodes, args.seed
    ));
    let cs: CloneSet = serde_saphyr::from_str(SEED_YAML).context("parsing examples/cloneset-demo.yaml")?;
    let css: Api<CloneSet> = Api::namespaced(client.clone(), "default");
    css.create(&PostParams::default(), &cs)
        .await
        .context("creating CloneSet nginx-demo")?;
    out.line("$ kubectl apply -f examples/cloneset-demo.yaml\ncloneset.apps.kruise.io/nginx-demo created\n");

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let lp = watcher::Config::default().labels("app=nginx-demo");
    let (store, writer) = kube::runtime::reflector::store::<Pod>();
    let mut events = Box::pin(watcher(pods.clone(), lp).reflect(writer).applied_objects());
    let deadline = Duration::from_secs(args.timeout);
    let mut last_table = String::new();
    let mut show = |store: &kube::runtime::reflector::Store<Pod>, clock: &insitu_sim::SimClock, out: &Out| {
        let state = store.state();
        let pods: Vec<&Pod> = state.iter().map(|p| p.as_ref()).collect();
        let t = podtable::table(&pods);
        if t != last_table {
            out.line(format!("--- t=+{:.1}s", elapsed(clock)));
            out.line(&t);
            last_table = t;
        }
    };

    // Phase 1: wait until all 3 pods are Ready.
    out.line("Waiting for 3 pods to become Ready (image pull, container start, readinessProbe initialDelaySeconds 5)…");
    loop {
        if elapsed(&clock) > deadline.as_secs_f64() {
            bail!(
                "pods did not become Ready within {} cluster seconds",
                args.timeout
            );
        }
        let all: Vec<_> = store.state();
        if all.len() == 3 && all.iter().all(|p| podtable::ready(p) == "True") {
            break;
        }
        next_event(&mut events).await?;
        show(&store, &clock, &out);
    }
    show(&store, &clock, &out);
    let mut before: Vec<PodRecord> = store.state().iter().map(|p| record(p)).collect();
    before.sort_by(|a, b| a.name.cmp(&b.name));

    // Phase 2: the image-only change.
    out.line(format!(
        "\nAll 3 pods Ready at t=+{:.1}s. Changing the image nginx:1.19.0 → {NEW_IMAGE} (image-only change).",
        elapsed(&clock)
    ));
    out.line(
        "Why image-only: the seed's `kubectl patch --type=merge` with a `containers` list is a JSON merge patch\n\
         (RFC 7386), which replaces the whole list — the container would lose its ports, env, probes and preStop\n\
         hook, and real Kubernetes/Kruise would then roll every pod by recreating it. An in-place update needs a\n\
         change to `image` alone, e.g.:\n\
         $ kubectl patch cloneset nginx-demo --type=json \\\n\
             -p='[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"nginx:1.20.0\"}]'\n",
    );
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": NEW_IMAGE}
    ]))?;
    css.patch("nginx-demo", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .context("patching the CloneSet image")?;
    let change_at = clock.now();

    // Phase 3: watch the rollout; track the worst unavailability at every change.
    let mut max_unavailable = 0usize;
    loop {
        let state = store.state();
        let live: Vec<_> = state
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let ready = live.iter().filter(|p| podtable::ready(p) == "True").count();
        max_unavailable = max_unavailable.max(3usize.saturating_sub(ready));
        let done = live.len() == 3
            && live.iter().all(|p| {
                podtable::ready(p) == "True"
                    && podtable::image(p) == NEW_IMAGE
                    && podtable::stage(p) == "None"
            });
        if done {
            let status = css.get_status("nginx-demo").await?.status.unwrap_or_default();
            if status.updated_ready_replicas == 3 && status.ready_replicas == 3 {
                break;
            }
        }
        if clock.now().duration_since(change_at).as_secs_f64() > deadline.as_secs_f64() {
            bail!("rollout did not finish within {} cluster seconds", args.timeout);
        }
        next_event(&mut events).await?;
        show(&store, &clock, &out);
    }
    show(&store, &clock, &out);
    let duration = clock.now().duration_since(change_at).as_secs_f64();
    let mut after: Vec<PodRecord> = pods
        .list(&ListParams::default().labels("app=nginx-demo"))
        .await?
        .items
        .iter()
        .map(record)
        .collect();
    after.sort_by(|a, b| a.name.cmp(&b.name));

    let cs_now = css.get("nginx-demo").await?;
    let st = cs_now.status.clone().unwrap_or_default();
    out.line(format!(
        "\n$ kubectl get cloneset nginx-demo\nNAME         DESIRED   UPDATED   UPDATED_READY   UPDATED_AVAILABLE   READY   TOTAL\n{:<12} {:<9} {:<9} {:<15} {:<19} {:<7} {}",
        "nginx-demo",
        cs_now.spec.replicas(),
        st.updated_replicas,
        st.updated_ready_replicas,
        st.updated_available_replicas,
        st.ready_replicas,
        st.replicas
    ));

    let in_place = before.len() == after.len()
        && before
            .iter()
            .zip(&after)
            .all(|(b, a)| (&b.name, &b.uid, &b.ip) == (&a.name, &a.uid, &a.ip));
    let report = DemoReport {
        pods_before: before,
        pods_after: after,
        in_place,
        max_unavailable_seen: max_unavailable,
        duration_seconds: (duration * 10.0).round() / 10.0,
    };
    out.line("\nVerification (the seed's before/after check):");
    out.line(verification_table(&report));
    let problems = report.problems();
    let rendered = metrics.render();
    let in_place_metric: BTreeMap<&str, String> = rendered
        .lines()
        .filter(|l| {
            l.starts_with("kruise_inplace_update_total")
                || l.starts_with("kruise_inplace_update_duration_seconds_sum")
        })
        .map(|l| {
            (
                l.split_whitespace().next().unwrap_or(""),
                l.split_whitespace().last().unwrap_or("").to_string(),
            )
        })
        .collect();
    for (k, v) in in_place_metric {
        out.line(format!("metric {k} = {v}"));
    }
    if problems.is_empty() {
        out.line(format!(
            "OK: same name, UID and IP for all 3 pods; all on {NEW_IMAGE}; 1 restart each; at most {} unavailable at once.\nRollout took {:.1}s of cluster time ({:.1}s wall).",
            report.max_unavailable_seen,
            report.duration_seconds,
            wall.elapsed().as_secs_f64()
        ));
    } else {
        for p in &problems {
            out.line(format!("FAIL: {p}"));
        }
    }
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
    drop(cluster);
    Ok(report)
}

/// Waits for the next pod watch event (or 5 cluster seconds), so the loops re-check their condition.
async fn next_event<S, T>(events: &mut S) -> anyhow::Result<()>
where
    S: futures::Stream<Item = Result<T, watcher::Error>> + Unpin,
{
    match tokio::time::timeout(Duration::from_secs(5), events.next()).await {
        Ok(Some(Err(e))) => tracing::debug!("watch: {e}"),
        Ok(None) => bail!("pod watch ended"),
        _ => {}
    }
    Ok(())
}

fn verification_table(r: &DemoReport) -> String {
    let mut s = format!(
        "{:<18} {:<38} {:<14} {:<14} {}\n",
        "NAME", "UID", "IP", "IMAGE", "RESTARTS"
    );
    for (label, pods) in [("before", &r.pods_before), ("after", &r.pods_after)] {
        s.push_str(&format!("[{label}]\n"));
        for p in pods {
            s.push_str(&format!(
                "{:<18} {:<38} {:<14} {:<14} {}\n",
                p.name, p.uid, p.ip, p.image, p.restarts
            ));
        }
    }
    s
}
