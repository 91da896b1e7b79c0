//! The 2024-11-05 HTTP+SSE transport: a GET opens the SSE stream, whose `endpoint` event says
//! where to POST; answers arrive on the stream.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use http::header::{ACCEPT, CONTENT_TYPE};
use mcp_client::{Inbound, MAX_AUTH_RETRIES};
use tokio::sync::oneshot;
use url::Url;

use super::clients::{content_type, is_event_stream};
use super::streamable::challenge_of;
use super::{Event, Shared};
use crate::sse::EventStream;

/// How long the legacy transport waits for its `endpoint` event.
pub(super) const ENDPOINT_WAIT: Duration = Duration::from_secs(15);

impl Shared {
    /// The 2024-11-05 transport: GET the SSE stream, wait for its `endpoint` event, keep
    /// reading the stream (answers arrive on it) in a task.
    pub(super) async fn open_legacy(self: &Arc<Self>) -> Result<(), String> {
        let mut auth_retries = 0;
        let resp = loop {
            let authz = self.authorization().await;
            let resp = self
                .send_retrying(|| {
                    self.http
                        .get(self.url.clone())
                        .headers(self.headers_with(authz.as_ref()))
                        .header(ACCEPT, "text/event-stream")
                })
                .await?;
            let status = resp.status();
            match &self.auth {
                Some(auth)
                    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                        && auth_retries < MAX_AUTH_RETRIES =>
                {
                    auth_retries += 1;
                    let challenge = challenge_of(&resp, authz.as_ref());
                    auth.challenged(&challenge)
                        .await
                        .map_err(|e| format!("GET {} answered HTTP {status}: {e}", self.shown))?;
                }
                _ => break resp,
            }
        };
        if !resp.status().is_success() || !is_event_stream(&resp) {
            return Err(format!(
                "GET {} answered HTTP {} ({:?})",
                self.shown,
                resp.status(),
                content_type(resp.headers().get(CONTENT_TYPE))
            ));
        }
        let (endpoint_tx, endpoint_rx) = oneshot::channel::<Result<Url, String>>();
        let me = Arc::clone(self);
        self.spawn(async move {
            let mut events = EventStream::new(resp.into_stream(), me.max_bytes);
            let mut endpoint_tx = Some(endpoint_tx);
            let reason = loop {
                match events.next().await {
                    None => break "the server closed the SSE stream".to_owned(),
                    Some(Err(e)) => break e.to_string(),
                    Some(Ok(event)) => match (event.event.as_deref(), event.data) {
                        (Some("endpoint"), Some(data)) => {
                            let url = me.url.join(data.trim()).map_err(|e| format!("bad endpoint {data:?}: {e}"));
                            // The endpoint must be on the server's own origin, or a server could
                            // send our headers (credentials) elsewhere.
                            let url = url.and_then(|u| {
                                if u.origin() == me.url.origin() {
                                    Ok(u)
                                } else {
                                    Err(format!(
                                        "the endpoint {} is on another origin than {}",
                                        mcp_safety::redact::url(u.as_str()),
                                        me.shown
                                    ))
                                }
                            });
                            if let Some(tx) = endpoint_tx.take() {
                                let _ = tx.send(url);
                            }
                        }
                        (None | Some("message"), Some(data)) if !data.trim().is_empty() => {
                            let _ = me.events.send(Event::Inbound(Inbound::Message(data))).await;
                        }
                        _ => {}
                    },
                }
            };
            if endpoint_tx.is_none() {
                me.fatal(reason).await;
            } else if let Some(tx) = endpoint_tx.take() {
                let _ = tx.send(Err(reason));
            }
        });
        let endpoint = tokio::time::timeout(ENDPOINT_WAIT, endpoint_rx)
            .await
            .map_err(|_| format!("no endpoint event within {ENDPOINT_WAIT:?}"))?
            .map_err(|_| "the SSE reader stopped".to_owned())??;
        let mut state = self.state();
        state.legacy_endpoint = Some(endpoint);
        state.session_id = None;
        Ok(())
    }
}
