//! Time for the embedded cluster: tokio's paused clock, optionally paced to a multiple of real time.

use std::sync::Arc;
use std::time::Duration;

use insitu_sim::Clock as _;

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

/// Starts the controller in-process on the simulated cluster's clock. Sending on (or dropping) the returned
/// sender shuts it down; the handle ends when it has.
pub fn spawn_controller(
    client: kube::Client,
    config: insitu_controller::Config,
    clock: &Arc<insitu_sim::SimClock>,
    metrics: Arc<insitu_controller::Metrics>,
) -> (tokio::task::JoinHandle<()>, tokio::sync::oneshot::Sender<()>) {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(insitu_controller::run(
        client,
        config,
        Arc::new(SharedClock(clock.clone())),
        metrics,
        async move {
            let _ = stop_rx.await;
        },
    ));
    (handle, stop_tx)
}
