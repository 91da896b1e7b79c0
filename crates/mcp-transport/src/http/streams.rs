//! SSE streams: reading an answer stream's events, resuming one that dropped, and the standalone
//! GET stream, each reconnect no sooner than [`STREAM_RECONNECT`] allows.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use http::header::{HeaderName, HeaderValue};
use mcp_safety::Backoff;
use tokio::sync::oneshot;

use super::clients::{Answer, is_event_stream};
use super::streamable::{Collector, challenge_of};
use super::{LAST_EVENT_ID, Shared};
use crate::sse::{EventStream, SseError};

/// Reconnects of SSE streams (the standalone GET stream, a dropped answer stream): the first
/// after 1 to 2 s, doubling up to a minute, jittered; the GET stream is given up after this many
/// reconnects in a row that brought no message. `retry: 0` with a new event id each time once
/// made about 70 GETs a second: see `reconnect_wait` for what a server's `retry:` may change.
pub const STREAM_RECONNECT: Backoff =
    Backoff { initial_delay: Duration::from_secs(2), max_delay: Duration::from_secs(60), max_attempts: 10 };

/// The shortest wait a server's `retry:` obtains.
pub const MIN_STREAM_RETRY: Duration = Duration::from_millis(500);

/// A server's `retry:` is taken as asked at most once in this long; other reconnects wait at
/// least the backoff's delay.
pub(super) const RETRY_HONOURED_EVERY: Duration = Duration::from_secs(10);

/// How long to wait before reconnect `attempt` (0-based, counting reconnects in a row that
/// brought no message) of a stream whose server asked for `retry`. The first one, unless
/// another reconnect was `recent`, waits what the server asked (the specification's MUST; the
/// conformance suite checks it), but at least [`MIN_STREAM_RETRY`]; the others at least the
/// backoff's growing delay, so a server cannot make the client reconnect in a loop. Never more
/// than the cap unless that delay is.
pub(super) fn reconnect_wait(attempt: u32, retry: Option<Duration>, recent: bool, jitter: f64) -> Duration {
    let floor = STREAM_RECONNECT.delay(attempt, jitter);
    match retry {
        Some(asked) if attempt == 0 && !recent => asked.clamp(MIN_STREAM_RETRY, STREAM_RECONNECT.max_delay),
        Some(asked) => asked.min(STREAM_RECONNECT.max_delay).max(floor),
        None => floor,
    }
}

/// Where an SSE stream stands, for resuming it.
#[derive(Default)]
pub(super) struct Cursor {
    pub(super) last_event_id: Option<String>,
    pub(super) retry: Option<Duration>,
}

impl Shared {
    /// [`reconnect_wait`] for this transport's streams, noting the reconnect.
    pub(super) fn reconnect_wait(&self, attempt: u32, retry: Option<Duration>) -> Duration {
        let now = std::time::Instant::now();
        let last = self.state().last_reconnect.replace(now);
        let recent = last.is_some_and(|at| now.duration_since(at) < RETRY_HONOURED_EVERY);
        reconnect_wait(attempt, retry, recent, rand::random())
    }

