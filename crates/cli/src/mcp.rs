//! `mcp-harness mcp ...`: the configured servers, managed from the command line, and brought over
//! from other hosts (`mcp import`).
//!
//! Listings read any supported format and show it as written (references not expanded, secret
//! looking values hidden). Edits go to our own TOML only, through [`mcp_host::config::Editor`].

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use mcp_host::config::{self, ConfigPath, Editor, Existing, Origin, RawFile};
use serde_json::{Map, Value, json};

use crate::{Outcome, approve, output};

// The `mcp` subcommands. (Not a doc comment: with `defer`, clap would make it the `mcp`
// command's about, over the one `Command::Mcp` gives.)
#[derive(Debug, clap::Subcommand)]
#[command(defer = true)]
pub(crate) enum McpCommand {
    /// Add a server: `add NAME [OPTIONS] -- COMMAND [ARGS...]` for a stdio server, `add NAME URL
    /// [OPTIONS]` for a remote one.
    Add(AddArgs),
    /// Add a server from one entry in JSON, in any host's shape, e.g. '{"command": "uvx", "args":
    /// ["mcp-server-time"]}' or '{"type": "http", "url": "https://..."}'.
    AddJson {
        /// The server's name.
        name: String,
        /// The entry, a JSON object.
        json: String,
    },
    /// List the configured servers (as written; `servers` connects to them).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one server's configuration (as written; secret-looking values hidden).
    Get {
        /// The server's name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a server.
    Remove {
        /// The server's name.
        name: String,
    },
    /// Enable a disabled server.
    Enable {
        /// The server's name.
        name: String,
    },
    /// Disable a server without removing it.
    Disable {
        /// The server's name.
        name: String,
    },
    /// Bring servers over from another host's configuration: shows what it adds, asks before
    /// replacing a server of the same name.
    Import {
        /// Whose configuration.
        #[arg(long, value_enum)]
        from: Source,
        /// Its file, when not in its usual place.
        path: Option<PathBuf>,
        /// Replace servers of the same name without asking.
        #[arg(long)]
        yes: bool,
    },
}

// `mcp add`'s arguments. (Not a doc comment: with `defer`, clap would make it the about of
// `mcp add`.)
#[derive(Debug, clap::Args)]
pub(crate) struct AddArgs {
    /// The server's name.
    name: String,
    /// The server's URL, or (after `--`) its command and arguments.
    #[arg(required = true, value_name = "URL | COMMAND [ARGS]...")]
    target: Vec<String>,
    /// An environment variable of a stdio server (repeatable).
    #[arg(long = "env", short = 'e', value_name = "K=V")]
    env: Vec<String>,
    /// The working directory of a stdio server.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// An HTTP header of a remote server (repeatable).
    #[arg(long = "header", short = 'H', value_name = "K=V")]
    headers: Vec<String>,
    /// How a remote server is reached [default: from the URL: http, or ws for ws:// and wss://].
    #[arg(long, value_enum)]
    transport: Option<Transport>,
    /// The environment variable holding a remote server's bearer token.
    #[arg(long, value_name = "VAR")]
    bearer_token_env_var: Option<String>,
}

/// `mcp add --transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    /// A child process over stdio.
    Stdio,
    /// Streamable HTTP (falling back to HTTP+SSE).
    Http,
    /// Only the 2024-11-05 HTTP+SSE transport.
    Sse,
    /// WebSocket (`ws://`, `wss://`).
    Ws,
}

/// Hosts whose configuration `mcp import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Source {
    /// Claude Desktop's claude_desktop_config.json.
    ClaudeDesktop,
    /// Claude Code's ~/.claude.json (your servers and this directory's); a project's .mcp.json as PATH.
    ClaudeCode,
    /// Cursor's ~/.cursor/mcp.json; a project's .cursor/mcp.json as PATH.
    Cursor,
    /// VS Code's user mcp.json; a workspace's .vscode/mcp.json as PATH.
    Vscode,
    /// Codex's ~/.codex/config.toml ($CODEX_HOME honoured).
    Codex,
}

