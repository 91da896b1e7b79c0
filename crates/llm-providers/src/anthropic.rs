//! The Anthropic Messages API (`POST {base}/v1/messages`, streamed).

use std::collections::BTreeMap;

use agent_loop::{Block, LanguageModel, ModelError, ModelRequest, ModelResponse, Role, StopReason, TextStream, Usage};
use async_trait::async_trait;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::{Value, json};

use crate::Options;
use crate::body::{MessageCache, ToolsCache, check_model};
use crate::http::{
    ApiKey, Decoder, Endpoint, MAX_ANSWER_PARTS, MAX_QUOTED_CHARS, ReadError, Step, Wire, default_client, join_base,
    json_error_message, lookup_nonempty, malformed, parse_json, snippet,
};

/// The adapter's name, in [`Block::Provider`] blocks it keeps.
const PROVIDER: &str = "anthropic";

/// Whether a content block of this type is a server-side tool's call or result, which the
/// conversation must carry back unchanged (the API's tool search refers to them).
fn is_server_tool_block(kind: &str) -> bool {
    kind == "server_tool_use" || kind.ends_with("_tool_result")
}

/// The environment variable holding the API key.
pub(crate) const API_KEY_VARIABLE: &str = "ANTHROPIC_API_KEY";
/// The environment variable holding the base URL (without `/v1`, as the official SDKs read it).
pub(crate) const BASE_URL_VARIABLE: &str = "ANTHROPIC_BASE_URL";
/// The base URL used when [`BASE_URL_VARIABLE`] is not set.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent.
pub(crate) const API_VERSION: &str = "2023-06-01";
/// The `anthropic-beta` value sent with requests that use the API's tool search.
pub(crate) const TOOL_SEARCH_BETA: &str = "advanced-tool-use-2025-11-20";
/// The API's tool search tool (BM25 over the deferred tools' names, descriptions and
/// parameters), added to requests with deferred tools.
pub(crate) const TOOL_SEARCH_TYPE: &str = "tool_search_tool_bm25_20251119";
/// Its name.
pub(crate) const TOOL_SEARCH_NAME: &str = "tool_search_tool_bm25";

/// A Claude model behind the Anthropic Messages API (or a compatible gateway).
///
/// Requests go to `{base}/v1/messages` with `stream: true`; a gateway that answers with a whole
/// JSON message instead is understood too.
#[derive(Clone)]
pub struct AnthropicModel {
    endpoint: Endpoint,
    model: String,
    messages: MessageCache,
    tools: ToolsCache,
}

impl std::fmt::Debug for AnthropicModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicModel")
            .field("url", &self.endpoint.url.as_str())
            .field("model", &self.model)
            .field("options", &self.endpoint.options)
            .finish_non_exhaustive()
    }
}

