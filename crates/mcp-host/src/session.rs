//! One-shot use of the configured servers (`servers`, `tools`, `call`, content commands):
//! every enabled server connected at once, each under its own startup timeout, what they
//! answered remembered (`eras`), and the tool pool of their listings.

use std::sync::Arc;

use mcp_client::{ConnectOptions, ServerConnection};
use tool_pool::{BuiltinTool, Options, Pool, ServerTools, assemble};

use crate::Ports;
use crate::config::Config;
use crate::eras::EraMemory;

/// Connects every configured server at once (each under its own startup timeout); `settled`
/// hears each server's name as its attempt ends. What the servers answered is remembered, so
/// the next start opens each one the way it answered.
pub async fn connect(config: &Config, ports: &Ports, settled: &(dyn Fn(&str) + Sync)) -> Vec<ServerConnection> {
    let mut options = ConnectOptions::default();
    options.client.observer = crate::telemetry::observer(config);
    let mut eras = EraMemory::load();
    let specs = crate::resolve::client_specs_recalling(config, ports, &mut eras);
    let connections = futures_util::future::join_all(specs.into_iter().map(|spec| {
        let options = &options;
        async move {
            let name = spec.name.clone();
            let connection = mcp_client::connect(spec, options).await;
            settled(&name);
            connection
        }
    }))
    .await;
    eras.learn(connections.iter().map(|c| (c.name(), c.state())), config);
    eras.save();
    connections
}

/// The pool of these servers' listings under `policy`, no built-in tools: what `tools` and
/// `call` offer.
pub fn pool_of<'a>(
    listings: impl IntoIterator<Item = (&'a str, Arc<[mcp_protocol::Tool]>)>,
    policy: &policy::Policy,
) -> Result<Pool, tool_pool::StrictError> {
    let listings: Vec<ServerTools> = listings.into_iter().map(|(name, tools)| ServerTools::new(name, tools)).collect();
    let builtins: Arc<[BuiltinTool]> = Arc::new([]);
    assemble(&builtins, &listings, policy, &Options::default(), 1)
}

/// How many of server `name`'s tools `pool` offers (what policy and checks leave of those it
/// listed).
pub fn offered(pool: &Pool, name: &str) -> usize {
    pool.iter().filter(|e| e.server() == Some(name)).count()
}
