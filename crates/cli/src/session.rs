//! What every command shares: the configuration, the connections, the tool pool; and the
//! `servers` command, which only reports the connections.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mcp_client::{ConnectOptions, ServerConnection, ServerState, close_all};
use serde_json::{Value, json};
use tool_pool::{BuiltinTool, Options, Pool, ServerTools, assemble};

use crate::Outcome;
use crate::config::{self, Config};
use crate::eras::EraMemory;
use crate::output;

/// Where the configuration is: `--config` or its variable, else the default location.
#[derive(Debug, Clone)]
pub(crate) struct ConfigPath {
    /// The path given, if one was.
    pub(crate) path: Option<PathBuf>,
    /// Where it came from.
    pub(crate) origin: config::Origin,
    /// `--allow-workspace-config`.
    pub(crate) allow_workspace: bool,
}

impl ConfigPath {
    /// The path to read, checked against the workspace rule.
    pub(crate) fn checked(&self) -> anyhow::Result<PathBuf> {
        let path = match &self.path {
            Some(p) => p.clone(),
            None => config::default_path()?,
        };
        if self.allow_workspace {
            return Ok(path);
        }
        let cwd = std::env::current_dir().map_err(config::ConfigError::NoCurrentDir)?;
        Ok(config::check_outside_workspace(&path, &cwd, self.origin)?)
    }
}

/// Finds, checks and loads the configuration; its warnings go to stderr.
pub(crate) fn load_config(at: &ConfigPath) -> anyhow::Result<Config> {
    let config = read_config(at, true)?;
    for warning in &config.warnings {
        output::warn(warning)?;
    }
    Ok(config)
}

/// Reads the configuration again while `run` or `chat` goes on: nothing is asked on the
/// terminal (the conversation owns it), and its warnings were shown when it started.
pub(crate) fn reload_config(path: &std::path::Path, allow_workspace: bool) -> anyhow::Result<Config> {
    let at = ConfigPath { path: Some(path.to_path_buf()), origin: config::Origin::Flag, allow_workspace };
    read_config(&at, false)
}

fn read_config(at: &ConfigPath, interactive: bool) -> anyhow::Result<Config> {
    let resolved = at.checked()?;
    let mut context = config::Context::process();
    if interactive {
        context.ask = Box::new(crate::approve::ask_input);
    }
    if !at.allow_workspace {
        context.workspace = std::env::current_dir().ok();
    }
    Ok(config::load(&resolved, at.origin, &context)?)
}

/// What the client library connects, for every configured server: its transport's connector
/// with its sandbox, remote options and (non-interactive) OAuth authorizer, and who answers its
/// elicitation requests. A server whose protocol era is remembered opens the way it answered last
/// time.
pub(crate) fn client_specs(config: &Config) -> Vec<mcp_client::ServerSpec> {
    client_specs_recalling(config, &mut EraMemory::load())
}

fn client_specs_recalling(config: &Config, eras: &mut EraMemory) -> Vec<mcp_client::ServerSpec> {
    let mut authorizers = crate::auth::authorizers(config);
    let mut specs: Vec<mcp_client::ServerSpec> = config
        .servers
        .iter()
        .cloned()
        .map(|server| crate::sandbox::apply(server, config))
        .map(|server| {
            let mut spec = server.client_spec(config.remote.get(&server.name), authorizers.remove(&server.name));
            spec.requests = Some(crate::elicit::requests_for(&server.name, &config.policy));
            spec
        })
        .collect();
    eras.recall(&mut specs, config);
    specs
}

