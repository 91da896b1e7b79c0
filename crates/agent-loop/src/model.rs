//! The language-model port: what the loop sends a model and what it gets back.
//!
//! Provider adapters (Anthropic, OpenAI-compatible, scripted) implement [`LanguageModel`]; the
//! loop never knows which one it talks to.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Role {
    /// The user (and tool results, which go back to the model as the user's turn).
    User,
    /// The model.
    Assistant,
}

/// One block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Block {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// The model asks for a tool call.
    ToolUse {
        /// The call's id, chosen by the model (or the provider).
        id: String,
        /// The model-visible tool name.
        name: String,
        /// The arguments, as the model wrote them (an object, normally).
        input: Value,
    },
    /// The result of a tool call, sent back to the model.
    ToolResult {
        /// The id of the tool-use block answered.
        tool_use_id: String,
        /// What the model reads.
        content: String,
        /// Whether the call failed (the text then starts with `Error:`).
        is_error: bool,
    },
    /// A block only its provider understands, kept so that the conversation goes back to that
    /// provider unchanged: Anthropic's server-side tool search (`server_tool_use`,
    /// `tool_search_tool_result`, with `tool_search = "native"`). Other providers leave it out.
    Provider {
        /// The adapter that made it (`anthropic`).
        provider: String,
        /// The block as the provider sent it.
        block: Value,
    },
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text { text: text.into() }
    }
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: Vec<Block>,
}

impl Message {
    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self { role: Role::User, content: vec![Block::text(text)] }
    }

    /// The text blocks joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Model-visible name (`mcp__server__tool` or a built-in's name).
    pub name: String,
    /// Description (already sanitized and marked with its source).
    pub description: String,
    /// JSON Schema of the input (an object schema).
    pub input_schema: Value,
    /// Sent for the provider to search rather than shown to the model (see
    /// [`ToolSearch::Native`](crate::ToolSearch::Native)); only adapters that support a
    /// provider-side tool search set it on the wire, and the loop sets it only when told to.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub defer_loading: bool,
}

/// What the loop asks the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The model to use (provider-specific name); empty means the adapter's own default.
    pub model: String,
    /// System prompt.
    pub system: String,
    /// The conversation so far, each message shared: the loop sends the same `Arc`s at every
    /// step of a turn and appends the new ones, so an adapter that keeps what it serialized
    /// recognizes a message it already wrote by its pointer, whatever the history's length (a
    /// message cannot change while the adapter holds its `Arc`: `Arc::make_mut` copies it).
    /// A request built by hand wraps its messages: `vec![Message::user("Hi").into()]`.
    pub messages: Vec<Arc<Message>>,
    /// The tools of this step's pool snapshot, exactly.
    pub tools: Vec<ToolSpec>,
    /// Output budget.
    pub max_tokens: u32,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It ran out of output tokens.
    MaxTokens,
    /// A stop sequence.
    StopSequence,
    /// The provider refused (content filter and the like).
    Refusal,
    /// Anything else, as the provider said it.
    Other(String),
}

/// Token counts, when the provider reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// Text and tool-use blocks, in order.
    pub content: Vec<Block>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Token counts.
    pub usage: Usage,
}

/// Receives streamed text as the model produces it.
pub trait TextStream: Send + Sync {
    /// A piece of text (append it to what came before).
    fn text_delta(&self, text: &str);
}

/// Discards streamed text.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStream;

impl TextStream for NoStream {
    fn text_delta(&self, _text: &str) {}
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// No credentials (for example the API key variable is not set).
    #[error("{0}")]
    Configuration(String),
    /// The provider refused the request (4xx other than 429): the message says why.
    #[error("the model provider refused the request (HTTP {status}): {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider kept failing (429 or 5xx) after the retries.
    #[error("the model provider is unavailable after {attempts} attempts: {message}")]
    Unavailable {
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        message: String,
    },
    /// The answer could not be read.
    #[error("the model provider's answer is malformed: {0}")]
    Malformed(String),
    /// The network failed: the provider could not be reached, or its answer broke off or
    /// stalled past the time limit.
    #[error("the connection to the model provider failed: {0}")]
    Network(String),
    /// A scripted model ran out of turns or its script is wrong.
    #[error("{0}")]
    Script(String),
}

/// A language model.
#[async_trait]
pub trait LanguageModel: Send + Sync {
    /// A short name for logs and the transcript (`anthropic`, `openai`, `scripted`).
    fn name(&self) -> &str;

    /// Ask for the next turn. Text is streamed to `stream` as it arrives and also returned
    /// in the response.
    async fn complete(&self, request: &ModelRequest, stream: &dyn TextStream) -> Result<ModelResponse, ModelError>;
}
