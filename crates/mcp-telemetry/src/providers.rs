//! The providers: a tracer and a meter built with the maintained OpenTelemetry crates from a
//! [`TelemetryConfig`], exporting on a runtime of their own, never on the call path.
//!
//! How export stays off the call path: ending a span puts it in the SDK's batch queue (a
//! `try_send`: a full queue drops the span, counted); the batch processor's thread and the
//! periodic metric reader's thread export, each polling the exporter's future with this
//! crate's one-worker tokio runtime entered (`InRuntime`), where the HTTP client's and the
//! gRPC channel's sockets and timers live. A host on a current-thread runtime, or none, exports
//! the same way. A collector that is down makes exports fail after their timeout: the spans of
//! those batches are lost and counted, the first failure is said once (a `tracing` warning),
//! and no call waits. [`Telemetry::shutdown`] flushes within a bound and reports what was lost.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter, SpanProcessor,
};

use crate::config::{Compression, OtlpTarget, Protocol, Sampler, TelemetryConfig};
use crate::instrument::Instruments;

/// The instrumentation scope's name on every span and metric.
pub const SCOPE: &str = "mcp-harness";

/// What else the providers should do besides OTLP export.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// Keep metrics for a Prometheus scrape ([`Telemetry::render_prometheus`]), whether or
    /// not they are also exported by OTLP (`serve`'s `/metrics`).
    pub prometheus: bool,
    /// Time between batch exports of spans (the SDK's default, 5 s, or `OTEL_BSP_SCHEDULE_DELAY`,
    /// when `None`).
    pub batch_delay: Option<Duration>,
    /// Most spans waiting for export; more are dropped and counted (the SDK's 2048 when `None`).
    pub max_queue: Option<usize>,
}

impl Options {
    /// With a Prometheus scrape.
    pub fn with_prometheus(mut self) -> Self {
        self.prometheus = true;
        self
    }

    /// With a batch delay.
    pub fn with_batch_delay(mut self, delay: Duration) -> Self {
        self.batch_delay = Some(delay);
        self
    }

    /// With a queue bound.
    pub fn with_max_queue(mut self, max: usize) -> Self {
        self.max_queue = Some(max);
        self
    }
}

/// Why the providers could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The export runtime's thread could not start.
    #[error("cannot start the telemetry export thread: {0}")]
    Runtime(#[source] std::io::Error),
    /// An exporter refused its configuration.
    #[error("cannot export {signal} to {endpoint}: {reason}")]
    Exporter {
        /// `traces` or `metrics`.
        signal: &'static str,
        /// Where it was to go.
        endpoint: String,
        /// What the exporter said.
        reason: String,
    },
    /// The Prometheus registry refused the exporter.
    #[error("cannot keep metrics for Prometheus: {0}")]
    Prometheus(String),
}

/// Counts of what export did, for [`Telemetry::report`] and the shutdown's one line.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    spans_ended: AtomicU64,
    spans_exported: AtomicU64,
    spans_failed: AtomicU64,
    metric_exports: AtomicU64,
    metric_exports_failed: AtomicU64,
    warned: AtomicBool,
}

impl Stats {
    fn failed(&self, what: &str, endpoint: &str, error: &dyn std::fmt::Display) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            // The exporter's error may name the URL whole; it is shown with its credentials hidden.
            let shown = mcp_safety::redact::url(endpoint);
            let error = error.to_string().replace(endpoint, &shown);
            let endpoint = shown;
            tracing::warn!(
                target: "mcp_telemetry",
                "telemetry: {what} could not be exported to {endpoint} ({error}); while it stays unreachable, \
                 spans and metrics are dropped and counted, and calls go on"
            );
        }
    }
}

/// What export did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ExportReport {
    /// Spans ended and sampled (handed to the exporter's queue).
    pub spans_ended: u64,
    /// Spans a collector accepted.
    pub spans_exported: u64,
    /// Spans lost: in batches that failed, plus (after shutdown) those dropped from a full
    /// queue or still waiting when the bound ran out.
    pub spans_lost: u64,
    /// Metric exports that failed.
    pub metric_exports_failed: u64,
    /// Metric exports that succeeded.
    pub metric_exports: u64,
}