impl AnthropicModel {
    /// Reads `ANTHROPIC_API_KEY` (required) and `ANTHROPIC_BASE_URL` (optional, default
    /// `https://api.anthropic.com`, without `/v1`). `model` is used when a request names none.
    ///
    /// # Errors
    ///
    /// [`ModelError::Configuration`] when the key is missing or the base URL is not an http(s)
    /// URL.
    pub fn from_env(model: &str) -> Result<Self, ModelError> {
        Self::from_lookup(model, |name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) over the HTTP client given instead of a new
    /// [`default_client`]: a process that shares one client (its connection pool, and the
    /// system's certificates loaded once) hands it here. It should follow no redirects, as
    /// [`default_client`] does not.
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_env_using(model: &str, client: reqwest::Client) -> Result<Self, ModelError> {
        Self::from_lookup_using(model, |name| std::env::var(name).ok(), Some(client))
    }

    /// [`from_env`](Self::from_env) with the variables read through `lookup` (tests, config files).
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_lookup(model: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        Self::from_lookup_using(model, lookup, None)
    }

    fn from_lookup_using(
        model: &str,
        lookup: impl Fn(&str) -> Option<String>,
        client: Option<reqwest::Client>,
    ) -> Result<Self, ModelError> {
        let Some(key) = lookup_nonempty(&lookup, API_KEY_VARIABLE) else {
            return Err(ModelError::Configuration(format!(
                "no Anthropic API key: set {API_KEY_VARIABLE} (and {BASE_URL_VARIABLE} for a gateway)"
            )));
        };
        let base = lookup_nonempty(&lookup, BASE_URL_VARIABLE).unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        if base.trim_end_matches('/').ends_with("/v1") {
            tracing::warn!(
                "{BASE_URL_VARIABLE} ends in /v1; the Anthropic SDKs expect the base without it and requests go to {base}/v1/messages"
            );
        }
        let client = match client {
            Some(client) => client,
            None => default_client()?,
        };
        Ok(Self::new(&base, &key, client)?.with_model(model))
    }

    /// An adapter for `base_url` (without `/v1`) with an explicit key and HTTP client. The model
    /// name is empty: set it with [`with_model`](Self::with_model) or in each request.
    ///
    /// # Errors
    ///
    /// [`ModelError::Configuration`] for a base URL that is not http(s) or a key that cannot be
    /// an HTTP header.
    pub fn new(base_url: &str, api_key: &str, client: reqwest::Client) -> Result<Self, ModelError> {
        let url = join_base(base_url, "/v1/messages", BASE_URL_VARIABLE)?;
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static("x-api-key"), ApiKey::new(api_key.to_owned()).header("")?);
        headers.insert(HeaderName::from_static("anthropic-version"), HeaderValue::from_static(API_VERSION));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let endpoint = Endpoint { client, url, headers, options: Options::default(), provider: "anthropic" };
        Ok(Self {
            endpoint,
            model: String::new(),
            messages: MessageCache::new(wire_messages),
            tools: ToolsCache::default(),
        })
    }

    /// The model used when a request's `model` is empty.
    #[must_use]
    pub fn with_model(mut self, model: &str) -> Self {
        model.clone_into(&mut self.model);
        self
    }

    /// Replaces the retry, timeout and size options.
    #[must_use]
    pub fn with_options(mut self, options: Options) -> Self {
        self.endpoint.options = options;
        self
    }

    /// The URL requests are sent to.
    pub fn url(&self) -> &str {
        self.endpoint.url.as_str()
    }

    /// The model used when a request names none.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The options in force.
    pub fn options(&self) -> &Options {
        &self.endpoint.options
    }

    /// The JSON body sent for `request`.
    ///
    /// Tools marked [`defer_loading`](agent_loop::ToolSpec::defer_loading) (the agent's
    /// `tool_search = "native"`) are sent with `"defer_loading": true`, followed by the API's
    /// own search tool, so the model finds them through the API; such a request also carries
    /// the `anthropic-beta` header the feature needs. The API's search blocks in the answer
    /// (`server_tool_use`, `tool_search_tool_result`) are kept as [`Block::Provider`] and sent
    /// back unchanged with the conversation.
    fn body(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        check_model(&request.model, &self.model)?;
        let model = if request.model.is_empty() { &self.model } else { &request.model };
        let mut body = self.messages.body();
        body.field("model", model)?;
        body.field("max_tokens", &request.max_tokens)?;
        if !request.system.is_empty() {
            body.field("system", &request.system)?;
        }
        body.messages("messages", &[], &request.messages, &self.messages)?;
        if !request.tools.is_empty() {
            self.tools.write(&mut body, "tools", &request.tools, |tools| {
                let mut wire: Vec<WireTool<'_>> = tools
                    .iter()
                    .map(|t| WireTool::Tool {
                        name: &t.name,
                        description: &t.description,
                        input_schema: &t.input_schema,
                        defer_loading: t.defer_loading,
                    })
                    .collect();
                if defers(tools) {
                    wire.push(WireTool::Search { kind: TOOL_SEARCH_TYPE, name: TOOL_SEARCH_NAME });
                }
                serde_json::to_vec(&wire)
            })?;
        }
        body.field("stream", &true)?;
        Ok(self.messages.finish(body))
    }
}

/// Whether some of `tools` wait behind the API's tool search.
fn defers(tools: &[agent_loop::ToolSpec]) -> bool {
    tools.iter().any(|t| t.defer_loading)
}

