//! OpenAI Chat Completions (`POST {base}/chat/completions`, streamed), and the servers that
//! copy it: Ollama, vLLM, llama.cpp, LiteLLM and other gateways.

use std::borrow::Cow;
use std::collections::BTreeMap;

use agent_loop::{Block, LanguageModel, ModelError, ModelRequest, ModelResponse, Role, StopReason, TextStream, Usage};
use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::Serialize;
use serde_json::{Value, json};

use crate::Options;
use crate::body::{MessageCache, ToolsCache, check_model, erased::Element};
use crate::http::{
    ApiKey, Decoder, Endpoint, MAX_QUOTED_CHARS, ReadError, Step, Wire, default_client, join_base, json_error_message,
    lookup_nonempty, malformed, parse_json, snippet,
};

/// The highest tool call `index` an answer may use (a model's indexes count its calls from 0).
const MAX_CALL_INDEX: u64 = crate::http::MAX_ANSWER_PARTS;

/// The environment variable holding the API key.
pub(crate) const API_KEY_VARIABLE: &str = "OPENAI_API_KEY";
/// The environment variable holding the base URL (ending in `/v1`, as the official SDKs read it).
pub(crate) const BASE_URL_VARIABLE: &str = "OPENAI_BASE_URL";
/// The base URL used when [`BASE_URL_VARIABLE`] is not set.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Which body field carries the output budget.
///
/// OpenAI deprecated `max_tokens` and its reasoning models refuse it; the compatible servers
/// (Ollama, older vLLM and llama.cpp builds, many gateways) know only `max_tokens`. The default
/// ([`for_url`](Self::for_url)) is therefore `max_completion_tokens` for `api.openai.com` and
/// `max_tokens` for every other host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenLimitField {
    /// `max_tokens`: understood by every compatible server.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's current name, required by its reasoning models.
    MaxCompletionTokens,
}

impl TokenLimitField {
    /// The default for a request URL: `MaxCompletionTokens` for `api.openai.com`, else `MaxTokens`.
    pub fn for_url(url: &Url) -> Self {
        if url.host_str() == Some("api.openai.com") { Self::MaxCompletionTokens } else { Self::MaxTokens }
    }

    fn key(self) -> &'static str {
        match self {
            Self::MaxTokens => "max_tokens",
            Self::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// A model behind OpenAI Chat Completions or a compatible server.
///
/// Tool-call arguments that are not valid JSON are passed on as a JSON **string** holding the
/// model's text (not an object): the loop's schema check then tells the model its arguments were
/// not an object, and sending the conversation back yields the model's original text unchanged.
#[derive(Clone)]
pub struct OpenAiModel {
    endpoint: Endpoint,
    model: String,
    token_limit: TokenLimitField,
    messages: MessageCache,
    tools: ToolsCache,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("url", &self.endpoint.url.as_str())
            .field("model", &self.model)
            .field("token_limit", &self.token_limit)
            .field("has_key", &self.endpoint.headers.contains_key(AUTHORIZATION))
            .field("options", &self.endpoint.options)
            .finish_non_exhaustive()
    }
}

/// Whether `url` points at this machine (`localhost`, `127.0.0.0/8`, `::1`).
fn is_loopback(url: &Url) -> bool {
    url.host_str().is_some_and(mcp_safety::is_loopback_host)
}

impl OpenAiModel {
    /// Reads `OPENAI_BASE_URL` (optional, default `https://api.openai.com/v1`, ending in `/v1`)
    /// and `OPENAI_API_KEY`, which is required unless the base URL's host is this machine
    /// (`localhost`, `127.0.0.1`, `::1`: Ollama, llama.cpp, vLLM running locally need no key;
    /// then no `Authorization` header is sent). `model` is used when a request names none.
    ///
    /// # Errors
    ///
    /// [`ModelError::Configuration`] when the key is missing for a remote server or the base URL
    /// is not an http(s) URL.
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
        let base = lookup_nonempty(&lookup, BASE_URL_VARIABLE).unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let key = lookup_nonempty(&lookup, API_KEY_VARIABLE);
        if key.is_none() && !is_loopback(&join_base(&base, "/chat/completions", BASE_URL_VARIABLE)?) {
            return Err(ModelError::Configuration(format!(
                "no OpenAI API key: set {API_KEY_VARIABLE} (it may be left unset only when {BASE_URL_VARIABLE} \
                 points at a server on this machine, such as Ollama at http://localhost:11434/v1; \
                 for a remote server that needs no key, set it to any value)"
            )));
        }
        let client = match client {
            Some(client) => client,
            None => default_client()?,
        };
        Ok(Self::new(&base, key.as_deref(), client)?.with_model(model))
    }