pub(crate) struct Inner {
    pub(crate) tracer: Option<SdkTracer>,
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
    pub(crate) instruments: Option<Instruments>,
    prometheus: Option<prometheus::Registry>,
    stats: Arc<Stats>,
    pub(crate) capture_tool_content: bool,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    shut: AtomicBool,
    destinations: String,
    /// The agent tasks' spans in flight, by id: where an upstream event heard outside any
    /// span goes (the supervisor's restarts happen on its own tasks).
    pub(crate) tasks: Mutex<Vec<(u64, opentelemetry::Context)>>,
    pub(crate) next_task: AtomicU64,
}

/// How long dropping the last [`Telemetry`] without [`Telemetry::shutdown`] gives what is queued.
const DROP_BOUND: Duration = Duration::from_secs(1);

impl Inner {
    /// Flushes and stops both providers within `bound`, then lets the export runtime go: shut
    /// down in the background when both stopped, else left running (an export still in flight
    /// ends by its own timeout rather than on a runtime that is gone).
    fn stop(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let mut clean = true;
        if let Some(p) = self.tracer_provider.clone() {
            let timeout = left();
            clean &= within(timeout, move || p.shutdown_with_timeout(timeout));
        }
        if let Some(p) = self.meter_provider.clone() {
            let timeout = left();
            clean &= within(timeout, move || p.shutdown_with_timeout(timeout));
        }
        if let Some(rt) = mcp_safety::lock(&self.runtime).take() {
            if clean {
                // A runtime must not be dropped inside another's context (it would panic).
                rt.shutdown_background();
            } else {
                // Its one thread ends with the process; an export it still drives fails by its
                // own timeout, on a runtime that is still there.
                std::mem::forget(rt);
            }
        }
    }
}

/// Runs `stop` on a thread of its own and waits for it at most `bound`: whether it finished
/// well in time. (The SDK's periodic metric reader waits 5 s for its thread whatever timeout it
/// is given; a stop still running is left to finish alone.)
fn within(bound: Duration, stop: impl FnOnce() -> OTelSdkResult + Send + 'static) -> bool {
    let (done, finished) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new().name("mcp-telemetry-stop".to_owned()).spawn(move || {
        let _ = done.send(stop().is_ok());
    });
    spawned.is_ok() && finished.recv_timeout(bound).unwrap_or(false)
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.shut.swap(true, Ordering::Relaxed) {
            // Dropped without `Telemetry::shutdown`: what is queued gets a short, bounded chance
            // (the providers would otherwise try on their own, with no runtime to export on).
            self.stop(DROP_BOUND);
        }
    }
}

/// The telemetry of one process: its providers and instruments. Cheap to clone.
///
/// Built by [`Telemetry::start`]; [`Telemetry::install`] makes it the one the free functions
/// of [`crate::instrument`] use. [`Telemetry::disabled`] has nothing and costs nothing.
#[derive(Clone)]
pub struct Telemetry {
    pub(crate) inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            None => f.write_str("Telemetry(off)"),
            Some(i) => f
                .debug_struct("Telemetry")
                .field("traces", &i.tracer.is_some())
                .field("metrics", &i.instruments.is_some())
                .field("prometheus", &i.prometheus.is_some())
                .field("to", &i.destinations)
                .finish(),
        }
    }
}

impl Telemetry {
    /// Telemetry that records and exports nothing.
    pub fn disabled() -> Self {
        Self { inner: None }
    }

