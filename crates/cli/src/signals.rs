//! SIGINT, SIGTERM and SIGHUP: one listener for the whole process, which every command that
//! starts servers races its work against, so that it closes its servers (an interrupted call
//! is cancelled: the server gets `notifications/cancelled`) and the process exits with the
//! conventional status, 128 + the signal's number (130, 143, 129).
//!
//! Once a handler is installed the signal no longer ends the process by itself, so [`install`]
//! runs before any server starts and `main` bounds how long a command may take to wind down
//! after the signal ([`WIND_DOWN`]): past that, the command is dropped, and dropping a server's
//! connection kills its process group.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// How long a command may take, after a signal, to close its servers before `main` drops it
/// (which kills their process groups). Closing one server takes at most its transport's grace
/// period (a few seconds); this leaves room for several closing at once.
pub(crate) const WIND_DOWN: Duration = Duration::from_secs(10);

/// A signal that ends the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Ctrl-C.
    Interrupt,
    /// `kill`, a service manager stopping us.
    Terminate,
    /// The terminal went away.
    Hangup,
}

impl Signal {
    /// The signal's conventional name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
            Self::Hangup => "SIGHUP",
        }
    }

    /// The exit status of a process ended by it: 128 + its number.
    pub(crate) fn exit_status(self) -> u8 {
        match self {
            Self::Hangup => 128 + 1,
            Self::Interrupt => 128 + 2,
            Self::Terminate => 128 + 15,
        }
    }
}

/// A command stopped because of a signal (its servers were closed).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("interrupted by {}; the servers were closed", .0.name())]
pub(crate) struct Interrupted(pub(crate) Signal);

/// Signals received so far (the first one is the one kept in `received_tx`).
fn count_tx() -> &'static watch::Sender<u32> {
    static COUNT: OnceLock<watch::Sender<u32>> = OnceLock::new();
    COUNT.get_or_init(|| watch::channel(0).0)
}

/// How long a command that drains on the first signal may take after it (see [`drains`]).
static DRAIN_LIMIT: OnceLock<Duration> = OnceLock::new();
/// Whether the command drained after the signal and closed its servers.
static DRAINED: AtomicBool = AtomicBool::new(false);

/// The running command handles the first signal itself, by draining (`serve --http`):
/// `main` then waits up to `limit` (plus [`WIND_DOWN`]) for it, instead of [`WIND_DOWN`]
/// alone, and a second signal ends the process at once.
pub(crate) fn drains(limit: Duration) {
    let _ = DRAIN_LIMIT.set(limit);
}

/// How long the command may take after the first signal, if it drains.
pub(crate) fn drain_limit() -> Option<Duration> {
    DRAIN_LIMIT.get().copied()
}

/// The command drained after the signal and closed its servers: the process exits 0.
pub(crate) fn mark_drained() {
    DRAINED.store(true, Ordering::SeqCst);
}

/// Whether [`mark_drained`] was called.
pub(crate) fn drained() -> bool {
    DRAINED.load(Ordering::SeqCst)
}

/// Waits for a second signal.
pub(crate) async fn second() {
    let mut rx = count_tx().subscribe();
    // The sender is a static, never dropped: `wait_for` ends only when the count is reached.
    let _ = rx.wait_for(|count| *count >= 2).await;
}

fn received_tx() -> &'static watch::Sender<Option<Signal>> {
    static RECEIVED: OnceLock<watch::Sender<Option<Signal>>> = OnceLock::new();
    RECEIVED.get_or_init(|| watch::channel(None).0)
}

/// Starts listening for the three signals (inside the Tokio runtime, before any server starts).
/// The first one received is the one the process exits with.
pub(crate) fn install() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let kinds = [
            (SignalKind::interrupt(), Signal::Interrupt),
            (SignalKind::terminate(), Signal::Terminate),
            (SignalKind::hangup(), Signal::Hangup),
        ];
        for (kind, which) in kinds {
            let mut stream = signal(kind)?;
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    count_tx().send_modify(|count| *count = count.saturating_add(1));
                    received_tx().send_if_modified(|seen| {
                        if seen.is_none() {
                            *seen = Some(which);
                            true
                        } else {
                            false
                        }
                    });
                }
            });
        }
    }
    #[cfg(not(unix))]
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            received_tx().send_replace(Some(Signal::Interrupt));
        }
    });
    Ok(())
}

/// The signal received, if any.
pub(crate) fn received() -> Option<Signal> {
    *received_tx().borrow()
}

/// Waits for a signal (at once if one was received already).
pub(crate) async fn wait() -> Signal {
    let mut rx = received_tx().subscribe();
    loop {
        if let Some(signal) = *rx.borrow_and_update() {
            return signal;
        }
        if rx.changed().await.is_err() {
            // The sender is a static: never dropped. Wait forever rather than spin.
            std::future::pending::<()>().await;
        }
    }
}

/// `work`, unless a signal comes first: then `work` is dropped (a request in flight is
/// cancelled) and the caller closes its servers.
pub(crate) async fn interruptible<T>(work: impl Future<Output = T>) -> Result<T, Interrupted> {
    tokio::select! {
        done = work => Ok(done),
        signal = wait() => Err(Interrupted(signal)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_are_128_plus_the_number() {
        assert_eq!(Signal::Interrupt.exit_status(), 130);
        assert_eq!(Signal::Terminate.exit_status(), 143);
        assert_eq!(Signal::Hangup.exit_status(), 129);
        assert_eq!(Interrupted(Signal::Terminate).to_string(), "interrupted by SIGTERM; the servers were closed");
    }
}
