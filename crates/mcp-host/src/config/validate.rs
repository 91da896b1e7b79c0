//! A file read ([`foreign::read`]) made into a [`Config`]: each server's entry checked and
//! resolved into its [`ServerSettings`] (variables expanded for enabled servers only, the
//! sandbox defaults applied, the policy hooks and fingerprint taken), and the policy built.
//! Every error names the file and the key as the file spells it.

use std::collections::BTreeMap;
use std::path::Path;

use mcp_client::{DEFAULT_MAX_TOOL_TIME, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT};
use mcp_sandbox::{Sandbox, SandboxError};
use mcp_transport::{HttpMode, RemoteOptions, StdioConfig};
use policy::{Policy, PolicyError};

use super::foreign::{self, RawFile};
use super::raw::RawServer;
use super::settings::{OAuthSettings, RemoteTarget, SandboxSetting, ServerSettings, Target};
use super::{Config, ConfigError, Context, edit, vars};

/// Parses and validates `text`, which was read from `path` (used in messages, and as the base
/// of relative paths), in `context`.
pub(crate) fn parse_with(path: &Path, text: &str, context: &Context<'_>) -> Result<Config, ConfigError> {
    parse_checked(path, text, context).map_err(|e| foreign::with_position(e, path, text))
}

fn parse_checked(path: &Path, text: &str, context: &Context<'_>) -> Result<Config, ConfigError> {
    let invalid = |key: Option<String>, message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        key,
        message,
        position: None,
    };
    let read_context = foreign::ReadContext { home: context.home.as_deref(), cwd: context.cwd.as_deref() };
    let RawFile {
        table,
        servers,
        policy,
        sandbox: sandbox_defaults,
        runtime,
        serve,
        inputs,
        warnings,
        tools,
        telemetry,
        ..
    } = foreign::read(path, text, read_context)?;
    // The table's values are checked now (the variables, which may override them, when a
    // front end starts).
    if let Err(e) =
        mcp_telemetry::config::TelemetryConfig::resolve(&telemetry, &BTreeMap::new(), super::TELEMETRY_SERVICE_NAME)
    {
        return Err(invalid(Some("telemetry".into()), e.to_string()));
    }
    let tools = tools.into_settings().map_err(|(key, message)| invalid(Some(key.to_owned()), message))?;
    let runtime = runtime.into_settings().map_err(|message| invalid(Some("runtime".into()), message))?;
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    let serve = serve.into_settings(base).map_err(|(key, message)| invalid(Some(format!("serve.{key}")), message))?;
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
    // A sandbox's relative paths are relative to the file wherever it was named from: a grant
    // must be absolute.
    let sandbox_base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
    // A grant that cannot be given as written is refused now, not at each start.
    let check = |sandbox: Option<Sandbox>, key: String| match &sandbox {
        Some(s) => match crate::sandbox::check_grants(s, Some(path), context.home.as_deref()) {
            Ok(()) => Ok(sandbox),
            Err(e @ (SandboxError::HoldsProtected { .. } | SandboxError::WritesHome { .. })) => {
                Err(invalid(Some(format!("{key}.write")), e.to_string()))
            }
            Err(e) => Err(invalid(Some(key), e.to_string())),
        },
        None => Ok(sandbox),
    };
    let default_sandbox = match sandbox_defaults.default {
        Some(raw) => check(
            raw.into_sandbox(&sandbox_base).map_err(|message| invalid(Some("sandbox.default".into()), message))?,
            "sandbox.default".into(),
        )?,
        None => SandboxSetting::default().sandbox,
    };
    let defaults = SandboxSetting { sandbox: default_sandbox, required: sandbox_defaults.required.unwrap_or(false) };
    // Each server's entry as written (in our terms, whatever the file's format) with the
    // defaults that shape it: equal fingerprints mean a reload changed nothing.
    let globals = format!("{:?}|{}", defaults.sandbox, defaults.required);
    let mut settings = Vec::with_capacity(servers.len());
    for (name, mut raw) in servers {
        let key = || foreign::entry_key(table, &name);
        let at = |(field, message): (String, String)| invalid(Some(format!("{}.{field}", key())), message);
        let fingerprint = format!("{}|{globals}", edit::server_table(&raw));
        let exposure = raw.take_exposure().map_err(|(field, m)| at((field.to_owned(), m)))?;
        let code_mode = raw.take_code_mode().map_err(|(field, m)| at((field.to_owned(), m)))?;
        if raw.enabled != Some(false) {
            let ask: Option<&vars::AskInput<'_>> = if inputs.is_empty() { None } else { Some(&ask) };
            raw.resolve(context, ask, base).map_err(at)?;
        }
        let tool_filter = raw.tool_filter().map_err(at)?;
        let (instructions, elicitation) = (raw.instructions != Some(false), raw.elicitation != Some(false));
        let sandbox = (raw.sandbox.take(), raw.sandbox_required.take());
        let mut server = raw.into_settings(&name, base).map_err(|message| invalid(Some(key()), message))?;
        match &mut server.target {
            Target::Stdio { sandbox: setting, .. } => {
                *setting = SandboxSetting {
                    sandbox: match sandbox.0 {
                        Some(raw) => {
                            let key = format!("{}.sandbox", key());
                            check(raw.into_sandbox(&sandbox_base).map_err(|m| invalid(Some(key.clone()), m))?, key)?
                        }
                        None => defaults.sandbox.clone(),
                    },
                    required: sandbox.1.unwrap_or(defaults.required),
                };
            }
            Target::Remote(_) if sandbox.0.is_some() || sandbox.1.is_some() => {
                return Err(invalid(Some(key()), "`sandbox` only applies to stdio (command) servers".into()));
            }
            Target::Remote(_) => {}
        }
        server.exposure = exposure.unwrap_or_default();
        server.tool_filter = tool_filter;
        server.instructions = instructions;
        server.elicitation = elicitation;
        server.code_mode = code_mode;
        server.fingerprint = fingerprint;
        settings.push(server);
    }
    let policy_fingerprint = policy_fingerprint(&format!("{policy:?}"), &settings);
    let policy = Policy::new(policy).map_err(|e| match e {
        PolicyError::InvalidPattern { index, field, pattern, reason } => {
            invalid(Some(format!("policy.rules[{index}].{field}")), format!("invalid pattern {pattern:?}: {reason}"))
        }
        PolicyError::InvalidResourcePattern { index, field, pattern, reason } => invalid(
            Some(format!("policy.resources[{index}].{field}")),
            format!("invalid pattern {pattern:?}: {reason}"),
        ),
        other => invalid(Some("policy".to_owned()), other.to_string()),
    })?;
    Ok(Config {
        policy: with_hooks(policy, &settings),
        servers: settings,
        file: Some(path.to_path_buf()),
        runtime,
        serve,
        policy_fingerprint,
        warnings,
        tools,
        telemetry,
    })
}

