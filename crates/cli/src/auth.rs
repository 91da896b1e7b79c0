//! OAuth for remote servers: the authorizers every command attaches to HTTP servers, and the
//! `login` / `logout` commands.
//!
//! Commands other than `login` never open a browser: a server that needs a person to log in
//! shows as `needs-auth` with the hint to run `mcp-harness login NAME`. Tokens live in the
//! user's data directory (`<data>/oauth/oauth-tokens.json`, mode 0600), never in the workspace.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use async_trait::async_trait;
use mcp_auth::grants::Es256Key;
use mcp_auth::{ClientConfig, Grant, LoopbackBrowser, OAuthAuthorizer, OAuthConfig, UserAgent};
use mcp_client::{AuthChallenge, AuthError, Authorizer, ConnectOptions, ServerState};
use mcp_safety::Secret;
use url::Url;

use crate::Outcome;
use crate::config::{Config, OAuthGrant, OAuthSettings, ServerTarget};
use crate::output;

/// The environment variable that moves the user's data directory (sessions, tokens).
pub(crate) const DATA_DIR_ENV: &str = "MCP_HARNESS_DATA_DIR";
/// How long `login` waits for the browser to come back.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The user's data directory for mcp-harness.
pub(crate) fn data_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV) {
        return Ok(PathBuf::from(dir));
    }
    directories::ProjectDirs::from("", "", "mcp-harness")
        .map(|d| d.data_dir().to_path_buf())
        .with_context(|| format!("cannot find your data directory (set {DATA_DIR_ENV})"))
}

/// Where OAuth tokens are kept.
pub(crate) fn token_dir() -> anyhow::Result<PathBuf> {
    Ok(data_dir()?.join("oauth"))
}

/// Stands in for an authorizer whose settings cannot work (a missing secret variable, an
/// unreadable key): the server then fails with this reason instead of a bare 401.
#[derive(Debug)]
struct Misconfigured(String);

#[async_trait]
impl Authorizer for Misconfigured {
    async fn authorization(&self) -> Option<Secret> {
        None
    }

    async fn challenged(&self, _: &AuthChallenge) -> Result<(), AuthError> {
        Err(AuthError::failed(self.0.clone()))
    }
}

/// The OAuth configuration of server `name` at `url`.
fn oauth_config(
    name: &str,
    url: &str,
    settings: &OAuthSettings,
    user_agent: Option<Arc<dyn UserAgent>>,
) -> Result<OAuthConfig, String> {
    let server_url = Url::parse(url).map_err(|e| format!("invalid url {url:?}: {e}"))?;
    let mut config = OAuthConfig::new(server_url);
    config.client_name = format!("mcp-harness ({name})");
    config.login_hint = format!("run `mcp-harness login {name}`");
    config.store_dir = Some(token_dir().map_err(|e| e.to_string())?);
    config.expected_issuer = settings.issuer.clone();
    let client_secret = match &settings.client_secret_env_var {
        Some(var) => Some(Secret::new(std::env::var(var).map_err(|_| {
            format!("the environment variable {var} (oauth.client_secret_env_var of server {name:?}) is not set")
        })?)),
        None => None,
    };
    config.client = ClientConfig {
        client_id: settings.client_id.clone(),
        client_secret,
        metadata_document_url: settings.client_metadata_url.clone(),
    };
    config.grant = match settings.grant {
        OAuthGrant::AuthorizationCode => Grant::AuthorizationCode { user_agent },
        OAuthGrant::ClientCredentials => {
            let private_key = match &settings.private_key_file {
                Some(path) => {
                    let pem = std::fs::read_to_string(path)
                        .map_err(|e| format!("cannot read oauth.private_key_file {}: {e}", path.display()))?;
                    let key = Es256Key::from_pkcs8_pem(&pem)
                        .map_err(|e| format!("oauth.private_key_file {}: {e}", path.display()))?;
                    Some(Arc::new(key))
                }
                None => None,
            };
            Grant::ClientCredentials { private_key }
        }
    };
    Ok(config)
}

fn authorizer(
    name: &str,
    url: &str,
    settings: &OAuthSettings,
    agent: Option<Arc<dyn UserAgent>>,
) -> Arc<dyn Authorizer> {
    match oauth_config(name, url, settings, agent).and_then(|c| OAuthAuthorizer::new(c).map_err(|e| e.to_string())) {
        Ok(authorizer) => Arc::new(authorizer),
        Err(reason) => Arc::new(Misconfigured(reason)),
    }
}

