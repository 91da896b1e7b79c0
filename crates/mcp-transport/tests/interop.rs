//! Interoperability with real third-party MCP servers over stdio.
//!
//! Run by `cargo xtask test` (feature `interop`), which installs the pinned peers from npm and
//! PyPI into a cache and points `MCP_PEERS_DIR` at it. Every peer runs confined, in the
//! `standard` sandbox plus read access to the peers' cache and write access to the test's own
//! directories (as a user would list them).
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use mcp_client::elicitation::Form;
use mcp_client::{
    Client, ClientError, ClientOptions, DEFAULT_MAX_RESOURCE_BYTES, DecliningHandler, ListLimits, RequestOptions,
    ServerRequestHandler,
};
use mcp_protocol::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitAction, ElicitRequestParams,
    ElicitResult, ListRootsResult, Root, RootsCapability, ServerNotification,
};
use mcp_protocol::{CompleteReference, ContentBlock, ErrorObject};
use mcp_sandbox::Sandbox;
use mcp_sandbox::launcher::Launcher;
use mcp_transport::{StdioConfig, StdioSandbox, StdioTransport};
use serde_json::json;

/// Each common start form, confined under `standard` with no entry, from a project folder and
/// from a fresh user's home directory.
#[path = "interop/start_forms.rs"]
mod start_forms;

fn peers_dir() -> PathBuf {
    match std::env::var_os("MCP_PEERS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "MCP_PEERS_DIR is not set: the interop suite needs the third-party servers that \
             `cargo xtask test` (or `cargo xtask peers`) installs; run it through xtask"
        ),
    }
}

/// `config` in the standard sandbox, reading the peers and writing `write`.
fn confined(mut config: StdioConfig, write: &[&Path], protect: &[&Path]) -> StdioConfig {
    let launcher = mcp_fixtures::launcher_binary().unwrap_or_else(|e| panic!("{e}"));
    let sandbox = Sandbox {
        read: vec![peers_dir()],
        write: write.iter().map(|p| p.to_path_buf()).collect(),
        protect: protect.iter().map(|p| p.to_path_buf()).collect(),
        ..Sandbox::standard()
    };
    config.sandbox = Some(Box::new(StdioSandbox { sandbox, launcher: Launcher::new(launcher, Vec::<String>::new()) }));
    config
}

fn node_server(package: &str, args: &[&str]) -> StdioConfig {
    let script = peers_dir().join("node/node_modules/@modelcontextprotocol").join(package).join("dist/index.js");
    assert!(script.is_file(), "{} is missing; run `cargo xtask peers`", script.display());
    let mut all = vec![script.to_string_lossy().into_owned()];
    all.extend(args.iter().map(|s| (*s).to_owned()));
    let mut config = StdioConfig::new("node", all);
    config.label = package.to_owned();
    confined(config, &[], &[])
}

