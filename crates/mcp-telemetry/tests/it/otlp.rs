//! Export by both OTLP protocols into a receiver built on opentelemetry-proto's messages, and a
//! collector that is down: calls go on, spans are lost and counted, the failure said once.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mcp_telemetry::config::TelemetryConfig;
use mcp_telemetry::conventions::{ErrorType, Transport, attr, metric};
use mcp_telemetry::instrument::McpRequest;
use mcp_telemetry::receiver::Receiver;
use mcp_telemetry::{Options, Telemetry};
use serde_json::json;

fn start(env: &[(&str, &str)]) -> Telemetry {
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let config = TelemetryConfig::resolve(&Default::default(), &env, "otlp-test").unwrap();
    assert!(!config.exports_nothing());
    Telemetry::start(&config, &Options::default().with_batch_delay(Duration::from_millis(20))).unwrap()
}

/// One successful call and one failing call, then a flush (off the runtime: it blocks).
async fn two_calls(telemetry: &Telemetry) {
    let params = json!({"name": "echo"});
    let op = telemetry
        .client_request(&McpRequest::new("tools/call", Some(&params)).server("fixture").transport(Transport::Stdio));
    op.set_request_id(1);
    drop(op);
    let mut op = telemetry.client_request(&McpRequest::new("tools/call", Some(&params)).transport(Transport::Stdio));
    op.fail(&ErrorType::JsonRpc(-32601), Some("Method not found"));
    drop(op);
    let t = telemetry.clone();
    tokio::task::spawn_blocking(move || t.flush()).await.unwrap();
}

