//! The bench's planning and memory figures: the controller's plan-time histogram over the rollout, `core::plan`
//! timed directly on the final pods (settled, and with the image changed again), and the controller's pod cache
//! rebuilt alone to estimate its size and time the snapshot step.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use insitu_api::CloneSet;
use insitu_core::PackedPod;
use insitu_sim::Clock as _;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::figures::{diff, label, percentile, proc_memory, quantile};
use super::report::Planning;

/// Times `core::plan` on a snapshot `n` times; (p50, p99) in ms and the action count.
fn time_plan(snap: &insitu_core::Snapshot, n: usize) -> (f64, f64, usize) {
    let mut ms = Vec::with_capacity(n);
    let mut actions = 0;
    for _ in 0..n.max(1) {
        let t = Instant::now();
        let plan = insitu_core::plan(snap);
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        actions = plan.actions.len();
    }
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 0.5), percentile(&ms, 0.99), actions)
}

/// Planning: the controller's histogram during the rollout, then `core::plan` timed directly on the final
/// state (settled, and with the template image changed again).
pub(super) async fn planning(
    client: &kube::Client,
    metrics0: &BTreeMap<String, f64>,
    metrics1: &BTreeMap<String, f64>,
    cs_now: &CloneSet,
    after: &[Pod],
    clock: &insitu_sim::SimClock,
    plan_samples: usize,
) -> anyhow::Result<Planning> {
    let mut buckets: Vec<(f64, f64)> = diff(metrics1, metrics0, "insitu_plan_duration_seconds_bucket")
        .into_iter()
        .filter_map(|(k, d)| {
            let le = label(&k, "le")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, d))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let calls = diff(metrics1, metrics0, "insitu_plan_duration_seconds_count")
        .first()
        .map_or(0.0, |x| x.1);
    let sum = diff(metrics1, metrics0, "insitu_plan_duration_seconds_sum")
        .first()
        .map_or(0.0, |x| x.1);
    let revisions: Vec<ControllerRevision> = Api::<ControllerRevision>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await?
        .items;
    let snap_pods: Vec<Arc<Pod>> = after
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.metadata.managed_fields = None;
            Arc::new(p)
        })
        .collect();
    // With the pods' summaries, as the controller plans (it refreshes them in its snapshot step).
    let summariser = insitu_core::Summariser::for_cloneset(cs_now);
    let summaries: Vec<insitu_core::PodSummary> = snap_pods
        .iter()
        .map(|p| summariser.summarise(p.clone()))
        .collect();
    let mut snap = insitu_core::Snapshot {
        cloneset: Arc::new(cs_now.clone()),
        pods: snap_pods,
        summaries: Some(Arc::new(summaries)),
        revisions: revisions.into_iter().map(Arc::new).collect(),
        pvcs: vec![],
        now: clock.now(),
        gates: Default::default(),
        nodes: Default::default(),
        image_pull_jobs: None,
    };
    let (settled_p50, settled_p99, _) = time_plan(&snap, plan_samples);
    let mut changed = cs_now.clone();
    if let Some(c) = changed
        .spec
        .template
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
    {
        c.image = Some("nginx:1.21.0".into());
    }
    changed.metadata.generation = changed.metadata.generation.map(|g| g + 1);
    snap.cloneset = Arc::new(changed);
    let (changed_p50, changed_p99, changed_actions) = time_plan(&snap, plan_samples);
    Ok(Planning {
        controller_calls: calls as u64,
        controller_p50_ms: quantile(&buckets, 0.5) * 1e3,
        controller_p99_ms: quantile(&buckets, 0.99) * 1e3,
        controller_mean_ms: if calls > 0.0 { sum / calls * 1e3 } else { 0.0 },
        settled_p50_ms: settled_p50,
        settled_p99_ms: settled_p99,
        changed_p50_ms: changed_p50,
        changed_p99_ms: changed_p99,
        changed_actions,
        ..Default::default()
    })
}

/// Memory: the controller's pod cache rebuilt from the final pods in a fresh thread (so a fresh malloc arena):
/// its resident growth in MiB, and the snapshot step timed on it (ms per sample, sorted).
pub(super) fn cache_estimate(after: Vec<Pod>, cs: CloneSet, samples_n: usize) -> (f64, Vec<f64>) {
    let samples_n = samples_n.max(1);
    let cs_uid = cs.uid().unwrap_or_default();
    let handle = std::thread::spawn(move || {
        let (reader, mut writer) = kube::runtime::reflector::store::<PackedPod>();
        let before = proc_memory().1;
        writer.apply_watcher_event(&watcher::Event::Init);
        for p in &after {
            writer.apply_watcher_event(&watcher::Event::InitApply(PackedPod::pack(p.clone())));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let grown = proc_memory().1 - before;
        // The snapshot step of every reconcile: all cached pods, those of the CloneSet (by namespace and
        // controller UID) summarised where they changed since the last snapshot (here: none after the
        // first, untimed, round), in name order.
        let owned = |p: &PackedPod| {
            p.meta().namespace.as_deref() == Some("default")
                && p.owner_references()
                    .iter()
                    .any(|r| r.controller == Some(true) && r.uid == cs_uid)
        };
        let cache = insitu_controller::snapshot::SummaryCache::default();
        drop(cache.refresh(&cs, &reader.state(), owned));
        let mut ms = Vec::with_capacity(samples_n);
        for _ in 0..samples_n {
            let t = Instant::now();
            let (summaries, _) = cache.refresh(&cs, &reader.state(), owned);
            drop(summaries);
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        drop(reader);
        (grown, ms)
    });
    handle.join().unwrap_or_default()
}
