//! What servers offer besides tools, for people: `resources`, `read`, `prompts` and `prompt`.
//!
//! Everything a server says (names, descriptions, resource text, prompt messages) is printed
//! through [`output::stdout`] and [`output::json`], so it drives no terminal; `--json` keeps the
//! exact text. A server that does not declare `resources` or `prompts` simply has none (nothing
//! is asked of it); a server that failed to connect, or whose listing failed, is a warning on
//! stderr (a `diagnostics` entry with `--json`) and the others are still shown.

use anyhow::{Context as _, bail};
use mcp_client::{Client, ClientError, DEFAULT_MAX_RESOURCE_BYTES, ListLimits, ServerConnection, close_all};
use mcp_protocol::{GetPromptResult, Prompt, Resource, ResourceTemplate};
use serde_json::{Map, Value, json};

use crate::Outcome;
use crate::output;
use crate::session;
use mcp_host::config::Config;

/// Width of the description column of the tables.
const DESCRIPTION_WIDTH: usize = 60;

/// Connects the enabled servers (a signal while connecting drops them, killing their process
/// groups).
async fn connect(config: &Config) -> anyhow::Result<Vec<ServerConnection>> {
    Ok(crate::signals::interruptible(crate::host::connect(config)).await?)
}

/// Connects only `server`, or says why it cannot be used (unknown, disabled, failed).
async fn connect_one(mut config: Config, server: &str) -> anyhow::Result<ServerConnection> {
    if !config.servers.iter().any(|s| s.name == server) {
        let names: Vec<String> = config.servers.iter().map(|s| format!("{:?}", s.name)).collect();
        let known = if names.is_empty() { "none is configured".to_owned() } else { names.join(", ") };
        bail!("no server is named {server:?} in the configuration (configured: {known}; see `mcp-harness mcp list`)");
    }
    config.servers.retain(|s| s.name == server);
    let mut connections = connect(&config).await?;
    let Some(connection) = connections.pop() else { bail!("internal error: server {server:?} was not connected") };
    if !connection.is_connected() {
        let state = connection.state().to_string();
        connection.close().await;
        bail!("server {server:?} is not available: {state} (see `mcp-harness servers`)");
    }
    Ok(connection)
}

/// Starts only `server`, asks it one thing, and closes it (also when a signal stops the
/// asking, which fails with [`crate::signals::Interrupted`]).
async fn ask<T>(
    config: Config,
    server: &str,
    question: impl AsyncFnOnce(&Client) -> Result<T, ClientError>,
) -> anyhow::Result<Result<T, ClientError>> {
    let connection = connect_one(config, server).await?;
    let answer = match connection.client() {
        Some(client) => crate::signals::interruptible(question(client)).await,
        None => Ok(Err(ClientError::ConnectionClosed { reason: format!("server {server:?} is not connected") })),
    };
    connection.close().await;
    Ok(answer?)
}

fn listing_failed(server: &str, what: &str, error: &ClientError) -> Value {
    let message = format!("listing the {what} of server {server:?} failed: {error}");
    json!({ "server": server, "kind": "list_failed", "message": message })
}

/// Writes `out` on stdout and each diagnostic as a warning on stderr.
fn print(out: &str, diagnostics: &[Value]) -> anyhow::Result<()> {
    output::stdout(out)?;
    for d in diagnostics {
        let message = d.get("message").and_then(Value::as_str).unwrap_or_default();
        output::stderr(&format!("warning: {}\n", output::one_line(message, 500)))?;
    }
    Ok(())
}

fn pretty(value: &Value) -> anyhow::Result<String> {
    let mut text = output::json(value, true)?;
    text.push('\n');
    Ok(text)
}

/// `value`'s fields with the server's name first.
fn with_server(server: &str, value: impl serde::Serialize) -> Value {
    let mut fields = Map::new();
    fields.insert("server".to_owned(), json!(server));
    if let Ok(Value::Object(rest)) = serde_json::to_value(value) {
        fields.extend(rest);
    }
    Value::Object(fields)
}

fn cell(text: Option<&str>, width: usize) -> String {
    text.map_or_else(|| "-".to_owned(), |t| output::one_line(t, width))
}

/// `mcp-harness resources [--json]`: every connected server's resources and templates.
pub(crate) async fn resources_command(config: Config, as_json: bool) -> anyhow::Result<Outcome> {
    let connections = connect(&config).await?;
    let mut diagnostics = session::unavailable_diagnostics(&connections, "resources");
    let mut resources: Vec<(&str, Resource)> = Vec::new();
    let mut templates: Vec<(&str, ResourceTemplate)> = Vec::new();
    for c in connections.iter().filter(|c| c.is_connected()) {
        let Some(client) = c.client() else { continue };
        match client.list_all_resources(ListLimits::default()).await {
            Ok(list) => resources.extend(list.into_iter().map(|r| (c.name(), r))),
            Err(e) => diagnostics.push(listing_failed(c.name(), "resources", &e)),
        }
        match client.list_all_resource_templates(ListLimits::default()).await {
            Ok(list) => templates.extend(list.into_iter().map(|t| (c.name(), t))),
            Err(e) => diagnostics.push(listing_failed(c.name(), "resource templates", &e)),
        }
    }
    let printed = if as_json {
        let value = json!({
            "resources": resources.iter().map(|(s, r)| with_server(s, r)).collect::<Vec<_>>(),
            "templates": templates.iter().map(|(s, t)| with_server(s, t)).collect::<Vec<_>>(),
            "diagnostics": diagnostics,
        });
        pretty(&value).and_then(|text| Ok(output::stdout(&text)?))
    } else {
        print(&resources_table(&resources, &templates), &diagnostics)
    };
    close_all(connections).await;
    printed?;
    Ok(Outcome::Success)
}

