//! The configuration: which servers to run, how each is reached and confined, and the tool
//! policy. One module per job: where the file is and the workspace rule (`location`), our TOML
//! as written (`raw`), other hosts' files (`foreign`), variables (`vars`), the checks that make
//! each entry a [`ServerSettings`] (`validate`, `tables`, `env`), editing ([`Editor`]) and what a
//! person is shown of an entry (`show`).
//!
//! Every key of every table, and which keys of other hosts' files are read and how, is
//! documented in one place: `docs/configuration.md` (printed by `mcp-harness help config`); a
//! test keeps it and the parser in step.
//!
//! Our own TOML (`[servers.NAME]`, `[sandbox]`, `[policy]`) is read strictly: an unknown key is
//! an error (a typo must not silently change what runs). Other hosts' files (Claude Desktop,
//! Claude Code, Cursor, VS Code, Codex) are read as they are, their entries mapped onto ours:
//! keys we don't use are warnings, keys whose loss would change what a server may do are
//! errors. Every error names the file, the key and what was expected. Variable references
//! (`${VAR}`, `${VAR:-default}`, and each host's own forms) are expanded in `command`, `args`,
//! `env`, `cwd`, `env_file`, `url` and `headers` only, and only for enabled servers.
//!
//! **Invariant:** a configuration is never read from where an agent working in the current
//! directory could have written it (nor an env file it names), unless the user said so
//! ([`ConfigPath::allow_workspace`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use policy::Policy;

mod edit;
mod env;
mod error;
mod foreign;
mod keys;
mod location;
mod raw;
mod settings;
mod show;
mod tables;
mod validate;
mod vars;

#[cfg(test)]
mod format_tests;
#[cfg(test)]
mod tests;

pub use edit::{Editor, Existing};
pub use error::{ConfigError, EditError};
pub use foreign::{Host, Input, RawFile};
pub use location::{CONFIG_ENV, ConfigPath, Origin, check_outside_workspace, default_dir, default_path};
pub use raw::RawServer;
pub use settings::{
    OAuthGrant, OAuthSettings, RemoteTarget, RuntimeSettings, SandboxSetting, ServeSettings, ServerSettings, Target,
    ToolsSettings,
};
pub use vars::Lookup;

/// The `service.name` of the host's telemetry unless `[telemetry]` or `OTEL_SERVICE_NAME`
/// names another.
pub const TELEMETRY_SERVICE_NAME: &str = "mcp-harness";

/// A loaded, validated configuration.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Every configured server, sorted by name, each with all of its settings.
    pub servers: Vec<ServerSettings>,
    /// The tool policy, with each server's policy hooks (tool filters, instructions,
    /// elicitation) applied.
    pub policy: Policy,
    /// The policy as written and the servers' hooks: equal fingerprints mean a reload left the
    /// policy as it was.
    pub policy_fingerprint: String,
    /// The file it was read from (kept from the servers: it may hold their secrets).
    pub file: Option<PathBuf>,
    /// How servers are kept alive (`[runtime]`).
    pub runtime: RuntimeSettings,
    /// How `serve` presents itself (`[serve]`).
    pub serve: ServeSettings,
    /// Tool exposure budgets and tool search of the whole configuration.
    pub tools: ToolsSettings,
    /// Traces and metrics (`[telemetry]`), as written: a front end resolves them with the
    /// process's `OTEL_*` variables ([`Config::telemetry_config`]) when it starts. Checked when
    /// the file is read; a reload of the file does not change them.
    pub telemetry: mcp_telemetry::config::TelemetrySettings,
    /// Keys read and not used (other hosts' files), one line each, for the user to see.
    pub warnings: Vec<String>,
}

impl Config {
    /// A configuration built in code (no file): these servers under `policy`, with their
    /// policy hooks applied and default runtime and tool settings. A server without a
    /// fingerprint gets one from its settings.
    pub fn new(mut servers: Vec<ServerSettings>, policy: Policy) -> Self {
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        for server in &mut servers {
            if server.fingerprint.is_empty() {
                server.fingerprint = server.code_fingerprint();
            }
        }
        Self {
            policy_fingerprint: validate::policy_fingerprint(&format!("{policy:?}"), &servers),
            policy: validate::with_hooks(policy, &servers),
            servers,
            file: None,
            runtime: RuntimeSettings::default(),
            serve: ServeSettings::default(),
            tools: ToolsSettings::default(),
            telemetry: mcp_telemetry::config::TelemetrySettings::default(),
            warnings: Vec::new(),
        }
    }

    /// What `[telemetry]` and the standard `OTEL_*` variables (`env`: name to value, see
    /// [`mcp_telemetry::config::otel_env`]) ask for; a set variable wins over the table.
    pub fn telemetry_config(
        &self,
        env: &BTreeMap<String, String>,
    ) -> Result<mcp_telemetry::config::TelemetryConfig, mcp_telemetry::config::ConfigError> {
        mcp_telemetry::config::TelemetryConfig::resolve(&self.telemetry, env, TELEMETRY_SERVICE_NAME)
    }

