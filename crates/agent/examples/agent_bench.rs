//! The node agent's resident memory and CPU with N pods on its node (issue 38's figure; docs/benchmarks.md,
//! "The node agent with 100 pods"). The embedded apiserver over HTTP and the fake CRI runtime of the agent's
//! tests run in this process; the agent runs alone in a child process (this binary again, `--child`), so its
//! figures are its own. Phases: the first report of every pod, 30 s idle, an in-place update of every pod (one
//! restart each, this process playing the kubelet), 30 s idle again.
//!
//!     cargo run --release -p insitu-agent --example agent_bench [PODS]     (default 100)

#[path = "../tests/support/fake_cri.rs"]
mod fake_cri;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fake_cri::{Fake, FakeContainer};
use insitu_sim::SimClock;
use insitu_sim::apiserver::ApiServer;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};

const IMAGE: &str = "nginx:1.20.0";
const NODE: &str = "node-a";
const META: &str = "apps.kruise.io/runtime-containers-meta";
/// Linux's USER_HZ: /proc's CPU times are in 1/100 s.
const TICKS_PER_SECOND: f64 = 100.0;
const IDLE: Duration = Duration::from_secs(30);

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if args.get(1).map(String::as_str) == Some("--child") {
        return rt.block_on(child(&args[2..]));
    }
    let pods: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(100);
    rt.block_on(parent(pods))
}

/// The agent, as `insitu agent` runs it: `--child KUBECONFIG SOCKET METRICS_ADDR`.
async fn child(args: &[String]) -> anyhow::Result<()> {
    let [kubeconfig, socket, metrics] = args else {
        anyhow::bail!("usage: --child KUBECONFIG SOCKET METRICS_ADDR");
    };
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    let config = insitu_agent::AgentConfig {
        node_name: NODE.into(),
        runtime_endpoint: format!("unix://{socket}"),
        metrics_addr: Some(metrics.parse()?),
    };
    insitu_agent::run(kube::Client::try_from(cfg)?, config, std::future::pending()).await
}

/// The child's resident memory (KiB: VmRSS, VmHWM, RssAnon) and CPU seconds so far.
fn usage(pid: u32) -> anyhow::Result<(u64, u64, u64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th of the line.
    let rest = stat.rsplit_once(')').context("/proc/PID/stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        f.get(11).context("utime")?.parse::<u64>()? + f.get(12).context("stime")?.parse::<u64>()?;
    let cpu = ticks as f64 / TICKS_PER_SECOND;
    Ok((kib("VmRSS:"), kib("VmHWM:"), kib("RssAnon:"), cpu))
}

fn report(phase: &str, pid: u32, cpu_before: f64, wall: Duration) -> anyhow::Result<f64> {
    let (rss, hwm, anon, cpu) = usage(pid)?;
    println!(
        "{phase:<28} wall {:>6.1} s  cpu {:>6.2} s  VmRSS {:>6.1} MiB  RssAnon {:>6.1} MiB  VmHWM {:>6.1} MiB",
        wall.as_secs_f64(),
        cpu - cpu_before,
        mib(rss),
        mib(anon),
        mib(hwm)
    );
    Ok(cpu)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn pod(i: usize) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": format!("web-{i}"), "namespace": "default", "labels": {"app": "web", "test-env": "v1"},
            "ownerReferences": [{
                "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                "uid": "5f3c2a1e-0000-4000-8000-000000000001", "controller": true
            }]
        },
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
            "containers": [{
                "name": "app", "image": IMAGE,
                "env": [{"name": "TEST_ENV", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['test-env']"}}}]
            }]
        }
    }))?)
}

fn status(id: &str, restarts: i32, updating: bool) -> serde_json::Value {
    serde_json::json!({"status": {
        "phase": "Running",
        "conditions": [{"type": "InPlaceUpdateReady", "status": if updating { "False" } else { "True" }}],
        "containerStatuses": [{
            "name": "app", "image": IMAGE, "imageID": "sha256:1", "ready": true, "restartCount": restarts,
            "containerID": format!("containerd://{id}"), "state": {"running": {}}
        }]
    }})
}

fn container(id: String, uid: &str, value: &str, restarts: i32) -> FakeContainer {
    FakeContainer {
        id,
        pod_uid: uid.to_string(),
        name: "app".into(),
        running: true,
        created_at: i64::from(restarts) + 1,
        env: vec!["PATH=/bin".into(), format!("TEST_ENV={value}")],
        restart_count: restarts,
        image: IMAGE.into(),
    }
}

