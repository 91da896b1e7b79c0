//! `mcp-harness serve`: the governed gateway. The host's runtime (the same configuration,
//! supervised servers, pool, policy and call gate as `chat`) behind `mcp_gateway`'s fronts:
//! stdio by default (a host's configuration says `"command": "mcp-harness", "args":
//! ["serve"]`), Streamable HTTP at `/mcp` with `--http ADDR`.
//!
//! Over stdio, stdout is the protocol: everything the command has to say goes to stderr.

use std::net::SocketAddr;
use std::sync::Arc;

use mcp_gateway::{Gateway, GatewayOptions, HttpOptions, HttpServer, StdioOptions, serve_stdio};
use mcp_host::config::{Config, ConfigPath, Origin};
use mcp_host::serve::{HostBackend, ServeOptions};
use mcp_protocol::Implementation;

use crate::Outcome;
use crate::output;

/// `serve`'s own arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServeArgs {
    /// Speak Streamable HTTP at http://ADDR/mcp instead of stdio (for example 127.0.0.1:8808;
    /// port 0 picks a free one). A non-loopback address needs inbound authentication.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<SocketAddr>,
    /// Offer the one enabled server as it is: its tool names unchanged (no SERVER__ prefix),
    /// its capabilities and instructions mirrored. Refused unless exactly one server is enabled.
    #[arg(long)]
    pub(crate) transparent: bool,
}

/// `mcp-harness serve [--http ADDR] [--transparent]`.
pub(crate) async fn serve_command(config: Config, at: &ConfigPath, args: &ServeArgs) -> anyhow::Result<Outcome> {
    let settings = config.serve.clone();
    let mut ports = mcp_host::Ports::default();
    ports.events = Arc::new(crate::host::show_event);
    let mut options = ServeOptions::default();
    options.ports = ports;
    // The file the configuration was read from is watched: servers and policy follow it.
    options.reload = Some(ConfigPath::new(config.file.clone(), Origin::Flag, at.allow_workspace));
    options.transparent = args.transparent;
    let backend = HostBackend::start(config, options)?;
    let gateway_options = GatewayOptions {
        server_info: Implementation::new(
            settings.name.clone().unwrap_or_else(|| "mcp-harness".to_owned()),
            settings.version.clone().unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned()),
        ),
        instructions: settings.instructions.clone(),
        transparent: args.transparent,
        approval_ttl: settings.approval_ttl,
        approval_wait: settings.approval_wait,
        // A SERVER span per request received, when telemetry is on.
        observer: mcp_host::telemetry::serve_observer(),
        // No audit log of its own yet: telemetry counts the decisions the gateway makes.
        audit: mcp_host::telemetry::policy_audit(),
        ..GatewayOptions::default()
    };
    let served = async {
        let gateway = Gateway::new(Arc::clone(&backend) as Arc<dyn mcp_gateway::Backend>, gateway_options)
            .map_err(|e| anyhow::anyhow!("cannot start the gateway: {e}"))?;
        match args.http {
            None => serve_stdio(gateway, tokio::io::stdin(), tokio::io::stdout(), StdioOptions::default())
                .await
                .map_err(anyhow::Error::from),
            Some(addr) => {
                let http = HttpOptions {
                    addr,
                    allowed_hosts: settings.allowed_hosts.clone(),
                    allowed_origins: settings.allowed_origins.clone(),
                    metrics: mcp_host::telemetry::metrics_source(),
                    ..HttpOptions::default()
                };
                let server = HttpServer::bind(gateway, http).await?;
                output::stderr(&format!("listening on http://{}/mcp\n", server.local_addr()))?;
                server.run(std::future::pending()).await;
                Ok(())
            }
        }
    };
    // A signal ends the front (requests in flight are dropped); the servers are closed either way.
    let outcome = crate::signals::interruptible(served).await;
    backend.close().await;
    outcome??;
    Ok(Outcome::Success)
}
