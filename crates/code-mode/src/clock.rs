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

/// Another thread's CPU time, read from outside it: how the host sees a script stuck in one of
/// the engine's builtins, where the engine's own interrupt is never asked (a quadratic string
/// search, a walk of a deep prototype chain). Linux only, through `/proc` (reading a thread's
/// clock directly takes unsafe code); elsewhere the host does not watch.
#[derive(Debug)]
pub(crate) struct ThreadWatch {
    /// The thread's `stat`, opened by the thread itself: bound to that thread, so a reused
    /// thread id is never read, and reads fail once it is gone.
    stat: std::fs::File,
    tick: Duration,
}

/// What a look at a watched thread's clock found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Its CPU time (user and system) so far.
    Cpu(Duration),
    /// It has ended (or its clock makes no sense: it is not looked at again).
    Gone,
    /// Not readable now (out of file descriptors, say); worth another look.
    Unreadable,
}

impl ThreadWatch {
    /// The calling thread, for another thread to watch while this one lives.
    #[cfg(target_os = "linux")]
    pub(crate) fn current() -> Option<Self> {
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten()?;
        let per_second = u32::try_from(ticks).ok().filter(|t| *t > 0)?;
        let stat = std::fs::File::open("/proc/thread-self/stat").ok()?;
        Some(Self { stat, tick: Duration::from_secs(1) / per_second })
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn current() -> Option<Self> {
        None
    }

    /// The thread's CPU time so far.
    #[cfg(target_os = "linux")]
    pub(crate) fn cpu(&self) -> Reading {
        use std::os::unix::fs::FileExt as _;
        // A stat line is a few hundred bytes: a name of at most 64 and 52 numbers.
        let mut line = [0u8; 2048];
        match self.stat.read_at(&mut line, 0) {
            Ok(n) => match std::str::from_utf8(line.get(..n).unwrap_or_default())
                .ok()
                .and_then(|l| cpu_of_stat(l, self.tick))
            {
                Some(used) => Reading::Cpu(used),
                None => Reading::Gone,
            },
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32) =>
            {
                Reading::Gone
            }
            Err(_) => Reading::Unreadable,
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn cpu(&self) -> Reading {
        Reading::Gone
    }
}

/// `utime + stime` of a `/proc/.../stat` line (fields 14 and 15, counted after the command
/// name, which may hold spaces and parentheses), in clock ticks of `tick`.
fn cpu_of_stat(stat: &str, tick: Duration) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name: state (3), then fields 4.. ; utime is field 14, stime 15.
    let mut fields = after_name.split_ascii_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    let nanos = u64::try_from(tick.as_nanos()).ok()?.checked_mul(user.checked_add(system)?)?;
    Some(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_user_and_system_time() {
        let line = "13116 (a) b (c)) R 13112 13112 12492 0 -1 4194304 100 0 0 0 150 25 0 0 20 0 1 0";
        assert_eq!(cpu_of_stat(line, Duration::from_millis(10)), Some(Duration::from_millis(1750)));
        assert_eq!(cpu_of_stat("13116 (cat R 1 2", Duration::from_millis(10)), None);
        assert_eq!(cpu_of_stat("", Duration::from_millis(10)), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_is_watched_from_another() {
        let (to_main, from_thread) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let busy = std::thread::spawn(move || {
            let _ = to_main.send(ThreadWatch::current());
            let start = CpuClock::start();
            while start.elapsed() < Duration::from_millis(300) {}
            let _ = stopped.recv();
        });
        let watch = from_thread.recv().ok().flatten();
        let watch = watch.as_ref().map(|w| (w, std::time::Instant::now()));
        let Some((watch, since)) = watch else { panic!("Linux threads can be watched") };
        let mut seen = Duration::ZERO;
        while since.elapsed() < Duration::from_secs(30) && seen < Duration::from_millis(250) {
            if let Reading::Cpu(used) = watch.cpu() {
                seen = used;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(seen >= Duration::from_millis(250), "{seen:?}");
        let _ = stop.send(());
        let _ = busy.join();
        // Gone once it ended: never another thread given its id. `join` returns when the
        // thread's id is cleared, a moment before the kernel takes its entry away.
        let ended = std::time::Instant::now();
        let mut last = watch.cpu();
        while last != Reading::Gone && ended.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
            last = watch.cpu();
        }
        assert_eq!(last, Reading::Gone);
    }
}