fn python_server(program: &str, args: &[&str]) -> StdioConfig {
    let bin = peers_dir().join("py/bin").join(program);
    assert!(bin.is_file(), "{} is missing; run `cargo xtask peers`", bin.display());
    let mut config = StdioConfig::new(bin.to_string_lossy().into_owned(), args.iter().copied());
    config.label = program.to_owned();
    confined(config, &[], &[])
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-harness-interop-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn connect(config: StdioConfig, options: ClientOptions) -> Client {
    let label = config.label.clone();
    let transport = StdioTransport::spawn(config).unwrap();
    match Client::connect(transport, options).await {
        Ok(client) => client,
        Err(e) => panic!("{label}: handshake failed: {e}"),
    }
}

fn args(v: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    v.as_object().cloned()
}

/// Handshake, list every tool, check the named ones exist; returns the client.
async fn handshake_and_list(config: StdioConfig, expected: &[&str]) -> Client {
    let label = config.label.clone();
    let client = connect(config, ClientOptions::default()).await;
    let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for name in expected {
        assert!(names.contains(name), "{label}: {name} not among {names:?}");
    }
    eprintln!("{label}: {} tools, protocol {}", tools.len(), client.protocol_version().unwrap());
    client
}

#[tokio::test]
async fn everything_echo() {
    let client = handshake_and_list(node_server("server-everything", &["stdio"]), &["echo", "get-sum"]).await;
    let r = client.call_tool("echo", args(json!({"message": "interop"})), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "Echo: interop");
    let r = client.call_tool("get-sum", args(json!({"a": 2, "b": 3})), RequestOptions::default()).await.unwrap();
    assert!(r.joined_text().contains('5'), "{}", r.joined_text());
    let r = client
        .call_tool("get-structured-content", args(json!({"location": "New York"})), RequestOptions::default())
        .await
        .unwrap();
    assert!(r.structured_content.is_some(), "structuredContent decoded: {r:?}");
    let r = client.call_tool("get-tiny-image", None, RequestOptions::default()).await.unwrap();
    assert!(r.content.iter().any(|c| matches!(c, mcp_protocol::ContentBlock::Image { .. })), "{r:?}");
    client.close().await.unwrap();
}

/// Resources (every page), templates, a text and a blob read, prompts, a prompt with
/// arguments and one with an embedded resource, and argument completion with its context.
#[tokio::test]
async fn everything_resources_templates_prompts_and_completion() {
    let client = connect(node_server("server-everything", &["stdio"]), ClientOptions::default()).await;
    let declared = client.server_capabilities().unwrap();
    assert!(declared.resources.is_some() && declared.prompts.is_some() && declared.completions.is_some());

    let resources = client.list_all_resources(ListLimits::default()).await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    let doc = "demo://resource/static/document/architecture.md";
    assert!(uris.contains(&doc), "{uris:?}");
    // The cap applies to a real server's list too (it has more than one resource).
    assert!(resources.len() > 1, "{uris:?}");
    let err = client
        .list_all_resources(ListLimits { max_pages: 100, max_items: 1, ..ListLimits::default() })
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::TooManyItems { method: "resources/list", limit: 1 }), "{err:?}");
    let templates = client.list_all_resource_templates(ListLimits::default()).await.unwrap();
    let patterns: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    for pattern in ["demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"] {
        assert!(patterns.contains(&pattern), "{patterns:?}");
    }

    let text = client.read_resource(doc, DEFAULT_MAX_RESOURCE_BYTES).await.unwrap();
    assert_eq!(text.contents[0].mime_type.as_deref(), Some("text/markdown"));
    assert!(text.contents[0].text.as_deref().is_some_and(|t| !t.is_empty()), "{text:?}");
    let blob = client.read_resource("demo://resource/dynamic/blob/7", DEFAULT_MAX_RESOURCE_BYTES).await.unwrap();
    let data = blob.contents[0].blob.as_deref().expect("a blob");
    // Base64 of "Resource 7: This is a base64 blob" (33 bytes: whole 3-byte groups, so a stable
    // prefix of the encoding whatever timestamp follows).
    assert!(data.starts_with("UmVzb3VyY2UgNzogVGhpcyBpcyBhIGJhc2U2NCBibG9i"), "{data}");
    let err = client.read_resource("demo://resource/dynamic/text/x", DEFAULT_MAX_RESOURCE_BYTES).await.unwrap_err();
    assert!(matches!(err, ClientError::Server { .. }), "an unknown resource is the server's error: {err:?}");

    let prompts = client.list_all_prompts(ListLimits::default()).await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    for name in ["simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"] {
        assert!(names.contains(&name), "{names:?}");
    }
    let args_prompt = prompts.iter().find(|p| p.name == "args-prompt").unwrap();
    let required: Vec<(&str, bool)> =
        args_prompt.arguments.iter().flatten().map(|a| (a.name.as_str(), a.required == Some(true))).collect();
    assert_eq!(required, [("city", true), ("state", false)]);
    let got = client.get_prompt("args-prompt", args(json!({"city": "Paris", "state": "Texas"}))).await.unwrap();
    assert_eq!(got.messages.len(), 1);
    assert_eq!(got.messages[0].role, "user");
    assert!(
        matches!(&got.messages[0].content, ContentBlock::Text { text, .. } if text == "What's weather in Paris, Texas?"),
        "{got:?}"
    );
    let got =
        client.get_prompt("resource-prompt", args(json!({"resourceType": "Text", "resourceId": "3"}))).await.unwrap();
    assert!(
        matches!(&got.messages[1].content, ContentBlock::Resource { resource, .. }
            if resource.uri == "demo://resource/dynamic/text/3"
                && resource.text.as_deref().is_some_and(|t| t.starts_with("Resource 3:"))),
        "an embedded resource: {got:?}"
    );
    let err = client.get_prompt("args-prompt", None).await.unwrap_err();
    assert!(matches!(err, ClientError::Server { .. }), "a missing required argument is refused: {err:?}");

    let team = || CompleteReference::prompt("completable-prompt");
    let departments = client.complete(team(), "department", "S", None).await.unwrap();
    assert_eq!(departments.completion.values, ["Sales", "Support"]);
    let context = args(json!({"department": "Sales"}));
    let names = client.complete(team(), "name", "", context).await.unwrap();
    assert_eq!(names.completion.values, ["David", "Eve", "Frank"], "the context narrows the answer");
    let template = CompleteReference::resource("demo://resource/dynamic/text/{resourceId}");
    let ids = client.complete(template, "resourceId", "12", None).await.unwrap();
    assert_eq!(ids.completion.values, ["12"]);
    client.close().await.unwrap();
}

