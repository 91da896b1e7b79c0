//! `login` and `logout`: OAuth for remote servers, with a browser (`mcp_host::auth` keeps the
//! rest: every other command's authorizers never open one, and a server that needs a person
//! shows as `needs-auth` with the hint to run `mcp-harness login NAME`).

use std::sync::Arc;

use anyhow::bail;
use mcp_auth::LoopbackBrowser;
use mcp_client::{ConnectOptions, ServerState};
use mcp_host::auth::{LOGIN_TIMEOUT, login_spec, logout, token_dir};
use mcp_host::config::Config;
use url::Url;

use crate::Outcome;
use crate::output;

/// `mcp-harness login NAME`: authorizes with the browser now and keeps the tokens.
pub(crate) async fn login_command(config: Config, name: &str, open_browser: bool) -> anyhow::Result<Outcome> {
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
    let spec = login_spec(&config, name, Arc::new(browser))?;
    if config.server(name).is_some_and(|s| !s.enabled) {
        let _ = output::stderr(&format!("note: server {name:?} is disabled; logging in anyway\n"));
    }
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
    let removed = logout(&config, name)?;
    let text = if removed == 0 {
        format!("no stored tokens for {name}\n")
    } else {
        format!(
            "logged out of {name}: its tokens were removed from {}\n",
            token_dir()?.join(mcp_auth::store::FILE_NAME).display()
        )
    };
    output::stdout(&text)?;
    Ok(Outcome::Success)
}
