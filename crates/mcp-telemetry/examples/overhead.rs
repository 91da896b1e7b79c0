//! What an instrumentation site costs per MCP request, side by side in one run: no site at all
//! (today's code), the site with telemetry off (nothing installed, the free function; and a
//! disabled `Telemetry`), metrics only (a Prometheus scrape), and spans exported by a batch
//! processor into an exporter that drops them (the SDK's cost without a network).
//!
//! `cargo run --release -p mcp-telemetry --example overhead` (numbers from a debug build mean
//! little). The "off" rows are the zero-cost claim: one atomic load and a null guard, within
//! noise of no site at all.
#![allow(clippy::print_stdout, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use mcp_telemetry::config::TelemetryConfig;
use mcp_telemetry::instrument::{self, McpRequest};
use mcp_telemetry::{Options, Telemetry};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter};
use serde_json::{Value, json};

#[derive(Debug)]
struct Drop;

impl SpanExporter for Drop {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

/// The work every variant does: a request's params, as a client has them at hand.
fn request(i: u64, params: &Value) -> u64 {
    black_box(params);
    black_box(i)
}

/// Nanoseconds per call of `f`: one warm-up round, then the best of five (the least disturbed
/// by other processes).
fn per_op(n: u64, mut f: impl FnMut(u64)) -> f64 {
    (0..6)
        .map(|round| {
            let start = Instant::now();
            for i in 0..n {
                f(i);
            }
            let took = start.elapsed().as_secs_f64() * 1e9 / n as f64;
            if round == 0 { f64::MAX } else { took }
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let params = json!({"name": "echo", "arguments": {"text": "hi"}});
    let n = 1_000_000;

    let none = per_op(n, |i| {
        black_box(request(i, &params));
    });
    let off_global = per_op(n, |i| {
        let op = instrument::client_request(&McpRequest::new("tools/call", Some(&params)).server("fs"));
        op.set_request_id(request(i, &params));
        black_box(&op);
    });
    let disabled = Telemetry::disabled();
    let off = per_op(n, |i| {
        let op = disabled.client_request(&McpRequest::new("tools/call", Some(&params)).server("fs"));
        op.set_request_id(request(i, &params));
        black_box(&op);
    });

    let config = TelemetryConfig::off("overhead");
    let metrics =
        Telemetry::start(&config, &Options::default().with_prometheus()).unwrap_or_else(|_| Telemetry::disabled());
    let n_on = 200_000;
    let metrics_only = per_op(n_on, |i| {
        let op = metrics.client_request(&McpRequest::new("tools/call", Some(&params)).server("fs"));
        op.set_request_id(request(i, &params));
        black_box(&op);
    });

    let batch = BatchConfigBuilder::default().with_max_queue_size(65_536).build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(Drop).with_batch_config(batch).build())
        .build();
    let spans = Telemetry::from_providers(Some(provider), None, false);
    let spans_on = per_op(n_on, |i| {
        let op = spans.client_request(&McpRequest::new("tools/call", Some(&params)).server("fs"));
        op.set_request_id(request(i, &params));
        black_box(&op);
    });
    spans.shutdown(Duration::from_secs(5));

    let ratio = |ns: f64| ns / none.max(1e-3);
    println!("{:<44} {:>12} {:>14}", "per MCP request", "time", "vs no site");
    for (what, ns) in [
        ("no instrumentation site (today)", none),
        ("site, nothing installed (free function)", off_global),
        ("site, Telemetry::disabled()", off),
        ("site, metrics only (Prometheus)", metrics_only),
        ("site, spans (batch, exporter drops them)", spans_on),
    ] {
        println!("{what:<44} {ns:>10.2}ns {:>13.1}x", ratio(ns));
    }
    println!("off adds {:.2} ns per request (nothing installed), {:.2} ns (disabled)", off_global - none, off - none);
}
