//! Polling for the agent's tests: the agent acts on its own schedule (watch events, Kruise's 3 s restart wait).

use std::time::Duration;

/// Polls every 50 ms until `f` holds (15 s at most).
pub async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    for _ in 0..300 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for: {what}");
}
