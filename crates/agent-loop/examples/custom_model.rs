//! A language-model adapter written outside the workspace, driving the agent loop.
//!
//! `LanguageModel` is one method: messages and the tools of this step in, blocks and a stop
//! reason out. This "model" is a few lines of rules instead of a network call: it asks for the
//! first tool whose name ends in `lookup`, then answers with what the tool returned. The
//! tools come from a `ToolSource` of its own (one server, one tool), and policy allows the
//! tool, so the loop runs it through the same gate as any MCP call.
//!
//! Run it: `cargo run -p agent-loop --example custom_model`.

use std::sync::Arc;

use agent_loop::{
    Agent, AgentConfig, AgentEvent, Block, BoundCall, EventSink, LanguageModel, Listing, ModelError, ModelRequest,
    ModelResponse, Operation, Role, SourceError, StopReason, TextStream, ToolSource, Usage,
};
use async_trait::async_trait;
use mcp_protocol::{CallToolResult, ContentBlock, Tool};
use policy::{Decision, Policy, PolicyConfig, RuleConfig};
use serde_json::{Value, json};
use tool_pool::ServerTools;

/// The adapter: rules instead of a provider.
struct RuleModel;

#[async_trait]
impl LanguageModel for RuleModel {
    fn name(&self) -> &str {
        "rules"
    }

    async fn complete(&self, request: &ModelRequest, stream: &dyn TextStream) -> Result<ModelResponse, ModelError> {
        let last = request.messages.last().ok_or_else(|| ModelError::Script("no messages".into()))?;
        // A tool result came back: answer with it.
        if let Some(Block::ToolResult { content, .. }) = last.content.first() {
            let text = format!("The capital is {content}.");
            stream.text_delta(&text);
            return Ok(ModelResponse {
                content: vec![Block::text(text)],
                stop_reason: StopReason::EndTurn,
                usage: Usage::default(),
            });
        }
        // Otherwise ask for the lookup tool, if this step offers one.
        let tool = request.tools.iter().find(|t| t.name.ends_with("lookup"));
        let content = match (last.role, tool) {
            (Role::User, Some(tool)) => vec![Block::ToolUse {
                id: "call-1".into(),
                name: tool.name.clone(),
                input: json!({"country": last.text()}),
            }],
            _ => vec![Block::text("I have no tool to look that up.")],
        };
        let stop_reason = if content.iter().any(|b| matches!(b, Block::ToolUse { .. })) {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        };
        Ok(ModelResponse { content, stop_reason, usage: Usage::default() })
    }
}

/// Tools from one in-process "server" (a real host would use `mcp_client::ServerSet`).
struct Capitals;

#[async_trait]
impl ToolSource for Capitals {
    async fn refresh(&self) -> Listing {
        let schema = json!({"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]});
        let mut tool = Tool::new("lookup", schema);
        tool.description = Some("The capital of a country.".into());
        let mut listing = Listing::default();
        listing.servers.push(ServerTools::new("geo", vec![tool]));
        listing.generations.insert("geo".into(), 1);
        listing
    }

    fn generation(&self, _server: &str) -> Option<u64> {
        Some(1)
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        let country =
            call.arguments.as_ref().and_then(|a| a.get("country")).and_then(Value::as_str).unwrap_or_default();
        let capital = match country.to_lowercase().as_str() {
            "france" => "Paris",
            "japan" => "Tokyo",
            _ => {
                let detail = format!("no capital known for {country:?}");
                return Err(SourceError::Failed {
                    op: Operation::CallTool { tool: call.tool },
                    server: call.server,
                    detail,
                });
            }
        };
        Ok(CallToolResult { content: vec![ContentBlock::text(capital)], ..CallToolResult::default() })
    }
}

/// Prints what the loop does.
struct Print;

impl EventSink for Print {
    fn event(&self, event: &AgentEvent) {
        match event {
            AgentEvent::ToolCall { name, arguments, reason, .. } => println!("→ {name} {arguments}  [{reason}]"),
            AgentEvent::ToolResult { content, .. } => println!("  ← {content}"),
            _ => {}
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = Policy::new(PolicyConfig {
        default: Decision::Confirm,
        rules: vec![RuleConfig::new("geo", "lookup", Decision::Allow)],
        ..Default::default()
    })?;
    let agent = Agent::new(Arc::new(RuleModel), Arc::new(Capitals), policy, AgentConfig::default());
    let mut conversation = Vec::new();
    let outcome = agent.run_turn(&mut conversation, "France", &Print).await?;
    println!("{}", outcome.final_text);
    assert_eq!(outcome.final_text, "The capital is Paris.");
    Ok(())
}
