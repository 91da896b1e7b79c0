//! Integration tests: both adapters against scripted HTTP servers on 127.0.0.1.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod anthropic;
mod openai;
mod server;

use std::sync::Mutex;
use std::time::Duration;

use agent_loop::{Block, Message, ModelRequest, Role, TextStream, ToolSpec};
use llm_providers::Options;
use serde_json::json;

/// Records streamed text pieces.
#[derive(Default)]
pub struct Collect(Mutex<Vec<String>>);

impl TextStream for Collect {
    fn text_delta(&self, text: &str) {
        self.0.lock().unwrap().push(text.to_owned());
    }
}

impl Collect {
    pub fn pieces(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Retries without waiting.
pub fn fast() -> Options {
    Options {
        retry: mcp_safety::Backoff {
            initial_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            max_attempts: Options::default().retry.max_attempts,
        },
        timeout: Duration::from_secs(10),
        ..Options::default()
    }
}

pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "get_weather".into(),
            description: "Current weather for a city.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city"]
            }),
            defer_loading: false,
        },
        ToolSpec {
            name: "get_time".into(),
            description: "The current time.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
            defer_loading: false,
        },
    ]
}

pub fn simple(text: &str) -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![Message::user(text).into()],
        tools: vec![],
        max_tokens: 100,
    }
}

/// A request with a system prompt, a user message, an assistant tool_use, tool results (one
/// failed) and two tools.
pub fn conversation() -> ModelRequest {
    ModelRequest {
        model: "model-from-request".into(),
        system: "You are a weather bot.".into(),
        messages: vec![
            Message::user("Weather in Paris and Rome?").into(),
            Message {
                role: Role::Assistant,
                content: vec![
                    Block::text("Checking both."),
                    Block::ToolUse { id: "call_1".into(), name: "get_weather".into(), input: json!({"city": "Paris"}) },
                    Block::ToolUse { id: "call_2".into(), name: "get_weather".into(), input: json!({"city": "Rome"}) },
                ],
            }
            .into(),
            Message {
                role: Role::User,
                content: vec![
                    Block::ToolResult { tool_use_id: "call_1".into(), content: "18°C, sunny".into(), is_error: false },
                    Block::ToolResult {
                        tool_use_id: "call_2".into(),
                        content: "Error: the weather service timed out".into(),
                        is_error: true,
                    },
                ],
            }
            .into(),
        ],
        tools: tools(),
        max_tokens: 1024,
    }
}

/// A port that nothing listens on.
pub async fn closed_port_base() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}
