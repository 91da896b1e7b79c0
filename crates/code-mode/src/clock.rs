//! The script's CPU time: the engine thread's own CPU clock where the system has one (Linux),
//! else the time the thread spent outside its waits for the host.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Counts the CPU time of the thread that made it, from when it was made. Used on that thread
/// only.
#[derive(Debug)]
pub(crate) struct CpuClock {
    mode: Mode,
}

#[derive(Debug)]
enum Mode {
    /// The thread's CPU clock, and its reading at the start.
    Thread(Duration),
    /// Wall time since the start, less the time spent in [`CpuClock::waiting`].
    Wall { start: Instant, waited: Cell<Duration> },
}

impl CpuClock {
    /// A clock starting now.
    pub(crate) fn start() -> Self {
        let mode = match thread_cpu() {
            Some(now) => Mode::Thread(now),
            None => Mode::Wall { start: Instant::now(), waited: Cell::new(Duration::ZERO) },
        };
        Self { mode }
    }

    /// CPU time since the start.
    pub(crate) fn elapsed(&self) -> Duration {
        match &self.mode {
            Mode::Thread(start) => thread_cpu().map_or(Duration::MAX, |now| now.saturating_sub(*start)),
            Mode::Wall { start, waited } => start.elapsed().saturating_sub(waited.get()),
        }
    }

    /// Runs `wait` (a blocking wait for the host) without counting it. The thread's CPU clock
    /// does not run while it sleeps, so only the wall clock needs telling.
    pub(crate) fn waiting<T>(&self, wait: impl FnOnce() -> T) -> T {
        match &self.mode {
            Mode::Thread(_) => wait(),
            Mode::Wall { waited, .. } => {
                let before = Instant::now();
                let result = wait();
                waited.set(waited.get() + before.elapsed());
                result
            }
        }
    }
}

/// The calling thread's CPU time, where the system has a clock for it.
#[cfg(target_os = "linux")]
fn thread_cpu() -> Option<Duration> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    Some(Duration::new(u64::try_from(t.tv_sec()).ok()?, u32::try_from(t.tv_nsec()).ok()?))
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu() -> Option<Duration> {
    None
}
