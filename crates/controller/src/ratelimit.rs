//! Requeue delay after a failed reconcile: Kruise's workqueue rate limiter, and the server's `Retry-After`.
//!
//! Kruise's CloneSet controller (`pkg/util/ratelimiter`, flags `--rate-limiter-*`) uses client-go's
//! `DefaultControllerRateLimiter` shape: the larger of a per-item exponential back-off (5 ms · 2^failures,
//! capped at 1000 s) and one token bucket shared by all items (10 per second, burst 100). A successful reconcile
//! `Forget`s the item, so its next failure starts again at 5 ms. An error the server answered with 429 or a 5xx
//! carrying `retryAfterSeconds` (kube-apiserver's max-in-flight filter, a shutting-down server) is not retried
//! before that time: client-go's request retry waits `Retry-After`; here the whole reconcile waits.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::Error;

/// Kruise `--rate-limiter-base-delay`.
pub const BASE_DELAY: Duration = Duration::from_millis(5);
/// Kruise `--rate-limiter-max-delay`.
pub const MAX_DELAY: Duration = Duration::from_secs(1000);
/// Kruise `--rate-limiter-qps`.
pub const QPS: f64 = 10.0;
/// Kruise `--rate-limiter-bucket-size`.
pub const BURST: f64 = 100.0;

/// Per-item exponential failure back-off combined (max) with an overall token bucket.
pub struct RateLimiter {
    base: Duration,
    max: Duration,
    qps: f64,
    burst: f64,
    state: Mutex<State>,
}

struct State {
    /// Failures since the item's last success (client-go `NumRequeues`).
    failures: HashMap<String, u32>,
    /// Tokens left in the bucket at `last` (negative: reservations waiting for tokens).
    tokens: f64,
    last: Option<Instant>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::new(BASE_DELAY, MAX_DELAY, QPS, BURST)
    }
}

impl RateLimiter {
    pub fn new(base: Duration, max: Duration, qps: f64, burst: f64) -> Self {
        Self {
            base,
            max,
            qps,
            burst,
            state: Mutex::new(State {
                failures: HashMap::new(),
                tokens: burst,
                last: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records one more failure of `key` and returns how long it waits before its next reconcile
    /// (client-go `MaxOfRateLimiter.When`).
    pub fn when(&self, key: &str, now: Instant) -> Duration {
        let mut s = self.lock();
        let n = s.failures.entry(key.to_string()).or_insert(0);
        let exp = *n;
        *n = n.saturating_add(1);
        let item = self.item_delay(exp);
        let bucket = self.reserve(&mut s, now);
        item.max(bucket)
    }

    /// `base · 2^exp`, capped at `max` (integer nanoseconds: no overflow for any `exp`).
    fn item_delay(&self, exp: u32) -> Duration {
        let max = self.max.as_nanos();
        let nanos = if exp >= 64 {
            max
        } else {
            self.base.as_nanos().saturating_mul(1u128 << exp).min(max)
        };
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Takes one token (golang.org/x/time/rate `Reserve`): refilled at `qps` since the last reservation up to
    /// `burst`; when none is left the caller waits until its token has accrued.
    fn reserve(&self, s: &mut State, now: Instant) -> Duration {
        let elapsed = s.last.map_or(Duration::MAX, |l| now.saturating_duration_since(l));
        let refill = elapsed.as_secs_f64() * self.qps;
        s.tokens = (s.tokens + refill).min(self.burst);
        s.last = Some(now.max(s.last.unwrap_or(now)));
        s.tokens -= 1.0;
        if s.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-s.tokens / self.qps)
        }
    }

    /// The item succeeded: its back-off starts over (client-go `Forget`).
    pub fn forget(&self, key: &str) {
        self.lock().failures.remove(key);
    }

    /// Failures of `key` since its last success.
    pub fn num_requeues(&self, key: &str) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }
}

/// The wait the server asked for: `details.retryAfterSeconds` of a 429 or 5xx answer (kube-apiserver sends it
/// with the `Retry-After` header).
pub fn retry_after(err: &Error) -> Option<Duration> {
    let source = match err {
        Error::Kube(e) | Error::Action { source: e, .. } => e,
        Error::Serde(_) | Error::Invalid(_) => return None,
    };
    match source {
        kube::Error::Api(s) if s.code == 429 || s.code >= 500 => s
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .filter(|&secs| secs > 0)
            .map(|secs| Duration::from_secs(u64::from(secs))),
        _ => None,
    }
}

/// Delay before the next reconcile of `key` after `err`: the rate limiter's, or the server's `Retry-After`
/// when longer.
pub fn requeue_delay(limiter: &RateLimiter, key: &str, err: &Error, now: Instant) -> Duration {
    let limited = limiter.when(key, now);
    retry_after(err).map_or(limited, |ra| ra.max(limited))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, retry_after_seconds: u32) -> Error {
        let mut status = kube::core::Status::failure("injected", "TooManyRequests").with_code(code);
        status.details = Some(kube::core::response::StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds,
        });
        Error::Action {
            action: "create pod".into(),
            source: kube::Error::Api(status.boxed()),
        }
    }

