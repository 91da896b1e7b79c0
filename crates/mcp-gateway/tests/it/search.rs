//! Budgets and tool search for downstream clients over the HTTP front: `search_tools` and the
//! always-loaded tools listed, a search selecting tools for the client that made it alone
//! (announced to it with `list_changed`), calls to tools a client was not shown refused as the
//! agent refuses them, denied tools never found.

use std::net::SocketAddr;
use std::sync::Arc;

use mcp_gateway::fake::FakeBackend;
use mcp_gateway::{BackendEvent, ExposureSettings, Gateway, GatewayOptions, HttpOptions, HttpServer};
use policy::{Decision, PolicyConfig, RuleConfig};
use serde_json::{Value, json};
use tool_pool::{ExposureOptions, SearchMode, ServerExposure};

use crate::http::next_event;
use crate::*;

const V: &str = "2025-11-25";

/// `files` (`read_file`, `write_file`, `rm` denied) and `calendar` (`create_event`) wait behind
/// search; `echo` (`echo`) is always loaded.
async fn start_search(options: ExposureOptions) -> (SocketAddr, Arc<FakeBackend>) {
    let policy = PolicyConfig {
        default: Decision::Allow,
        rules: vec![RuleConfig::new("files", "rm", Decision::Deny)],
        ..PolicyConfig::default()
    };
    let backend = Arc::new(
        FakeBackend::builder()
            .tool("files", "read_file")
            .tool("files", "write_file")
            .tool("files", "rm")
            .tool("calendar", "create_event")
            .tool("echo", "echo")
            .policy(policy)
            .exposure(ExposureSettings::new(options))
            .build(),
    );
    let gateway =
        Gateway::new(Arc::clone(&backend) as Arc<dyn mcp_gateway::Backend>, GatewayOptions::default()).unwrap();
    let server = HttpServer::bind(gateway, HttpOptions::default()).await.unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.run(std::future::pending()));
    (addr, backend)
}

fn search_on() -> ExposureOptions {
    let mut options = ExposureOptions { tool_search: SearchMode::On, ..ExposureOptions::default() };
    options.servers.insert("echo".to_owned(), ServerExposure { always_load: true, ..ServerExposure::default() });
    options
}

/// A session with its GET stream open.
async fn session_with_stream(addr: SocketAddr) -> (String, hyper::body::Incoming) {
    let session = initialize(addr, V, json!({})).await;
    let headers = [("accept", "text/event-stream"), ("mcp-session-id", session.as_str()), ("mcp-protocol-version", V)];
    let stream = send(addr, "GET", &headers, "").await;
    assert_eq!(stream.status(), 200);
    (session, stream.into_body())
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

async fn list(addr: SocketAddr, session: &str) -> Vec<String> {
    names(&post_session(addr, session, V, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await.json())
}

async fn call(addr: SocketAddr, session: &str, name: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}});
    post_session(addr, session, V, &body).await.json()
}

#[tokio::test]
async fn a_search_selects_tools_for_the_session_that_made_it_alone() {
    let (addr, backend) = start_search(search_on()).await;
    let (one, mut one_stream) = session_with_stream(addr).await;
    let (two, mut two_stream) = session_with_stream(addr).await;

    // Only the always-loaded tools and the search tool are listed.
    assert_eq!(list(addr, &one).await, ["echo__echo", "search_tools"]);
    assert_eq!(call(addr, &one, "echo__echo", json!({"x": 1})).await["result"]["isError"], Value::Null);

    // A tool waiting behind search is refused with what to do, as the agent's loop does.
    let refused = call(addr, &one, "calendar__create_event", json!({})).await;
    assert_eq!(refused["result"]["isError"], true);
    let text = text_of(&refused["result"]);
    assert!(text.contains("not loaded yet") && text.contains("search_tools"), "{text}");
    assert!(backend.calls().iter().all(|c| c.tool != "create_event"), "nothing was called");

    // A search selects what it finds for this session, which is told its list changed.
    let found = call(addr, &one, "search_tools", json!({"query": "create event calendar"})).await;
    let text = text_of(&found["result"]);
    assert!(text.contains("calendar__create_event"), "{text}");
    assert_eq!(next_event(&mut one_stream).await["method"], "notifications/tools/list_changed");
    assert_eq!(list(addr, &one).await, ["calendar__create_event", "echo__echo", "search_tools"]);
    let called = call(addr, &one, "calendar__create_event", json!({"title": "standup"})).await;
    assert_eq!(called["result"]["isError"], Value::Null, "{called}");
    assert!(text_of(&called["result"]).contains("standup"));

    // The other session neither lists nor may call it, and was told nothing: the next thing
    // on its stream is the change that comes after.
    assert_eq!(list(addr, &two).await, ["echo__echo", "search_tools"]);
    let refused = call(addr, &two, "calendar__create_event", json!({})).await;
    assert!(text_of(&refused["result"]).contains("not loaded yet"));
    backend.emit(BackendEvent::PromptsChanged);
    assert_eq!(next_event(&mut two_stream).await["method"], "notifications/prompts/list_changed");

    // `select:` loads exact names; a name already selected changes nothing.
    let selected = call(addr, &two, "search_tools", json!({"query": "select:files__read_file"})).await;
    assert!(text_of(&selected["result"]).contains("files__read_file"));
    assert_eq!(list(addr, &two).await, ["echo__echo", "files__read_file", "search_tools"]);
}