/// One message, as the one element of the body's `messages` it becomes; empty text blocks are
/// left out (the API refuses them). Written straight from the blocks, with no `Value` built.
fn wire_messages(message: &agent_loop::Message, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let role = match message.role {
        Role::Assistant => "assistant",
        // The API has two roles; whatever is not the model's speaks to it.
        _ => "user",
    };
    let content: Vec<WireBlock<'_>> = message
        .content
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } if text.is_empty() => None,
            Block::Text { text } => Some(WireBlock::Typed(TypedBlock::Text { text })),
            Block::ToolUse { id, name, input } => {
                // The API takes an object only: input that was not one (text the model wrote
                // that was not JSON, refused by the loop's check) goes back as an empty one.
                let input = if input.is_object() { input } else { &EMPTY_INPUT };
                Some(WireBlock::Typed(TypedBlock::ToolUse { id, name, input }))
            }
            Block::ToolResult { tool_use_id, content, is_error } => {
                Some(WireBlock::Typed(TypedBlock::ToolResult { tool_use_id, content, is_error: *is_error }))
            }
            Block::Provider { provider, block } if provider == PROVIDER => Some(WireBlock::Provider(block)),
            // Another provider's blocks, and kinds this adapter does not know, are left out.
            _ => None,
        })
        .collect();
    serde_json::to_writer(out, &WireMessage { role, content })
}

/// A message of the body (fields in the order the API's documentation shows them).
#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<WireBlock<'a>>,
}

/// A content block: one of the port's, or a provider block sent back as it came.
#[derive(Serialize)]
#[serde(untagged)]
enum WireBlock<'a> {
    Typed(TypedBlock<'a>),
    Provider(&'a Value),
}

/// A tool call's input as sent back when the model's was not an object.
static EMPTY_INPUT: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({}));

/// The port's blocks, `type` first.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum TypedBlock<'a> {
    Text { text: &'a str },
    ToolUse { id: &'a str, name: &'a str, input: &'a Value },
    ToolResult { tool_use_id: &'a str, content: &'a str, is_error: bool },
}

/// A tool of the body: one of the request's, or the API's tool search.
#[derive(Serialize)]
#[serde(untagged)]
enum WireTool<'a> {
    Tool {
        name: &'a str,
        description: &'a str,
        input_schema: &'a Value,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        defer_loading: bool,
    },
    Search {
        #[serde(rename = "type")]
        kind: &'static str,
        name: &'static str,
    },
}

#[async_trait]
impl LanguageModel for AnthropicModel {
    fn name(&self) -> &str {
        "anthropic"
    }

    async fn complete(&self, request: &ModelRequest, stream: &dyn TextStream) -> Result<ModelResponse, ModelError> {
        let body = self.body(request)?;
        if defers(&request.tools) {
            let mut endpoint = self.endpoint.clone();
            endpoint
                .headers
                .insert(HeaderName::from_static("anthropic-beta"), HeaderValue::from_static(TOOL_SEARCH_BETA));
            return endpoint.call(&AnthropicWire, body, stream).await;
        }
        self.endpoint.call(&AnthropicWire, body, stream).await
    }
}

struct AnthropicWire;

impl Wire for AnthropicWire {
    type Decoder = AnthropicDecoder;

    fn decoder(&self) -> AnthropicDecoder {
        AnthropicDecoder::default()
    }

    fn decode_json(&self, body: &[u8], sink: &dyn TextStream) -> Result<ModelResponse, ReadError> {
        let text = std::str::from_utf8(body).map_err(|_| malformed("the JSON answer is not UTF-8"))?;
        let value: Value = parse_json(text, "the JSON answer is not valid JSON")?;
        if value.get("type").and_then(Value::as_str) == Some("error") {
            return Err(provider_error(&value));
        }
        let content = value
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed(format!("the JSON answer has no content array: {}", snippet(text, 200))))?;
        if content.len() as u64 > MAX_ANSWER_PARTS {
            return Err(malformed(format!("an answer of more than {MAX_ANSWER_PARTS} content blocks")));
        }
        let mut blocks = Vec::new();
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let text = str_field(block, "text", "a text block")?;
                    if !text.is_empty() {
                        sink.text_delta(text);
                        blocks.push(Block::text(text));
                    }
                }
                Some("tool_use") => blocks.push(Block::ToolUse {
                    id: str_field(block, "id", "a tool_use block")?.to_owned(),
                    name: str_field(block, "name", "a tool_use block")?.to_owned(),
                    input: block.get("input").cloned().unwrap_or_else(|| json!({})),
                }),
                Some(kind) if is_server_tool_block(kind) => {
                    blocks.push(Block::Provider { provider: PROVIDER.to_owned(), block: block.clone() });
                }
                // Thinking blocks are not part of the port.
                _ => {}
            }
        }
        let reason = value
            .get("stop_reason")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("the JSON answer has no stop_reason"))?;
        let usage = value.get("usage").cloned().unwrap_or(Value::Null);
        Ok(ModelResponse {
            content: blocks,
            stop_reason: stop_reason(reason),
            usage: Usage {
                input_tokens: prompt_tokens(&usage).unwrap_or(0),
                output_tokens: u64_field(&usage, "output_tokens").unwrap_or(0),
            },
        })
    }
}

