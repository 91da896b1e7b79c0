//! Other hosts' configuration files, read as they are: Claude Desktop's
//! `claude_desktop_config.json`, Claude Code's `.mcp.json` and `~/.claude.json`, Cursor's and VS
//! Code's `mcp.json`, Codex's `config.toml`.
//!
//! Each entry becomes a [`RawServer`] in our own terms (their key names mapped to ours, their
//! variable syntax brought into ours by [`vars::to_ours`]), so the same checks apply to every
//! format. Keys of a server entry we don't use are reported (once per key) as warnings naming
//! the file and key; keys whose loss would change what a server may do are errors. What a host
//! keeps beside its servers (its own settings) is not ours to report and is left alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::ConfigError;
use super::raw::{
    RawRuntime, RawSandboxDefaults, RawServe, RawServer, RawToml, RawTools, json_message, key_of, line_column,
};
use super::vars::{Surroundings, Syntax};
use policy::PolicyConfig;

mod json;
mod translate;

pub(crate) use json::with_position;
use json::{is_json, without_comments};
use translate::{Unused, entry, read_entries, translate};

/// Whose format a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Host {
    /// Our own TOML.
    Ours,
    /// Claude Desktop's `claude_desktop_config.json`.
    ClaudeDesktop,
    /// Claude Code's `.mcp.json` (a project) or `~/.claude.json` (the user's, with projects).
    ClaudeCode,
    /// Cursor's `mcp.json`.
    Cursor,
    /// VS Code's `mcp.json` (`servers` and `inputs`).
    VsCode,
    /// Codex's `config.toml` (`[mcp_servers.NAME]`).
    Codex,
    /// An `mcpServers` JSON file of no host we can tell (ours too, as `config.json`).
    McpServers,
}

impl Host {
    /// How people call it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Ours => "mcp-harness TOML",
            Self::ClaudeDesktop => "Claude Desktop JSON",
            Self::ClaudeCode => "Claude Code JSON",
            Self::Cursor => "Cursor JSON",
            Self::VsCode => "VS Code JSON",
            Self::Codex => "Codex TOML",
            Self::McpServers => "mcpServers JSON",
        }
    }

    /// The variable syntax of its strings.
    fn syntax(self) -> Syntax {
        match self {
            Self::Ours => Syntax::Ours,
            Self::ClaudeDesktop | Self::ClaudeCode => Syntax::Claude,
            Self::Cursor => Syntax::Cursor,
            Self::VsCode => Syntax::VsCode,
            Self::Codex => Syntax::Literal,
            Self::McpServers => Syntax::Any,
        }
    }
}

/// A VS Code input (`inputs` of its `mcp.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Input {
    /// Its id, as in `${input:ID}`.
    pub id: String,
    /// `promptString` or `pickString` (others are refused when asked for).
    pub kind: String,
    /// What to ask.
    pub description: String,
    /// Hide what is typed.
    pub password: bool,
    /// The answer when nothing is typed.
    pub default: Option<String>,
    /// A `pickString`'s choices.
    pub options: Vec<String>,
}

/// A configuration file read, its strings in the internal form, nothing expanded yet (what
/// `mcp list` shows and `mcp import` copies).
#[non_exhaustive]
pub struct RawFile {
    /// Whose format.
    pub host: Host,
    /// How the file spells its table of servers (`servers`, `mcpServers`, `mcp_servers`).
    pub(crate) table: &'static str,
    /// Every server entry.
    pub servers: BTreeMap<String, RawServer>,
    /// `[policy]` (ours and our JSON only).
    pub(crate) policy: PolicyConfig,
    /// `[sandbox]` (ours and our JSON only).
    pub(crate) sandbox: RawSandboxDefaults,
    /// `[runtime]` (ours only).
    pub(crate) runtime: RawRuntime,
    /// `[serve]` (ours only).
    pub(crate) serve: RawServe,
    /// VS Code inputs.
    pub(crate) inputs: Vec<Input>,
    /// Keys read and not used, one line each.
    pub warnings: Vec<String>,
    /// Tool exposure and search keys of the top level (ours only).
    pub(crate) tools: RawTools,
    /// `[telemetry]` (ours only).
    pub(crate) telemetry: mcp_telemetry::config::TelemetrySettings,
}

/// What the reader needs to know of where it runs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ReadContext<'a> {
    /// The user's home directory.
    pub(crate) home: Option<&'a Path>,
    /// The current directory (Claude Code's local servers, VS Code's workspace folder).
    pub(crate) cwd: Option<&'a Path>,
}

