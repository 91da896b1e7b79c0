//! The model's way to MCP resources: the built-in tools [`LIST_RESOURCES_TOOL`] and
//! [`READ_RESOURCE_TOOL`], over any [`ToolSource`] that offers resources.
//!
//! They are ordinary built-ins: in the pool under their own names, through policy, approval and
//! hooks like any tool. What they return is a tool result like any other: resource text is
//! untrusted server output and takes the same way to the model and the terminal, including the
//! result budget (a text over it is saved in the session's directory and the model gets an
//! excerpt and the path). Blobs are never inlined: they are saved, decoded, in the session's
//! `resources/` directory (0600 in 0700) and the model gets their type, size and path.
//!
//! Resource rules of the policy apply on top of the tools' own decisions: a read is decided
//! by the stricter of [`READ_RESOURCE_TOOL`]'s rule and the resource's, and a resource (or
//! template) denied by a resource rule is left out of listings, so the model never sees it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use mcp_protocol::ResourceContents;
use serde_json::{Value, json};

use crate::ports::BuiltinTool;
use crate::source::ToolSource;

/// The name of the built-in tool that lists resources.
pub const LIST_RESOURCES_TOOL: &str = "list_mcp_resources";
/// The name of the built-in tool that reads one resource.
pub const READ_RESOURCE_TOOL: &str = "read_mcp_resource";
/// At most this many resources and templates in one answer of [`LIST_RESOURCES_TOOL`]; the
/// model asks for the next ones with `offset`. 50 entries of capped fields stay well under the
/// default result budget.
pub const MAX_LISTED: usize = 50;
/// Names, URIs and descriptions in a listing are cut to this many characters: they come from
/// servers, and a listing must stay bounded.
const FIELD_CHARS: usize = 300;

/// The two resource tools over `source`; blobs are saved under `session_dir/resources/` (not
/// at all without a session directory).
pub fn resource_tools(source: Arc<dyn ToolSource>, session_dir: Option<PathBuf>) -> Vec<Arc<dyn BuiltinTool>> {
    vec![
        Arc::new(ListResources { source: Arc::clone(&source) }),
        Arc::new(ReadResource { source, dir: session_dir.map(|d| d.join("resources")) }),
    ]
}

struct ListResources {
    source: Arc<dyn ToolSource>,
}

struct ReadResource {
    source: Arc<dyn ToolSource>,
    dir: Option<PathBuf>,
}

fn field(text: &str) -> String {
    mcp_safety::text::one_line(text, FIELD_CHARS)
}

#[async_trait]
impl BuiltinTool for ListResources {
    fn spec(&self) -> tool_pool::BuiltinTool {
        tool_pool::BuiltinTool {
            name: LIST_RESOURCES_TOOL.into(),
            description: format!(
                "List the resources (and resource templates) the connected MCP servers offer, at most {MAX_LISTED} \
                 at a time. Read one with {READ_RESOURCE_TOOL}."
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "Only this server's resources."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Skip this many entries (from next_offset)."}
                },
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, input: &Value) -> Result<String, String> {
        self.list(input, None).await
    }

    async fn call_under(&self, input: &Value, policy: &policy::Policy) -> Result<String, String> {
        self.list(input, Some(policy)).await
    }
}

/// Whether `policy` denies resource (or template) `uri` of `server` outright.
fn denied(policy: Option<&policy::Policy>, server: &str, uri: &str) -> bool {
    policy.and_then(|p| p.decide_resource(server, uri)).is_some_and(|v| v.decision == policy::Decision::Deny)
}

impl ListResources {
    /// The listing, without what `policy` denies.
    async fn list(&self, input: &Value, policy: Option<&policy::Policy>) -> Result<String, String> {
        let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0);
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let servers = match input.get("server").and_then(Value::as_str) {
            Some(server) => vec![server.to_owned()],
            None => self.source.resource_servers().await,
        };
        let mut entries: Vec<Value> = Vec::new();
        let mut errors: Vec<String> = Vec::new();
        for server in &servers {
            match self.source.resources(server).await {
                Ok((resources, templates)) => {
                    for r in resources.into_iter().filter(|r| !denied(policy, server, &r.uri)) {
                        let mut entry = json!({"server": field(server), "uri": field(&r.uri), "name": field(&r.name)});
                        if let Some(mime) = &r.mime_type {
                            entry["mimeType"] = json!(field(mime));
                        }
                        if let Some(description) = &r.description {
                            entry["description"] = json!(field(description));
                        }
                        entries.push(entry);
                    }
                    for t in templates.into_iter().filter(|t| !denied(policy, server, &t.uri_template)) {
                        let mut entry = json!({"server": field(server), "uriTemplate": field(&t.uri_template), "name": field(&t.name)});
                        if let Some(description) = &t.description {
                            entry["description"] = json!(field(description));
                        }
                        entries.push(entry);
                    }
                }
                Err(e) => errors.push(field(&format!("server {server:?}: {e}"))),
            }
        }
        if entries.is_empty() && !errors.is_empty() && servers.len() == 1 {
            return Err(errors.join("; "));
        }
        let total = entries.len();
        let page: Vec<Value> = entries.into_iter().skip(offset).take(MAX_LISTED).collect();
        let mut answer = json!({"resources": page, "total": total});
        let next = offset.saturating_add(MAX_LISTED);
        if next < total {
            answer["next_offset"] = json!(next);
        }
        if !errors.is_empty() {
            answer["errors"] = json!(errors);
        }
        serde_json::to_string(&answer).map_err(|e| e.to_string())
    }
}

