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
//! ```
//! use std::path::Path;
//! use std::time::Duration;
//! use mcp_host::config::{self, Context, Target};
//! use mcp_host::{Ports, Runtime, RuntimeOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Any supported format; `config::load_at` finds and reads the user's file instead.
//! let text = r#"
//!     [servers.notes]
//!     command = "notes-server"
//!     enabled = false
//!
//!     [servers.docs]
//!     url = "https://docs.example/mcp"
//!     bearer_token_env_var = "DOCS_TOKEN"
//!     enabled = false
//! "#;
//! let config = config::parse(Path::new("/etc/agent/mcp.toml"), text, &Context::process())?;
//! let docs = config.server("docs").ok_or("no docs")?;
//! assert!(matches!(&docs.target, Target::Remote(r) if r.options.bearer_token_env.as_deref() == Some("DOCS_TOKEN")));
//!
//! // What mcp-client connects, one spec per server.
//! let specs = mcp_host::client_specs(&config, &Ports::default());
//! assert_eq!(specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["docs", "notes"]);
//!
//! // The living runtime (`RuntimeOptions::reload` names the file to watch).
//! let runtime = Runtime::start(config, RuntimeOptions::default());
//! runtime.wait_first_attempts(Duration::from_secs(30), &|_, _, _| {}).await;
//! let states: Vec<_> = runtime.status().await.into_iter().map(|s| s.state.label()).collect();
//! assert_eq!(states, ["disabled", "disabled"]);
//! runtime.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! The example `embed` (`cargo run -p mcp-host --example embed`) reads a file, starts the runtime
//! over the fixture server and makes one call through the agent loop's gate.
//!
//! [`serve::HostBackend`] is the same runtime as the gateway's backend (`mcp-harness serve`):
//! `mcp_gateway`'s `Backend` port, implemented here as `runtime/source.rs` implements the loop's
//! `ToolSource`.

use std::sync::Arc;

pub mod auth;
pub mod config;
mod eras;
mod resolve;
mod run_code;
mod runtime;
pub mod sandbox;
pub mod serve;
mod session;
pub mod telemetry;

pub use resolve::{client_spec, client_specs};
pub use run_code::{CodeScope, RunCode, ScopeSource};
pub use runtime::{
    ActionOutcome, DEFAULT_ADDED_WAIT, Published, Reload, RequiredError, Runtime, RuntimeOptions, ServerAction,
    ServerStatus, ToolCounts,
};
pub use session::{connect, offered, pool_of};

use config::ServerSettings;

/// Who answers a server's requests to the host (elicitation, sampling, roots), and what is
/// declared to it, chosen per server from its settings.
pub type RequestsFor = dyn Fn(&ServerSettings) -> mcp_client::ServerRequests + Send + Sync;

/// Hears what the host has to say while it runs.
pub type Events = dyn Fn(&HostEvent) + Send + Sync;

/// Wraps the connector of the server named by the first argument: a front end that watches
/// what its servers send (the gateway's tap, [`serve`]) puts itself between the client and the
/// transport here.
pub type WrapConnector = dyn Fn(&str, Arc<dyn mcp_client::Connector>) -> Arc<dyn mcp_client::Connector> + Send + Sync;

/// What the host hands to the front end and asks of it.
#[derive(Clone)]
#[non_exhaustive]
pub struct Ports {
    /// Answers servers' requests; `None`: the client library's default, which declines
    /// politely and declares nothing.
    pub requests: Option<Arc<RequestsFor>>,
    /// Hears [`HostEvent`]s; by default they are dropped.
    pub events: Arc<Events>,
    /// Wraps every server's connector (`None`: the connectors as resolved).
    pub connectors: Option<Arc<WrapConnector>>,
}

impl Default for Ports {
    fn default() -> Self {
        Self { requests: None, events: Arc::new(|_| {}), connectors: None }
    }
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports")
            .field("requests", &self.requests.is_some())
            .field("connectors", &self.connectors.is_some())
            .finish_non_exhaustive()
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
    /// A local server a reload added had not connected when the listing after the reload
    /// stopped waiting for it ([`RuntimeOptions::added_wait`]): still starting (its tools join a
    /// later listing) or failed, as its state says.
    NotReady {
        /// The server.
        server: String,
        /// Where it stands.
        state: mcp_client::ServerState,
    },
}
