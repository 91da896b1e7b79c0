//! A collector for tests (feature `test-receiver`): OTLP/HTTP with protobuf bodies (hyper) and
//! OTLP/gRPC (tonic) on loopback ports the system picks, decoding with opentelemetry-proto's
//! generated message types (no hand-written decoder), keeping every span and metric it gets.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let receiver = mcp_telemetry::receiver::Receiver::start().await?;
//! // OTEL_EXPORTER_OTLP_ENDPOINT = receiver.http_endpoint() (or grpc_endpoint() with grpc)
//! let spans = receiver.wait_for_spans(1, std::time::Duration::from_secs(10)).await;
//! assert_eq!(spans[0].protocol, "http/protobuf");
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric;
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tonic::codec::CompressionEncoding;

/// Largest export body the HTTP side reads.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// One span as the receiver got it, its ids in lower-case hex.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReceivedSpan {
    /// The span's name.
    pub name: String,
    /// `client`, `server`, `internal`, `producer`, `consumer` or `unspecified`.
    pub kind: &'static str,
    /// The trace id (32 hex digits).
    pub trace_id: String,
    /// The span id (16 hex digits).
    pub span_id: String,
    /// The parent's span id, empty for a root span.
    pub parent_span_id: String,
    /// The attributes, each value as text (arrays as `[a, b]`).
    pub attributes: BTreeMap<String, String>,
    /// `unset`, `ok` or `error`.
    pub status: &'static str,
    /// The status's description.
    pub status_message: String,
    /// The events' names.
    pub events: Vec<String>,
    /// The links, as (trace id, span id).
    pub links: Vec<(String, String)>,
    /// The instrumentation scope's name.
    pub scope: String,
    /// The resource's `service.name`.
    pub service_name: String,
    /// `http/protobuf` or `grpc`: how it arrived.
    pub protocol: &'static str,
}

impl ReceivedSpan {
    /// An attribute's value as text.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// One metric of one export.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReceivedMetric {
    /// The instrument's name.
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// For a histogram, the sum of its data points' counts in this export.
    pub histogram_count: Option<u64>,
    /// For a histogram, the explicit bucket bounds of its first data point.
    pub bounds: Vec<f64>,
    /// `http/protobuf` or `grpc`.
    pub protocol: &'static str,
}

#[derive(Default)]
struct Store {
    spans: Mutex<Vec<ReceivedSpan>>,
    metrics: Mutex<Vec<ReceivedMetric>>,
    changed: Notify,
    /// Only count spans, keep none (a sink for benchmarks: memory stays flat).
    count_only: bool,
    /// Spans received, kept or not.
    span_count: AtomicU64,
    /// Exports that came gzip-compressed (either protocol).
    gzip_exports: AtomicU64,
}

