//! Streamable HTTP: one message's exchange (the POST, its JSON or SSE answer, the session id and
//! revision learned from it), authorization challenges, session expiry, and the fallback to the
//! 2024-11-05 transport.

use std::sync::Arc;

use http::StatusCode;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use mcp_client::{AuthChallenge, AuthError, Inbound, MAX_AUTH_RETRIES, SessionLoss, TransportError};
use mcp_protocol::{Message, Outgoing, RequestId};
use serde_json::value::RawValue;
use url::Url;

use super::clients::{Answer, content_type, error_body, is_event_stream, read_bounded, what_came_back};
use super::streams::Cursor;
use super::{Deliver, Event, HttpMode, MCP_METHOD, MCP_NAME, PROTOCOL_VERSION, SESSION_ID, Shared};
use crate::sse::SseError;

/// Where the messages read for one exchange go.
#[derive(Default)]
pub(super) struct Collector<'a> {
    /// The caller that started the exchange, who takes what comes back; `None`: the reader.
    pub(super) to: Option<&'a Deliver<'a>>,
    /// The id of the request whose answer ends the exchange.
    pub(super) awaited: Option<RequestId>,
    /// The awaited request is `initialize`: its result names the revision.
    pub(super) initialize: bool,
    pub(super) answered: bool,
    /// Messages received (what counts as progress for a stream that keeps dropping).
    pub(super) delivered: usize,
}

/// Why an exchange failed.
pub(super) enum Failure {
    /// An HTTP status other than success.
    Status { status: StatusCode, body: String },
    /// The request carried a session id and got 404 (or the session ended while it was on its
    /// way): it was not run.
    SessionExpired,
    /// The server could not be reached at all (after the connect retries).
    Unreachable(String),
    /// The answer could not be read.
    Transport(String),
    /// The stream ended before the answer and could not be resumed.
    NoAnswer(String),
    /// HTTP 401/403 while an authorizer is configured: ask it for a token and retry.
    Unauthorized(AuthChallenge),
    /// The authorizer could not obtain a token.
    Auth { status: StatusCode, error: AuthError },
}

impl Failure {
    /// The typed error one request fails with; `message` says what was sent where.
    pub(super) fn into_error(self, message: String) -> TransportError {
        match self {
            Failure::Status { status, .. } => TransportError::HttpStatus { status: status.as_u16(), message },
            Failure::SessionExpired => TransportError::SessionLost(message),
            Failure::Unauthorized(challenge) => TransportError::HttpStatus { status: challenge.status, message },
            Failure::Auth { status, error } => {
                TransportError::Unauthorized { status: status.as_u16(), message, needs_login: error.needs_login }
            }
            Failure::Unreachable(_) | Failure::Transport(_) | Failure::NoAnswer(_) => TransportError::NoAnswer(message),
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Failure::Status { status, body } if body.is_empty() => format!("HTTP {status}"),
            Failure::Status { status, body } => format!("HTTP {status}: {body}"),
            Failure::SessionExpired => "HTTP 404: the session expired".to_owned(),
            Failure::Unreachable(m) | Failure::Transport(m) | Failure::NoAnswer(m) => m.clone(),
            Failure::Unauthorized(c) => format!("HTTP {}: unauthorized", c.status),
            Failure::Auth { status, error } => format!("HTTP {status}: {error}"),
        }
    }
}

/// The refusal in a 401/403 answer, for the authorizer.
pub(super) fn challenge_of(resp: &Answer, authz: Option<&HeaderValue>) -> AuthChallenge {
    AuthChallenge {
        status: resp.status().as_u16(),
        www_authenticate: resp
            .headers()
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect(),
        refused: authz.and_then(|v| v.to_str().ok()).map(mcp_safety::Secret::from),
    }
}