/// Connects to every configured server at once (each under its own startup timeout), with a
/// spinner on stderr when it is a terminal that names the servers still connecting.
pub(crate) async fn connect(config: &Config) -> Vec<ServerConnection> {
    let enabled = config.servers.iter().filter(|s| s.enabled).count();
    let spinner = (enabled > 0 && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(ProgressStyle::default_spinner());
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    });
    let connecting: Mutex<BTreeSet<String>> =
        Mutex::new(config.servers.iter().filter(|s| s.enabled).map(|s| s.name.clone()).collect());
    let show = |bar: &ProgressBar| {
        let names = connecting.lock().map(|n| n.iter().cloned().collect::<Vec<_>>().join(", ")).unwrap_or_default();
        let done = enabled - connecting.lock().map(|n| n.len()).unwrap_or(0);
        // The last frame, drawn before the spinner is cleared, names no server.
        let message = if names.is_empty() {
            format!("connected ({done} of {enabled} settled)")
        } else {
            format!("connecting: {names} ({done} of {enabled} settled)…")
        };
        bar.set_message(output::one_line(&message, 200));
    };
    if let Some(bar) = &spinner {
        show(bar);
    }
    let options = ConnectOptions::default();
    let mut eras = EraMemory::load();
    let specs = client_specs_recalling(config, &mut eras);
    let connections = futures_util::future::join_all(specs.into_iter().map(|spec| {
        let (options, connecting, spinner, show) = (&options, &connecting, &spinner, &show);
        async move {
            let name = spec.name.clone();
            let connection = mcp_client::connect(spec, options).await;
            if let Ok(mut names) = connecting.lock() {
                names.remove(&name);
            }
            if let Some(bar) = spinner {
                show(bar);
            }
            connection
        }
    }))
    .await;
    if let Some(bar) = spinner {
        bar.finish_and_clear();
    }
    eras.learn(connections.iter().map(|c| (c.name(), c.state())), config);
    eras.save();
    connections
}

/// The connections and the pool assembled from them.
pub(crate) struct Session {
    pub(crate) connections: Vec<ServerConnection>,
    pub(crate) pool: Pool,
}

impl Session {
    /// Connects and assembles the pool (no built-in tools yet).
    pub(crate) async fn open(config: &Config) -> anyhow::Result<Self> {
        // A signal while connecting drops the connections, which kills their process groups.
        let connections = crate::signals::interruptible(connect(config)).await?;
        let listings = connections.iter().filter(|c| c.is_connected()).map(|c| (c.name(), Arc::clone(c.tools())));
        let pool = match pool_of(listings, &config.policy) {
            Ok(pool) => pool,
            Err(e) => {
                close_all(connections).await;
                return Err(e).context("assembling the tool pool");
            }
        };
        Ok(Self { connections, pool })
    }

