//! What to export, where, and how: the `[telemetry]` table of the configuration and the standard
//! `OTEL_*` environment variables, resolved into one [`TelemetryConfig`].
//!
//! Pure: the environment is handed in as a map ([`otel_env`] reads the process's), so every rule
//! is testable without touching the process. Strict: a value that cannot be used is an error that
//! names the variable or key, what it held, and what is accepted; nothing is guessed.
//!
//! Precedence, per key: a variable that is set wins over the table (an operator redirects
//! without editing files), the table wins over the defaults. `OTEL_SDK_DISABLED=true` (or
//! `enabled = false` with the variable unset) turns everything off whatever else is set.
//!
//! Nothing is exported unless configured: a signal is exported when an endpoint for it is set
//! (the common one or the signal's own), or when its exporter is named `otlp` explicitly
//! (`OTEL_TRACES_EXPORTER=otlp`, then to the protocol's default local endpoint).

use std::collections::BTreeMap;
use std::time::Duration;

use mcp_safety::Secret;
use serde::Deserialize;

/// `OTEL_SDK_DISABLED`: `true` turns every signal off.
pub const OTEL_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
/// `OTEL_EXPORTER_OTLP_ENDPOINT`: the base URL of every signal (`/v1/traces`, `/v1/metrics`
/// are appended for `http/protobuf`).
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the traces URL, used as it is.
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`: the metrics URL, used as it is.
pub const OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (the default) or `grpc`.
pub const OTEL_EXPORTER_OTLP_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`.
pub const OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`.
pub const OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value,key2=value2`, values percent-encoded.
pub const OTEL_EXPORTER_OTLP_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// `OTEL_EXPORTER_OTLP_TRACES_HEADERS`.
pub const OTEL_EXPORTER_OTLP_TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
/// `OTEL_EXPORTER_OTLP_METRICS_HEADERS`.
pub const OTEL_EXPORTER_OTLP_METRICS_HEADERS: &str = "OTEL_EXPORTER_OTLP_METRICS_HEADERS";
/// `OTEL_EXPORTER_OTLP_COMPRESSION`: `gzip` or `none` (the default).
pub const OTEL_EXPORTER_OTLP_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_COMPRESSION";
/// `OTEL_EXPORTER_OTLP_TRACES_COMPRESSION`.
pub const OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION";
/// `OTEL_EXPORTER_OTLP_METRICS_COMPRESSION`.
pub const OTEL_EXPORTER_OTLP_METRICS_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION";
/// `OTEL_EXPORTER_OTLP_TIMEOUT`: milliseconds one export may take, retries included.
pub const OTEL_EXPORTER_OTLP_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`.
pub const OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_METRICS_TIMEOUT`.
pub const OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT";
/// `OTEL_TRACES_EXPORTER`: `otlp` or `none`.
pub const OTEL_TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
/// `OTEL_METRICS_EXPORTER`: `otlp` or `none` (Prometheus scraping is `serve`'s own switch).
pub const OTEL_METRICS_EXPORTER: &str = "OTEL_METRICS_EXPORTER";
/// `OTEL_SERVICE_NAME`: the `service.name` resource attribute.
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// `OTEL_RESOURCE_ATTRIBUTES`: `key=value,...`, values percent-encoded.
pub const OTEL_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// `OTEL_TRACES_SAMPLER`: one of [`Sampler`]'s names.
pub const OTEL_TRACES_SAMPLER: &str = "OTEL_TRACES_SAMPLER";
/// `OTEL_TRACES_SAMPLER_ARG`: the ratio of the `traceidratio` samplers, 0 to 1.
pub const OTEL_TRACES_SAMPLER_ARG: &str = "OTEL_TRACES_SAMPLER_ARG";
/// `OTEL_METRIC_EXPORT_INTERVAL`: milliseconds between metric exports.
pub const OTEL_METRIC_EXPORT_INTERVAL: &str = "OTEL_METRIC_EXPORT_INTERVAL";

