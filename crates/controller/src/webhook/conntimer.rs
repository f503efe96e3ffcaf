//! Idle and header-read deadlines for an HTTP/1.1 connection, as Go's `net/http` server applies them.
//!
//! kube-apiserver's server sets `ReadHeaderTimeout: 32s` and `IdleTimeout: 90s` (k8s.io/apiserver
//! `pkg/server/secure_serving.go`, `Serve`). Go waits up to `IdleTimeout` for the first byte of the next request on
//! a kept-alive connection, then gives the rest of its headers `ReadHeaderTimeout` (net/http `conn.serve`: the
//! idle deadline, then `readRequest`'s header deadline). hyper has one clock, `header_read_timeout`, started as
//! soon as the connection waits for a request: used alone, it closes idle connections at the header deadline.
//!
//! [`ConnTimer`] is that clock for hyper, per connection: the first request's head has `header` from the start
//! (Go's first `readRequest` sets its header deadline at once); for each later one the deadline runs to `idle`
//! while no byte of it has arrived, and to `header` after the first byte, which [`Watched`] (the connection's
//! IO) reports. Requests already buffered when hyper starts waiting (pipelining) count as idle until a new byte
//! arrives: the idle deadline is the longer one, so a pipelining client is never cut off sooner than in Go.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::rt::{Sleep, Timer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// kube-apiserver's `IdleTimeout` (k8s.io/apiserver `pkg/server/secure_serving.go`).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// What the connection's IO saw since hyper last started waiting for a request.
#[derive(Debug, Default)]
struct Arrivals {
    /// hyper is waiting for a request's head and no byte of it has arrived yet.
    waiting: bool,
    /// When the first byte arrived after the wait began.
    first: Option<Instant>,
    /// Waits begun on this connection.
    waits: u64,
}

/// The clock shared by one connection's [`ConnTimer`] and [`Watched`] IO.
#[derive(Clone, Debug, Default)]
pub struct Arrival(Arc<Mutex<Arrivals>>);

impl Arrival {
    fn lock(&self) -> std::sync::MutexGuard<'_, Arrivals> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new wait for a request begins now; whether it is the connection's first.
    fn start_wait(&self) -> bool {
        let mut a = self.lock();
        a.waiting = true;
        a.first = None;
        a.waits += 1;
        a.waits == 1
    }

    /// Bytes were read.
    fn bytes_read(&self) {
        let mut a = self.lock();
        if a.waiting {
            a.waiting = false;
            a.first = Some(Instant::now());
        }
    }

    fn first_byte(&self) -> Option<Instant> {
        self.lock().first
    }
}

/// hyper's timer for one connection: header deadlines that wait `idle` for the first byte, `header` after it.
#[derive(Clone, Debug)]
pub struct ConnTimer {
    arrival: Arrival,
    idle: Duration,
    header: Duration,
}

impl ConnTimer {
    /// A timer and the IO wrapper that feeds it, for one connection.
    pub fn new<IO>(io: IO, idle: Duration, header: Duration) -> (Self, Watched<IO>) {
        let arrival = Arrival::default();
        let timer = Self {
            arrival: arrival.clone(),
            idle,
            header,
        };
        (timer, Watched { io, arrival })
    }
}

impl Timer for ConnTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        Box::pin(Plain(Box::pin(tokio::time::sleep(duration))))
    }

    /// hyper asks for one deadline per request head (`header_read_timeout` after "now"): the wait starts here.
    fn sleep_until(&self, _deadline: std::time::Instant) -> Pin<Box<dyn Sleep>> {
        let first = self.arrival.start_wait();
        let started = Instant::now();
        Box::pin(HeadDeadline {
            arrival: self.arrival.clone(),
            fixed: first.then_some(started + self.header),
            idle_until: started + self.idle,
            header: self.header,
            sleep: Box::pin(tokio::time::sleep_until(started + self.idle.min(self.header))),
        })
    }
}

/// Any other sleep hyper asks for.
struct Plain(Pin<Box<tokio::time::Sleep>>);

impl Future for Plain {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl Sleep for Plain {}

/// The deadline of one request head: `fixed` for a connection's first request; otherwise `idle_until` while no
/// byte came, the first byte's time + `header` after.
struct HeadDeadline {
    arrival: Arrival,
    fixed: Option<Instant>,
    idle_until: Instant,
    header: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl HeadDeadline {
    fn deadline(&self) -> Instant {
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        match self.arrival.first_byte() {
            Some(first) => first + self.header,
            None => self.idle_until,
        }
    }
}

impl Future for HeadDeadline {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The sleep starts at the shorter deadline: re-aimed whenever it fires (or is polled) early.
        loop {
            let due = self.deadline();
            if self.sleep.deadline() != due {
                self.sleep.as_mut().reset(due);
            }
            match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) if self.deadline() == due => return Poll::Ready(()),
                Poll::Ready(()) => continue,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Sleep for HeadDeadline {}

/// A connection's IO that tells its [`ConnTimer`] when bytes arrive.
#[derive(Debug)]
pub struct Watched<IO> {
    io: IO,
    arrival: Arrival,
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.arrival.bytes_read();
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const IDLE: Duration = Duration::from_secs(90);
    const HEADER: Duration = Duration::from_secs(32);

    /// Serves one plain-TCP-like duplex connection with the timer; returns the client end.
    fn served() -> tokio::io::DuplexStream {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (timer, io) = ConnTimer::new(server, IDLE, HEADER);
        let svc = hyper::service::service_fn(|_req| async {
            Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                hyper::body::Bytes::from_static(b"ok"),
            )))
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(timer)
                .header_read_timeout(HEADER)
                .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
                .await;
        });
        client
    }

    /// Reads until the server closes; the virtual time that took.
    async fn closed_after(c: &mut tokio::io::DuplexStream) -> Duration {
        let start = Instant::now();
        let mut buf = vec![0u8; 4096];
        while c.read(&mut buf).await.map(|n| n > 0).unwrap_or(false) {}
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_keep_alive_connection_lives_for_the_idle_timeout() {
        let mut c = served();
        c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .expect("write");
        let mut buf = vec![0u8; 4096];
        let n = c.read(&mut buf).await.expect("answer");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        let waited = closed_after(&mut c).await;
        assert!(
            waited >= IDLE && waited < IDLE + Duration::from_secs(1),
            "closed after {waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_head_gets_the_header_timeout_from_its_first_byte() {
        let mut c = served();
        c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .expect("write");
        let mut buf = vec![0u8; 4096];
        let n = c.read(&mut buf).await.expect("answer");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        tokio::time::sleep(Duration::from_secs(60)).await;
        c.write_all(b"GET / HTTP/1.1\r\nHo").await.expect("write");
        let waited = closed_after(&mut c).await;
        assert!(
            waited >= HEADER && waited < HEADER + Duration::from_secs(1),
            "closed after {waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_fresh_connection_has_the_header_timeout_for_its_first_request() {
        let mut c = served();
        let waited = closed_after(&mut c).await;
        assert!(
            waited >= HEADER && waited < HEADER + Duration::from_secs(1),
            "closed after {waited:?}"
        );
    }
}