    /// Whether anything is recorded (spans or metrics).
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Builds the providers `config` and `options` ask for; with nothing asked for, the
    /// result is [`Telemetry::disabled`] (no thread, no runtime).
    pub fn start(config: &TelemetryConfig, options: &Options) -> Result<Self, TelemetryError> {
        if config.exports_nothing() && !options.prometheus {
            return Ok(Self::disabled());
        }
        let stats = Arc::new(Stats::default());
        let resource = Resource::builder_empty()
            .with_attributes(config.resource.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())))
            .with_attributes([
                KeyValue::new("telemetry.sdk.name", "opentelemetry"),
                KeyValue::new("telemetry.sdk.language", "rust"),
            ])
            .build();
        let runtime = if config.exports_nothing() {
            None
        } else {
            Some(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("mcp-telemetry-export")
                    .enable_all()
                    .build()
                    .map_err(TelemetryError::Runtime)?,
            )
        };
        let mut destinations = Vec::new();

        let (tracer, tracer_provider) = match (&config.traces, &runtime) {
            (Some(target), Some(rt)) => {
                destinations.push(format!("traces: {} ({})", target.shown_endpoint(), target.protocol.as_str()));
                let exporter = span_exporter(target, rt)?;
                let exporter = OnRuntime {
                    inner: exporter,
                    handle: rt.handle().clone(),
                    stats: stats.clone(),
                    endpoint: target.endpoint.clone(),
                    timeout: target.timeout,
                };
                let mut batch = BatchConfigBuilder::default();
                if let Some(delay) = options.batch_delay {
                    batch = batch.with_scheduled_delay(delay);
                }
                if let Some(max) = options.max_queue {
                    batch = batch.with_max_queue_size(max.max(1));
                }
                let processor = BatchSpanProcessor::builder(exporter).with_batch_config(batch.build()).build();
                let provider = SdkTracerProvider::builder()
                    .with_span_processor(Counted { inner: processor, stats: stats.clone() })
                    .with_sampler(sdk_sampler(config.sampler))
                    .with_resource(resource.clone())
                    .build();
                (Some(provider.tracer(SCOPE)), Some(provider))
            }
            _ => (None, None),
        };

        let mut meter_builder = SdkMeterProvider::builder().with_resource(resource);
        let mut has_reader = false;
        if let (Some(target), Some(rt)) = (&config.metrics, &runtime) {
            destinations.push(format!("metrics: {} ({})", target.shown_endpoint(), target.protocol.as_str()));
            let exporter = metric_exporter(target, rt)?;
            let exporter = OnRuntime {
                inner: exporter,
                handle: rt.handle().clone(),
                stats: stats.clone(),
                endpoint: target.endpoint.clone(),
                timeout: target.timeout,
            };
            meter_builder = meter_builder
                .with_reader(PeriodicReader::builder(exporter).with_interval(config.metric_interval).build());
            has_reader = true;
        }
        let prometheus = if options.prometheus {
            let registry = prometheus::Registry::new();
            let exporter = opentelemetry_prometheus::exporter()
                .with_registry(registry.clone())
                .scope_info_enabled(false)
                .build()
                .map_err(|e| TelemetryError::Prometheus(e.to_string()))?;
            meter_builder = meter_builder.with_reader(exporter);
            has_reader = true;
            destinations.push("metrics: Prometheus scrape".to_owned());
            Some(registry)
        } else {
            None
        };
        let (meter_provider, instruments) = if has_reader {
            let provider = meter_builder.build();
            let instruments = Instruments::new(&provider.meter(SCOPE));
            (Some(provider), Some(instruments))
        } else {
            (None, None)
        };
        Ok(Self {
            inner: Some(Arc::new(Inner {
                tracer,
                tracer_provider,
                meter_provider,
                instruments,
                prometheus,
                stats,
                capture_tool_content: config.capture_tool_content,
                runtime: Mutex::new(runtime),
                shut: AtomicBool::new(false),
                destinations: destinations.join(", "),
                tasks: Mutex::new(Vec::new()),
                next_task: AtomicU64::new(0),
            })),
        })
    }

    /// Telemetry on providers the caller built (its own exporters and processors, an in-memory
    /// exporter in tests): the guards record into them as into [`Telemetry::start`]'s. The
    /// instruments are made on `meter_provider`; [`Telemetry::report`] counts nothing (the
    /// counting sits in this crate's own pipeline) and there is no Prometheus text.
    /// [`Telemetry::shutdown`] shuts both providers down (and so does dropping the last clone).
    pub fn from_providers(
        tracer_provider: Option<SdkTracerProvider>,
        meter_provider: Option<SdkMeterProvider>,
        capture_tool_content: bool,
    ) -> Self {
        if tracer_provider.is_none() && meter_provider.is_none() {
            return Self::disabled();
        }
        let tracer = tracer_provider.as_ref().map(|p| p.tracer(SCOPE));
        let instruments = meter_provider.as_ref().map(|p| Instruments::new(&p.meter(SCOPE)));
        Self {
            inner: Some(Arc::new(Inner {
                tracer,
                tracer_provider,
                meter_provider,
                instruments,
                prometheus: None,
                stats: Arc::new(Stats::default()),
                capture_tool_content,
                runtime: Mutex::new(None),
                shut: AtomicBool::new(false),
                destinations: "the caller's providers".to_owned(),
                tasks: Mutex::new(Vec::new()),
                next_task: AtomicU64::new(0),
            })),
        }
    }

    /// Makes this the process's telemetry, the one [`crate::instrument`]'s free functions
    /// use. Only the first call takes effect (instrumentation sites keep what they read);
    /// it returns whether this one did.
    pub fn install(&self) -> bool {
        crate::instrument::install(self.clone())
    }

    /// What export did so far.
    pub fn report(&self) -> ExportReport {
        let Some(inner) = &self.inner else { return ExportReport::default() };
        let s = &inner.stats;
        let ended = s.spans_ended.load(Ordering::Relaxed);
        let exported = s.spans_exported.load(Ordering::Relaxed);
        let failed = s.spans_failed.load(Ordering::Relaxed);
        let lost = if inner.shut.load(Ordering::Relaxed) { ended.saturating_sub(exported) } else { failed };
        ExportReport {
            spans_ended: ended,
            spans_exported: exported,
            spans_lost: lost,
            metric_exports_failed: s.metric_exports_failed.load(Ordering::Relaxed),
            metric_exports: s.metric_exports.load(Ordering::Relaxed),
        }
    }

    /// Exports what is waiting now (spans and metrics), each within the exporters' timeouts.
    /// Blocks: call it from a thread that may wait (tests, a command that ends).
    pub fn flush(&self) {
        let Some(inner) = &self.inner else { return };
        if let Some(p) = &inner.tracer_provider {
            let _ = p.force_flush();
        }
        if let Some(p) = &inner.meter_provider {
            let _ = p.force_flush();
        }
    }

    /// Flushes and stops the exporters within `bound` (about; each provider gets what is left of
    /// it), then says once, as a warning, how many spans were lost if any were. Blocks: call it
    /// where the process may wait (the end of `main`, `spawn_blocking`). A second call does
    /// nothing.
    pub fn shutdown(&self, bound: Duration) -> ExportReport {
        let Some(inner) = &self.inner else { return ExportReport::default() };
        if inner.shut.swap(true, Ordering::Relaxed) {
            return self.report();
        }
        inner.stop(bound);
        let report = self.report();
        if report.spans_lost > 0 {
            tracing::warn!(
                target: "mcp_telemetry",
                "telemetry: {} of {} spans were not exported ({})",
                report.spans_lost,
                report.spans_ended,
                inner.destinations
            );
        }
        report
    }

    /// The current metrics in Prometheus's text exposition format (version 0.0.4), for
    /// `serve`'s `/metrics`; `None` unless [`Options::prometheus`] was asked for. Names follow
    /// the exporter's translation: `mcp.client.operation.duration` (unit `s`) becomes
    /// `mcp_client_operation_duration_seconds` with `_bucket`, `_sum` and `_count`.
    pub fn render_prometheus(&self) -> Option<String> {
        let registry = self.inner.as_ref()?.prometheus.as_ref()?;
        let families = registry.gather();
        let mut out = String::new();
        prometheus::TextEncoder::new().encode_utf8(&families, &mut out).ok()?;
        Some(out)
    }

    /// The content type of [`Telemetry::render_prometheus`]'s text.
    pub const PROMETHEUS_CONTENT_TYPE: &'static str = "text/plain; version=0.0.4; charset=utf-8";
}

