//! What a request may need before it is answered, read and classified: the input requests of an
//! `input_required` result (2026-07-28), each one of the kinds the handshake era's server
//! requests have (elicitation, sampling, roots), and the URL elicitations of a
//! URL-elicitation-required error (2025-11-25). Pure: the client puts each to its handler.

use serde_json::Value;
use serde_json::value::RawValue;

use crate::jsonrpc::ErrorObject;
use crate::stateless::{InputRequest, InputRequiredResult};
use crate::types::{CreateMessageRequestParams, ElicitRequestParams, methods};

/// A URL-elicitation-required error listing more URLs than this is not put to the user.
pub const MAX_URL_ELICITATIONS: usize = 4;

/// An `input_required` round asking more than this is refused before anything is asked: each
/// ask may be a question to a person or a call to the model.
pub const MAX_INPUT_ASKS: usize = 16;

/// What one input request asks of the client.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputAsk {
    /// `elicitation/create`: ask the user.
    Elicit(ElicitRequestParams),
    /// `sampling/createMessage`: ask the model.
    CreateMessage(CreateMessageRequestParams),
    /// `roots/list`.
    ListRoots,
}

/// Why the input requests of a result could not be read; nothing is asked then.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The result is not an input-required result.
    #[error("malformed input request: {0}")]
    Malformed(serde_json::Error),
    /// The result packs more values than are read from one message.
    #[error("the input_required result is too dense to read: {0}")]
    TooDense(crate::TooDense),
    /// The round asks more than [`MAX_INPUT_ASKS`] at once.
    #[error("the input_required result asks for {count} inputs at once; at most {MAX_INPUT_ASKS} are answered")]
    TooMany {
        /// How many it asks.
        count: usize,
    },
    /// One input request is not `{method, params}`.
    #[error("input request {key:?} is malformed: {source}")]
    MalformedRequest {
        /// Its key.
        key: String,
        /// What did not parse.
        source: serde_json::Error,
    },
    /// One input request's params do not fit its method.
    #[error("{key}: bad {kind} params: {source}")]
    BadParams {
        /// Its key.
        key: String,
        /// `elicitation` or `sampling`.
        kind: &'static str,
        /// What did not parse.
        source: serde_json::Error,
    },
    /// One input request has a method a client is never asked for.
    #[error("{key}: unknown input request method {method:?}")]
    UnknownMethod {
        /// Its key.
        key: String,
        /// The method.
        method: String,
    },
}

/// One round of an `input_required` result: what is asked, by key (the answers go back under
/// the same keys, in `inputResponses`), and the state to send back unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRound {
    /// Each input request, classified, in the order the server listed them.
    pub asks: Vec<(String, InputAsk)>,
    /// The opaque `requestState`.
    pub request_state: Option<String>,
}

/// Reads every input request of an `input_required` result (see
/// [`stateless::result_kind`](crate::stateless::result_kind)). One that cannot be read fails the
/// round before anything is asked.
pub fn input_round(raw: &RawValue) -> Result<InputRound, InputError> {
    let result: InputRequiredResult = crate::from_str_bounded(raw.get(), InputError::TooDense, InputError::Malformed)?;
    let requests = result.input_requests.unwrap_or_default();
    if requests.len() > MAX_INPUT_ASKS {
        return Err(InputError::TooMany { count: requests.len() });
    }
    let asks = requests
        .into_iter()
        .map(|(key, request)| {
            let request: InputRequest = match serde_json::from_value(request) {
                Ok(request) => request,
                Err(source) => return Err(InputError::MalformedRequest { key, source }),
            };
            let ask = classify(&key, request)?;
            Ok((key, ask))
        })
        .collect::<Result<_, _>>()?;
    Ok(InputRound { asks, request_state: result.request_state })
}

fn classify(key: &str, request: InputRequest) -> Result<InputAsk, InputError> {
    let params = request.params.unwrap_or(Value::Null);
    let bad = |kind, source| InputError::BadParams { key: key.to_owned(), kind, source };
    match request.method.as_str() {
        methods::ELICITATION_CREATE => {
            serde_json::from_value(params).map(InputAsk::Elicit).map_err(|e| bad("elicitation", e))
        }
        methods::SAMPLING_CREATE_MESSAGE => {
            serde_json::from_value(params).map(InputAsk::CreateMessage).map_err(|e| bad("sampling", e))
        }
        methods::ROOTS_LIST => Ok(InputAsk::ListRoots),
        _ => Err(InputError::UnknownMethod { key: key.to_owned(), method: request.method }),
    }
}