fn resources_table(resources: &[(&str, Resource)], templates: &[(&str, ResourceTemplate)]) -> String {
    let mut out = if resources.is_empty() {
        "no resources are offered\n".to_owned()
    } else {
        let rows: Vec<Vec<String>> = resources
            .iter()
            .map(|(server, r)| {
                let description = r.description.as_deref().or(r.title.as_deref()).unwrap_or(&r.name);
                resource_row(server, &r.uri, r.mime_type.as_deref(), description)
            })
            .collect();
        output::table(&["SERVER", "URI", "MIME", "DESCRIPTION"], &rows)
    };
    if !templates.is_empty() {
        let rows: Vec<Vec<String>> = templates
            .iter()
            .map(|(server, t)| {
                let description = t.description.as_deref().or(t.title.as_deref()).unwrap_or(&t.name);
                resource_row(server, &t.uri_template, t.mime_type.as_deref(), description)
            })
            .collect();
        out.push('\n');
        out.push_str(&output::table(&["SERVER", "TEMPLATE", "MIME", "DESCRIPTION"], &rows));
    }
    out
}

/// One line of the resources or the templates table, each cell on one terminal-safe line.
fn resource_row(server: &str, uri: &str, mime: Option<&str>, description: &str) -> Vec<String> {
    vec![
        output::one_line(server, 40),
        output::one_line(uri, 120),
        cell(mime, 40),
        output::one_line(description, DESCRIPTION_WIDTH),
    ]
}

/// Whether the resource rules let a person read `uri` of `server`: a `deny` is an error naming
/// the rule, a `confirm` asks on the terminal (or needs `yes`). Checked before any server
/// starts.
fn check_resource_policy(config: &Config, server: &str, uri: &str, yes: bool) -> anyhow::Result<()> {
    let Some(verdict) = config.policy.decide_resource(server, uri) else { return Ok(()) };
    let what = format!("reading {:?} of server {:?}", output::one_line(uri, 300), output::one_line(server, 100));
    match verdict.decision {
        policy::Decision::Allow => Ok(()),
        policy::Decision::Deny => {
            bail!("{what} is denied by policy {}; nothing was read", output::one_line(&verdict.source.to_string(), 500))
        }
        policy::Decision::Confirm if yes => Ok(()),
        policy::Decision::Confirm => {
            let question = format!("Allow {what}? ({})", output::one_line(&verdict.source.to_string(), 500));
            match crate::approve::confirm(&question) {
                Some(true) => Ok(()),
                Some(false) => bail!("{what} was not approved; nothing was read"),
                None => bail!(
                    "{what} needs confirmation ({}) and there is no terminal to ask on; rerun with --yes to approve it",
                    output::one_line(&verdict.to_string(), 500)
                ),
            }
        }
    }
}