impl Source {
    fn label(self) -> &'static str {
        match self {
            Self::ClaudeDesktop => "Claude Desktop",
            Self::ClaudeCode => "Claude Code",
            Self::Cursor => "Cursor",
            Self::Vscode => "VS Code",
            Self::Codex => "Codex",
        }
    }

    /// Where the host keeps its user configuration.
    fn usual_path(self) -> anyhow::Result<PathBuf> {
        let dirs = directories::BaseDirs::new().context("cannot find your home directory; pass the file's path")?;
        let home = dirs.home_dir();
        Ok(match self {
            Self::ClaudeDesktop => dirs.config_dir().join("Claude").join("claude_desktop_config.json"),
            Self::ClaudeCode => std::env::var_os("CLAUDE_CONFIG_DIR")
                .map_or_else(|| home.to_path_buf(), PathBuf::from)
                .join(".claude.json"),
            Self::Cursor => home.join(".cursor").join("mcp.json"),
            Self::Vscode => dirs.config_dir().join("Code").join("User").join("mcp.json"),
            Self::Codex => {
                std::env::var_os("CODEX_HOME").map_or_else(|| home.join(".codex"), PathBuf::from).join("config.toml")
            }
        })
    }
}

/// Runs `mcp ...`.
pub(crate) fn mcp_command(command: McpCommand, at: &ConfigPath) -> anyhow::Result<Outcome> {
    match command {
        McpCommand::List { json } => list(at, json),
        McpCommand::Get { name, json } => get(at, &name, json),
        McpCommand::Add(args) => add(at, args),
        McpCommand::AddJson { name, json } => add_json(at, &name, &json),
        McpCommand::Remove { name } => {
            let mut editor = editor(at)?;
            if !editor.remove(&name)? {
                bail!("no server named {:?} in {}", output::one_line(&name, 100), editor.path().display());
            }
            let path = editor.path().to_path_buf();
            editor.save()?;
            output::stdout(&format!("removed server {:?} from {}\n", output::one_line(&name, 100), path.display()))?;
            Ok(Outcome::Success)
        }
        McpCommand::Enable { name } => set_enabled(at, &name, true),
        McpCommand::Disable { name } => set_enabled(at, &name, false),
        McpCommand::Import { from, path, yes } => import(at, from, path, yes),
    }
}

fn editor(at: &ConfigPath) -> anyhow::Result<Editor> {
    Ok(Editor::for_config(at)?)
}

fn set_enabled(at: &ConfigPath, name: &str, enabled: bool) -> anyhow::Result<Outcome> {
    let mut editor = editor(at)?;
    if !editor.contains(name) {
        bail!("no server named {:?} in {}", output::one_line(name, 100), editor.path().display());
    }
    let changed = editor.set_enabled(name, enabled)?;
    editor.save()?;
    let state = if enabled { "enabled" } else { "disabled" };
    let text =
        if changed { format!("server {name:?} {state}\n") } else { format!("server {name:?} was already {state}\n") };
    output::stdout(&output::clean(&text))?;
    Ok(Outcome::Success)
}

fn read_warned(path: &Path, origin: Origin) -> anyhow::Result<RawFile> {
    let raw = config::read_raw(path, origin)?;
    for warning in &raw.warnings {
        output::warn(warning)?;
    }
    Ok(raw)
}

fn list(at: &ConfigPath, as_json: bool) -> anyhow::Result<Outcome> {
    let path = at.checked()?;
    let raw = read_warned(&path, at.origin)?;
    if as_json {
        let servers: Vec<Value> = raw.servers.iter().map(|(name, s)| s.describe(name)).collect();
        let value = json!({ "file": path, "format": raw.host.label(), "servers": servers });
        output::stdout(&format!("{}\n", output::json(&value, true)?))?;
        return Ok(Outcome::Success);
    }
    if raw.servers.is_empty() {
        output::stdout(&format!(
            "no servers are configured in {}\n",
            output::one_line(&path.display().to_string(), 300)
        ))?;
        return Ok(Outcome::Success);
    }
    let rows: Vec<Vec<String>> = raw
        .servers
        .iter()
        .map(|(name, s)| {
            let enabled = if s.enabled() { "yes" } else { "no" };
            vec![
                output::one_line(name, 60),
                s.transport().to_owned(),
                enabled.to_owned(),
                output::one_line(&s.target(), 100),
            ]
        })
        .collect();
    output::stdout(&output::table(&["NAME", "TRANSPORT", "ENABLED", "TARGET"], &rows))?;
    Ok(Outcome::Success)
}

