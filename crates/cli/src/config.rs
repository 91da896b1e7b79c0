//! The configuration file: which servers to run and the tool policy.
//!
//! Every key of every table, and which keys of other hosts' files are read and how, is
//! documented in one place: `docs/configuration.md` (printed by `mcp-harness help config`); a
//! test keeps it and the structs below in step.
//!
//! Our own TOML (`[servers.NAME]`, `[sandbox]`, `[policy]`) is read strictly: an unknown key is
//! an error (a typo must not silently change what runs). Other hosts' files (Claude Desktop,
//! Claude Code, Cursor, VS Code, Codex) are read as they are by [`foreign`], which maps their
//! entries onto the same [`RawServer`]: keys we don't use are warnings, keys whose loss would
//! change what a server may do are errors. Every error names the file, the key and what was
//! expected. Variable references (`${VAR}`, `${VAR:-default}`, and each host's own forms) are
//! expanded in `command`, `args`, `env`, `cwd`, `env_file`, `url` and `headers` only, and only
//! for enabled servers ([`vars`]).
//!
//! The file lives in the user's configuration directory, never in the workspace an agent can
//! write to: a configuration names the commands the host runs, so one an agent could edit is a
//! way to run anything. [`check_outside_workspace`] enforces this.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mcp_client::{Authorizer, DEFAULT_MAX_TOOL_TIME, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT};
use mcp_sandbox::{Limits, Sandbox};
use mcp_transport::{HttpMode, RemoteOptions, RemoteServer, StdioConfig};
use policy::{Policy, PolicyConfig, PolicyError};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

pub(crate) mod edit;
pub(crate) mod foreign;
#[cfg(test)]
mod format_tests;
pub(crate) mod keys;
pub(crate) mod vars;

pub(crate) use foreign::{Host, Input, RawFile};

/// Overrides the default configuration path (as `--config` does).
pub(crate) const CONFIG_ENV: &str = "MCP_HARNESS_CONFIG";
/// Longest accepted timeout; longer ones are surely typos (and would overflow a deadline).
const MAX_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;

/// How a configured server is reached.
#[derive(Clone)]
pub(crate) enum ServerTarget {
    /// A child process speaking stdio.
    Stdio(StdioConfig),
    /// A remote server by URL (HTTP, or WebSocket for `ws://` and `wss://`).
    Remote {
        /// Its endpoint.
        url: String,
        /// HTTP headers to send (often credentials).
        headers: BTreeMap<String, String>,
    },
}

impl std::fmt::Debug for ServerTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio(config) => f.debug_tuple("Stdio").field(config).finish(),
            // Header values are often tokens: never print them.
            Self::Remote { url, headers } => f
                .debug_struct("Remote")
                .field("url", url)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish_non_exhaustive(),
        }
    }
}

/// One configured server.
#[derive(Debug, Clone)]
pub(crate) struct ServerConfig {
    /// Its name (the tool pool names its tools after it).
    pub(crate) name: String,
    /// How to reach it.
    pub(crate) target: ServerTarget,
    /// Disabled servers are reported, not started.
    pub(crate) enabled: bool,
    /// Time to start, initialize and list tools.
    pub(crate) startup_timeout: Duration,
    /// Time one tool call may take without progress.
    pub(crate) tool_timeout: Duration,
    /// Time one tool call may take in all while it reports progress.
    pub(crate) max_tool_time: Duration,
    /// `run` and `chat` refuse to start without it (Codex's `required` too).
    pub(crate) required: bool,
}

impl ServerConfig {
    /// An enabled stdio server with default timeouts.
    pub(crate) fn stdio(name: &str, config: StdioConfig) -> Self {
        Self {
            name: name.to_owned(),
            target: ServerTarget::Stdio(config),
            enabled: true,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            max_tool_time: DEFAULT_MAX_TOOL_TIME,
            required: false,
        }
    }

    /// What the client library connects: the transport's connector with the remote options
    /// and the authorizer (OAuth) this server uses.
    pub(crate) fn client_spec(
        &self,
        remote: Option<&RemoteOptions>,
        authorizer: Option<Arc<dyn Authorizer>>,
    ) -> mcp_client::ServerSpec {
        let connector: Arc<dyn mcp_client::Connector> = match &self.target {
            ServerTarget::Stdio(config) => Arc::new(config.clone()),
            ServerTarget::Remote { url, headers } => {
                let mut server = RemoteServer::new(url.clone());
                server.headers = headers.clone();
                server.options = remote.cloned().unwrap_or_default();
                server.authorizer = authorizer;
                Arc::new(server)
            }
        };
        let mut spec = mcp_client::ServerSpec::new(self.name.clone(), connector);
        spec.enabled = self.enabled;
        spec.startup_timeout = self.startup_timeout;
        spec.tool_timeout = self.tool_timeout;
        spec.max_tool_time = self.max_tool_time.max(self.tool_timeout);
        spec
    }
}

/// A loaded, validated configuration.
#[derive(Debug)]
pub(crate) struct Config {
    /// Every configured server, sorted by name.
    pub(crate) servers: Vec<ServerConfig>,
    /// The tool policy.
    pub(crate) policy: Policy,
    /// Remote servers' settings beyond URL and headers (bearer token variable, transport).
    pub(crate) remote: BTreeMap<String, RemoteOptions>,
    /// OAuth settings of the HTTP servers that use OAuth, by server name: every `http(s)`
    /// server without `bearer_token_env_var`, an `Authorization` header or `oauth.enabled =
    /// false`.
    pub(crate) oauth: BTreeMap<String, OAuthSettings>,
    /// How each stdio server is confined, by server name (its own setting, else `[sandbox]`'s).
    pub(crate) sandboxes: BTreeMap<String, SandboxSetting>,
    /// The file it was read from (kept from the servers: it may hold their secrets).
    pub(crate) file: Option<PathBuf>,
    /// How servers are kept alive (`[runtime]`).
    pub(crate) runtime: RuntimeSettings,
    /// Each server's configuration as written (its entry and the defaults that apply to it),
    /// to tell on a reload which servers changed.
    pub(crate) fingerprints: BTreeMap<String, String>,
    /// The policy as written, to tell whether a reload changed it.
    pub(crate) policy_fingerprint: String,
    /// Keys read and not used (other hosts' files), one line each, for the user to see.
    pub(crate) warnings: Vec<String>,
    /// Tool exposure budgets and tool search.
    pub(crate) tools: ToolsSettings,
}

/// What the model is sent of the tools: budgets and tool search, globally (our TOML's top
/// level) and per server.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ToolsSettings {
    /// Budgets, search modes and per-server settings (the `auto` threshold is set per model
    /// when the agent starts).
    pub(crate) exposure: tool_pool::ExposureOptions,
    /// `tool_search = "native"`: the provider searches (Anthropic only).
    pub(crate) native: bool,
    /// `max_loaded_tools`: most tools loaded through search per session.
    pub(crate) max_loaded: Option<usize>,
}

/// `[runtime]`: how servers connect and are kept alive while `run` and `chat` go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RuntimeSettings {
    /// Stdio servers starting at once.
    pub(crate) local_concurrency: usize,
    /// Remote servers connecting at once.
    pub(crate) remote_concurrency: usize,
    /// Restarts of a stdio server allowed within `restart_window`.
    pub(crate) restart_limit: u32,
    /// The window of `restart_limit`.
    pub(crate) restart_window: Duration,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        let set = mcp_client::SetOptions::default();
        Self {
            local_concurrency: set.local_concurrency,
            remote_concurrency: set.remote_concurrency,
            restart_limit: set.restarts.max_restarts,
            restart_window: set.restarts.window,
        }
    }
}

/// A stdio server's confinement as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SandboxSetting {
    /// What it may do; `None` for `sandbox = "off"`.
    pub(crate) sandbox: Option<Sandbox>,
    /// Refuse to start it when the kernel cannot confine it.
    pub(crate) required: bool,
}

impl Default for SandboxSetting {
    /// `standard`, unconfined with a warning where the kernel cannot confine.
    fn default() -> Self {
        Self { sandbox: Some(Sandbox::standard()), required: false }
    }
}

/// How the client obtains tokens for a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum OAuthGrant {
    /// A person logs in with a browser (`mcp-harness login NAME`).
    #[default]
    AuthorizationCode,
    /// A machine client: `client_id` with a secret or a private key.
    ClientCredentials,
}