/// `compression`: `OTEL_EXPORTER_OTLP_COMPRESSION`, or `None` to leave it unset.
async fn exports_by(protocol: &str, compression: Option<&str>) {
    let receiver = Receiver::start().await.unwrap();
    let endpoint = if protocol == "grpc" { receiver.grpc_endpoint() } else { receiver.http_endpoint() };
    let mut env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
        ("OTEL_SERVICE_NAME", "otlp-test-service"),
    ];
    env.extend(compression.map(|c| ("OTEL_EXPORTER_OTLP_COMPRESSION", c)));
    let telemetry = start(&env);
    two_calls(&telemetry).await;

    let spans = receiver.wait_for_spans(2, Duration::from_secs(20)).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    for span in &spans {
        assert_eq!(span.protocol, protocol);
        assert_eq!(span.name, "tools/call echo");
        assert_eq!(span.kind, "client");
        assert_eq!(span.service_name, "otlp-test-service");
        assert_eq!(span.scope, mcp_telemetry::SCOPE);
        assert_eq!(span.attr(attr::MCP_METHOD_NAME), Some("tools/call"));
        assert_eq!(span.attr(attr::NETWORK_TRANSPORT), Some("pipe"));
        assert_eq!(span.trace_id.len(), 32);
    }
    let ok = spans.iter().find(|s| s.attr(attr::JSONRPC_REQUEST_ID) == Some("1")).unwrap();
    assert_eq!((ok.status, ok.attr(attr::ERROR_TYPE)), ("unset", None));
    assert_eq!(ok.attr(attr::MCP_HARNESS_SERVER), Some("fixture"));
    let failed = spans.iter().find(|s| s.attr(attr::ERROR_TYPE).is_some()).unwrap();
    // A failed call's message stays home without content capture (it may quote arguments).
    assert_eq!((failed.status, failed.status_message.as_str()), ("error", ""));
    assert_eq!(failed.attr(attr::ERROR_TYPE), Some("-32601"));

    let metrics = receiver.wait_for_metric(metric::MCP_CLIENT_OPERATION_DURATION, Duration::from_secs(20)).await;
    let histogram = metrics.iter().find(|m| m.name == metric::MCP_CLIENT_OPERATION_DURATION).unwrap();
    assert_eq!((histogram.unit.as_str(), histogram.histogram_count, histogram.protocol), ("s", Some(2), protocol));
    assert_eq!(histogram.bounds, metric::MCP_DURATION_BUCKETS);

    let report = tokio::task::spawn_blocking(move || telemetry.shutdown(Duration::from_secs(5))).await.unwrap();
    assert_eq!((report.spans_ended, report.spans_exported, report.spans_lost), (2, 2, 0));
    assert!(report.metric_exports >= 1 && report.metric_exports_failed == 0, "{report:?}");
    // Every export (spans, then metrics at least once) compressed as asked, none otherwise.
    if compression.is_some_and(|c| c.eq_ignore_ascii_case("gzip")) {
        assert!(receiver.gzip_exports() >= 2, "{}", receiver.gzip_exports());
    } else {
        assert_eq!(receiver.gzip_exports(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_reach_a_collector_by_http_protobuf() {
    exports_by("http/protobuf", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_reach_a_collector_by_grpc() {
    exports_by("grpc", Some("none")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_reach_a_collector_gzip_compressed_by_http_protobuf() {
    exports_by("http/protobuf", Some("gzip")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_reach_a_collector_gzip_compressed_by_grpc() {
    exports_by("grpc", Some("GZIP")).await;
}

/// Every `tracing` event of the process, formatted, for the one test that reads warnings (the
/// export threads are not the test's, so the subscriber is the global one).
fn log() -> Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .with_writer(move || LogWriter(writer.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buf
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A collector that accepts connections and never answers: each export waits for its timeout.
async fn black_hole() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_loses_spans_not_calls_by_http_protobuf() {
    down("http/protobuf").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_loses_spans_not_calls_by_grpc() {
    down("grpc").await;
}

async fn down(protocol: &str) {
    let log = log();
    let hole = black_hole().await;
    let endpoint = format!("http://{hole}");
    let telemetry = start(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "300"),
    ]);

    // Calls while exports hang: each guard costs what it costs when the collector is up.
    let started = Instant::now();
    let mut slow = Vec::new();
    for i in 0..3000 {
        let one = Instant::now();
        let params = json!({"name": "echo"});
        let op = telemetry.client_request(&McpRequest::new("tools/call", Some(&params)));
        op.set_request_id(i);
        drop(op);
        if one.elapsed() >= Duration::from_millis(250) {
            slow.push(one.elapsed());
        }
        if i % 500 == 0 {
            // Let batches leave and hang in the meantime.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    let calls = started.elapsed();
    // Far above what a guard costs (microseconds), below one export's timeout: a call that
    // waited for exports would be one of several (3000 spans are six batches); one is the
    // machine's doing (a loaded machine may stop a thread that long).
    assert!(slow.len() <= 1, "calls that took an export's time: {slow:?}");
    assert!(calls < Duration::from_secs(5), "3000 calls took {calls:?}");

    // Shutdown is bounded: it waits at most about its bound, whatever the collector does.
    let t = telemetry.clone();
    let shut = Instant::now();
    let report = tokio::task::spawn_blocking(move || t.shutdown(Duration::from_secs(2))).await.unwrap();
    assert!(shut.elapsed() < Duration::from_secs(6), "shutdown took {:?}", shut.elapsed());
    assert_eq!(report.spans_ended, 3000);
    assert_eq!(report.spans_exported, 0);
    assert_eq!(report.spans_lost, 3000, "{report:?}");

    // Said once, naming the collector, however many exports failed.
    let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    let said: Vec<&str> =
        text.lines().filter(|l| l.contains("could not be exported") && l.contains(&hole.to_string())).collect();
    assert_eq!(said.len(), 1, "{text}");
    // A collector that never answers is said to be one, not a "network error" alone.
    assert!(said[0].contains("no answer within 300 ms"), "{text}");
    let summary = text.lines().filter(|l| l.contains("3000 of 3000 spans were not exported") && l.contains(&endpoint));
    assert_eq!(summary.count(), 1, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_keeps_its_bound_while_an_export_hangs_for_longer() {
    let hole = black_hole().await;
    let endpoint = format!("http://{hole}");
    let telemetry =
        start(&[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_EXPORTER_OTLP_TIMEOUT", "10000")]);
    for _ in 0..10 {
        drop(telemetry.client_request(&McpRequest::new("tools/list", None)));
    }
    // A batch leaves and hangs: the collector never answers, the export waits 10 s.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = telemetry.clone();
    let shut = Instant::now();
    let report = tokio::task::spawn_blocking(move || t.shutdown(Duration::from_millis(300))).await.unwrap();
    assert!(shut.elapsed() < Duration::from_secs(3), "shutdown took {:?}", shut.elapsed());
    assert_eq!((report.spans_ended, report.spans_exported, report.spans_lost), (10, 0, 10));
    // Dropping it after is free (already shut down).
    let dropped = Instant::now();
    drop(telemetry);
    assert!(dropped.elapsed() < Duration::from_secs(1));
}

/// Reads one HTTP request's head from `stream` and answers `answer`; the head.
async fn answer_once(stream: &mut tokio::net::TcpStream, answer: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let _ = stream.write_all(answer.as_bytes()).await;
    String::from_utf8_lossy(&head).into_owned()
}

/// A collector that redirects elsewhere does not get the export's headers (API keys) sent on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirecting_collector_does_not_get_the_headers_sent_elsewhere() {
    let redirecting = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = format!("http://{}", redirecting.local_addr().unwrap());
    let target = format!("http://{}/v1/traces", elsewhere.local_addr().unwrap());
    let redirect = format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: {target}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    let asked = Arc::new(Mutex::new(0usize));
    let counted = Arc::clone(&asked);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = redirecting.accept().await {
            answer_once(&mut stream, &redirect).await;
            *counted.lock().unwrap() += 1;
        }
    });
    let reached = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&reached);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = elsewhere.accept().await {
            let head = answer_once(&mut stream, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
            seen.lock().unwrap().push(head);
        }
    });
    let telemetry = start(&[
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &format!("{collector}/v1/traces")),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret-key"),
    ]);
    two_calls(&telemetry).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while *asked.lock().unwrap() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(*asked.lock().unwrap() > 0, "the collector was asked");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reached = reached.lock().unwrap().clone();
    assert!(reached.iter().all(|head| !head.contains("s3cret-key")), "{reached:?}");
    assert!(reached.is_empty(), "the redirect was followed: {reached:?}");
}
