//! Request deadlines, enforced by one watchdog thread for the whole process.
//!
//! Not by tokio timers: a timer per request cost about a fifth of sequential throughput, and
//! even one armed timer per connection made every idle wait of the runtime a timed one, which
//! cost as much again when client and server run on different cores. The thread scans every
//! [`TIMEOUT_GRANULARITY`] while some request has a deadline and sleeps on a condition
//! variable otherwise; a starting request wakes it only when it sleeps, so the common path
//! costs one atomic load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How often deadlines are checked: request timeouts fire up to this much late.
pub const TIMEOUT_GRANULARITY: Duration = Duration::from_millis(10);

/// Something with request deadlines (a connection).
pub(crate) trait Expiring: Send + Sync {
    /// Whether any request has a deadline worth watching.
    fn has_deadlines(&self) -> bool;
    /// Fail the requests whose deadline is at or before `now`.
    fn expire(&self, now: Instant);
}

struct Registry {
    watched: Mutex<Vec<Weak<dyn Expiring>>>,
    wakeup: Condvar,
    idle: AtomicBool,
}

static REGISTRY: OnceLock<Option<Registry>> = OnceLock::new();

fn registry() -> Option<&'static Registry> {
    REGISTRY
        .get_or_init(|| {
            let spawned = std::thread::Builder::new().name("mcp-deadlines".into()).spawn(run);
            match spawned {
                Ok(_) => Some(Registry {
                    watched: Mutex::new(Vec::new()),
                    wakeup: Condvar::new(),
                    idle: AtomicBool::new(false),
                }),
                Err(e) => {
                    tracing::error!("cannot start the request-deadline thread; timeouts will not fire: {e}");
                    None
                }
            }
        })
        .as_ref()
}

fn watched(registry: &Registry) -> MutexGuard<'_, Vec<Weak<dyn Expiring>>> {
    mcp_safety::lock(&registry.watched)
}

/// Watch these deadlines from now on (until the value is dropped).
pub(crate) fn watch(item: Weak<dyn Expiring>) {
    if let Some(registry) = registry() {
        watched(registry).push(item);
        wake();
    }
}

/// A request started: make sure its deadline is watched.
pub(crate) fn wake() {
    if let Some(registry) = REGISTRY.get().and_then(Option::as_ref)
        && registry.idle.load(Ordering::SeqCst)
    {
        let _guard = watched(registry);
        registry.wakeup.notify_one();
    }
}

fn run() {
    // The registry is set right after this thread is spawned; wait for it.
    let registry = loop {
        match REGISTRY.get() {
            Some(Some(registry)) => break registry,
            Some(None) => return,
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    };
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