impl Shared {
    /// Every header of a request: the configured ones (with the authorizer's), then, unless the
    /// legacy transport is in use, the session, the revision and what the message routes on.
    /// Made as one map, the names and fixed values static, since this runs for every message.
    pub(super) fn header_map(
        &self,
        accept: &'static str,
        message: Option<&Outgoing>,
        authz: Option<&HeaderValue>,
    ) -> HeaderMap {
        let mut headers = if self.headers.is_empty() && authz.is_none() {
            HeaderMap::with_capacity(8)
        } else {
            self.headers_with(authz)
        };
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        if message.is_some() {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let state = self.state();
        if state.legacy_endpoint.is_some() {
            return headers;
        }
        // A value that is not a valid header value stays out (the server then refuses the request).
        fn put(headers: &mut HeaderMap, name: &'static str, value: &str) {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        if let Some(session) = &state.session_id {
            headers.insert(HeaderName::from_static(SESSION_ID), session.clone());
        }
        match message.and_then(Outgoing::protocol_version) {
            Some(version) => put(&mut headers, PROTOCOL_VERSION, version.as_str()),
            None => {
                if let Some(version) = &state.protocol_version {
                    headers.insert(HeaderName::from_static(PROTOCOL_VERSION), version.clone());
                }
            }
        }
        drop(state);
        if let Some(message) = message {
            if let Some(method) = message.method() {
                put(&mut headers, MCP_METHOD, method);
            }
            if let Some(name) = message.routing_name() {
                put(&mut headers, MCP_NAME, &name);
            }
        }
        headers
    }

    pub(super) fn post(&self, url: &Url, message: &Outgoing, authz: Option<&HeaderValue>) -> reqwest::RequestBuilder {
        let mut request = reqwest::Request::new(reqwest::Method::POST, url.clone());
        *request.headers_mut() = self.header_map("application/json, text/event-stream", Some(message), authz);
        *request.body_mut() = Some(message.text().to_owned().into());
        reqwest::RequestBuilder::from_parts(self.http.clone(), request)
    }

    /// Hands a message or a failed request to whoever reads this exchange.
    pub(super) async fn route(&self, inbound: Inbound, to: Option<&Deliver<'_>>) {
        match to {
            Some(deliver) => deliver(inbound),
            None => {
                let _ = self.events.send(Event::Inbound(inbound)).await;
            }
        }
    }

    /// One message the server sent: passed to the client, or kept when captured. The envelope
    /// is decoded once, here, to learn whether it is the awaited answer; the client takes the
    /// decoded message as it is.
    pub(super) async fn accept(&self, text: String, c: &mut Collector<'_>) {
        c.delivered += 1;
        let Some(awaited) = &c.awaited else {
            return self.route(Inbound::Message(text), c.to).await;
        };
        let Ok(message) = Message::decode_str(&text) else {
            // The client says what is wrong with it.
            return self.route(Inbound::Message(text), c.to).await;
        };
        let answers = match &message {
            Message::Response(response) => Some(&response.id),
            Message::Error(error) => error.id.as_ref(),
            Message::Request(_) | Message::Notification(_) => None,
        };
        if answers == Some(awaited) {
            c.answered = true;
            if c.initialize
                && let Message::Response(response) = &message
                && let Some(version) = mcp_protocol::answered_version(response.result.get())
            {
                // One that is not a valid header value stays out (the server then refuses).
                self.state().protocol_version = HeaderValue::from_str(&version).ok();
            }
        }
        self.route(Inbound::Decoded(message), c.to).await;
    }

    /// A JSON body: one message or a batch (of at most [`MAX_BATCH`]).
    pub(super) async fn accept_json(&self, body: &[u8], c: &mut Collector<'_>) -> Result<(), String> {
        let text = std::str::from_utf8(body).map_err(|_| "the server's JSON answer is not UTF-8".to_owned())?;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(());
        }
        if trimmed.starts_with('[') {
            let Batch(batch) =
                serde_json::from_str(trimmed).map_err(|e| format!("the server's JSON answer is malformed: {e}"))?;
            for item in batch {
                self.accept(item.get().to_owned(), c).await;
            }
        } else {
            self.accept(trimmed.to_owned(), c).await;
        }
        Ok(())
    }