/// A server's OAuth settings (`[servers.NAME.oauth]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct OAuthSettings {
    /// A pre-registered client id.
    pub(crate) client_id: Option<String>,
    /// The environment variable holding the client secret (never the secret itself).
    pub(crate) client_secret_env_var: Option<String>,
    /// A client ID metadata document URL, used where the authorization server supports it.
    pub(crate) client_metadata_url: Option<String>,
    /// Which grant.
    pub(crate) grant: OAuthGrant,
    /// A PKCS#8 PEM EC P-256 private key for `private_key_jwt` (client credentials).
    pub(crate) private_key_file: Option<PathBuf>,
    /// The only authorization server to send credentials to.
    pub(crate) issuer: Option<String>,
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// The file does not exist.
    #[error("no configuration file at {}{}", path.display(), origin.not_found_hint())]
    NotFound { path: PathBuf, origin: Origin },
    /// The file exists but cannot be read.
    #[error("config error in {}: cannot read it: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The content is wrong.
    #[error("config error in {}: {}", path.display(), Problem { key: key.as_deref(), message, position: *position })]
    Invalid { path: PathBuf, key: Option<String>, message: String, position: Option<(usize, usize)> },
    /// The file is inside the workspace.
    #[error(
        "refusing to use the configuration {}: it is inside the current directory {}, which an agent working \
         here can write to, and a configuration decides which commands this host runs. Keep it in your \
         configuration directory ({}), or pass --allow-workspace-config if you trust this directory.",
        path.display(), workspace.display(), default_dir.as_deref().map_or_else(|| "see --help".into(), |d| d.display().to_string())
    )]
    InWorkspace { path: PathBuf, workspace: PathBuf, default_dir: Option<PathBuf> },
    /// No configuration directory could be determined.
    #[error("cannot determine your configuration directory (is HOME set?); pass --config PATH or set {CONFIG_ENV}")]
    NoConfigDir,
    /// The current directory cannot be determined, so the workspace check cannot be made.
    #[error("cannot determine the current directory, so a workspace configuration cannot be ruled out: {0}")]
    NoCurrentDir(std::io::Error),
}

struct Problem<'a> {
    key: Option<&'a str>,
    message: &'a str,
    position: Option<(usize, usize)>,
}

impl fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(key) = self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(self.message)?;
        if let Some((line, column)) = self.position {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}

/// Where the path of the configuration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Origin {
    /// `--config PATH`.
    Flag,
    /// The environment variable [`CONFIG_ENV`].
    Env,
    /// The default location in the user's configuration directory.
    #[default]
    Default,
}

impl Origin {
    fn not_found_hint(self) -> String {
        match self {
            Self::Flag => " (the path given with --config); check the path, or leave --config out to use your \
                           configuration directory"
                .to_owned(),
            Self::Env => format!(" (the path in {CONFIG_ENV}); check the path, or unset {CONFIG_ENV}"),
            Self::Default => " (the default location); create it with `mcp-harness mcp add` or `mcp-harness mcp \
                              import`, write it by hand (`mcp-harness help config` lists every key), or pass \
                              --config PATH"
                .to_owned(),
        }
    }
}

/// The user's configuration directory for this program, if there is one.
pub(crate) fn default_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "mcp-harness").map(|d| d.config_dir().to_path_buf())
}

/// `config.toml` in the configuration directory, or `config.json` when only that exists.
pub(crate) fn default_path() -> Result<PathBuf, ConfigError> {
    let dir = default_dir().ok_or(ConfigError::NoConfigDir)?;
    let toml = dir.join("config.toml");
    let json = dir.join("config.json");
    Ok(if !toml.exists() && json.exists() { json } else { toml })
}

/// Refuses a configuration inside `workspace`, returning the resolved path to read.
///
/// Both the path as given (its directories resolved, not its last component) and its final
/// target count: a symlink inside the workspace is refused wherever it points, since an agent
/// could point it anywhere, and a link from outside into the workspace is refused too.
///
/// The user's configuration directory is trusted wherever the command runs (from the home
/// directory or `/`, the workspace contains it): a file in it is refused only when it resolves
/// into the workspace outside that directory.
pub(crate) fn check_outside_workspace(path: &Path, workspace: &Path, origin: Origin) -> Result<PathBuf, ConfigError> {
    let not_readable = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => ConfigError::NotFound { path: path.to_path_buf(), origin },
        _ => ConfigError::Read { path: path.to_path_buf(), source },
    };
    let resolved = path.canonicalize().map_err(not_readable)?;
    let workspace = workspace.canonicalize().map_err(ConfigError::NoCurrentDir)?;
    let as_given = match (path.parent().filter(|p| !p.as_os_str().is_empty()), path.file_name()) {
        (Some(dir), Some(name)) => dir.canonicalize().map_err(not_readable)?.join(name),
        (None, Some(name)) => std::env::current_dir()
            .map_err(ConfigError::NoCurrentDir)?
            .canonicalize()
            .map_err(ConfigError::NoCurrentDir)?
            .join(name),
        _ => resolved.clone(),
    };
    if let Some(shown) = in_workspace(&as_given, &resolved, &workspace) {
        return Err(ConfigError::InWorkspace { path: shown, workspace, default_dir: default_dir() });
    }
    Ok(resolved)
}

/// Which of `as_given` and `resolved` (canonical paths of one file) an agent working in
/// `workspace` (canonical) could have written, if either: inside the workspace and not inside
/// the user's own configuration directory.
pub(crate) fn in_workspace(as_given: &Path, resolved: &Path, workspace: &Path) -> Option<PathBuf> {
    // Resolved even before it exists: the first `mcp add` creates it.
    let trusted = default_dir().and_then(|d| resolve_existing_part(&d).ok());
    let exposed = |p: &Path| p.starts_with(workspace) && !trusted.as_deref().is_some_and(|t| p.starts_with(t));
    if exposed(as_given) {
        Some(as_given.to_path_buf())
    } else if exposed(resolved) {
        Some(resolved.to_path_buf())
    } else {
        None
    }
}

/// `path` with its longest existing ancestor resolved (symlinks, `..`) and the rest as written:
/// where a file that may not exist yet would be.
pub(crate) fn resolve_existing_part(path: &Path) -> std::io::Result<PathBuf> {
    let absolute = std::path::absolute(path)?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(existing).is_err() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else { break };
        rest.push(name.to_owned());
        existing = parent;
    }
    let mut resolved = existing.canonicalize()?;
    resolved.extend(rest.iter().rev());
    Ok(resolved)
}

/// Longest configuration (or env file) read: a configuration is a few kilobytes.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// The text of the file at `path`, bounded.
pub(crate) fn read_text(path: &Path, origin: Origin) -> Result<String, ConfigError> {
    use std::io::Read as _;
    let failed = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => ConfigError::NotFound { path: path.to_path_buf(), origin },
        _ => ConfigError::Read { path: path.to_path_buf(), source },
    };
    let mut text = String::new();
    std::fs::File::open(path).map_err(failed)?.take(MAX_FILE_BYTES + 1).read_to_string(&mut text).map_err(failed)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            key: None,
            message: format!("larger than {} MiB; this is not a configuration file", MAX_FILE_BYTES >> 20),
            position: None,
        });
    }
    Ok(text)
}

/// Reads and validates the file at `path`.
pub(crate) fn load(path: &Path, origin: Origin, context: &Context<'_>) -> Result<Config, ConfigError> {
    let text = read_text(path, origin)?;
    parse_with(path, &text, context)
}

/// Reads the file at `path` without expanding anything (what `mcp list` shows).
pub(crate) fn read_raw(path: &Path, origin: Origin) -> Result<RawFile, ConfigError> {
    let text = read_text(path, origin)?;
    let home = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
    let cwd = std::env::current_dir().ok();
    foreign::read(path, &text, foreign::ReadContext { home: home.as_deref(), cwd: cwd.as_deref() })
}

/// Asks for a VS Code input (an error says why it cannot be).
pub(crate) type AskFor<'a> = dyn Fn(&Input) -> Result<String, String> + 'a;

/// What reading a configuration may use beyond its file: the environment (`${VAR}`), the
/// terminal (VS Code inputs), and the workspace an env file must not be in.
pub(crate) struct Context<'a> {
    /// Looks up an environment variable.
    pub(crate) env: Box<vars::Lookup<'a>>,
    /// The user's home directory.
    pub(crate) home: Option<PathBuf>,
    /// The current directory.
    pub(crate) cwd: Option<PathBuf>,
    /// Env files inside it are refused, like configurations (`None`: the user allowed it).
    pub(crate) workspace: Option<PathBuf>,
    /// Asks for a VS Code input.
    pub(crate) ask: Box<AskFor<'a>>,
    /// Only check the file: references are not resolved, nothing is asked or read.
    pub(crate) check_only: bool,
}

impl Context<'_> {
    /// The process's environment, home and current directory; inputs cannot be asked.
    pub(crate) fn process() -> Self {
        Self {
            env: Box::new(|name| std::env::var(name).ok()),
            home: directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf()),
            cwd: std::env::current_dir().ok(),
            workspace: None,
            ask: Box::new(|input| Err(format!("input {:?} cannot be asked for here", input.id))),
            check_only: false,
        }
    }

    /// For checking an edited file: nothing is resolved.
    pub(crate) fn check_only() -> Self {
        Self { check_only: true, ..Self::process() }
    }
}

/// The offline demo's setup, built in code (no file to trust): the notes server (`harness`,
/// this program, as `demo-server`), reading allowed, writing left to the default (confirm).
pub(crate) fn demo_config(harness: &Path) -> Config {
    let mut stdio = StdioConfig::new(harness.to_string_lossy().into_owned(), ["demo-server"]);
    stdio.label = "notes".to_owned();
    let rules = ["list_notes", "read_note"]
        .into_iter()
        .map(|tool| policy::RuleConfig::new("notes", tool, policy::Decision::Allow))
        .collect();
    let policy = Policy::new(PolicyConfig { default: policy::Decision::Confirm, rules, ..Default::default() })
        .unwrap_or_default();
    Config {
        servers: vec![ServerConfig::stdio("notes", stdio)],
        policy,
        remote: BTreeMap::new(),
        oauth: BTreeMap::new(),
        sandboxes: BTreeMap::new(),
        file: None,
        runtime: RuntimeSettings::default(),
        fingerprints: BTreeMap::new(),
        policy_fingerprint: String::new(),
        warnings: Vec::new(),
        tools: ToolsSettings::default(),
    }
}