fn server_url<'a>(config: &'a Config, name: &str) -> Option<&'a str> {
    config.servers.iter().find(|s| s.name == name).and_then(|s| match &s.target {
        ServerTarget::Remote { url, .. } => Some(url.as_str()),
        ServerTarget::Stdio(_) => None,
    })
}

/// Non-interactive authorizers for every server that uses OAuth.
pub(crate) fn authorizers(config: &Config) -> BTreeMap<String, Arc<dyn Authorizer>> {
    config
        .oauth
        .iter()
        .filter_map(|(name, settings)| {
            let url = server_url(config, name)?;
            Some((name.clone(), authorizer(name, url, settings, None)))
        })
        .collect()
}

/// The server `name` and its OAuth settings, or an error that says why it cannot log in.
fn oauth_server<'a>(config: &'a Config, name: &str) -> anyhow::Result<(&'a str, &'a OAuthSettings)> {
    let Some(spec) = config.servers.iter().find(|s| s.name == name) else {
        let known: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        bail!("no server named {name:?} is configured (servers: {})", known.join(", "));
    };
    let Some(url) = server_url(config, name) else {
        bail!("server {name:?} runs as a local process (stdio); only remote servers log in");
    };
    let Some(settings) = config.oauth.get(name) else {
        bail!(
            "server {name:?} does not use OAuth (it has bearer_token_env_var, an Authorization header, \
             oauth.enabled = false, or a ws:// URL)"
        );
    };
    if !spec.enabled {
        let _ = output::stderr(&format!("note: server {name:?} is disabled; logging in anyway\n"));
    }
    Ok((url, settings))
}

/// `mcp-harness login NAME`: authorizes with the browser now and keeps the tokens.
pub(crate) async fn login_command(config: Config, name: &str, open_browser: bool) -> anyhow::Result<Outcome> {
    let (url, settings) = oauth_server(&config, name)?;
    let browser = LoopbackBrowser {
        show: Arc::new(|url: &Url| {
            let _ = output::stderr(&format!(
                "Open this URL in a browser to log in (waiting up to {} s):\n\n  {url}\n\n",
                LOGIN_TIMEOUT.as_secs()
            ));
        }),
        open_browser,
        timeout: LOGIN_TIMEOUT,
    };
    let mut oauth = oauth_config(name, url, settings, Some(Arc::new(browser))).map_err(anyhow::Error::msg)?;
    // A login replaces whatever was stored.
    oauth.ignore_stored = true;
    let authorizer = OAuthAuthorizer::new(oauth).context("setting up OAuth")?;
    let Some(server) = config.servers.iter().find(|s| s.name == name) else {
        bail!("no server named {name:?} is configured");
    };
    let mut spec = server.client_spec(config.remote.get(name), Some(Arc::new(authorizer)));
    spec.enabled = true;
    spec.startup_timeout = spec.startup_timeout.max(LOGIN_TIMEOUT + Duration::from_secs(30));
    // A signal while waiting for the browser drops the connection attempt (and its server).
    let connection = crate::signals::interruptible(mcp_client::connect(spec, &ConnectOptions::default())).await?;
    let state = connection.state().clone();
    connection.close().await;
    match state {
        ServerState::Connected { tools, .. } => {
            let dir = token_dir()?;
            output::stdout(&format!(
                "logged in to {name}: {tools} tools; tokens kept in {}\n",
                dir.join(mcp_auth::store::FILE_NAME).display()
            ))?;
            Ok(Outcome::Success)
        }
        ServerState::Failed { reason, .. } => bail!("logging in to {name} failed: {reason}"),
        ServerState::Disabled => bail!("server {name:?} is disabled"),
        other => bail!("logging in to {name} failed: the server is {}", other.label()),
    }
}

/// `mcp-harness logout NAME`: forgets the stored tokens of the server.
pub(crate) async fn logout_command(config: Config, name: &str) -> anyhow::Result<Outcome> {
    let (url, _) = oauth_server(&config, name)?;
    let url = Url::parse(url).with_context(|| format!("invalid url {url:?}"))?;
    let dir = token_dir()?;
    let removed = OAuthAuthorizer::logout(&dir, &url).context("removing the stored tokens")?;
    let text = if removed == 0 {
        format!("no stored tokens for {name}\n")
    } else {
        format!(
            "logged out of {name}: its tokens were removed from {}\n",
            dir.join(mcp_auth::store::FILE_NAME).display()
        )
    };
    output::stdout(&text)?;
    Ok(Outcome::Success)
}
