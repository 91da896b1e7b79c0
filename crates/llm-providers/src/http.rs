//! The HTTP side shared by both adapters: base URLs, the retry loop, bounded reading of JSON and
//! server-sent-event answers, and provider error messages.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agent_loop::{ModelError, ModelResponse, TextStream};
use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use sse_stream::SseStream;
use tokio::time::{Instant, timeout_at};

use mcp_safety::Secret;

use crate::Options;

/// An API key (a [`Secret`]: its `Debug` never shows it).
#[derive(Debug, Clone)]
pub(crate) struct ApiKey(Secret);

impl ApiKey {
    pub(crate) fn new(key: String) -> Self {
        Self(Secret::new(key))
    }

    /// A header value marked sensitive (hyper and reqwest then never print it).
    pub(crate) fn header(&self, prefix: &str) -> Result<HeaderValue, ModelError> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0.expose())).map_err(|_| {
            ModelError::Configuration("the API key contains characters not allowed in an HTTP header".into())
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// The most tool calls (OpenAI's call `index`) or content blocks (Anthropic's block `index`)
/// one answer may hold. The loop runs 128 calls of an answer; past that, what a model lists is
/// only memory, terminal lines and transcript (100,000 calls: 800 MB in six steps).
pub(crate) const MAX_ANSWER_PARTS: u64 = 4096;

/// `base` (trailing slashes removed) followed by `suffix`, checked to be an http(s) URL.
pub(crate) fn join_base(base: &str, suffix: &str, variable: &str) -> Result<Url, ModelError> {
    let trimmed = base.trim().trim_end_matches('/');
    // Shown without its user info or query, where a credential may ride.
    let shown = mcp_safety::redact::url(base);
    let invalid = |e: &dyn std::fmt::Display| {
        ModelError::Configuration(format!("{variable}: {shown:?} is not a valid URL ({e})"))
    };
    let parsed = Url::parse(trimmed).map_err(|e| invalid(&e))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(ModelError::Configuration(format!("{variable}: {shown:?} is not an http(s) URL")));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid(&"a base URL has no query or fragment"));
    }
    Url::parse(&format!("{trimmed}{suffix}")).map_err(|e| invalid(&e))
}

/// A variable's value, `None` when unset or blank.
pub(crate) fn lookup_nonempty(lookup: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The HTTP client `from_env` uses, for callers of `new`: rustls, a 10 s connect timeout, the
/// system proxy settings, and no redirects (an API endpoint that redirects means a wrong base
/// URL, and the key must not follow a redirect to another host; a redirect is reported as
/// [`ModelError::Rejected`] naming the new location).
///
/// # Errors
///
/// [`ModelError::Configuration`] if the TLS backend cannot be set up.
pub fn default_client() -> Result<reqwest::Client, ModelError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ModelError::Configuration(format!("could not build the HTTP client: {}", chain(&e))))
}

/// Why reading an answer failed.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Final.
    Model(ModelError),
    /// The provider reported a transient failure (overloaded, rate limited) inside the answer.
    Retryable(String),
}

impl From<ModelError> for ReadError {
    fn from(e: ModelError) -> Self {
        ReadError::Model(e)
    }
}

/// A [`ReadError::Model`] holding [`ModelError::Malformed`].
pub(crate) fn malformed(message: impl Into<String>) -> ReadError {
    // Messages often quote what the model sent, which may be megabytes.
    ReadError::Model(ModelError::Malformed(snippet(&message.into(), MAX_QUOTED_CHARS)))
}

/// The most characters of provider text an error quotes.
pub(crate) const MAX_QUOTED_CHARS: usize = 2000;

/// Whether a decoder wants more events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Keep reading.
    Continue,
    /// The answer is complete (the provider's end marker arrived).
    Done,
}

/// Turns one provider's server-sent events into a response.
pub(crate) trait Decoder: Send {
    /// One event: its `event:` name, if any, and its data.
    fn event(&mut self, name: Option<&str>, data: &str, sink: &dyn TextStream) -> Result<Step, ReadError>;
    /// The response, after [`Step::Done`] (`completed`) or at the end of the body (not `completed`).
    fn finish(self, completed: bool) -> Result<ModelResponse, ReadError>;
}

