//! Request deadlines, enforced by one watchdog thread for the whole process.
//!
//! Not by tokio timers: a timer per request cost about a fifth of sequential throughput, and
//! even one armed timer per connection made every idle wait of the runtime a timed one, which
//! cost as much again when client and server run on different cores. The thread scans every
//! [`TIMEOUT_GRANULARITY`] while some request has a deadline and sleeps on a condition
//! variable otherwise; a starting request wakes it only when it sleeps, so the common path
//! costs one atomic load.
//!
//! The thread starts [`WATCHDOG_START_DELAY`] after the first request (sooner if its timeout
//! is shorter), by one tokio timer: a command that connects, asks and exits within that time
//! never starts it: starting the thread and waiting for it at exit took about 0.1 ms of CPU
//! of a 2.6 ms `mcp-harness tools --json` (`perf stat`; its wall time moved within the noise).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How often deadlines are checked: request timeouts fire up to this much late.
pub const TIMEOUT_GRANULARITY: Duration = Duration::from_millis(10);

/// How long after the first request the watchdog thread starts (at that request's deadline if
/// it is sooner, so no deadline waits for it).
pub const WATCHDOG_START_DELAY: Duration = Duration::from_millis(100);

/// Something with request deadlines (a connection).
pub(crate) trait Expiring: Send + Sync {
    /// Whether any request has a deadline worth watching.
    fn has_deadlines(&self) -> bool;
    /// Fail the requests whose deadline is at or before `now`.
    fn expire(&self, now: Instant);
}

/// [`Registry::thread`]: no thread and no start scheduled.
const NOT_STARTED: u8 = 0;
/// A tokio timer will start the thread at [`Registry::start_at`].
const SCHEDULED: u8 = 1;
/// The thread runs (or could not be started, which was logged).
const RUNNING: u8 = 2;

struct Registry {
    watched: Mutex<Vec<Weak<dyn Expiring>>>,
    wakeup: Condvar,
    idle: AtomicBool,
    thread: AtomicU8,
    /// When the scheduled start happens.
    start_at: Mutex<Option<Instant>>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

fn registry() -> &'static Registry {
    REGISTRY.get_or_init(|| Registry {
        watched: Mutex::new(Vec::new()),
        wakeup: Condvar::new(),
        idle: AtomicBool::new(false),
        thread: AtomicU8::new(NOT_STARTED),
        start_at: Mutex::new(None),
    })
}

fn watched(registry: &Registry) -> MutexGuard<'_, Vec<Weak<dyn Expiring>>> {
    registry.watched.lock().unwrap_or_else(|p| p.into_inner())
}

/// Watch these deadlines from now on (until the value is dropped).
pub(crate) fn watch(item: Weak<dyn Expiring>) {
    let registry = registry();
    watched(registry).push(item);
    if registry.thread.load(Ordering::SeqCst) == RUNNING {
        notify(registry);
    }
}

/// A request with this timeout started: make sure its deadline is watched.
pub(crate) fn wake(timeout: Duration) {
    let registry = registry();
    match registry.thread.load(Ordering::SeqCst) {
        RUNNING => {
            if registry.idle.load(Ordering::SeqCst) {
                notify(registry);
            }
        }
        _ => schedule(registry, timeout),
    }
}

fn notify(registry: &Registry) {
    let _guard = watched(registry);
    registry.wakeup.notify_one();
}

/// Starts the thread within `min(timeout, WATCHDOG_START_DELAY)` from now: by a tokio timer
/// on this runtime, or at once outside one or when an earlier start is needed.
fn schedule(registry: &'static Registry, timeout: Duration) {
    let delay = timeout.min(WATCHDOG_START_DELAY);
    let Some(due) = Instant::now().checked_add(delay) else { return start(registry) };
    let mut start_at = registry.start_at.lock().unwrap_or_else(|p| p.into_inner());
    match registry.thread.load(Ordering::SeqCst) {
        NOT_STARTED => {}
        SCHEDULED if start_at.is_some_and(|at| at <= due) => return,
        // Running already, or a sooner deadline than the scheduled start.
        _ => {
            drop(start_at);
            return start(registry);
        }
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        drop(start_at);
        return start(registry);
    };
    *start_at = Some(due);
    registry.thread.store(SCHEDULED, Ordering::SeqCst);
    drop(start_at);
    let pending = ScheduledStart(registry);
    runtime.spawn(async move {
        tokio::time::sleep_until(due.into()).await;
        start(pending.0);
    });
}

/// Held by the timer task: a runtime that shuts down before the start leaves it to the next
/// request rather than scheduled forever.
struct ScheduledStart(&'static Registry);

impl Drop for ScheduledStart {
    fn drop(&mut self) {
        let mut start_at = self.0.start_at.lock().unwrap_or_else(|p| p.into_inner());
        if self.0.thread.compare_exchange(SCHEDULED, NOT_STARTED, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            *start_at = None;
        }
    }
}

/// Starts the thread unless it runs.
fn start(registry: &'static Registry) {
    if registry.thread.swap(RUNNING, Ordering::SeqCst) == RUNNING {
        return;
    }
    if let Err(e) = std::thread::Builder::new().name("mcp-deadlines".into()).spawn(move || run(registry)) {
        tracing::error!("cannot start the request-deadline thread; timeouts will not fire: {e}");
    }
}

fn run(registry: &'static Registry) {
    loop {
        let live = {
            let mut guard = watched(registry);
            guard.retain(|w| w.strong_count() > 0);
            let live: Vec<_> = guard.iter().filter_map(Weak::upgrade).collect();
            // Publish "idle" before the last look, so a request that starts meanwhile either
            // is seen here or sees the flag and wakes us (both sides use SeqCst).
            registry.idle.store(true, Ordering::SeqCst);
            if live.iter().any(|c| c.has_deadlines()) {
                registry.idle.store(false, Ordering::SeqCst);
                live
            } else {
                drop(live);
                let (guard, _) =
                    registry.wakeup.wait_timeout(guard, Duration::from_secs(1)).unwrap_or_else(|p| p.into_inner());
                drop(guard);
                registry.idle.store(false, Ordering::SeqCst);
                continue;
            }
        };
        let now = Instant::now();
        for item in &live {
            item.expire(now);
        }
        drop(live);
        std::thread::sleep(TIMEOUT_GRANULARITY);
    }
}