fn sdk_sampler(s: Sampler) -> opentelemetry_sdk::trace::Sampler {
    use opentelemetry_sdk::trace::Sampler as S;
    match s {
        Sampler::AlwaysOn => S::AlwaysOn,
        Sampler::AlwaysOff => S::AlwaysOff,
        Sampler::TraceIdRatio(r) => S::TraceIdRatioBased(r),
        Sampler::ParentBasedAlwaysOn => S::ParentBased(Box::new(S::AlwaysOn)),
        Sampler::ParentBasedAlwaysOff => S::ParentBased(Box::new(S::AlwaysOff)),
        Sampler::ParentBasedTraceIdRatio(r) => S::ParentBased(Box::new(S::TraceIdRatioBased(r))),
    }
}

fn exporter_error(signal: &'static str, target: &OtlpTarget, e: impl std::fmt::Display) -> TelemetryError {
    let reason = e.to_string().replace(&target.endpoint, &target.shown_endpoint());
    TelemetryError::Exporter { signal, endpoint: target.shown_endpoint(), reason }
}

fn http_headers(target: &OtlpTarget) -> std::collections::HashMap<String, String> {
    target.headers.iter().map(|(k, v)| (k.clone(), v.expose().to_owned())).collect()
}

fn grpc_metadata(target: &OtlpTarget) -> Result<tonic::metadata::MetadataMap, String> {
    let mut map = tonic::metadata::MetadataMap::new();
    for (k, v) in &target.headers {
        let key =
            tonic::metadata::MetadataKey::from_bytes(k.as_bytes()).map_err(|_| format!("bad header name {k:?}"))?;
        let value = v.expose().parse().map_err(|_| format!("the value of header {k:?} is not valid ASCII"))?;
        map.insert(key, value);
    }
    Ok(map)
}