/// The keys of a host's server entries: what each becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// Read as our key of that name.
    Ours(&'static str),
    /// Read by code of its own (a translation; see [`translate`]).
    Special,
    /// Not used: a warning with the reason.
    Unused(&'static str),
    /// Its loss would change what the server may do: an error with the reason.
    Refused(&'static str),
}

/// Every key of an `mcpServers` entry (Claude Desktop, Claude Code, Cursor, our JSON) that is
/// read, with what it becomes; any other key is reported as unused. Our own TOML keys are read
/// as they are (see [`RawServer`]).
pub(crate) const MCP_SERVERS_KEYS: &[(&str, Key)] = &[
    ("type", Key::Ours("type")),
    ("command", Key::Ours("command")),
    ("args", Key::Ours("args")),
    ("env", Key::Special),
    ("url", Key::Ours("url")),
    ("headers", Key::Ours("headers")),
    ("cwd", Key::Ours("cwd")),
    ("envFile", Key::Ours("env_file")),
    ("disabled", Key::Special),
    ("oauth", Key::Special),
    ("headersHelper", Key::Unused("a command that makes headers is not run")),
    ("autoApprove", Key::Unused("tools are decided by mcp-harness's [policy], which asks by default")),
    ("alwaysAllow", Key::Unused("tools are decided by mcp-harness's [policy], which asks by default")),
];

/// Every key of a VS Code `servers` entry.
pub(crate) const VSCODE_KEYS: &[(&str, Key)] = &[
    ("type", Key::Ours("type")),
    ("command", Key::Ours("command")),
    ("args", Key::Ours("args")),
    ("env", Key::Special),
    ("envFile", Key::Ours("env_file")),
    ("cwd", Key::Ours("cwd")),
    ("url", Key::Ours("url")),
    ("headers", Key::Ours("headers")),
    ("transport", Key::Ours("type")),
    ("oauth", Key::Special),
    ("sandboxEnabled", Key::Special),
    ("dev", Key::Unused("VS Code's development mode (watch, debug)")),
    ("gallery", Key::Unused("where VS Code installed it from")),
    ("version", Key::Unused("the version VS Code installed")),
];

/// Every key of a Codex `[mcp_servers.NAME]` table.
pub(crate) const CODEX_KEYS: &[(&str, Key)] = &[
    ("command", Key::Ours("command")),
    ("args", Key::Ours("args")),
    ("env", Key::Ours("env")),
    ("env_vars", Key::Ours("env_vars")),
    ("cwd", Key::Ours("cwd")),
    ("url", Key::Ours("url")),
    ("bearer_token_env_var", Key::Ours("bearer_token_env_var")),
    ("http_headers", Key::Ours("headers")),
    ("env_http_headers", Key::Special),
    ("startup_timeout_sec", Key::Ours("startup_timeout_s")),
    ("startup_timeout_ms", Key::Special),
    ("tool_timeout_sec", Key::Ours("tool_timeout_s")),
    ("enabled", Key::Ours("enabled")),
    ("required", Key::Ours("required")),
    ("enabled_tools", Key::Ours("enabled_tools")),
    ("disabled_tools", Key::Ours("disabled_tools")),
    ("default_tools_approval_mode", Key::Special),
    ("tools", Key::Special),
    (
        "bearer_token",
        Key::Refused(
            "a token written in the file is not read; put it in an environment variable and name it with `bearer_token_env_var`",
        ),
    ),
    (
        "experimental_environment",
        Key::Refused("it starts the server somewhere else than this machine, which mcp-harness cannot do"),
    ),
    ("supports_parallel_tool_calls", Key::Unused("mcp-harness runs allowed calls concurrently anyway")),
    ("scopes", Key::Unused("OAuth scopes are chosen from what the server advertises")),
    ("oauth_resource", Key::Unused("the OAuth resource is the server's URL")),
    ("name", Key::Unused("a display name")),
];

/// Reads `text` (from `path`) in whichever format it is.
pub(crate) fn read(path: &Path, text: &str, cx: ReadContext<'_>) -> Result<RawFile, ConfigError> {
    if is_json(path, text) {
        read_json(path, text, cx).map_err(|e| with_position(e, path, text))
    } else {
        read_toml(path, text)
    }
}

pub(super) fn invalid(
    path: &Path,
    key: Option<String>,
    message: String,
    position: Option<(usize, usize)>,
) -> ConfigError {
    ConfigError::Invalid { path: path.to_path_buf(), key, message, position }
}

/// `table.name`, quoted when the name is not a bare key.
pub(crate) fn entry_key(table: &str, name: &str) -> String {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        format!("{table}.{name}")
    } else {
        format!("{table}.{name:?}")
    }
}

fn read_toml(path: &Path, text: &str) -> Result<RawFile, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        invalid(path, None, format!("invalid TOML: {}", e.message()), e.span().map(|s| line_column(text, s.start)))
    })?;
    if table.contains_key("mcp_servers") && !table.contains_key("servers") {
        return read_codex(path, table);
    }
    let de = toml::Deserializer::parse(text).map_err(|e| {
        invalid(path, None, format!("invalid TOML: {}", e.message()), e.span().map(|s| line_column(text, s.start)))
    })?;
    let mut raw: RawToml = serde_path_to_error::deserialize(de).map_err(|e| {
        let key = key_of(e.path());
        let inner = e.into_inner();
        invalid(path, key, inner.message().to_owned(), inner.span().map(|s| line_column(text, s.start)))
    })?;
    let tools = raw.take_tools();
    Ok(RawFile {
        host: Host::Ours,
        table: "servers",
        servers: raw.servers,
        policy: raw.policy,
        sandbox: raw.sandbox,
        runtime: raw.runtime,
        serve: raw.serve,
        inputs: Vec::new(),
        warnings: Vec::new(),
        tools,
        telemetry: raw.telemetry,
    })
}

