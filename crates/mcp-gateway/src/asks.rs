//! An upstream's own questions (`elicitation/create`, `sampling/createMessage`) sent while a
//! client's call runs, put to that client: the gateway's [`CallAsker`]s, one per call
//! ([`Backend::tools_for`](crate::Backend::tools_for) routes the upstream's requests to it).
//!
//! The asking itself is [`Session::ask`], as for approval forms (one mechanism): on the call's
//! own channel (its SSE stream, stdout), within the gateway's approval wait. What reaches the
//! client is cleaned first (a form's message without control or invisible characters and
//! capped, a form whose schema is not the specification's flat subset declined, the request's
//! `_meta` dropped) and bounded in size; so is the answer that goes back upstream.
//!
//! - A session client that declared the capability is asked.
//! - A session client that did not is declined as the host declines by default (elicitation:
//!   `decline`; sampling: an error saying so).
//! - A 2026-07-28 client cannot be asked in the middle of a call (its questions come back as
//!   `input_required`, which ends the call, while the upstream's call waits for its answer):
//!   the upstream's request is refused with an error saying so.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_protocol::elicitation::Form;
use mcp_protocol::{
    CreateMessageRequestParams, CreateMessageResult, ElicitAction, ElicitRequestParams, ElicitResult, ErrorObject,
    ProtocolVersion, methods,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::backend::CallAsker;
use crate::session::{Outbound, Session};

/// The error code of a refusal ("the user rejected the request", as the specification's
/// examples and the host's own declining handler use).
const REJECTED: i64 = -1;
/// Most characters of a form's message shown to the client.
const MAX_MESSAGE_CHARS: usize = 2_000;
/// Most bytes of an upstream's question, as sent on to the client, and of the client's answer.
pub(crate) const MAX_ASK_BYTES: usize = 1 << 20;

/// Asks the session client of one call.
#[derive(Debug)]
pub(crate) struct SessionAsker {
    session: Arc<Session>,
    out: Outbound,
    wait: Duration,
    key: String,
}

impl SessionAsker {
    /// The client of `session`, asked on `out` (the call's channel), waiting up to `wait`.
    pub(crate) fn new(session: &Arc<Session>, out: &Outbound, wait: Duration) -> Self {
        Self { key: session.scope(), session: Arc::clone(session), out: out.clone(), wait }
    }

    /// Sends `params` as `method` and reads the answer as `R`; every failure is an error the
    /// upstream reads.
    async fn ask<P: Serialize, R: DeserializeOwned>(&self, method: &str, params: &P) -> Result<R, ErrorObject> {
        let size = serde_json::to_vec(params).map_or(usize::MAX, |bytes| bytes.len());
        if size > MAX_ASK_BYTES {
            return Err(refused(format!(
                "the gateway does not forward a {method} of {size} bytes (at most {MAX_ASK_BYTES})"
            )));
        }
        let raw = self
            .session
            .ask(&self.out, method, params, self.wait)
            .await
            .map_err(|e| refused(format!("the gateway's client could not be asked: {e}")))?;
        if raw.get().len() > MAX_ASK_BYTES {
            return Err(refused(format!("the client's answer to {method} is over {MAX_ASK_BYTES} bytes")));
        }
        mcp_protocol::from_str_bounded(
            raw.get(),
            |dense| refused(format!("the client's answer to {method} is too dense to read: {dense}")),
            |e| {
                refused(format!(
                    "the client's answer to {method} is malformed: {}",
                    mcp_safety::text::one_line(&e.to_string(), 200)
                ))
            },
        )
    }
}

#[async_trait]
impl CallAsker for SessionAsker {
    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        if !self.session.can_elicit_form() {
            return Ok(declined());
        }
        match clean_form(params, self.session.protocol_version()) {
            Ok(form) => self.ask(methods::ELICITATION_CREATE, &form).await,
            Err(why) => {
                tracing::info!("an upstream's elicitation was declined: {why}");
                Ok(declined())
            }
        }
    }

    async fn create_message(&self, mut params: CreateMessageRequestParams) -> Result<CreateMessageResult, ErrorObject> {
        if !self.session.can_sample() {
            return Err(refused("the gateway's client did not declare sampling".to_owned()));
        }
        params.extra.remove("_meta");
        self.ask(methods::SAMPLING_CREATE_MESSAGE, &params).await
    }

    fn client_key(&self) -> &str {
        &self.key
    }
}

