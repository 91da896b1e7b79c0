//! What a request may need before it is answered: input-required rounds (2026-07-28) and the
//! URL elicitations of a URL-elicitation-required error (2025-11-25), both put to the
//! [`ServerRequestHandler`](crate::ServerRequestHandler); and the pause of the connection's
//! deadlines while a person answers an elicitation.

use std::sync::Arc;
use std::time::Instant;

use mcp_protocol::stateless::{self, ResultKind};
use mcp_protocol::{
    ElicitAction, ElicitResult, ErrorObject, InputAsk, SessionError, error_codes, input_round, url_elicitations,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::engine::{Inner, deadline_after};
use super::{Client, ClientError, RequestOptions};
use crate::observe::{RequestStart, RequestWatch};

/// At most this many input-required rounds for one request, so a server cannot keep us in a loop.
pub const MAX_INPUT_ROUNDS: usize = 8;

pub use mcp_protocol::MAX_URL_ELICITATIONS;

/// A person is being asked (an elicitation) while this lives: the connection's deadlines stand
/// still, and when nobody is asked any more every pending request's deadline moves later by the
/// time the asking took.
pub(super) struct Asking<'a>(&'a Inner);

impl<'a> Asking<'a> {
    pub(super) fn start(inner: &'a Inner) -> Self {
        let mut asking = inner.asking.lock().unwrap_or_else(|p| p.into_inner());
        asking.0 += 1;
        asking.1.get_or_insert_with(Instant::now);
        Self(inner)
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        let inner = self.0;
        let paused = {
            let mut asking = inner.asking.lock().unwrap_or_else(|p| p.into_inner());
            asking.0 = asking.0.saturating_sub(1);
            if asking.0 > 0 {
                return;
            }
            asking.1.take().map(|since| since.elapsed())
        };
        let Some(paused) = paused else { return };
        let mut session = inner.session();
        for id in session.pending_where(|_| true) {
            if let Some(waiter) = session.pending_mut(&id) {
                waiter.deadline = deadline_after(waiter.deadline, paused);
                waiter.last_deadline = deadline_after(waiter.last_deadline, paused);
            }
        }
    }
}

impl Client {
    /// Send a request and wait for its raw result. An input-required result (2026-07-28) is
    /// answered through the [`ServerRequestHandler`](crate::ServerRequestHandler) and the request retried with
    /// `inputResponses`, up to [`MAX_INPUT_ROUNDS`] times of at most
    /// [`MAX_INPUT_ASKS`](mcp_protocol::MAX_INPUT_ASKS) asks each. A URL-elicitation-required error
    /// (2025-11-25) puts its URLs to the handler, and the request is retried once if every one
    /// was accepted.
    pub async fn request_raw<T: Serialize + ?Sized>(
        &self,
        method: &str,
        params: Option<&T>,
        options: RequestOptions,
    ) -> Result<Box<RawValue>, ClientError> {
        let Some(observer) = &self.inner.options.observer else {
            return self.request_rounds(method, params, options, None).await;
        };
        // Watched: the params as a value the watch is shown and may add to (`_meta`).
        let encode = |source| ClientError::Session(SessionError::Encode { method: method.to_owned(), source });
        let mut value = params.map(serde_json::to_value).transpose().map_err(encode)?.unwrap_or(Value::Null);
        let start = RequestStart {
            server: &self.inner.options.label,
            method,
            params: (!value.is_null()).then_some(&value),
            protocol_version: self.protocol_version(),
        };
        let watch = observer.start(&start);
        watch.inject(&mut value);
        let params = (!value.is_null()).then_some(&value);
        let result = self.request_rounds(method, params, options, Some(&*watch)).await;
        watch.end(result.as_deref());
        result
    }

    /// [`Client::request_raw`] after the observer's start: the request, its URL elicitations
    /// and its input-required rounds.
    async fn request_rounds<T: Serialize + ?Sized>(
        &self,
        method: &str,
        params: Option<&T>,
        options: RequestOptions,
        watch: Option<&dyn RequestWatch>,
    ) -> Result<Box<RawValue>, ClientError> {
        let raw = match self.request_once(method, params, &options, watch).await {
            Err(ClientError::Server { method, error }) if error.code == error_codes::URL_ELICITATION_REQUIRED => {
                if !self.visit_urls(&error).await {
                    return Err(ClientError::Server { method, error });
                }
                self.request_once(&method, params, &options, watch).await?
            }
            other => other?,
        };
        if stateless::result_kind(&raw) != ResultKind::InputRequired {
            return Ok(raw);
        }
        let input_error = |reason: String| ClientError::InputRequired { method: method.to_owned(), reason };
        let original = params
            .map(serde_json::to_value)
            .transpose()
            .map_err(|source| SessionError::Encode { method: method.to_owned(), source })?;
        let mut raw = raw;
        for _ in 0..MAX_INPUT_ROUNDS {
            let round = input_round(&raw).map_err(|e| input_error(e.to_string()))?;
            let mut responses = Map::new();
            for (key, ask) in round.asks {
                let answer = self.answer_input(ask).await.map_err(|e| input_error(format!("{key}: {e}")))?;
                responses.insert(key, answer);
            }
            let params = stateless::retry_params(original.clone(), responses, round.request_state);
            raw = self.request_once(method, Some(&params), &options, watch).await?;
            if stateless::result_kind(&raw) != ResultKind::InputRequired {
                return Ok(raw);
            }
        }
        Err(input_error(format!("the server asked for input more than {MAX_INPUT_ROUNDS} times")))
    }

    /// The URL elicitations of a URL-elicitation-required error, each put to the handler:
    /// whether there were some, all well-formed URL-mode params (at most
    /// [`MAX_URL_ELICITATIONS`]), and the user accepted every one.
    async fn visit_urls(&self, error: &ErrorObject) -> bool {
        let Some(asked) = url_elicitations(error) else { return false };
        let handler = Arc::clone(&self.inner.options.handler);
        for params in asked {
            match handler.elicit(params).await {
                Ok(ElicitResult { action: ElicitAction::Accept, .. }) => {}
                _ => return false,
            }
        }
        true
    }

    /// One input request, through the same handler as the handshake era's server requests.
    async fn answer_input(&self, ask: InputAsk) -> Result<Value, String> {
        let handler = Arc::clone(&self.inner.options.handler);
        let answer = match ask {
            InputAsk::Elicit(params) => handler.elicit(params).await.map(serde_json::to_value),
            InputAsk::CreateMessage(params) => handler.create_message(params).await.map(serde_json::to_value),
            InputAsk::ListRoots => handler.list_roots().await.map(serde_json::to_value),
            _ => return Err("it asks for a kind of input this client does not give".to_owned()),
        };
        answer.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
    }
}
