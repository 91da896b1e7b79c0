//! The gateway's clock **port**: sealed approval states expire by it, so a test moves time
//! instead of sleeping.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where the gateway reads the wall-clock time.
pub trait Clock: fmt::Debug + Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn unix_ms(&self) -> u64;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn unix_ms(&self) -> u64 {
        // A clock set before the epoch reads as the epoch: states then look fresh for a while,
        // never forever (their expiry is absolute).
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock unit tests set by hand.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct ManualClock(pub(crate) std::sync::atomic::AtomicU64);

#[cfg(test)]
impl ManualClock {
    /// Sets the time.
    pub(crate) fn set(&self, ms: u64) {
        self.0.store(ms, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
impl Clock for ManualClock {
    fn unix_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}