    /// An adapter for `base_url` (ending in `/v1`, or wherever `chat/completions` lives) with an
    /// explicit key (`None`: no `Authorization` header) and HTTP client. The model name is empty:
    /// set it with [`with_model`](Self::with_model) or in each request.
    ///
    /// # Errors
    ///
    /// [`ModelError::Configuration`] for a base URL that is not http(s) or a key that cannot be
    /// an HTTP header.
    pub fn new(base_url: &str, api_key: Option<&str>, client: reqwest::Client) -> Result<Self, ModelError> {
        let url = join_base(base_url, "/chat/completions", BASE_URL_VARIABLE)?;
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key {
            headers.insert(AUTHORIZATION, ApiKey::new(key.to_owned()).header("Bearer ")?);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let token_limit = TokenLimitField::for_url(&url);
        let endpoint = Endpoint { client, url, headers, options: Options::default(), provider: "openai" };
        Ok(Self {
            endpoint,
            model: String::new(),
            token_limit,
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

    /// Chooses the output-budget field (see [`TokenLimitField`]).
    #[must_use]
    pub fn with_token_limit_field(mut self, field: TokenLimitField) -> Self {
        self.token_limit = field;
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

    /// The output-budget field in use.
    pub fn token_limit_field(&self) -> TokenLimitField {
        self.token_limit
    }

    /// The options in force.
    pub fn options(&self) -> &Options {
        &self.endpoint.options
    }

    /// The JSON body sent for `request`: the conversation's messages come from the cache of the
    /// last request's (see [`MessageCache`]), the tools from the cache of the last tool list.
    fn body(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        check_model(&request.model, &self.model)?;
        let model = if request.model.is_empty() { &self.model } else { &request.model };
        let system = WireText { role: "system", content: Some(&request.system) };
        let leading: &[&dyn Element] = if request.system.is_empty() { &[] } else { &[&system] };
        let mut body = self.messages.body();
        body.field("model", model)?;
        body.messages("messages", leading, &request.messages, &self.messages)?;
        if !request.tools.is_empty() {
            self.tools.write(&mut body, "tools", &request.tools, |tools| {
                let tools: Vec<WireTool<'_>> = tools
                    .iter()
                    .map(|t| WireTool {
                        kind: "function",
                        function: WireFunction {
                            name: &t.name,
                            description: &t.description,
                            parameters: &t.input_schema,
                        },
                    })
                    .collect();
                serde_json::to_vec(&tools)
            })?;
        }
        body.field(self.token_limit.key(), &request.max_tokens)?;
        body.field("stream", &true)?;
        body.raw_field("stream_options", br#"{"include_usage":true}"#)?;
        Ok(self.messages.finish(body))
    }
}

/// A message with text content (`null` when there is none).
#[derive(Serialize)]
struct WireText<'a> {
    role: &'static str,
    content: Option<&'a str>,
}

/// A tool result.
#[derive(Serialize)]
struct WireToolResult<'a> {
    role: &'static str,
    tool_call_id: &'a str,
    content: &'a str,
}

/// An assistant message with tool calls.
#[derive(Serialize)]
struct WireAssistant<'a> {
    role: &'static str,
    content: Option<&'a str>,
    tool_calls: Vec<WireCall<'a>>,
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    arguments: Cow<'a, str>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// The text blocks of a message, joined by newlines (`None` when there are none).
fn joined_text(message: &agent_loop::Message) -> Option<Cow<'_, str>> {
    let mut texts = message.content.iter().filter_map(|b| match b {
        Block::Text { text } if !text.is_empty() => Some(text.as_str()),
        _ => None,
    });
    let first = texts.next()?;
    match texts.next() {
        None => Some(Cow::Borrowed(first)),
        Some(second) => {
            let mut joined = format!("{first}\n{second}");
            for text in texts {
                joined.push('\n');
                joined.push_str(text);
            }
            Some(Cow::Owned(joined))
        }
    }
}

/// One port message as Chat Completions messages: a user message's tool results become `tool`
/// messages (first, so they follow the assistant's `tool_calls`), then its text a `user` message;
/// an assistant message carries its tool calls with `content: null` when it has no text. Written
/// straight from the blocks, with no `Value` built.
fn wire_messages(message: &agent_loop::Message, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let mut first = true;
    let mut element = |out: &mut Vec<u8>, value: &dyn Element| {
        if !first {
            out.push(b',');
        }
        first = false;
        value.write(out)
    };
    match message.role {
        Role::Assistant => {
            let tool_calls: Vec<WireCall<'_>> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => {
                        let arguments = match input {
                            Value::String(raw) => Cow::Borrowed(raw.as_str()),
                            other => Cow::Owned(other.to_string()),
                        };
                        Some(WireCall { id, kind: "function", function: WireCallFunction { name, arguments } })
                    }
                    _ => None,
                })
                .collect();
            let text = joined_text(message);
            if tool_calls.is_empty() {
                element(out, &WireText { role: "assistant", content: text.as_deref() })?;
            } else {
                element(out, &WireAssistant { role: "assistant", content: text.as_deref(), tool_calls })?;
            }
        }
        // Whatever is not the model's speaks to it (the user's role, and any role added later).
        _ => {
            for block in &message.content {
                if let Block::ToolResult { tool_use_id, content, .. } = block {
                    element(out, &WireToolResult { role: "tool", tool_call_id: tool_use_id, content })?;
                }
            }
            if let Some(text) = joined_text(message) {
                element(out, &WireText { role: "user", content: Some(&text) })?;
            }
        }
    }
    Ok(())
}

