//! The host's watch over engine threads stuck in a builtin: QuickJS asks its interrupt
//! handler between instructions, not inside a builtin's loop, so a builtin given enough work
//! runs past the CPU limit where the engine cannot stop it. One thread of the process reads
//! the CPU clocks of the engine threads it is given and tells a run when its thread is past
//! the mark. It needs no timer of the caller's runtime (a runtime built without `enable_time`
//! runs scripts as well), and it sleeps while nothing is watched.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::clock::{Reading, ThreadWatch};

/// Shortest wait between two looks: a thread just short of its mark is not read in a spin.
const LEAST_WAIT: Duration = Duration::from_millis(10);
/// The wait before another look at a clock that could not be read.
const UNREADABLE_WAIT: Duration = Duration::from_millis(100);

/// One watched thread.
struct Entry {
    id: u64,
    thread: ThreadWatch,
    stuck_at: Duration,
    /// Given the thread's CPU time once past `stuck_at`.
    tell: oneshot::Sender<Duration>,
}

#[derive(Default)]
struct Watched {
    entries: Vec<Entry>,
    next_id: u64,
}

struct Watcher {
    watched: Mutex<Watched>,
    changed: Condvar,
}

/// Watches a thread while it lives; dropping it stops the watch.
pub(crate) struct Watch {
    id: u64,
    watcher: Arc<Watcher>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        mcp_safety::lock(&self.watcher.watched).entries.retain(|e| e.id != self.id);
    }
}

/// Watches `thread` until the answer is dropped: the receiver is given the thread's CPU time
/// once past `stuck_at`. `None` where it cannot be watched (no watcher thread could start).
pub(crate) fn watch(thread: ThreadWatch, stuck_at: Duration) -> Option<(Watch, oneshot::Receiver<Duration>)> {
    let watcher = watcher()?;
    let (tell, told) = oneshot::channel();
    let id = {
        let mut watched = mcp_safety::lock(&watcher.watched);
        let id = watched.next_id;
        watched.next_id = id.wrapping_add(1);
        watched.entries.push(Entry { id, thread, stuck_at, tell });
        id
    };
    watcher.changed.notify_one();
    Some((Watch { id, watcher: Arc::clone(&watcher) }, told))
}

/// The process's watcher, started on first use (and tried again on a later use when its
/// thread could not start).
fn watcher() -> Option<Arc<Watcher>> {
    static WATCHER: Mutex<Option<Arc<Watcher>>> = Mutex::new(None);
    let mut started = mcp_safety::lock(&WATCHER);
    if let Some(watcher) = started.as_ref() {
        return Some(Arc::clone(watcher));
    }
    let watcher = Arc::new(Watcher { watched: Mutex::new(Watched::default()), changed: Condvar::new() });
    let looking = Arc::clone(&watcher);
    std::thread::Builder::new().name("code-mode-watch".to_owned()).spawn(move || look(&looking)).ok()?;
    *started = Some(Arc::clone(&watcher));
    Some(watcher)
}

/// The watcher thread: looks at each watched thread when it could first be past its mark
/// (a thread's clock runs no faster than the wall clock), and sleeps while there is none.
fn look(watcher: &Watcher) {
    let mut watched = mcp_safety::lock(&watcher.watched);
    loop {
        let mut wait: Option<Duration> = None;
        let mut past: Vec<(oneshot::Sender<Duration>, Duration)> = Vec::new();
        let mut at = 0;
        while at < watched.entries.len() {
            let entry = &watched.entries[at];
            let left = match entry.thread.cpu() {
                Reading::Cpu(used) if used < entry.stuck_at => (entry.stuck_at - used).max(LEAST_WAIT),
                Reading::Unreadable => UNREADABLE_WAIT,
                Reading::Cpu(used) => {
                    past.push((watched.entries.swap_remove(at).tell, used));
                    continue;
                }
                // Its run lets go of its watch soon; nothing to tell.
                Reading::Gone => {
                    watched.entries.swap_remove(at);
                    continue;
                }
            };
            wait = Some(wait.map_or(left, |w| w.min(left)));
            at += 1;
        }
        if !past.is_empty() {
            // Told without the lock (whoever is woken may let go of a watch at once), then
            // looked at again: what was added meanwhile is not slept past.
            drop(watched);
            for (tell, used) in past {
                let _ = tell.send(used);
            }
            watched = mcp_safety::lock(&watcher.watched);
            continue;
        }
        watched = match wait {
            Some(wait) => watcher.changed.wait_timeout(watched, wait).map_or_else(|p| p.into_inner().0, |(g, _)| g),
            None => watcher.changed.wait(watched).unwrap_or_else(|p| p.into_inner()),
        };
    }
}
