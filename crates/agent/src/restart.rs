//! An in-place restart as the kubelet kills a container (Kruise `pkg/daemon/kuberuntime/kuberuntime_container.go`,
//! `KillContainer` and `executePreStopHook`): the preStop hook within the grace period, then CRI StopContainer
//! with what is left of it (at least the kubelet's 2 s minimum). The kubelet then starts the container again.

use std::time::{Duration, Instant};

use crate::cri::{Cri, CriError};
use crate::decide::{MIN_GRACE_SECONDS, PreStop, Restart};

/// Runs the restart; the hook's failure or timeout is logged and the stop goes on (as the kubelet does).
pub async fn restart(cri: &Cri, r: &Restart, pod: &str) -> Result<(), CriError> {
    let mut grace = r.grace_seconds;
    if let Some(hook) = r.pre_stop.as_ref().filter(|_| grace > 0) {
        let budget = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
        let start = Instant::now();
        let run = async {
            match hook {
                PreStop::Exec(cmd) => match cri.exec_sync(&r.id, cmd.clone(), budget).await {
                    Ok(0) => {}
                    Ok(code) => {
                        tracing::warn!(pod, container = %r.name, code, "preStop hook exited non-zero")
                    }
                    Err(e) => tracing::warn!(pod, container = %r.name, error = %e, "preStop hook failed"),
                },
                PreStop::Sleep(s) => {
                    tokio::time::sleep(Duration::from_secs(u64::try_from(*s).unwrap_or(0))).await;
                }
                PreStop::HttpGet => {
                    tracing::warn!(pod, container = %r.name, "preStop httpGet hooks are not run by the agent yet")
                }
            }
        };
        if tokio::time::timeout(budget, run).await.is_err() {
            tracing::warn!(pod, container = %r.name, grace, "preStop hook did not complete in time");
        }
        grace -= i64::try_from(start.elapsed().as_secs()).unwrap_or(grace);
    }
    let grace = grace.max(MIN_GRACE_SECONDS);
    tracing::info!(pod, container = %r.name, id = %r.id, grace, "stopping container (env from metadata changed)");
    cri.stop(&r.id, grace).await
}