/// The URL elicitations a URL-elicitation-required error (`-32042`) asks for, when the error
/// lists between one and [`MAX_URL_ELICITATIONS`] of them and every one is a well-formed
/// URL-mode elicitation; `None` otherwise (nothing is to be asked, and the error stands).
pub fn url_elicitations(error: &ErrorObject) -> Option<Vec<ElicitRequestParams>> {
    let listed = error.data.as_ref()?.get("elicitations")?.as_array()?;
    if listed.is_empty() || listed.len() > MAX_URL_ELICITATIONS {
        return None;
    }
    let asked: Vec<ElicitRequestParams> =
        listed.iter().map(|e| serde_json::from_value(e.clone())).collect::<Result<_, _>>().ok()?;
    asked.iter().all(|p| p.mode.as_deref() == Some("url") && p.url.is_some()).then_some(asked)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::jsonrpc::error_codes;

    fn round(result: Value) -> Result<InputRound, InputError> {
        input_round(&RawValue::from_string(result.to_string()).unwrap())
    }

    /// A result packed with values (its unknown members kept as values) is refused unread.
    #[test]
    fn a_dense_input_required_result_is_refused() {
        let text =
            format!(r#"{{"resultType":"input_required","inputRequests":{{}},"x":[{}0]}}"#, "[[0]],".repeat(1 << 20));
        let refused = input_round(&RawValue::from_string(text).unwrap()).unwrap_err();
        assert!(matches!(refused, InputError::TooDense(_)), "{refused}");
    }

    #[test]
    fn every_kind_of_input_request_is_classified_in_order() {
        let got = round(json!({"resultType": "input_required", "requestState": "s1", "inputRequests": {
            "who": {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema":
                {"type": "object", "properties": {"name": {"type": "string"}}}}},
            "think": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}},
            "where": {"method": "roots/list"}}}))
        .unwrap();
        assert_eq!(got.request_state.as_deref(), Some("s1"));
        let keys: Vec<&str> = got.asks.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["who", "think", "where"]);
        assert!(matches!(&got.asks[0].1, InputAsk::Elicit(p) if p.message == "Name?"));
        assert!(matches!(&got.asks[1].1, InputAsk::CreateMessage(p) if p.max_tokens == 5));
        assert_eq!(got.asks[2].1, InputAsk::ListRoots);
        assert!(round(json!({"resultType": "input_required"})).unwrap().asks.is_empty());
    }

    /// Each ask may be a person's question or a model call: a round of thousands is refused
    /// before any is asked.
    #[test]
    fn a_round_asking_too_much_at_once_is_refused() {
        let asks = |n: usize| {
            let requests: serde_json::Map<String, Value> =
                (0..n).map(|i| (format!("k{i}"), json!({"method": "roots/list"}))).collect();
            round(json!({"resultType": "input_required", "inputRequests": requests}))
        };
        assert_eq!(asks(MAX_INPUT_ASKS).unwrap().asks.len(), MAX_INPUT_ASKS);
        let refused = asks(MAX_INPUT_ASKS + 1).unwrap_err();
        assert!(matches!(refused, InputError::TooMany { count } if count == MAX_INPUT_ASKS + 1), "{refused}");
        assert!(refused.to_string().contains("asks for 17 inputs at once"), "{refused}");
    }

    #[test]
    fn a_round_that_cannot_be_read_says_which_request_and_why() {
        let text = |result: Value| round(result).unwrap_err().to_string();
        assert!(text(json!({"inputRequests": 5})).starts_with("malformed input request"));
        let unknown = text(json!({"resultType": "input_required", "inputRequests": {"k": {"method": "tools/call"}}}));
        assert_eq!(unknown, r#"k: unknown input request method "tools/call""#);
        let bad = text(json!({"resultType": "input_required",
            "inputRequests": {"k": {"method": "sampling/createMessage", "params": {"maxTokens": "x"}}}}));
        assert!(bad.starts_with("k: bad sampling params"), "{bad}");
        let malformed = text(json!({"resultType": "input_required", "inputRequests": {"k": 7}}));
        assert!(malformed.starts_with(r#"input request "k" is malformed"#), "{malformed}");
    }

    #[test]
    fn url_elicitations_are_taken_only_when_all_are_well_formed_urls_within_the_limit() {
        let error = |elicitations: Value| {
            let mut e = ErrorObject::new(error_codes::URL_ELICITATION_REQUIRED, "go there");
            e.data = Some(json!({"elicitations": elicitations}));
            e
        };
        let url = |n: usize| {
            json!({"mode": "url", "message": "Sign in", "url": format!("https://x/{n}"),
                                     "elicitationId": format!("e{n}")})
        };
        let one = url_elicitations(&error(json!([url(1)]))).unwrap();
        assert_eq!(one[0].url.as_deref(), Some("https://x/1"));
        let most: Vec<Value> = (0..MAX_URL_ELICITATIONS).map(url).collect();
        assert_eq!(url_elicitations(&error(json!(most))).unwrap().len(), MAX_URL_ELICITATIONS);
        let too_many: Vec<Value> = (0..=MAX_URL_ELICITATIONS).map(url).collect();
        assert!(url_elicitations(&error(json!(too_many))).is_none());
        assert!(url_elicitations(&error(json!([]))).is_none());
        assert!(url_elicitations(&error(json!([url(1), {"mode": "form", "message": "m"}]))).is_none());
        assert!(url_elicitations(&error(json!([{"mode": "url", "message": "no url"}]))).is_none());
        assert!(url_elicitations(&ErrorObject::new(error_codes::URL_ELICITATION_REQUIRED, "none")).is_none());
    }
}
