//! One reconcile: expectations gate → snapshot → `core::plan` → execute → requeue. Never panics on bad objects.
//!
//! The plan is the round's only planning: the launch-priority barrier and image pre-download are steps of it
//! (`Action::LaunchBarrier`, `Action::CreateImagePullJob`, ...) that `barrier` and `predownload` carry out.
//! Kruise runs the barrier as its own controller (`pkg/controller/containerlaunchpriority`), outside the
//! CloneSet's expectations; here it stays a step of the CloneSet's round (the pod events that reconcile the
//! CloneSet drive it, and `insitu plan`/`insitu explain` show it), and a round that waits for its cache still
//! plans and runs the barrier steps when the CloneSet uses launch priority, so they are not held up either.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;

use insitu_api::CloneSet;
use insitu_api::keys::events::INVALID_SPEC;
use insitu_api::validation;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use crate::barrier::BarrierCache;
use crate::events::Severity;
use crate::expectations::{Caches, Check};
use crate::metrics::cs_labels;
use crate::offload::Offload;
use crate::predownload::ImagePullJobs;
use crate::ratelimit::RateLimiter;
use crate::snapshot::SummaryCache;
use crate::{Context, Error, execute, ratelimit, snapshot};

/// How long to wait before re-checking when the cache lags behind our writes (watch events usually come first).
const EXPECTATION_RECHECK: Duration = Duration::from_secs(5);

fn result_label(result: &str) -> Vec<(&'static str, String)> {
    vec![("result", result.to_string())]
}

/// What kube-runtime hands each reconcile: the shared [`Context`] and each step's own memory across rounds.
pub struct Reconciler {
    pub ctx: Context,
    /// The snapshot step's pod summaries per CloneSet, refreshed for the pods that changed.
    pub summaries: SummaryCache,
    /// The barrier step's keys known to exist, and the CloneSets using launch priority.
    pub barriers: BarrierCache,
    /// The pre-download step's cache of the server's ImagePullJobs, when pre-download is on.
    pub image_pull_jobs: Option<ImagePullJobs>,
    /// The executor's memory: warnings emitted, resizes counted.
    pub executed: execute::Memory,
    /// Requeue delays after failed reconciles (Kruise's workqueue rate limiter).
    pub rate_limiter: RateLimiter,
}

impl Reconciler {
    /// A reconciler with empty step memories.
    pub fn new(ctx: Context, image_pull_jobs: Option<ImagePullJobs>) -> Self {
        Reconciler {
            ctx,
            summaries: SummaryCache::default(),
            barriers: BarrierCache::default(),
            image_pull_jobs,
            executed: execute::Memory::default(),
            rate_limiter: RateLimiter::default(),
        }
    }
}

/// The reconciler handed to kube-runtime: `reconcile` itself, or a relay to the offload's executor (see
/// `offload`). The relay drops the reconcile when kube-runtime drops its task (shutdown), as aborting the task
/// would; a reconcile that panicked panics the relay too, as kube-runtime propagates a reconcile's panic.
pub fn reconciler(
    offload: Option<Arc<dyn Offload>>,
) -> impl FnMut(Arc<CloneSet>, Arc<Reconciler>) -> BoxFuture<'static, Result<Action, Error>> {
    move |cs, r| match &offload {
        None => reconcile(cs, r).boxed(),
        Some(offload) => {
            let (mut tx, rx) = tokio::sync::oneshot::channel();
            offload.spawn(
                async move {
                    tokio::select! {
                        result = reconcile(cs, r) => { let _ = tx.send(result); }
                        () = tx.closed() => {}
                    }
                }
                .boxed(),
            );
            async move { rx.await.expect("an offloaded reconcile panicked") }.boxed()
        }
    }
}

/// Reconciles one CloneSet; a success resets its error back-off (client-go `Forget`).
pub async fn reconcile(cs: Arc<CloneSet>, r: Arc<Reconciler>) -> Result<Action, Error> {
    let key = format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any());
    let result = reconcile_round(cs, r.clone()).await;
    if result.is_ok() {
        r.rate_limiter.forget(&key);
    }
    result
}