    /// POSTs one message and reads what comes back, resuming a dropped answer stream.
    pub(super) async fn exchange(&self, message: &Outgoing, c: &mut Collector<'_>) -> Result<(), Failure> {
        let legacy = self.state().legacy_endpoint.clone();
        let url = legacy.as_ref().unwrap_or(&self.url);
        let had_session = self.state().session_id.is_some();
        if !had_session && legacy.is_none() && self.gate.is_closed() && !self.gate.admits(message) {
            // The session ended while this message was on its way: it is not sent without one.
            return Err(Failure::SessionExpired);
        }
        let authz = self.authorization().await;
        let resp =
            self.send_retrying(|| self.post(url, message, authz.as_ref())).await.map_err(Failure::Unreachable)?;
        let status = resp.status();
        if self.auth.is_some() && matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(Failure::Unauthorized(challenge_of(&resp, authz.as_ref())));
        }
        if legacy.is_some() {
            // The old transport answers on its SSE stream; the POST only says "accepted".
            return if status.is_success() {
                Ok(())
            } else {
                Err(Failure::Status { status, body: error_body(resp).await })
            };
        }
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(Failure::SessionExpired);
        }
        if !status.is_success() {
            return Err(Failure::Status { status, body: error_body(resp).await });
        }
        self.posts_answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if message.method() == Some("initialize")
            && let Some(session) = resp.headers().get(SESSION_ID).filter(|v| v.to_str().is_ok())
        {
            // A copy: the value as received is a slice of the connection's read buffer.
            self.state().session_id = HeaderValue::from_bytes(session.as_bytes()).ok();
        }
        if status == StatusCode::ACCEPTED || c.awaited.is_none() {
            return Ok(());
        }
        if is_event_stream(&resp) {
            let mut cursor = Cursor::default();
            let mut outcome = self.read_events(resp, c, &mut cursor).await;
            let mut attempts = 0;
            let mut delivered = c.delivered;
            while !c.answered {
                if c.delivered > delivered {
                    // The stream brought messages before it dropped: count afresh.
                    delivered = c.delivered;
                    attempts = 0;
                }
                if let Err(SseError::TooLarge { limit }) = outcome {
                    return Err(Failure::Transport(format!(
                        "the answer was an SSE event of more than {limit} bytes (max_message_bytes)"
                    )));
                }
                let Some(last) = cursor.last_event_id.clone() else {
                    let why = outcome.err().map(|e| format!(": {e}")).unwrap_or_default();
                    return Err(Failure::NoAnswer(format!(
                        "the server ended the answer stream without an answer{why}"
                    )));
                };
                if !self.backoff.allows(attempts) {
                    return Err(Failure::NoAnswer(format!(
                        "the answer stream dropped and {attempts} attempts to resume it failed"
                    )));
                }
                tokio::time::sleep(self.reconnect_wait(attempts, cursor.retry)).await;
                attempts += 1;
                let authz = self.authorization().await;
                let resp = match self.send(self.get(Some(&last), authz.as_ref())).await {
                    Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => resp,
                    Ok(resp) if resp.status() == StatusCode::NOT_FOUND && had_session => {
                        return Err(Failure::SessionExpired);
                    }
                    Ok(resp) => {
                        let status = resp.status();
                        return Err(Failure::Status { status, body: error_body(resp).await });
                    }
                    Err(e) => {
                        outcome = Err(SseError::Body(e.to_string()));
                        continue;
                    }
                };
                outcome = self.read_events(resp, c, &mut cursor).await;
            }
            return Ok(());
        }
        // Kept as it came (a shared buffer's slice) and made text only for a message.
        let content_type_header = resp.headers().get(CONTENT_TYPE).cloned();
        let content_type = || content_type(content_type_header.as_ref());
        match read_bounded(resp, self.max_bytes).await {
            Ok(Some(body)) => {
                // A login page or a proxy's error page can come back with 200: say what it was.
                // (Only the first byte is looked at: the decoding below reads the rest once, and
                // a body that merely starts like JSON fails there with the same account.)
                let starts_like_json =
                    body.iter().find(|b| !b.is_ascii_whitespace()).is_some_and(|b| matches!(b, b'{' | b'['));
                if !starts_like_json {
                    return Err(Failure::NoAnswer(format!(
                        "the answer is neither JSON nor an event stream ({})",
                        what_came_back(status, content_type().as_deref(), &body)
                    )));
                }
                self.accept_json(&body, c).await.map_err(Failure::Transport)?;
                if c.answered {
                    Ok(())
                } else {
                    // Nothing else will answer it: fail it now rather than at its timeout.
                    Err(Failure::NoAnswer(format!(
                        "the JSON answer did not answer this request ({})",
                        what_came_back(status, content_type().as_deref(), &body)
                    )))
                }
            }
            Ok(None) => Err(Failure::Transport(format!(
                "the answer was larger than {} bytes (max_message_bytes)",
                self.max_bytes
            ))),
            Err(e) => Err(Failure::Transport(format!("reading the answer failed: {e}"))),
        }
    }

    /// Sends one message the client wrote (from the writer), with the authorization retries and
    /// the legacy fallback; a failed request fails through the reader.
    pub(super) async fn deliver(self: Arc<Self>, message: Outgoing) {
        self.deliver_to(&message, None).await;
    }

    /// [`Shared::deliver`], with what comes back handed to `to` (the caller that started the
    /// exchange) instead of the reader.
    pub(super) async fn deliver_to(self: &Arc<Self>, message: &Outgoing, to: Option<&Deliver<'_>>) {
        if !self.gate.admits(message) {
            // The server ended the session and the client has not opened a new one yet.
            match message.id().filter(|_| message.is_request()) {
                Some(id) => {
                    let error = TransportError::SessionLost(format!(
                        "{} {}: not sent: the server ended the session and a new one is not open yet",
                        message.method().unwrap_or("message"),
                        self.shown
                    ));
                    self.route(Inbound::Failed { id: id.clone(), error }, to).await;
                }
                None => tracing::debug!(server = %self.label, "dropped {:?}: its session ended", message.method()),
            }
            return;
        }
        let mut c = Collector {
            to,
            awaited: if message.is_request() { message.id().cloned() } else { None },
            initialize: message.method() == Some("initialize"),
            ..Collector::default()
        };
        if message.method() == Some("notifications/initialized") {
            // Open the GET stream first: servers announce things right after `initialized`
            // (server-everything its added tools), and what they send before the stream is
            // open is lost.
            self.open_get_stream().await;
        }
        let mut auth_retries = 0;
        let mut stale;
        let outcome = loop {
            stale = self.state().session_id.clone();
            match self.exchange(message, &mut c).await {
                Err(Failure::Unauthorized(challenge)) => {
                    let status = StatusCode::from_u16(challenge.status).unwrap_or(StatusCode::UNAUTHORIZED);
                    let Some(auth) = self.auth.clone() else {
                        break Err(Failure::Status { status, body: String::new() });
                    };
                    if auth_retries >= MAX_AUTH_RETRIES {
                        break Err(Failure::Auth {
                            status,
                            error: AuthError::failed(format!(
                                "still refused after {auth_retries} new tokens; giving up"
                            )),
                        });
                    }
                    auth_retries += 1;
                    if let Err(error) = auth.challenged(&challenge).await {
                        break Err(Failure::Auth { status, error });
                    }
                }
                Err(Failure::Status { status, body })
                    if c.initialize
                        && self.mode == HttpMode::Auto
                        && status.is_client_error()
                        && status != StatusCode::UNAUTHORIZED
                        && status != StatusCode::FORBIDDEN
                        && self.state().legacy_endpoint.is_none() =>
                {
                    tracing::info!(server = %self.label, "POST initialize got {status}; trying the 2024-11-05 HTTP+SSE transport");
                    match self.open_legacy().await {
                        Ok(()) => continue,
                        Err(e) => {
                            break Err(Failure::Status {
                                status,
                                body: format!("{body} (and the HTTP+SSE fallback failed: {e})"),
                            });
                        }
                    }
                }
                other => break other,
            }
        };
        if let Err(Failure::SessionExpired) = &outcome {
            self.session_ended(stale, c.to).await;
        }
        match outcome {
            Ok(()) => {}
            // Nothing answers at that address: the connection is over, and every pending
            // request fails with this reason (not with a made-up server error).
            Err(Failure::Unreachable(reason)) => self.fatal(reason).await,
            Err(failure) => {
                let described =
                    format!("{} {}: {}", message.method().unwrap_or("message"), self.shown, failure.describe());
                match message.id().filter(|_| message.is_request()) {
                    Some(id) => {
                        let error = failure.into_error(described);
                        self.route(Inbound::Failed { id: id.clone(), error }, c.to).await;
                    }
                    None => tracing::warn!(server = %self.label, "could not send {described}"),
                }
            }
        }
    }

    /// The server ended session `stale` (a 404 to a request that carried it): the first request
    /// to find out forgets it, closes the gate and tells the client, once; the others only fail.
    async fn session_ended(&self, stale: Option<HeaderValue>, to: Option<&Deliver<'_>>) {
        let ended = {
            let mut state = self.state();
            let ended = stale.is_some() && state.session_id == stale;
            if ended {
                state.session_id = None;
                self.gate.close();
            }
            ended
        };
        if ended {
            tracing::info!(server = %self.label, "the server ended the session");
            self.route(Inbound::SessionLost(SessionLoss::Expired), to).await;
        }
    }
}

/// The most messages one JSON answer may batch. The byte limit alone let a 16 MiB answer of
/// 8 million tiny items cost 450 MB and 15 s of CPU.
const MAX_BATCH: usize = 1024;

/// A batch of at most [`MAX_BATCH`] messages, each kept as its text.
struct Batch(Vec<Box<RawValue>>);

impl<'de> serde::Deserialize<'de> for Batch {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Items;
        impl<'de> serde::de::Visitor<'de> for Items {
            type Value = Batch;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "a batch of at most {MAX_BATCH} messages")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Batch, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Box<RawValue>>()? {
                    if items.len() == MAX_BATCH {
                        return Err(serde::de::Error::custom(format!("more than {MAX_BATCH} messages in one batch")));
                    }
                    items.push(item);
                }
                Ok(Batch(items))
            }
        }
        deserializer.deserialize_seq(Items)
    }
}