/// One provider's answer formats.
pub(crate) trait Wire: Sync {
    /// Its stream decoder.
    type Decoder: Decoder;
    /// A fresh decoder for one attempt.
    fn decoder(&self) -> Self::Decoder;
    /// A whole (non-streaming) JSON answer; its text is passed to `sink` too.
    fn decode_json(&self, body: &[u8], sink: &dyn TextStream) -> Result<ModelResponse, ReadError>;
}

/// Where and how to send requests.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) client: reqwest::Client,
    pub(crate) url: Url,
    pub(crate) headers: HeaderMap,
    pub(crate) options: Options,
    pub(crate) provider: &'static str,
}

enum AttemptError {
    Fatal(ModelError),
    /// A transient failure: retried while attempts remain, unless `again` is false (the server
    /// said `x-should-retry: false`), then [`ModelError::Unavailable`].
    Retry {
        message: String,
        after: Option<Duration>,
        again: bool,
    },
}

/// Passes text on and remembers whether any was passed (then a retry would repeat it).
struct Tracked<'a> {
    inner: &'a dyn TextStream,
    emitted: AtomicBool,
}

impl TextStream for Tracked<'_> {
    fn text_delta(&self, text: &str) {
        if !text.is_empty() {
            self.emitted.store(true, Ordering::Relaxed);
            self.inner.text_delta(text);
        }
    }
}