    pub(super) fn get(&self, last_event_id: Option<&str>, authz: Option<&HeaderValue>) -> reqwest::RequestBuilder {
        let mut request = reqwest::Request::new(reqwest::Method::GET, self.url.clone());
        let mut headers = self.header_map("text/event-stream", None, authz);
        if let Some(value) = last_event_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(HeaderName::from_static(LAST_EVENT_ID), value);
        }
        *request.headers_mut() = headers;
        reqwest::RequestBuilder::from_parts(self.http.clone(), request)
    }

    /// Reads an SSE stream into the collector until it ends or the awaited answer arrives.
    pub(super) async fn read_events(
        &self,
        resp: Answer,
        c: &mut Collector<'_>,
        cursor: &mut Cursor,
    ) -> Result<(), SseError> {
        let mut events = EventStream::new(resp.into_stream(), self.max_bytes);
        while let Some(event) = events.next().await {
            let event = event?;
            if let Some(id) = event.id {
                cursor.last_event_id = Some(id);
            }
            if let Some(retry) = event.retry {
                cursor.retry = Some(Duration::from_millis(retry));
            }
            match event.event.as_deref() {
                None | Some("" | "message") => {
                    // Priming events carry an id and an empty data field: nothing to pass on.
                    if let Some(data) = event.data.filter(|d| !d.trim().is_empty()) {
                        self.accept(data, c).await;
                    }
                }
                Some(other) => tracing::debug!(server = %self.label, "ignored an SSE event of type {other:?}"),
            }
            if c.answered {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Starts the standalone GET stream (not for the legacy transport) and waits, briefly,
    /// until the server has answered the GET.
    pub(super) async fn open_get_stream(self: &Arc<Self>) {
        if self.state().legacy_endpoint.is_some() {
            return;
        }
        let (ready, opened) = oneshot::channel();
        let me = Arc::clone(self);
        self.spawn(me.listen(Some(ready)));
        let _ = tokio::time::timeout(Duration::from_secs(2), opened).await;
    }

    /// The standalone GET stream: server requests and notifications not tied to a request.
    pub(super) async fn listen(self: Arc<Self>, mut ready: Option<oneshot::Sender<()>>) {
        let mut cursor = Cursor::default();
        // Sends that failed in a row (the server unreachable), and reconnects in a row that
        // brought no message (a new event id alone is no progress).
        let mut failed = 0;
        let mut quiet = 0;
        // POSTs answered when the GETs began failing in a row.
        let mut answered_before = 0;
        loop {
            let authz = self.authorization().await;
            let sent = self.send(self.get(cursor.last_event_id.as_deref(), authz.as_ref())).await;
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            match sent {
                // The server offers no stream (405), or the session is gone (404): both fine.
                Ok(resp) if matches!(resp.status(), StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND) => return,
                Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                    failed = 0;
                    let mut c = Collector::default();
                    if let Err(SseError::TooLarge { limit }) = self.read_events(resp, &mut c, &mut cursor).await {
                        tracing::warn!(server = %self.label, "the GET stream sent an event over {limit} bytes; stopped listening");
                        return;
                    }
                    // A stream that carried messages was useful: start counting afresh.
                    quiet = if c.delivered > 0 { 0 } else { quiet + 1 };
                }
                // The token expired while the stream was open: renew it (without a browser,
                // the authorizer refuses) and reconnect, counted like a failure.
                Ok(resp)
                    if matches!(resp.status(), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                        && let Some(auth) = self.auth.clone() =>
                {
                    let challenge = challenge_of(&resp, authz.as_ref());
                    if let Err(e) = auth.challenged(&challenge).await {
                        tracing::info!(server = %self.label, "GET stream refused and no new token: {e}");
                        return;
                    }
                    quiet += 1;
                }
                Ok(resp) => {
                    tracing::debug!(server = %self.label, "GET stream refused: HTTP {}", resp.status());
                    return;
                }
                Err(e) => {
                    let answered = self.posts_answered.load(std::sync::atomic::Ordering::Relaxed);
                    if failed == 0 {
                        answered_before = answered;
                    }
                    failed += 1;
                    quiet += 1;
                    if !self.backoff.allows(failed) {
                        // POSTs answered meanwhile: the server is there, only this optional
                        // stream fails (a proxy that cuts long GETs). Calls go on without it.
                        if answered > answered_before {
                            tracing::warn!(server = %self.label, "the GET stream failed {failed} times while calls were answered; stopped listening: {e}");
                        } else {
                            let reason =
                                format!("the server at {} is unreachable ({failed} attempts): {e}", self.shown);
                            self.fatal(reason).await;
                        }
                        return;
                    }
                }
            }
            if !STREAM_RECONNECT.allows(quiet) {
                tracing::info!(server = %self.label, "the GET stream brought nothing in {quiet} reconnects; stopped listening");
                return;
            }
            tokio::time::sleep(self.reconnect_wait(quiet.saturating_sub(1), cursor.retry)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_retry_is_taken_once_then_the_backoff_floor_holds() {
        let ms = Duration::from_millis;
        // The first reconnect waits what the server asked (the conformance suite's sse-retry).
        assert_eq!(reconnect_wait(0, Some(ms(500)), false, 0.5), ms(500));
        assert_eq!(reconnect_wait(0, Some(ms(0)), false, 0.5), MIN_STREAM_RETRY);
        // Soon after another reconnect, or after a reconnect that brought nothing: the floor.
        let floor = STREAM_RECONNECT.delay(0, 0.5);
        assert_eq!(reconnect_wait(0, Some(ms(0)), true, 0.5), floor);
        assert_eq!(reconnect_wait(2, Some(ms(500)), false, 0.5), STREAM_RECONNECT.delay(2, 0.5));
        // retry: can lengthen, up to the cap; without it, the floor.
        assert_eq!(reconnect_wait(1, Some(ms(30_000)), true, 0.5), ms(30_000));
        assert_eq!(reconnect_wait(0, Some(Duration::from_secs(3600)), false, 0.5), STREAM_RECONNECT.max_delay);
        assert_eq!(reconnect_wait(0, None, false, 0.5), floor);
    }
}