    /// Which servers' tools code mode's scripts reach: `code_mode` of the whole
    /// configuration, and each server's own. `run_code` is offered when it reaches any
    /// ([`CodeScope::any`](crate::CodeScope::any)).
    pub fn code_scope(&self) -> crate::CodeScope {
        crate::CodeScope {
            all: self.tools.code_mode,
            servers: self.servers.iter().filter_map(|s| Some((s.name.clone(), s.code_mode?))).collect(),
        }
    }

    /// Which servers' tools the scripts of `serve`'s `run_code` reach (`[serve] code_mode =
    /// "on"`): every server but those whose own `code_mode` is `"off"`. `[serve] code_mode`
    /// is the gateway's switch, so the top-level `code_mode` (the agent's default, off unless
    /// set) does not narrow it.
    pub fn serve_code_scope(&self) -> crate::CodeScope {
        crate::CodeScope { all: true, ..self.code_scope() }
    }

    /// The server named `name`.
    pub fn server(&self, name: &str) -> Option<&ServerSettings> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// What the model is sent of the tools: the configuration's budgets and search mode, and
    /// each server's own (the `auto` threshold is the default, for a 200,000-token window; the
    /// caller sets it per model).
    pub fn exposure(&self) -> tool_pool::ExposureOptions {
        let mut exposure = tool_pool::ExposureOptions {
            tool_budget: self.tools.tool_budget,
            pool_budget: self.tools.pool_budget,
            tool_search: self.tools.tool_search,
            ..Default::default()
        };
        exposure.servers = self
            .servers
            .iter()
            .filter(|s| s.exposure != tool_pool::ServerExposure::default())
            .map(|s| (s.name.clone(), s.exposure.clone()))
            .collect();
        exposure
    }
}

/// Asks for a VS Code input (an error says why it cannot be).
pub type AskFor<'a> = dyn Fn(&Input) -> Result<String, String> + 'a;

/// What reading a configuration may use beyond its file: the environment (`${VAR}`), a person
/// (VS Code inputs, through the caller's [`AskFor`] port), and the workspace an env file must
/// not be in.
#[non_exhaustive]
pub struct Context<'a> {
    /// Looks up an environment variable.
    pub env: Box<Lookup<'a>>,
    /// The user's home directory.
    pub home: Option<PathBuf>,
    /// The current directory.
    pub cwd: Option<PathBuf>,
    /// Env files inside it are refused, like configurations (`None`: the user allowed it).
    pub workspace: Option<PathBuf>,
    /// Asks for a VS Code input.
    pub ask: Box<AskFor<'a>>,
    /// Only check the file: references are not resolved, nothing is asked or read.
    pub check_only: bool,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("home", &self.home)
            .field("cwd", &self.cwd)
            .field("workspace", &self.workspace)
            .field("check_only", &self.check_only)
            .finish_non_exhaustive()
    }
}

impl Context<'_> {
    /// The process's environment, home and current directory; inputs cannot be asked.
    pub fn process() -> Self {
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
    pub fn check_only() -> Self {
        Self { check_only: true, ..Self::process() }
    }
}

/// Reads and validates the file at `path`.
pub fn load(path: &Path, origin: Origin, context: &Context<'_>) -> Result<Config, ConfigError> {
    let text = location::read_text(path, origin)?;
    validate::parse_with(path, &text, context)
}

/// Finds the configuration `at` says (under the workspace rule), reads and validates it, in
/// the process's environment; VS Code inputs are put to `ask` when given (else they cannot be
/// answered). An env file inside the workspace is refused unless the workspace is allowed.
pub fn load_at(at: &ConfigPath, ask: Option<Box<AskFor<'_>>>) -> Result<Config, ConfigError> {
    let resolved = at.checked()?;
    let mut context = Context::process();
    if let Some(ask) = ask {
        context.ask = ask;
    }
    if !at.allow_workspace {
        context.workspace = std::env::current_dir().ok();
    }
    load(&resolved, at.origin, &context)
}

/// Parses and validates `text`, which was read from `path` (used in messages, and as the base
/// of relative paths), in `context`.
pub fn parse(path: &Path, text: &str, context: &Context<'_>) -> Result<Config, ConfigError> {
    validate::parse_with(path, text, context)
}

/// Reads the file at `path` without expanding anything (what `mcp list` shows).
pub fn read_raw(path: &Path, origin: Origin) -> Result<RawFile, ConfigError> {
    let text = location::read_text(path, origin)?;
    let home = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
    let cwd = std::env::current_dir().ok();
    foreign::read(path, &text, foreign::ReadContext { home: home.as_deref(), cwd: cwd.as_deref() })
}

/// One server entry in any host's JSON shape (`mcp add-json`), with the warnings of its unused
/// keys; our own keys are read too. Errors name the entry as `(the entry)`.
pub fn entry_from_json(name: &str, value: &serde_json::Value) -> Result<(RawServer, Vec<String>), ConfigError> {
    let cwd = std::env::current_dir().ok();
    let home = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
    let cx = foreign::ReadContext { home: home.as_deref(), cwd: cwd.as_deref() };
    foreign::entry_from_json(Path::new("(the entry)"), name, value, cx)
}
