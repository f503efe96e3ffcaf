//! One reconcile: expectations gate → snapshot → `core::plan` → execute → requeue. Never panics on bad objects.

use std::sync::Arc;
use std::time::{Duration, Instant};

use insitu_api::CloneSet;
use insitu_api::keys::events::INVALID_SPEC;
use insitu_api::validation;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use crate::events::Severity;
use crate::expectations::{Caches, Check};
use crate::metrics::cs_labels;
use crate::{Context, Error, execute, ratelimit, snapshot};

/// How long to wait before re-checking when the cache lags behind our writes (watch events usually come first).
const EXPECTATION_RECHECK: Duration = Duration::from_secs(5);

fn result_label(result: &str) -> Vec<(&'static str, String)> {
    vec![("result", result.to_string())]
}

/// Reconciles one CloneSet; a success resets its error back-off (client-go `Forget`).
pub async fn reconcile(cs: Arc<CloneSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any());
    let result = reconcile_round(cs, ctx.clone()).await;
    if result.is_ok() {
        ctx.rate_limiter.forget(&key);
    }
    result
}

async fn reconcile_round(cs: Arc<CloneSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _running = ctx.health.reconciling();
    let ns = cs.namespace().unwrap_or_default();
    let name = cs.name_any();
    let key = format!("{ns}/{name}");
    if cs.metadata.deletion_timestamp.is_some() {
        // Kruise: nothing to do for a deleting CloneSet; the garbage collector removes its pods.
        ctx.expectations.forget(&key);
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
    let (pods, revs, pvcs) = (ctx.pods.clone(), ctx.revisions.clone(), ctx.pvcs.clone());
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

    // Kruise runs this as its own controller over pod events; here the pod events that reconcile the
    // CloneSet drive it, before anything that may end the round early.
    crate::barrier::sync(&ctx, &cs).await;

    let now = ctx.clock.now();
    let caches = Caches {
        pods: &ctx.pods,
        revisions: &ctx.revisions,
        pvcs: &ctx.pvcs,
    };
    match ctx
        .expectations
        .check(&key, &ns, caches, now, ctx.config.expectation_timeout)
    {
        Check::Satisfied => {}
        Check::Waiting(left) => {
            tracing::debug!(cloneset = %key, left_ms = left.as_millis() as u64, "waiting for the cache to show our writes");
            ctx.metrics
                .reconcile
                .get_or_create(&result_label("waiting"))
                .inc();
            return Ok(Action::requeue(left.min(EXPECTATION_RECHECK)));
        }
        Check::TimedOut(n) => {
            // Kruise: cloneset_scale_expectation_leakage; we drop the stale expectations and plan anyway.
            tracing::warn!(cloneset = %key, dropped = n, "expectations timed out; cache may be stale");
            ctx.metrics
                .expectation_leakage
                .get_or_create(&cs_labels(&ns, &name))
                .inc_by(n as u64);
        }
    }

    // Snapshot and plan are CPU-bound (milliseconds at 10k pods): run them on the blocking pool so watches, writes
    // and other reconciles keep moving meanwhile. (On tokio's paused test clock a blocking task holds time still.)
    let (plan_ctx, plan_cs) = (ctx.clone(), cs.clone());
    let planning = move || {
        let snap = snapshot::build(&plan_ctx, plan_cs);
        let started = Instant::now();
        let plan = insitu_core::plan(&snap);
        plan_ctx
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
    for line in &plan.explanation {
        tracing::debug!(cloneset = %key, "{line}");
    }
    let started = Instant::now();
    let result = execute::execute(&ctx, &cs, &plan).await;
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
pub fn error_policy(cs: Arc<CloneSet>, err: &Error, ctx: Arc<Context>) -> Action {
    let key = format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any());
    let delay = ratelimit::requeue_delay(&ctx.rate_limiter, &key, err, tokio::time::Instant::now());
    tracing::warn!(
        cloneset = %key,
        error = %err,
        category = err.category(),
        retry_ms = delay.as_millis() as u64,
        failures = ctx.rate_limiter.num_requeues(&key),
        "reconcile failed"
    );
    Action::requeue(delay)
}
