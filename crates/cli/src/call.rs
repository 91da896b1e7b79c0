//! `mcp-harness call`: one tool call through the path the agent loop takes: pool lookup,
//! argument check against the input schema, policy, then the call under the raw tool name.

use std::io::IsTerminal;

use anyhow::{Context as _, bail};
use mcp_protocol::{CallToolResult, ContentBlock};
use policy::Decision;
use serde_json::Value;
use tool_pool::{PoolEntry, check_arguments};

use crate::Outcome;
use crate::config::Config;
use crate::output;
use crate::session::Session;

/// Longest rendering of the arguments in a confirmation prompt.
const PROMPT_ARGS_CHARS: usize = 500;

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
    let session = Session::open(&config).await?;
    let result = call(&session, name, args, yes, as_json).await;
    session.close().await;
    result
}

async fn call(session: &Session, name: &str, args: Value, yes: bool, as_json: bool) -> anyhow::Result<Outcome> {
    let Some(entry) = session.pool.get(name) else {
        bail!(unknown_tool(session, name));
    };
    if let Err(problems) = check_arguments(entry.input_schema(), &args) {
        let list: String = problems.iter().map(|p| format!("\n  {}", output::one_line(&p.to_string(), 500))).collect();
        bail!("the arguments for {name} do not match its input schema:{list}");
    }
    approve(&entry, &args, yes).await?;
    let Some(server) = entry.server() else {
        bail!("{name} is a built-in tool; built-in tools cannot be called yet");
    };
    let connection = session
        .connections
        .iter()
        .find(|c| c.name() == server)
        .with_context(|| format!("server {server:?} of {name} has no connection"))?;
    let Value::Object(arguments) = args else {
        // check_arguments accepts only objects.
        bail!("the arguments must be a JSON object");
    };
    let result = connection
        .call_tool(entry.tool(), Some(arguments))
        .await
        .with_context(|| format!("calling tool {:?} of server {server:?}", entry.tool()))?;
    if as_json {
        let mut text = serde_json::to_string_pretty(&result)?;
        text.push('\n');
        output::stdout(&text)?;
    } else {
        output::stdout(&render(&result))?;
    }
    if result.is_error() {
        output::stderr(&format!("error: {name} reported an error\n"))?;
        return Ok(Outcome::ToolError);
    }
    Ok(Outcome::Success)
}

/// Applies the policy's decision: allow runs, confirm asks (or takes `--yes`). Deny never gets
/// here: denied tools are not in the pool.
async fn approve(entry: &PoolEntry<'_>, args: &Value, yes: bool) -> anyhow::Result<()> {
    let verdict = entry.verdict();
    match verdict.decision {
        Decision::Allow => Ok(()),
        Decision::Confirm if yes => Ok(()),
        Decision::Confirm => {
            let name = entry.name();
            if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
                bail!(
                    "{name} needs confirmation ({verdict}) and there is no terminal to ask on; \
                     rerun with --yes to approve this call"
                );
            }
            let origin = match entry.server() {
                Some(server) => format!("tool {:?} of server {server:?}", entry.tool()),
                None => "a built-in tool".to_owned(),
            };
            let shown = output::one_line(&args.to_string(), PROMPT_ARGS_CHARS);
            let prompt = format!("Run {name} ({origin}) with {shown}?");
            // The prompt blocks on the terminal; keep it off the async workers.
            let answer = tokio::task::spawn_blocking(move || {
                dialoguer::Confirm::new()
                    .with_prompt(prompt)
                    .default(false)
                    .interact_on_opt(&dialoguer::console::Term::stderr())
            })
            .await
            .context("the confirmation prompt failed")?
            .context("the confirmation prompt failed")?;
            match answer {
                Some(true) => Ok(()),
                _ => bail!("{name} was not approved; nothing was called"),
            }
        }
        Decision::Deny => bail!("{} is denied by policy ({})", entry.name(), verdict.source),
    }
}

