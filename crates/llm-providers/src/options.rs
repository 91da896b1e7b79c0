//! Knobs shared by both adapters: retries, timeouts and size limits.

use std::time::Duration;

use mcp_safety::Backoff;

/// How an adapter retries, how long it waits and how much it reads.
///
/// The defaults suit the public APIs; tests shorten the delays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// How calls are retried: `max_attempts` attempts per call, the first included (at least
    /// 1), waiting `initial_delay` before the first retry, doubling with jitter up to
    /// `max_delay`. Default 4 attempts, 500 ms, 30 s. Retried, as the official SDKs do: HTTP
    /// 408, 409, 429 and 5xx (unless the server answers `x-should-retry: false`; `true` makes
    /// any status retried), connection failures and timeouts before the response headers, and
    /// a provider's transient error reported inside the answer before any text was streamed.
    /// When they run out the call fails with [`ModelError::Unavailable`].
    ///
    /// [`ModelError::Unavailable`]: agent_loop::ModelError::Unavailable
    pub retry: Backoff,
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
            retry: Backoff {
                initial_delay: Duration::from_millis(500),
                max_delay: Duration::from_secs(30),
                max_attempts: 4,
            },
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
        self.retry.delay(retry.saturating_sub(1), rand::random())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let o = Options {
            retry: Backoff {
                initial_delay: Duration::from_millis(100),
                max_delay: Duration::from_millis(350),
                max_attempts: 4,
            },
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
        let zero =
            Options { retry: Backoff { initial_delay: Duration::ZERO, ..Backoff::default() }, ..Options::default() };
        assert_eq!(zero.backoff(3), Duration::ZERO);
    }
}