/// Pods whose annotation names `want` (a container id prefix), polled every 200 ms until all `n` do.
async fn wait_reported(pods: &Api<Pod>, n: usize, want: &str, limit: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        let list = pods.list(&ListParams::default()).await?;
        let done = list
            .items
            .iter()
            .filter(|p| {
                p.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(META))
                    .is_some_and(|m| m.contains(want))
            })
            .count();
        if done == n {
            return Ok(());
        }
        anyhow::ensure!(
            start.elapsed() < limit,
            "{done} of {n} pods reported {want} after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn parent(n: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let sock = dir.path().join("containerd.sock");
    let fake = Fake::default();
    fake_cri::serve(fake.clone(), &sock).await;
    let server = ApiServer::new(SimClock::new(k8s_openapi::jiff::Timestamp::now(), 1.0));
    let (addr, _http) = server.serve("127.0.0.1:0".parse()?).await?;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let ps = PatchParams::default();
    let mut uids = Vec::with_capacity(n);
    for i in 0..n {
        let p = pods.create(&PostParams::default(), &pod(i)?).await?;
        let uid = p.metadata.uid.unwrap_or_default();
        pods.patch_status(
            &format!("web-{i}"),
            &ps,
            &Patch::Merge(status(&format!("a{i}"), 0, false)),
        )
        .await?;
        fake.state()
            .containers
            .push(container(format!("a{i}"), &uid, "v1", 0));
        uids.push(uid);
    }
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: sim, cluster: {{server: \"http://{addr}\"}}}}]\n\
             users: [{{name: u, user: {{}}}}]\ncontexts: [{{name: c, context: {{cluster: sim, user: u}}}}]\n\
             current-context: c\n"
        ),
    )?;
    let metrics: SocketAddr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut agent = std::process::Command::new(std::env::current_exe()?)
        .arg("--child")
        .arg(&kubeconfig)
        .arg(&sock)
        .arg(metrics.to_string())
        .env("RUST_LOG", "warn")
        .spawn()?;
    let pid = agent.id();
    let res = phases(n, pid, &pods, &fake, &uids).await;
    let _ = agent.kill();
    let _ = agent.wait();
    res
}

async fn phases(n: usize, pid: u32, pods: &Api<Pod>, fake: &Fake, uids: &[String]) -> anyhow::Result<()> {
    println!("insitu agent with {n} pods on its node (embedded apiserver over HTTP, fake CRI runtime)");
    let t = Instant::now();
    wait_reported(pods, n, "containerd://a", Duration::from_secs(120)).await?;
    let cpu = report("first report of every pod", pid, 0.0, t.elapsed())?;
    let t = Instant::now();
    tokio::time::sleep(IDLE).await;
    let cpu = report("idle", pid, cpu, t.elapsed())?;

    // The in-place update: the label changes, InPlaceUpdateReady goes False; the agent stops each container
    // (after Kruise's 3 s), this process starts it again with the new value, as the kubelet would.
    let t = Instant::now();
    let ps = PatchParams::default();
    for i in 0..n {
        let name = format!("web-{i}");
        let relabel = serde_json::json!({"metadata": {"labels": {"test-env": "v2"}}});
        pods.patch(&name, &ps, &Patch::Merge(relabel)).await?;
        pods.patch_status(&name, &ps, &Patch::Merge(status(&format!("a{i}"), 0, true)))
            .await?;
    }
    let mut restarted = vec![false; n];
    while restarted.iter().any(|r| !r) {
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(120),
            "restarts not all done after 120 s"
        );
        let stopped: Vec<usize> = {
            let st = fake.state();
            (0..n)
                .filter(|&i| !restarted[i] && st.calls.iter().any(|c| c.starts_with(&format!("stop a{i} "))))
                .collect()
        };
        for i in stopped {
            fake.state()
                .containers
                .push(container(format!("b{i}"), &uids[i], "v2", 1));
            pods.patch_status(
                &format!("web-{i}"),
                &ps,
                &Patch::Merge(status(&format!("b{i}"), 1, false)),
            )
            .await?;
            restarted[i] = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_reported(pods, n, "containerd://b", Duration::from_secs(120)).await?;
    let cpu = report("in-place update of every pod", pid, cpu, t.elapsed())?;
    let t = Instant::now();
    tokio::time::sleep(IDLE).await;
    report("idle after the update", pid, cpu, t.elapsed())?;
    let stops = fake
        .state()
        .calls
        .iter()
        .filter(|c| c.starts_with("stop"))
        .count();
    println!("StopContainer calls: {stops} (one per pod)");
    Ok(())
}