#[async_trait]
impl LanguageModel for OpenAiModel {
    fn name(&self) -> &str {
        "openai"
    }

    async fn complete(&self, request: &ModelRequest, stream: &dyn TextStream) -> Result<ModelResponse, ModelError> {
        let body = self.body(request)?;
        self.endpoint.call(&OpenAiWire, body, stream).await
    }
}

struct OpenAiWire;

impl Wire for OpenAiWire {
    type Decoder = OpenAiDecoder;

    fn decoder(&self) -> OpenAiDecoder {
        OpenAiDecoder::default()
    }

    fn decode_json(&self, body: &[u8], sink: &dyn TextStream) -> Result<ModelResponse, ReadError> {
        let text = std::str::from_utf8(body).map_err(|_| malformed("the JSON answer is not UTF-8"))?;
        // The usual answer is read straight into structs; anything unusual the `Value` way.
        if text.trim_start().starts_with('{')
            && let Ok(answer) = serde_json::from_str::<typed::Obj<typed::Answer<'_>>>(text)
            && let Some(response) = OpenAiDecoder::whole(answer.0, sink)
        {
            return response;
        }
        decode_value(text, sink)
    }
}

/// A whole JSON answer read through a `Value`: the reference reading, for any shape.
fn decode_value(text: &str, sink: &dyn TextStream) -> Result<ModelResponse, ReadError> {
    let value: Value = parse_json(text, "the JSON answer is not valid JSON")?;
    if value.get("error").is_some_and(|e| !e.is_null()) {
        return Err(provider_error(&value));
    }
    let mut decoder = OpenAiDecoder::default();
    decoder.usage(&value);
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| malformed(format!("the JSON answer has no choices: {}", snippet(text, 200))))?;
    let message = choice.get("message").ok_or_else(|| malformed("the JSON answer's choice has no message"))?;
    decoder.delta(message, sink)?;
    decoder.finish = Some(
        choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("the JSON answer has no finish_reason"))?
            .to_owned(),
    );
    decoder.finish(true)
}