#[tokio::test]
async fn everything_progress_and_timeout_cancel() {
    let client =
        handshake_and_list(node_server("server-everything", &["stdio"]), &["trigger-long-running-operation"]).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(mcp_client::PROGRESS_BACKLOG);
    let options = RequestOptions { timeout: None, progress: Some(tx), max_total: None };
    let r = client
        .call_tool("trigger-long-running-operation", args(json!({"duration": 1, "steps": 4})), options)
        .await
        .unwrap();
    assert!(!r.is_error(), "{r:?}");
    let mut progress = Vec::new();
    while let Ok(p) = rx.try_recv() {
        progress.push(p.progress);
    }
    assert!(progress.len() >= 3, "progress notifications reached the caller: {progress:?}");

    let options = RequestOptions { timeout: Some(Duration::from_millis(300)), progress: None, max_total: None };
    let err = client
        .call_tool("trigger-long-running-operation", args(json!({"duration": 5, "steps": 5})), options)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
    assert_eq!(client.pending_requests(), 0);
    let r = client.call_tool("echo", args(json!({"message": "after"})), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "Echo: after", "the connection survives a cancelled call");
    client.close().await.unwrap();
}

#[derive(Default)]
struct Counting {
    roots: AtomicUsize,
    sampling: AtomicUsize,
    elicitation: AtomicUsize,
}

#[async_trait]
impl ServerRequestHandler for Counting {
    async fn list_roots(&self) -> Result<ListRootsResult, ErrorObject> {
        self.roots.fetch_add(1, Ordering::SeqCst);
        Ok(ListRootsResult {
            roots: vec![Root {
                uri: "file:///tmp/interop-root".into(),
                name: Some("interop".into()),
                extra: Default::default(),
            }],
            extra: Default::default(),
        })
    }

    async fn create_message(&self, params: CreateMessageRequestParams) -> Result<CreateMessageResult, ErrorObject> {
        self.sampling.fetch_add(1, Ordering::SeqCst);
        DecliningHandler.create_message(params).await
    }

    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        self.elicitation.fetch_add(1, Ordering::SeqCst);
        DecliningHandler.elicit(params).await
    }
}