/// Parses and validates `text`, which was read from `path` (used in messages, and as the base
/// of relative `cwd`s), with the process's environment.
#[cfg(test)]
pub(crate) fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    parse_with(path, text, &Context::process())
}

/// Parses and validates `text`, which was read from `path`, in `context`.
pub(crate) fn parse_with(path: &Path, text: &str, context: &Context<'_>) -> Result<Config, ConfigError> {
    parse_checked(path, text, context).map_err(|e| foreign::with_position(e, path, text))
}

fn parse_checked(path: &Path, text: &str, context: &Context<'_>) -> Result<Config, ConfigError> {
    let invalid = |key: Option<String>, message: String, position| ConfigError::Invalid {
        path: path.to_path_buf(),
        key,
        message,
        position,
    };
    let read_context = foreign::ReadContext { home: context.home.as_deref(), cwd: context.cwd.as_deref() };
    let RawFile { table, servers, policy, sandbox: sandbox_defaults, runtime, inputs, warnings, tools, .. } =
        foreign::read(path, text, read_context)?;
    let mut tools = tools.into_settings().map_err(|(key, message)| invalid(Some(key.to_owned()), message, None))?;
    let runtime = runtime.into_settings().map_err(|message| invalid(Some("runtime".into()), message, None))?;
    // Each input is asked once, however many servers use it.
    let answers = std::cell::RefCell::new(BTreeMap::<String, String>::new());
    let ask = |id: &str| -> Result<String, String> {
        if let Some(answer) = answers.borrow().get(id) {
            return Ok(answer.clone());
        }
        let input = inputs.iter().find(|i| i.id == id).ok_or_else(|| format!("no input {id:?} in `inputs`"))?;
        let answer = (context.ask)(input)?;
        answers.borrow_mut().insert(id.to_owned(), answer.clone());
        Ok(answer)
    };
    let base = path.parent().unwrap_or(Path::new(""));
    let default_sandbox = match sandbox_defaults.default {
        Some(raw) => {
            raw.into_sandbox(base).map_err(|message| invalid(Some("sandbox.default".into()), message, None))?
        }
        None => SandboxSetting::default().sandbox,
    };
    let default_required = sandbox_defaults.required.unwrap_or(false);
    // Each server's entry as written (in our terms, whatever the file's format) with the
    // defaults that shape it, and the policy's: equal fingerprints mean a reload changed nothing.
    let globals = format!("{default_sandbox:?}|{default_required}");
    let mut fingerprints = BTreeMap::new();
    let mut specs = Vec::with_capacity(servers.len());
    let mut remote = BTreeMap::new();
    let mut oauth = BTreeMap::new();
    let mut sandboxes = BTreeMap::new();
    let mut filters = Vec::new();
    let mut instructions_off = Vec::new();
    let mut elicitation_off = Vec::new();
    for (name, mut raw) in servers {
        let key = || foreign::entry_key(table, &name);
        fingerprints.insert(name.clone(), format!("{}|{globals}", edit::server_table(&raw)));
        if let Some(exposure) =
            raw.take_exposure().map_err(|(field, m)| invalid(Some(format!("{}.{field}", key())), m, None))?
        {
            tools.exposure.servers.insert(name.clone(), exposure);
        }
        if raw.enabled != Some(false) {
            let ask: Option<&vars::AskInput<'_>> = if inputs.is_empty() { None } else { Some(&ask) };
            raw.resolve(context, ask, base)
                .map_err(|(field, m)| invalid(Some(format!("{}.{field}", key())), m, None))?;
        }
        if let Some(filter) =
            raw.tool_filter().map_err(|(field, m)| invalid(Some(format!("{}.{field}", key())), m, None))?
        {
            filters.push((name.clone(), filter));
        }
        if raw.instructions == Some(false) {
            instructions_off.push(name.clone());
        }
        if raw.elicitation == Some(false) {
            elicitation_off.push(name.clone());
        }
        let sandbox = (raw.sandbox.take(), raw.sandbox_required.take());
        let (spec, options, settings) =
            raw.into_spec(&name, base).map_err(|message| invalid(Some(key()), message, None))?;
        if matches!(spec.target, ServerTarget::Stdio(_)) {
            let setting = SandboxSetting {
                sandbox: match sandbox.0 {
                    Some(raw) => {
                        raw.into_sandbox(base).map_err(|m| invalid(Some(format!("{}.sandbox", key())), m, None))?
                    }
                    None => default_sandbox.clone(),
                },
                required: sandbox.1.unwrap_or(default_required),
            };
            sandboxes.insert(name.clone(), setting);
        } else if sandbox.0.is_some() || sandbox.1.is_some() {
            return Err(invalid(Some(key()), "`sandbox` only applies to stdio (command) servers".into(), None));
        }
        if let Some(options) = options {
            remote.insert(name.clone(), options);
        }
        if let Some(settings) = settings {
            oauth.insert(name.clone(), settings);
        }
        specs.push(spec);
    }
    let policy_fingerprint = format!("{policy:?}|{filters:?}|{instructions_off:?}|{elicitation_off:?}");
    let policy = Policy::new(policy).map_err(|e| match e {
        PolicyError::InvalidPattern { index, field, pattern, reason } => invalid(
            Some(format!("policy.rules[{index}].{field}")),
            format!("invalid pattern {pattern:?}: {reason}"),
            None,
        ),
        PolicyError::InvalidResourcePattern { index, field, pattern, reason } => invalid(
            Some(format!("policy.resources[{index}].{field}")),
            format!("invalid pattern {pattern:?}: {reason}"),
            None,
        ),
        other => invalid(Some("policy".to_owned()), other.to_string(), None),
    })?;
    let policy = filters.into_iter().fold(policy, |policy, (name, filter)| policy.with_tool_filter(&name, filter));
    let policy = instructions_off.iter().fold(policy, |policy, name| policy.without_instructions(name));
    let policy = elicitation_off.iter().fold(policy, |policy, name| policy.without_elicitation(name));
    Ok(Config {
        servers: specs,
        policy,
        remote,
        oauth,
        sandboxes,
        file: Some(path.to_path_buf()),
        runtime,
        fingerprints,
        policy_fingerprint,
        warnings,
        tools,
    })
}

fn key_of(path: &serde_path_to_error::Path) -> Option<String> {
    let key = path.to_string();
    (key != ".").then_some(key)
}

/// serde_json appends " at line L column C"; the position is reported separately.
fn json_message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    text.strip_suffix(&suffix).map(str::to_owned).unwrap_or(text)
}

/// 1-based line and column (in characters) of byte `offset`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToml {
    #[serde(default)]
    servers: BTreeMap<String, RawServer>,
    #[serde(default)]
    policy: PolicyConfig,
    #[serde(default)]
    sandbox: RawSandboxDefaults,
    #[serde(default)]
    runtime: RawRuntime,
    /// Tool exposure and search (see [`ToolsSettings`]).
    #[serde(default)]
    tool_search: Option<String>,
    /// Largest definition of one tool, in bytes.
    #[serde(default)]
    tool_budget: Option<usize>,
    /// Largest total of the definitions sent per step, in bytes.
    #[serde(default)]
    pool_budget: Option<usize>,
    /// Most tools loaded through search per session.
    #[serde(default)]
    max_loaded_tools: Option<usize>,
}

impl RawToml {
    /// The top-level tool exposure keys, taken out.
    pub(crate) fn take_tools(&mut self) -> RawTools {
        RawTools {
            tool_search: self.tool_search.take(),
            tool_budget: self.tool_budget.take(),
            pool_budget: self.pool_budget.take(),
            max_loaded_tools: self.max_loaded_tools.take(),
        }
    }
}

/// Our TOML's top-level tool exposure keys as written.
#[derive(Debug, Default)]
pub(crate) struct RawTools {
    tool_search: Option<String>,
    tool_budget: Option<usize>,
    pool_budget: Option<usize>,
    max_loaded_tools: Option<usize>,
}

/// `[runtime]`.
#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with `local_concurrency`, `remote_concurrency`, `restart_limit` and `restart_window_s`"
)]
pub(crate) struct RawRuntime {
    #[serde(default)]
    local_concurrency: Option<usize>,
    #[serde(default)]
    remote_concurrency: Option<usize>,
    #[serde(default)]
    restart_limit: Option<u32>,
    #[serde(default)]
    restart_window_s: Option<Seconds>,
}

impl RawRuntime {
    fn into_settings(self) -> Result<RuntimeSettings, String> {
        let defaults = RuntimeSettings::default();
        let positive = |n: Option<usize>, key: &str, default: usize| match n {
            Some(0) => Err(format!("`{key}` must be at least 1")),
            Some(n) => Ok(n),
            None => Ok(default),
        };
        Ok(RuntimeSettings {
            local_concurrency: positive(self.local_concurrency, "local_concurrency", defaults.local_concurrency)?,
            remote_concurrency: positive(self.remote_concurrency, "remote_concurrency", defaults.remote_concurrency)?,
            restart_limit: self.restart_limit.unwrap_or(defaults.restart_limit),
            restart_window: self.restart_window_s.map_or(defaults.restart_window, |s| s.0),
        })
    }
}

