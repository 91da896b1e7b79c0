//! `otlp_sink`: an OTLP collector that counts spans and keeps nothing, for benchmarks that
//! export every span (`cargo xtask bench gateway`). The test receiver of this crate (feature
//! `test-receiver`) in its counting mode: OTLP/HTTP and OTLP/gRPC on loopback, decoded with
//! opentelemetry-proto's types.
//!
//! It prints its OTLP/HTTP base endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`) on the first line of
//! stdout, then, for every line read on stdin, the number of spans received so far; it stops when
//! its stdin closes.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs)]

use std::io::{BufRead, Write};

use mcp_telemetry::receiver::Receiver;

fn main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("otlp_sink: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        let receiver = Receiver::start_counting().await?;
        let mut out = std::io::stdout();
        writeln!(out, "{}", receiver.http_endpoint())?;
        out.flush()?;
        // Stdin is read on a thread of its own; the runtime's thread serves the exports.
        let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<()>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                if line.is_err() || lines_tx.send(()).is_err() {
                    break;
                }
            }
        });
        while lines.recv().await.is_some() {
            writeln!(out, "{}", receiver.span_count())?;
            out.flush()?;
        }
        Ok::<_, std::io::Error>(())
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("otlp_sink: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
