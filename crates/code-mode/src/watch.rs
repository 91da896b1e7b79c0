//! The host's watch over engine threads stuck in a builtin: QuickJS asks its interrupt
//! handler between instructions, not inside a builtin's loop, so a builtin given enough work
//! runs past the CPU limit where the engine cannot stop it. One thread of the process reads
//! the CPU clocks of the engine threads it is given and tells a run when its thread is past
//! the mark. It needs no timer of the caller's runtime (a runtime built without `enable_time`
//! runs scripts as well), and it sleeps while nothing is watched.

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::clock::ThreadWatch;

/// Shortest wait between two looks: a thread just short of its mark is not read in a spin.
const LEAST_WAIT: Duration = Duration::from_millis(10);

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

/// The process's watcher, started on first use.
fn watcher() -> Option<Arc<Watcher>> {
    static WATCHER: OnceLock<Option<Arc<Watcher>>> = OnceLock::new();
    WATCHER
        .get_or_init(|| {
            let watcher = Arc::new(Watcher { watched: Mutex::new(Watched::default()), changed: Condvar::new() });
            let looking = Arc::clone(&watcher);
            let started = std::thread::Builder::new().name("code-mode-watch".to_owned()).spawn(move || look(&looking));
            started.ok().map(|_| watcher)
        })
        .clone()
}

/// The watcher thread: looks at each watched thread when it could first be past its mark
/// (a thread's clock runs no faster than the wall clock), and sleeps while there is none.
fn look(watcher: &Watcher) {
    let mut watched = mcp_safety::lock(&watcher.watched);
    loop {
        let mut wait: Option<Duration> = None;
        let mut at = 0;
        while at < watched.entries.len() {
            let entry = &watched.entries[at];
            match entry.thread.cpu() {
                Some(used) if used < entry.stuck_at => {
                    let left = (entry.stuck_at - used).max(LEAST_WAIT);
                    wait = Some(wait.map_or(left, |w| w.min(left)));
                    at += 1;
                }
                // Past its mark, or no longer readable: told (or let go of) once.
                used => {
                    let entry = watched.entries.swap_remove(at);
                    if let Some(used) = used {
                        let _ = entry.tell.send(used);
                    }
                }
            }
        }
        watched = match wait {
            Some(wait) => watcher.changed.wait_timeout(watched, wait).map_or_else(|p| p.into_inner().0, |(g, _)| g),
            None => watcher.changed.wait(watched).unwrap_or_else(|p| p.into_inner()),
        };
    }
}
