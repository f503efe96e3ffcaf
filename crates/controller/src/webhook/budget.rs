//! What bounds the webhook's memory and keeps its work off the async runtime: a budget of reviews and bytes in
//! flight, a small pool of deep-stacked threads that parse and convert, and a response body that gives the
//! budget back only once it has been sent.

use std::pin::Pin;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The limits of the webhook server (see `docs/webhook-security.md` for why each is what it is).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest request body accepted: answered 413 above it.
    pub max_body: usize,
    /// Reviews read, parsed or answered at once.
    pub max_reviews: usize,
    /// Request bytes in flight over all reviews (a review holds its body's size until its answer is sent).
    pub byte_budget: usize,
    /// How long a review waits for room in the budget before it is answered 429 with `Retry-After`.
    pub queue_wait: Duration,
    /// Deadline for reading a request body once it is admitted.
    pub body_timeout: Duration,
    /// Deadlines for the TLS handshake and for a request's headers (from the first byte of a request after the
    /// connection's first: [`super::conntimer`]).
    pub handshake_timeout: Duration,
    pub header_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request's first byte (`conntimer`).
    pub idle_timeout: Duration,
    /// How long a response write may make no progress before the connection is closed.
    pub write_timeout: Duration,
    /// Threads that parse, convert and serialise reviews.
    pub workers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            // kube-apiserver sends a list's objects in one ConversionReview (apiextensions-apiserver
            // `webhook_converter.go`, `Convert`): 80,000 small CloneSets are ~32 MB. Objects are up to
            // 1.5 MiB in etcd; admission reviews carry one object and its old version.
            max_body: 64 << 20,
            max_reviews: 4,
            // One maximal review, or several smaller ones; the work takes ~2x the body (body + answer).
            byte_budget: 64 << 20,
            queue_wait: Duration::from_secs(2),
            // An admission webhook call lasts at most 30 s (`timeoutSeconds`' maximum) and kube-apiserver
            // sends its bodies at once: a body still incomplete then has no caller waiting for the answer.
            body_timeout: Duration::from_secs(30),
            // kube-apiserver's own server: `ReadHeaderTimeout: 32 * time.Second` (k8s.io/apiserver
            // `pkg/server/secure_serving.go`, `Serve`), which Go's net/http also applies to the TLS handshake.
            handshake_timeout: Duration::from_secs(32),
            header_timeout: Duration::from_secs(32),
            idle_timeout: super::conntimer::IDLE_TIMEOUT,
            write_timeout: Duration::from_secs(32),
            workers: 2,
        }
    }
}

/// Admission into the budget: a review slot and its bytes, given back when dropped.
pub struct Admission {
    _review: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
}

/// The budget of reviews and bytes in flight.
pub struct Budget {
    reviews: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    limits: Limits,
}

impl Budget {
    pub fn new(limits: Limits) -> Self {
        Self {
            reviews: Arc::new(Semaphore::new(limits.max_reviews)),
            bytes: Arc::new(Semaphore::new(limits.byte_budget.min(u32::MAX as usize))),
            limits,
        }
    }

    /// Waits up to `queue_wait` for one review slot and `bytes` of budget; `None` when there is no room.
    pub async fn admit(&self, bytes: usize) -> Option<Admission> {
        let bytes = u32::try_from(bytes.min(self.limits.byte_budget)).unwrap_or(u32::MAX);
        let wait = async {
            let review = self.reviews.clone().acquire_owned().await.ok()?;
            let bytes = self.bytes.clone().acquire_many_owned(bytes).await.ok()?;
            Some(Admission {
                _review: review,
                _bytes: bytes,
            })
        };
        tokio::time::timeout(self.limits.queue_wait, wait)
            .await
            .ok()
            .flatten()
    }

    /// Room left, in bytes (tests and the benchmark).
    pub fn bytes_available(&self) -> usize {
        self.bytes.available_permits()
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// A few threads with stacks deep enough for 10,000-level JSON (`insitu_api::jsondepth::DEEP_STACK`): reviews
/// are parsed and converted there, so the async workers keep answering `/healthz` meanwhile. The threads end
/// when the pool is dropped.
pub struct Pool {
    jobs: mpsc::Sender<Job>,
}

impl Pool {
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("insitu-webhook-{i}"))
                .stack_size(insitu_api::jsondepth::DEEP_STACK)
                .spawn(move || {
                    loop {
                        let job = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => return,
                        };
                        let Ok(job) = job else { return };
                        // A panicking job drops its answer channel (the request gets a 500); the thread lives on.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                })?;
        }
        Ok(Self { jobs: tx })
    }

    /// Runs `f` on a pool thread; `None` if it panicked.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.jobs.send(job).ok()?;
        rx.await.ok()
    }
}

/// A response body that holds its review's [`Admission`] until the body has been handed over in full (or the
/// connection dropped it): the answer's bytes count against the budget as long as they are in memory.
pub struct Guarded {
    inner: Full<Bytes>,
    admission: Option<Admission>,
}

impl Guarded {
    pub fn new(bytes: Bytes, admission: Option<Admission>) -> Self {
        Self {
            inner: Full::new(bytes),
            admission,
        }
    }
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            self.admission = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_budget_admits_up_to_its_bytes_and_reviews_then_refuses() {
        let budget = Budget::new(Limits {
            max_reviews: 2,
            byte_budget: 100,
            queue_wait: Duration::from_millis(50),
            ..Limits::default()
        });
        let a = budget.admit(60).await.expect("room for 60 of 100 bytes");
        assert_eq!(budget.bytes_available(), 40);
        assert!(budget.admit(60).await.is_none(), "60 more bytes do not fit");
        let b = budget.admit(40).await.expect("40 fit");
        assert!(budget.admit(0).await.is_none(), "both review slots are taken");
        drop(a);
        assert_eq!(budget.bytes_available(), 60);
        // A body larger than the whole budget waits for all of it rather than never fitting.
        drop(b);
        let whole = budget.admit(1000).await.expect("the whole budget");
        assert_eq!(budget.bytes_available(), 0);
        drop(whole);
    }

    #[tokio::test]
    async fn the_pool_runs_jobs_off_the_runtime_and_survives_a_panic() {
        let pool = Pool::new(1).unwrap();
        let name = pool
            .run(|| std::thread::current().name().map(str::to_string))
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("insitu-webhook-0"));
        let panicked: Option<()> = pool.run(|| panic!("boom")).await;
        assert!(panicked.is_none());
        assert_eq!(pool.run(|| 2 + 2).await, Some(4));
    }

    #[tokio::test]
    async fn a_guarded_body_gives_the_budget_back_once_sent() {
        use http_body_util::BodyExt;
        let budget = Budget::new(Limits {
            byte_budget: 10,
            ..Limits::default()
        });
        let admission = budget.admit(10).await;
        let body = Guarded::new(Bytes::from_static(b"answer"), admission);
        assert_eq!(budget.bytes_available(), 0);
        let sent = body.collect().await.unwrap().to_bytes();
        assert_eq!(&sent[..], b"answer");
        assert_eq!(budget.bytes_available(), 10);
    }
}