impl Endpoint {
    /// Send `body` (JSON), retrying transient failures, and decode the answer.
    pub(crate) async fn call<W: Wire>(
        &self,
        wire: &W,
        body: Vec<u8>,
        sink: &dyn TextStream,
    ) -> Result<ModelResponse, ModelError> {
        let body = Bytes::from(body);
        let tracked = Tracked { inner: sink, emitted: AtomicBool::new(false) };
        let max_attempts = self.options.retry.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (message, after, again) = match self.attempt(wire, body.clone(), &tracked).await {
                Ok(response) => return Ok(response),
                Err(AttemptError::Fatal(e)) => return Err(e),
                Err(AttemptError::Retry { message, after, again }) => (message, after, again),
            };
            if !again || attempt >= max_attempts || tracked.emitted.load(Ordering::Relaxed) {
                return Err(ModelError::Unavailable { attempts: attempt, message });
            }
            let delay = match after {
                Some(after) => after.min(self.options.max_retry_after),
                None => self.options.backoff(attempt),
            };
            tracing::warn!(provider = self.provider, attempt, ?delay, %message, "model call failed, retrying");
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt<W: Wire>(&self, wire: &W, body: Bytes, sink: &Tracked<'_>) -> Result<ModelResponse, AttemptError> {
        let limit = self.options.timeout;
        let deadline = Instant::now() + limit;
        let request = self.client.post(self.url.clone()).headers(self.headers.clone()).body(body);
        let response = match timeout_at(deadline, request.send()).await {
            Err(_) => {
                return Err(AttemptError::Retry {
                    message: format!("no response within {limit:?}"),
                    after: None,
                    again: true,
                });
            }
            Ok(Err(e)) if e.is_builder() => {
                return Err(AttemptError::Fatal(ModelError::Configuration(format!(
                    "could not build the request: {}",
                    chain(&e)
                ))));
            }
            Ok(Err(e)) => return Err(AttemptError::Retry { message: chain(&e), after: None, again: true }),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return match timeout_at(deadline, self.read_success(wire, response, sink)).await {
                Err(_) => {
                    Err(AttemptError::Fatal(ModelError::Network(format!("the answer did not finish within {limit:?}"))))
                }
                Ok(Ok(response)) => Ok(response),
                Ok(Err(ReadError::Model(e))) => Err(AttemptError::Fatal(e)),
                Ok(Err(ReadError::Retryable(message))) => {
                    Err(AttemptError::Retry { message, after: None, again: true })
                }
            };
        }
        let after = retry_after(response.headers());
        let should_retry = match response.headers().get("x-should-retry").map(HeaderValue::as_bytes) {
            Some(b"true") => Some(true),
            Some(b"false") => Some(false),
            _ => None,
        };
        let location =
            response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let message = match timeout_at(deadline, read_error_message(response, self.options.max_error_body_bytes)).await
        {
            Ok(Some(message)) => self.hide_credentials(message),
            _ => status.canonical_reason().unwrap_or("no message").to_owned(),
        };
        // As the official SDKs: 408, 409, 429 and 5xx are transient, and the server may decide
        // with `x-should-retry`.
        let transient = matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error();
        let again = match should_retry {
            Some(verdict) => verdict,
            None => transient,
        };
        if transient || again {
            Err(AttemptError::Retry { message: format!("HTTP {}: {message}", status.as_u16()), after, again })
        } else if status.is_redirection() {
            let to = location.unwrap_or_else(|| "an unnamed location".into());
            Err(AttemptError::Fatal(ModelError::Rejected {
                status: status.as_u16(),
                message: format!("redirected to {to}; set the base URL to the final address"),
            }))
        } else {
            Err(AttemptError::Fatal(ModelError::Rejected { status: status.as_u16(), message }))
        }
    }

    /// `message` with the credentials this endpoint sends hidden: some servers (proxies,
    /// compatible gateways) quote the key they refused, and the message reaches the terminal,
    /// the transcript and the logs.
    fn hide_credentials(&self, mut message: String) -> String {
        for value in self.headers.values().filter(|v| v.is_sensitive()) {
            let Ok(value) = value.to_str() else { continue };
            let bare = value.split_once(' ').map_or(value, |(_, key)| key).trim();
            for secret in [value, bare] {
                // A short value is no key, and hiding it would garble the message.
                if secret.len() >= 8 && message.contains(secret) {
                    message = message.replace(secret, mcp_safety::redact::HIDDEN);
                }
            }
        }
        message
    }

    async fn read_success<W: Wire>(
        &self,
        wire: &W,
        response: reqwest::Response,
        sink: &Tracked<'_>,
    ) -> Result<ModelResponse, ReadError> {
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("application/json") {
            let body = read_json_body(response, self.options.max_response_bytes).await?;
            return wire.decode_json(&body, sink);
        }
        self.read_events(wire, response, sink, &content_type).await
    }

    async fn read_events<W: Wire>(
        &self,
        wire: &W,
        response: reqwest::Response,
        sink: &Tracked<'_>,
        content_type: &str,
    ) -> Result<ModelResponse, ReadError> {
        let max_total = self.options.max_response_bytes;
        let max_event = self.options.max_event_bytes;
        let meter = Arc::new(Meter::default());
        let bytes = {
            let meter = Arc::clone(&meter);
            response.bytes_stream().map(move |chunk| {
                let chunk = chunk.map_err(BodyFailure::Network)?;
                let total = meter.total.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
                if total > max_total {
                    return Err(BodyFailure::TooLarge(format!("the answer is larger than {max_total} bytes")));
                }
                // Bytes received since the last complete event, this chunk excluded: an event
                // still open after more than the limit is too large.
                if meter.since_event.fetch_add(chunk.len(), Ordering::Relaxed) > max_event {
                    return Err(BodyFailure::TooLarge(format!("an event is larger than {max_event} bytes")));
                }
                Ok(chunk)
            })
        };
        let mut events = SseStream::from_bytes_stream(bytes);
        let mut decoder = wire.decoder();
        let mut seen = 0usize;
        while let Some(item) = events.next().await {
            let event = item.map_err(stream_error)?;
            meter.since_event.store(0, Ordering::Relaxed);
            let Some(data) = event.data else { continue };
            if data.len() > max_event {
                return Err(malformed(format!("an event is larger than {max_event} bytes")));
            }
            seen += 1;
            if decoder.event(event.event.as_deref(), &data, sink)? == Step::Done {
                return decoder.finish(true);
            }
        }
        if seen == 0 {
            return Err(malformed(format!(
                "expected a stream of server-sent events but the answer (content-type {content_type:?}) had none"
            )));
        }
        decoder.finish(false)
    }
}

#[derive(Default)]
struct Meter {
    total: AtomicUsize,
    since_event: AtomicUsize,
}

#[derive(Debug)]
enum BodyFailure {
    Network(reqwest::Error),
    TooLarge(String),
}

impl std::fmt::Display for BodyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyFailure::Network(e) => f.write_str(&chain(e)),
            BodyFailure::TooLarge(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for BodyFailure {}

fn stream_error(error: sse_stream::Error) -> ReadError {
    match error {
        sse_stream::Error::Body(inner) => match inner.downcast_ref::<BodyFailure>() {
            Some(BodyFailure::TooLarge(m)) => malformed(m.clone()),
            Some(BodyFailure::Network(e)) => {
                ReadError::Model(ModelError::Network(format!("the answer stream broke off: {}", chain(e))))
            }
            None => ReadError::Model(ModelError::Network(format!("the answer stream broke off: {inner}"))),
        },
        other => malformed(format!("invalid server-sent event stream: {other}")),
    }
}

async fn read_json_body(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(malformed(format!("the answer is larger than {max} bytes")));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => {
                return Err(ReadError::Model(ModelError::Network(format!("the answer broke off: {}", chain(&e)))));
            }
        }
    }
}

