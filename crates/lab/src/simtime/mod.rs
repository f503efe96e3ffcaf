//! Time for the embedded cluster: tokio's paused clock, optionally paced to a multiple of real time.

use std::sync::Arc;
use std::time::Duration;

use insitu_sim::Clock as _;

pub mod turns;

/// Adapts the sim clock to the controller's `Clock`, so both read the same (virtual) time.
pub struct SharedClock(pub Arc<insitu_sim::SimClock>);

impl insitu_controller::Clock for SharedClock {
    fn now(&self) -> k8s_openapi::jiff::Timestamp {
        self.0.now()
    }
}

/// Builds the runtime for a simulated run: current-thread with paused time, so cluster time is virtual.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
}

/// Paces virtual time to at most `speed` × real time by blocking the (single) runtime thread between ticks.
/// With paused time tokio jumps to the next timer whenever it is idle; this task always has a timer at most
/// one tick away, and sleeps for real before letting time move on. `speed <= 0` means "as fast as possible".
pub fn spawn_pacer(speed: f64) {
    if speed <= 0.0 {
        return;
    }
    let tick = Duration::from_millis(50);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(tick).await;
            std::thread::sleep(tick.div_f64(speed));
        }
    });
}

/// Where the in-process controller's work runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the cluster's runtime thread, as one more task.
    Shared,
    /// In turns on the second core ([`turns`]), still on the cluster's virtual clock.
    SecondCore,
}

/// Reconciles in turns on the second core (kube-runtime would spawn them on the cluster's thread).
#[derive(Debug)]
struct SecondCore;

impl insitu_controller::offload::Offload for SecondCore {
    fn spawn(&self, task: futures::future::BoxFuture<'static, ()>) {
        turns::spawn(task);
    }
}

/// Starts the controller in-process on the simulated cluster's clock, on the cluster's thread. Sending on (or
/// dropping) the returned sender shuts it down; the handle ends when it has.
pub fn spawn_controller(
    client: kube::Client,
    config: insitu_controller::Config,
    clock: &Arc<insitu_sim::SimClock>,
    metrics: Arc<insitu_controller::Metrics>,
) -> (tokio::task::JoinHandle<()>, tokio::sync::oneshot::Sender<()>) {
    spawn_controller_placed(client, config, clock, metrics, Placement::Shared)
}

/// [`spawn_controller`], with the controller's work where `placement` says.
pub fn spawn_controller_placed(
    client: kube::Client,
    mut config: insitu_controller::Config,
    clock: &Arc<insitu_sim::SimClock>,
    metrics: Arc<insitu_controller::Metrics>,
    placement: Placement,
) -> (tokio::task::JoinHandle<()>, tokio::sync::oneshot::Sender<()>) {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    if placement == Placement::SecondCore {
        config.offload = Some(Arc::new(SecondCore));
    }
    let controller = insitu_controller::run(
        client,
        config,
        Arc::new(SharedClock(clock.clone())),
        metrics,
        async move {
            let _ = stop_rx.await;
        },
    );
    let handle = match placement {
        Placement::Shared => tokio::spawn(controller),
        Placement::SecondCore => turns::spawn_joined(controller),
    };
    (handle, stop_tx)
}
