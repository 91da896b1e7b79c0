//! Traces and metrics of `run`, `chat` and `serve`: `[telemetry]` and the `OTEL_*` variables
//! resolved, the providers started and installed (every instrumentation site reads the
//! installed one), and shut down, bounded, when the command ends.

use std::time::Duration;

use mcp_host::config::Config;
use mcp_telemetry::{Options, Telemetry};

/// Longest the end of a command waits for the last spans and metrics to be exported.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

/// Starts and installs what `config` and the environment ask for (with a Prometheus scrape
/// for `serve --http`'s `/metrics` when `prometheus`); nothing when nothing is asked for.
pub(crate) async fn start(config: &Config, prometheus: bool) -> anyhow::Result<Telemetry> {
    let resolved =
        config.telemetry_config(&mcp_telemetry::config::otel_env()).map_err(|e| anyhow::anyhow!("telemetry: {e}"))?;
    let mut options = Options::default();
    if prometheus {
        options = options.with_prometheus();
    }
    // The providers own a runtime of their own: built (and, on an error, dropped) on a thread
    // that may block, never on one of the command's async workers.
    let telemetry = tokio::task::spawn_blocking(move || Telemetry::start(&resolved, &options))
        .await
        .map_err(|e| anyhow::anyhow!("cannot start telemetry: {e}"))?
        .map_err(|e| anyhow::anyhow!("cannot start telemetry: {e}"))?;
    telemetry.install();
    Ok(telemetry)
}

/// Exports what is left and stops the exporters, within [`SHUTDOWN_BOUND`] (lost spans are said
/// once, as a warning). Blocks: called at the end of `main`, outside the async runtime.
pub(crate) fn shutdown() {
    let _ = mcp_telemetry::instrument::current().shutdown(SHUTDOWN_BOUND);
}