    #[test]
    fn per_item_delay_doubles_from_5ms_to_the_1000s_cap() {
        let rl = RateLimiter::default();
        let now = Instant::now();
        let got: Vec<Duration> = (0..5).map(|_| rl.when("ns/a", now)).collect();
        let ms = |m| Duration::from_millis(m);
        assert_eq!(got, vec![ms(5), ms(10), ms(20), ms(40), ms(80)]);
        // 5 ms · 2^17 = 655 s, 2^18 = 1311 s > 1000 s.
        let rl = RateLimiter::new(BASE_DELAY, MAX_DELAY, 1e9, 1e9);
        let got: Vec<Duration> = (0..40).map(|_| rl.when("ns/a", now)).collect();
        assert_eq!(got[17], Duration::from_millis(5 * 131_072));
        assert_eq!(got[18], MAX_DELAY);
        assert_eq!(got[39], MAX_DELAY);
        assert_eq!(rl.num_requeues("ns/a"), 40);
    }

    #[test]
    fn huge_failure_counts_stay_at_the_cap() {
        let rl = RateLimiter::new(BASE_DELAY, MAX_DELAY, 1e9, 1e9);
        assert_eq!(rl.item_delay(u32::MAX), MAX_DELAY);
        assert_eq!(rl.item_delay(1100), MAX_DELAY);
    }

    #[test]
    fn items_back_off_independently_and_success_resets() {
        let rl = RateLimiter::default();
        let now = Instant::now();
        for _ in 0..3 {
            rl.when("ns/a", now);
        }
        assert_eq!(rl.when("ns/b", now), Duration::from_millis(5));
        assert_eq!(rl.when("ns/a", now), Duration::from_millis(40));
        rl.forget("ns/a");
        assert_eq!(rl.num_requeues("ns/a"), 0);
        assert_eq!(rl.when("ns/a", now), Duration::from_millis(5));
    }

    #[test]
    fn the_shared_bucket_spaces_failures_past_its_burst_at_10_per_second() {
        let rl = RateLimiter::default();
        let now = Instant::now();
        // 100 distinct items fail at once: all within the burst, each at its own 5 ms.
        for i in 0..100 {
            assert_eq!(rl.when(&format!("ns/{i}"), now), Duration::from_millis(5));
        }
        // The 101st and 102nd wait for tokens: 100 ms, 200 ms.
        assert_eq!(rl.when("ns/x", now), Duration::from_millis(100));
        assert_eq!(rl.when("ns/y", now), Duration::from_millis(200));
        // One second later 10 tokens have accrued, 2 of them already promised: the next waits 0 → its own 5 ms.
        let later = now + Duration::from_secs(1);
        assert_eq!(rl.when("ns/z", later), Duration::from_millis(5));
        // After a long idle the bucket is full again, never more than the burst.
        let idle = now + Duration::from_secs(3600);
        for i in 0..100 {
            assert_eq!(rl.when(&format!("idle/{i}"), idle), Duration::from_millis(5));
        }
        assert!(rl.when("idle/x", idle) > Duration::ZERO);
    }

    #[test]
    fn retry_after_of_429_and_5xx_is_honoured() {
        let rl = RateLimiter::default();
        let now = Instant::now();
        let e429 = api_error(429, 1);
        assert_eq!(retry_after(&e429), Some(Duration::from_secs(1)));
        assert_eq!(requeue_delay(&rl, "ns/a", &e429, now), Duration::from_secs(1));
        assert_eq!(retry_after(&api_error(503, 7)), Some(Duration::from_secs(7)));
        // Not for other codes, nor without the field.
        assert_eq!(retry_after(&api_error(409, 3)), None);
        assert_eq!(retry_after(&api_error(500, 0)), None);
        assert_eq!(retry_after(&Error::Invalid("x".into())), None);
        // The limiter's delay wins when it is longer.
        let rl = RateLimiter::new(Duration::from_secs(4), MAX_DELAY, QPS, BURST);
        assert_eq!(requeue_delay(&rl, "ns/a", &e429, now), Duration::from_secs(4));
    }
}