/// Maps the API's stop reasons.
fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

/// An `{"type":"error","error":{...}}` object (a stream `error` event or a JSON answer).
/// Overloaded, rate-limit and API errors are transient; the documented client errors are
/// rejections with the HTTP status the API uses for them.
fn provider_error(value: &Value) -> ReadError {
    let kind = value.pointer("/error/type").and_then(Value::as_str).unwrap_or("");
    let message = json_error_message(value)
        .unwrap_or_else(|| format!("error event without a message: {}", snippet(&value.to_string(), MAX_QUOTED_CHARS)));
    let status = match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        _ => return ReadError::Retryable(format!("error event: {message}")),
    };
    ReadError::Model(ModelError::Rejected { status, message })
}

fn str_field<'a>(value: &'a Value, key: &str, what: &str) -> Result<&'a str, ReadError> {
    value.get(key).and_then(Value::as_str).ok_or_else(|| malformed(format!("{what} has no string {key:?}: {value}")))
}

fn u64_field(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// All prompt tokens: uncached input plus cache writes and reads, when `input_tokens` is there.
fn prompt_tokens(usage: &Value) -> Option<u64> {
    let input = u64_field(usage, "input_tokens")?;
    let cached = ["cache_creation_input_tokens", "cache_read_input_tokens"]
        .iter()
        .filter_map(|k| u64_field(usage, k))
        .fold(0u64, u64::saturating_add);
    Some(input.saturating_add(cached))
}

enum Slot {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
    },
    /// A server tool's call or result, kept whole; a call's input arrives as JSON pieces.
    Server {
        block: Value,
        json: String,
    },
    /// A block type the port has no place for (thinking).
    Other,
}

#[derive(Default)]
struct AnthropicDecoder {
    started: bool,
    blocks: BTreeMap<u64, Slot>,
    stop_reason: Option<String>,
    usage: Usage,
}