/// The provider's message from an error answer: at most `max` bytes are read.
async fn read_error_message(mut response: reqwest::Response, max: usize) -> Option<String> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = max.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= max {
            break;
        }
    }
    error_message(&body)
}

/// `error.message` (with `error.type` before it when present), `error` as a string, or a
/// top-level `message`; otherwise the start of the body as text.
pub(crate) fn error_message(body: &[u8]) -> Option<String> {
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && let Some(message) = json_error_message(&value)
    {
        return Some(message);
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    (!text.is_empty()).then(|| snippet(text, 500))
}

/// The message of a JSON error object (see [`error_message`]).
pub(crate) fn json_error_message(value: &Value) -> Option<String> {
    let error = value.get("error").unwrap_or(value);
    if let Some(text) = error.as_str() {
        return Some(snippet(text, MAX_QUOTED_CHARS));
    }
    let message = error.get("message").and_then(Value::as_str)?;
    let message = snippet(message, MAX_QUOTED_CHARS);
    Some(match error.get("type").and_then(Value::as_str) {
        Some(kind) if !kind.is_empty() => format!("{}: {message}", snippet(kind, 100)),
        _ => message,
    })
}

/// `retry-after-ms` (milliseconds) or `retry-after` (seconds); HTTP dates are not read.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value = headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(86_400.0)));
    }
    number("retry-after").map(|s| Duration::from_secs_f64(s.min(86_400.0)))
}

/// An error and its sources, joined (reqwest's own message is terse).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