async fn reconcile_round(cs: Arc<CloneSet>, r: Arc<Reconciler>) -> Result<Action, Error> {
    let ctx = &r.ctx;
    let _running = ctx.health.reconciling();
    let ns = cs.namespace().unwrap_or_default();
    let name = cs.name_any();
    let key = format!("{ns}/{name}");
    if cs.metadata.deletion_timestamp.is_some() {
        // Kruise: nothing to do for a deleting CloneSet; the garbage collector removes its pods.
        ctx.expectations.forget(&key);
        r.barriers.forget_cloneset(&cs.uid().unwrap_or_default());
        return Ok(Action::await_change());
    }
    let errs = validation::validate_reconciled(&cs);
    if !errs.is_empty() {
        // A CloneSet the apiserver let through (e.g. no CEL support) but that we cannot act on safely.
        let msg = validation::aggregate(&errs);
        ctx.events.emit(
            &cs,
            Severity::Warning,
            INVALID_SPEC,
            format!("CloneSet is invalid, not acting on it: {msg}"),
        );
        ctx.metrics
            .reconcile
            .get_or_create(&result_label("invalid"))
            .inc();
        return Ok(Action::await_change());
    }
    ctx.metrics.init_cloneset(&ns, &name);
    // Bounded: a cache that cannot sync (apiserver refusing the list) fails this reconcile, which is retried,
    // instead of holding a worker (and the graceful shutdown) forever.
    let limit = ctx.config.cache_sync_timeout;
    let wait = |name: &'static str, ready: futures::future::BoxFuture<'static, bool>| async move {
        match tokio::time::timeout(limit, ready).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::Invalid(format!("{name} cache: writer dropped"))),
            Err(_) => Err(Error::Invalid(format!(
                "{name} cache has not synced within {}s",
                limit.as_secs()
            ))),
        }
    };
    let caches = &ctx.caches;
    let (pods, revs, pvcs) = (caches.pods.clone(), caches.revisions.clone(), caches.pvcs.clone());
    wait(
        "pod",
        Box::pin(async move { pods.wait_until_ready().await.is_ok() }),
    )
    .await?;
    wait(
        "revision",
        Box::pin(async move { revs.wait_until_ready().await.is_ok() }),
    )
    .await?;
    wait(
        "pvc",
        Box::pin(async move { pvcs.wait_until_ready().await.is_ok() }),
    )
    .await?;

    let now = ctx.clock.now();
    let caches = Caches {
        pods: &ctx.caches.pods,
        revisions: &ctx.caches.revisions,
        pvcs: &ctx.caches.pvcs,
    };
    let waiting = match ctx
        .expectations
        .check(&key, &ns, caches, now, ctx.config.expectation_timeout)
    {
        Check::Satisfied => None,
        Check::Waiting(left) => Some(left),
        Check::TimedOut(n) => {
            // Kruise: cloneset_scale_expectation_leakage; we drop the stale expectations and plan anyway.
            tracing::warn!(cloneset = %key, dropped = n, "expectations timed out; cache may be stale");
            ctx.metrics
                .expectation_leakage
                .get_or_create(&cs_labels(&ns, &name))
                .inc_by(n as u64);
            None
        }
    };
    let uid = cs.uid().unwrap_or_default();
    let wait = |left: Duration| {
        tracing::debug!(cloneset = %key, left_ms = left.as_millis() as u64, "waiting for the cache to show our writes");
        ctx.metrics
            .reconcile
            .get_or_create(&result_label("waiting"))
            .inc();
        Ok(Action::requeue(left.min(EXPECTATION_RECHECK)))
    };
    if let Some(left) = waiting
        && !r.barriers.uses_priority(&uid)
    {
        return wait(left);
    }

    // Snapshot and plan are CPU-bound (milliseconds at 10k pods): run them on the blocking pool so watches, writes
    // and other reconciles keep moving meanwhile. (On tokio's paused test clock a blocking task holds time still.)
    let (plan_r, plan_cs) = (r.clone(), cs.clone());
    let planning = move || {
        let snap = snapshot::build(
            &plan_r.ctx,
            &plan_r.summaries,
            plan_r.image_pull_jobs.as_ref(),
            plan_cs,
        );
        let started = Instant::now();
        let plan = insitu_core::plan(&snap);
        plan_r
            .ctx
            .metrics
            .plan_duration
            .observe(started.elapsed().as_secs_f64());
        plan
    };
    let plan = if ctx.config.plan_on_blocking_pool {
        tokio::task::spawn_blocking(planning)
            .await
            .map_err(|e| Error::Invalid(format!("planning task failed: {e}")))?
    } else {
        planning()
    };
    // The barrier steps first, whatever the expectations say (see the module's comment).
    r.barriers.set_uses_priority(&uid, plan.launch_priority);
    crate::barrier::run(ctx, &r.barriers, &cs, &plan).await;
    if let Some(left) = waiting {
        return wait(left);
    }
    for line in &plan.explanation {
        tracing::debug!(cloneset = %key, "{line}");
    }
    let started = Instant::now();
    let result = execute::execute(ctx, &r.executed, r.image_pull_jobs.as_ref(), &cs, &plan).await;
    // Timings for latency work (e.g. Kruise specs that give status.replicas 3 s): what the round wrote, how long.
    tracing::debug!(
        cloneset = %key,
        actions = plan.actions.len(),
        status_replicas = plan.status.as_ref().map(|s| s.replicas),
        execute_ms = started.elapsed().as_millis() as u64,
        ok = result.is_ok(),
        "round executed"
    );
    ctx.metrics
        .reconcile
        .get_or_create(&result_label(if result.is_ok() { "ok" } else { "error" }))
        .inc();
    result?;
    Ok(match plan.requeue_after {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

/// Back-off after a failed reconcile: Kruise's rate limiter (per CloneSet 5 ms doubling to 1000 s, with the
/// shared 10/s bucket), or the server's `Retry-After` when longer (see `ratelimit`).
pub fn error_policy(cs: Arc<CloneSet>, err: &Error, r: Arc<Reconciler>) -> Action {
    let key = format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any());
    let delay = ratelimit::requeue_delay(&r.rate_limiter, &key, err, tokio::time::Instant::now());
    tracing::warn!(
        cloneset = %key,
        error = %err,
        category = err.category(),
        retry_ms = delay.as_millis() as u64,
        failures = r.rate_limiter.num_requeues(&key),
        "reconcile failed"
    );
    Action::requeue(delay)
}