fn read_json(path: &Path, text: &str, cx: ReadContext<'_>) -> Result<RawFile, ConfigError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let parent = path.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or("");
    let cleaned = without_comments(text, name == "mcp.json");
    let mut de = serde_json::Deserializer::from_str(&cleaned);
    let value = Value::deserialize(&mut de).and_then(|v| de.end().map(|()| v)).map_err(|e| {
        invalid(path, None, format!("invalid JSON: {}", json_message(&e)), Some((e.line(), e.column())))
    })?;
    let Value::Object(top) = value else {
        return Err(invalid(path, None, "expected a JSON object".into(), None));
    };
    // The folder a workspace file belongs to: `.vscode/mcp.json` and `.cursor/mcp.json` are in
    // it; a user's file means the current directory, as in the editor.
    let folder: Option<PathBuf> = match parent {
        ".vscode" | ".cursor" => path.parent().and_then(Path::parent).map(Path::to_path_buf),
        _ => cx.cwd.map(Path::to_path_buf),
    };
    let around = Surroundings { home: cx.home, workspace_folder: folder.as_deref() };
    let mut unused = Unused::default();
    let mut servers = BTreeMap::new();
    let mut warnings = Vec::new();
    let object = |key: &str| -> Result<Option<&Map<String, Value>>, ConfigError> {
        match top.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map)),
            Some(other) => {
                Err(invalid(path, Some(key.into()), format!("expected a table of servers, not {other}"), None))
            }
        }
    };
    if top.contains_key("servers") && !top.contains_key("mcpServers") {
        let host = Host::VsCode;
        let table = "servers";
        if let Some(entries) = object("servers")? {
            read_entries(path, host, table, entries, VSCODE_KEYS, around, &mut unused, &mut servers)?;
        }
        if top.contains_key("sandbox") {
            return Err(invalid(
                path,
                Some("sandbox".into()),
                "VS Code's sandbox settings are not translated (mcp-harness confines servers with its own \
                 sandbox, which cannot allow domains one by one); servers with `sandboxEnabled` run without \
                 network. Remove the table, or import the servers and set `sandbox` in mcp-harness's TOML"
                    .into(),
                None,
            ));
        }
        let inputs = read_inputs(path, top.get("inputs"))?;
        for key in top.keys().filter(|k| !matches!(k.as_str(), "servers" | "inputs")) {
            warnings.push(format!("{}: top-level `{key}` is not used by mcp-harness and was ignored", path.display()));
        }
        warnings.extend(unused.lines(path, table));
        return Ok(RawFile {
            host,
            table,
            servers,
            policy: PolicyConfig::default(),
            sandbox: RawSandboxDefaults::default(),
            runtime: RawRuntime::default(),
            serve: RawServe::default(),
            telemetry: Default::default(),
            inputs,
            warnings,
            tools: RawTools::default(),
        });
    }
    let host = match (name, parent) {
        ("claude_desktop_config.json", _) => Host::ClaudeDesktop,
        (".mcp.json" | ".claude.json", _) => Host::ClaudeCode,
        ("mcp.json", ".cursor") => Host::Cursor,
        _ if top.contains_key("projects") && !top.contains_key("policy") => Host::ClaudeCode,
        _ => Host::McpServers,
    };
    let table = "mcpServers";
    let entries = object("mcpServers")?;
    // `~/.claude.json`: the user's servers, then the current directory's own (which win).
    let local = match (top.get("projects"), cx.cwd) {
        (Some(Value::Object(projects)), Some(cwd)) if host == Host::ClaudeCode => {
            projects.get(cwd.to_string_lossy().as_ref()).and_then(|p| p.get("mcpServers")).and_then(Value::as_object)
        }
        _ => None,
    };
    if entries.is_none() && local.is_none() && !top.contains_key("projects") {
        return Err(invalid(
            path,
            None,
            "no servers: expected `mcpServers` (Claude Desktop, Claude Code, Cursor) or `servers` (VS Code)".into(),
            None,
        ));
    }
    for entries in [entries, local].into_iter().flatten() {
        read_entries(path, host, table, entries, MCP_SERVERS_KEYS, around, &mut unused, &mut servers)?;
    }
    // Our own `policy` and `sandbox` beside them, strictly; other top-level keys are the host's.
    let ours = |key: &str| top.get(key).cloned().unwrap_or(Value::Null);
    let policy = match ours("policy") {
        Value::Null => PolicyConfig::default(),
        value => serde_path_to_error::deserialize(value).map_err(|e| {
            invalid(
                path,
                Some(format!("policy.{}", e.path()).replace("policy..", "policy")),
                json_message(e.inner()),
                None,
            )
        })?,
    };
    let sandbox = match ours("sandbox") {
        Value::Null => RawSandboxDefaults::default(),
        value => serde_path_to_error::deserialize(value).map_err(|e| {
            invalid(
                path,
                Some(format!("sandbox.{}", e.path()).replace("sandbox..", "sandbox")),
                json_message(e.inner()),
                None,
            )
        })?,
    };
    warnings.extend(unused.lines(path, table));
    Ok(RawFile {
        host,
        table,
        servers,
        policy,
        sandbox,
        runtime: RawRuntime::default(),
        serve: RawServe::default(),
        telemetry: Default::default(),
        inputs: Vec::new(),
        warnings,
        tools: RawTools::default(),
    })
}