/// An error object inside a 200 answer (some servers report failures mid-stream). Invalid
/// requests are rejections (status 400); anything else is treated as a transient failure.
fn provider_error(value: &Value) -> ReadError {
    let message = json_error_message(value)
        .unwrap_or_else(|| format!("error without a message: {}", snippet(&value.to_string(), MAX_QUOTED_CHARS)));
    let kind = ["/error/type", "/error/code"]
        .iter()
        .filter_map(|p| value.pointer(p).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    if kind.contains("invalid_request") {
        ReadError::Model(ModelError::Rejected { status: 400, message })
    } else {
        ReadError::Retryable(format!("error in the answer: {message}"))
    }
}

#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Default)]
struct OpenAiDecoder {
    text: String,
    refusal: String,
    calls: BTreeMap<u64, Call>,
    last_index: Option<u64>,
    finish: Option<String>,
    usage: Usage,
}

/// Text content: a string, or (some gateways) an array of `{type: "text", text}` parts.
fn content_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

impl OpenAiDecoder {
    fn usage(&mut self, chunk: &Value) {
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            if let Some(n) = usage.get("prompt_tokens").and_then(Value::as_u64) {
                self.usage.input_tokens = n;
            }
            if let Some(n) = usage.get("completion_tokens").and_then(Value::as_u64) {
                self.usage.output_tokens = n;
            }
        }
    }

    /// A streamed `delta` or a whole `message`: content, refusal and tool calls.
    fn delta(&mut self, delta: &Value, sink: &dyn TextStream) -> Result<(), ReadError> {
        if let Some(content) = delta.get("content") {
            let text = content_text(content);
            sink.text_delta(&text);
            self.text.push_str(&text);
        }
        if let Some(refusal) = delta.get("refusal").and_then(Value::as_str) {
            // Shown as it comes, as text is: the refusal is what the person reads of the turn.
            sink.text_delta(refusal);
            self.refusal.push_str(refusal);
        }
        let Some(calls) = delta.get("tool_calls").filter(|c| !c.is_null()) else { return Ok(()) };
        let calls = calls.as_array().ok_or_else(|| malformed(format!("tool_calls is not an array: {calls}")))?;
        for (position, call) in calls.iter().enumerate() {
            let index = match call.get("index") {
                Some(i) => Some(i.as_u64().filter(|&i| i <= MAX_CALL_INDEX).ok_or_else(|| {
                    malformed(format!("a tool call index is not a number up to {MAX_CALL_INDEX}: {i}"))
                })?),
                None => None,
            };
            let function = call.get("function");
            let arguments = match function.and_then(|f| f.get("arguments")) {
                Some(Value::String(piece)) => Some(Cow::Borrowed(piece.as_str())),
                // A server that sends arguments as an object instead of a string.
                Some(object @ Value::Object(_)) => Some(Cow::Owned(object.to_string())),
                _ => None,
            };
            self.call_piece(
                position,
                index,
                call.get("id").and_then(Value::as_str),
                function.and_then(|f| f.get("name")).and_then(Value::as_str),
                arguments.as_deref(),
            )?;
        }
        Ok(())
    }

    /// One piece of the tool call at `position` of a delta (or message): its `index`, `id`,
    /// function name and a piece of its arguments, each if given. Calls past
    /// [`MAX_CALL_INDEX`] are refused, however they are numbered (or not).
    fn call_piece(
        &mut self,
        position: usize,
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) -> Result<(), ReadError> {
        let id = id.filter(|s| !s.is_empty());
        // Whole messages and some servers leave out `index`: a call with an id starts a new
        // entry, one without continues the last.
        let index = match index {
            Some(i) => i,
            None if id.is_some() || self.last_index.is_none() => {
                // `index` is the model's: the next one after u64::MAX is none.
                match self.calls.keys().next_back() {
                    None => position as u64,
                    Some(&last) => last.saturating_add(1),
                }
            }
            None => self.last_index.unwrap_or(0),
        };
        if index > MAX_CALL_INDEX {
            return Err(malformed(format!("an answer of more than {} tool calls", MAX_CALL_INDEX + 1)));
        }
        self.last_index = Some(index);
        let entry = self.calls.entry(index).or_default();
        if let Some(id) = id {
            id.clone_into(&mut entry.id);
        }
        if let Some(name) = name.filter(|s| !s.is_empty()) {
            name.clone_into(&mut entry.name);
        }
        if let Some(piece) = arguments {
            entry.arguments.push_str(piece);
        }
        Ok(())
    }

    /// A whole answer read as [`typed::Answer`]: `None` (nothing passed to `sink`) unless it has
    /// the shape [`OpenAiWire::decode_json`] reads the same way from a `Value`.
    fn whole(answer: typed::Answer<'_>, sink: &dyn TextStream) -> Option<Result<ModelResponse, ReadError>> {
        if answer.error.is_some() {
            return None;
        }
        let choice = answer.choices.into_iter().next()?.0;
        let message = choice.message?.0;
        let finish = choice.finish_reason?;
        let mut decoder = OpenAiDecoder::default();
        if let Some(usage) = answer.usage {
            if let Some(n) = usage.0.prompt_tokens {
                decoder.usage.input_tokens = n;
            }
            if let Some(n) = usage.0.completion_tokens {
                decoder.usage.output_tokens = n;
            }
        }
        if let Some(index) = message.tool_calls.iter().flatten().filter_map(|c| c.0.index).find(|&i| i > MAX_CALL_INDEX)
        {
            return Some(Err(malformed(format!("a tool call index is not a number up to {MAX_CALL_INDEX}: {index}"))));
        }
        if let Some(content) = message.content {
            let text = content.as_deref().unwrap_or("");
            sink.text_delta(text);
            decoder.text.push_str(text);
        }
        if let Some(refusal) = message.refusal {
            sink.text_delta(&refusal);
            decoder.refusal.push_str(&refusal);
        }
        for (position, call) in message.tool_calls.into_iter().flatten().enumerate() {
            let call = call.0;
            let function = call.function.map(|f| f.0);
            let (name, arguments) = match &function {
                Some(f) => (f.name.as_deref(), f.arguments.as_deref()),
                None => (None, None),
            };
            if let Err(e) = decoder.call_piece(position, call.index, call.id.as_deref(), name, arguments) {
                return Some(Err(e));
            }
        }
        decoder.finish = Some(finish.into_owned());
        Some(decoder.finish(true))
    }
}

