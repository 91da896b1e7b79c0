//! Resources and prompts against the fixture server's `content` mode (which declares only
//! `resources` and `prompts`), and the capability gate: nothing is asked of a server that did not
//! declare it.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcp_client::{
    Client, ClientError, ClientOptions, ConnectOptions, DEFAULT_MAX_RESOURCE_BYTES, ListLimits, ServerSpec,
    ServerState, connect,
};
use mcp_protocol::{CompleteReference, CompleteResult, ContentBlock, ErrorObject, ProtocolVersion};
use mcp_transport::{StdioConfig, StdioTransport};
use serde_json::json;

fn fixture() -> String {
    mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string()
}

/// A log file for the fixture's `--log` (every line it received), fresh for this test and
/// removed after it.
fn log_file(test: &str) -> tempfile::TempPath {
    let file = tempfile::Builder::new().prefix(&format!("mcp-client-content-{test}-")).suffix(".log").tempfile();
    file.unwrap().into_temp_path()
}

fn received(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

async fn client(args: &[&str]) -> Client {
    let config = StdioConfig::new(fixture(), args.iter().copied());
    let transport = StdioTransport::spawn(config).expect("spawn fixture");
    Client::connect(transport, ClientOptions::default()).await.expect("handshake with fixture")
}

fn server_error(err: &ClientError) -> &ErrorObject {
    match err {
        ClientError::Server { error, .. } => error,
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_server_without_the_tools_capability_is_connected_with_no_tools() {
    let log = log_file("connect");
    let log_arg = log.display().to_string();
    let mut spec = ServerSpec::new("docs", Arc::new(StdioConfig::new(fixture(), ["content", "--log", &log_arg])));
    spec.startup_timeout = Duration::from_secs(20);
    let c = connect(spec, &ConnectOptions::default()).await;
    assert_eq!(c.state().label(), "connected", "{}", c.state());
    assert!(matches!(c.state(), ServerState::Connected { tools: 0, .. }), "{:?}", c.state());
    assert!(c.tools().is_empty());
    let declared = c.client().unwrap().server_capabilities().unwrap();
    assert!(declared.tools.is_none() && declared.resources.is_some() && declared.prompts.is_some());
    c.close().await;
    let lines = received(&log);
    assert!(lines.contains("\"initialize\""), "{lines}");
    assert!(!lines.contains("tools/list"), "tools/list was sent to a server without tools: {lines}");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn lists_follow_the_declared_capabilities() {
    // A tools-only server: resources and prompts lists are empty without asking; a read or a
    // get is refused before it is sent.
    let log = log_file("gate");
    let log_arg = log.display().to_string();
    let c = client(&["echo", "--log", &log_arg]).await;
    assert!(c.list_all_resources(ListLimits::default()).await.unwrap().is_empty());
    assert!(c.list_all_resource_templates(ListLimits::default()).await.unwrap().is_empty());
    assert!(c.list_all_prompts(ListLimits::default()).await.unwrap().is_empty());
    let err = c.read_resource("fixture://readme", DEFAULT_MAX_RESOURCE_BYTES).await.unwrap_err();
    assert!(matches!(err, ClientError::NotOffered { capability: "resources", .. }), "{err:?}");
    assert!(err.to_string().contains("does not offer resources"), "{err}");
    let err = c.get_prompt("greet", None).await.unwrap_err();
    assert!(matches!(err, ClientError::NotOffered { capability: "prompts", .. }), "{err:?}");
    assert!(!c.list_all_tools(ListLimits::default()).await.unwrap().is_empty());
    c.close().await.unwrap();
    let lines = received(&log);
    for method in ["resources/", "prompts/"] {
        assert!(!lines.contains(method), "{method} was sent to a server without it: {lines}");
    }
    assert!(lines.contains("tools/list"), "{lines}");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn resources_and_templates_are_listed_across_pages_within_limits() {
    let c = client(&["content", "--page-size", "1"]).await;
    let resources = c.list_all_resources(ListLimits::default()).await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["fixture://readme", "fixture://logo.png", "fixture://hostile", "fixture://big"]);
    assert_eq!(resources[0].title.as_deref(), Some("Read me"));
    assert_eq!(resources[1].mime_type.as_deref(), Some("image/png"));
    let templates = c.list_all_resource_templates(ListLimits::default()).await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "fixture://notes/{name}");
    // Capped like tools, and the error names the method.
    let err =
        c.list_all_resources(ListLimits { max_pages: 2, max_items: 100, ..ListLimits::default() }).await.unwrap_err();
    assert!(matches!(err, ClientError::TooManyPages { method: "resources/list", limit: 2 }), "{err:?}");
    assert!(err.to_string().starts_with("resources/list returned more than 2 pages"), "{err}");
    let err =
        c.list_all_resources(ListLimits { max_pages: 100, max_items: 3, ..ListLimits::default() }).await.unwrap_err();
    assert!(matches!(err, ClientError::TooManyItems { method: "resources/list", limit: 3 }), "{err:?}");
    // And in bytes across the pages (what the values of a listing hold is several times that).
    let err = c.list_all_resources(ListLimits { max_bytes: 300, ..ListLimits::default() }).await.unwrap_err();
    assert!(matches!(err, ClientError::ListTooLarge { method: "resources/list", limit: 300 }), "{err:?}");
    c.close().await.unwrap();
}

#[tokio::test]
async fn resources_are_read_as_text_and_blobs_within_a_size_cap() {
    let c = client(&["content"]).await;
    let text = c.read_resource("fixture://readme", DEFAULT_MAX_RESOURCE_BYTES).await.unwrap();
    assert_eq!(text.contents.len(), 1);
    assert_eq!(text.contents[0].text.as_deref(), Some("Fixture readme.\nSecond line.\n"));
    assert_eq!(text.contents[0].blob, None);
    let blob = c.read_resource("fixture://logo.png", DEFAULT_MAX_RESOURCE_BYTES).await.unwrap();
    assert_eq!(blob.contents[0].blob.as_deref(), Some("iVBORw0KGgo="));
    assert_eq!(blob.contents[0].mime_type.as_deref(), Some("image/png"));
    let note = c.read_resource("fixture://notes/today", DEFAULT_MAX_RESOURCE_BYTES).await.unwrap();
    assert_eq!(note.contents[0].text.as_deref(), Some("Note today."));
    // 1 MiB of text against a 64 KiB cap: dropped, saying how large it was.
    let err = c.read_resource("fixture://big", 64 * 1024).await.unwrap_err();
    match &err {
        ClientError::TooLarge { method: "resources/read", size, limit: 65_536 } => assert!(*size > 1024 * 1024),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("more than the limit of 65536"), "{err}");
    // The connection is still good after a dropped answer.
    assert!(c.read_resource("fixture://big", DEFAULT_MAX_RESOURCE_BYTES).await.unwrap().contents[0].text.is_some());
    let err = c.read_resource("fixture://nope", DEFAULT_MAX_RESOURCE_BYTES).await.unwrap_err();
    assert_eq!(server_error(&err).code, -32002);
    c.close().await.unwrap();
}

#[tokio::test]
async fn prompts_are_listed_and_got_with_arguments() {
    let c = client(&["content", "--page-size", "2"]).await;
    let prompts = c.list_all_prompts(ListLimits::default()).await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["greet", "review", "hostile"]);
    let greet_args = prompts[0].arguments.as_ref().unwrap();
    assert_eq!(greet_args[0].name, "name");
    assert_eq!(greet_args[0].required, Some(true));

    let arguments = json!({"name": "Ada", "style": "formal"}).as_object().cloned();
    let got = c.get_prompt("greet", arguments).await.unwrap();
    assert_eq!(got.messages.len(), 1);
    assert_eq!(got.messages[0].role, "user");
    match &got.messages[0].content {
        ContentBlock::Text { text, .. } => assert_eq!(text, "Greet Ada, formal."),
        other => panic!("{other:?}"),
    }
    let got = c.get_prompt("review", json!({"code": "fn f() {}"}).as_object().cloned()).await.unwrap();
    let roles: Vec<&str> = got.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant"]);
    // A missing required argument is the server's error, passed on.
    let err = c.get_prompt("greet", None).await.unwrap_err();
    assert_eq!(server_error(&err).code, -32602);
    assert!(server_error(&err).message.contains("\"name\""), "{err}");
    c.close().await.unwrap();
}

async fn client_of(version: ProtocolVersion, args: &[&str]) -> Client {
    let config = StdioConfig::new(fixture(), args.iter().copied());
    let transport = StdioTransport::spawn(config).expect("spawn fixture");
    let options = ClientOptions { offered_version: version, ..ClientOptions::default() };
    Client::connect(transport, options).await.expect("handshake with fixture")
}

fn values(result: &CompleteResult) -> Vec<&str> {
    result.completion.values.iter().map(String::as_str).collect()
}

#[tokio::test]
async fn arguments_are_completed_where_the_server_offers_it() {
    let greet = || CompleteReference::prompt("greet");
    let log = log_file("complete");
    let log_arg = log.display().to_string();
    let c = client(&["content", "--log", &log_arg]).await;
    assert!(c.server_capabilities().unwrap().completions.is_some());
    assert_eq!(values(&c.complete(greet(), "name", "a", None).await.unwrap()), ["Ada", "Alan"]);
    assert_eq!(values(&c.complete(greet(), "style", "", None).await.unwrap()), ["casual", "formal"]);
    // The arguments already given go as the context (2025-06-18 on), and narrow the answer.
    let formal = json!({"style": "formal"}).as_object().cloned();
    let titled = c.complete(greet(), "name", "", formal.clone()).await.unwrap();
    assert_eq!(values(&titled), ["Dr. Ada Lovelace", "Dr. Alan Turing"]);
    let template = CompleteReference::resource("fixture://notes/{name}");
    assert_eq!(values(&c.complete(template, "name", "T", None).await.unwrap()), ["todo"]);
    c.close().await.unwrap();
    let lines = received(&log);
    assert!(lines.contains(r#""ref":{"type":"ref/prompt","name":"greet"}"#), "{lines}");
    assert!(lines.contains(r#""context":{"arguments":{"style":"formal"}}"#), "{lines}");

    // 2024-11-05 has neither the capability nor the context: the request is sent without it.
    let log = log_file("complete-2024");
    let log_arg = log.display().to_string();
    let old = client_of(ProtocolVersion::V2024_11_05, &["content", "--log", &log_arg]).await;
    assert_eq!(old.protocol_version(), Some(ProtocolVersion::V2024_11_05));
    assert_eq!(values(&old.complete(greet(), "name", "", formal).await.unwrap()), ["Ada", "Alan", "Grace"]);
    old.close().await.unwrap();
    assert!(!received(&log).contains("context"), "{}", received(&log));

    // A server that does not declare `completions` is not asked; one of 2024-11-05 is, and
    // its answer decides.
    let log = log_file("complete-none");
    let log_arg = log.display().to_string();
    let tools_only = client(&["echo", "--log", &log_arg]).await;
    let err = tools_only.complete(greet(), "name", "", None).await.unwrap_err();
    assert!(matches!(err, ClientError::NotOffered { capability: "completions", .. }), "{err:?}");
    tools_only.close().await.unwrap();
    assert!(!received(&log).contains("completion/complete"), "{}", received(&log));
    let old_tools = client_of(ProtocolVersion::V2024_11_05, &["echo"]).await;
    let err = old_tools.complete(greet(), "name", "", None).await.unwrap_err();
    assert_eq!(server_error(&err).code, -32601, "{err:?}");
    old_tools.close().await.unwrap();
    let _ = std::fs::remove_file(&log);
}
