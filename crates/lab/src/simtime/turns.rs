//! A future polled on the second core in turns, while virtual time still moves only when every thread is idle.
//!
//! The embedded cluster runs on one current-thread runtime with tokio's paused clock: whenever that thread has
//! nothing to do, tokio jumps the clock to the next timer. A second runtime would have a clock of its own, so
//! the controller could not simply run on one. What tokio does offer is that a `spawn_blocking` task keeps the
//! paused clock from advancing from the moment it is spawned until it ends (`BlockingSchedule`). So a
//! [`Turns`] future is polled on the blocking pool, one turn per wake-up: the waker spawns a turn (from
//! whichever thread woke it, before that thread can go idle), the turn polls until the future is pending
//! with no wake-up left over, and ends, letting time move on. The future runs inside the runtime's context
//! (`Handle::enter`): its timers are the runtime's (virtual) timers, its `tokio::spawn`s go to the runtime,
//! its own `spawn_blocking`s to the pool. Turns are large pieces (all the work a batch of watch events
//! brings), unlike a hand-off per apiserver request, which cost more than it gained (docs/benchmarks.md,
//! "Choices these figures rest on").

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

type Boxed = Pin<Box<dyn Future<Output = ()> + Send>>;

/// No turn spawned; the next wake-up spawns one.
const IDLE: u8 = 0;
/// A turn is spawned and has not started polling.
const SCHEDULED: u8 = 1;
/// A turn is polling.
const RUNNING: u8 = 2;
/// A turn is polling and was woken meanwhile: it polls again before ending.
const NOTIFIED: u8 = 3;
/// The future completed (or panicked); wake-ups are ignored.
const DONE: u8 = 4;

struct Turns {
    handle: tokio::runtime::Handle,
    state: AtomicU8,
    future: Mutex<Option<Boxed>>,
}

/// Runs `future` in turns on the runtime's blocking pool (see the module doc) until it completes; a panic
/// drops it (and whatever it owned: a oneshot sender it would have answered on tells its receiver). Must be
/// called inside the (current-thread, paused-clock) runtime it is to share time with.
pub fn spawn(future: impl Future<Output = ()> + Send + 'static) {
    let turns = Arc::new(Turns {
        handle: tokio::runtime::Handle::current(),
        state: AtomicU8::new(IDLE),
        future: Mutex::new(Some(Box::pin(future))),
    });
    turns.wake_by_ref();
}

/// [`spawn`], as a task of the runtime that ends when the future has (and panics if it did).
pub fn spawn_joined(future: impl Future<Output = ()> + Send + 'static) -> tokio::task::JoinHandle<()> {
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    spawn(async move {
        future.await;
        let _ = done_tx.send(());
    });
    tokio::spawn(async move {
        if done_rx.await.is_err() {
            panic!("a future run in turns panicked");
        }
    })
}

impl Wake for Turns {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = match state {
                IDLE => SCHEDULED,
                RUNNING => NOTIFIED,
                _ => return,
            };
            match self
                .state
                .compare_exchange(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next == SCHEDULED => {
                    // Spawned here, synchronously: the clock is held from this moment, not from when the
                    // turn's thread gets to run.
                    let me = self.clone();
                    self.handle.spawn_blocking(move || me.turn());
                    return;
                }
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }
}

impl Turns {
    /// Polls until the future is pending with no wake-up since the poll began, or done.
    fn turn(self: Arc<Self>) {
        let _context = self.handle.enter();
        let waker = Waker::from(self.clone());
        let mut cx = Context::from_waker(&waker);
        let mut slot = self.future.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            self.state.store(RUNNING, Ordering::Release);
            let Some(future) = slot.as_mut() else {
                self.state.store(DONE, Ordering::Release);
                return;
            };
            let polled =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
            match polled {
                Ok(Poll::Pending) => {
                    if self
                        .state
                        .compare_exchange(RUNNING, IDLE, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        return;
                    }
                    // NOTIFIED: woken while polling; poll again in this turn.
                }
                Ok(Poll::Ready(())) | Err(_) => {
                    self.state.store(DONE, Ordering::Release);
                    *slot = None;
                    if let Err(panic) = polled {
                        std::panic::resume_unwind(panic);
                    }
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    use super::*;

    /// The future's timers are virtual and time does not move while a turn computes: a turn that burns real
    /// time between two virtual sleeps sees exactly the slept virtual time, and a runtime task's timer that
    /// is due during that burn fires only after it.
    #[test]
    fn turns_share_the_paused_clock() {
        let rt = crate::simtime::runtime().expect("runtime");
        rt.block_on(async {
            let start = tokio::time::Instant::now();
            let seen = Arc::new(AtomicU64::new(0));
            let seen2 = seen.clone();
            let handle = spawn_joined(async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                // Busy for real while holding the clock: the runtime's 1 s timer below must not fire meanwhile.
                std::thread::sleep(Duration::from_millis(50));
                seen2.store(start.elapsed().as_millis() as u64, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(5)).await;
            });
            tokio::time::sleep(Duration::from_millis(10_500)).await;
            // The turn recorded exactly 10 s of virtual time, despite its 50 ms of real work.
            assert_eq!(seen.load(Ordering::SeqCst), 10_000);
            handle.await.expect("turns task");
            assert_eq!(start.elapsed(), Duration::from_secs(15));
        });
    }

    /// A wake-up from the runtime's thread (a channel send) reaches the future, and every message is seen.
    #[test]
    fn wakeups_from_the_runtime_reach_the_future() {
        let rt = crate::simtime::runtime().expect("runtime");
        rt.block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(4);
            let sum = Arc::new(AtomicU64::new(0));
            let sum2 = sum.clone();
            let handle = spawn_joined(async move {
                while let Some(v) = rx.recv().await {
                    sum2.fetch_add(u64::from(v), Ordering::SeqCst);
                }
            });
            for v in 1..=1000u32 {
                tx.send(v).await.expect("send");
                if v % 100 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            drop(tx);
            handle.await.expect("turns task");
            assert_eq!(sum.load(Ordering::SeqCst), 500_500);
        });
    }
}
