//! Reconnect policy for remote transports: exponential backoff with jitter, up to a limit.

use std::time::Duration;

/// How a remote transport retries a connection that could not be made or that dropped.
///
/// Attempt `n` (0-based) waits `min(max_delay, initial_delay * 2^n)` scaled by a random factor
/// in `[0.5, 1.0]`, so many clients that lost the same server do not come back in lockstep.
/// After `max_attempts` failed attempts in a row the connection is reported failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay.
    pub initial_delay: Duration,
    /// The longest delay.
    pub max_delay: Duration,
    /// Failed attempts in a row before giving up.
    pub max_attempts: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { initial_delay: Duration::from_millis(200), max_delay: Duration::from_secs(10), max_attempts: 5 }
    }
}

impl Backoff {
    /// The delay before attempt `attempt` (0-based), jitter included.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(30));
        let base = self.initial_delay.saturating_mul(factor).min(self.max_delay);
        base.mul_f64(rand::random_range(0.5..=1.0))
    }

    /// Whether another attempt is allowed after `failed` failures in a row.
    pub fn allows(&self, failed: u32) -> bool {
        failed < self.max_attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_are_capped_and_jittered() {
        let b =
            Backoff { initial_delay: Duration::from_millis(100), max_delay: Duration::from_secs(1), max_attempts: 3 };
        for _ in 0..50 {
            let d0 = b.delay(0);
            assert!(d0 >= Duration::from_millis(50) && d0 <= Duration::from_millis(100), "{d0:?}");
            let d2 = b.delay(2);
            assert!(d2 >= Duration::from_millis(200) && d2 <= Duration::from_millis(400), "{d2:?}");
            assert!(b.delay(40) <= Duration::from_secs(1));
        }
        assert!(b.allows(2) && !b.allows(3));
    }
}