#[tokio::test]
async fn a_denied_tool_is_never_found_nor_callable() {
    let (addr, _backend) = start_search(search_on()).await;
    let session = initialize(addr, V, json!({})).await;
    let found = call(addr, &session, "search_tools", json!({"query": "select:files__rm"})).await;
    let text = text_of(&found["result"]);
    assert!(text.contains("Not found") && text.contains("files__rm"), "{text}");
    let found = call(addr, &session, "search_tools", json!({"query": "rm files remove"})).await;
    assert!(!text_of(&found["result"]).contains("files__rm"), "{found}");
    let found = call(addr, &session, "search_tools", json!({"query": "files", "limit": 25})).await;
    let text = text_of(&found["result"]);
    assert!(text.contains("files__read_file") && !text.contains("files__rm"), "{text}");
    assert!(!list(addr, &session).await.contains(&"files__rm".to_owned()));
    let called = call(addr, &session, "files__rm", json!({})).await;
    assert_eq!(called["error"]["message"], "Unknown tool: files__rm", "{called}");
}

#[tokio::test]
async fn without_search_every_tool_is_listed_and_search_tools_is_unknown() {
    let options = ExposureOptions { tool_search: SearchMode::Off, ..ExposureOptions::default() };
    let (addr, _backend) = start_search(options).await;
    let session = initialize(addr, V, json!({})).await;
    assert_eq!(
        list(addr, &session).await,
        ["calendar__create_event", "echo__echo", "files__read_file", "files__write_file"]
    );
    let called = call(addr, &session, "search_tools", json!({"query": "x"})).await;
    assert_eq!(called["error"]["message"], "Unknown tool: search_tools", "{called}");
}

#[tokio::test]
async fn a_listing_stays_within_the_pool_budget_and_the_rest_waits_behind_search() {
    // Room for about two tools: the others are deferred (searchable) past the budget.
    let options = ExposureOptions { pool_budget: 200, ..ExposureOptions::default() };
    let (addr, _backend) = start_search(options).await;
    let session = initialize(addr, V, json!({})).await;
    let listed = post_session(addr, &session, V, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    let tools = listed.json()["result"]["tools"].as_array().unwrap().clone();
    let mcp: Vec<&Value> = tools.iter().filter(|t| t["name"] != "search_tools").collect();
    let bytes: usize = mcp
        .iter()
        .map(|t| {
            t["name"].as_str().unwrap().len()
                + t["description"].as_str().unwrap().len()
                + t["inputSchema"].to_string().len()
        })
        .sum();
    assert!(!mcp.is_empty() && mcp.len() < 4 && bytes <= 200, "{bytes} bytes: {tools:?}");
    assert_eq!(tools.last().unwrap()["name"], "search_tools");
    // What did not fit is reachable through search.
    let deferred = ["calendar__create_event", "echo__echo", "files__read_file", "files__write_file"]
        .into_iter()
        .find(|n| !mcp.iter().any(|t| t["name"] == *n))
        .unwrap();
    let found = call(addr, &session, "search_tools", json!({"query": format!("select:{deferred}")})).await;
    assert!(text_of(&found["result"]).contains(deferred), "{found}");

    // With search off, what does not fit is hidden, and a call to it says why.
    let options = ExposureOptions { pool_budget: 200, tool_search: SearchMode::Off, ..ExposureOptions::default() };
    let (addr, _backend) = start_search(options).await;
    let session = initialize(addr, V, json!({})).await;
    let listed = list(addr, &session).await;
    assert!(!listed.contains(&"search_tools".to_owned()) && listed.len() < 4, "{listed:?}");
    let hidden = ["calendar__create_event", "echo__echo", "files__read_file", "files__write_file"]
        .into_iter()
        .find(|n| !listed.iter().any(|l| l == n))
        .unwrap();
    let refused = call(addr, &session, hidden, json!({})).await;
    let text = text_of(&refused["result"]);
    assert!(text.contains("is not offered to you") && text.contains("pool budget"), "{text}");
}

/// A 2026-07-28 request from the client named `client`.
async fn stateless(addr: SocketAddr, client: &str, method: &str, params: Value) -> Value {
    let mut params = params;
    let mut meta = envelope(json!({}));
    meta["io.modelcontextprotocol/clientInfo"]["name"] = json!(client);
    params["_meta"] = meta;
    let name = params.get("name").and_then(Value::as_str).map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", STATELESS),
        ("mcp-method", method),
    ];
    if let Some(name) = &name {
        headers.push(("mcp-name", name.as_str()));
    }
    exchange(addr, "POST", &headers, &body.to_string()).await.json()
}

#[tokio::test]
async fn a_stateless_clients_selection_is_its_own() {
    let (addr, _backend) = start_search(search_on()).await;
    let listed = stateless(addr, "alpha", "tools/list", json!({})).await;
    assert_eq!(names(&listed), ["echo__echo", "search_tools"]);
    let search = json!({"name": "search_tools", "arguments": {"query": "select:files__write_file"}});
    let found = stateless(addr, "alpha", "tools/call", search).await;
    assert!(text_of(&found["result"]).contains("files__write_file"), "{found}");
    let listed = stateless(addr, "alpha", "tools/list", json!({})).await;
    assert_eq!(names(&listed), ["echo__echo", "files__write_file", "search_tools"]);
    let call = json!({"name": "files__write_file", "arguments": {"path": "p"}});
    let called = stateless(addr, "alpha", "tools/call", call.clone()).await;
    assert_eq!(called["result"]["isError"], Value::Null, "{called}");
    // Another client (another name) has its own selection.
    assert_eq!(names(&stateless(addr, "beta", "tools/list", json!({})).await), ["echo__echo", "search_tools"]);
    let refused = stateless(addr, "beta", "tools/call", call).await;
    assert!(text_of(&refused["result"]).contains("not loaded yet"), "{refused}");
}