/// `OTEL_BSP_MAX_QUEUE_SIZE`: spans waiting for export, at most (read by the SDK; checked here).
pub const OTEL_BSP_MAX_QUEUE_SIZE: &str = "OTEL_BSP_MAX_QUEUE_SIZE";
/// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: spans in one export, at most (read by the SDK; checked here).
pub const OTEL_BSP_MAX_EXPORT_BATCH_SIZE: &str = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE";
/// The largest span queue or batch allowed.
const MAX_SPAN_QUEUE: u64 = 65_536;

/// Default time one export may take, retries included (the specification's 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default interval between metric exports (the specification's 60 s).
pub const DEFAULT_METRIC_INTERVAL: Duration = Duration::from_secs(60);
/// Longest a value of `OTEL_RESOURCE_ATTRIBUTES` or a header list may be (bounded input).
const MAX_LIST_LEN: usize = 16 * 1024;

/// The variables [`otel_env`] takes from the process: every `OTEL_*` one. A value that is not
/// UTF-8 is taken with its bad bytes replaced, so it is refused as the value it is (naming the
/// variable), not ignored (`OTEL_SDK_DISABLED` with a stray byte left export on).
pub fn otel_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
        .filter(|(k, _)| k.starts_with("OTEL_"))
        .collect()
}

/// The `[telemetry]` table, read strictly (an unknown key is an error naming it).
///
/// ```toml
/// [telemetry]
/// endpoint = "http://127.0.0.1:4318"     # OTEL_EXPORTER_OTLP_ENDPOINT
/// protocol = "http/protobuf"              # or "grpc"; OTEL_EXPORTER_OTLP_PROTOCOL
/// compression = "gzip"                    # or "none"; OTEL_EXPORTER_OTLP_COMPRESSION
/// service_name = "my-agent"               # OTEL_SERVICE_NAME
/// resource_attributes = { "deployment.environment.name" = "dev" }
/// sampler = "parentbased_traceidratio"    # OTEL_TRACES_SAMPLER
/// sampler_arg = 0.25                      # OTEL_TRACES_SAMPLER_ARG
/// capture_tool_content = false            # opt-in gen_ai.tool.call.arguments / .result, redacted
///
/// [telemetry.metrics]
/// enabled = false                         # OTEL_METRICS_EXPORTER=none
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TelemetrySettings {
    /// `false` turns telemetry off (`OTEL_SDK_DISABLED`).
    pub enabled: Option<bool>,
    /// The base endpoint of every signal (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub endpoint: Option<String>,
    /// `http/protobuf` or `grpc` (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: Option<String>,
    /// `gzip` or `none` (`OTEL_EXPORTER_OTLP_COMPRESSION`).
    pub compression: Option<String>,
    /// Headers sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`); values are secrets.
    pub headers: Option<BTreeMap<String, Secret>>,
    /// Milliseconds one export may take (`OTEL_EXPORTER_OTLP_TIMEOUT`).
    pub timeout_ms: Option<u64>,
    /// The `service.name` resource attribute (`OTEL_SERVICE_NAME`).
    pub service_name: Option<String>,
    /// More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`).
    pub resource_attributes: Option<BTreeMap<String, String>>,
    /// The trace sampler by its standard name (`OTEL_TRACES_SAMPLER`).
    pub sampler: Option<String>,
    /// The sampler's ratio, 0 to 1 (`OTEL_TRACES_SAMPLER_ARG`).
    pub sampler_arg: Option<f64>,
    /// Milliseconds between metric exports (`OTEL_METRIC_EXPORT_INTERVAL`).
    pub metric_export_interval_ms: Option<u64>,
    /// Whether tool calls' arguments and results go on spans (redacted); off by default.
    pub capture_tool_content: Option<bool>,
    /// Settings of the traces signal alone.
    pub traces: Option<SignalSettings>,
    /// Settings of the metrics signal alone.
    pub metrics: Option<SignalSettings>,
}

