//! Other hosts' configuration files, read as they are: Claude Desktop's
//! `claude_desktop_config.json`, Claude Code's `.mcp.json` and `~/.claude.json`, Cursor's and VS
//! Code's `mcp.json`, Codex's `config.toml`.
//!
//! Each entry becomes a [`RawServer`] in our own terms (their key names mapped to ours, their
//! variable syntax brought into ours by [`vars::to_ours`]), so the same checks apply to every
//! format. Keys of a server entry we don't use are reported (once per key) as warnings naming
//! the file and key; keys whose loss would change what a server may do are errors. What a host
//! keeps beside its servers (its own settings) is not ours to report and is left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::keys;
use super::vars::{self, Surroundings, Syntax};
use super::{
    ConfigError, RawRuntime, RawSandboxDefaults, RawServer, RawToml, RawTools, json_message, key_of, line_column,
};
use policy::PolicyConfig;

/// Whose format a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Host {
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
    pub(crate) fn label(self) -> &'static str {
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
pub(crate) struct Input {
    /// Its id, as in `${input:ID}`.
    pub(crate) id: String,
    /// `promptString` or `pickString` (others are refused when asked for).
    pub(crate) kind: String,
    /// What to ask.
    pub(crate) description: String,
    /// Hide what is typed.
    pub(crate) password: bool,
    /// The answer when nothing is typed.
    pub(crate) default: Option<String>,
    /// A `pickString`'s choices.
    pub(crate) options: Vec<String>,
}

/// A configuration file read, its strings in the internal form, nothing expanded yet.
pub(crate) struct RawFile {
    /// Whose format.
    pub(crate) host: Host,
    /// How the file spells its table of servers (`servers`, `mcpServers`, `mcp_servers`).
    pub(crate) table: &'static str,
    /// Every server entry.
    pub(crate) servers: BTreeMap<String, RawServer>,
    /// `[policy]` (ours and our JSON only).
    pub(crate) policy: PolicyConfig,
    /// `[sandbox]` (ours and our JSON only).
    pub(crate) sandbox: RawSandboxDefaults,
    /// `[runtime]` (ours only).
    pub(crate) runtime: RawRuntime,
    /// VS Code inputs.
    pub(crate) inputs: Vec<Input>,
    /// Keys read and not used, one line each.
    pub(crate) warnings: Vec<String>,
    /// Tool exposure and search keys of the top level (ours only).
    pub(crate) tools: RawTools,
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

/// Our TOML's string fields that hold variable references (and nothing else does).
const EXPANDED: &[&str] = &["command", "args", "env", "cwd", "env_file", "url", "headers"];

/// Whether `text` (from `path`) is JSON: by extension, else by its first character.
fn is_json(path: &Path, text: &str) -> bool {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("json") => true,
        Some("toml") => false,
        _ => text.trim_start().starts_with('{'),
    }
}

/// Reads `text` (from `path`) in whichever format it is.
pub(crate) fn read(path: &Path, text: &str, cx: ReadContext<'_>) -> Result<RawFile, ConfigError> {
    if is_json(path, text) {
        read_json(path, text, cx).map_err(|e| with_position(e, path, text))
    } else {
        read_toml(path, text)
    }
}

/// `error` with the line and column of its key in a JSON file, when it names a key and has no
/// position: entries are checked after their translation, as values that no longer know where
/// they were written.
pub(crate) fn with_position(error: ConfigError, path: &Path, text: &str) -> ConfigError {
    match error {
        ConfigError::Invalid { path: file, key: Some(key), message, position: None } if is_json(path, text) => {
            let cleaned = without_comments(text, true);
            let position = json_key_offset(&cleaned, &key_segments(&key)).map(|at| line_column(text, at));
            ConfigError::Invalid { path: file, key: Some(key), message, position }
        }
        other => other,
    }
}