/// A whole (non-streamed) Chat Completions answer read into structs, without a `Value` tree.
/// Every object is read only from a JSON object ([`Obj`]), a key given twice or a value of
/// another type fails, and a field whose `null` means something else than its absence is read
/// with [`present`]: whatever this does not read exactly as the `Value` path would, it refuses,
/// and the `Value` path decides.
mod typed {
    use std::borrow::Cow;
    use std::marker::PhantomData;

    use serde::Deserialize;
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor, value::MapAccessDeserializer};

    /// A `T` read only from a JSON object (serde's derive would also take an array).
    pub(super) struct Obj<T>(pub(super) T);

    impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Only<T>(PhantomData<T>);
            impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
                type Value = T;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                    T::deserialize(MapAccessDeserializer::new(map))
                }
            }
            deserializer.deserialize_map(Only(PhantomData)).map(Obj)
        }
    }

    /// A field that is there, `null` included (`Some(None)`), told from one left out (`None`).
    fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<T>, D::Error> {
        T::deserialize(deserializer).map(Some)
    }

    #[derive(Deserialize)]
    pub(super) struct Answer<'a> {
        #[serde(default)]
        pub(super) error: Option<IgnoredAny>,
        #[serde(borrow)]
        pub(super) choices: Vec<Obj<Choice<'a>>>,
        #[serde(default)]
        pub(super) usage: Option<Obj<Usage>>,
    }

    #[derive(Deserialize)]
    pub(super) struct Usage {
        #[serde(default)]
        pub(super) prompt_tokens: Option<u64>,
        #[serde(default)]
        pub(super) completion_tokens: Option<u64>,
    }

    #[derive(Deserialize)]
    pub(super) struct Choice<'a> {
        #[serde(borrow, default, deserialize_with = "present")]
        pub(super) message: Option<Obj<Message<'a>>>,
        #[serde(borrow, default)]
        pub(super) finish_reason: Option<Cow<'a, str>>,
    }

    #[derive(Deserialize)]
    pub(super) struct Message<'a> {
        #[serde(borrow, default, deserialize_with = "present")]
        pub(super) content: Option<Option<Cow<'a, str>>>,
        #[serde(borrow, default)]
        pub(super) refusal: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub(super) tool_calls: Option<Vec<Obj<Call<'a>>>>,
    }

    #[derive(Deserialize)]
    pub(super) struct Call<'a> {
        #[serde(default, deserialize_with = "present")]
        pub(super) index: Option<u64>,
        #[serde(borrow, default)]
        pub(super) id: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub(super) function: Option<Obj<Function<'a>>>,
    }

    #[derive(Deserialize)]
    pub(super) struct Function<'a> {
        #[serde(borrow, default)]
        pub(super) name: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub(super) arguments: Option<Cow<'a, str>>,
    }
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, _name: Option<&str>, data: &str, sink: &dyn TextStream) -> Result<Step, ReadError> {
        if data.trim() == "[DONE]" {
            return Ok(Step::Done);
        }
        let chunk: Value = parse_json(data, "a chunk is not valid JSON")?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(provider_error(&chunk));
        }
        if !chunk.is_object() {
            return Err(malformed(format!("a chunk is not a JSON object: {}", snippet(data, 200))));
        }
        self.usage(&chunk);
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => return Ok(Step::Continue),
            Some(Value::Array(choices)) => choices,
            Some(other) => return Err(malformed(format!("choices is not an array: {other}"))),
        };
        for choice in choices {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.get("delta").filter(|d| d.is_object()) {
                self.delta(delta, sink)?;
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(reason.to_owned());
            }
        }
        Ok(Step::Continue)
    }

    fn finish(self, completed: bool) -> Result<ModelResponse, ReadError> {
        // A stream that ends after finish_reason but before [DONE] lost at most the usage chunk.
        if !completed && self.finish.is_none() {
            return Err(malformed("the stream ended before a finish_reason or [DONE] (the answer is truncated)"));
        }
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(Block::Text { text: self.text });
        }
        let refused = !self.refusal.is_empty();
        if refused {
            content.push(Block::Text { text: self.refusal });
        }
        let has_calls = !self.calls.is_empty();
        for (index, call) in self.calls {
            if call.name.is_empty() {
                return Err(malformed(format!("tool call {index} has no function name")));
            }
            let id = if call.id.is_empty() { format!("call_{index}") } else { call.id };
            let input = if call.arguments.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(&call.arguments).unwrap_or(Value::String(call.arguments))
            };
            content.push(Block::ToolUse { id, name: call.name, input });
        }
        let stop_reason = match self.finish.as_deref() {
            _ if refused => StopReason::Refusal,
            // Some gateways finish a tool-calling turn with "stop".
            _ if has_calls => StopReason::ToolUse,
            None | Some("stop" | "tool_calls" | "function_call") => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        Ok(ModelResponse { content, stop_reason, usage: self.usage })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use agent_loop::NoStream;

    fn decode(events: &[&str]) -> Result<ModelResponse, ReadError> {
        let mut d = OpenAiDecoder::default();
        for e in events {
            if d.event(None, e, &NoStream)? == Step::Done {
                return d.finish(true);
            }
        }
        d.finish(false)
    }

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).to_string()
    }

    #[test]
    fn finish_reasons() {
        let r = |f: &str| decode(&[&chunk(json!({"content": "x"}), Some(f)), "[DONE]"]).unwrap().stop_reason;
        assert_eq!(r("stop"), StopReason::EndTurn);
        assert_eq!(r("length"), StopReason::MaxTokens);
        assert_eq!(r("content_filter"), StopReason::Refusal);
        assert_eq!(r("tool_calls"), StopReason::EndTurn, "no calls: nothing for the loop to run");
        assert_eq!(r("weird"), StopReason::Other("weird".into()));
    }

    #[test]
    fn tool_calls_with_stop_invalid_arguments_and_missing_ids() {
        let r = decode(&[
            &chunk(json!({"tool_calls": [{"index": 0, "function": {"name": "a", "arguments": "{\"x\": 1"}}]}), None),
            &chunk(json!({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "b", "arguments": ""}}]}), None),
            &chunk(json!({}), Some("stop")),
        ])
        .unwrap();
        assert_eq!(
            r.content,
            vec![
                Block::ToolUse { id: "call_0".into(), name: "a".into(), input: json!("{\"x\": 1") },
                Block::ToolUse { id: "c2".into(), name: "b".into(), input: json!({}) },
            ]
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse);
    }

    #[test]
    fn calls_without_index_and_refusals() {
        let r = decode(&[
            &chunk(json!({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{\"k\""}}]}), None),
            &chunk(json!({"tool_calls": [{"function": {"arguments": ":2}"}}]}), None),
            &chunk(json!({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": {"z": true}}}]}), None),
            &chunk(json!({}), Some("tool_calls")),
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            r.content,
            vec![
                Block::ToolUse { id: "a".into(), name: "f".into(), input: json!({"k": 2}) },
                Block::ToolUse { id: "b".into(), name: "g".into(), input: json!({"z": true}) },
            ]
        );
        let r = decode(&[&chunk(json!({"refusal": "I can't"}), Some("stop")), "[DONE]"]).unwrap();
        assert_eq!(r.content, vec![Block::text("I can't")]);
        assert_eq!(r.stop_reason, StopReason::Refusal);
    }

    /// Calls without an `index` each open a new entry: past the cap they are refused like
    /// numbered ones (10,000 were decoded, streamed or whole).
    #[test]
    fn unnumbered_calls_past_the_cap_are_refused() {
        let piece = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c","function":{"name":"f"}}]}}]}"#;
        let events = vec![piece; 5000];
        match decode(&events) {
            Err(ReadError::Model(ModelError::Malformed(m))) => assert!(m.contains("more than 4097 tool calls"), "{m}"),
            other => panic!("{other:?}"),
        }
        let calls: Vec<Value> = (0..5000).map(|_| json!({"id": "a", "function": {"name": "f"}})).collect();
        let whole = json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "tool_calls": calls}}]});
        for typed in [true, false] {
            let text = whole.to_string();
            let read =
                if typed { OpenAiWire.decode_json(text.as_bytes(), &NoStream) } else { decode_value(&text, &NoStream) };
            match read {
                Err(ReadError::Model(ModelError::Malformed(m))) => assert!(m.contains("more than 4097"), "{m}"),
                other => panic!("typed {typed}: {other:?}"),
            }
        }
    }

    /// What a model sent is quoted cut in an error: a 5 MB field made a 5 MB message that
    /// `chat` printed whole.
    #[test]
    fn errors_quote_what_the_model_sent_cut() {
        let pad = "x".repeat(1 << 20);
        let answers = [
            json!({"error": {"pad": pad}}).to_string(),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": {"pad": pad}}}]}).to_string(),
        ];
        for answer in answers {
            let said = match OpenAiWire.decode_json(answer.as_bytes(), &NoStream) {
                Err(ReadError::Model(ModelError::Malformed(m) | ModelError::Rejected { message: m, .. })) => m,
                Err(ReadError::Retryable(m)) => m,
                other => panic!("{other:?}"),
            };
            assert!(said.chars().count() < 2200, "{} characters", said.chars().count());
        }
    }

    #[test]
    fn malformed_chunks() {
        for (events, needle) in [
            (vec!["{oops"], "not valid JSON"),
            (vec!["[1,2]"], "not a JSON object"),
            (vec![r#"{"choices": 3}"#], "not an array"),
            (vec![r#"{"choices":[{"index":0,"delta":{"tool_calls":{"a":1}}}]}"#], "tool_calls is not an array"),
            (vec![r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":"x"}]}}]}"#], "index"),
            // An index past any real answer's (it panicked on the call after it).
            (
                vec![
                    r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":18446744073709551615,"id":"a","function":{"name":"f"}}]}}]}"#,
                    r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","function":{"name":"g"}}]}}]}"#,
                ],
                "index is not a number up to 4096",
            ),
            (
                vec![r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]},"finish_reason":"tool_calls"}]}"#],
                "no function name",
            ),
            (vec![r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#], "truncated"),
        ] {
            match decode(&events) {
                Err(ReadError::Model(ModelError::Malformed(m))) => assert!(m.contains(needle), "{m} / {needle}"),
                other => panic!("{events:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn recorded_streams_never_panic() {
        for fixture in [
            include_str!("../tests/it/fixtures/openai_text.sse"),
            include_str!("../tests/it/fixtures/openai_tool_calls.sse"),
        ] {
            let events = crate::http::robustness::events(fixture);
            // Complete once the finish_reason chunk is in.
            let finish = events.iter().position(|(_, d)| d.contains("\"finish_reason\":\"")).unwrap();
            crate::http::robustness::check(OpenAiDecoder::default, fixture, |k| k > finish);
        }
        let json = include_str!("../tests/it/fixtures/openai_completion.json").trim_end();
        assert!(OpenAiWire.decode_json(json.as_bytes(), &NoStream).is_ok());
        for cut in 0..json.len() {
            assert!(OpenAiWire.decode_json(&json.as_bytes()[..cut], &NoStream).is_err());
        }
    }

    /// The struct reading of a whole answer gives what the `Value` reading gives, for the
    /// recorded answer and every field of it replaced by odd values, duplicated or dropped.
    #[test]
    fn whole_answers_read_alike_both_ways() {
        #[derive(Default)]
        struct Collect(std::sync::Mutex<String>);
        impl TextStream for Collect {
            fn text_delta(&self, text: &str) {
                self.0.lock().unwrap().push_str(&format!("[{text}]"));
            }
        }
        let read = |text: &str, typed: bool| {
            let sink = Collect::default();
            let result = if typed { OpenAiWire.decode_json(text.as_bytes(), &sink) } else { decode_value(text, &sink) };
            format!("{result:?} {}", sink.0.lock().unwrap())
        };
        let recorded: Value =
            serde_json::from_str(include_str!("../tests/it/fixtures/openai_completion.json")).unwrap();
        let mut answers = vec![recorded.to_string(), format!("[{recorded}]"), "{}".to_owned()];
        let odd =
            [json!(null), json!([]), json!({}), json!("x"), json!(""), json!(7), json!(-1), json!(1.5), json!([1, 2])];
        let message = json!({"role": "assistant", "content": null, "refusal": "no",
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"k\": 1}"}},
                           {"index": 3, "function": {"name": "g", "arguments": {"z": true}}},
                           {"function": {"arguments": "[1]"}}]});
        let calls = json!({"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 4}});
        for base in [recorded, calls] {
            answers.push(base.to_string());
            for pointer in crate::http::robustness::pointers(&base, String::new()) {
                for value in &odd {
                    let mut v = base.clone();
                    if let Some(slot) = v.pointer_mut(&pointer) {
                        *slot = value.clone();
                    }
                    answers.push(v.to_string());
                }
                // The field given twice (the later one wins in a `Value`), and left out.
                let (parent, key) = pointer.rsplit_once('/').unwrap();
                if let Some(Value::Object(map)) = base.pointer(parent) {
                    let inner = serde_json::to_string(&map[key]).unwrap();
                    let whole = serde_json::to_string(map).unwrap();
                    let twice = format!("{{\"{key}\":{inner},{}", &whole[1..]);
                    let mut v = base.clone();
                    *v.pointer_mut(parent).unwrap() = json!("TWICE");
                    answers.push(v.to_string().replace("\"TWICE\"", &twice));
                    let mut v = base.clone();
                    v.pointer_mut(parent).unwrap().as_object_mut().unwrap().shift_remove(key);
                    answers.push(v.to_string());
                }
            }
        }
        for answer in answers {
            assert_eq!(read(&answer, true), read(&answer, false), "{answer}");
        }
    }

    #[test]
    fn loopback_hosts() {
        for (u, local) in [
            ("http://localhost:11434/v1", true),
            ("http://127.0.0.1/v1", true),
            ("http://127.1.2.3/v1", true),
            ("http://[::1]:8000/v1", true),
            ("https://api.openai.com/v1", false),
            ("http://10.0.0.1/v1", false),
            ("http://localhost.evil.com/v1", false),
            ("http://app.localhost/v1", false),
        ] {
            assert_eq!(is_loopback(&Url::parse(u).unwrap()), local, "{u}");
        }
    }
}