    /// Servers that were meant to run but did not: (name, reason).
    pub(crate) fn unavailable(&self) -> Vec<(&str, &str)> {
        self.connections
            .iter()
            .filter_map(|c| match c.state() {
                ServerState::Failed { reason, .. } => Some((c.name(), reason.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The names of the servers among `connections` that were meant to run but did not.
    pub(crate) fn unavailable_of(connections: &[ServerConnection]) -> Vec<String> {
        connections
            .iter()
            .filter(|c| matches!(c.state(), ServerState::Failed { .. }))
            .map(|c| c.name().to_owned())
            .collect()
    }

    /// Diagnostics for the unavailable servers, shaped like the pool's.
    pub(crate) fn unavailable_diagnostics(&self) -> Vec<Value> {
        // With the pool's `tool` field (null: the whole server), in the pool's order of fields.
        unavailable_diagnostics(&self.connections, "tools")
            .into_iter()
            .map(|d| json!({ "server": d["server"], "tool": null, "kind": d["kind"], "message": d["message"] }))
            .collect()
    }

    /// Closes every connection while `work` runs on the pool (`mcp_client::close_all_while`):
    /// the servers exit while the output is written, not after.
    pub(crate) async fn close_while<T>(self, work: impl FnOnce(&Pool) -> T) -> T {
        let Self { connections, pool } = self;
        mcp_client::close_all_while(connections, || work(&pool)).await
    }
}

/// A diagnostic (`server`, `kind` `server_unavailable`, `message`) for each server among
/// `connections` that was meant to run but did not: its `what` (tools, resources, prompts) are
/// left out.
pub(crate) fn unavailable_diagnostics(connections: &[ServerConnection], what: &str) -> Vec<Value> {
    connections
        .iter()
        .filter_map(|c| match c.state() {
            ServerState::Failed { reason, .. } => Some((c.name(), reason)),
            _ => None,
        })
        .map(|(server, reason)| {
            json!({
                "server": server,
                "kind": "server_unavailable",
                "message": format!("server {server:?} is unavailable, its {what} are left out: {reason}"),
            })
        })
        .collect()
}

/// The header of a tool count as `servers` and `/mcp` show it: offered of listed.
pub(crate) const TOOLS_COLUMN: &str = "TOOLS OFFERED/LISTED";

/// How many of server `name`'s tools the pool offers (what policy and checks leave of those it
/// listed).
pub(crate) fn offered(pool: &Pool, name: &str) -> usize {
    pool.iter().filter(|e| e.server() == Some(name)).count()
}

/// The pool of these servers' listings under `policy`, no built-in tools: what `tools` and
/// `call` offer.
pub(crate) fn pool_of<'a>(
    listings: impl IntoIterator<Item = (&'a str, Arc<[mcp_protocol::Tool]>)>,
    policy: &policy::Policy,
) -> Result<Pool, tool_pool::StrictError> {
    let listings: Vec<ServerTools> = listings.into_iter().map(|(name, tools)| ServerTools::new(name, tools)).collect();
    let builtins: Arc<[BuiltinTool]> = Arc::new([]);
    assemble(&builtins, &listings, policy, &Options::default(), 1)
}

fn state_json(c: &ServerConnection, config: &Config, pool: &Pool) -> Value {
    let elapsed_ms = c.state().elapsed().map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let (protocol, tools, reason) = match c.state() {
        ServerState::Connected { protocol, tools, .. } => (Some(protocol.as_str()), Some(*tools), None),
        ServerState::Failed { reason, .. } => (None, None, Some(reason.as_str())),
        _ => (None, None, None),
    };
    json!({
        "name": c.name(),
        "state": c.state().label(),
        "protocol": protocol,
        "tools": tools,
        "tools_offered": tools.map(|_| offered(pool, c.name())),
        "elapsed_ms": elapsed_ms,
        "reason": reason,
        "sandbox": sandbox_label(c, config),
    })
}

/// The server's confinement (`None` for remote and disabled servers).
fn sandbox_label(c: &ServerConnection, config: &Config) -> Option<&'static str> {
    if matches!(c.state(), ServerState::Disabled) {
        return None;
    }
    crate::sandbox::confinement(config, c.name()).map(crate::sandbox::Confinement::label)
}

/// `mcp-harness servers`. Its tool counts are the pool's (`tools` would show) over what each
/// server listed.
pub(crate) async fn servers_command(config: Config, as_json: bool) -> anyhow::Result<Outcome> {
    let Session { mut connections, pool } = Session::open(&config).await?;
    connections.sort_by(|a, b| a.name().cmp(b.name()));
    let text = if as_json {
        let servers: Vec<Value> = connections.iter().map(|c| state_json(c, &config, &pool)).collect();
        let mut text = output::json(&json!({ "servers": servers }), true)?;
        text.push('\n');
        text
    } else if connections.is_empty() {
        "no servers are configured\n".to_owned()
    } else {
        let rows: Vec<Vec<String>> = connections
            .iter()
            .map(|c| {
                let dash = || "-".to_owned();
                let time = c.state().elapsed().map_or_else(dash, output::duration);
                let sandbox = sandbox_label(c, &config).unwrap_or("-").to_owned();
                match c.state() {
                    ServerState::Connected { protocol, tools, .. } => {
                        vec![
                            c.name().to_owned(),
                            "connected".into(),
                            protocol.to_string(),
                            format!("{}/{tools}", offered(&pool, c.name())),
                            time,
                            sandbox,
                            String::new(),
                        ]
                    }
                    ServerState::Failed { reason, .. } => {
                        let state = c.state().label().to_owned();
                        vec![c.name().to_owned(), state, dash(), dash(), time, sandbox, output::one_line(reason, 300)]
                    }
                    other => {
                        vec![c.name().to_owned(), other.label().into(), dash(), dash(), dash(), dash(), String::new()]
                    }
                }
            })
            .collect();
        output::table(&["SERVER", "STATE", "PROTOCOL", TOOLS_COLUMN, "TIME", "SANDBOX", "DETAIL"], &rows)
    };
    // The servers exit while the report is written.
    mcp_client::close_all_while(connections, || output::stdout(&text)).await?;
    Ok(Outcome::Success)
}