/// One signal's own settings (`[telemetry.traces]`, `[telemetry.metrics]`): each overrides the
/// common key of the same name.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SignalSettings {
    /// `false` exports nothing of this signal (`OTEL_TRACES_EXPORTER=none`).
    pub enabled: Option<bool>,
    /// This signal's URL, used as it is (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    pub endpoint: Option<String>,
    /// This signal's protocol.
    pub protocol: Option<String>,
    /// This signal's compression.
    pub compression: Option<String>,
    /// This signal's headers, added to the common ones.
    pub headers: Option<BTreeMap<String, Secret>>,
    /// This signal's export timeout in milliseconds.
    pub timeout_ms: Option<u64>,
}

/// The wire protocol of an OTLP exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies (`http/protobuf`), port 4318 by default.
    #[default]
    HttpProtobuf,
    /// OTLP/gRPC (`grpc`), port 4317 by default.
    Grpc,
}

impl Protocol {
    /// The name the variables use.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::Grpc => "grpc",
        }
    }

    fn default_endpoint(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http://localhost:4318",
            Protocol::Grpc => "http://localhost:4317",
        }
    }
}

/// How export bodies are compressed (`OTEL_EXPORTER_OTLP_COMPRESSION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Sent as they are (`none`, the default).
    #[default]
    None,
    /// `gzip`: an HTTP body with `Content-Encoding: gzip`, a gRPC message with `grpc-encoding`.
    Gzip,
}

/// The trace sampler (`OTEL_TRACES_SAMPLER` and its argument).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum Sampler {
    /// `always_on`.
    AlwaysOn,
    /// `always_off`.
    AlwaysOff,
    /// `traceidratio` with its ratio.
    TraceIdRatio(f64),
    /// `parentbased_always_on` (the default): a remote parent's decision is kept.
    #[default]
    ParentBasedAlwaysOn,
    /// `parentbased_always_off`.
    ParentBasedAlwaysOff,
    /// `parentbased_traceidratio` with its ratio.
    ParentBasedTraceIdRatio(f64),
}

/// Where one signal goes.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct OtlpTarget {
    /// The full URL the exporter sends to (for `http/protobuf`, with `/v1/traces` or
    /// `/v1/metrics`).
    pub endpoint: String,
    /// The protocol.
    pub protocol: Protocol,
    /// How bodies are compressed.
    pub compression: Compression,
    /// Headers sent with every export.
    pub headers: Vec<(String, Secret)>,
    /// How long one export may take, retries included.
    pub timeout: Duration,
}

/// Everything the providers need, resolved from the table and the environment.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TelemetryConfig {
    /// Where spans go; `None` exports none.
    pub traces: Option<OtlpTarget>,
    /// Where metrics go by OTLP; `None` exports none (a Prometheus scrape is separate).
    pub metrics: Option<OtlpTarget>,
    /// The resource's attributes, `service.name` first.
    pub resource: Vec<(String, String)>,
    /// The trace sampler.
    pub sampler: Sampler,
    /// Time between metric exports.
    pub metric_interval: Duration,
    /// Whether tool arguments and results go on spans (redacted).
    pub capture_tool_content: bool,
}

impl TelemetryConfig {
    /// A configuration that exports nothing (what `OTEL_SDK_DISABLED=true` gives).
    pub fn off(service_name: &str) -> Self {
        Self {
            traces: None,
            metrics: None,
            resource: vec![("service.name".to_owned(), service_name.to_owned())],
            sampler: Sampler::default(),
            metric_interval: DEFAULT_METRIC_INTERVAL,
            capture_tool_content: false,
        }
    }

    /// Whether nothing is exported by OTLP.
    pub fn exports_nothing(&self) -> bool {
        self.traces.is_none() && self.metrics.is_none()
    }

