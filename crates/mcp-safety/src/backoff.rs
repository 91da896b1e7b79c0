//! The one backoff policy: exponential, capped, jittered, bounded.

use std::time::Duration;

/// How a connection or request is retried after failures.
///
/// Attempt `n` (0-based) waits `min(max_delay, initial_delay * 2^n)` scaled by a jitter factor
/// in `[0.5, 1.0]`, so many clients that lost the same server do not come back in lockstep.
/// After `max_attempts` failed attempts in a row the caller gives up.
///
/// The jitter is handed in (`0.0..=1.0`, usually a fresh random number) so that this type
/// stays pure and its delays are testable.
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
    /// The delay before attempt `attempt` (0-based), given `jitter` in `0.0..=1.0` (values
    /// outside are clamped; NaN counts as 0).
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(30));
        let base = self.initial_delay.saturating_mul(factor).min(self.max_delay);
        let jitter = if jitter.is_nan() { 0.0 } else { jitter.clamp(0.0, 1.0) };
        base.mul_f64(0.5 + 0.5 * jitter)
    }

    /// Whether another attempt is allowed after `failed` failures in a row.
    pub fn allows(&self, failed: u32) -> bool {
        failed < self.max_attempts
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn delays_grow_are_capped_and_jittered() {
        let b =
            Backoff { initial_delay: Duration::from_millis(100), max_delay: Duration::from_secs(1), max_attempts: 3 };
        assert_eq!(b.delay(0, 0.0), Duration::from_millis(50));
        assert_eq!(b.delay(0, 1.0), Duration::from_millis(100));
        assert_eq!(b.delay(2, 1.0), Duration::from_millis(400));
        assert_eq!(b.delay(40, 1.0), Duration::from_secs(1));
        assert_eq!(b.delay(0, f64::NAN), Duration::from_millis(50));
        assert!(b.allows(2) && !b.allows(3));
    }

    proptest! {
        #[test]
        fn delays_stay_within_half_and_full_of_the_capped_base(attempt in 0u32..100, jitter in any::<f64>()) {
            let b = Backoff::default();
            let d = b.delay(attempt, jitter);
            prop_assert!(d <= b.max_delay);
            prop_assert!(d >= b.initial_delay / 2);
        }
    }
}
