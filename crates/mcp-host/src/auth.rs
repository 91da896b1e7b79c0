//! OAuth for remote servers: the authorizer every connection to an OAuth server gets
//! (non-interactive: a server that needs a person to log in shows as `needs-auth` with the hint
//! to run `mcp-harness login NAME`), and what `login` and `logout` need. Tokens live in the
//! user's data directory (`<data>/oauth/oauth-tokens.json`, mode 0600), never in the workspace.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_auth::grants::Es256Key;
use mcp_auth::{ClientConfig, Grant, OAuthAuthorizer, OAuthConfig, UserAgent};
use mcp_client::{AuthChallenge, AuthError, Authorizer, ServerSpec};
use mcp_safety::Secret;
use url::Url;

use crate::config::{Config, OAuthGrant, OAuthSettings, RemoteTarget, ServerSettings, Target};

/// The environment variable that moves the user's data directory (sessions, tokens, eras).
pub const DATA_DIR_ENV: &str = "MCP_HARNESS_DATA_DIR";

/// How long a login may wait for the person and the browser, at most.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The user's data directory cannot be found.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot find your data directory (set {DATA_DIR_ENV})")]
#[non_exhaustive]
pub struct NoDataDir;

/// Why a server cannot log in or out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoginError {
    /// No server of that name.
    #[error("no server named {name:?} is configured (servers: {})", known.join(", "))]
    UnknownServer {
        /// The name asked for.
        name: String,
        /// The configured names.
        known: Vec<String>,
    },
    /// A stdio server.
    #[error("server {name:?} runs as a local process (stdio); only remote servers log in")]
    Local {
        /// The server.
        name: String,
    },
    /// A remote server that does not use OAuth.
    #[error(
        "server {name:?} does not use OAuth (it has bearer_token_env_var, an Authorization header, \
         oauth.enabled = false, or a ws:// URL)"
    )]
    NoOAuth {
        /// The server.
        name: String,
    },
    /// Its OAuth settings cannot work (a missing secret variable, an unreadable key, a bad URL).
    #[error("{0}")]
    Settings(String),
    /// The OAuth client could not be set up.
    #[error("setting up OAuth")]
    Setup(#[source] mcp_auth::flow::FlowError),
    /// The stored tokens could not be removed.
    #[error("removing the stored tokens")]
    Store(#[source] mcp_auth::LogoutError),
    /// No data directory.
    #[error(transparent)]
    NoDataDir(#[from] NoDataDir),
}

/// The user's data directory for mcp-harness (`MCP_HARNESS_DATA_DIR` moves it).
pub fn data_dir() -> Result<PathBuf, NoDataDir> {
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV) {
        return Ok(PathBuf::from(dir));
    }
    directories::ProjectDirs::from("", "", "mcp-harness").map(|d| d.data_dir().to_path_buf()).ok_or(NoDataDir)
}

/// Where OAuth tokens are kept.
pub fn token_dir() -> Result<PathBuf, NoDataDir> {
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

/// The non-interactive authorizer of server `name` (at `remote`), when it uses OAuth: one that
/// cannot be set up fails the connection with the reason.
pub(crate) fn authorizer(name: &str, remote: &RemoteTarget) -> Option<Arc<dyn Authorizer>> {
    let settings = remote.oauth.as_ref()?;
    Some(
        match oauth_config(name, &remote.url, settings, None)
            .and_then(|c| OAuthAuthorizer::new(c).map_err(|e| e.to_string()))
        {
            Ok(authorizer) => Arc::new(authorizer),
            Err(reason) => Arc::new(Misconfigured(reason)),
        },
    )
}

/// Server `name` and its remote settings, or why it cannot log in.
fn oauth_server<'a>(config: &'a Config, name: &str) -> Result<(&'a ServerSettings, &'a RemoteTarget), LoginError> {
    let Some(server) = config.server(name) else {
        let known = config.servers.iter().map(|s| s.name.clone()).collect();
        return Err(LoginError::UnknownServer { name: name.to_owned(), known });
    };
    let Target::Remote(remote) = &server.target else { return Err(LoginError::Local { name: name.to_owned() }) };
    if remote.oauth.is_none() {
        return Err(LoginError::NoOAuth { name: name.to_owned() });
    }
    Ok((server, remote))
}

/// What `login NAME` connects: server `name` (enabled whatever its configuration says) with an
/// authorizer that takes a person through `user_agent` now, replacing any stored tokens, and
/// a startup timeout long enough for them ([`LOGIN_TIMEOUT`]).
pub fn login_spec(config: &Config, name: &str, user_agent: Arc<dyn UserAgent>) -> Result<ServerSpec, LoginError> {
    let (server, remote) = oauth_server(config, name)?;
    let settings = remote.oauth.as_ref().ok_or_else(|| LoginError::NoOAuth { name: name.to_owned() })?;
    let mut oauth = oauth_config(name, &remote.url, settings, Some(user_agent)).map_err(LoginError::Settings)?;
    // A login replaces whatever was stored.
    oauth.ignore_stored = true;
    let authorizer = OAuthAuthorizer::new(oauth).map_err(LoginError::Setup)?;
    let mut spec = crate::resolve::plain_spec(server, Some(Arc::new(authorizer)));
    spec.enabled = true;
    spec.startup_timeout = spec.startup_timeout.max(LOGIN_TIMEOUT + Duration::from_secs(30));
    Ok(spec)
}

/// `logout NAME`: forgets the stored tokens of the server; how many entries were removed.
pub fn logout(config: &Config, name: &str) -> Result<usize, LoginError> {
    let (_, remote) = oauth_server(config, name)?;
    let url =
        Url::parse(&remote.url).map_err(|e| LoginError::Settings(format!("invalid url {:?}: {e}", remote.url)))?;
    OAuthAuthorizer::logout(&token_dir()?, &url).map_err(LoginError::Store)
}
