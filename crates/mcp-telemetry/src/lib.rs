//! OpenTelemetry for mcp-harness: traces and metrics by the MCP and GenAI semantic
//! conventions, exported by OTLP (HTTP/protobuf or gRPC) and offered as Prometheus text.
//!
//! - [`config`]: the `[telemetry]` table and the standard `OTEL_*` variables, resolved purely
//!   (the environment handed in as a map) into a [`config::TelemetryConfig`]; strict errors.
//! - [`Telemetry`]: the providers built with the maintained crates (`opentelemetry_sdk`,
//!   `opentelemetry-otlp`, `opentelemetry-prometheus`); export on threads and a runtime of
//!   their own, never on the call path; lost spans counted and said once; a bounded shutdown.
//! - [`conventions`]: span names, attribute keys, `error.type` rules, instruments and buckets.
//! - [`instrument`]: the guards instrumentation sites use ([`instrument::Operation`], [`instrument::Session`]) and the
//!   counters; free when telemetry is off.
//! - [`propagation`]: W3C trace context and baggage into and out of `params._meta` and HTTP
//!   headers, so `run` -> `serve` -> an upstream is one trace.
//! - `client` (feature `client`): the adapter of mcp-client's `RequestObserver` port, a CLIENT
//!   span per request a `Client` sends.
//! - `receiver` (feature `test-receiver`): an OTLP/HTTP and OTLP/gRPC collector on loopback for
//!   tests, on opentelemetry-proto's generated types.
//!
//! Nothing is exported unless configured: with no endpoint and no Prometheus scrape,
//! [`Telemetry::start`] returns the disabled telemetry (no thread, no runtime).
//!
//! ```
//! use std::collections::BTreeMap;
//! use mcp_telemetry::config::{TelemetryConfig, TelemetrySettings};
//! use mcp_telemetry::conventions::ErrorType;
//! use mcp_telemetry::instrument::McpRequest;
//! use mcp_telemetry::{Options, Telemetry};
//!
//! // No endpoint anywhere: nothing is exported, and the guards cost nothing.
//! let config = TelemetryConfig::resolve(&TelemetrySettings::default(), &BTreeMap::new(), "mcp-harness").unwrap();
//! assert!(config.exports_nothing());
//! let telemetry = Telemetry::start(&config, &Options::default()).unwrap();
//! assert!(!telemetry.is_enabled());
//!
//! // Metrics kept for a Prometheus scrape (what `serve --metrics` asks for).
//! let telemetry = Telemetry::start(&config, &Options::default().with_prometheus()).unwrap();
//! let mut op = telemetry.client_request(&McpRequest::new("tools/list", None).server("fs"));
//! op.fail(&ErrorType::JsonRpc(-32601), Some("Method not found"));
//! drop(op);
//! let text = telemetry.render_prometheus().unwrap();
//! assert!(text.contains("mcp_client_operation_duration_seconds_count"));
//! assert!(text.contains(r#"error_type="-32601""#));
//! ```

#[cfg(feature = "client")]
pub mod client;
pub mod config;
pub mod conventions;
pub mod instrument;
pub mod propagation;
mod providers;
#[cfg(feature = "test-receiver")]
pub mod receiver;

pub use providers::{ExportReport, Options, SCOPE, Telemetry, TelemetryError};

/// The OpenTelemetry context type instrumentation sites pass around (a remote parent, a
/// span's context).
pub use opentelemetry::Context;

/// Whether a `tracing` event comes from the OpenTelemetry crates' own diagnostics (their
/// `internal-logs`, which `opentelemetry-prometheus` turns on): a host's log filter drops
/// these, since this crate says what matters once itself (`telemetry: ... could not be
/// exported ...`) rather than at every failed export.
pub fn is_sdk_diagnostic(target: &str) -> bool {
    target.starts_with("opentelemetry")
}