    /// The `service.name` the resource carries.
    pub fn service_name(&self) -> &str {
        self.resource.iter().find(|(k, _)| k == "service.name").map_or("", |(_, v)| v.as_str())
    }

    /// Resolves the table and the environment (`env`: variable name to value, see
    /// [`otel_env`]); `default_service_name` is the front end's name (`mcp-harness`).
    pub fn resolve(
        table: &TelemetrySettings,
        env: &BTreeMap<String, String>,
        default_service_name: &str,
    ) -> Result<Self, ConfigError> {
        let env = Env(env);
        let disabled = match env.get(OTEL_SDK_DISABLED) {
            Some(v) => parse_bool(OTEL_SDK_DISABLED, v)?,
            None => table.enabled == Some(false),
        };
        let resource = resource(table, &env, default_service_name)?;
        let sampler = sampler(table, &env)?;
        // The SDK reads these itself, and makes a queue of that size at once (a typo of a few
        // zeros aborted the process): only sizes it can use are let through.
        for name in [OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE] {
            if let Some(v) = env.get(name)
                && !v.trim().parse::<u64>().is_ok_and(|n| n <= MAX_SPAN_QUEUE)
            {
                return Err(ConfigError::invalid(name, v, "a number of spans up to 65536"));
            }
        }
        let metric_interval = match env.get(OTEL_METRIC_EXPORT_INTERVAL) {
            Some(v) => millis(OTEL_METRIC_EXPORT_INTERVAL, v)?,
            None => table.metric_export_interval_ms.map_or(DEFAULT_METRIC_INTERVAL, Duration::from_millis),
        };
        if metric_interval.is_zero() {
            return Err(ConfigError::invalid("metric_export_interval_ms", "0", "a number of milliseconds above 0"));
        }
        let capture_tool_content = table.capture_tool_content.unwrap_or(false);
        if disabled {
            return Ok(Self { traces: None, metrics: None, resource, sampler, metric_interval, capture_tool_content });
        }
        let traces = target(table, table.traces.as_ref(), &env, &SignalVars::TRACES)?;
        let metrics = target(table, table.metrics.as_ref(), &env, &SignalVars::METRICS)?;
        Ok(Self { traces, metrics, resource, sampler, metric_interval, capture_tool_content })
    }
}

/// Why a telemetry configuration cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A variable or key holds a value that cannot be used.
    #[error("{name} = {value:?} cannot be used: expected {expected}")]
    Invalid {
        /// The variable (`OTEL_...`) or the table's key (`telemetry.protocol`).
        name: String,
        /// What it held (cut to 200 characters; header values are never shown).
        value: String,
        /// What is accepted.
        expected: String,
    },
}

impl ConfigError {
    fn invalid(name: &str, value: &str, expected: &str) -> Self {
        let value = mcp_safety::text::one_line(value, 200);
        ConfigError::Invalid { name: name.to_owned(), value, expected: expected.to_owned() }
    }
}

struct Env<'a>(&'a BTreeMap<String, String>);

impl Env<'_> {
    /// A variable's value; set but empty counts as unset (as the specification says).
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// A text setting of one signal, with the name to say in an error: the signal's variable,
    /// the common variable, the signal's key (`telemetry.{signal}.{key}`), the table's key.
    fn setting<'a>(
        &'a self,
        [own, common]: [&'static str; 2],
        signal: Option<&'a str>,
        table: &'a Option<String>,
        signal_name: &str,
        key: &str,
    ) -> Option<(String, &'a str)> {
        if let Some(v) = self.get(own) {
            return Some((own.to_owned(), v));
        }
        if let Some(v) = self.get(common) {
            return Some((common.to_owned(), v));
        }
        if let Some(v) = signal {
            return Some((format!("telemetry.{signal_name}.{key}"), v));
        }
        table.as_deref().map(|v| (format!("telemetry.{key}"), v))
    }
}

struct SignalVars {
    key: &'static str,
    exporter: &'static str,
    endpoint: &'static str,
    protocol: &'static str,
    compression: &'static str,
    headers: &'static str,
    timeout: &'static str,
    path: &'static str,
}

