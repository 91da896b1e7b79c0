//! The 2026-07-28 revision ("stateless era"): `server/discover` instead of `initialize`, the
//! per-request `_meta` envelope, `resultType`, input-required results answered by retrying the
//! request with `inputResponses`, and `subscriptions/listen`.
//!
//! Every request of this era carries who the client is and what it can do in
//! `params._meta` (servers must not remember it between requests); [`add_envelope`] puts it
//! there without disturbing other `_meta` keys (a progress token, say).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::types::{ClientCapabilities, Extra, Implementation, ServerCapabilities};

/// `_meta` key: the revision of this request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: who the client is.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: what the client can do, for this request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// Result `_meta` key: who the server is.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// `server/discover`.
pub const SERVER_DISCOVER: &str = "server/discover";
/// `subscriptions/listen`.
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
/// `notifications/subscriptions/acknowledged`.
pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// The request `_meta` envelope of the 2026-07-28 revision.
pub fn envelope(version: &str, client_info: &Implementation, capabilities: &ClientCapabilities) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(META_PROTOCOL_VERSION.to_owned(), Value::String(version.to_owned()));
    meta.insert(META_CLIENT_INFO.to_owned(), serde_json::to_value(client_info).unwrap_or(Value::Null));
    meta.insert(
        META_CLIENT_CAPABILITIES.to_owned(),
        serde_json::to_value(capabilities).unwrap_or_else(|_| Value::Object(Map::new())),
    );
    meta
}

/// Params with the envelope merged into their `_meta` (created when missing; keys already
/// there stay). Params that are not an object cannot carry it and are replaced by an object.
pub fn add_envelope(params: Option<Value>, envelope: &Map<String, Value>) -> Value {
    let mut params = match params {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Value::Object(meta) = meta {
        for (key, value) in envelope {
            meta.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    Value::Object(params)
}

/// The prefix of `_meta` keys the protocol reserves for itself (the envelope).
pub const RESERVED_META_PREFIX: &str = "io.modelcontextprotocol/";

/// `params` without the reserved `_meta` keys (a previous envelope must not linger when a
/// request is sent again: the session adds a fresh one). Other `_meta` keys stay.
pub fn strip_reserved_meta(params: &mut Map<String, Value>) {
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        meta.retain(|k, _| !k.starts_with(RESERVED_META_PREFIX));
    }
}

/// The params of a request sent again after an input-required result: the original params
/// with `inputResponses` (the answers, under the keys the server used), the server's
/// `requestState` when it sent one (removed otherwise), and no previous envelope.
/// Params that were not an object are replaced by one.
pub fn retry_params(
    original: Option<Value>,
    responses: Map<String, Value>,
    request_state: Option<String>,
) -> Map<String, Value> {
    let mut params = match original {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    params.insert("inputResponses".to_owned(), Value::Object(responses));
    match request_state {
        Some(state) => params.insert("requestState".to_owned(), Value::String(state)),
        None => params.remove("requestState"),
    };
    strip_reserved_meta(&mut params);
    params
}

/// The result of `server/discover`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// `complete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    /// The revisions the server speaks.
    pub supported_versions: Vec<String>,
    /// What the server supports.
    pub capabilities: ServerCapabilities,
    /// Usage hints (untrusted text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// How long the answer may be cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// `public` or `private`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<String>,
    /// Metadata (the server's identity is in it).
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl DiscoverResult {
    /// The server's identity, when it gave a well-formed one.
    pub fn server_info(&self) -> Option<Implementation> {
        let info = self.meta.as_ref()?.get(META_SERVER_INFO)?;
        serde_json::from_value(info.clone()).ok()
    }
}

/// What a result says it is (`resultType`; missing means complete, as older revisions send).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResultKind {
    /// The final result.
    Complete,
    /// The server needs input first: retry with `inputResponses`.
    InputRequired,
    /// A kind this crate does not know.
    Other(String),
}

/// Reads `resultType` of a raw result without decoding the rest.
pub fn result_kind(raw: &RawValue) -> ResultKind {
    // Most results come from older servers and have no resultType: skip parsing for them.
    if !raw.get().contains("\"resultType\"") {
        return ResultKind::Complete;
    }
    #[derive(Deserialize)]
    struct Probe {
        #[serde(rename = "resultType")]
        result_type: Option<String>,
    }
    match serde_json::from_str::<Probe>(raw.get()).ok().and_then(|p| p.result_type).as_deref() {
        None | Some("complete") => ResultKind::Complete,
        Some("input_required") => ResultKind::InputRequired,
        Some(other) => ResultKind::Other(other.to_owned()),
    }
}

/// One input the server asks for: a server-to-client request embedded in the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRequest {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// Its params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A result with `resultType: "input_required"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// `input_required`.
    pub result_type: String,
    /// The inputs, by key; the answers go back under the same keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<Map<String, Value>>,
    /// Opaque state to send back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `subscriptions/listen`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionsListenRequestParams {
    /// The notifications wanted (`toolsListChanged`, `promptsListChanged`,
    /// `resourcesListChanged`, `resourceSubscriptions`).
    pub notifications: Map<String, Value>,
    /// Metadata (the envelope).
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_envelope_joins_existing_meta_without_replacing_it() {
        let env = envelope("2026-07-28", &Implementation::new("c", "1"), &ClientCapabilities::default());
        let params = add_envelope(Some(json!({"name": "t", "_meta": {"progressToken": 3}})), &env);
        assert_eq!(
            params,
            json!({"name": "t", "_meta": {"progressToken": 3, META_PROTOCOL_VERSION: "2026-07-28",
                META_CLIENT_INFO: {"name": "c", "version": "1"}, META_CLIENT_CAPABILITIES: {}}})
        );
        assert_eq!(add_envelope(None, &env), json!({"_meta": Value::Object(env.clone())}));
        assert_eq!(add_envelope(Some(json!({"_meta": 5})), &env), json!({"_meta": Value::Object(env)}));
    }

    #[test]
    fn retried_params_carry_the_answers_and_state_but_no_old_envelope() {
        let original = json!({"name": "t", "requestState": "old", "inputResponses": {"stale": 1},
            "_meta": {"progressToken": 3, META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_INFO: {}}});
        let answers = Map::from_iter([("k".to_owned(), json!({"action": "accept"}))]);
        let params = retry_params(Some(original.clone()), answers.clone(), Some("new".into()));
        assert_eq!(
            Value::Object(params),
            json!({"name": "t", "requestState": "new", "inputResponses": {"k": {"action": "accept"}},
                "_meta": {"progressToken": 3}})
        );
        let params = retry_params(Some(original), answers, None);
        assert!(!params.contains_key("requestState"));
        assert_eq!(
            retry_params(Some(json!(5)), Map::new(), None),
            Map::from_iter([("inputResponses".to_owned(), json!({}))])
        );
    }

    #[test]
    fn result_kinds() {
        let kind = |s: &str| result_kind(&RawValue::from_string(s.to_owned()).unwrap());
        assert_eq!(kind(r#"{"content":[]}"#), ResultKind::Complete);
        assert_eq!(kind(r#"{"resultType":"complete"}"#), ResultKind::Complete);
        assert_eq!(kind(r#"{"resultType":"input_required"}"#), ResultKind::InputRequired);
        assert_eq!(kind(r#"{"resultType":"later"}"#), ResultKind::Other("later".into()));
        assert_eq!(kind(r#"{"text":"\"resultType\""}"#), ResultKind::Complete);
    }
}
