//! One server's settings in one value ([`ServerSettings`]): how it is reached (a stdio child
//! with its sandbox, or a remote URL with its options and OAuth), its timeouts, whether it runs
//! and must, what the model is shown of its tools, its policy hooks and its fingerprint. Every
//! module takes that value, never the whole configuration and a name.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use mcp_client::{DEFAULT_MAX_TOOL_TIME, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT};
use mcp_sandbox::Sandbox;
use mcp_transport::{RemoteOptions, StdioConfig};

/// Everything about one configured server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerSettings {
    /// Its name (the tool pool names its tools after it).
    pub name: String,
    /// How it is reached.
    pub target: Target,
    /// Disabled servers are reported, not started.
    pub enabled: bool,
    /// `run` and `chat` refuse to start without it (Codex's `required` too).
    pub required: bool,
    /// Time to start, initialize and list tools.
    pub startup_timeout: Duration,
    /// Time one tool call may take without progress.
    pub tool_timeout: Duration,
    /// Time one tool call may take in all while it reports progress.
    pub max_tool_time: Duration,
    /// What the model is shown of its tools (budgets, search mode, always loaded); the
    /// default when it sets none.
    pub exposure: tool_pool::ServerExposure,
    /// `enabled_tools` / `disabled_tools`: tools left out before any policy rule.
    pub tool_filter: Option<policy::ToolFilter>,
    /// Whether its `instructions` reach the model's system prompt.
    pub instructions: bool,
    /// Whether it may ask the user for input (elicitation).
    pub elicitation: bool,
    /// Its `code_mode`: whether scripts reach its tools; `None` follows the configuration's.
    pub code_mode: Option<bool>,
    /// Its entry as written with the defaults that shape it: equal fingerprints mean a reload
    /// changed nothing about it. Never shown (it may hold secrets); compared and hashed only.
    pub fingerprint: String,
}

/// How a configured server is reached.
#[derive(Clone)]
#[non_exhaustive]
pub enum Target {
    /// A child process speaking stdio, and how it is confined.
    Stdio {
        /// Its command line, environment and directory.
        config: StdioConfig,
        /// Its sandbox (its own setting, else `[sandbox]`'s).
        sandbox: SandboxSetting,
    },
    /// A remote server by URL (HTTP, or WebSocket for `ws://` and `wss://`).
    Remote(RemoteTarget),
}

/// A remote server's settings.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteTarget {
    /// Its endpoint.
    pub url: String,
    /// HTTP headers to send (often credentials).
    pub headers: BTreeMap<String, String>,
    /// Settings beyond URL and headers (bearer token variable, transport).
    pub options: RemoteOptions,
    /// Its OAuth settings, when it uses OAuth: every `http(s)` server without
    /// `bearer_token_env_var`, an `Authorization` header or `oauth.enabled = false`.
    pub oauth: Option<OAuthSettings>,
}

impl RemoteTarget {
    /// A remote server at `url` with no headers, default options and no OAuth.
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), headers: BTreeMap::new(), options: RemoteOptions::default(), oauth: None }
    }
}

impl std::fmt::Debug for RemoteTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are often tokens: never print them.
        f.debug_struct("RemoteTarget")
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("options", &self.options)
            .field("oauth", &self.oauth)
            .finish()
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio { config, sandbox } => {
                f.debug_struct("Stdio").field("config", config).field("sandbox", sandbox).finish()
            }
            Self::Remote(remote) => f.debug_tuple("Remote").field(remote).finish(),
        }
    }
}

impl ServerSettings {
    /// An enabled stdio server with default timeouts, confined by the standard sandbox.
    pub fn stdio(name: &str, config: StdioConfig) -> Self {
        Self::with_target(name, Target::Stdio { config, sandbox: SandboxSetting::default() })
    }

    /// An enabled remote server with default timeouts.
    pub fn remote(name: &str, remote: RemoteTarget) -> Self {
        Self::with_target(name, Target::Remote(remote))
    }