/// Refuses every question of an upstream, saying why: the client of a call that cannot be asked
/// in its middle (2026-07-28).
#[derive(Debug)]
pub(crate) struct StatelessAsker {
    key: String,
    elicitation: bool,
    sampling: bool,
}

impl StatelessAsker {
    /// The client `key`, which declared elicitation and sampling as said.
    pub(crate) fn new(key: String, elicitation: bool, sampling: bool) -> Self {
        Self { key, elicitation, sampling }
    }
}

/// Why a 2026-07-28 client is not asked.
const STATELESS: &str = "the gateway's client speaks protocol 2026-07-28, which cannot be asked in the middle of a \
                         call (its questions end the call as input_required), so the gateway does not forward it";

#[async_trait]
impl CallAsker for StatelessAsker {
    async fn elicit(&self, _params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        if !self.elicitation {
            return Ok(declined());
        }
        Err(refused(format!("elicitation/create: {STATELESS}")))
    }

    async fn create_message(&self, _params: CreateMessageRequestParams) -> Result<CreateMessageResult, ErrorObject> {
        if !self.sampling {
            return Err(refused("the gateway's client did not declare sampling".to_owned()));
        }
        Err(refused(format!("sampling/createMessage: {STATELESS}")))
    }

    fn client_key(&self) -> &str {
        &self.key
    }
}

/// The polite answer of a client that cannot be asked.
fn declined() -> ElicitResult {
    ElicitResult { action: ElicitAction::Decline, content: None, extra: Default::default() }
}

fn refused(why: String) -> ErrorObject {
    ErrorObject::new(REJECTED, why)
}

/// The upstream's form as the client gets it, or why it is not sent: only form mode (a URL
/// would send the person somewhere the gateway cannot vouch for), a schema within the
/// specification's subset and bounds, the message cleaned and capped, `mode` only for the
/// revisions that have it, nothing else of the upstream's.
pub(crate) fn clean_form(params: ElicitRequestParams, version: ProtocolVersion) -> Result<ElicitRequestParams, String> {
    if params.mode.as_deref().is_some_and(|mode| mode != "form") || params.url.is_some() {
        return Err("only form elicitations are forwarded".to_owned());
    }
    let schema = params.requested_schema.unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    Form::parse(&schema).map_err(|e| format!("its form cannot be shown: {e}"))?;
    Ok(ElicitRequestParams {
        mode: (version >= ProtocolVersion::V2025_11_25).then(|| "form".to_owned()),
        message: mcp_safety::text::sanitize(&params.message, MAX_MESSAGE_CHARS),
        requested_schema: Some(schema),
        url: None,
        elicitation_id: None,
        extra: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn params(value: serde_json::Value) -> ElicitRequestParams {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_form_is_cleaned_for_the_client() {
        let form = params(json!({"message": "Name?\u{1b}[2J\u{202e}", "requestedSchema": {"type": "object",
            "properties": {"name": {"type": "string", "default": "Ann"}}}, "_meta": {"x": 1}}));
        let old = serde_json::to_value(clean_form(form.clone(), ProtocolVersion::V2025_06_18).unwrap()).unwrap();
        assert_eq!(
            old,
            json!({"message": "Name?[2J", "requestedSchema": {"type": "object",
                "properties": {"name": {"type": "string", "default": "Ann"}}}})
        );
        let new = clean_form(form, ProtocolVersion::V2025_11_25).unwrap();
        assert_eq!(new.mode.as_deref(), Some("form"));
        let long = params(json!({"message": "x".repeat(5_000)}));
        assert_eq!(clean_form(long, ProtocolVersion::V2025_11_25).unwrap().message.chars().count(), MAX_MESSAGE_CHARS);
    }

    #[test]
    fn urls_and_unshowable_forms_are_not_sent() {
        let url = params(json!({"mode": "url", "message": "Go", "url": "https://example.com", "elicitationId": "e"}));
        assert!(clean_form(url, ProtocolVersion::V2025_11_25).is_err());
        let nested = params(json!({"message": "?", "requestedSchema": {"type": "object",
            "properties": {"a": {"type": "object", "properties": {}}}}}));
        assert!(clean_form(nested, ProtocolVersion::V2025_11_25).is_err());
    }
}