/// `[sandbox]`: the default of every stdio server's `sandbox` and `sandbox_required`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, expecting = "a table with `default` and `required`")]
pub(crate) struct RawSandboxDefaults {
    #[serde(default)]
    default: Option<RawSandbox>,
    #[serde(default)]
    required: Option<bool>,
}

/// `"standard"`, `"off"`, or a table that extends standard.
enum RawSandbox {
    Standard,
    Off,
    Table(RawSandboxTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandboxTable {
    #[serde(default, deserialize_with = "string_list")]
    read: Option<Vec<String>>,
    #[serde(default, deserialize_with = "string_list")]
    write: Option<Vec<String>>,
    #[serde(default)]
    network: Option<bool>,
    #[serde(default)]
    memory_mib: Option<u64>,
    #[serde(default)]
    processes: Option<u64>,
    #[serde(default)]
    open_files: Option<u64>,
    #[serde(default)]
    cpu_seconds: Option<u64>,
}

impl<'de> Deserialize<'de> for RawSandbox {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawSandbox;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"standard\", \"off\", or a table with read, write, network, memory_mib, processes, open_files, cpu_seconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawSandbox, E> {
                match v {
                    "standard" => Ok(RawSandbox::Standard),
                    "off" => Ok(RawSandbox::Off),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawSandbox, A::Error> {
                RawSandboxTable::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawSandbox::Table)
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl RawSandbox {
    /// The sandbox (`None` for off); paths: `~/` is HOME, relative ones are relative to the file.
    fn into_sandbox(self, base: &Path) -> Result<Option<Sandbox>, String> {
        let table = match self {
            RawSandbox::Off => return Ok(None),
            RawSandbox::Standard => return Ok(Some(Sandbox::standard())),
            RawSandbox::Table(table) => table,
        };
        let home = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
        let resolve = |key: &str, paths: Option<Vec<String>>| -> Result<Vec<PathBuf>, String> {
            paths
                .unwrap_or_default()
                .into_iter()
                .map(|p| match p.strip_prefix("~/") {
                    Some(rest) => home
                        .as_ref()
                        .map(|h| h.join(rest))
                        .ok_or_else(|| format!("`{key}`: {p:?} needs a home directory, and none is known")),
                    None if p == "~" => home.clone().ok_or_else(|| format!("`{key}`: no home directory is known")),
                    None => Ok(base.join(p)),
                })
                .collect()
        };
        let limit = |key: &str, value: Option<u64>, default: Option<u64>| match value {
            Some(0) => Err(format!("`{key}` must be a positive number")),
            Some(v) => Ok(Some(v)),
            None => Ok(default),
        };
        let defaults = Limits::default();
        Ok(Some(Sandbox {
            read: resolve("read", table.read)?,
            write: resolve("write", table.write)?,
            network: table.network.unwrap_or(true),
            limits: Limits {
                memory_mib: limit("memory_mib", table.memory_mib, defaults.memory_mib)?,
                processes: limit("processes", table.processes, defaults.processes)?,
                open_files: limit("open_files", table.open_files, defaults.open_files)?,
                cpu_seconds: limit("cpu_seconds", table.cpu_seconds, defaults.cpu_seconds)?,
            },
            protect: Vec::new(),
        }))
    }
}

/// One server's entry as written (our keys; other hosts' entries are mapped onto it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of server settings")]
pub(crate) struct RawServer {
    #[serde(default)]
    command: Option<String>,
    #[serde(default, deserialize_with = "string_list")]
    args: Option<Vec<String>>,
    #[serde(default, deserialize_with = "string_map")]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default, deserialize_with = "string_map")]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    startup_timeout_s: Option<Seconds>,
    #[serde(default)]
    tool_timeout_s: Option<Seconds>,
    /// Claude's transport type (`stdio`, `sse`, `http`); checked against command/url.
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// The environment variable holding a bearer token for a remote server (the token itself
    /// never belongs in a configuration file).
    #[serde(default)]
    bearer_token_env_var: Option<String>,
    /// OAuth settings of a remote server.
    #[serde(default)]
    oauth: Option<RawOAuth>,
    /// A stdio server's confinement.
    #[serde(default)]
    sandbox: Option<RawSandbox>,
    /// Refuse to start a stdio server unconfined.
    #[serde(default)]
    sandbox_required: Option<bool>,
    /// The longest a tool call may run while it reports progress.
    #[serde(default)]
    max_tool_time_s: Option<Seconds>,
    /// Variables passed on from mcp-harness's own environment, when set (Codex's `env_vars`).
    #[serde(default, deserialize_with = "string_list")]
    env_vars: Option<Vec<String>>,
    /// A file of `NAME=value` lines added to `env` (VS Code's and Cursor's `envFile`).
    #[serde(default)]
    env_file: Option<String>,
    /// Only these tools are offered (exact names).
    #[serde(default, deserialize_with = "string_list")]
    enabled_tools: Option<Vec<String>>,
    /// These tools are never offered (exact names).
    #[serde(default, deserialize_with = "string_list")]
    disabled_tools: Option<Vec<String>>,
    /// `run` and `chat` do not start without it (Codex's `required` too).
    #[serde(default)]
    required: Option<bool>,
    /// Whether the server's `instructions` reach the model's system prompt (default yes).
    #[serde(default)]
    instructions: Option<bool>,
    /// Whether the server may ask the user for input (elicitation) on a terminal (default yes).
    #[serde(default)]
    elicitation: Option<bool>,
    /// Its tools' search mode (`auto`, `on`, `off`).
    #[serde(default)]
    pub(crate) tool_search: Option<String>,
    /// Its tools are always sent, never deferred.
    #[serde(default)]
    pub(crate) always_load: Option<bool>,
    /// Largest definition of one of its tools, in bytes.
    #[serde(default)]
    pub(crate) tool_budget: Option<usize>,
    /// Largest total of its loaded definitions, in bytes.
    #[serde(default)]
    pub(crate) server_budget: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of OAuth settings")]
struct RawOAuth {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    client_secret_env_var: Option<String>,
    #[serde(default)]
    client_metadata_url: Option<String>,
    #[serde(default)]
    grant: Option<String>,
    #[serde(default)]
    private_key_file: Option<PathBuf>,
    #[serde(default)]
    issuer: Option<String>,
}

impl RawOAuth {
    fn into_settings(self, base: &Path) -> Result<Option<OAuthSettings>, String> {
        if self.enabled == Some(false) {
            return Ok(None);
        }
        let grant = match self.grant.as_deref() {
            None | Some("authorization_code") => OAuthGrant::AuthorizationCode,
            Some("client_credentials") => OAuthGrant::ClientCredentials,
            Some(other) => {
                return Err(format!(
                    "`oauth.grant` must be \"authorization_code\" or \"client_credentials\", not {other:?}"
                ));
            }
        };
        if let Some(var) = &self.client_secret_env_var
            && (var.trim().is_empty() || var.contains(['=', '\0']))
        {
            return Err(format!("`oauth.client_secret_env_var` must name an environment variable, not {var:?}"));
        }
        if let Some(issuer) = &self.issuer
            && !url::Url::parse(issuer).is_ok_and(|u| mcp_auth::flow::is_secure_endpoint(&u))
        {
            return Err(format!("`oauth.issuer` must be an https:// URL, not {issuer:?}"));
        }
        if let Some(url) = &self.client_metadata_url
            && !url.starts_with("https://")
        {
            return Err(format!("`oauth.client_metadata_url` must be an https:// URL, not {url:?}"));
        }
        if grant == OAuthGrant::ClientCredentials {
            if self.client_id.is_none() {
                return Err("`oauth.grant = \"client_credentials\"` needs `oauth.client_id`".to_owned());
            }
            if self.client_secret_env_var.is_none() && self.private_key_file.is_none() {
                return Err("`oauth.grant = \"client_credentials\"` needs `oauth.client_secret_env_var` or \
                            `oauth.private_key_file`"
                    .to_owned());
            }
        } else if self.private_key_file.is_some() {
            return Err("`oauth.private_key_file` only applies to `oauth.grant = \"client_credentials\"`".to_owned());
        }
        Ok(Some(OAuthSettings {
            client_id: self.client_id,
            client_secret_env_var: self.client_secret_env_var,
            client_metadata_url: self.client_metadata_url,
            grant,
            // Relative to the file, like `cwd`.
            private_key_file: self.private_key_file.map(|p| base.join(p)),
            issuer: self.issuer,
        }))
    }
}

impl RawServer {
    /// Expands the references of the fields that may hold them, then adds `env_file`'s and
    /// `env_vars`' variables to `env` (what `env` says wins). Errors are (field, message).
    fn resolve(
        &mut self,
        context: &Context<'_>,
        input: Option<&vars::AskInput<'_>>,
        base: &Path,
    ) -> Result<(), (String, String)> {
        let placeholder = |_: &str| Some("x".to_owned());
        let env: &dyn Fn(&str) -> Option<String> = if context.check_only { &placeholder } else { &*context.env };
        let checked_input = |_: &str| Ok("x".to_owned());
        let input = if context.check_only && input.is_some() { Some(&checked_input as _) } else { input };
        let expand = |field: &str, text: &mut String| {
            *text = vars::expand(text, env, input).map_err(|m| (field.to_owned(), m))?;
            Ok::<(), (String, String)>(())
        };
        if let Some(command) = &mut self.command {
            expand("command", command)?;
        }
        for arg in self.args.iter_mut().flatten() {
            expand("args", arg)?;
        }
        for (k, v) in self.env.iter_mut().flatten() {
            expand(&format!("env.{k}"), v)?;
        }
        if let Some(cwd) = &mut self.cwd {
            let mut text = cwd.to_string_lossy().into_owned();
            expand("cwd", &mut text)?;
            *cwd = PathBuf::from(text);
        }
        if let Some(url) = &mut self.url {
            expand("url", url)?;
        }
        for (k, v) in self.headers.iter_mut().flatten() {
            expand(&format!("headers.{k}"), v)?;
        }
        if let Some(file) = &mut self.env_file {
            expand("env_file", file)?;
        }
        if context.check_only {
            return Ok(());
        }
        if let (Some(file), Some(_)) = (&self.env_file, &self.command) {
            let path = match file.strip_prefix("~/") {
                Some(rest) => context.home.as_ref().map_or_else(|| PathBuf::from(file), |h| h.join(rest)),
                None => base.join(file),
            };
            let vars = env_file(&path, context.workspace.as_deref()).map_err(|m| ("env_file".to_owned(), m))?;
            let env = self.env.get_or_insert_with(BTreeMap::new);
            for (k, v) in vars {
                env.entry(k).or_insert(v);
            }
        }
        if let (Some(names), Some(_)) = (&self.env_vars, &self.command) {
            for name in names {
                if let Some(value) = (context.env)(name) {
                    self.env.get_or_insert_with(BTreeMap::new).entry(name.clone()).or_insert(value);
                }
            }
        }
        Ok(())
    }

    /// `enabled_tools` and `disabled_tools` as a policy filter, if either is given.
    fn tool_filter(&self) -> Result<Option<policy::ToolFilter>, (String, String)> {
        for (field, list) in [("enabled_tools", &self.enabled_tools), ("disabled_tools", &self.disabled_tools)] {
            if list.iter().flatten().any(|t| t.trim().is_empty()) {
                return Err((field.to_owned(), "tool names must not be empty".to_owned()));
            }
        }
        if self.enabled_tools.is_none() && self.disabled_tools.is_none() {
            return Ok(None);
        }
        Ok(Some(policy::ToolFilter {
            enabled: self.enabled_tools.clone(),
            disabled: self.disabled_tools.clone().unwrap_or_default(),
        }))
    }

    fn into_spec(
        self,
        name: &str,
        base: &Path,
    ) -> Result<(ServerConfig, Option<RemoteOptions>, Option<OAuthSettings>), String> {
        // Names are printed and named in tool names: nothing that drives a terminal or reads
        // differently from what it says (ESC, bidirectional overrides, zero-width characters).
        if name.is_empty() || name.chars().any(mcp_safety::text::is_stripped) {
            return Err("a server name must be non-empty and free of control characters, bidirectional \
                 overrides and invisible characters"
                .to_owned());
        }
        let only_for = |present: bool, key: &str, kind: &str| {
            if present { Err(format!("`{key}` only applies to {kind} servers")) } else { Ok(()) }
        };
        let mut remote = None;
        let mut oauth = None;
        let target = match (self.command, self.url) {
            (Some(_), Some(_)) => {
                return Err(
                    "has both `command` and `url`; give `command` for a stdio server or `url` for a remote one".into(),
                );
            }
            (None, None) => {
                return Err("needs either `command` (a stdio server) or `url` (a remote server)".into());
            }
            (Some(command), None) => {
                if !matches!(self.kind.as_deref(), None | Some("stdio")) {
                    return Err(format!(
                        "has `command`, so its `type` must be \"stdio\", not {:?}",
                        self.kind.unwrap_or_default()
                    ));
                }
                if command.trim().is_empty() {
                    return Err("`command` is empty".into());
                }
                only_for(self.headers.is_some(), "headers", "remote (url)")?;
                only_for(self.bearer_token_env_var.is_some(), "bearer_token_env_var", "remote (url)")?;
                only_for(self.oauth.is_some(), "oauth", "remote (url)")?;
                let mut config = StdioConfig::new(command, self.args.unwrap_or_default());
                config.env = self.env.unwrap_or_default();
                // Relative to the file, not to wherever the program happens to be started.
                config.cwd = self.cwd.map(|cwd| base.join(cwd));
                config.label = name.to_owned();
                ServerTarget::Stdio(config)
            }
            (None, Some(url)) => {
                if !matches!(self.kind.as_deref(), None | Some("sse" | "http" | "streamable-http" | "streamableHttp")) {
                    return Err(format!(
                        "has `url`, so its `type` must be \"http\" or \"sse\", not {:?}",
                        self.kind.unwrap_or_default()
                    ));
                }
                only_for(self.args.is_some(), "args", "stdio (command)")?;
                only_for(self.env.is_some(), "env", "stdio (command)")?;
                only_for(self.cwd.is_some(), "cwd", "stdio (command)")?;
                only_for(self.env_vars.is_some(), "env_vars", "stdio (command)")?;
                only_for(self.env_file.is_some(), "env_file", "stdio (command)")?;
                let mut options = RemoteOptions::default();
                if let Some(var) = self.bearer_token_env_var {
                    if var.trim().is_empty() || var.contains(['=', '\0']) {
                        return Err(format!("`bearer_token_env_var` must name an environment variable, not {var:?}"));
                    }
                    options = options.bearer_token_env(var);
                }
                // Claude's "sse" means the 2024-11-05 HTTP+SSE transport.
                if self.kind.as_deref() == Some("sse") {
                    options = options.http_mode(HttpMode::LegacySse);
                }
                let headers = self.headers.unwrap_or_default();
                let credentials_given = options.bearer_token_env.is_some()
                    || headers.keys().any(|k| k.eq_ignore_ascii_case("authorization"));
                let http = url.starts_with("http://") || url.starts_with("https://");
                oauth = match self.oauth {
                    Some(raw) if raw.enabled != Some(false) && (credentials_given || !http) => {
                        return Err(if http {
                            "`oauth` cannot be combined with `bearer_token_env_var` or an Authorization header".into()
                        } else {
                            "`oauth` applies to http:// and https:// servers only".into()
                        });
                    }
                    Some(raw) => raw.into_settings(base)?,
                    None if http && !credentials_given => Some(OAuthSettings::default()),
                    None => None,
                };
                remote = Some(options);
                ServerTarget::Remote { url, headers }
            }
        };
        let spec = ServerConfig {
            name: name.to_owned(),
            target,
            enabled: self.enabled.unwrap_or(true),
            startup_timeout: self.startup_timeout_s.map_or(DEFAULT_STARTUP_TIMEOUT, |s| s.0),
            tool_timeout: self.tool_timeout_s.map_or(DEFAULT_TOOL_TIMEOUT, |s| s.0),
            max_tool_time: self.max_tool_time_s.map_or(DEFAULT_MAX_TOOL_TIME, |s| s.0),
            required: self.required.unwrap_or(false),
        };
        Ok((spec, remote, oauth))
    }
}

/// The variables of an env file: `NAME=value` lines, `export ` allowed, `#` comments, values
/// optionally in single or double quotes. A file inside `workspace` is refused like a
/// configuration there: an agent could choose what the server's environment holds.
fn env_file(path: &Path, workspace: Option<&Path>) -> Result<BTreeMap<String, String>, String> {
    let message = |e: ConfigError| match e {
        ConfigError::InWorkspace { path: shown, .. } => format!(
            "{} is inside the current directory, which an agent working here can write to; keep it \
             elsewhere, or pass --allow-workspace-config if you trust this directory",
            shown.display()
        ),
        ConfigError::NotFound { .. } => format!("{} does not exist", path.display()),
        other => other.to_string(),
    };
    if let Some(workspace) = workspace {
        // The configuration's own rule: an agent could choose what the server's environment holds.
        check_outside_workspace(path, workspace, Origin::Flag).map_err(message)?;
    }
    let text = read_text(path, Origin::Flag).map_err(message)?;
    let mut vars = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((name, value)) = line.split_once('=') else {
            return Err(format!("{} line {}: expected NAME=value", path.display(), n + 1));
        };
        let value = value.trim();
        let value = match (value.chars().next(), value.chars().last()) {
            (Some(q @ ('"' | '\'')), Some(end)) if value.len() >= 2 && end == q => &value[1..value.len() - 1],
            _ => value.split(" #").next().unwrap_or(value).trim_end(),
        };
        vars.insert(name.trim().to_owned(), value.to_owned());
    }
    Ok(vars)
}

/// A positive number of seconds, integer or fractional.
struct Seconds(Duration);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a positive number of seconds (at most {MAX_TIMEOUT_S})")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
                if v > 0.0 && v <= MAX_TIMEOUT_S {
                    Duration::try_from_secs_f64(v)
                        .map(Seconds)
                        .map_err(|_| E::invalid_value(de::Unexpected::Float(v), &self))
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
                if v > 0 && (v as f64) <= MAX_TIMEOUT_S {
                    Ok(Seconds(Duration::from_secs(v.unsigned_abs())))
                } else {
                    Err(E::invalid_value(de::Unexpected::Signed(v), &self))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
                if v > 0 && (v as f64) <= MAX_TIMEOUT_S {
                    Ok(Seconds(Duration::from_secs(v)))
                } else {
                    Err(E::invalid_value(de::Unexpected::Unsigned(v), &self))
                }
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// Strict list of strings, with a message that says so (serde's default says "a sequence").
fn string_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<String>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of strings")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<StringItem>()? {
                out.push(item.0);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_seq(V).map(Some)
}

/// Strict table of string values.
fn string_map<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of strings")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((k, v)) = map.next_entry::<String, StringItem>()? {
                out.insert(k, v.0);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(V).map(Some)
}

/// A string element whose error says "a string" (not the serde default of the same words,
/// but kept explicit so numbers are never silently converted).
struct StringItem(String);

impl<'de> Deserialize<'de> for StringItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(StringItem)
    }
}

/// A `tool_search` value: `auto`, `on`, `off`, and (where `native` may be given) `native`,
/// which defers like `on`.
fn search_mode(value: &str, native_allowed: bool) -> Result<(tool_pool::SearchMode, bool), String> {
    use tool_pool::SearchMode;
    match value {
        "auto" => Ok((SearchMode::Auto, false)),
        "on" => Ok((SearchMode::On, false)),
        "off" => Ok((SearchMode::Off, false)),
        "native" if native_allowed => Ok((SearchMode::On, true)),
        "native" => Err("`tool_search = \"native\"` is a setting of the whole configuration (the provider \
                         searches every server's tools), not of one server; use \"auto\", \"on\" or \"off\" here"
            .to_owned()),
        other => Err(format!(
            "`tool_search` must be \"auto\", \"on\", \"off\"{}, not {other:?}",
            if native_allowed { " or \"native\"" } else { "" }
        )),
    }
}

impl RawTools {
    /// The settings; on error, the key and the message.
    fn into_settings(self) -> Result<ToolsSettings, (&'static str, String)> {
        let RawTools { tool_search, tool_budget, pool_budget, max_loaded_tools } = self;
        let mut settings = ToolsSettings::default();
        if let Some(value) = tool_search {
            let (mode, native) = search_mode(&value, true).map_err(|m| ("tool_search", m))?;
            settings.exposure.tool_search = mode;
            settings.native = native;
        }
        if let Some(budget) = tool_budget {
            settings.exposure.tool_budget = budget;
        }
        if let Some(budget) = pool_budget {
            settings.exposure.pool_budget = budget;
        }
        if max_loaded_tools == Some(0) {
            return Err(("max_loaded_tools", "`max_loaded_tools` must be at least 1".to_owned()));
        }
        settings.max_loaded = max_loaded_tools;
        Ok(settings)
    }
}

impl RawServer {
    /// Takes the server's exposure keys out; `None` when it sets none. On error, the key and
    /// the message.
    fn take_exposure(&mut self) -> Result<Option<tool_pool::ServerExposure>, (&'static str, String)> {
        let tool_search = match self.tool_search.take() {
            Some(value) => Some(search_mode(&value, false).map_err(|m| ("tool_search", m))?.0),
            None => None,
        };
        let exposure = tool_pool::ServerExposure {
            tool_budget: self.tool_budget.take(),
            server_budget: self.server_budget.take(),
            tool_search,
            always_load: self.always_load.take().unwrap_or(false),
        };
        Ok((exposure != tool_pool::ServerExposure::default()).then_some(exposure))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn toml_err(text: &str) -> String {
        parse(Path::new("/x/config.toml"), text).unwrap_err().to_string()
    }

    fn json_err(text: &str) -> String {
        parse(Path::new("/x/claude.json"), text).unwrap_err().to_string()
    }

    fn stdio(spec: &ServerConfig) -> &StdioConfig {
        match &spec.target {
            ServerTarget::Stdio(c) => c,
            ServerTarget::Remote { .. } => panic!("expected stdio"),
        }
    }

    #[test]
    fn parses_a_full_toml_configuration() {
        let config = parse(
            Path::new("/home/u/.config/mcp-harness/config.toml"),
            r#"
            [servers.git]
            command = "uvx"
            args = ["mcp-server-git", "--repository", "."]
            env = { GIT_PAGER = "cat" }
            cwd = "repos"
            startup_timeout_s = 5
            tool_timeout_s = 2.5

            [servers.docs]
            url = "https://docs.example/mcp"
            headers = { Authorization = "Bearer x" }
            enabled = false
            instructions = false
            elicitation = false

            [policy]
            default = "deny"
            [[policy.rules]]
            server = "git"
            tool = "git_*"
            decision = "allow"
            "#,
        )
        .unwrap();
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["docs", "git"]);
        let git = &config.servers[1];
        let c = stdio(git);
        assert_eq!((c.command.as_str(), c.args.len(), c.label.as_str()), ("uvx", 3, "git"));
        assert_eq!(c.env.get("GIT_PAGER").map(String::as_str), Some("cat"));
        assert_eq!(c.cwd.as_deref(), Some(Path::new("/home/u/.config/mcp-harness/repos")));
        assert_eq!((git.startup_timeout, git.tool_timeout), (Duration::from_secs(5), Duration::from_millis(2500)));
        assert!(git.enabled);
        let docs = &config.servers[0];
        assert!(!docs.enabled);
        assert!(
            matches!(&docs.target, ServerTarget::Remote { url, headers } if url == "https://docs.example/mcp" && headers.len() == 1)
        );
        assert_eq!(config.policy.default_decision(), policy::Decision::Deny);
        assert_eq!(config.policy.rule_count(), 1);
        assert!(!config.policy.allows_instructions("docs") && config.policy.allows_instructions("git"));
        assert!(!config.policy.allows_elicitation("docs") && config.policy.allows_elicitation("git"));
    }

    #[test]
    fn remote_servers_take_a_token_variable_and_the_legacy_transport() {
        let config = parse(
            Path::new("/c/config.toml"),
            "[servers.a]\nurl = \"https://a.example/mcp\"\nbearer_token_env_var = \"A_TOKEN\"\n\
             [servers.b]\nurl = \"https://b.example/sse\"\ntype = \"sse\"\n\
             [servers.c]\ncommand = \"c\"\n",
        )
        .unwrap();
        assert_eq!(config.remote["a"], RemoteOptions::default().bearer_token_env("A_TOKEN"));
        assert_eq!(config.remote["b"], RemoteOptions::default().http_mode(HttpMode::LegacySse));
        assert!(!config.remote.contains_key("c"), "stdio servers have no remote options");
        let json = parse(
            Path::new("/c/config.json"),
            r#"{"mcpServers": {"b": {"type": "sse", "url": "https://b.example/sse"}}}"#,
        )
        .unwrap();
        assert_eq!(json.remote["b"].http_mode, HttpMode::LegacySse);
        for (text, expected) in [
            ("[servers.s]\ncommand = \"s\"\nbearer_token_env_var = \"T\"\n", "only applies to remote"),
            ("[servers.r]\nurl = \"https://r\"\nbearer_token_env_var = \"\"\n", "must name an environment variable"),
        ] {
            let err = toml_err(text);
            assert!(err.contains(expected), "{err}");
        }
    }

    #[test]
    fn http_servers_without_credentials_use_oauth_with_their_settings() {
        let config = parse(
            Path::new("/c/config.toml"),
            "[servers.plain]\nurl = \"https://p.example/mcp\"\n\
             [servers.token]\nurl = \"https://t.example/mcp\"\nbearer_token_env_var = \"T\"\n\
             [servers.header]\nurl = \"https://h.example/mcp\"\nheaders = { authorization = \"Bearer x\" }\n\
             [servers.socket]\nurl = \"wss://w.example/mcp\"\n\
             [servers.off]\nurl = \"https://o.example/mcp\"\noauth = { enabled = false }\n\
             [servers.machine]\nurl = \"https://m.example/mcp\"\n\
             [servers.machine.oauth]\nclient_id = \"m\"\ngrant = \"client_credentials\"\nprivate_key_file = \"k.pem\"\n\
             [servers.pre]\nurl = \"https://r.example/mcp\"\n\
             [servers.pre.oauth]\nclient_id = \"c\"\nclient_secret_env_var = \"S\"\n\
             client_metadata_url = \"https://me.example/client.json\"\nissuer = \"https://login.example\"\n\
             [servers.local]\ncommand = \"l\"\n",
        )
        .unwrap();
        assert_eq!(config.oauth.keys().collect::<Vec<_>>(), ["machine", "plain", "pre"]);
        assert_eq!(config.oauth["plain"], OAuthSettings::default());
        let machine = &config.oauth["machine"];
        assert_eq!(machine.grant, OAuthGrant::ClientCredentials);
        assert_eq!(machine.private_key_file.as_deref(), Some(Path::new("/c/k.pem")), "relative to the file");
        let pre = &config.oauth["pre"];
        assert_eq!(
            (pre.client_id.as_deref(), pre.client_secret_env_var.as_deref(), pre.client_metadata_url.as_deref()),
            (Some("c"), Some("S"), Some("https://me.example/client.json"))
        );
        assert_eq!(pre.issuer.as_deref(), Some("https://login.example"));
        for (text, expected) in [
            ("[servers.s]\ncommand = \"s\"\noauth = {}\n", "only applies to remote"),
            ("[servers.r]\nurl = \"https://r\"\nbearer_token_env_var = \"T\"\noauth = {}\n", "cannot be combined"),
            ("[servers.w]\nurl = \"ws://w\"\noauth = {}\n", "http:// and https:// servers only"),
            ("[servers.r]\nurl = \"https://r\"\noauth = { grant = \"implicit\" }\n", "must be \"authorization_code\""),
            (
                "[servers.r]\nurl = \"https://r\"\noauth = { grant = \"client_credentials\" }\n",
                "needs `oauth.client_id`",
            ),
            (
                "[servers.r]\nurl = \"https://r\"\noauth = { grant = \"client_credentials\", client_id = \"c\" }\n",
                "needs `oauth.client_secret_env_var` or",
            ),
            ("[servers.r]\nurl = \"https://r\"\noauth = { private_key_file = \"k\" }\n", "only applies to"),
            ("[servers.r]\nurl = \"https://r\"\noauth = { client_metadata_url = \"http://x\" }\n", "https:// URL"),
            ("[servers.r]\nurl = \"https://r\"\noauth = { issuer = \"http://login.example\" }\n", "https:// URL"),
            ("[servers.r]\nurl = \"https://r\"\noauth = { client_secret = \"s\" }\n", "unknown field `client_secret`"),
        ] {
            let err = toml_err(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn defaults_apply_and_empty_files_are_fine() {
        let config = parse(Path::new("/x/config.toml"), "[servers.a]\ncommand = \"a\"\n").unwrap();
        let a = &config.servers[0];
        assert!(a.enabled && stdio(a).args.is_empty() && stdio(a).cwd.is_none());
        assert_eq!((a.startup_timeout, a.tool_timeout), (DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT));
        assert_eq!(config.policy.default_decision(), policy::Decision::Confirm);
        assert!(parse(Path::new("/x/config.toml"), "").unwrap().servers.is_empty());
    }

    #[test]
    fn parses_claude_desktop_json_as_it_is() {
        let config = parse(
            Path::new("/x/claude_desktop_config.json"),
            r#"{
              "globalShortcut": "Ctrl+Space",
              "mcpServers": {
                "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "env": {"A": "1"}},
                "remote": {"type": "http", "url": "https://r.example/mcp", "headers": {"X": "y"}},
                "typed": {"type": "stdio", "command": "x"}
              }
            }"#,
        )
        .unwrap();
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["filesystem", "remote", "typed"]);
        assert_eq!(stdio(&config.servers[0]).args[2], "/tmp");
        assert!(matches!(config.servers[1].target, ServerTarget::Remote { .. }));
    }

    #[test]
    fn format_is_chosen_by_extension_then_content() {
        let host = |path: &str, text: &str| {
            foreign::read(Path::new(path), text, foreign::ReadContext::default()).map(|r| r.host)
        };
        assert!(matches!(host("a.json", "x = 1"), Err(ConfigError::Invalid { .. })), "a .json file is read as JSON");
        assert!(matches!(host("a.TOML", "{"), Err(ConfigError::Invalid { .. })), "a .TOML file is read as TOML");
        assert_eq!(host("config", "  \n{\"mcpServers\": {}}").unwrap(), Host::McpServers);
        assert_eq!(host("config", "[servers]").unwrap(), Host::Ours);
        assert!(parse(Path::new("/x/config"), r#"{"mcpServers": {"a": {"command": "a"}}}"#).is_ok());
    }

    #[test]
    fn toml_error_messages() {
        let cases = [
            ("wrong args type", "[servers.git]\ncommand = \"git\"\nargs = \"--verbose\"\n"),
            ("wrong arg element", "[servers.git]\ncommand = \"git\"\nargs = [\"a\", 3]\n"),
            ("wrong env value", "[servers.git]\ncommand = \"git\"\nenv = { A = 1 }\n"),
            ("typo in server key", "[servers.git]\ncomand = \"git\"\n"),
            ("typo at top level", "[server.git]\ncommand = \"git\"\n"),
            ("both command and url", "[servers.git]\ncommand = \"git\"\nurl = \"https://x\"\n"),
            ("neither command nor url", "[servers.git]\nargs = []\n"),
            ("args on a remote server", "[servers.r]\nurl = \"https://x\"\nargs = [\"a\"]\n"),
            ("headers on a stdio server", "[servers.s]\ncommand = \"s\"\nheaders = { A = \"b\" }\n"),
            ("zero timeout", "[servers.s]\ncommand = \"s\"\nstartup_timeout_s = 0\n"),
            ("negative timeout", "[servers.s]\ncommand = \"s\"\ntool_timeout_s = -1.5\n"),
            ("string timeout", "[servers.s]\ncommand = \"s\"\ntool_timeout_s = \"10s\"\n"),
            ("enabled not a bool", "[servers.s]\ncommand = \"s\"\nenabled = \"yes\"\n"),
            ("server not a table", "servers.s = 3\n"),
            ("empty command", "[servers.s]\ncommand = \" \"\n"),
            ("empty server name", "[servers.\"\"]\ncommand = \"s\"\n"),
            ("control character in a server name", "[servers.\"a\\u0007b\"]\ncommand = \"s\"\n"),
            ("bad policy decision", "[policy]\ndefault = \"maybe\"\n"),
            ("typo in policy", "[policy]\ndefualt = \"allow\"\n"),
            ("bad rule pattern", "[[policy.rules]]\nserver = \"git\"\ntool = \"[a]\"\ndecision = \"allow\"\n"),
            ("missing rule decision", "[[policy.rules]]\nserver = \"git\"\ntool = \"a\"\n"),
            ("syntax error", "[servers.git\ncommand = \"git\"\n"),
        ];
        let report: String = cases.iter().map(|(name, text)| format!("{name}:\n  {}\n", toml_err(text))).collect();
        insta::assert_snapshot!(report);
    }

    #[test]
    fn odd_server_names_are_fine_unless_empty_or_with_control_characters() {
        let config = parse(Path::new("/x/config.toml"), "[servers.\"a b.é\"]\ncommand = \"s\"\n").unwrap();
        assert_eq!(config.servers[0].name, "a b.é");
        // The refused ones are in toml_error_messages.
    }

    #[test]
    fn json_error_messages() {
        let cases = [
            ("no servers", r#"{"tools": {}}"#),
            ("args not an array", r#"{"mcpServers": {"git": {"command": "git", "args": "x"}}}"#),
            ("entry not a table", r#"{"mcpServers": {"git": ["git"]}}"#),
            ("servers not a table", r#"{"mcpServers": []}"#),
            ("type mismatch", r#"{"mcpServers": {"git": {"type": "sse", "command": "git"}}}"#),
            ("both", r#"{"mcpServers": {"git": {"command": "git", "url": "https://x"}}}"#),
            ("syntax", "{\"mcpServers\": {\"git\": {\"command\": \"git\",}}}"),
            ("trailing garbage", r#"{"mcpServers": {}} x"#),
            ("bad policy", r#"{"mcpServers": {}, "policy": {"default": "sometimes"}}"#),
        ];
        let report: String = cases.iter().map(|(name, text)| format!("{name}:\n  {}\n", json_err(text))).collect();
        insta::assert_snapshot!(report);
    }

    /// A name with a bidirectional override reads differently from what it is; refused like
    /// one with ESC, in both formats.
    #[test]
    fn server_names_that_could_drive_or_fool_a_terminal_are_refused() {
        for name in ["git\u{1b}[2J", "git\u{202e}txt", "gi\u{200b}t", "git\u{2066}", "git\u{9b}"] {
            let escaped = serde_json::to_string(name).unwrap();
            let json = json_err(&format!(r#"{{"mcpServers": {{{escaped}: {{"command": "git"}}}}}}"#));
            let toml = toml_err(&format!("[servers.{escaped}]\ncommand = \"git\"\n"));
            for message in [json, toml] {
                assert!(
                    message.contains("a server name must be non-empty and free of control characters"),
                    "{message}"
                );
            }
        }
        assert!(parse(Path::new("/x/claude.json"), r#"{"mcpServers": {"gît-é": {"command": "git"}}}"#).is_ok());
    }

    #[test]
    fn the_example_from_the_issue_reads_as_promised() {
        let message = toml_err("[servers.git]\ncommand = \"git\"\nargs = \"--verbose\"\n");
        assert!(
            message.starts_with("config error in /x/config.toml: servers.git.args: ")
                && message.contains("expected an array of strings"),
            "{message}"
        );
    }

    #[test]
    fn sandboxes_per_server_and_by_default() {
        let config = parse(
            Path::new("/c/config.toml"),
            r#"
            [sandbox]
            default = { network = false, processes = 64 }
            required = true

            [servers.plain]
            command = "p"
            [servers.std]
            command = "s"
            sandbox = "standard"
            sandbox_required = false
            [servers.off]
            command = "o"
            sandbox = "off"
            [servers.table]
            command = "t"
            sandbox = { read = ["/data", "rel"], write = ["/out"], memory_mib = 512 }
            [servers.remote]
            url = "https://r.example/mcp"
            "#,
        )
        .unwrap();
        assert_eq!(config.sandboxes.keys().collect::<Vec<_>>(), ["off", "plain", "std", "table"]);
        let plain = &config.sandboxes["plain"];
        let sandbox = plain.sandbox.as_ref().unwrap();
        assert!(plain.required && !sandbox.network && sandbox.limits.processes == Some(64));
        assert_eq!(config.sandboxes["std"], SandboxSetting { sandbox: Some(Sandbox::standard()), required: false });
        assert_eq!(config.sandboxes["off"], SandboxSetting { sandbox: None, required: true });
        let table = config.sandboxes["table"].sandbox.as_ref().unwrap();
        assert_eq!(table.read, [PathBuf::from("/data"), PathBuf::from("/c/rel")], "relative to the file");
        assert_eq!(table.write, [PathBuf::from("/out")]);
        assert!(table.network, "a server's own table extends standard, not the default table");
        assert_eq!(table.limits.memory_mib, Some(512));
        assert_eq!(table.limits.open_files, Limits::default().open_files);
        assert_eq!(config.file.as_deref(), Some(Path::new("/c/config.toml")));

        let defaults = parse(Path::new("/c/config.json"), r#"{"mcpServers": {"a": {"command": "a"}}}"#).unwrap();
        assert_eq!(defaults.sandboxes["a"], SandboxSetting::default(), "standard by default, not required");

        for (text, expected) in [
            (
                "[servers.s]\ncommand = \"s\"\nsandbox = \"strict\"\n",
                "servers.s.sandbox: invalid value: string \"strict\"",
            ),
            ("[servers.s]\ncommand = \"s\"\nsandbox = { net = false }\n", "unknown field `net`"),
            (
                "[servers.s]\ncommand = \"s\"\nsandbox = { processes = 0 }\n",
                "servers.s.sandbox: `processes` must be a positive",
            ),
            ("[servers.r]\nurl = \"https://r\"\nsandbox = \"off\"\n", "servers.r: `sandbox` only applies to stdio"),
            ("[servers.r]\nurl = \"https://r\"\nsandbox_required = true\n", "only applies to stdio"),
            ("[sandbox]\ndefault = 3\n", "sandbox.default: invalid type: integer"),
            ("[sandbox]\nrequire = true\n", "unknown field `require`"),
        ] {
            let err = toml_err(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn line_and_column_count_characters() {
        assert_eq!(line_column("ab\ncé\nx", 7), (3, 1));
        assert_eq!(line_column("ab\ncéd", 6), (2, 3));
        assert_eq!(line_column("abc", 99), (1, 4));
    }

    #[test]
    fn workspace_configs_are_refused() {
        let workspace = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let inside = workspace.path().join("sub/config.toml");
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::write(&inside, "").unwrap();
        let outside = elsewhere.path().join("config.toml");
        std::fs::write(&outside, "").unwrap();

        let err = check_outside_workspace(&inside, workspace.path(), Origin::Default).unwrap_err();
        assert!(matches!(err, ConfigError::InWorkspace { .. }));
        let message = err.to_string();
        assert!(message.contains("--allow-workspace-config") && message.contains("an agent"), "{message}");
        assert!(check_outside_workspace(&outside, workspace.path(), Origin::Default).is_ok());

        // A relative path and a `..` detour resolve to the same place.
        let detour = workspace.path().join("sub/../sub/config.toml");
        assert!(check_outside_workspace(&detour, workspace.path(), Origin::Default).is_err());

        // A symlink from outside into the workspace is followed.
        #[cfg(unix)]
        {
            let link = elsewhere.path().join("link.toml");
            std::os::unix::fs::symlink(&inside, &link).unwrap();
            assert!(matches!(
                check_outside_workspace(&link, workspace.path(), Origin::Default),
                Err(ConfigError::InWorkspace { .. })
            ));
            // A link inside the workspace is refused even when it points outside: an agent could
            // point it anywhere.
            let link_in = workspace.path().join("link.toml");
            std::os::unix::fs::symlink(&outside, &link_in).unwrap();
            assert!(check_outside_workspace(&link_in, workspace.path(), Origin::Default).is_err());
            // A workspace reached through a symlink is still the workspace.
            let ws_link = elsewhere.path().join("ws");
            std::os::unix::fs::symlink(workspace.path(), &ws_link).unwrap();
            assert!(check_outside_workspace(&inside, &ws_link, Origin::Default).is_err());
        }

        let missing = elsewhere.path().join("nope.toml");
        assert!(matches!(
            check_outside_workspace(&missing, workspace.path(), Origin::Default),
            Err(ConfigError::NotFound { .. })
        ));
    }

    /// The section of docs/configuration.md under `heading` (up to the next heading of its level
    /// or above).
    fn doc_section(heading: &str) -> &'static str {
        let doc = crate::help::CONFIGURATION;
        let at =
            doc.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("no section {heading:?} in the reference"));
        let level = heading.split(' ').next().unwrap_or("#");
        let rest = &doc[at + heading.len() + 2..];
        let end = rest
            .match_indices("\n#")
            .find(|(i, _)| rest[i + 1..].split(' ').next().is_some_and(|h| h.len() <= level.len()))
            .map_or(rest.len(), |(i, _)| i);
        &rest[..end]
    }

    #[test]
    fn configuration_reference_lists_every_key() {
        // Every key each table of our TOML accepts, read from the parser itself.
        let tables: [(&str, &[&str]); 9] = [
            ("## Top level", keys::fields::<RawToml>()),
            ("## `[servers.NAME]`", keys::fields::<RawServer>()),
            ("### `[servers.NAME.oauth]`", keys::fields::<RawOAuth>()),
            ("## `[policy]`", keys::fields::<PolicyConfig>()),
            ("## `[policy]`", keys::fields::<policy::RuleConfig>()),
            ("## `[policy]`", keys::fields::<policy::ResourceRuleConfig>()),
            ("## `[sandbox]`", keys::fields::<RawSandboxDefaults>()),
            ("## `[sandbox]`", keys::fields::<RawSandboxTable>()),
            ("## `[runtime]`", keys::fields::<RawRuntime>()),
        ];
        let mut missing = Vec::new();
        for (heading, fields) in tables {
            assert!(!fields.is_empty(), "no keys read for {heading}");
            let section = doc_section(heading);
            for field in fields {
                // A row of the section's table starts with the key.
                if !section.contains(&format!("| `{field}` |")) {
                    missing.push(format!("{heading}: `{field}`"));
                }
            }
        }
        // Every key of other hosts' entries that is read (or refused, or reported) by name.
        for (heading, known) in [
            ("### `mcpServers` entries (Claude Desktop, Claude Code, Cursor)", foreign::MCP_SERVERS_KEYS),
            ("### VS Code `servers` entries and `inputs`", foreign::VSCODE_KEYS),
            ("### Codex `[mcp_servers.NAME]`", foreign::CODEX_KEYS),
        ] {
            let section = doc_section(heading);
            for (key, _) in known {
                if !section.contains(&format!("`{key}`")) {
                    missing.push(format!("{heading}: `{key}`"));
                }
            }
        }
        assert!(missing.is_empty(), "docs/configuration.md lacks: {missing:#?}");
        // The test can fail: a key that is not there is found missing.
        assert!(!doc_section("## `[runtime]`").contains("| `no_such_key` |"));
    }

    #[test]
    fn tool_exposure_and_search_settings() {
        let config = parse(
            Path::new("/x/config.toml"),
            r#"
            tool_search = "on"
            tool_budget = 4096
            pool_budget = 32768
            max_loaded_tools = 10
            [servers.core]
            command = "core"
            always_load = true
            [servers.big]
            command = "big"
            tool_search = "off"
            tool_budget = 1000
            server_budget = 5000
            [servers.plain]
            command = "plain"
            "#,
        )
        .unwrap();
        let tools = &config.tools;
        assert_eq!(tools.exposure.tool_search, tool_pool::SearchMode::On);
        assert_eq!((tools.exposure.tool_budget, tools.exposure.pool_budget), (4096, 32768));
        assert_eq!((tools.native, tools.max_loaded), (false, Some(10)));
        assert_eq!(
            tools.exposure.servers,
            BTreeMap::from([
                (
                    "big".to_owned(),
                    tool_pool::ServerExposure {
                        tool_budget: Some(1000),
                        server_budget: Some(5000),
                        tool_search: Some(tool_pool::SearchMode::Off),
                        always_load: false
                    }
                ),
                ("core".to_owned(), tool_pool::ServerExposure { always_load: true, ..Default::default() }),
            ])
        );
        // Native search is a top-level key of our TOML.
        let native = parse(Path::new("/x/c.toml"), "tool_search = \"native\"\n").unwrap();
        assert!(native.tools.native);
        assert_eq!(native.tools.exposure.tool_search, tool_pool::SearchMode::On);
        // Nothing set: the defaults.
        assert_eq!(parse(Path::new("/x/c.toml"), "").unwrap().tools, ToolsSettings::default());
    }

    #[test]
    fn tool_search_errors_name_the_key_and_the_choices() {
        assert_eq!(
            toml_err("tool_search = \"always\"\n"),
            "config error in /x/config.toml: tool_search: `tool_search` must be \"auto\", \"on\", \"off\" or \
             \"native\", not \"always\""
        );
        let native = toml_err("[servers.s]\ncommand = \"s\"\ntool_search = \"native\"\n");
        assert!(native.contains("servers.s.tool_search") && native.contains("not of one server"), "{native}");
        let zero = toml_err("max_loaded_tools = 0\n");
        assert!(zero.contains("must be at least 1"), "{zero}");
        let negative = toml_err("pool_budget = -1\n");
        assert!(negative.contains("pool_budget"), "{negative}");
    }
}