#[tokio::test]
async fn everything_server_requests_and_list_changed() {
    let handler = Arc::new(Counting::default());
    let options = ClientOptions {
        handler: handler.clone(),
        capabilities: ClientCapabilities {
            roots: Some(RootsCapability { list_changed: Some(true), extra: Default::default() }),
            sampling: Some(json!({})),
            elicitation: Some(json!({})),
            ..Default::default()
        },
        ..ClientOptions::default()
    };
    let transport = StdioTransport::spawn(node_server("server-everything", &["stdio"])).unwrap();
    let client = Client::start(transport, options);
    let mut notifications = client.subscribe();
    client.initialize().await.unwrap();

    // Declaring capabilities makes the server register more tools and announce it.
    let changed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match notifications.recv().await {
                Ok(ServerNotification::ToolsListChanged) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    })
    .await
    .unwrap_or(false);
    assert!(changed, "tools/list_changed was seen");
    let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for name in ["get-roots-list", "trigger-sampling-request", "trigger-elicitation-request"] {
        assert!(names.contains(&name), "{name} appears once capabilities are declared: {names:?}");
    }

    let r = client.call_tool("get-roots-list", None, RequestOptions::default()).await.unwrap();
    assert!(r.joined_text().contains("file:///tmp/interop-root"), "roots/list was answered: {}", r.joined_text());
    assert!(handler.roots.load(Ordering::SeqCst) >= 1);

    let r = client.call_tool("trigger-elicitation-request", None, RequestOptions::default()).await;
    assert_eq!(handler.elicitation.load(Ordering::SeqCst), 1, "elicitation reached the handler");
    let text = match r {
        Ok(r) => r.joined_text(),
        Err(e) => e.to_string(),
    };
    assert!(text.to_lowercase().contains("decline"), "elicitation was declined: {text}");

    let r =
        client.call_tool("trigger-sampling-request", args(json!({"prompt": "hi"})), RequestOptions::default()).await;
    assert_eq!(handler.sampling.load(Ordering::SeqCst), 1, "sampling reached the handler");
    let text = match r {
        Ok(r) => {
            assert!(r.is_error(), "a declined sampling request is an error result: {r:?}");
            r.joined_text()
        }
        Err(e) => e.to_string(),
    };
    assert!(text.contains("does not allow servers to sample"), "the server saw our refusal: {text}");
    client.close().await.unwrap();
}

/// A person, scripted: form fields answered with the text a person would type (read and
/// checked as the CLI reads them), URLs accepted; or everything declined.
struct ScriptedPerson {
    typed: Vec<(&'static str, &'static str)>,
    accept: bool,
    seen: std::sync::Mutex<Vec<ElicitRequestParams>>,
}

#[async_trait]
impl ServerRequestHandler for ScriptedPerson {
    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        self.seen.lock().unwrap().push(params.clone());
        let reply = |action, content| ElicitResult { action, content, extra: Default::default() };
        if !self.accept {
            return Ok(reply(ElicitAction::Decline, None));
        }
        if params.mode.as_deref() == Some("url") {
            return Ok(reply(ElicitAction::Accept, None));
        }
        let form = Form::parse(params.requested_schema.as_ref().unwrap()).unwrap();
        let mut content = serde_json::Map::new();
        for field in &form.fields {
            let typed = self.typed.iter().find(|(name, _)| *name == field.name).map_or("", |(_, t)| *t);
            let value = field.read(typed).unwrap_or_else(|e| panic!("{}: {typed:?}: {e}", field.name));
            if let Some(value) = value {
                content.insert(field.name.clone(), value);
            }
        }
        form.check(&content).unwrap();
        Ok(reply(ElicitAction::Accept, Some(content)))
    }
}

/// server-everything with form and URL elicitation declared, once it has registered its
/// elicitation tools.
async fn everything_eliciting(person: Arc<ScriptedPerson>) -> Client {
    let options = ClientOptions {
        handler: person,
        capabilities: ClientCapabilities { elicitation: Some(json!({"form": {}, "url": {}})), ..Default::default() },
        ..ClientOptions::default()
    };
    let transport = StdioTransport::spawn(node_server("server-everything", &["stdio"])).unwrap();
    let client = Client::start(transport, options);
    let mut notifications = client.subscribe();
    client.initialize().await.unwrap();
    let wanted = ["trigger-elicitation-request", "trigger-url-elicitation"];
    let registered = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
            if wanted.iter().all(|w| tools.iter().any(|t| t.name == *w)) {
                return true;
            }
            // Registered on seeing the capabilities; announced with list_changed.
            if notifications.recv().await.is_err() {
                return false;
            }
        }
    })
    .await
    .unwrap_or(false);
    assert!(registered, "server-everything registers {wanted:?} for a client declaring form and url elicitation");
    client
}