#[async_trait]
impl BuiltinTool for ReadResource {
    fn decide_input(&self, policy: &policy::Policy, input: &Value) -> Option<policy::Verdict> {
        let server = input.get("server").and_then(Value::as_str)?;
        let uri = input.get("uri").and_then(Value::as_str)?;
        policy.decide_resource(server, uri)
    }

    fn spec(&self) -> tool_pool::BuiltinTool {
        tool_pool::BuiltinTool {
            name: READ_RESOURCE_TOOL.into(),
            description: format!(
                "Read one resource of an MCP server by its URI (from {LIST_RESOURCES_TOOL}, or a template filled \
                 in). Text comes back inline (a long text as an excerpt and the file it is saved in); binary \
                 content is saved to a file whose path you get."
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "The server offering the resource."},
                    "uri": {"type": "string", "description": "The resource's URI."}
                },
                "required": ["server", "uri"],
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, input: &Value) -> Result<String, String> {
        // The gate checked the input against the schema; these are only belt and braces.
        let server = input.get("server").and_then(Value::as_str).ok_or("\"server\" must be a string")?;
        let uri = input.get("uri").and_then(Value::as_str).ok_or("\"uri\" must be a string")?;
        let read = self
            .source
            .read_resource(server, uri, mcp_client::DEFAULT_MAX_RESOURCE_BYTES)
            .await
            .map_err(|e| format!("server {server:?}: {e}"))?;
        if read.contents.is_empty() {
            return Ok(format!("[resource <{}>: empty]", field(uri)));
        }
        let parts: Vec<String> = read.contents.iter().map(|c| self.part(c)).collect();
        Ok(parts.join("\n"))
    }
}

impl ReadResource {
    /// One content of a read: text inline, a blob saved.
    fn part(&self, content: &ResourceContents) -> String {
        let uri = field(&content.uri);
        let mime = content.mime_type.as_deref().map(field);
        match (&content.text, &content.blob) {
            (Some(text), _) => match mime {
                Some(mime) => format!("[resource <{uri}> ({mime})]\n{text}"),
                None => format!("[resource <{uri}>]\n{text}"),
            },
            (None, Some(blob)) => {
                let mime = mime.unwrap_or_else(|| "binary".to_owned());
                let bytes = match base64::engine::general_purpose::STANDARD.decode(blob.trim()) {
                    Ok(bytes) => bytes,
                    Err(e) => return format!("[resource <{uri}>: {mime}, its base64 is invalid ({e}); not saved]"),
                };
                let Some(dir) = &self.dir else {
                    return format!(
                        "[resource <{uri}>: {mime}, {} bytes, not shown (no session directory to save it in)]",
                        bytes.len()
                    );
                };
                match save_blob(dir, &content.uri, &bytes) {
                    Ok(path) => {
                        format!("[resource <{uri}>: {mime}, {} bytes, saved in {}]", bytes.len(), path.display())
                    }
                    Err(e) => format!("[resource <{uri}>: {mime}, {} bytes, could not be saved: {e}]", bytes.len()),
                }
            }
            (None, None) => format!("[resource <{uri}>: empty]"),
        }
    }
}

/// Saves a blob as `dir/<n>-<last URI segment>` under the first number not taken (so a
/// resumed session does not overwrite earlier reads), 0600 in 0700.
fn save_blob(dir: &Path, uri: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    // The URI comes from the model and the server: keep only characters safe in a file name.
    let tail = uri.rsplit(['/', ':']).find(|s| !s.is_empty()).unwrap_or("resource");
    let safe: String = tail
        .chars()
        .take(80)
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' })
        .collect();
    let safe = safe.trim_start_matches('.');
    let safe = if safe.is_empty() { "resource" } else { safe };
    let mut n = 1u32;
    let path = loop {
        let path = dir.join(format!("{n}-{safe}"));
        if !path.exists() || n == u32::MAX {
            break path;
        }
        n += 1;
    };
    private_files::write(&path, bytes)?;
    Ok(path)
}