fn get(at: &ConfigPath, name: &str, as_json: bool) -> anyhow::Result<Outcome> {
    let path = at.checked()?;
    let raw = read_warned(&path, at.origin)?;
    let Some(server) = raw.servers.get(name) else {
        let known: Vec<&str> = raw.servers.keys().map(String::as_str).collect();
        bail!(
            "no server named {:?} in {} (configured: {})",
            output::one_line(name, 100),
            path.display(),
            output::one_line(&if known.is_empty() { "none".to_owned() } else { known.join(", ") }, 500)
        );
    };
    let value = server.describe(name);
    if as_json {
        output::stdout(&format!("{}\n", output::json(&value, true)?))?;
        return Ok(Outcome::Success);
    }
    let mut text = String::new();
    if let Value::Object(fields) = &value {
        for (key, v) in fields {
            let shown = match v {
                Value::String(s) => s.clone(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(" "),
                Value::Object(map) => map
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(", "),
                other => other.to_string(),
            };
            text.push_str(&format!("{key}: {}\n", output::one_line(&shown, 500)));
        }
    }
    text.push_str(&format!("file: {}\n", output::one_line(&path.display().to_string(), 300)));
    output::stdout(&text)?;
    Ok(Outcome::Success)
}

fn pair(flag: &str, text: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => bail!("{flag} takes NAME=VALUE, not {:?}", output::one_line(text, 100)),
    }
}

fn looks_like_url(text: &str) -> bool {
    ["http://", "https://", "ws://", "wss://"].iter().any(|p| text.starts_with(p))
}

fn add(at: &ConfigPath, args: AddArgs) -> anyhow::Result<Outcome> {
    let remote = match args.transport {
        Some(Transport::Stdio) => false,
        Some(_) => true,
        None => args.target.len() == 1 && looks_like_url(&args.target[0]),
    };
    let mut entry = Map::new();
    if remote {
        let [url] = args.target.as_slice() else {
            bail!("a remote server takes one URL; for a stdio server, put its command after `--`");
        };
        if !looks_like_url(url) {
            bail!("{:?} is not an http(s):// or ws(s):// URL", output::one_line(url, 200));
        }
        let ws = url.starts_with("ws://") || url.starts_with("wss://");
        match args.transport {
            Some(Transport::Ws) if !ws => bail!("--transport ws needs a ws:// or wss:// URL"),
            Some(Transport::Http | Transport::Sse) if ws => {
                bail!("a ws:// URL is reached over WebSocket; leave --transport out")
            }
            Some(Transport::Sse) => {
                entry.insert("type".into(), "sse".into());
            }
            _ => {}
        }
        if !args.env.is_empty() || args.cwd.is_some() {
            bail!("--env and --cwd apply to stdio servers; a remote server takes --header");
        }
        entry.insert("url".into(), url.clone().into());
        if !args.headers.is_empty() {
            let headers: anyhow::Result<Map<String, Value>> =
                args.headers.iter().map(|h| pair("--header", h).map(|(k, v)| (k, v.into()))).collect();
            entry.insert("headers".into(), headers?.into());
        }
        if let Some(var) = args.bearer_token_env_var {
            entry.insert("bearer_token_env_var".into(), var.into());
        }
    } else {
        if !args.headers.is_empty() || args.bearer_token_env_var.is_some() {
            bail!("--header and --bearer-token-env-var apply to remote servers; give a URL");
        }
        let (command, rest) = args.target.split_first().context("give the server's command after `--`")?;
        entry.insert("command".into(), command.clone().into());
        if !rest.is_empty() {
            entry.insert("args".into(), rest.to_vec().into());
        }
        if !args.env.is_empty() {
            let env: anyhow::Result<Map<String, Value>> =
                args.env.iter().map(|e| pair("--env", e).map(|(k, v)| (k, v.into()))).collect();
            entry.insert("env".into(), env?.into());
        }
        if let Some(cwd) = args.cwd {
            // Relative to where the command runs now, not to the configuration file.
            let cwd = std::path::absolute(&cwd).with_context(|| format!("cannot resolve {}", cwd.display()))?;
            entry.insert("cwd".into(), cwd.to_string_lossy().into_owned().into());
        }
    }
    put_new(at, &args.name, &Value::Object(entry))
}

fn add_json(at: &ConfigPath, name: &str, json: &str) -> anyhow::Result<Outcome> {
    let value: Value = serde_json::from_str(json).context("the entry is not valid JSON")?;
    if !value.is_object() {
        bail!("the entry must be a JSON object, such as {{\"command\": \"uvx\", \"args\": [\"mcp-server-time\"]}}");
    }
    put_new(at, name, &value)
}