#[tokio::test]
async fn everything_elicitation_form_and_url_answered_by_a_person() {
    let person = Arc::new(ScriptedPerson {
        typed: vec![
            ("name", "Ada Lovelace"),
            ("check", "yes"),
            ("email", "ada@example.com"),
            ("homepage", "https://ada.example/"),
            ("birthdate", "1815-12-10"),
            ("number", "2.5"),
            ("untitledSingleSelectEnum", "3"),
            ("untitledMultipleSelectEnum", "Piano, drums"),
            ("titledSingleSelectEnum", "Wonder Woman"),
            ("titledMultipleSelectEnum", "Salmon,Trout"),
            ("legacyTitledEnum", "Dogs"),
        ],
        accept: true,
        seen: Default::default(),
    });
    let client = everything_eliciting(Arc::clone(&person)).await;
    let r = client.call_tool("trigger-elicitation-request", None, RequestOptions::default()).await.unwrap();
    let text = r.joined_text();
    for line in ["- Name: Ada Lovelace", "- Agreed to terms: true", "- Birthdate: 1815-12-10", "- Favorite Integer: 42"]
    {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    let raw: serde_json::Value =
        serde_json::from_str(text.split("Raw result: ").nth(1).unwrap_or_else(|| panic!("{text}"))).unwrap();
    assert_eq!(raw["action"], "accept");
    let content = &raw["content"];
    assert_eq!(content["untitledSingleSelectEnum"], "Joey", "an option by its number");
    assert_eq!(content["untitledMultipleSelectEnum"], json!(["Piano", "Drums"]));
    assert_eq!(content["titledSingleSelectEnum"], "hero-3", "an option by its title");
    assert_eq!(content["titledMultipleSelectEnum"], json!(["fish-2", "fish-3"]));
    assert_eq!(content["legacyTitledEnum"], "pet-2", "legacy enumNames");
    assert_eq!(content["firstLine"], "It was a dark and stormy night.", "a default kept");
    assert_eq!(content["integer"], 42);
    assert_eq!(content["number"], 2.5);

    let url = "https://example.com/verify?step=1";
    let r = client.call_tool("trigger-url-elicitation", args(json!({"url": url})), RequestOptions::default()).await;
    let text = r.unwrap().joined_text();
    assert!(text.contains("User completed the URL elicitation flow") && text.contains(url), "{text}");
    let seen = person.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[1].mode.as_deref(), seen[1].url.as_deref()), (Some("url"), Some(url)));
    assert!(seen[1].elicitation_id.is_some(), "2025-11-25 URL mode carries an elicitation id");

    // The error path (-32042): the prerequisite URL is put to the person, then the call is
    // retried once and goes the request path.
    let r = client
        .call_tool("trigger-url-elicitation", args(json!({"url": url, "errorPath": true})), RequestOptions::default())
        .await;
    let text = r.unwrap().joined_text();
    assert!(text.contains("User completed the URL elicitation flow"), "{text}");
    let seen = person.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "the prerequisite, then the URL of the retried call");
    assert_eq!(seen[2].url.as_deref(), Some("https://modelcontextprotocol.io"));
    assert_eq!(seen[3].url.as_deref(), Some(url));
    client.close().await.unwrap();

    let declining = Arc::new(ScriptedPerson { typed: vec![], accept: false, seen: Default::default() });
    let client = everything_eliciting(declining).await;
    let r = client.call_tool("trigger-elicitation-request", None, RequestOptions::default()).await.unwrap();
    assert!(r.joined_text().contains("User declined to provide the requested information"), "{}", r.joined_text());
    let r = client.call_tool("trigger-url-elicitation", args(json!({"url": url})), RequestOptions::default()).await;
    assert!(r.unwrap().joined_text().contains("User declined to open the URL"));
    // A declined prerequisite leaves the error as the server sent it; nothing is retried.
    let r = client
        .call_tool("trigger-url-elicitation", args(json!({"url": url, "errorPath": true})), RequestOptions::default())
        .await;
    match r {
        Err(ClientError::Server { error, .. }) => assert_eq!(error.code, -32042, "{error:?}"),
        other => panic!("expected the URL-elicitation-required error: {other:?}"),
    }
    client.close().await.unwrap();
}

