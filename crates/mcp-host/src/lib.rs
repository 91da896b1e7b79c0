//! The host every front end shares: the configuration read from any supported format
//! ([`config`]), resolved into the specs `mcp-client` connects with sandbox, remote options,
//! OAuth and remembered protocol eras applied in one place ([`client_specs`]), and the living
//! [`Runtime`]: the supervised servers, the configuration watched with one publisher, the
//! policy, and the `/mcp`-style operations, all returning data. The command-line agent is one
//! front end over it; a program can embed the same host in a few lines.
//!
//! What talks to a person stays with the front end and is handed in through small ports: the
//! VS Code inputs a configuration asks for ([`config::Context::ask`], [`config::load_at`]), the
//! handler of a server's requests such as elicitation ([`Ports::requests`]), and what the host
//! has to say while it runs ([`Ports::events`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use agent_loop::{BoundCall, ToolSource};
//! use mcp_host::config::{self, ConfigPath, Origin};
//! use mcp_host::{Runtime, RuntimeOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let at = ConfigPath::new(Some("/etc/my-agent/mcp.toml".into()), Origin::Flag, false);
//! let config = config::load_at(&at, None)?;
//! let mut options = RuntimeOptions::default();
//! options.reload = Some(at);
//! let runtime = Runtime::start(config, options);
//! runtime.wait_first_attempts(Duration::from_secs(30), &|_, _, _| {}).await;
//! let result = runtime.call_bound(BoundCall::new("notes", "list_notes", None)).await?;
//! println!("{} content blocks", result.content.len());
//! runtime.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! The example `embed` (`cargo run -p mcp-host --example embed`) does this against the fixture
//! server and checks the answer.

use std::sync::Arc;

pub mod auth;
pub mod config;
mod eras;
mod resolve;
mod runtime;
pub mod sandbox;
mod session;

pub use resolve::{client_spec, client_specs};
pub use runtime::{
    ActionOutcome, Published, Reload, RequiredError, Runtime, RuntimeOptions, ServerAction, ServerStatus, ToolCounts,
};
pub use session::{connect, offered, pool_of};

use config::ServerSettings;

/// Who answers a server's requests to the host (elicitation, sampling, roots), and what is
/// declared to it, chosen per server from its settings.
pub type RequestsFor = dyn Fn(&ServerSettings) -> mcp_client::ServerRequests + Send + Sync;

/// Hears what the host has to say while it runs.
pub type Events = dyn Fn(&HostEvent) + Send + Sync;

/// What the host hands to the front end and asks of it.
#[derive(Clone)]
#[non_exhaustive]
pub struct Ports {
    /// Answers servers' requests; `None`: the client library's default, which declines
    /// politely and declares nothing.
    pub requests: Option<Arc<RequestsFor>>,
    /// Hears [`HostEvent`]s; by default they are dropped.
    pub events: Arc<Events>,
}

impl Default for Ports {
    fn default() -> Self {
        Self { requests: None, events: Arc::new(|_| {}) }
    }
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports").field("requests", &self.requests.is_some()).finish_non_exhaustive()
    }
}

/// What the host tells its front end while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostEvent {
    /// A stdio server asked for a sandbox runs unconfined: the kernel has no Landlock (said
    /// once per process; `sandbox_required = true` refuses to start such servers instead).
    Unconfined,
    /// The configuration changed on disk and was published.
    Reloaded(Published),
    /// The configuration changed on disk but cannot be used; the running one stays (said once
    /// per distinct error).
    ReloadFailed {
        /// Why.
        message: String,
    },
}
