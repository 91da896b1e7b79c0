//! The process's HTTP clients and one request through them: reqwest's, shared per (TLS, connect
//! timeout), and for plain `http` without a proxy hyper's pooled client directly (the fast path:
//! no per-request layers, the endpoint's URI parsed once, the response kept as hyper's own and
//! read through [`Answer`]).

use std::sync::Mutex;
use std::time::Duration;

use http::StatusCode;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use mcp_client::TransportError;

use super::Shared;

/// How much of an error body is kept for the message.
pub(super) const ERROR_BODY_BYTES: usize = 1024;
/// How much of a body that is not what was expected is shown, in characters.
pub(super) const EXCERPT_CHARS: usize = 200;

/// The clients every HTTP transport of the process shares, one per (TLS, connect timeout).
pub(super) static CLIENTS: Mutex<Vec<(bool, Duration, reqwest::Client)>> = Mutex::new(Vec::new());

/// The process's HTTP client for `https` (`tls`) or plain `http` URLs with this connect timeout,
/// built on first use and shared after: its pool keeps connections alive across transports, and
/// building one is most of what opening a session costs (a TLS client loads and decodes the
/// system's certificates). The plain client trusts no certificate at all, so `http://` URLs
/// never load them. Neither follows redirects: they could carry our headers elsewhere, and MCP
/// endpoints do not redirect.
///
/// # Errors
///
/// [`TransportError::Config`] when the TLS backend cannot be set up.
pub fn shared_client(tls: bool, connect_timeout: Duration) -> Result<reqwest::Client, TransportError> {
    let mut clients = CLIENTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, _, client)) = clients.iter().find(|(t, timeout, _)| *t == tls && *timeout == connect_timeout) {
        return Ok(client.clone());
    }
    let builder =
        reqwest::Client::builder().connect_timeout(connect_timeout).redirect(reqwest::redirect::Policy::none());
    let builder = if tls { builder } else { builder.tls_certs_only([]) };
    let client = builder
        .build()
        .map_err(|e| TransportError::Config(format!("could not build the HTTP client: {}", error_chain(&e))))?;
    clients.push((tls, connect_timeout, client.clone()));
    Ok(client)
}

/// hyper's pooled client, for plain `http` without a proxy.
pub(super) type PlainClient =
    hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, reqwest::Body>;

/// The plain clients every HTTP transport of the process shares, one per connect timeout.
pub(super) static PLAIN_CLIENTS: Mutex<Vec<(Duration, PlainClient)>> = Mutex::new(Vec::new());

/// The process's hyper client for `http` URLs with this connect timeout; `None` when the
/// environment names a proxy for `http` (reqwest honours it; this client would not).
pub(super) fn shared_plain_client(connect_timeout: Duration) -> Option<PlainClient> {
    if names_an_http_proxy(|var| std::env::var_os(var)) {
        return None;
    }
    let mut clients = PLAIN_CLIENTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, client)) = clients.iter().find(|(timeout, _)| *timeout == connect_timeout) {
        return Some(client.clone());
    }
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_connect_timeout(Some(connect_timeout));
    connector.set_nodelay(true);
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    clients.push((connect_timeout, client.clone()));
    Some(client)
}
/// Whether the environment (read through `lookup`) names a proxy for plain `http`, as reqwest
/// reads it.
pub(super) fn names_an_http_proxy(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"].iter().any(|var| lookup(var).is_some_and(|v| !v.is_empty()))
}

/// Why a request could not be sent, or got no response.
#[derive(Debug)]
pub(super) struct SendError {
    /// Connecting failed: the server never saw the request, so it may be sent again.
    pub(super) connect: bool,
    pub(super) text: String,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// An HTTP response: hyper's own (plain `http`) or reqwest's. hyper's is not wrapped into
/// reqwest's type: that conversion parsed a placeholder URL for every response, the largest
/// single cost of a call beyond the raw client.
pub(super) enum Answer {
    Plain(http::Response<hyper::body::Incoming>),
    Reqwest(reqwest::Response),
}

impl Answer {
    pub(super) fn status(&self) -> StatusCode {
        match self {
            Answer::Plain(resp) => resp.status(),
            Answer::Reqwest(resp) => resp.status(),
        }
    }

    pub(super) fn headers(&self) -> &HeaderMap {
        match self {
            Answer::Plain(resp) => resp.headers(),
            Answer::Reqwest(resp) => resp.headers(),
        }
    }

    /// The next piece of the body; `None` at its end.
    pub(super) async fn chunk(&mut self) -> Option<Result<bytes::Bytes, String>> {
        match self {
            Answer::Plain(resp) => loop {
                let frame =
                    std::future::poll_fn(|cx| hyper::body::Body::poll_frame(std::pin::Pin::new(resp.body_mut()), cx))
                        .await?;
                match frame.map(hyper::body::Frame::into_data) {
                    Ok(Ok(data)) => return Some(Ok(data)),
                    // Trailers carry no data.
                    Ok(Err(_)) => {}
                    Err(e) => return Some(Err(error_chain(&e))),
                }
            },
            Answer::Reqwest(resp) => resp.chunk().await.map_err(|e| error_chain(&e.without_url())).transpose(),
        }
    }

    /// The body as a stream of pieces.
    pub(super) fn into_stream(
        self,
    ) -> impl futures_util::Stream<Item = Result<bytes::Bytes, String>> + Send + Unpin + 'static {
        Box::pin(futures_util::stream::unfold(self, |mut answer| async move {
            answer.chunk().await.map(|chunk| (chunk, answer))
        }))
    }
}

