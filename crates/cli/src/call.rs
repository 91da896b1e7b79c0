//! `mcp-harness call`: one tool call through the gate the agent loop uses (`agent_loop::CallGate`):
//! lookup in the pool, the server's generation, the argument check against the input schema,
//! policy and approval, hooks; then the call under the raw tool name.

use agent_loop::{Admission, CallGate, CallRequest, Catalog, NoHooks, Ran, Refusal, SourceError};
use anyhow::{Context as _, bail};
use mcp_client::ServerSet;
use mcp_protocol::CallToolResult;
use serde_json::Value;
use std::sync::Arc;

use crate::Outcome;
use crate::output;
use crate::session::Session;
use mcp_host::config::Config;

/// `mcp-harness call NAME --args JSON [--yes] [--json]`.
pub(crate) async fn call_command(
    config: Config,
    name: &str,
    args: &str,
    yes: bool,
    as_json: bool,
) -> anyhow::Result<Outcome> {
    // Bad JSON needs no server: fail before starting any.
    let args: Value = serde_json::from_str(args).context("--args is not valid JSON")?;
    // A signal while connecting drops the connections, which kills their process groups.
    let connections = crate::signals::interruptible(crate::host::connect(&config)).await?;
    let unavailable = Session::unavailable_of(&connections);
    let servers = ServerSet::new(connections);
    // A signal during the call drops it (the server is told it is cancelled), then the servers
    // close.
    let result = crate::signals::interruptible(call(&config, &servers, &unavailable, name, &args, yes, as_json)).await;
    servers.close().await;
    result?
}

async fn call(
    config: &Config,
    servers: &ServerSet,
    unavailable: &[String],
    name: &str,
    args: &Value,
    yes: bool,
    as_json: bool,
) -> anyhow::Result<Outcome> {
    let catalog = Catalog::new(Arc::new([]), config.policy.clone(), tool_pool::Options::default());
    let binding = catalog.bind(servers).await?;
    let gate = CallGate::new(crate::approve::for_one_call(yes), Arc::new(NoHooks));
    let request = CallRequest { id: "call", name, arguments: args };
    let job = match gate.admit(&binding, servers, request).await {
        Admission::Run { job, .. } => job,
        Admission::Refused(refusal) => bail!(refusal_text(&refusal, unavailable)),
        _ => bail!("the call to {name} was not run"),
    };
    let view = crate::progress::ProgressView::new();
    let (progress, mut reports) = tokio::sync::mpsc::channel(mcp_client::PROGRESS_BACKLOG);
    let run = gate.run(servers, job, Some(progress));
    tokio::pin!(run);
    let ran = loop {
        tokio::select! {
            ran = &mut run => break ran,
            Some(p) = reports.recv() => view.update("call", name, p.progress, p.total, p.message.as_deref()),
        }
    };
    view.finish("call");
    let result = match ran {
        Ran::Mcp(Ok(result)) => result,
        Ran::Mcp(Err(error)) => bail!(failure_text(&error)),
        Ran::Refused(refusal) => bail!(refusal_text(&refusal, unavailable)),
        _ => bail!("{name} is a built-in tool; built-in tools cannot be called from the command line"),
    };
    if as_json {
        let mut text = output::json(&result, true)?;
        text.push('\n');
        output::stdout(&text)?;
    } else {
        output::stdout(&render(&result))?;
    }
    if result.is_error() {
        output::stderr(&format!("error: {} reported an error\n", output::one_line(name, 200)))?;
        return Ok(Outcome::ToolError);
    }
    Ok(Outcome::Success)
}

/// The gate's refusal for a person: one line, and for an unknown tool the servers whose tools
/// are missing because they did not connect.
fn refusal_text(refusal: &Refusal, unavailable: &[String]) -> String {
    let mut text = refusal.to_string();
    if matches!(refusal, Refusal::UnknownTool { .. }) && !unavailable.is_empty() {
        let names: Vec<String> = unavailable.iter().map(|s| format!("{s:?}")).collect();
        text.push_str(&format!(
            " (server(s) {} failed to connect, so their tools are missing; see `mcp-harness servers`)",
            names.join(", ")
        ));
    }
    if matches!(refusal, Refusal::BadArguments { .. }) {
        // One problem a line, as the gate lists them.
        return output::clean(&text);
    }
    output::one_line(&text, 2000)
}

/// Why the call failed, for a person: the failure names the tool, its server and the cause;
/// a server on its way back is said to be.
fn failure_text(error: &SourceError) -> String {
    let text = error.to_string();
    match error {
        SourceError::Unavailable { .. } if error.coming_back() == Some(true) => {
            format!("{text} (it is coming back; try again shortly)")
        }
        _ => text,
    }
}

/// Text content as is, other content summarized, structured content as pretty JSON.
fn render(result: &CallToolResult) -> String {
    let mut out = String::new();
    for block in &result.content {
        out.push_str(&output::clean(&agent_loop::content_text(block)));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if let Some(structured) = &result.structured_content {
        out.push_str("structured content:\n");
        out.push_str(&output::clean(&serde_json::to_string_pretty(structured).unwrap_or_default()));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_every_content_kind() {
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "hello\u{1b}[2J"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "audio", "data": "AA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a", "name": "a"},
                {"type": "resource", "resource": {"uri": "file:///b", "text": "bee"}},
                {"type": "resource", "resource": {"uri": "file:///c", "blob": "AAA", "mimeType": "x/y"}}
            ],
            "structuredContent": {"n": 1}
        }))
        .unwrap();
        insta::assert_snapshot!(render(&result), @r#"
        hello[2J
        [image image/png, 4 bytes base64, not shown]
        [audio audio/wav, 2 bytes base64, not shown]
        [resource link a <file:///a>]
        [resource <file:///b>]
        bee
        [resource <file:///c>: x/y, 3 bytes base64, not shown]
        structured content:
        {
          "n": 1
        }
        "#);
    }
}