impl Store {
    fn gzipped(&self, gzip: bool) {
        if gzip {
            self.gzip_exports.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn traces(&self, request: ExportTraceServiceRequest, protocol: &'static str) {
        if self.count_only {
            let n = request.resource_spans.iter().flat_map(|rs| &rs.scope_spans).map(|ss| ss.spans.len() as u64).sum();
            self.span_count.fetch_add(n, Ordering::Relaxed);
            self.changed.notify_waiters();
            return;
        }
        let mut out = Vec::new();
        for rs in request.resource_spans {
            let service_name = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                .map(|kv| text(kv.value.as_ref()))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                let scope = ss.scope.as_ref().map(|s| s.name.clone()).unwrap_or_default();
                for span in ss.spans {
                    let status = span.status.as_ref();
                    out.push(ReceivedSpan {
                        name: span.name,
                        kind: match span.kind {
                            1 => "internal",
                            2 => "server",
                            3 => "client",
                            4 => "producer",
                            5 => "consumer",
                            _ => "unspecified",
                        },
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        attributes: attributes(&span.attributes),
                        status: match status.map_or(0, |s| s.code) {
                            1 => "ok",
                            2 => "error",
                            _ => "unset",
                        },
                        status_message: status.map(|s| s.message.clone()).unwrap_or_default(),
                        events: span.events.into_iter().map(|e| e.name).collect(),
                        links: span.links.iter().map(|l| (hex(&l.trace_id), hex(&l.span_id))).collect(),
                        scope: scope.clone(),
                        service_name: service_name.clone(),
                        protocol,
                    });
                }
            }
        }
        self.span_count.fetch_add(out.len() as u64, Ordering::Relaxed);
        mcp_safety::lock(&self.spans).extend(out);
        self.changed.notify_waiters();
    }

    fn metrics(&self, request: ExportMetricsServiceRequest, protocol: &'static str) {
        if self.count_only {
            return;
        }
        let mut out = Vec::new();
        for rm in request.resource_metrics {
            for sm in rm.scope_metrics {
                for m in sm.metrics {
                    let (histogram_count, bounds) = match &m.data {
                        Some(metric::Data::Histogram(h)) => (
                            Some(h.data_points.iter().map(|p| p.count).sum()),
                            h.data_points.first().map(|p| p.explicit_bounds.clone()).unwrap_or_default(),
                        ),
                        _ => (None, Vec::new()),
                    };
                    out.push(ReceivedMetric { name: m.name, unit: m.unit, histogram_count, bounds, protocol });
                }
            }
        }
        mcp_safety::lock(&self.metrics).extend(out);
        self.changed.notify_waiters();
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter().map(|kv| (kv.key.clone(), text(kv.value.as_ref()))).collect()
}

fn text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(|v| text(Some(v))).collect();
            format!("[{}]", items.join(", "))
        }
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// The collector: both protocols, until dropped.
#[derive(Debug)]
pub struct Receiver {
    http: SocketAddr,
    grpc: SocketAddr,
    store: Arc<StoreHandle>,
    stop: watch::Sender<bool>,
}

/// The store, with a `Debug` that does not print every span.
struct StoreHandle(Store);

impl std::fmt::Debug for StoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("spans", &mcp_safety::lock(&self.0.spans).len()).finish()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

struct Grpc(Arc<StoreHandle>);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.0.gzipped(request.metadata().get("grpc-encoding").is_some_and(|e| e == "gzip"));
        self.0.0.traces(request.into_inner(), "grpc");
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tonic::async_trait]
impl MetricsService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.0.gzipped(request.metadata().get("grpc-encoding").is_some_and(|e| e == "gzip"));
        self.0.0.metrics(request.into_inner(), "grpc");
        Ok(tonic::Response::new(ExportMetricsServiceResponse { partial_success: None }))
    }
}