/// The common settings of an OTLP/HTTP exporter of either signal. Its client follows no
/// redirect: the headers (API keys) would go along to wherever a collector pointed.
fn http<B: WithExportConfig + WithHttpConfig>(builder: B, target: &OtlpTarget) -> B {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).timeout(target.timeout);
    let builder = match client.build() {
        Ok(client) => builder.with_http_client(client),
        Err(_) => builder,
    };
    let builder = builder
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(&target.endpoint)
        .with_timeout(target.timeout)
        .with_headers(http_headers(target));
    match sdk_compression(target.compression) {
        Some(c) => builder.with_compression(c),
        None => builder,
    }
}

/// The exporters' compression, `None` for none. (They have no "none" to be handed: left
/// unset, an exporter reads the process's `OTEL_EXPORTER_OTLP_COMPRESSION` variables itself.
/// Resolved from the process's environment, as `mcp-harness` does, that says the same, but for
/// a value padded with spaces, which we read and the exporter skips; at worst it then sends
/// gzip, which collectors accept.)
fn sdk_compression(c: Compression) -> Option<opentelemetry_otlp::Compression> {
    match c {
        Compression::Gzip => Some(opentelemetry_otlp::Compression::Gzip),
        Compression::None => None,
    }
}

/// The common settings of an OTLP/gRPC exporter of either signal.
fn grpc<B: WithExportConfig + WithTonicConfig>(
    builder: B,
    target: &OtlpTarget,
    signal: &'static str,
) -> Result<B, TelemetryError> {
    let metadata = grpc_metadata(target).map_err(|e| exporter_error(signal, target, e))?;
    let builder = builder.with_endpoint(&target.endpoint).with_timeout(target.timeout).with_metadata(metadata);
    Ok(match sdk_compression(target.compression) {
        Some(c) => builder.with_compression(c),
        None => builder,
    })
}

fn span_exporter(
    target: &OtlpTarget,
    rt: &tokio::runtime::Runtime,
) -> Result<opentelemetry_otlp::SpanExporter, TelemetryError> {
    // Built inside the runtime: the gRPC channel starts its worker task there.
    let _entered = rt.enter();
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let built = match target.protocol {
        Protocol::HttpProtobuf => http(builder.with_http(), target).build(),
        Protocol::Grpc => grpc(builder.with_tonic(), target, "traces")?.build(),
    };
    built.map_err(|e| exporter_error("traces", target, e))
}

