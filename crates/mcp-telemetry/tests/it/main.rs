//! The crate's behaviour seen from outside: spans and their attributes (an in-memory
//! exporter), metrics as Prometheus text, both OTLP protocols into a real receiver, and a
//! collector that is down.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod client;
mod memory;
mod metrics;
mod otlp;
mod spans;
