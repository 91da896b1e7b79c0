//! Language-model adapters for the agent loop's [`LanguageModel`] port:
//!
//! - [`AnthropicModel`]: the Anthropic Messages API (`{ANTHROPIC_BASE_URL}/v1/messages`).
//! - [`OpenAiModel`]: OpenAI Chat Completions (`{OPENAI_BASE_URL}/chat/completions`) and the
//!   servers that copy it (Ollama, vLLM, llama.cpp, LiteLLM and other gateways).
//!
//! Both stream their answers (server-sent events), pass text to the loop's [`TextStream`] as it
//! arrives, accept a whole JSON answer from gateways that ignore `stream: true`, retry 429, 5xx
//! and connection failures with exponential backoff and jitter (honouring `retry-after`), and
//! report everything else as a typed [`ModelError`]: 4xx as `Rejected` with the provider's own
//! message, answers they cannot read as `Malformed`. Answers are bounded ([`Options`]: 32 MiB per
//! answer, 1 MiB per event, a time limit per attempt). API keys are sent as sensitive headers and
//! never logged or printed by `Debug`.
//!
//! ```no_run
//! use agent_loop::{LanguageModel, Message, ModelRequest, TextStream};
//! use llm_providers::AnthropicModel;
//!
//! struct Print;
//! impl TextStream for Print {
//!     fn text_delta(&self, text: &str) {
//!         print!("{text}");
//!     }
//! }
//!
//! # async fn run() -> Result<(), agent_loop::ModelError> {
//! // ANTHROPIC_API_KEY must be set; ANTHROPIC_BASE_URL optionally points at a gateway.
//! let model = AnthropicModel::from_env("claude-sonnet-4-5")?;
//! let request = ModelRequest {
//!     model: String::new(), // empty: the adapter's model
//!     system: "You are terse.".into(),
//!     messages: vec![Message::user("Say hello.").into()],
//!     tools: vec![],
//!     max_tokens: 256,
//! };
//! let response = model.complete(&request, &Print).await?;
//! println!("\n{:?} {:?}", response.stop_reason, response.usage);
//! # Ok(())
//! # }
//! ```
//!
//! [`LanguageModel`]: agent_loop::LanguageModel
//! [`TextStream`]: agent_loop::TextStream
//! [`ModelError`]: agent_loop::ModelError

mod anthropic;
mod body;
mod http;
mod openai;
mod options;

pub use anthropic::AnthropicModel;
pub use http::default_client;

pub use openai::{OpenAiModel, TokenLimitField};
pub use options::Options;

/// The README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
