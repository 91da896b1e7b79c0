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