fn put_new(at: &ConfigPath, name: &str, entry: &Value) -> anyhow::Result<Outcome> {
    let mut editor = editor(at)?;
    if editor.contains(name) {
        bail!(
            "a server named {:?} is already configured in {}; `mcp-harness mcp remove {}` first to replace it",
            output::one_line(name, 100),
            editor.path().display(),
            output::one_line(name, 100)
        );
    }
    let (raw, warnings) = config::entry_from_json(name, entry)?;
    for warning in warnings {
        output::warn(&warning)?;
    }
    editor.put(name, &raw)?;
    let path = editor.path().to_path_buf();
    editor.save()?;
    output::stdout(&format!(
        "added {} server {:?} to {}\n",
        raw.transport(),
        output::one_line(name, 100),
        path.display()
    ))?;
    Ok(Outcome::Success)
}

/// What import does with one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Add,
    Replace,
    Same,
}

fn import(at: &ConfigPath, from: Source, path: Option<PathBuf>, yes: bool) -> anyhow::Result<Outcome> {
    let source = match path {
        Some(path) => path,
        None => from.usual_path()?,
    };
    if !source.exists() {
        bail!(
            "no {} configuration at {}; pass its path: `mcp-harness mcp import --from {} PATH`",
            from.label(),
            source.display(),
            clap::ValueEnum::to_possible_value(&from).map(|v| v.get_name().to_owned()).unwrap_or_default()
        );
    }
    // Its relative paths (a server's `cwd`, `envFile`) are made absolute from its folder: kept
    // relative, they would be read from the configuration's folder instead.
    let source = std::path::absolute(&source)
        .map_err(|e| anyhow::anyhow!("{}: cannot be made an absolute path: {e}", source.display()))?;
    let raw = read_warned(&source, Origin::Flag)?;
    let source_dir = source.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut editor = editor(at)?;
    let mut plans = Vec::new();
    let mut notes = Vec::new();
    for (name, mut server) in raw.servers {
        for (id, var) in server.prepare_import(&source_dir) {
            notes.push(format!(
                "server {name:?}: VS Code input {id:?} is read from the environment variable {var} (${{{var}}}); set it \
                 before using the server"
            ));
        }
        let plan = match editor.existing(&name, &server) {
            Existing::Absent => Plan::Add,
            Existing::Same => Plan::Same,
            _ => Plan::Replace,
        };
        plans.push((name, server, plan));
    }
    let mut text = format!(
        "from {} ({}) into {}:\n",
        output::one_line(&source.display().to_string(), 300),
        raw.host.label(),
        output::one_line(&editor.path().display().to_string(), 300)
    );
    if plans.is_empty() {
        text.push_str("  no servers\n");
        output::stdout(&text)?;
        return Ok(Outcome::Success);
    }
    let rows: Vec<Vec<String>> = plans
        .iter()
        .map(|(name, server, plan)| {
            let what = match plan {
                Plan::Add => "add",
                Plan::Replace => "replace",
                Plan::Same => "unchanged",
            };
            vec![
                output::one_line(name, 60),
                what.to_owned(),
                server.transport().to_owned(),
                output::one_line(&server.target(), 100),
            ]
        })
        .collect();
    text.push_str(&output::table(&["NAME", "ACTION", "TRANSPORT", "TARGET"], &rows));
    output::stdout(&text)?;
    for note in &notes {
        output::stderr(&format!("note: {}\n", output::one_line(note, 500)))?;
    }
    let (mut added, mut replaced, mut kept) = (0, 0, Vec::new());
    for (name, server, plan) in plans {
        let go = match plan {
            Plan::Same => false,
            Plan::Add => true,
            Plan::Replace if yes => true,
            Plan::Replace => {
                match approve::confirm(&format!(
                    "replace your server {:?} with the one from {}?",
                    output::one_line(&name, 100),
                    from.label()
                )) {
                    Some(answer) => answer,
                    None => {
                        kept.push(name.clone());
                        false
                    }
                }
            }
        };
        if go {
            editor.put(&name, &server)?;
            if plan == Plan::Add {
                added += 1;
            } else {
                replaced += 1;
            }
        }
    }
    let path = editor.path().to_path_buf();
    editor.save()?;
    output::stdout(&format!(
        "added {added}, replaced {replaced} in {}\n",
        output::one_line(&path.display().to_string(), 300)
    ))?;
    if !kept.is_empty() {
        output::stderr(&format!(
            "kept your own {} (there is no terminal to ask on; --yes replaces them)\n",
            output::one_line(&kept.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", "), 500)
        ))?;
    }
    Ok(Outcome::Success)
}