fn index(value: &Value, event: &str) -> Result<u64, ReadError> {
    value.get("index").and_then(Value::as_u64).ok_or_else(|| malformed(format!("{event} without an index")))
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, name: Option<&str>, data: &str, sink: &dyn TextStream) -> Result<Step, ReadError> {
        let value: Value = parse_json(data, "an event is not valid JSON")?;
        let kind = value.get("type").and_then(Value::as_str).or(name).unwrap_or("");
        if !self.started && !matches!(kind, "message_start" | "ping" | "error") {
            return Err(malformed(format!("the stream starts with {kind:?} instead of message_start")));
        }
        match kind {
            "message_start" => {
                if self.started {
                    return Err(malformed("a second message_start"));
                }
                self.started = true;
                if let Some(input) = value.pointer("/message/usage").and_then(prompt_tokens) {
                    self.usage.input_tokens = input;
                }
                if let Some(output) = value.pointer("/message/usage").and_then(|u| u64_field(u, "output_tokens")) {
                    self.usage.output_tokens = output;
                }
            }
            "content_block_start" => {
                let i = index(&value, kind)?;
                if i >= MAX_ANSWER_PARTS {
                    return Err(malformed(format!("an answer of more than {MAX_ANSWER_PARTS} content blocks")));
                }
                let block =
                    value.get("content_block").ok_or_else(|| malformed("content_block_start without a block"))?;
                let slot = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                        sink.text_delta(text);
                        Slot::Text(text.to_owned())
                    }
                    Some("tool_use") => Slot::Tool {
                        id: str_field(block, "id", "a tool_use block")?.to_owned(),
                        name: str_field(block, "name", "a tool_use block")?.to_owned(),
                        json: String::new(),
                    },
                    Some(kind) if is_server_tool_block(kind) => {
                        Slot::Server { block: block.clone(), json: String::new() }
                    }
                    _ => Slot::Other,
                };
                if self.blocks.insert(i, slot).is_some() {
                    return Err(malformed(format!("content block {i} started twice")));
                }
            }
            "content_block_delta" => {
                let i = index(&value, kind)?;
                let delta = value.get("delta").ok_or_else(|| malformed("content_block_delta without a delta"))?;
                let slot = self
                    .blocks
                    .get_mut(&i)
                    .ok_or_else(|| malformed(format!("a delta for block {i}, never started")))?;
                match (delta.get("type").and_then(Value::as_str), slot) {
                    (Some("text_delta"), Slot::Text(text)) => {
                        let piece = str_field(delta, "text", "a text_delta")?;
                        sink.text_delta(piece);
                        text.push_str(piece);
                    }
                    (Some("input_json_delta"), Slot::Tool { json, .. } | Slot::Server { json, .. }) => {
                        json.push_str(str_field(delta, "partial_json", "an input_json_delta")?);
                    }
                    (Some(t @ ("text_delta" | "input_json_delta")), _) => {
                        return Err(malformed(format!("a {t} for block {i}, which is of another type")));
                    }
                    // Citations, thinking and signature deltas have no place in the port.
                    _ => {}
                }
            }
            "content_block_stop" => {
                let i = index(&value, kind)?;
                if !self.blocks.contains_key(&i) {
                    return Err(malformed(format!("content_block_stop for block {i}, never started")));
                }
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = value.get("usage") {
                    if let Some(output) = u64_field(usage, "output_tokens") {
                        self.usage.output_tokens = output;
                    }
                    if let Some(input) = prompt_tokens(usage).filter(|n| *n > 0) {
                        self.usage.input_tokens = input;
                    }
                }
            }
            "message_stop" => return Ok(Step::Done),
            "ping" => {}
            "error" => return Err(provider_error(&value)),
            // Anthropic's versioning policy: new event types may appear; skip them.
            other => tracing::debug!(event = other, "skipping an unknown Anthropic stream event"),
        }
        Ok(Step::Continue)
    }

    fn finish(self, completed: bool) -> Result<ModelResponse, ReadError> {
        if !completed {
            return Err(malformed("the stream ended before message_stop (the answer is truncated)"));
        }
        let reason = self.stop_reason.ok_or_else(|| malformed("message_stop came without a stop_reason"))?;
        let mut content = Vec::new();
        for (i, slot) in self.blocks {
            match slot {
                Slot::Text(text) if text.is_empty() => {}
                Slot::Text(text) => content.push(Block::Text { text }),
                Slot::Tool { id, name, json } => {
                    // Input that is not JSON (cut short at max_tokens, or simply wrong) is
                    // passed on as a string holding the model's text, as the OpenAI adapter
                    // does: the loop's schema check tells the model, and the turn goes on.
                    let input = if json.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&json).unwrap_or_else(|e| {
                            tracing::warn!(call = i, "the input of a tool call is not valid JSON: {e}");
                            Value::String(json)
                        })
                    };
                    content.push(Block::ToolUse { id, name, input });
                }
                Slot::Server { mut block, json } => {
                    if !json.trim().is_empty() {
                        block["input"] =
                            parse_json(&json, &format!("the input of server tool call {i} is not valid JSON"))?;
                    }
                    content.push(Block::Provider { provider: PROVIDER.to_owned(), block });
                }
                Slot::Other => {}
            }
        }
        Ok(ModelResponse { content, stop_reason: stop_reason(&reason), usage: self.usage })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use agent_loop::NoStream;

    fn decode(events: &[&str]) -> Result<ModelResponse, ReadError> {
        let mut d = AnthropicDecoder::default();
        for e in events {
            if d.event(None, e, &NoStream)? == Step::Done {
                return d.finish(true);
            }
        }
        d.finish(false)
    }

    /// What `message` becomes in the body, read back.
    fn message(message: &agent_loop::Message) -> Value {
        let mut out = Vec::new();
        wire_messages(message, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    /// The body's message as `Value`s, as it was built before the typed writer: the reference
    /// for the bytes on the wire.
    fn reference(message: &agent_loop::Message) -> Value {
        let role = match message.role {
            Role::Assistant => "assistant",
            _ => "user",
        };
        let content: Vec<Value> = message
            .content
            .iter()
            .filter_map(|block| match block {
                Block::Text { text } if text.is_empty() => None,
                Block::Text { text } => Some(json!({"type": "text", "text": text})),
                Block::ToolUse { id, name, input } => {
                    let input = if input.is_object() { input.clone() } else { json!({}) };
                    Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
                }
                Block::ToolResult { tool_use_id, content, is_error } => Some(
                    json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error}),
                ),
                Block::Provider { provider, block } if provider == PROVIDER => Some(block.clone()),
                _ => None,
            })
            .collect();
        json!({"role": role, "content": content})
    }

    /// Every kind of block, written straight from the blocks, gives the bytes of the `Value`s
    /// serialized.
    #[test]
    fn messages_are_written_as_their_values_serialized() {
        let blocks = vec![
            Block::text(""),
            Block::text("a \"quoted\"\n\u{202e} é"),
            Block::ToolUse { id: "c1".into(), name: "t".into(), input: json!({"z": [1, -0.0, 2.5e300], "a": null}) },
            Block::ToolUse { id: "c2".into(), name: "t".into(), input: json!("not an object") },
            Block::ToolResult { tool_use_id: "c1".into(), content: "Error: no".into(), is_error: true },
            Block::ToolResult { tool_use_id: "c2".into(), content: String::new(), is_error: false },
            Block::Provider { provider: PROVIDER.into(), block: json!({"type": "server_tool_use", "b": 1, "a": 2}) },
            Block::Provider { provider: "openai".into(), block: json!({"type": "x"}) },
        ];
        for role in [Role::User, Role::Assistant] {
            for message in [
                agent_loop::Message { role, content: blocks.clone() },
                agent_loop::Message { role, content: vec![] },
                agent_loop::Message { role, content: blocks[1..2].to_vec() },
            ] {
                let mut out = Vec::new();
                wire_messages(&message, &mut out).unwrap();
                assert_eq!(String::from_utf8(out).unwrap(), reference(&message).to_string());
            }
        }
    }

    fn malformed_message(r: Result<ModelResponse, ReadError>) -> String {
        match r {
            Err(ReadError::Model(ModelError::Malformed(m))) => m,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    const START: &str = r#"{"type":"message_start","message":{"usage":{"input_tokens":3}}}"#;

    #[test]
    fn structural_errors_are_malformed() {
        let m = malformed_message(decode(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ]));
        assert!(m.contains("message_start"), "{m}");
        let m = malformed_message(decode(&[
            START,
            r#"{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}"#,
        ]));
        assert!(m.contains("never started"), "{m}");
        let m = malformed_message(decode(&[
            START,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}"#,
        ]));
        assert!(m.contains("another type"), "{m}");
        let m = malformed_message(decode(&[
            START,
            r#"{"type":"content_block_start","index":4096,"content_block":{"type":"text","text":""}}"#,
        ]));
        assert!(m.contains("more than 4096 content blocks"), "{m}");
        let m = malformed_message(decode(&[START, r#"{"type":"message_stop"}"#]));
        assert!(m.contains("stop_reason"), "{m}");
        let m = malformed_message(decode(&[START, "{not json"]));
        assert!(m.contains("not valid JSON"), "{m}");
        let m = malformed_message(decode(&[START, r#"{"type":"content_block_start","index":"zero"}"#]));
        assert!(m.contains("index"), "{m}");
    }

    /// A tool call whose input is not JSON (cut short at `max_tokens`) does not fail the answer:
    /// the input is the model's text as a string, which the loop's schema check refuses (the
    /// model is told, the turn goes on), and it goes back to the API as an empty object.
    #[test]
    fn a_tool_input_that_is_not_json_is_passed_on_as_text() {
        let r = decode(&[
            START,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":1}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .unwrap();
        assert_eq!(r.content, vec![Block::ToolUse { id: "t".into(), name: "n".into(), input: json!("{\"a\":") }]);
        let mut out = Vec::new();
        wire_messages(&agent_loop::Message { role: Role::Assistant, content: r.content }, &mut out).unwrap();
        let sent: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(sent["content"][0]["input"], json!({}));
    }

    /// With the API's tool search, its call and result come back in the answer and must go
    /// back with the conversation unchanged, the call's input put together from its pieces.
    #[test]
    fn server_tool_search_blocks_are_kept_and_sent_back() {
        let result = json!({"type":"tool_search_tool_result","tool_use_id":"srv_1","content":{"type":"tool_search_tool_search_result","tool_references":[{"type":"tool_reference","tool_name":"get_weather"}]}});
        let r = decode(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srv_1","name":"tool_search_tool_bm25","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"wea"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ther\"}"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            &format!(r#"{{"type":"content_block_start","index":1,"content_block":{result}}}"#),
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t","name":"get_weather","input":{}}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .unwrap();
        let call =
            json!({"type":"server_tool_use","id":"srv_1","name":"tool_search_tool_bm25","input":{"query":"weather"}});
        let expected = vec![
            Block::Provider { provider: "anthropic".into(), block: call.clone() },
            Block::Provider { provider: "anthropic".into(), block: result.clone() },
            Block::ToolUse { id: "t".into(), name: "get_weather".into(), input: json!({}) },
        ];
        assert_eq!(r.content, expected);
        let sent = message(&agent_loop::Message { role: Role::Assistant, content: r.content });
        assert_eq!(sent["content"][0], call);
        assert_eq!(sent["content"][1], result);
        // Another provider's blocks are not sent.
        let other = Block::Provider { provider: "openai".into(), block: json!({"type": "x"}) };
        let sent = message(&agent_loop::Message { role: Role::Assistant, content: vec![other] });
        assert_eq!(sent["content"], json!([]));
    }

    #[test]
    fn unknown_events_and_blocks_are_skipped_and_usage_adds_cache() {
        let r = decode(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"cache_read_input_tokens":10,"cache_creation_input_tokens":5,"output_tokens":1}}}"#,
            r#"{"type":"brand_new_event","stuff":1}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"pause_turn"},"usage":{"output_tokens":7}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .unwrap();
        assert_eq!(r.content, vec![Block::ToolUse { id: "t".into(), name: "n".into(), input: json!({}) }]);
        assert_eq!(r.stop_reason, StopReason::Other("pause_turn".into()));
        assert_eq!(r.usage, Usage { input_tokens: 18, output_tokens: 7 });
    }

    #[test]
    fn error_events_map_to_rejections_or_retries() {
        let overloaded = json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
        assert!(matches!(provider_error(&overloaded), ReadError::Retryable(m) if m.contains("Overloaded")));
        let invalid = json!({"type":"error","error":{"type":"invalid_request_error","message":"bad"}});
        assert!(matches!(
            provider_error(&invalid),
            ReadError::Model(ModelError::Rejected { status: 400, message }) if message.contains("bad")
        ));
    }

    #[test]
    fn recorded_streams_never_panic() {
        for fixture in [
            include_str!("../tests/it/fixtures/anthropic_text.sse"),
            include_str!("../tests/it/fixtures/anthropic_tool_use.sse"),
        ] {
            let n = crate::http::robustness::events(fixture).len();
            // Only the whole stream (ending in message_stop) is complete.
            crate::http::robustness::check(AnthropicDecoder::default, fixture, |k| k == n);
        }
        let json = include_str!("../tests/it/fixtures/anthropic_message.json").trim_end();
        assert!(AnthropicWire.decode_json(json.as_bytes(), &NoStream).is_ok());
        for cut in 0..json.len() {
            assert!(AnthropicWire.decode_json(&json.as_bytes()[..cut], &NoStream).is_err());
        }
    }

    #[test]
    fn stop_reasons() {
        assert_eq!(stop_reason("end_turn"), StopReason::EndTurn);
        assert_eq!(stop_reason("tool_use"), StopReason::ToolUse);
        assert_eq!(stop_reason("max_tokens"), StopReason::MaxTokens);
        assert_eq!(stop_reason("stop_sequence"), StopReason::StopSequence);
        assert_eq!(stop_reason("refusal"), StopReason::Refusal);
        assert_eq!(
            stop_reason("model_context_window_exceeded"),
            StopReason::Other("model_context_window_exceeded".into())
        );
    }
}