/// Looked at on every answer, so without making a lowercased copy of the header.
pub(super) fn is_event_stream(resp: &Answer) -> bool {
    const SSE: &[u8] = b"text/event-stream";
    resp.headers().get(CONTENT_TYPE).is_some_and(|v| {
        let value = v.as_bytes().trim_ascii_start();
        value.get(..SSE.len()).is_some_and(|start| start.eq_ignore_ascii_case(SSE))
    })
}

/// A `Content-Type` value as shown in messages.
pub(super) fn content_type(value: Option<&HeaderValue>) -> Option<String> {
    value.and_then(|v| v.to_str().ok()).map(|s| s.trim().to_ascii_lowercase())
}

/// Reads at most `limit` bytes of a body; `None` when it is longer.
pub(super) async fn read_bounded(mut resp: Answer, limit: usize) -> Result<Option<Vec<u8>>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The start of an error body, on one line and made safe to show (a server controls it).
pub(super) async fn error_body(mut resp: Answer) -> String {
    let mut body = Vec::new();
    while let Some(Ok(chunk)) = resp.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= ERROR_BODY_BYTES {
            body.truncate(ERROR_BODY_BYTES);
            break;
        }
    }
    mcp_safety::text::one_line(&String::from_utf8_lossy(&body), ERROR_BODY_BYTES)
}

/// What came back, for a message about an answer that is not what was asked for: the status,
/// the content type and the body's start, cleaned.
pub(super) fn what_came_back(status: StatusCode, content_type: Option<&str>, body: &[u8]) -> String {
    let content_type =
        content_type.map_or_else(|| "no Content-Type".to_owned(), |ct| mcp_safety::text::one_line(ct, 80));
    let start = &body[..body.len().min(EXCERPT_CHARS * 4)];
    let excerpt = mcp_safety::text::one_line(&String::from_utf8_lossy(start), EXCERPT_CHARS);
    if excerpt.is_empty() {
        format!("HTTP {status}, {content_type}, an empty body")
    } else {
        format!("HTTP {status}, {content_type}: {excerpt}")
    }
}

impl Shared {
    /// Sends one request: over the plain hyper client when there is one (an `http` URL, no
    /// proxy), else over reqwest.
    pub(super) async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer, SendError> {
        let unsendable = |text: String| SendError { connect: false, text };
        let mut request = request.build().map_err(|e| unsendable(error_chain(&e.without_url())))?;
        let Some(plain) = &self.plain else {
            return match self.http.execute(request).await {
                Ok(resp) => Ok(Answer::Reqwest(resp)),
                // reqwest's errors name the URL, which may hold a credential.
                Err(e) => Err(SendError { connect: e.is_connect(), text: error_chain(&e.without_url()) }),
            };
        };
        // Made here rather than by reqwest's conversion, which parses the URL again each time.
        let uri = match &self.uri {
            Some(uri) if request.url() == &self.url => uri.clone(),
            _ => request.url().as_str().parse().map_err(|e: http::uri::InvalidUri| unsendable(e.to_string()))?,
        };
        let mut hyper_request = http::Request::new(request.body_mut().take().unwrap_or_default());
        *hyper_request.method_mut() = request.method().clone();
        *hyper_request.uri_mut() = uri;
        *hyper_request.headers_mut() = std::mem::take(request.headers_mut());
        match plain.request(hyper_request).await {
            Ok(resp) => Ok(Answer::Plain(resp)),
            Err(e) => Err(SendError { connect: e.is_connect(), text: error_chain(&e) }),
        }
    }

    /// Sends, retrying connection failures (never answered requests) with backoff.
    pub(super) async fn send_retrying(&self, make: impl Fn() -> reqwest::RequestBuilder) -> Result<Answer, String> {
        let mut failed = 0;
        loop {
            match self.send(make()).await {
                Ok(resp) => return Ok(resp),
                // Only a failed connect is safe to repeat: the server never saw the message.
                Err(e) if e.connect && self.backoff.allows(failed + 1) => {
                    tracing::debug!(server = %self.label, "connecting failed, retrying: {e}");
                    tokio::time::sleep(self.backoff.delay(failed, rand::random())).await;
                    failed += 1;
                }
                Err(e) => {
                    let attempts = if e.connect { format!(" (after {} attempts)", failed + 1) } else { String::new() };
                    return Err(format!("could not reach {}{attempts}: {e}", self.shown));
                }
            }
        }
    }

    /// The authorizer's header for the next request, if there is an authorizer and a token.
    pub(super) async fn authorization(&self) -> Option<HeaderValue> {
        let value = self.auth.as_ref()?.authorization().await?;
        let mut value = HeaderValue::from_str(value.expose()).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// The configured headers, with the authorizer's `Authorization` in place of a configured
    /// one (never both).
    pub(super) fn headers_with(&self, authz: Option<&HeaderValue>) -> HeaderMap {
        let mut headers = self.headers.clone();
        if let Some(value) = authz {
            headers.insert(AUTHORIZATION, value.clone());
        }
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(set: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> {
        move |var| set.iter().find(|(name, _)| *name == var).map(|(_, value)| (*value).into())
    }

    #[test]
    fn a_proxy_for_http_in_the_environment_keeps_plain_http_on_reqwest() {
        assert!(!names_an_http_proxy(env(&[])));
        assert!(!names_an_http_proxy(env(&[("https_proxy", "http://proxy:3128"), ("http_proxy", "")])));
        assert!(names_an_http_proxy(env(&[("http_proxy", "http://proxy:3128")])));
        assert!(names_an_http_proxy(env(&[("HTTP_PROXY", "http://proxy:3128")])));
        assert!(names_an_http_proxy(env(&[("all_proxy", "socks5://proxy:1080")])));
        assert!(names_an_http_proxy(env(&[("ALL_PROXY", "socks5://proxy:1080")])));
    }
}