#[tokio::test]
async fn filesystem_write_and_read() {
    let dir = temp_dir("fs");
    let dir_str = dir.to_string_lossy().into_owned();
    // The server is told to serve a directory the sandbox protects: it may try, the kernel says no.
    let secret = temp_dir("fs-secret");
    std::fs::write(secret.join("key"), "secret").unwrap();
    let secret_str = secret.to_string_lossy().into_owned();
    let config = confined(node_server("server-filesystem", &[&dir_str, &secret_str]), &[&dir], &[&secret]);
    let client = handshake_and_list(config, &["read_text_file", "write_file", "list_allowed_directories"]).await;
    let file = dir.join("hello.txt");
    let file_str = file.to_string_lossy().into_owned();
    let r = client
        .call_tool(
            "write_file",
            args(json!({"path": file_str, "content": "from mcp-harness"})),
            RequestOptions::default(),
        )
        .await
        .unwrap();
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "from mcp-harness");
    let r =
        client.call_tool("read_text_file", args(json!({"path": file_str})), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "from mcp-harness");
    let r = client
        .call_tool("read_text_file", args(json!({"path": "/etc/passwd"})), RequestOptions::default())
        .await
        .unwrap();
    assert!(r.is_error(), "outside the allowed directory is an error result");
    let key = secret.join("key").to_string_lossy().into_owned();
    let r = client.call_tool("read_text_file", args(json!({"path": key})), RequestOptions::default()).await.unwrap();
    assert!(r.is_error() && r.joined_text().contains("EACCES"), "the sandbox denies it: {}", r.joined_text());
    client.close().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(secret);
}

#[tokio::test]
async fn memory_create_and_read() {
    let dir = temp_dir("memory");
    let mut config = confined(node_server("server-memory", &[]), &[&dir], &[]);
    config.env.insert("MEMORY_FILE_PATH".into(), dir.join("memory.jsonl").to_string_lossy().into_owned());
    let client = handshake_and_list(config, &["create_entities", "read_graph"]).await;
    let entities =
        json!({"entities": [{"name": "mcp-harness", "entityType": "project", "observations": ["speaks MCP"]}]});
    let r = client.call_tool("create_entities", args(entities), RequestOptions::default()).await.unwrap();
    assert!(!r.is_error(), "{r:?}");
    let r = client.call_tool("read_graph", None, RequestOptions::default()).await.unwrap();
    assert!(r.joined_text().contains("speaks MCP"), "{}", r.joined_text());
    client.close().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn time_current_time() {
    let client = handshake_and_list(
        python_server("mcp-server-time", &["--local-timezone", "UTC"]),
        &["get_current_time", "convert_time"],
    )
    .await;
    let r = client
        .call_tool("get_current_time", args(json!({"timezone": "UTC"})), RequestOptions::default())
        .await
        .unwrap();
    assert!(!r.is_error(), "{r:?}");
    assert!(r.joined_text().contains("UTC"), "{}", r.joined_text());
    let r = client
        .call_tool("get_current_time", args(json!({"timezone": "Not/AZone"})), RequestOptions::default())
        .await
        .unwrap();
    assert!(r.is_error(), "a bad timezone is an error result");
    client.close().await.unwrap();
}

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=interop", "-c", "user.email=interop@example.invalid"])
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

#[tokio::test]
async fn git_status_and_log() {
    let repo = temp_dir("git");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README"), "hello\n").unwrap();
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-q", "-m", "first commit"]);
    std::fs::write(repo.join("new.txt"), "untracked\n").unwrap();
    let repo_str = repo.to_string_lossy().into_owned();
    let config = confined(python_server("mcp-server-git", &["--repository", &repo_str]), &[&repo], &[]);
    let client = handshake_and_list(config, &["git_status", "git_log"]).await;
    let r =
        client.call_tool("git_status", args(json!({"repo_path": repo_str})), RequestOptions::default()).await.unwrap();
    assert!(r.joined_text().contains("new.txt"), "{}", r.joined_text());
    let r = client.call_tool("git_log", args(json!({"repo_path": repo_str})), RequestOptions::default()).await.unwrap();
    assert!(r.joined_text().contains("first commit"), "{}", r.joined_text());
    client.close().await.unwrap();
    let _ = std::fs::remove_dir_all(repo);
}
