//! The authorizer's clock **port**: token expiry, the refresh back-off, the step-up window and
//! the "just issued" check read the time through [`Clock`], so a test can move time forward
//! instead of sleeping. [`SystemClock`] is the real one and the default.

use std::fmt;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Where an [`OAuthAuthorizer`](crate::OAuthAuthorizer) reads the time.
pub trait Clock: fmt::Debug + Send + Sync {
    /// Wall-clock time in milliseconds since the Unix epoch. Token expiry is kept in this form
    /// (in the store too, where other processes read it), at full precision: a token issued
    /// for 2 s is not thought expired after 1.1 s because a second boundary passed.
    fn unix_ms(&self) -> u64;

    /// Monotonic time, for intervals this process measures itself (they must not jump when
    /// the wall clock is set).
    fn instant(&self) -> Instant;
}

/// The system's clocks: [`SystemTime`] and [`Instant`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn unix_ms(&self) -> u64 {
        // Before the epoch (a badly set clock) reads as the epoch: tokens then look fresh,
        // and the resource's 401 says otherwise.
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    fn instant(&self) -> Instant {
        Instant::now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_reads_milliseconds_since_the_epoch() {
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        let ms = SystemClock.unix_ms();
        // Same second, give or take the one a slow machine may cross between the two reads.
        assert!(ms / 1000 >= secs && ms / 1000 <= secs + 1, "{ms} vs {secs}");
        let a = SystemClock.instant();
        assert!(SystemClock.instant() >= a);
    }
}