/// `policy` with each server's policy hooks: its tool filter, and whether its instructions
/// and elicitation are allowed.
pub(crate) fn with_hooks(policy: Policy, servers: &[ServerSettings]) -> Policy {
    servers.iter().fold(policy, |mut policy, server| {
        if let Some(filter) = &server.tool_filter {
            policy = policy.with_tool_filter(&server.name, filter.clone());
        }
        if !server.instructions {
            policy = policy.without_instructions(&server.name);
        }
        if !server.elicitation {
            policy = policy.without_elicitation(&server.name);
        }
        policy
    })
}

/// The policy as written (`written`) and every server's policy hooks: equal fingerprints mean
/// a reload left the policy as it was.
pub(crate) fn policy_fingerprint(written: &str, servers: &[ServerSettings]) -> String {
    let filters: Vec<(&str, &policy::ToolFilter)> =
        servers.iter().filter_map(|s| s.tool_filter.as_ref().map(|f| (s.name.as_str(), f))).collect();
    let off = |keep: fn(&ServerSettings) -> bool| -> Vec<&str> {
        servers.iter().filter(|s| !keep(s)).map(|s| s.name.as_str()).collect()
    };
    format!("{written}|{filters:?}|{:?}|{:?}", off(|s| s.instructions), off(|s| s.elicitation))
}

/// Whether `name` can name an environment variable: not empty, and no `=` (`PATH=/x` as a name
/// sets `PATH`), NUL, control or invisible characters.
fn is_env_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c == '=' || c.is_control() || mcp_safety::text::is_stripped(c))
}

impl RawServer {
    /// The server's settings from its entry: target, enabled, timeouts (the sandbox, policy
    /// hooks, exposure and fingerprint are the caller's to fill in).
    fn into_settings(self, name: &str, base: &Path) -> Result<ServerSettings, String> {
        // Names are printed and named in tool names: nothing that drives a terminal or reads
        // differently from what it says (ESC, bidirectional overrides, zero-width characters).
        if name.is_empty() || name.chars().any(|c| c.is_control() || mcp_safety::text::is_stripped(c)) {
            return Err("a server name must be non-empty and free of control characters (line breaks and tabs \
                 too), bidirectional overrides and invisible characters"
                .to_owned());
        }
        let only_for = |present: bool, key: &str, kind: &str| {
            if present { Err(format!("`{key}` only applies to {kind} servers")) } else { Ok(()) }
        };
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
                if let Some(bad) = config.env.keys().find(|k| !is_env_name(k)) {
                    return Err(format!(
                        "`env` has the name {:?}, which is no variable's name: a name is not empty and has no \
                         `=` (which would set another variable), NUL or control characters",
                        mcp_safety::text::one_line(bad, 100)
                    ));
                }
                // Relative to the file, not to wherever the program happens to be started.
                config.cwd = self.cwd.map(|cwd| base.join(cwd));
                config.label = name.to_owned();
                Target::Stdio { config, sandbox: SandboxSetting::default() }
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
                let oauth = match self.oauth {
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
                let mut remote = RemoteTarget::new(url);
                remote.headers = headers;
                remote.options = options;
                remote.oauth = oauth;
                Target::Remote(remote)
            }
        };
        let mut settings = ServerSettings::with_target(name, target);
        settings.enabled = self.enabled.unwrap_or(true);
        settings.startup_timeout = self.startup_timeout_s.map_or(DEFAULT_STARTUP_TIMEOUT, |s| s.0);
        settings.tool_timeout = self.tool_timeout_s.map_or(DEFAULT_TOOL_TIMEOUT, |s| s.0);
        settings.max_tool_time = self.max_tool_time_s.map_or(DEFAULT_MAX_TOOL_TIME, |s| s.0);
        settings.required = self.required.unwrap_or(false);
        Ok(settings)
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
}
