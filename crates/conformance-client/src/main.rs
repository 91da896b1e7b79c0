//! `conformance-client URL`: the client the official MCP conformance harness
//! (`@modelcontextprotocol/conformance`) drives. The harness starts a mock server, passes its
//! URL as the last argument and names the scenario in `MCP_CONFORMANCE_SCENARIO`; this program
//! connects over Streamable HTTP with the library's own client, does what the scenario asks,
//! and exits 0 on success, 1 on failure (the reason on stderr).
#![allow(clippy::print_stderr)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_protocol::jsonrpc::ErrorObject;
use mcp_protocol::{ClientCapabilities, ElicitAction, ElicitRequestParams, ElicitResult};
use mcp_transport::handler::schema_defaults;
use mcp_transport::{
    Client, ClientOptions, HttpConfig, HttpTransport, ListLimits, RequestOptions, ServerRequestHandler,
};
use serde_json::{Map, Value, json};

/// Accepts every form elicitation with the defaults its schema declares (SEP-1034): the
/// harness plays a user who agrees to everything.
struct AcceptDefaults;

#[async_trait]
impl ServerRequestHandler for AcceptDefaults {
    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        let content = params.requested_schema.as_ref().map(schema_defaults).unwrap_or_default();
        Ok(ElicitResult { action: ElicitAction::Accept, content: Some(content), extra: Default::default() })
    }
}

/// The tool call a scenario expects, if any: (tool, arguments).
fn scenario_call(scenario: &str) -> Option<(String, Value)> {
    match scenario {
        "tools_call" => Some(("add_numbers".into(), json!({"a": 5, "b": 3}))),
        "elicitation-sep1034-client-defaults" => Some(("test_client_elicitation_defaults".into(), json!({}))),
        "sse-retry" => Some(("test_reconnection".into(), json!({}))),
        _ => None,
    }
}

async fn run(url: String, scenario: &str) -> Result<(), String> {
    let options = ClientOptions {
        capabilities: ClientCapabilities { elicitation: Some(json!({})), ..ClientCapabilities::default() },
        handler: Arc::new(AcceptDefaults),
        client_info: mcp_protocol::Implementation::new("mcp-harness-conformance-client", env!("CARGO_PKG_VERSION")),
        startup_timeout: Duration::from_secs(20),
        request_timeout: Duration::from_secs(20),
        label: scenario.to_owned(),
        ..ClientOptions::default()
    };
    let transport = HttpTransport::new(HttpConfig::new(url)).map_err(|e| e.to_string())?;
    let client = Client::connect(transport, options).await.map_err(|e| format!("initialize: {e}"))?;
    let outcome = exercise(&client, scenario).await;
    let _ = client.close().await;
    outcome
}

async fn exercise(client: &Client, scenario: &str) -> Result<(), String> {
    let tools = client.list_all_tools(ListLimits::default()).await.map_err(|e| format!("tools/list: {e}"))?;
    let call = scenario_call(scenario).or_else(|| {
        // An unknown scenario: call the first tool without arguments, which most mocks accept.
        tools.first().map(|t| (t.name.clone(), json!({})))
    });
    if let Some((tool, arguments)) = call {
        let arguments: Option<Map<String, Value>> = arguments.as_object().cloned();
        let result = client
            .call_tool(&tool, arguments, RequestOptions::default())
            .await
            .map_err(|e| format!("tools/call {tool}: {e}"))?;
        eprintln!("{tool}: {}", result.joined_text());
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: conformance-client [ARGS...] URL   (scenario in MCP_CONFORMANCE_SCENARIO)");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    match run(url, &scenario).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-client ({scenario}): {e}");
            ExitCode::FAILURE
        }
    }
}