/// At most `max` characters of `text`, marked when cut.
pub(crate) fn snippet(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A JSON value parsed from provider text, or a Malformed error naming `what`.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(data: &str, what: &str) -> Result<T, ReadError> {
    serde_json::from_str(data).map_err(|e| malformed(format!("{what}: {e} in {}", snippet(data, 200))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn base_urls_join_with_or_without_trailing_slashes() {
        let a = join_base("https://api.anthropic.com", "/v1/messages", "X").unwrap();
        let b = join_base("https://api.anthropic.com///", "/v1/messages", "X").unwrap();
        assert_eq!(a.as_str(), "https://api.anthropic.com/v1/messages");
        assert_eq!(a, b);
        let c = join_base(" http://127.0.0.1:8080/proxy/v1/ ", "/chat/completions", "X").unwrap();
        assert_eq!(c.as_str(), "http://127.0.0.1:8080/proxy/v1/chat/completions");
        for bad in ["", "api.openai.com/v1", "ftp://x/v1", "http://", "https://h/v1?x=1"] {
            let e = join_base(bad, "/x", "OPENAI_BASE_URL").unwrap_err();
            assert!(matches!(&e, ModelError::Configuration(m) if m.contains("OPENAI_BASE_URL")), "{bad}: {e}");
        }
    }

    #[test]
    fn error_messages_from_the_usual_shapes() {
        let anthropic = br#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#;
        assert_eq!(error_message(anthropic).unwrap(), "invalid_request_error: max_tokens: too big");
        let openai =
            br#"{"error":{"message":"Invalid model","type":"invalid_request_error","param":null,"code":null}}"#;
        assert_eq!(error_message(openai).unwrap(), "invalid_request_error: Invalid model");
        assert_eq!(error_message(br#"{"error":"model 'x' not found"}"#).unwrap(), "model 'x' not found");
        assert_eq!(error_message(br#"{"message":"nope"}"#).unwrap(), "nope");
        assert_eq!(error_message(b"<html>Bad Gateway</html>").unwrap(), "<html>Bad Gateway</html>");
        assert_eq!(error_message(b"  "), None);
    }

    #[test]
    fn retry_after_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        let mut d = HeaderMap::new();
        d.insert("retry-after", HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&d), None);
        d.insert("retry-after", HeaderValue::from_static("-1"));
        assert_eq!(retry_after(&d), None);
    }

    #[test]
    fn snippets_cut_on_characters() {
        assert_eq!(snippet("héllo", 2), "hé…");
        assert_eq!(snippet("hi", 2), "hi");
    }

    #[test]
    fn keys_are_redacted() {
        let key = ApiKey::new("sk-secret".into());
        assert!(!format!("{key:?}").contains("secret"));
        assert!(!format!("{:?}", key.header("Bearer ").unwrap()).contains("secret"));
    }
}

/// Robustness checks shared by the decoders' tests: every truncation and a set of corruptions
/// of recorded streams must give a result or an error, never a panic.
#[cfg(test)]
pub(crate) mod robustness {
    use agent_loop::NoStream;
    use serde_json::{Value, json};

    use super::{Decoder, Step};

    /// `(event name, data)` pairs of an SSE text (blank-line separated blocks).
    pub(crate) fn events(sse: &str) -> Vec<(Option<String>, String)> {
        sse.split("\n\n")
            .filter(|block| !block.trim().is_empty())
            .map(|block| {
                let mut name = None;
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                (name, data.join("\n"))
            })
            .collect()
    }

    fn run<D: Decoder>(new: &impl Fn() -> D, events: &[(Option<String>, String)]) -> bool {
        let mut d = new();
        for (name, data) in events {
            match d.event(name.as_deref(), data, &NoStream) {
                Ok(Step::Continue) => {}
                Ok(Step::Done) => return d.finish(true).is_ok(),
                Err(_) => return false,
            }
        }
        d.finish(false).is_ok()
    }

    /// Checks a recorded stream: it decodes whole; cut after any event it decodes only if
    /// `complete_from` says so; each event truncated or replaced by other JSON never panics.
    pub(crate) fn check<D: Decoder>(new: impl Fn() -> D, sse: &str, complete_from: impl Fn(usize) -> bool) {
        let events = events(sse);
        assert!(run(&new, &events), "the whole stream decodes");
        for k in 0..events.len() {
            assert_eq!(run(&new, &events[..k]), complete_from(k), "cut after {k} events");
        }
        let replacements = [
            json!(null),
            json!([]),
            json!({}),
            json!("x"),
            json!(1),
            json!({"type": null}),
            json!({"choices": [null]}),
        ];
        for i in 0..events.len() {
            let data = &events[i].1;
            for (cut, _) in data.char_indices() {
                let mut broken = events.clone();
                broken[i].1.truncate(cut);
                run(&new, &broken);
            }
            let Ok(value) = serde_json::from_str::<Value>(data) else { continue };
            let mut variants: Vec<Value> = replacements.to_vec();
            // Every field of the event, and of its nested objects, replaced by each odd value.
            for pointer in pointers(&value, String::new()) {
                for odd in &replacements {
                    let mut v = value.clone();
                    if let Some(slot) = v.pointer_mut(&pointer) {
                        *slot = odd.clone();
                    }
                    variants.push(v);
                }
            }
            for v in variants {
                let mut broken = events.clone();
                broken[i].1 = v.to_string();
                run(&new, &broken);
            }
        }
    }

    /// The JSON pointer of every field and element of `value`, nested ones too.
    pub(crate) fn pointers(value: &Value, prefix: String) -> Vec<String> {
        let mut out = Vec::new();
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let p = format!("{prefix}/{}", k.replace('~', "~0").replace('/', "~1"));
                    out.push(p.clone());
                    out.extend(pointers(v, p));
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    let p = format!("{prefix}/{i}");
                    out.push(p.clone());
                    out.extend(pointers(v, p));
                }
            }
            _ => {}
        }
        out
    }
}
