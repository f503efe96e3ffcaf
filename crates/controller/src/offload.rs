//! Where reconciles run: kube-runtime's task on the current runtime (default), or an embedder's executor.
//!
//! kube-runtime spawns every reconcile on `Handle::current()`. The embedded cluster runs the whole process on
//! one runtime thread with a paused clock and polls the controller on the second core (`insitu-lab`'s
//! `simtime::turns`); reconciles spawned there would land back on the cluster's thread, so an embedder that
//! sets [`Config::offload`](crate::Config) gets each reconcile's body handed to it instead, and kube-runtime's
//! task only waits for the result (`reconcile::reconciler`).

use futures::future::BoxFuture;

/// Runs a future to completion somewhere else (it must keep the embedder's notion of time).
pub trait Offload: std::fmt::Debug + Send + Sync + 'static {
    fn spawn(&self, task: BoxFuture<'static, ()>);
}