/// The object keys of a key as errors write it: `mcpServers."my server".args[1]` is
/// `mcpServers`, `my server`, `args`.
fn key_segments(key: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let (mut quoted, mut index, mut escaped) = (false, false, false);
    for c in key.chars() {
        match c {
            _ if escaped => {
                current.push(c);
                escaped = false;
            }
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            _ if quoted => current.push(c),
            '[' => index = true,
            ']' => index = false,
            _ if index => {}
            '.' => segments.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    segments.push(current);
    segments.retain(|s| !s.is_empty());
    segments
}

/// The byte offset, in JSON `text`, of the deepest object key on the path `segments`.
fn json_key_offset(text: &str, segments: &[String]) -> Option<usize> {
    // One frame per open object or array: the object's key being read, and whether a key is
    // expected next.
    struct Frame {
        object: bool,
        key: Option<String>,
        expect_key: bool,
    }
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut best: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => stack.push(Frame { object: true, key: None, expect_key: true }),
            b'[' => stack.push(Frame { object: false, key: None, expect_key: false }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(top) = stack.last_mut().filter(|f| f.object) {
                    top.expect_key = true;
                    top.key = None;
                }
            }
            b'"' => {
                let start = i;
                let mut end = i + 1;
                while end < bytes.len() && bytes[end] != b'"' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let expecting = stack.last().is_some_and(|f| f.object && f.expect_key);
                if expecting {
                    let raw = text.get(start..=end.min(bytes.len() - 1)).unwrap_or("");
                    let name = serde_json::from_str::<String>(raw).unwrap_or_default();
                    if let Some(top) = stack.last_mut() {
                        top.key = Some(name);
                        top.expect_key = false;
                    }
                    let path: Vec<&str> = stack.iter().filter_map(|f| f.key.as_deref()).collect();
                    let matches = path.len() <= segments.len() && path.iter().zip(segments).all(|(a, b)| a == b);
                    if matches && best.is_none_or(|(depth, _)| path.len() > depth) {
                        best = Some((path.len(), start));
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    best.map(|(_, at)| at)
}

fn invalid(path: &Path, key: Option<String>, message: String, position: Option<(usize, usize)>) -> ConfigError {
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
        inputs: Vec::new(),
        warnings: Vec::new(),
        tools,
    })
}

/// Collects unused keys, to report each once.
#[derive(Default)]
struct Unused(BTreeMap<String, (BTreeSet<String>, &'static str)>);

impl Unused {
    fn add(&mut self, key: &str, server: &str, why: &'static str) {
        self.0.entry(key.to_owned()).or_insert_with(|| (BTreeSet::new(), why)).0.insert(server.to_owned());
    }

    fn lines(self, path: &Path, table: &str) -> Vec<String> {
        self.0
            .into_iter()
            .map(|(key, (servers, why))| {
                let servers: Vec<String> = servers.iter().map(|s| format!("{s:?}")).collect();
                let why = if why.is_empty() { String::new() } else { format!(": {why}") };
                format!(
                    "{}: `{key}` of {table} {} is not used by mcp-harness and was ignored{why}",
                    path.display(),
                    servers.join(", ")
                )
            })
            .collect()
    }
}

#[allow(clippy::too_many_arguments, reason = "the reading's parts, each used; a struct for one call site adds nothing")]
/// Reads one entry's keys by `keys`, bringing strings into the internal form; returns our
/// entry as a JSON object for [`RawServer`]'s own checks.
fn translate(
    path: &Path,
    host: Host,
    table: &'static str,
    name: &str,
    entry: &Value,
    keys: &[(&str, Key)],
    around: Surroundings<'_>,
    unused: &mut Unused,
) -> Result<Map<String, Value>, ConfigError> {
    let here = |key: &str| Some(format!("{}.{key}", entry_key(table, name)));
    let Value::Object(entry) = entry else {
        return Err(invalid(path, Some(entry_key(table, name)), "expected a table of server settings".into(), None));
    };
    let mut ours = Map::new();
    for (key, value) in entry {
        let Some(&(_, what)) = keys.iter().find(|(k, _)| k == key) else {
            // Our own keys are read in our JSON (`config.json`) as in TOML.
            if host == Host::McpServers && keys::fields::<RawServer>().contains(&key.as_str()) {
                ours.insert(key.clone(), value.clone());
            } else {
                unused.add(key, name, "");
            }
            continue;
        };
        match what {
            Key::Ours(our) => {
                ours.insert(our.to_owned(), value.clone());
            }
            Key::Unused(why) => unused.add(key, name, why),
            Key::Refused(why) => {
                return Err(invalid(path, here(key), format!("not read: {why}"), None));
            }
            Key::Special => special(path, host, key, value, &mut ours, unused, name, &here)?,
        }
    }
    // Strings in the internal form, where references may be.
    let syntax = host.syntax();
    let convert =
        |key: &str, text: &str| vars::to_ours(text, syntax, around).map_err(|m| invalid(path, here(key), m, None));
    for field in EXPANDED {
        match ours.get_mut(*field) {
            Some(Value::String(s)) => *s = convert(field, s)?,
            Some(Value::Array(items)) => {
                for item in items.iter_mut() {
                    if let Value::String(s) = item {
                        *s = convert(field, s)?;
                    }
                }
            }
            Some(Value::Object(map)) => {
                for (k, v) in map.iter_mut() {
                    if let Value::String(s) = v {
                        *s = convert(&format!("{field}.{k}"), s)?;
                    }
                }
            }
            _ => {}
        }
    }
    // Codex's headers from the environment are references, added after the conversion (the
    // conversion would make them literal).
    if let Some(Value::Object(from_env)) = ours.remove("\0env_http_headers") {
        let headers = ours.entry("headers").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(headers) = headers {
            for (header, var) in from_env {
                match var {
                    Value::String(var) if vars::references(&format!("${{{var}}}")).len() == 1 => {
                        headers.insert(header, Value::String(format!("${{{var}}}")));
                    }
                    other => {
                        return Err(invalid(
                            path,
                            here(&format!("env_http_headers.{header}")),
                            format!("must name an environment variable, not {other}"),
                            None,
                        ));
                    }
                }
            }
        }
    }
    Ok(ours)
}

#[allow(clippy::too_many_arguments)]
fn special(
    path: &Path,
    host: Host,
    key: &str,
    value: &Value,
    ours: &mut Map<String, Value>,
    unused: &mut Unused,
    name: &str,
    here: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let bad = |message: String| invalid(path, here(key), message, None);
    match key {
        // VS Code allows numbers, and null for "not this variable": a number is its text, a
        // null is left out (the server gets only the variables it is given).
        "env" => match value {
            Value::Object(map) => {
                let mut env = Map::new();
                for (k, v) in map {
                    match v {
                        Value::Null => {}
                        Value::Number(n) => {
                            env.insert(k.clone(), Value::String(n.to_string()));
                        }
                        other => {
                            env.insert(k.clone(), other.clone());
                        }
                    }
                }
                ours.insert("env".into(), Value::Object(env));
            }
            other => {
                ours.insert("env".into(), other.clone());
            }
        },
        // Cline's and others' `disabled`: a server switched off stays off.
        "disabled" => match value {
            Value::Bool(disabled) => {
                ours.insert("enabled".into(), Value::Bool(!disabled));
            }
            other => return Err(bad(format!("expected true or false, not {other}"))),
        },
        // Claude Code's and VS Code's `oauth: {clientId}`; our JSON's own snake_case keys too.
        "oauth" => {
            let Value::Object(map) = value else { return Err(bad(format!("expected a table, not {value}"))) };
            let mut oauth = Map::new();
            for (k, v) in map {
                match k.as_str() {
                    "clientId" => {
                        oauth.insert("client_id".into(), v.clone());
                    }
                    _ if host == Host::McpServers => {
                        oauth.insert(k.clone(), v.clone());
                    }
                    _ => unused.add(&format!("oauth.{k}"), name, ""),
                }
            }
            ours.insert("oauth".into(), Value::Object(oauth));
        }
        // VS Code's own sandbox: never looser here. Its network is off unless domains are
        // allowed, which mcp-harness cannot express.
        "sandboxEnabled" => match value {
            Value::Bool(true) => {
                ours.insert("sandbox".into(), serde_json::json!({ "network": false }));
            }
            Value::Bool(false) => {}
            other => return Err(bad(format!("expected true or false, not {other}"))),
        },
        "startup_timeout_ms" => match value.as_u64() {
            // Codex: `startup_timeout_sec` wins when both are given.
            Some(ms) if !ours.contains_key("startup_timeout_s") => {
                #[allow(clippy::cast_precision_loss)]
                let seconds = ms as f64 / 1000.0;
                ours.insert("startup_timeout_s".into(), serde_json::json!(seconds));
            }
            Some(_) => {}
            None => return Err(bad(format!("expected a number of milliseconds, not {value}"))),
        },
        "env_http_headers" => {
            ours.insert("\0env_http_headers".into(), value.clone());
        }
        // Codex's approvals: "prompt" asks even where Codex would not, which mcp-harness's
        // `--yes` would skip: refused. Other modes ask less than mcp-harness does: ignoring
        // them is stricter.
        "default_tools_approval_mode" => approval(value, &bad, unused, key, name)?,
        "tools" => {
            let Value::Object(tools) = value else { return Err(bad(format!("expected a table, not {value}"))) };
            for (tool, settings) in tools {
                let mode = settings.get("approval_mode").unwrap_or(&Value::Null);
                approval(mode, &bad, unused, &format!("tools.{tool}.approval_mode"), name)?;
            }
        }
        _ => unused.add(key, name, ""),
    }
    Ok(())
}

fn approval(
    mode: &Value,
    bad: &dyn Fn(String) -> ConfigError,
    unused: &mut Unused,
    key: &str,
    name: &str,
) -> Result<(), ConfigError> {
    match mode.as_str() {
        Some("prompt") => Err(bad(
            "an approval mode of \"prompt\" is not read: it asks before every call, and mcp-harness's `--yes` \
             would not; write a [[policy.rules]] entry with decision = \"confirm\" (or \"deny\") instead"
                .into(),
        )),
        None if mode.is_null() => Ok(()),
        _ => {
            unused.add(key, name, "tools are decided by mcp-harness's [policy], which asks by default");
            Ok(())
        }
    }
}

/// Builds the entry from the translated keys, with [`RawServer`]'s checks; errors name the
/// file's own key.
fn entry(
    path: &Path,
    table: &'static str,
    name: &str,
    ours: Map<String, Value>,
    keys: &[(&str, Key)],
) -> Result<RawServer, ConfigError> {
    serde_path_to_error::deserialize(Value::Object(ours)).map_err(|e| {
        let path_text = e.path().to_string();
        // Back to the file's own spelling of the key.
        let (first, rest) = path_text.split_once('.').unwrap_or((path_text.as_str(), ""));
        let theirs = keys.iter().find(|(_, k)| matches!(k, Key::Ours(o) if *o == first)).map_or(first, |(t, _)| t);
        let key = if rest.is_empty() { theirs.to_owned() } else { format!("{theirs}.{rest}") };
        let key = if key == "." { entry_key(table, name) } else { format!("{}.{key}", entry_key(table, name)) };
        invalid(path, Some(key), json_message(e.inner()), None)
    })
}

#[allow(clippy::too_many_arguments, reason = "the reading's parts, each used; a struct for one call site adds nothing")]
fn read_entries(
    path: &Path,
    host: Host,
    table: &'static str,
    entries: &Map<String, Value>,
    keys: &[(&str, Key)],
    around: Surroundings<'_>,
    unused: &mut Unused,
    servers: &mut BTreeMap<String, RawServer>,
) -> Result<(), ConfigError> {
    for (name, value) in entries {
        let ours = translate(path, host, table, name, value, keys, around, unused)?;
        servers.insert(name.clone(), entry(path, table, name, ours, keys)?);
    }
    Ok(())
}

/// JSON with VS Code's allowances: comments, and in `mcp.json` trailing commas, blanked out so
/// that positions stay where they were.
fn without_comments(text: &str, trailing_commas: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let (mut i, mut in_string) = (0, false);
    let mut last_comma: Option<usize> = None;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
            last_comma = None;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                out[i] = b' ';
                i += 1;
            }
            continue;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            let end = text[i + 2..].find("*/").map_or(bytes.len(), |e| i + 2 + e + 2);
            for (j, byte) in out.iter_mut().enumerate().take(end).skip(i) {
                if bytes[j] != b'\n' {
                    *byte = b' ';
                }
            }
            i = end;
            continue;
        } else if b == b',' {
            last_comma = Some(i);
        } else if (b == b'}' || b == b']') && trailing_commas {
            if let Some(c) = last_comma.take() {
                out[c] = b' ';
            }
        } else if !b.is_ascii_whitespace() {
            last_comma = None;
        }
        i += 1;
    }
    // Only ASCII bytes were replaced by ASCII spaces, so this stays UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
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
        inputs: Vec::new(),
        warnings,
        tools: RawTools::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_of_keys_in_json() {
        let text = "{\n  \"mcpServers\": {\n    \"my server\": { \"command\": \"x\",\n      \"args\": [\"a\", {\"args\": 1}] }\n  }\n}";
        let at = |key: &str| json_key_offset(text, &key_segments(key)).map(|o| line_column(text, o));
        assert_eq!(at("mcpServers.\"my server\".args[1]"), Some((4, 7)));
        assert_eq!(at("mcpServers.\"my server\""), Some((3, 5)));
        assert_eq!(at("mcpServers.other.args"), Some((2, 3)), "the deepest key that is there");
        assert_eq!(at("elsewhere"), None);
        assert_eq!(key_segments("servers.a.env.A"), ["servers", "a", "env", "A"]);
    }

    #[test]
    fn comments_and_trailing_commas_are_blanked_in_place() {
        let text = "{\n  // a comment \"with quotes\"\n  \"a\": \"http://x//y\", /* block\n */ \"b\": [1, 2,],\n}";
        let cleaned = without_comments(text, true);
        assert_eq!(cleaned.len(), text.len());
        assert_eq!(cleaned.lines().count(), text.lines().count());
        let value: Value = serde_json::from_str(&cleaned).unwrap();
        assert_eq!(value, serde_json::json!({"a": "http://x//y", "b": [1, 2]}));
        assert!(serde_json::from_str::<Value>(&without_comments("{\"a\": 1,}", false)).is_err());
    }
}
