//! The front's life: serving, draining (not ready, then refusing new requests), and the calls
//! in flight a drain waits for.
//!
//! A rolling restart takes a replica out of the load balancer's rotation before it stops
//! taking requests: `/readyz` says "not ready" first, new requests are still served for the
//! drain delay (the balancer's health checks need that long to notice), then refused with 503.
//! Calls in flight finish up to the drain timeout; those that cannot are answered with an error
//! (never left without an answer), and then the drain is over.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

const SERVING: u8 = 0;
/// `/readyz` says no; requests are still served.
const LEAVING: u8 = 1;
/// New requests are refused.
const REFUSING: u8 = 2;

/// How a drain goes ([`Lifecycle::drain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainOptions {
    /// How long new requests are still served after `/readyz` turned to "not ready".
    pub delay: Duration,
    /// How long calls in flight may take to finish once new requests are refused.
    pub timeout: Duration,
    /// How long the calls still running at the timeout are given to send their error answer.
    pub grace: Duration,
}

impl Default for DrainOptions {
    fn default() -> Self {
        Self { delay: Duration::from_secs(5), timeout: Duration::from_secs(30), grace: Duration::from_secs(1) }
    }
}

impl DrainOptions {
    /// A drain that serves new requests for `delay` after turning not ready, then lets calls
    /// in flight finish for up to `timeout`.
    pub fn new(delay: Duration, timeout: Duration) -> Self {
        Self { delay, timeout, ..Self::default() }
    }
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// Requests in flight when new ones started being refused.
    pub in_flight: usize,
    /// Calls cut off at the drain timeout (each answered with an error).
    pub cut_off: usize,
}

#[derive(Debug)]
struct Inner {
    phase: AtomicU8,
    in_flight: AtomicUsize,
    /// What a drain waits for besides requests: resumable streams whose answer is not read yet.
    held: AtomicUsize,
    idle: Notify,
    /// `true` once the calls still in flight must give up.
    abort: watch::Sender<bool>,
}

/// The front's state for `/readyz` and draining, shared by every connection; cloned freely.
///
/// The `serve` front starts a drain on SIGTERM and stops the server when it is over:
///
/// ```no_run
/// # async fn demo(server: mcp_gateway::HttpServer) {
/// use mcp_gateway::DrainOptions;
/// let life = server.lifecycle();
/// server
///     .run(async move {
///         let _ = tokio::signal::ctrl_c().await; // SIGTERM, in `serve`
///         life.drain(DrainOptions::default()).await;
///     })
///     .await;
/// // then close the upstreams
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Lifecycle {
    inner: Arc<Inner>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                phase: AtomicU8::new(SERVING),
                in_flight: AtomicUsize::new(0),
                held: AtomicUsize::new(0),
                idle: Notify::new(),
                abort: watch::channel(false).0,
            }),
        }
    }
}

/// One request in flight (or a hold, [`Lifecycle::hold`]); dropping it says it is done.
#[derive(Debug)]
pub(crate) struct InFlight {
    inner: Arc<Inner>,
    held: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let counter = if self.held { &self.inner.held } else { &self.inner.in_flight };
        if counter.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.inner.idle.notify_waiters();
        }
    }
}

impl Lifecycle {
    /// A front that is serving.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a drain has begun (`/readyz` then says "not ready").
    pub fn is_draining(&self) -> bool {
        self.inner.phase.load(Ordering::SeqCst) != SERVING
    }

    /// Whether new requests are refused.
    pub fn is_refusing(&self) -> bool {
        self.inner.phase.load(Ordering::SeqCst) == REFUSING
    }

    /// Requests being answered now.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// Counts a request in flight until the guard is dropped.
    pub(crate) fn enter(&self) -> InFlight {
        self.inner.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight { inner: Arc::clone(&self.inner), held: false }
    }

    /// Holds a drain (until the guard is dropped) without counting as a request: a resumable
    /// call's stream, whose answer a client has yet to read.
    pub(crate) fn hold(&self) -> InFlight {
        self.inner.held.fetch_add(1, Ordering::SeqCst);
        InFlight { inner: Arc::clone(&self.inner), held: true }
    }

    /// Resolves when the calls in flight must give up (the drain timeout passed).
    pub(crate) async fn aborted(&self) {
        let mut abort = self.inner.abort.subscribe();
        // An error means the sender is gone, which it never is while `self` lives.
        let _ = abort.wait_for(|abort| *abort).await;
    }

    /// Drains: `/readyz` says "not ready" at once; new requests are served for
    /// `options.delay`, then refused (503); calls in flight finish for up to `options.timeout`,
    /// and those still running then are answered with an error. Resolves when nothing is in
    /// flight (or the grace for the error answers is over). Calling it again while a drain is
    /// under way starts nothing new.
    pub async fn drain(&self, options: DrainOptions) -> DrainReport {
        if self.inner.phase.compare_exchange(SERVING, LEAVING, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            self.wait_idle(options.timeout.saturating_add(options.grace)).await;
            return DrainReport { in_flight: self.in_flight(), cut_off: 0 };
        }
        tracing::info!(delay = ?options.delay, timeout = ?options.timeout, "draining: not ready any more");
        tokio::time::sleep(options.delay).await;
        self.inner.phase.store(REFUSING, Ordering::SeqCst);
        let in_flight = self.in_flight();
        let mut cut_off = 0;
        if !self.wait_idle(options.timeout).await {
            cut_off = self.in_flight();
            tracing::warn!(calls = cut_off, "draining: calls still running at the drain timeout are cut off");
            self.inner.abort.send_replace(true);
            self.wait_idle(options.grace).await;
        }
        DrainReport { in_flight, cut_off }
    }

    /// Waits until nothing is in flight, for at most `limit`; `true` when nothing is.
    async fn wait_idle(&self, limit: Duration) -> bool {
        let idle = async {
            loop {
                let notified = self.inner.idle.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.in_flight() == 0 && self.inner.held.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, idle).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_drain_turns_not_ready_then_refuses_then_cuts_off() {
        let life = Lifecycle::new();
        let quick = life.enter();
        let stuck = life.enter();
        let stuck_life = life.clone();
        let stuck_call = tokio::spawn(async move {
            stuck_life.aborted().await;
            drop(stuck);
        });
        let draining = tokio::spawn({
            let life = life.clone();
            // A delay no loaded machine oversleeps the check below by.
            async move { life.drain(DrainOptions::new(Duration::from_millis(1500), Duration::from_millis(300))).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(life.is_draining() && !life.is_refusing(), "not ready first, still serving");
        while !life.is_refusing() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(quick);
        let report = draining.await.unwrap_or_else(|_| unreachable!());
        assert_eq!(report, DrainReport { in_flight: 2, cut_off: 1 });
        assert!(stuck_call.await.is_ok());
        assert_eq!(life.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_drain_with_nothing_in_flight_ends_after_the_delay() {
        let life = Lifecycle::new();
        let report = life.drain(DrainOptions::new(Duration::from_millis(10), Duration::from_secs(10))).await;
        assert_eq!(report, DrainReport { in_flight: 0, cut_off: 0 });
        assert!(life.is_refusing());
    }
}
