//! `conformance-client URL`: the client the official MCP conformance harness
//! (`@modelcontextprotocol/conformance`) drives. The harness starts a mock server, passes its
//! URL as the last argument and names the scenario in `MCP_CONFORMANCE_SCENARIO`; this program
//! connects over Streamable HTTP with the library's own client, does what the scenario asks,
//! and exits 0 on success, 1 on failure (the reason on stderr).
//!
//! Every connection carries the OAuth adapter ([`mcp_auth::OAuthAuthorizer`]): the harness's
//! authorization servers approve at once, so the client follows the authorization URL itself
//! ([`mcp_auth::FollowRedirects`]). `MCP_CONFORMANCE_CONTEXT` (JSON) supplies pre-registered or
//! machine credentials for the scenarios that need them.
#![allow(clippy::print_stderr)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_auth::grants::Es256Key;
use mcp_auth::{ClientConfig, CrossAppConfig, FollowRedirects, Grant, OAuthAuthorizer, OAuthConfig};
use mcp_client::{Client, ClientOptions, ListLimits, RequestOptions, ServerRequestHandler, schema_defaults};
use mcp_protocol::ErrorObject;
use mcp_protocol::{ClientCapabilities, ElicitAction, ElicitRequestParams, ElicitResult};
use mcp_transport::{HttpConfig, HttpTransport};
use serde_json::{Map, Value, json};
use url::Url;

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

/// The client ID metadata document URL the harness expects in `auth/basic-cimd` (it never
/// fetches it there).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Scenarios run as a client without a metadata document URL (registering dynamically): the
/// harness of `auth/offline-access-scope` fetches a URL client id from the network when it
/// stops, and this keeps the run on loopback.
const WITHOUT_METADATA_URL: &[&str] = &["auth/offline-access-scope"];

/// The scenario's context: credentials the harness hands the client.
fn context() -> Result<Map<String, Value>, String> {
    match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(text) => match serde_json::from_str(&text) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err("MCP_CONFORMANCE_CONTEXT is not a JSON object".to_owned()),
        },
        Err(_) => Ok(Map::new()),
    }
}

/// The OAuth adapter for the scenario: client credentials, cross-app access or the
/// authorization code flow, depending on what the context supplies.
fn authorizer(url: &str, scenario: &str) -> Result<OAuthAuthorizer, String> {
    let ctx = context()?;
    let text = |key: &str| ctx.get(key).and_then(Value::as_str).map(str::to_owned);
    let server_url = Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let mut config = OAuthConfig::new(server_url);
    config.client_name = "mcp-harness-conformance-client".to_owned();
    config.client = ClientConfig {
        client_id: text("client_id"),
        client_secret: text("client_secret").map(mcp_safety::Secret::new),
        metadata_document_url: (!WITHOUT_METADATA_URL.contains(&scenario)).then(|| CLIENT_METADATA_URL.to_owned()),
    };
    config.grant = if let Some(id_token) = text("idp_id_token") {
        let endpoint = text("idp_token_endpoint").ok_or("the context lacks idp_token_endpoint")?;
        Grant::CrossApp(CrossAppConfig {
            idp_token_endpoint: Url::parse(&endpoint).map_err(|e| format!("idp_token_endpoint: {e}"))?,
            idp_client_id: text("idp_client_id").ok_or("the context lacks idp_client_id")?,
            idp_client_secret: text("idp_client_secret"),
            id_token,
        })
    } else if let Some(pem) = text("private_key_pem") {
        let key = Es256Key::from_pkcs8_pem(&pem).map_err(|e| format!("private_key_pem: {e}"))?;
        Grant::ClientCredentials { private_key: Some(Arc::new(key)) }
    } else if scenario.starts_with("auth/client-credentials") {
        Grant::ClientCredentials { private_key: None }
    } else {
        Grant::AuthorizationCode { user_agent: Some(Arc::new(FollowRedirects::default())) }
    };
    OAuthAuthorizer::new(config).map_err(|e| e.to_string())
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
    let mut config = HttpConfig::new(url.clone());
    config.auth = Some(Arc::new(authorizer(&url, scenario)?));
    let transport = HttpTransport::new(config).map_err(|e| e.to_string())?;
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