impl SignalVars {
    const TRACES: SignalVars = SignalVars {
        key: "traces",
        exporter: OTEL_TRACES_EXPORTER,
        endpoint: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
        protocol: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
        compression: OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
        headers: OTEL_EXPORTER_OTLP_TRACES_HEADERS,
        timeout: OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
        path: "v1/traces",
    };
    const METRICS: SignalVars = SignalVars {
        key: "metrics",
        exporter: OTEL_METRICS_EXPORTER,
        endpoint: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
        protocol: OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
        compression: OTEL_EXPORTER_OTLP_METRICS_COMPRESSION,
        headers: OTEL_EXPORTER_OTLP_METRICS_HEADERS,
        timeout: OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
        path: "v1/metrics",
    };
}

fn target(
    table: &TelemetrySettings,
    signal: Option<&SignalSettings>,
    env: &Env<'_>,
    vars: &SignalVars,
) -> Result<Option<OtlpTarget>, ConfigError> {
    let key = |k: &str| format!("telemetry.{}.{k}", vars.key);
    // Whether this signal's exporter is on: explicitly (`otlp` / `none`, `enabled`), else when
    // an endpoint is configured.
    let explicit = match env.get(vars.exporter) {
        Some(v) => match v.to_ascii_lowercase().as_str() {
            "otlp" => Some(true),
            "none" => Some(false),
            _ => return Err(ConfigError::invalid(vars.exporter, v, "otlp or none")),
        },
        None => signal.and_then(|s| s.enabled),
    };
    if explicit == Some(false) {
        return Ok(None);
    }
    let protocol = match env.setting(
        [vars.protocol, OTEL_EXPORTER_OTLP_PROTOCOL],
        signal.and_then(|s| s.protocol.as_deref()),
        &table.protocol,
        vars.key,
        "protocol",
    ) {
        Some((name, v)) => protocol(&name, v)?,
        None => Protocol::default(),
    };
    // The exporters would read these variables themselves and skip a value they do not know
    // without a word; resolved (and checked) here, and always handed to them.
    let compression = match env.setting(
        [vars.compression, OTEL_EXPORTER_OTLP_COMPRESSION],
        signal.and_then(|s| s.compression.as_deref()),
        &table.compression,
        vars.key,
        "compression",
    ) {
        Some((name, v)) => compression(&name, v)?,
        None => Compression::default(),
    };
    // (name for errors, the URL, whether it is the signal's own and so used as it is)
    let endpoint: Option<(String, &str, bool)> = if let Some(v) = env.get(vars.endpoint) {
        Some((vars.endpoint.to_owned(), v, true))
    } else if let Some(v) = env.get(OTEL_EXPORTER_OTLP_ENDPOINT) {
        Some((OTEL_EXPORTER_OTLP_ENDPOINT.to_owned(), v, false))
    } else if let Some(v) = signal.and_then(|s| s.endpoint.as_deref()) {
        Some((key("endpoint"), v, true))
    } else {
        table.endpoint.as_deref().map(|v| ("telemetry.endpoint".to_owned(), v, false))
    };
    let (name, base, own) = match endpoint {
        Some(e) => e,
        None if explicit == Some(true) => (vars.exporter.to_owned(), protocol.default_endpoint(), false),
        None => return Ok(None),
    };
    let endpoint = endpoint_url(&name, base, own, protocol, vars.path)?;
    let mut headers = Vec::new();
    if let Some(h) = &table.headers {
        headers.extend(h.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(h) = signal.and_then(|s| s.headers.as_ref()) {
        headers.extend(h.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    for var in [OTEL_EXPORTER_OTLP_HEADERS, vars.headers] {
        if let Some(v) = env.get(var) {
            headers.extend(key_values(var, v)?.into_iter().map(|(k, v)| (k, Secret::new(v))));
        }
    }
    // A later header of the same name replaces an earlier one (the signal's over the common, the
    // environment over the table).
    let mut deduped: Vec<(String, Secret)> = Vec::new();
    for (k, v) in headers {
        let k = k.to_ascii_lowercase();
        if !valid_header_name(&k) {
            return Err(ConfigError::invalid("telemetry.headers", &k, "a header name (letters, digits, `-`, `_`)"));
        }
        // A value an HTTP header cannot carry (a line break, a control character) would be
        // dropped by the exporter without a word: refused here, naming the header, not its value.
        if !v.expose().bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
            return Err(ConfigError::invalid(
                "telemetry.headers",
                &k,
                "a header whose value is printable ASCII (no line breaks or control characters)",
            ));
        }
        deduped.retain(|(old, _)| *old != k);
        deduped.push((k, v));
    }
    let timeout = match (env.get(vars.timeout), env.get(OTEL_EXPORTER_OTLP_TIMEOUT)) {
        (Some(v), _) => millis(vars.timeout, v)?,
        (None, Some(v)) => millis(OTEL_EXPORTER_OTLP_TIMEOUT, v)?,
        (None, None) => {
            signal.and_then(|s| s.timeout_ms).or(table.timeout_ms).map_or(DEFAULT_TIMEOUT, Duration::from_millis)
        }
    };
    if timeout.is_zero() {
        return Err(ConfigError::invalid(&key("timeout_ms"), "0", "a number of milliseconds above 0"));
    }
    Ok(Some(OtlpTarget { endpoint, protocol, compression, headers: deduped, timeout }))
}

impl OtlpTarget {
    /// The endpoint as messages show it: user info and query (where credentials ride) hidden.
    pub fn shown_endpoint(&self) -> String {
        mcp_safety::redact::url(&self.endpoint)
    }
}

impl std::fmt::Debug for OtlpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpTarget")
            .field("endpoint", &self.shown_endpoint())
            .field("protocol", &self.protocol)
            .field("compression", &self.compression)
            .field("headers", &self.headers)
            .field("timeout", &self.timeout)
            .finish()
    }
}

fn valid_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn protocol(name: &str, value: &str) -> Result<Protocol, ConfigError> {
    match value {
        "http/protobuf" => Ok(Protocol::HttpProtobuf),
        "grpc" => Ok(Protocol::Grpc),
        "http/json" => Err(ConfigError::invalid(name, value, "http/protobuf or grpc (http/json is not supported)")),
        _ => Err(ConfigError::invalid(name, value, "http/protobuf or grpc")),
    }
}

fn compression(name: &str, value: &str) -> Result<Compression, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "gzip" => Ok(Compression::Gzip),
        "none" => Ok(Compression::None),
        "zstd" => Err(ConfigError::invalid(name, value, "gzip or none (zstd is not supported)")),
        _ => Err(ConfigError::invalid(name, value, "gzip or none")),
    }
}

