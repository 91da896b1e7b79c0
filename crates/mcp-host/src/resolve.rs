//! Resolution: a [`Config`] into the `mcp_client::ServerSpec`s the client library connects,
//! in one place. Each server's transport connector carries what its settings say: a stdio
//! server its sandbox (the host's configuration and data protected), a remote one its options
//! and its OAuth authorizer; every spec gets its timeouts, the caller's handler of the server's
//! requests ([`Ports::requests`]) and, when the server's answer is remembered, the protocol era
//! to open with (`eras`).

use std::path::PathBuf;
use std::sync::Arc;

use mcp_client::{Authorizer, Connector, ServerSpec};
use mcp_transport::RemoteServer;

use crate::Ports;
use crate::config::{Config, RemoteTarget, ServerSettings, Target};
use crate::eras::EraMemory;

/// The specs of every configured server, with their remembered protocol eras.
pub fn client_specs(config: &Config, ports: &Ports) -> Vec<ServerSpec> {
    client_specs_recalling(config, ports, &mut EraMemory::load())
}

/// [`client_specs`] with the eras of `eras` (so the caller can remember what the servers
/// answer in the same memory).
pub(crate) fn client_specs_recalling(config: &Config, ports: &Ports, eras: &mut EraMemory) -> Vec<ServerSpec> {
    let protect = protected(config);
    config
        .servers
        .iter()
        .map(|server| {
            let mut spec = spec_of(server, &protect, ports);
            eras.recall(&mut spec, server);
            spec
        })
        .collect()
}

/// The spec of one configured server of `config` (no remembered era).
pub fn client_spec(config: &Config, server: &ServerSettings, ports: &Ports) -> ServerSpec {
    spec_of(server, &protected(config), ports)
}

fn spec_of(server: &ServerSettings, protect: &[PathBuf], ports: &Ports) -> ServerSpec {
    let connector: Arc<dyn Connector> = match &server.target {
        Target::Stdio { config, sandbox } => {
            Arc::new(crate::sandbox::confined(config.clone(), sandbox, protect, ports))
        }
        Target::Remote(remote) => remote_connector(remote, crate::auth::authorizer(&server.name, remote)),
    };
    let mut spec = with_settings(ServerSpec::new(server.name.clone(), connector), server);
    spec.requests = ports.requests.as_ref().map(|requests| requests(server));
    spec
}

/// A server's spec with `authorizer` for a remote one, no sandbox and no request handler:
/// what `login` connects.
pub(crate) fn plain_spec(server: &ServerSettings, authorizer: Option<Arc<dyn Authorizer>>) -> ServerSpec {
    let connector: Arc<dyn Connector> = match &server.target {
        Target::Stdio { config, .. } => Arc::new(config.clone()),
        Target::Remote(remote) => remote_connector(remote, authorizer),
    };
    with_settings(ServerSpec::new(server.name.clone(), connector), server)
}

fn remote_connector(remote: &RemoteTarget, authorizer: Option<Arc<dyn Authorizer>>) -> Arc<dyn Connector> {
    let mut connector = RemoteServer::new(remote.url.clone());
    connector.headers = remote.headers.clone();
    connector.options = remote.options.clone();
    connector.authorizer = authorizer;
    Arc::new(connector)
}

fn with_settings(mut spec: ServerSpec, server: &ServerSettings) -> ServerSpec {
    spec.enabled = server.enabled;
    spec.startup_timeout = server.startup_timeout;
    spec.tool_timeout = server.tool_timeout;
    spec.max_tool_time = server.max_tool_time.max(server.tool_timeout);
    spec
}

/// What a server never reads: [`crate::sandbox::host_secrets`] of `config`'s file.
fn protected(config: &Config) -> Vec<PathBuf> {
    crate::sandbox::host_secrets(config.file.as_deref())
}