fn metric_exporter(
    target: &OtlpTarget,
    rt: &tokio::runtime::Runtime,
) -> Result<opentelemetry_otlp::MetricExporter, TelemetryError> {
    let _entered = rt.enter();
    let builder = opentelemetry_otlp::MetricExporter::builder();
    let built = match target.protocol {
        Protocol::HttpProtobuf => http(builder.with_http(), target).build(),
        Protocol::Grpc => grpc(builder.with_tonic(), target, "metrics")?.build(),
    };
    built.map_err(|e| exporter_error("metrics", target, e))
}

pin_project_lite::pin_project! {
    /// Polls a future with a runtime entered, from whatever thread polls it (the SDK's export
    /// threads): the sockets and timers it creates belong to that runtime, whose worker drives them.
    struct InRuntime<F> {
        handle: tokio::runtime::Handle,
        #[pin]
        fut: F,
    }
}

impl<F: Future> Future for InRuntime<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = this.handle.enter();
        this.fut.poll(cx)
    }
}

/// An exporter that runs on the export runtime and counts what it sent and lost.
struct OnRuntime<E> {
    inner: E,
    handle: tokio::runtime::Handle,
    stats: Arc<Stats>,
    endpoint: String,
    /// The export timeout, to tell a collector that never answered from one that refused.
    timeout: Duration,
}

/// What a failed export says: a collector that took the whole timeout is said to have not
/// answered (the exporters call that a "network error", as they do a refused connection).
fn export_failure(error: &dyn std::fmt::Display, took: Duration, timeout: Duration) -> String {
    if took + Duration::from_millis(50) >= timeout {
        format!("no answer within {} ms: {error}", timeout.as_millis())
    } else {
        error.to_string()
    }
}

impl<E> std::fmt::Debug for OnRuntime<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnRuntime").field("endpoint", &mcp_safety::redact::url(&self.endpoint)).finish()
    }
}

impl<E: SpanExporter> SpanExporter for OnRuntime<E> {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        let n = batch.len() as u64;
        let fut = InRuntime { handle: self.handle.clone(), fut: self.inner.export(batch) };
        async move {
            let started = Instant::now();
            let result = fut.await;
            match &result {
                Ok(()) => self.stats.spans_exported.fetch_add(n, Ordering::Relaxed),
                Err(e) => {
                    let said = export_failure(e, started.elapsed(), self.timeout);
                    self.stats.failed("spans", &self.endpoint, &said);
                    self.stats.spans_failed.fetch_add(n, Ordering::Relaxed)
                }
            };
            result
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _entered = self.handle.enter();
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        let _entered = self.handle.enter();
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: PushMetricExporter> PushMetricExporter for OnRuntime<E> {
    fn export(&self, metrics: &ResourceMetrics) -> impl Future<Output = OTelSdkResult> + Send {
        let fut = InRuntime { handle: self.handle.clone(), fut: self.inner.export(metrics) };
        let (stats, endpoint, timeout) = (&self.stats, &self.endpoint, self.timeout);
        async move {
            let started = Instant::now();
            let result = fut.await;
            match &result {
                Ok(()) => stats.metric_exports.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    let said = export_failure(e, started.elapsed(), timeout);
                    stats.failed("metrics", endpoint, &said);
                    stats.metric_exports_failed.fetch_add(1, Ordering::Relaxed)
                }
            };
            result
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        let _entered = self.handle.enter();
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _entered = self.handle.enter();
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// The batch processor, counting the spans it is handed.
#[derive(Debug)]
struct Counted {
    inner: BatchSpanProcessor,
    stats: Arc<Stats>,
}

impl SpanProcessor for Counted {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if span.span_context.is_sampled() {
            self.stats.spans_ended.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_that_took_its_whole_timeout_is_said_to_have_had_no_answer() {
        let timeout = Duration::from_millis(300);
        let said = export_failure(&"network error", Duration::from_millis(301), timeout);
        assert_eq!(said, "no answer within 300 ms: network error");
        // A refusal comes at once and is said as the exporter says it.
        assert_eq!(export_failure(&"network error", Duration::from_millis(2), timeout), "network error");
    }
}
