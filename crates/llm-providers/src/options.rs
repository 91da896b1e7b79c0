//! Knobs shared by both adapters: retries, timeouts and size limits.

use std::time::Duration;

/// How an adapter retries, how long it waits and how much it reads.
///
/// The defaults suit the public APIs; tests shorten the delays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Attempts per call, the first included (at least 1). Retried, as the official SDKs do:
    /// HTTP 408, 409, 429 and 5xx (unless the server answers `x-should-retry: false`; `true`
    /// makes any status retried), connection failures and timeouts before the response headers,
    /// and a provider's transient error reported inside the answer before any text was streamed.
    /// When they run out the call fails with [`ModelError::Unavailable`]. Default 4.
    ///
    /// [`ModelError::Unavailable`]: agent_loop::ModelError::Unavailable
    pub max_attempts: u32,
    /// Delay before the first retry; it doubles each retry, with jitter (a random value between
    /// half and all of it). Default 500 ms.
    pub initial_backoff: Duration,
    /// Upper bound of the exponential delay. Default 30 s.
    pub max_backoff: Duration,
    /// Upper bound for a server's `retry-after` (or `retry-after-ms`) header. Default 60 s.
    pub max_retry_after: Duration,
    /// Time limit of one HTTP attempt, from sending the request to the end of the answer.
    /// A timeout before the response headers counts as a connection failure (retried); a
    /// timeout while the answer streams is a [`ModelError::Network`] (not retried, text may
    /// already have been streamed). Default 10 minutes.
    ///
    /// [`ModelError::Network`]: agent_loop::ModelError::Network
    pub timeout: Duration,
    /// Largest answer body read, in bytes (streamed or not). Default 32 MiB.
    pub max_response_bytes: usize,
    /// Largest single server-sent event, in bytes. Default 1 MiB.
    pub max_event_bytes: usize,
    /// Largest error body read to extract the provider's message. Default 64 KiB.
    pub max_error_body_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            timeout: Duration::from_secs(600),
            max_response_bytes: 32 * 1024 * 1024,
            max_event_bytes: 1024 * 1024,
            max_error_body_bytes: 64 * 1024,
        }
    }
}

impl Options {
    /// The delay before retry number `retry` (1 for the first retry), without a server hint.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let exp = self.initial_backoff.saturating_mul(2u32.saturating_pow(retry.saturating_sub(1)));
        let full = exp.min(self.max_backoff);
        let nanos = u64::try_from(full.as_nanos()).unwrap_or(u64::MAX);
        if nanos < 2 {
            return full;
        }
        Duration::from_nanos(rand::random_range(nanos / 2..=nanos))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let o = Options {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..Options::default()
        };
        for _ in 0..50 {
            let first = o.backoff(1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100), "{first:?}");
            let second = o.backoff(2);
            assert!(second >= Duration::from_millis(100) && second <= Duration::from_millis(200), "{second:?}");
            let capped = o.backoff(30);
            assert!(capped >= Duration::from_millis(175) && capped <= Duration::from_millis(350), "{capped:?}");
        }
        let zero = Options { initial_backoff: Duration::ZERO, ..Options::default() };
        assert_eq!(zero.backoff(3), Duration::ZERO);
    }
}
