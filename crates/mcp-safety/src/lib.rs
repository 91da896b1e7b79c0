//! Small pure building blocks every crate of the workspace shares, so that each mechanism has
//! one home: [`Secret`] values that never print, untrusted [`text`] made safe for a terminal
//! or a model, the [`is_loopback_host`] check that decides where plain `http` and secrets may
//! go, [`redact`] (secrets hidden in structured values, for logs and telemetry), the
//! [`Backoff`] every reconnect and retry follows, and [`lock`], the one way a lock is taken back
//! from a panicked holder.
//!
//! **Invariant:** this crate is pure: no I/O, no clocks, no randomness it is not handed (the
//! backoff's jitter comes from the caller).
//!
//! ```
//! use mcp_safety::{Backoff, Secret, is_loopback_host, text};
//!
//! let token = Secret::new("s3cr3t");
//! assert_eq!(format!("{token:?}"), "Secret(<redacted>)");
//! assert_eq!(token.expose(), "s3cr3t");
//!
//! assert_eq!(text::terminal_safe("ok\u{1b}]52;c;ZXZpbA==\u{7}"), "ok]52;c;ZXZpbA==");
//! assert!(is_loopback_host("127.0.0.1") && is_loopback_host("localhost") && !is_loopback_host("example.com"));
//!
//! let backoff = Backoff::default();
//! assert!(backoff.delay(3, 0.0) >= backoff.delay(0, 0.0));
//! ```

mod backoff;
mod loopback;
pub mod redact;
mod secret;
mod sync;
pub mod text;

pub use backoff::Backoff;
pub use loopback::is_loopback_host;
pub use secret::Secret;
pub use sync::lock;
