//! rmcp, the official Rust SDK, as a real client of `mcp-harness serve` over stdio and
//! Streamable HTTP: it initializes, lists the governed pool, calls an allowed tool, answers the
//! approval form of a `confirm` tool through its elicitation handler, is refused a denied one as
//! an unknown tool, and hears `notifications/tools/list_changed` (and lists the
//! new pool) when a server is added to the configuration file while it is connected, and again
//! when it is removed. rmcp is a dev-dependency of this crate only; the project implements MCP
//! itself.
//!
//! Needs `cargo build -p mcp-fixtures` first (the fixture is another package's binary).

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorCode, FormElicitationCapability, Implementation,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::json;
use tokio::sync::watch;

#[allow(unreachable_pub, dead_code)]
mod serve_setup;
use serve_setup::{Setup, setup};

/// How long a change of the configuration may take to reach the client.
const CHANGE: Duration = Duration::from_secs(20);

/// rmcp's client handler: counts the `tools/list_changed` notifications it hears, and answers
/// every approval form "yes", keeping its message.
#[derive(Clone)]
struct Counting(watch::Sender<u32>, Arc<Mutex<Vec<String>>>);

impl Counting {
    fn new(changes: watch::Sender<u32>) -> Self {
        Self(changes, Arc::default())
    }
}

impl ClientHandler for Counting {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.send_modify(|n| *n += 1);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.1.lock().unwrap().push(message);
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "yes"})))
    }

    fn get_info(&self) -> ClientConfig {
        // rmcp's capability builders are behind its server features; the fields are public.
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        ClientConfig::new(capabilities, Implementation::new("serve-rmcp-test", "1"))
    }
}

type Client = RunningService<RoleClient, Counting>;

async fn tool_names(client: &Client) -> Vec<String> {
    let tools = tokio::time::timeout(CHANGE, client.list_all_tools()).await.expect("tools/list timed out");
    tools.unwrap().into_iter().map(|t| t.name.into_owned()).collect()
}

/// What rmcp must see through the gateway, start to end.
async fn governed(setup: &Setup, client: Client, mut changed: watch::Receiver<u32>, how: &str) {
    let info = client.peer_info().unwrap_or_else(|| panic!("{how}: no server info"));
    assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("mcp-harness"), "{how}");
    // rmcp's `initialize` offers the newest revision that still has a handshake.
    assert_eq!(info.protocol_version.to_string(), "2025-11-25", "{how}");
    assert!(info.capabilities.tools.as_ref().is_some_and(|t| t.list_changed == Some(true)), "{how}: {info:?}");

    let tools = tool_names(&client).await;
    for expected in ["fx__echo", "fx__add", "two__echo"] {
        assert!(tools.iter().any(|t| t == expected), "{how}: {expected} missing from {tools:?}");
    }
    assert!(!tools.iter().any(|t| t == "two__crash"), "{how}: a denied tool is listed: {tools:?}");

    let arguments = json!({"text": "from rmcp"}).as_object().cloned().unwrap();
    let echoed = client.call_tool(CallToolRequestParams::new("fx__echo").with_arguments(arguments)).await.unwrap();
    assert_ne!(echoed.is_error, Some(true), "{how}: {echoed:?}");
    let text: String = echoed.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
    assert_eq!(text, "from rmcp", "{how}: {echoed:?}");

    // `confirm`: the gateway asks through rmcp's elicitation handler, which says yes.
    let arguments = json!({"a": 2, "b": 3}).as_object().cloned().unwrap();
    let added = client.call_tool(CallToolRequestParams::new("fx__add").with_arguments(arguments)).await.unwrap();
    assert_ne!(added.is_error, Some(true), "{how}: {added:?}");
    let forms = client.service().1.lock().unwrap().clone();
    assert_eq!(forms.len(), 1, "{how}: one approval form: {forms:?}");
    assert!(forms[0].contains("fx__add"), "{how}: the form names the tool: {forms:?}");

    // Denied by the host's policy: answered exactly as a tool that does not exist.
    for name in ["two__crash", "two__no_such_tool"] {
        match client.call_tool(CallToolRequestParams::new(name)).await {
            Err(ServiceError::McpError(error)) => {
                assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{how}: {name}: {error:?}");
                assert_eq!(error.message, format!("Unknown tool: {name}"), "{how}: {name}");
            }
            other => panic!("{how}: {name} was not refused as unknown: {other:?}"),
        }
    }

    // A server added to the configuration while connected, then removed.
    let (next, prev) = setup.changes();
    let before = *changed.borrow_and_update();
    std::fs::rename(&next, &setup.config).unwrap();
    let added = until_listing(&client, &mut changed, before, |names| names.iter().any(|n| n == "more__echo")).await;
    assert!(added.iter().any(|n| n == "fx__echo"), "{how}: {added:?}");
    let before = *changed.borrow_and_update();
    std::fs::rename(&prev, &setup.config).unwrap();
    let removed =
        until_listing(&client, &mut changed, before, |names| !names.iter().any(|n| n.starts_with("more__"))).await;
    assert!(removed.iter().any(|n| n == "two__echo"), "{how}: {removed:?}");

    let _ = client.cancel().await;
}

/// Waits for a `list_changed` after `before`, then lists until `wanted` holds (the pool is
/// published once the added server is up); the listing.
async fn until_listing(
    client: &Client,
    changed: &mut watch::Receiver<u32>,
    before: u32,
    wanted: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let heard = tokio::time::timeout(CHANGE, changed.wait_for(|n| *n > before)).await;
    assert!(heard.is_ok_and(|r| r.is_ok()), "no notifications/tools/list_changed within {CHANGE:?}");
    let deadline = tokio::time::Instant::now() + CHANGE;
    loop {
        let names = tool_names(client).await;
        if wanted(&names) {
            return names;
        }
        assert!(tokio::time::Instant::now() < deadline, "the listing never changed: {names:?}");
        // A listing after the notification is sent fresh, never from rmcp's cache; wait for
        // the next notification rather than polling a cache.
        let _ = tokio::time::timeout(Duration::from_millis(500), changed.changed()).await;
    }
}

#[tokio::test]
async fn rmcp_over_stdio_lists_calls_is_refused_a_denied_tool_and_hears_of_added_and_removed_servers() {
    let setup = setup();
    let args = setup.serve_args(&[]);
    let mut serve = tokio::process::Command::new(&args[0]);
    serve
        .args(&args[1..])
        .current_dir(setup.work.path())
        .env_remove("MCP_HARNESS_CONFIG")
        .env("RUST_LOG", "error")
        .env("MCP_HARNESS_DATA_DIR", setup.data.path());
    let transport = TokioChildProcess::new(serve).unwrap();
    let (tx, rx) = watch::channel(0);
    let client = tokio::time::timeout(CHANGE, Counting::new(tx).serve(transport)).await.expect("initialize timed out");
    governed(&setup, client.unwrap(), rx, "stdio").await;
}

#[tokio::test]
async fn rmcp_over_streamable_http_lists_calls_is_refused_a_denied_tool_and_hears_of_added_and_removed_servers() {
    let setup = setup();
    let (_serve, url) = setup.serve_http();
    let transport = StreamableHttpClientTransport::from_uri(url);
    let (tx, rx) = watch::channel(0);
    let client = tokio::time::timeout(CHANGE, Counting::new(tx).serve(transport)).await.expect("initialize timed out");
    governed(&setup, client.unwrap(), rx, "HTTP").await;
}