fn endpoint_url(name: &str, base: &str, own: bool, protocol: Protocol, path: &str) -> Result<String, ConfigError> {
    let expected = "an http:// or https:// URL such as http://127.0.0.1:4318";
    // Messages show the URL without its user info and query, where a collector's credentials ride.
    let shown = mcp_safety::redact::url(base);
    let url = url::Url::parse(base).map_err(|_| ConfigError::invalid(name, &shown, expected))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ConfigError::invalid(name, &shown, expected));
    }
    if protocol == Protocol::Grpc && url.scheme() == "https" {
        // tonic is built without TLS (build time, and one TLS stack in the tree: rustls through
        // reqwest); an https collector is reached with http/protobuf.
        return Err(ConfigError::invalid(
            name,
            &shown,
            "an http:// URL for grpc (this build has no TLS for gRPC: use http/protobuf for an https collector)",
        ));
    }
    if own || protocol == Protocol::Grpc {
        return Ok(url.to_string());
    }
    // The common endpoint is a base: the signal's path goes after its own path.
    let mut joined = url.clone();
    let trimmed = url.path().trim_end_matches('/');
    joined.set_path(&format!("{trimmed}/{path}"));
    Ok(joined.to_string())
}

fn resource(
    table: &TelemetrySettings,
    env: &Env<'_>,
    default_service_name: &str,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut attrs: BTreeMap<String, String> = BTreeMap::new();
    if let Some(t) = &table.resource_attributes {
        attrs.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(v) = env.get(OTEL_RESOURCE_ATTRIBUTES) {
        attrs.extend(key_values(OTEL_RESOURCE_ATTRIBUTES, v)?);
    }
    for k in attrs.keys() {
        if k.trim().is_empty() {
            return Err(ConfigError::invalid("telemetry.resource_attributes", k, "a non-empty attribute name"));
        }
    }
    let from_attrs = attrs.remove("service.name");
    let service = env
        .get(OTEL_SERVICE_NAME)
        .map(str::to_owned)
        .or_else(|| table.service_name.clone().filter(|s| !s.trim().is_empty()))
        .or(from_attrs)
        .unwrap_or_else(|| default_service_name.to_owned());
    let mut out = vec![("service.name".to_owned(), service)];
    out.extend(attrs);
    Ok(out)
}

fn sampler(table: &TelemetrySettings, env: &Env<'_>) -> Result<Sampler, ConfigError> {
    let (name_key, name) = match env.get(OTEL_TRACES_SAMPLER) {
        Some(v) => (OTEL_TRACES_SAMPLER, Some(v.to_owned())),
        None => ("telemetry.sampler", table.sampler.clone()),
    };
    let arg = match env.get(OTEL_TRACES_SAMPLER_ARG) {
        Some(v) => Some(
            v.parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| ConfigError::invalid(OTEL_TRACES_SAMPLER_ARG, v, "a ratio from 0 to 1"))?,
        ),
        None => match table.sampler_arg {
            Some(r) if !(0.0..=1.0).contains(&r) => {
                return Err(ConfigError::invalid("telemetry.sampler_arg", &r.to_string(), "a ratio from 0 to 1"));
            }
            other => other,
        },
    };
    let Some(name) = name else { return Ok(Sampler::default()) };
    let ratio = arg.unwrap_or(1.0);
    Ok(match name.to_ascii_lowercase().as_str() {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatio(ratio),
        "parentbased_always_on" => Sampler::ParentBasedAlwaysOn,
        "parentbased_always_off" => Sampler::ParentBasedAlwaysOff,
        "parentbased_traceidratio" => Sampler::ParentBasedTraceIdRatio(ratio),
        _ => {
            return Err(ConfigError::invalid(
                name_key,
                &name,
                "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio",
            ));
        }
    })
}

fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::invalid(name, value, "true or false")),
    }
}

fn millis(name: &str, value: &str) -> Result<Duration, ConfigError> {
    value
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| ConfigError::invalid(name, value, "a number of milliseconds above 0"))
}

/// `key=value,key2=value2` with percent-encoded values (W3C baggage's octets), as
/// `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_EXPORTER_OTLP_HEADERS` are written. Errors never show a
/// header's value.
fn key_values(name: &str, value: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let shown = if name.contains("HEADERS") { "<hidden>" } else { value };
    if value.len() > MAX_LIST_LEN {
        return Err(ConfigError::invalid(name, "<too long>", "at most 16 KiB of key=value pairs"));
    }
    let mut out = Vec::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(ConfigError::invalid(name, shown, "key=value pairs separated by commas"));
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(ConfigError::invalid(name, shown, "key=value pairs with a non-empty key"));
        }
        let v = percent_encoding::percent_decode_str(v.trim())
            .decode_utf8()
            .map_err(|_| ConfigError::invalid(name, shown, "percent-encoded UTF-8 values"))?;
        out.push((k.to_owned(), v.into_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