/// `mcp-harness read SERVER URI [--yes] [--json]`: text as is, blobs summarized (`--json` has
/// them). Resource rules of the policy apply (`--yes` approves a `confirm`).
pub(crate) async fn read_command(
    config: Config,
    server: &str,
    uri: &str,
    yes: bool,
    as_json: bool,
) -> anyhow::Result<Outcome> {
    check_resource_policy(&config, server, uri, yes)?;
    let read = ask(config, server, async |client| client.read_resource(uri, DEFAULT_MAX_RESOURCE_BYTES).await).await?;
    let result = read.with_context(|| format!("reading {uri:?} from server {server:?}"))?;
    if as_json {
        output::stdout(&pretty(&serde_json::to_value(&result)?)?)?;
        return Ok(Outcome::Success);
    }
    let mut out = String::new();
    let several = result.contents.len() > 1;
    for contents in &result.contents {
        if several {
            out.push_str(&format!("[{}]\n", output::one_line(&contents.uri, 300)));
        }
        match (&contents.text, &contents.blob) {
            (Some(text), _) => out.push_str(text),
            (None, Some(blob)) => out.push_str(&format!(
                "[binary: {}, {} bytes of base64; --json has them]",
                contents.mime_type.as_deref().map_or_else(|| "unknown type".to_owned(), |m| output::one_line(m, 80)),
                blob.len()
            )),
            (None, None) => out.push_str("[no contents]"),
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if result.contents.is_empty() {
        out.push_str("the resource has no contents\n");
    }
    output::stdout(&out)?;
    Ok(Outcome::Success)
}

/// `mcp-harness prompts [--json]`: every connected server's prompts.
pub(crate) async fn prompts_command(config: Config, as_json: bool) -> anyhow::Result<Outcome> {
    let connections = connect(&config).await?;
    let mut diagnostics = session::unavailable_diagnostics(&connections, "prompts");
    let mut prompts: Vec<(&str, Prompt)> = Vec::new();
    for c in connections.iter().filter(|c| c.is_connected()) {
        let Some(client) = c.client() else { continue };
        match client.list_all_prompts(ListLimits::default()).await {
            Ok(list) => prompts.extend(list.into_iter().map(|p| (c.name(), p))),
            Err(e) => diagnostics.push(listing_failed(c.name(), "prompts", &e)),
        }
    }
    let printed = if as_json {
        let value = json!({
            "prompts": prompts.iter().map(|(s, p)| with_server(s, p)).collect::<Vec<_>>(),
            "diagnostics": diagnostics,
        });
        pretty(&value).and_then(|text| Ok(output::stdout(&text)?))
    } else if prompts.is_empty() {
        print("no prompts are offered\n", &diagnostics)
    } else {
        let rows: Vec<Vec<String>> = prompts
            .iter()
            .map(|(server, p)| {
                vec![
                    output::one_line(server, 40),
                    output::one_line(&p.name, 80),
                    output::one_line(&arguments_of(p), 80),
                    cell(p.description.as_deref().or(p.title.as_deref()), DESCRIPTION_WIDTH),
                ]
            })
            .collect();
        print(&output::table(&["SERVER", "PROMPT", "ARGUMENTS", "DESCRIPTION"], &rows), &diagnostics)
    };
    close_all(connections).await;
    printed?;
    Ok(Outcome::Success)
}

/// `name style?`: the optional ones marked, `-` for none.
pub(crate) fn arguments_of(prompt: &Prompt) -> String {
    let Some(arguments) = prompt.arguments.as_ref().filter(|a| !a.is_empty()) else { return "-".to_owned() };
    let names: Vec<String> = arguments
        .iter()
        .map(|a| if a.required == Some(true) { a.name.clone() } else { format!("{}?", a.name) })
        .collect();
    names.join(" ")
}

/// `KEY=VALUE` arguments as the prompt's argument object; a key given twice is refused.
fn prompt_arguments(pairs: &[String]) -> anyhow::Result<Option<Map<String, Value>>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut arguments = Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--arg {pair:?} is not KEY=VALUE (for example --arg name=Ada)");
        };
        if key.is_empty() {
            bail!("--arg {pair:?} has an empty name (write KEY=VALUE)");
        }
        if arguments.insert(key.to_owned(), json!(value)).is_some() {
            bail!("--arg {key} is given twice");
        }
    }
    Ok(Some(arguments))
}

/// `mcp-harness prompt SERVER NAME [--arg KEY=VALUE ...] [--json]`: the prompt's messages,
/// each under its role.
pub(crate) async fn prompt_command(
    config: Config,
    server: &str,
    name: &str,
    pairs: &[String],
    as_json: bool,
) -> anyhow::Result<Outcome> {
    // Bad arguments need no server: fail before starting it.
    let arguments = prompt_arguments(pairs)?;
    let got = ask(config, server, async |client| client.get_prompt(name, arguments).await).await?;
    let result = got.with_context(|| format!("getting prompt {name:?} from server {server:?}"))?;
    if as_json {
        output::stdout(&pretty(&serde_json::to_value(&result)?)?)?;
        return Ok(Outcome::Success);
    }
    output::stdout(&prompt_text(&result))?;
    Ok(Outcome::Success)
}

/// A prompt's description and messages for a person (`prompt`, and `chat` showing what it
/// sends): each message under its role, terminal-safe.
pub(crate) fn prompt_text(result: &GetPromptResult) -> String {
    let mut out = String::new();
    if let Some(description) = &result.description {
        out.push_str(&format!("# {}\n\n", output::one_line(description, 300)));
    }
    for (i, message) in result.messages.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("[{}]\n", output::one_line(&message.role, 40)));
        out.push_str(&output::clean(&agent_loop::content_text(&message.content)));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if result.messages.is_empty() {
        out.push_str("the prompt has no messages\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_arguments_are_key_value_pairs() {
        let pairs = vec!["name=Ada".to_owned(), "style=a=b".to_owned()];
        assert_eq!(prompt_arguments(&pairs).unwrap(), json!({"name": "Ada", "style": "a=b"}).as_object().cloned());
        assert_eq!(prompt_arguments(&[]).unwrap(), None);
        let err = prompt_arguments(&["name".to_owned()]).unwrap_err().to_string();
        assert!(err.contains("is not KEY=VALUE"), "{err}");
        let err = prompt_arguments(&["=x".to_owned()]).unwrap_err().to_string();
        assert!(err.contains("empty name"), "{err}");
        let err = prompt_arguments(&["a=1".to_owned(), "a=2".to_owned()]).unwrap_err().to_string();
        assert!(err.contains("given twice"), "{err}");
    }
}