impl Receiver {
    /// Starts both sides on `127.0.0.1` ports the system picks, on the current tokio runtime.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(Store::default()).await
    }

    /// Like [`Receiver::start`], but a sink: spans are decoded and counted
    /// ([`Receiver::span_count`]), and neither they nor metrics are kept, so a benchmark can
    /// export for as long as it likes.
    pub async fn start_counting() -> std::io::Result<Self> {
        Self::start_with(Store { count_only: true, ..Store::default() }).await
    }

    async fn start_with(store: Store) -> std::io::Result<Self> {
        let store = Arc::new(StoreHandle(store));
        let (stop, stopped) = watch::channel(false);

        let http_listener = TcpListener::bind("127.0.0.1:0").await?;
        let http = http_listener.local_addr()?;
        tokio::spawn(serve_http(http_listener, store.clone(), stopped.clone()));

        let grpc_listener = TcpListener::bind("127.0.0.1:0").await?;
        let grpc = grpc_listener.local_addr()?;
        let mut grpc_stopped = stopped;
        let router = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(Grpc(store.clone())).accept_compressed(CompressionEncoding::Gzip))
            .add_service(MetricsServiceServer::new(Grpc(store.clone())).accept_compressed(CompressionEncoding::Gzip));
        tokio::spawn(async move {
            let incoming = tonic::transport::server::TcpIncoming::from(grpc_listener);
            let _ = router
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = grpc_stopped.wait_for(|s| *s).await;
                })
                .await;
        });
        Ok(Self { http, grpc, store, stop })
    }

    /// How many exports came gzip-compressed (`Content-Encoding: gzip`, `grpc-encoding: gzip`).
    pub fn gzip_exports(&self) -> u64 {
        self.store.0.gzip_exports.load(Ordering::Relaxed)
    }

    /// The OTLP/HTTP base endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` for `http/protobuf`).
    pub fn http_endpoint(&self) -> String {
        format!("http://{}", self.http)
    }

    /// The OTLP/gRPC endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` for `grpc`).
    pub fn grpc_endpoint(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// How many spans were received so far (kept or, from [`Receiver::start_counting`], not).
    pub fn span_count(&self) -> u64 {
        self.store.0.span_count.load(Ordering::Relaxed)
    }

    /// Every span received so far (none from [`Receiver::start_counting`]).
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        mcp_safety::lock(&self.store.0.spans).clone()
    }

    /// Every metric received so far, one entry per metric per export.
    pub fn metrics(&self) -> Vec<ReceivedMetric> {
        mcp_safety::lock(&self.store.0.metrics).clone()
    }

    /// The spans once at least `n` arrived, or what arrived when `timeout` ran out.
    pub async fn wait_for_spans(&self, n: usize, timeout: Duration) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.store.0.changed.notified();
            let spans = self.spans();
            if spans.len() >= n {
                return spans;
            }
            if tokio::time::timeout_at(deadline.into(), notified).await.is_err() {
                return self.spans();
            }
        }
    }

    /// The metrics once one named `name` arrived, or what arrived when `timeout` ran out.
    pub async fn wait_for_metric(&self, name: &str, timeout: Duration) -> Vec<ReceivedMetric> {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.store.0.changed.notified();
            let metrics = self.metrics();
            if metrics.iter().any(|m| m.name == name) {
                return metrics;
            }
            if tokio::time::timeout_at(deadline.into(), notified).await.is_err() {
                return self.metrics();
            }
        }
    }
}

async fn serve_http(listener: TcpListener, store: Arc<StoreHandle>, mut stopped: watch::Receiver<bool>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stopped.wait_for(|s| *s) => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let store = store.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, store.clone()));
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

async fn handle(
    req: Request<Incoming>,
    store: Arc<StoreHandle>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let path = req.uri().path().to_owned();
    let gzip = req.headers().get(http::header::CONTENT_ENCODING).is_some_and(|e| e == "gzip");
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(status(StatusCode::PAYLOAD_TOO_LARGE)),
    };
    let body = if gzip {
        let mut plain = Vec::new();
        let read = std::io::Read::read_to_end(
            &mut std::io::Read::take(flate2::read::GzDecoder::new(&body[..]), MAX_BODY as u64 + 1),
            &mut plain,
        );
        if read.is_err() || plain.len() > MAX_BODY {
            return Ok(status(StatusCode::BAD_REQUEST));
        }
        store.0.gzipped(true);
        Bytes::from(plain)
    } else {
        body
    };
    let answer = match path.as_str() {
        "/v1/traces" => match ExportTraceServiceRequest::decode(body) {
            Ok(r) => {
                store.0.traces(r, "http/protobuf");
                ExportTraceServiceResponse { partial_success: None }.encode_to_vec()
            }
            Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
        },
        "/v1/metrics" => match ExportMetricsServiceRequest::decode(body) {
            Ok(r) => {
                store.0.metrics(r, "http/protobuf");
                ExportMetricsServiceResponse { partial_success: None }.encode_to_vec()
            }
            Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
        },
        _ => return Ok(status(StatusCode::NOT_FOUND)),
    };
    let mut response = Response::new(Full::new(Bytes::from(answer)));
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/x-protobuf"));
    Ok(response)
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = code;
    response
}