    pub(crate) fn with_target(name: &str, target: Target) -> Self {
        Self {
            name: name.to_owned(),
            target,
            enabled: true,
            required: false,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            max_tool_time: DEFAULT_MAX_TOOL_TIME,
            exposure: tool_pool::ServerExposure::default(),
            tool_filter: None,
            instructions: true,
            elicitation: true,
            code_mode: None,
            fingerprint: String::new(),
        }
    }

    /// Its sandbox setting (`None` for a remote server).
    pub fn sandbox(&self) -> Option<&SandboxSetting> {
        match &self.target {
            Target::Stdio { sandbox, .. } => Some(sandbox),
            Target::Remote(_) => None,
        }
    }

    /// Its remote settings (`None` for a stdio server).
    pub fn remote_target(&self) -> Option<&RemoteTarget> {
        match &self.target {
            Target::Remote(remote) => Some(remote),
            Target::Stdio { .. } => None,
        }
    }

    /// The fingerprint of a server built in code: its settings as they print (header values
    /// are left out of that, so a change of one alone is not seen).
    pub(crate) fn code_fingerprint(&self) -> String {
        format!(
            "{:?}|{:?}|{}|{}|{:?}|{:?}|{:?}",
            self.target,
            self.exposure,
            self.enabled,
            self.required,
            self.startup_timeout,
            self.tool_timeout,
            self.max_tool_time
        )
    }
}

/// A stdio server's confinement as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxSetting {
    /// What it may do; `None` for `sandbox = "off"`.
    pub sandbox: Option<Sandbox>,
    /// Refuse to start it when the kernel cannot confine it.
    pub required: bool,
}

impl Default for SandboxSetting {
    /// `standard`, unconfined with a warning where the kernel cannot confine.
    fn default() -> Self {
        Self { sandbox: Some(Sandbox::standard()), required: false }
    }
}

impl SandboxSetting {
    /// `sandbox = "off"`: the server runs unconfined, and nothing warns about it.
    pub fn off() -> Self {
        Self { sandbox: None, required: false }
    }
}

/// How the client obtains tokens for a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OAuthGrant {
    /// A person logs in with a browser (`mcp-harness login NAME`).
    #[default]
    AuthorizationCode,
    /// A machine client: `client_id` with a secret or a private key.
    ClientCredentials,
}

/// A server's OAuth settings (`[servers.NAME.oauth]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct OAuthSettings {
    /// A pre-registered client id.
    pub client_id: Option<String>,
    /// The environment variable holding the client secret (never the secret itself).
    pub client_secret_env_var: Option<String>,
    /// A client ID metadata document URL, used where the authorization server supports it.
    pub client_metadata_url: Option<String>,
    /// Which grant.
    pub grant: OAuthGrant,
    /// A PKCS#8 PEM EC P-256 private key for `private_key_jwt` (client credentials).
    pub private_key_file: Option<PathBuf>,
    /// The only authorization server to send credentials to.
    pub issuer: Option<String>,
}

/// What the model is sent of the tools, for the whole configuration (our TOML's top level);
/// each server's own settings are its [`ServerSettings::exposure`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolsSettings {
    /// Search mode of servers that set none.
    pub tool_search: tool_pool::SearchMode,
    /// Largest definition of one tool, in bytes.
    pub tool_budget: usize,
    /// Largest total of the definitions sent per step, in bytes.
    pub pool_budget: usize,
    /// `tool_search = "native"`: the provider searches (Anthropic only).
    pub native: bool,
    /// `max_loaded_tools`: most tools loaded through search per session.
    pub max_loaded: Option<usize>,
    /// `code_mode`: whether scripts reach the tools of servers that set no `code_mode` of
    /// their own (off by default).
    pub code_mode: bool,
    /// `[code_mode_limits]`: what one script may use.
    pub code_limits: code_mode::Limits,
}

