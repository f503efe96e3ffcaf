//! Where reconciles run: kube-runtime's task on the current runtime (default), or an embedder's executor.
//!
//! kube-runtime spawns every reconcile on `Handle::current()`. The embedded cluster runs the whole process on
//! one runtime thread with a paused clock and polls the controller on the second core (`insitu`'s
//! `simtime::turns`); reconciles spawned there would land back on the cluster's thread, so an embedder that
//! sets [`Config::offload`](crate::Config) gets each reconcile's body handed to it instead, and kube-runtime's
//! task only waits for the result.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::runtime::controller::Action;

use insitu_api::CloneSet;

use crate::{Context, Error};

/// Runs a future to completion somewhere else (it must keep the embedder's notion of time).
pub trait Offload: std::fmt::Debug + Send + Sync + 'static {
    fn spawn(&self, task: BoxFuture<'static, ()>);
}

/// The reconciler handed to kube-runtime: `reconcile` itself, or a relay to the offload's executor. The relay
/// drops the reconcile when kube-runtime drops its task (shutdown), as aborting the task would; a reconcile
/// that panicked panics the relay too, as kube-runtime propagates a reconcile's panic.
pub fn reconciler(
    offload: Option<Arc<dyn Offload>>,
) -> impl FnMut(Arc<CloneSet>, Arc<Context>) -> BoxFuture<'static, Result<Action, Error>> {
    move |cs, ctx| match &offload {
        None => crate::reconcile::reconcile(cs, ctx).boxed(),
        Some(offload) => {
            let (mut tx, rx) = tokio::sync::oneshot::channel();
            offload.spawn(
                async move {
                    tokio::select! {
                        result = crate::reconcile::reconcile(cs, ctx) => { let _ = tx.send(result); }
                        () = tx.closed() => {}
                    }
                }
                .boxed(),
            );
            async move { rx.await.expect("an offloaded reconcile panicked") }.boxed()
        }
    }
}