/// One server entry in any host's JSON shape (`mcp add-json`), with the warnings of its
/// unused keys. Our own keys are read too.
pub(crate) fn entry_from_json(
    path: &Path,
    name: &str,
    value: &Value,
    cx: ReadContext<'_>,
) -> Result<(RawServer, Vec<String>), ConfigError> {
    let around = Surroundings { home: cx.home, workspace_folder: cx.cwd };
    let mut unused = Unused::default();
    let table = "mcpServers";
    let ours = translate(path, Host::McpServers, table, name, value, MCP_SERVERS_KEYS, around, &mut unused)?;
    let raw = entry(path, table, name, ours, MCP_SERVERS_KEYS)?;
    Ok((raw, unused.lines(path, table)))
}

fn read_inputs(path: &Path, value: Option<&Value>) -> Result<Vec<Input>, ConfigError> {
    let Some(value) = value else { return Ok(Vec::new()) };
    let Value::Array(items) = value else {
        return Err(invalid(path, Some("inputs".into()), "expected an array of inputs".into(), None));
    };
    let mut inputs = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_owned);
        let Some(id) = field("id") else {
            return Err(invalid(path, Some(format!("inputs[{i}]")), "an input needs an `id`".into(), None));
        };
        inputs.push(Input {
            id,
            kind: field("type").unwrap_or_else(|| "promptString".into()),
            description: field("description").unwrap_or_default(),
            password: item.get("password").and_then(Value::as_bool).unwrap_or(false),
            default: field("default"),
            options: item
                .get("options")
                .and_then(Value::as_array)
                .map(|o| {
                    o.iter()
                        .filter_map(|v| v.as_str().or_else(|| v.get("value").and_then(Value::as_str)))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    Ok(inputs)
}

fn read_codex(path: &Path, table: toml::Table) -> Result<RawFile, ConfigError> {
    let host = Host::Codex;
    let key = "mcp_servers";
    let entries = match table.get(key) {
        Some(toml::Value::Table(t)) => t,
        _ => return Err(invalid(path, Some(key.into()), "expected a table of servers".into(), None)),
    };
    let entries = match serde_json::to_value(entries) {
        Ok(Value::Object(map)) => map,
        _ => {
            return Err(invalid(
                path,
                Some(key.into()),
                "cannot be read (a date where a value was expected?)".into(),
                None,
            ));
        }
    };
    let mut unused = Unused::default();
    let mut servers = BTreeMap::new();
    read_entries(path, host, key, &entries, CODEX_KEYS, Surroundings::default(), &mut unused, &mut servers)?;
    let warnings = unused.lines(path, key);
    Ok(RawFile {
        host,
        table: key,
        servers,
        policy: PolicyConfig::default(),
        sandbox: RawSandboxDefaults::default(),
        runtime: RawRuntime::default(),
        serve: RawServe::default(),
        telemetry: Default::default(),
        inputs: Vec::new(),
        warnings,
        tools: RawTools::default(),
    })
}
