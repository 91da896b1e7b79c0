//! The tables beside the servers' target, checked into their settings: `[runtime]`, a
//! sandbox (`[sandbox]`'s default or a server's own), a server's `oauth`, and the tool exposure
//! keys (the top level's and each server's).

use std::path::{Path, PathBuf};

use mcp_sandbox::{Limits, Sandbox};

use super::raw::{RawCodeLimits, RawOAuth, RawRuntime, RawSandbox, RawServe, RawServer, RawTools};
use super::settings::{OAuthGrant, OAuthSettings, RuntimeSettings, ServeSettings, ToolsSettings};

/// The most `local_concurrency` and `remote_concurrency` may be.
const MAX_CONCURRENCY: usize = 4096;

impl RawRuntime {
    pub(crate) fn into_settings(self) -> Result<RuntimeSettings, String> {
        let defaults = RuntimeSettings::default();
        // Servers starting at once: more than a few thousand is no plan (and past 2^61 a
        // semaphore cannot hold it).
        let positive = |n: Option<usize>, key: &str, default: usize| match n {
            Some(n) if n == 0 || n > MAX_CONCURRENCY => {
                Err(format!("`{key}` must be from 1 to {MAX_CONCURRENCY}, not {n}"))
            }
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

impl RawServe {
    /// The settings, relative paths (the audit log, token files, the key file) taken from
    /// `base`, the configuration file's directory; on error, the key (under `serve.`) and the
    /// message.
    pub(crate) fn into_settings(self, base: &Path) -> Result<ServeSettings, (&'static str, String)> {
        let defaults = ServeSettings::default();
        let text = |key: &'static str, value: Option<String>| match value {
            Some(v) if v.trim().is_empty() => Err((key, format!("`{key}` must not be empty"))),
            other => Ok(other),
        };
        let hosts = self.allowed_hosts.unwrap_or_default();
        if let Some(bad) = hosts.iter().find(|h| h.trim().is_empty() || h.contains(['/', ' ', ','])) {
            return Err((
                "allowed_hosts",
                format!("`allowed_hosts` holds host names (`name` or `name:port`), not {bad:?}"),
            ));
        }
        let origins = self.allowed_origins.unwrap_or_default();
        if let Some(bad) = origins.iter().find(|o| {
            let Some((scheme, rest)) = o.trim().split_once("://") else { return true };
            !matches!(scheme, "http" | "https")
                || rest.trim_end_matches('/').is_empty()
                || rest.trim_end_matches('/').contains('/')
        }) {
            return Err((
                "allowed_origins",
                format!("`allowed_origins` holds origins (`https://name` or `http://name:port`), not {bad:?}"),
            ));
        }
        let metrics_addr = match self.metrics_addr.as_deref().map(str::trim) {
            None => None,
            Some(addr) => Some(addr.parse::<std::net::SocketAddr>().map_err(|_| {
                ("metrics_addr", format!("`metrics_addr` is an address and port (`127.0.0.1:9464`), not {addr:?}"))
            })?),
        };
        if self.metrics == Some(false) && metrics_addr.is_some() {
            return Err((
                "metrics",
                "`metrics = false` and a `metrics_addr` contradict each other: remove `metrics_addr`, or `metrics = false`"
                    .to_owned(),
            ));
        }
        let max_sessions = match self.max_sessions {
            Some(0) => return Err(("max_sessions", "`max_sessions` must be at least 1".to_owned())),
            Some(n) => n,
            None => defaults.max_sessions,
        };
        let max_sessions_per_caller = match self.max_sessions_per_caller {
            Some(0) => {
                return Err(("max_sessions_per_caller", "`max_sessions_per_caller` must be at least 1".to_owned()));
            }
            Some(n) if n > max_sessions => {
                return Err((
                    "max_sessions_per_caller",
                    format!(
                        "`max_sessions_per_caller` ({n}) must not be more than `max_sessions` ({max_sessions}): one \
                         caller could then fill the table"
                    ),
                ));
            }
            Some(n) => n,
            // A lower `max_sessions` lowers the share with it.
            None => defaults.max_sessions_per_caller.min(max_sessions),
        };
        let mut inbound = mcp_gateway::settings::InboundSettings::default();
        inbound.auth = self.auth;
        for token in &mut inbound.auth.tokens {
            if let Some(file) = &mut token.token_file {
                *file = base.join(&*file);
            }
        }
        inbound.profiles = self.profiles;
        // Checked now, so a bad profile or limit is reported where the file is read; the
        // gateway builds them again when it starts.
        if let Err(e) = inbound.profiles() {
            return Err(("profiles", e.to_string()));
        }
        inbound.audit = self.audit.map(|mut audit| {
            audit.path = base.join(&audit.path);
            audit
        });
        inbound.drain = self.drain;
        if let Err(e) = mcp_gateway::Limits::new(&self.limits) {
            return Err(("limits", e.to_string()));
        }
        let replicas = self.replicas.map(|mut replicas| {
            replicas.key_file = replicas.key_file.map(|file| base.join(file));
            replicas
        });
        Ok(ServeSettings {
            name: text("name", self.name)?,
            version: text("version", self.version)?,
            instructions: self.instructions.filter(|i| !i.trim().is_empty()),
            allowed_hosts: hosts,
            allowed_origins: origins,
            startup_wait: self.startup_wait_s.map_or(defaults.startup_wait, |s| s.0),
            approval_wait: self.approval_wait_s.map_or(defaults.approval_wait, |s| s.0),
            approval_ttl: self.approval_ttl_s.map_or(defaults.approval_ttl, |s| s.0),
            // An address of their own asks for them.
            metrics: self.metrics.unwrap_or(metrics_addr.is_some()),
            metrics_addr,
            max_sessions,
            max_sessions_per_caller,
            session_idle: self.session_idle_s.map_or(defaults.session_idle, |s| s.0),
            inbound,
            limits: self.limits,
            replicas,
            code_mode: match self.code_mode {
                Some(value) => on_off(&value).map_err(|m| ("code_mode", m))?,
                None => defaults.code_mode,
            },
        })
    }
}

impl RawSandbox {
    /// The sandbox (`None` for off); paths: `~/` is HOME, relative ones are relative to the file.
    pub(crate) fn into_sandbox(self, base: &Path) -> Result<Option<Sandbox>, String> {
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

impl RawOAuth {
    pub(crate) fn into_settings(self, base: &Path) -> Result<Option<OAuthSettings>, String> {
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
    pub(crate) fn into_settings(self) -> Result<ToolsSettings, (&'static str, String)> {
        let RawTools { tool_search, tool_budget, pool_budget, max_loaded_tools, code_mode, code_mode_limits } = self;
        let mut settings = ToolsSettings::default();
        if let Some(value) = tool_search {
            let (mode, native) = search_mode(&value, true).map_err(|m| ("tool_search", m))?;
            settings.tool_search = mode;
            settings.native = native;
        }
        if let Some(budget) = tool_budget {
            settings.tool_budget = budget;
        }
        if let Some(budget) = pool_budget {
            settings.pool_budget = budget;
        }
        if max_loaded_tools == Some(0) {
            return Err(("max_loaded_tools", "`max_loaded_tools` must be at least 1".to_owned()));
        }
        settings.max_loaded = max_loaded_tools;
        if let Some(value) = code_mode {
            settings.code_mode = on_off(&value).map_err(|m| ("code_mode", m))?;
        }
        settings.code_limits = code_mode_limits.into_limits().map_err(|m| ("code_mode_limits", m))?;
        Ok(settings)
    }
}

/// A `code_mode` value: `"on"` or `"off"`.
fn on_off(value: &str) -> Result<bool, String> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("`code_mode` must be \"on\" or \"off\", not {other:?}")),
    }
}

impl RawCodeLimits {
    /// The limits of one script: the engine's defaults where a key is not given.
    fn into_limits(self) -> Result<code_mode::Limits, String> {
        let RawCodeLimits { memory_mib, cpu_time_s, max_calls, concurrency, max_result_kib, max_log_kib, max_running } =
            self;
        let mut limits = code_mode::Limits::default();
        let positive = |key: &str, n: usize, max: usize| -> Result<usize, String> {
            if n == 0 || n > max { Err(format!("`{key}` must be from 1 to {max}, not {n}")) } else { Ok(n) }
        };
        if let Some(mib) = memory_mib {
            // Below a few MiB the engine cannot even start a script.
            limits.memory_bytes = positive("memory_mib", mib, 4096)?.max(4) << 20;
        }
        if let Some(seconds) = cpu_time_s {
            limits.cpu_time = seconds.0;
        }
        if let Some(calls) = max_calls {
            limits.max_calls = u32::try_from(positive("max_calls", calls as usize, 100_000)?).unwrap_or(u32::MAX);
        }
        if let Some(n) = concurrency {
            limits.concurrency = positive("concurrency", n, 256)?;
        }
        if let Some(kib) = max_result_kib {
            limits.max_result_bytes = positive("max_result_kib", kib, 64 << 10)? << 10;
        }
        if let Some(kib) = max_log_kib {
            limits.max_log_bytes = positive("max_log_kib", kib, 64 << 10)? << 10;
        }
        if let Some(n) = max_running {
            limits.max_running = positive("max_running", n, 256)?;
        }
        Ok(limits)
    }
}

impl RawServer {
    /// Takes the server's exposure keys out; `None` when it sets none. On error, the key and
    /// the message.
    /// Takes the server's `code_mode` out: `None` when it sets none. On error, the key and the
    /// message.
    pub(crate) fn take_code_mode(&mut self) -> Result<Option<bool>, (&'static str, String)> {
        self.code_mode.take().map(|value| on_off(&value).map_err(|m| ("code_mode", m))).transpose()
    }

    pub(crate) fn take_exposure(&mut self) -> Result<Option<tool_pool::ServerExposure>, (&'static str, String)> {
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