/// Why `name` is not in the pool: denied by a rule, or unknown (with close matches).
fn unknown_tool(session: &Session, name: &str) -> String {
    if let Some(hidden) = session.pool.hidden().iter().find(|h| {
        let model = match &h.server {
            Some(server) => tool_pool::model_name(server, &h.tool),
            None => Some(h.tool.clone()),
        };
        model.as_deref() == Some(name)
    }) {
        let who = match &hidden.server {
            Some(server) => format!("tool {:?} of server {server:?}", hidden.tool),
            None => format!("built-in tool {:?}", hidden.tool),
        };
        let why = match &hidden.rule {
            policy::DecisionSource::Default => "the policy's default".to_owned(),
            rule => format!("policy {rule}"),
        };
        return output::one_line(&format!("{name} ({who}) is denied by {why}; nothing was called"), 500);
    }
    let mut message = format!("unknown tool {name:?}");
    let suggestions = close_matches(session, name);
    if suggestions.is_empty() {
        message.push_str(&format!("; `mcp-harness tools` lists the {} available tool(s)", session.pool.len()));
    } else {
        message.push_str(&format!("; did you mean {}?", suggestions.join(", ")));
    }
    let unavailable: Vec<String> = session.unavailable().iter().map(|(s, _)| format!("{s:?}")).collect();
    if !unavailable.is_empty() {
        message.push_str(&format!(
            " (server(s) {} failed to connect, so their tools are missing; see `mcp-harness servers`)",
            unavailable.join(", ")
        ));
    }
    message
}

/// Up to three pool names near `name`: the raw tool name given alone, a substring, or a small
/// edit distance.
fn close_matches(session: &Session, name: &str) -> Vec<String> {
    let wanted = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = session
        .pool
        .iter()
        .filter_map(|e| {
            let candidate = e.name().to_lowercase();
            let distance = strsim::levenshtein(&wanted, &candidate);
            let near = distance <= (wanted.chars().count() / 5).max(2);
            let related = e.tool().eq_ignore_ascii_case(name) || (wanted.len() >= 3 && candidate.contains(&wanted));
            (near || related).then_some((if related { 0 } else { distance }, e.name()))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, n)| n.to_owned()).collect()
}

/// Text content as is, other content summarized, structured content as pretty JSON.
fn render(result: &CallToolResult) -> String {
    let mut out = String::new();
    for block in &result.content {
        let piece = match block {
            ContentBlock::Text { text, .. } => output::clean(text),
            ContentBlock::Image { data, mime_type, .. } => {
                format!("[image: {}, {} bytes of base64]", output::one_line(mime_type, 80), data.len())
            }
            ContentBlock::Audio { data, mime_type, .. } => {
                format!("[audio: {}, {} bytes of base64]", output::one_line(mime_type, 80), data.len())
            }
            ContentBlock::ResourceLink { uri, name, .. } => {
                format!("[resource link: {} ({})]", output::one_line(uri, 300), output::one_line(name, 100))
            }
            ContentBlock::Resource { resource, .. } => match &resource.text {
                Some(text) => format!("[resource {}]\n{}", output::one_line(&resource.uri, 300), output::clean(text)),
                None => format!(
                    "[resource {}: {}, {} bytes of base64]",
                    output::one_line(&resource.uri, 300),
                    resource.mime_type.as_deref().map_or_else(|| "binary".to_owned(), |m| output::one_line(m, 80)),
                    resource.blob.as_deref().map_or(0, str::len)
                ),
            },
            ContentBlock::Other(fields) => {
                let kind = fields.get("type").and_then(|t| t.as_str()).unwrap_or("unknown");
                format!("[content of type {}, not shown]", output::one_line(kind, 80))
            }
        };
        out.push_str(&piece);
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
        [image: image/png, 4 bytes of base64]
        [audio: audio/wav, 2 bytes of base64]
        [resource link: file:///a (a)]
        [resource file:///b]
        bee
        [resource file:///c: x/y, 3 bytes of base64]
        structured content:
        {
          "n": 1
        }
        "#);
    }
}