impl Default for ToolsSettings {
    fn default() -> Self {
        let exposure = tool_pool::ExposureOptions::default();
        Self {
            tool_search: exposure.tool_search,
            tool_budget: exposure.tool_budget,
            pool_budget: exposure.pool_budget,
            native: false,
            max_loaded: None,
            code_mode: false,
            code_limits: code_mode::Limits::default(),
        }
    }
}

/// `[serve]`: how `mcp-harness serve` (the gateway) presents itself and whom its HTTP front
/// admits. Read when `serve` starts (a reload of the file does not change it).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServeSettings {
    /// `serverInfo.name` (`None`: `mcp-harness`).
    pub name: Option<String>,
    /// `serverInfo.version` (`None`: mcp-harness's version).
    pub version: Option<String>,
    /// The gateway's own instructions, before the upstreams'.
    pub instructions: Option<String>,
    /// `Host` values the HTTP front answers to (empty: the loopback names on a loopback address).
    pub allowed_hosts: Vec<String>,
    /// `Origin` values the HTTP front admits (empty: origins whose host is allowed).
    pub allowed_origins: Vec<String>,
    /// How long the first listing waits for every upstream's first attempt.
    pub startup_wait: Duration,
    /// How long an approval form sent as `elicitation/create` waits for its answer.
    pub approval_wait: Duration,
    /// How long an approval asked through `input_required` stays valid.
    pub approval_ttl: Duration,
    /// `metrics` (or a `metrics_addr`): `serve --http` keeps metrics and answers `GET /metrics`
    /// with them. Off by default: recording them costs every call (about 10% of the calls per
    /// second of a fast upstream), and nothing is kept that was not asked for.
    pub metrics: bool,
    /// `metrics_addr`: `serve --http` answers `GET /metrics` on this address instead of the
    /// MCP front's (`None`: on the front).
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// `max_sessions`: most sessions `serve --http` holds at once (a new one beyond evicts the
    /// least recently used).
    pub max_sessions: usize,
    /// `max_sessions_per_caller`: most sessions of one caller (a new one beyond evicts that
    /// caller's least recently used).
    pub max_sessions_per_caller: usize,
    /// `session_idle_s`: how long an unused session is kept.
    pub session_idle: Duration,
    /// `[serve.auth]`, `[serve.profiles.NAME]`, `[serve.audit]` and `[serve.drain]`, as the
    /// gateway reads them (relative paths made relative to the configuration file). Token
    /// files and variables are read when `serve` starts, not here.
    pub inbound: mcp_gateway::settings::InboundSettings,
    /// `[[serve.limits]]`: rate limits and quotas per caller and per tool.
    pub limits: Vec<mcp_gateway::LimitRule>,
    /// `[serve.replicas]`: the state shared with other replicas (`None`: one gateway alone).
    pub replicas: Option<mcp_gateway_store::ReplicaConfig>,
    /// `code_mode`: whether the gateway offers the built-in `run_code` to downstream hosts
    /// (scripts reach every server whose own `code_mode` is not `"off"`).
    pub code_mode: bool,
}

impl Default for ServeSettings {
    fn default() -> Self {
        Self {
            name: None,
            version: None,
            instructions: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            startup_wait: Duration::from_secs(10),
            approval_wait: Duration::from_secs(600),
            approval_ttl: Duration::from_secs(300),
            metrics: false,
            metrics_addr: None,
            max_sessions: mcp_gateway::MAX_SESSIONS,
            max_sessions_per_caller: mcp_gateway::MAX_SESSIONS_PER_CALLER,
            session_idle: mcp_gateway::SESSION_IDLE,
            inbound: mcp_gateway::settings::InboundSettings::default(),
            limits: Vec::new(),
            replicas: None,
            code_mode: false,
        }
    }
}

/// `[runtime]`: how servers connect and are kept alive while `run` and `chat` go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeSettings {
    /// Stdio servers starting at once.
    pub local_concurrency: usize,
    /// Remote servers connecting at once.
    pub remote_concurrency: usize,
    /// Restarts of a stdio server allowed within `restart_window`.
    pub restart_limit: u32,
    /// The window of `restart_limit`.
    pub restart_window: Duration,
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
