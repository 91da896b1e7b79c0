//! Everything the crate encodes validates against the official JSON Schema of every revision that
//! has the type.
//!
//! Instances are built per revision: the crate skips `None` fields, so an instance only carries the
//! fields its revision declares. Besides schema validity (which cannot catch an extra field, since
//! no MCP schema forbids additional properties), [`Check::Strict`] asserts that every top-level
//! member (and, for messages, every member of `params`) is declared by that revision.

use std::sync::OnceLock;

use jsonschema::{Draft, ValidatorMap};
use mcp_protocol::error_codes;
use mcp_protocol::methods;
use mcp_protocol::{
    Annotations, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientSession, CompleteArgument,
    CompleteContext, CompleteReference, CompleteRequestParams, CompleteResult, Completion, ContentBlock,
    CreateMessageResult, ElicitAction, ElicitResult, ErrorObject, Extra, GetPromptRequestParams, GetPromptResult, Icon,
    Implementation, ListChangedCapability, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListRootsResult, ListToolsResult, LoggingMessageNotificationParams, PaginatedRequestParams,
    ProgressNotificationParams, Prompt, PromptArgument, PromptMessage, ProtocolVersion as V, ReadResourceRequestParams,
    ReadResourceResult, RequestId, Resource, ResourceContents, ResourceTemplate, ResourcesCapability, Root,
    RootsCapability, ServerCapabilities, SessionConfig, Tool, ToolAnnotations,
};
use mcp_protocol::{encode_error, encode_notification, encode_result};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::support::{read_json, spec_dir};

/// One revision's schema document and its compiled definitions.
struct Schemas {
    revision: V,
    doc: Value,
    /// `definitions` (draft-07 revisions) or `$defs` (2020-12 revisions).
    defs_key: &'static str,
    validators: ValidatorMap,
}

fn schemas(revision: V) -> &'static Schemas {
    static CACHE: [OnceLock<Schemas>; 4] = [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let index = V::ALL.iter().position(|v| *v == revision).expect("a known revision");
    CACHE[index].get_or_init(|| load_schemas(revision))
}

fn load_schemas(revision: V) -> Schemas {
    let path = spec_dir(revision.as_str()).join("schema.json");
    let doc = read_json(&path);
    let declared = doc.get("$schema").and_then(Value::as_str).unwrap_or_default();
    let draft = match declared {
        "http://json-schema.org/draft-07/schema#" => Draft::Draft7,
        "https://json-schema.org/draft/2020-12/schema" => Draft::Draft202012,
        other => panic!("{}: unexpected $schema {other:?}", path.display()),
    };
    let defs_key = if doc.get("$defs").is_some() { "$defs" } else { "definitions" };
    assert!(doc.get(defs_key).is_some_and(Value::is_object), "{}: no {defs_key}", path.display());
    let validators = jsonschema::options()
        .with_draft(draft)
        .build_map(&doc)
        .unwrap_or_else(|e| panic!("{}: cannot compile: {e}", path.display()));
    Schemas { revision, doc, defs_key, validators }
}

/// How closely to check an instance.
#[derive(Clone, Copy, PartialEq)]
enum Check {
    /// Schema validity only.
    Valid,
    /// Valid, and no member the revision does not declare (top level, and `params` of a message).
    Strict,
}

impl Schemas {
    fn has(&self, def: &str) -> bool {
        self.doc[self.defs_key].get(def).is_some()
    }

    fn definition(&self, def: &str) -> &Value {
        self.doc[self.defs_key].get(def).unwrap_or_else(|| panic!("{}: no definition {def}", self.revision))
    }

    /// Follow local `$ref`s.
    fn resolve<'a>(&'a self, mut node: &'a Value) -> &'a Value {
        while let Some(pointer) = node.get("$ref").and_then(Value::as_str) {
            let pointer = pointer.strip_prefix('#').expect("a local $ref");
            node = self.doc.pointer(pointer).unwrap_or_else(|| panic!("{}: dangling $ref {pointer}", self.revision));
        }
        node
    }

    fn assert(&self, def: &str, instance: &Value, check: Check) {
        let pointer = format!("#/{}/{def}", self.defs_key);
        let validator =
            self.validators.get(&pointer).unwrap_or_else(|| panic!("{}: no validator for {pointer}", self.revision));
        let errors: Vec<String> =
            validator.iter_errors(instance).map(|e| format!("  at {:?}: {e}", e.instance_path().as_str())).collect();
        assert!(
            errors.is_empty(),
            "{}: instance is not a valid {def}:\n{}\ninstance: {}",
            self.revision,
            errors.join("\n"),
            serde_json::to_string_pretty(instance).unwrap()
        );
        if check == Check::Strict {
            let schema = self.resolve(self.definition(def));
            let is_message = instance.get("jsonrpc").is_some();
            if !is_message {
                self.assert_declared(def, "", schema, instance);
            }
            if let (Some(params_schema), Some(params)) = (schema.pointer("/properties/params"), instance.get("params"))
            {
                self.assert_declared(def, "params", self.resolve(params_schema), params);
            }
        }
    }

    fn assert_declared(&self, def: &str, at: &str, schema: &Value, instance: &Value) {
        let (Some(properties), Some(members)) =
            (schema.get("properties").and_then(Value::as_object), instance.as_object())
        else {
            return;
        };
        // `_meta` is declared on the base Request/Notification/Result params of every revision.
        let undeclared: Vec<&String> =
            members.keys().filter(|k| *k != "_meta" && !properties.contains_key(*k)).collect();
        assert!(
            undeclared.is_empty(),
            "{}: {def} {at} does not declare {undeclared:?}; instance: {instance}",
            self.revision
        );
    }

    /// Validate a whole response line and its result.
    fn assert_response(&self, line: &str, result_def: &str, check: Check) {
        let message: Value = serde_json::from_str(line).unwrap();
        for def in ["JSONRPCResponse", "JSONRPCResultResponse", "JSONRPCMessage"] {
            if self.has(def) {
                self.assert(def, &message, Check::Valid);
            }
        }
        self.assert(result_def, &message["result"], check);
    }

    /// Validate a request or notification line against its definition and the generic envelope.
    fn assert_message(&self, line: &str, def: &str, generic: &str) {
        let message: Value = serde_json::from_str(line).unwrap();
        self.assert(def, &message, Check::Strict);
        self.assert(generic, &message, Check::Valid);
        self.assert("JSONRPCMessage", &message, Check::Valid);
    }
}

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn since(v: V, first: V) -> bool {
    v >= first
}

// ---------------------------------------------------------------------------------------------
// Builders: the fullest instance each revision allows.
// ---------------------------------------------------------------------------------------------

fn implementation(v: V) -> Implementation {
    let mut info = Implementation::new("harness", "0.1.0");
    if since(v, V::V2025_06_18) {
        info.title = Some("MCP Harness".into());
    }
    info
}

fn client_capabilities(v: V) -> ClientCapabilities {
    ClientCapabilities {
        roots: Some(RootsCapability { list_changed: Some(true), extra: Extra::new() }),
        sampling: Some(json!({})),
        elicitation: since(v, V::V2025_06_18).then(|| json!({})),
        experimental: Some(obj(json!({"x-feature": {"level": 1}}))),
        extra: Extra::new(),
    }
}

fn server_capabilities(v: V) -> ServerCapabilities {
    let list_changed = || Some(ListChangedCapability { list_changed: Some(true), extra: Extra::new() });
    ServerCapabilities {
        tools: list_changed(),
        prompts: list_changed(),
        resources: Some(ResourcesCapability { subscribe: Some(true), list_changed: Some(false), extra: Extra::new() }),
        logging: Some(json!({})),
        completions: since(v, V::V2025_03_26).then(|| json!({})),
        experimental: Some(obj(json!({"x-feature": {}}))),
        extra: Extra::new(),
    }
}

fn icons(v: V) -> Option<Vec<Icon>> {
    since(v, V::V2025_11_25).then(|| {
        vec![Icon {
            src: "https://example.com/icon.png".into(),
            mime_type: Some("image/png".into()),
            sizes: Some(vec!["48x48".into()]),
            extra: Extra::new(),
        }]
    })
}

fn tool(v: V) -> Tool {
    let mut tool = Tool::new(
        "get_weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    );
    tool.description = Some("Current weather".into());
    if since(v, V::V2025_03_26) {
        tool.annotations = Some(ToolAnnotations {
            title: Some("Weather".into()),
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(true),
            extra: Extra::new(),
        });
    }
    if since(v, V::V2025_06_18) {
        tool.title = Some("Weather".into());
        tool.output_schema = Some(json!({"type": "object", "properties": {"temperature": {"type": "number"}}}));
        tool.meta = Some(obj(json!({"vendor/x": 1})));
    }
    tool.icons = icons(v);
    tool
}

fn annotations(v: V) -> Option<Annotations> {
    Some(Annotations {
        audience: Some(vec!["user".into(), "assistant".into()]),
        priority: Some(0.5),
        last_modified: since(v, V::V2025_06_18).then(|| "2025-01-12T15:00:58Z".into()),
        extra: Extra::new(),
    })
}

fn text_contents(v: V) -> ResourceContents {
    ResourceContents {
        uri: "file:///project/README.md".into(),
        mime_type: Some("text/markdown".into()),
        text: Some("# Readme".into()),
        blob: None,
        meta: since(v, V::V2025_06_18).then(|| obj(json!({"k": "v"}))),
        extra: Extra::new(),
    }
}

fn blob_contents() -> ResourceContents {
    ResourceContents {
        uri: "file:///project/logo.png".into(),
        mime_type: Some("image/png".into()),
        text: None,
        blob: Some("iVBORw0KGgo=".into()),
        meta: None,
        extra: Extra::new(),
    }
}

/// Every content block the revision has, with annotations.
fn content_blocks(v: V) -> Vec<ContentBlock> {
    let mut blocks = vec![
        ContentBlock::text("hello"),
        ContentBlock::Text { text: "annotated".into(), annotations: annotations(v), extra: Extra::new() },
        ContentBlock::Image {
            data: "iVBORw0KGgo=".into(),
            mime_type: "image/png".into(),
            annotations: annotations(v),
            extra: Extra::new(),
        },
        ContentBlock::Resource { resource: text_contents(v), annotations: annotations(v), extra: Extra::new() },
        ContentBlock::Resource { resource: blob_contents(), annotations: None, extra: Extra::new() },
    ];
    if since(v, V::V2025_03_26) {
        blocks.push(ContentBlock::Audio {
            data: "UklGRiQAAABXQVZF".into(),
            mime_type: "audio/wav".into(),
            annotations: annotations(v),
            extra: Extra::new(),
        });
    }
    if since(v, V::V2025_06_18) {
        blocks.push(ContentBlock::ResourceLink {
            uri: "file:///project/src/main.rs".into(),
            name: "main.rs".into(),
            title: Some("Main".into()),
            description: Some("Entry point".into()),
            mime_type: Some("text/x-rust".into()),
            annotations: annotations(v),
            extra: Extra::new(),
        });
    }
    blocks
}

fn resource(v: V) -> Resource {
    Resource {
        uri: "file:///project/README.md".into(),
        name: "README.md".into(),
        title: since(v, V::V2025_06_18).then(|| "Readme".into()),
        description: Some("Project docs".into()),
        mime_type: Some("text/markdown".into()),
        annotations: annotations(v),
        size: Some(1024),
        extra: Extra::new(),
    }
}

fn minimal_resource() -> Resource {
    Resource {
        uri: "file:///a".into(),
        name: "a".into(),
        title: None,
        description: None,
        mime_type: None,
        annotations: None,
        size: None,
        extra: Extra::new(),
    }
}

fn resource_template(v: V) -> ResourceTemplate {
    ResourceTemplate {
        uri_template: "file:///{path}".into(),
        name: "files".into(),
        title: since(v, V::V2025_06_18).then(|| "Files".into()),
        description: Some("Project files".into()),
        mime_type: Some("application/octet-stream".into()),
        extra: Extra::new(),
    }
}

fn prompt(v: V) -> Prompt {
    Prompt {
        name: "code_review".into(),
        title: since(v, V::V2025_06_18).then(|| "Code review".into()),
        description: Some("Review code".into()),
        arguments: Some(vec![PromptArgument {
            name: "code".into(),
            description: Some("The code".into()),
            required: Some(true),
            extra: Extra::new(),
        }]),
        extra: Extra::new(),
    }
}

fn ready_session(v: V) -> ClientSession<()> {
    let config = SessionConfig {
        client_info: implementation(v),
        capabilities: client_capabilities(v),
        offered_version: v,
        supported_versions: V::ALL.to_vec(),
    };
    let mut session = ClientSession::new(config);
    session.start_initialize(()).unwrap();
    let result =
        json!({"protocolVersion": v.as_str(), "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}});
    let raw = serde_json::value::to_raw_value(&result).unwrap();
    session.finish_initialize(&raw).unwrap();
    session
}

// ---------------------------------------------------------------------------------------------
// The table: one function per message type, and the first revision that has it.
// ---------------------------------------------------------------------------------------------

type Case = (&'static str, V, fn(&Schemas));

const CASES: &[Case] = &[
    ("InitializeRequest", V::V2024_11_05, initialize_request),
    ("InitializeResult", V::V2024_11_05, initialize_result),
    ("InitializedNotification", V::V2024_11_05, initialized_notification),
    ("capabilities and Implementation", V::V2024_11_05, capabilities_and_implementation),
    ("Tool", V::V2024_11_05, tool_case),
    ("ListToolsRequest", V::V2024_11_05, list_tools_request),
    ("ListToolsResult", V::V2024_11_05, list_tools_result),
    ("CallToolRequest", V::V2024_11_05, call_tool_request),
    ("CallToolResult", V::V2024_11_05, call_tool_result),
    ("ProgressNotification", V::V2024_11_05, progress_notification),
    ("CancelledNotification", V::V2024_11_05, cancelled_notification),
    ("LoggingMessageNotification", V::V2024_11_05, logging_notification),
    ("ListRootsResult", V::V2024_11_05, list_roots_result),
    ("CreateMessageResult", V::V2024_11_05, create_message_result),
    ("ElicitResult", V::V2025_06_18, elicit_result),
    ("error response", V::V2024_11_05, error_response),
    ("ping", V::V2024_11_05, ping),
    ("Resource and ListResourcesResult", V::V2024_11_05, resources),
    ("ResourceTemplate", V::V2024_11_05, resource_templates),
    ("ReadResourceRequest and Result", V::V2024_11_05, read_resource),
    ("Prompt and ListPromptsResult", V::V2024_11_05, prompts),
    ("GetPromptRequest and Result", V::V2024_11_05, get_prompt),
    ("CompleteRequest and Result", V::V2024_11_05, complete),
];

#[test]
fn every_encoded_type_validates_against_every_revision_that_has_it() {
    let mut ran = 0;
    for v in V::ALL {
        let schemas = schemas(v);
        for (name, first, case) in CASES {
            if v >= *first {
                eprintln!("{v}: {name}");
                case(schemas);
                ran += 1;
            }
        }
    }
    assert_eq!(ran, CASES.len() * 4 - 2, "ElicitResult is skipped for the two oldest revisions");
}

#[test]
fn each_revision_declares_its_draft_and_definitions() {
    for v in V::ALL {
        let s = schemas(v);
        let expected = if v >= V::V2025_11_25 { "$defs" } else { "definitions" };
        assert_eq!(s.defs_key, expected, "{v}");
        assert!(s.validators.contains_key("#"), "{v}");
    }
}

#[test]
fn the_validator_rejects_what_the_revision_does_not_allow() {
    // Guard against a validator that accepts everything (for example a $ref that resolves to `{}`).
    let old = schemas(V::V2024_11_05);
    let audio = to_value(&CallToolResult {
        content: vec![ContentBlock::Audio {
            data: "AA==".into(),
            mime_type: "audio/wav".into(),
            annotations: None,
            extra: Extra::new(),
        }],
        ..Default::default()
    });
    assert!(!old.validators.get("#/definitions/CallToolResult").unwrap().is_valid(&audio));
    let new = schemas(V::V2025_11_25);
    assert!(new.validators.get("#/$defs/CallToolResult").unwrap().is_valid(&audio));
    assert!(!new.validators.get("#/$defs/Tool").unwrap().is_valid(&json!({"name": "t"})));
    assert!(
        !new.validators
            .get("#/$defs/JSONRPCRequest")
            .unwrap()
            .is_valid(&json!({"jsonrpc": "2.0", "id": null, "method": "x"}))
    );
}

fn initialize_request(s: &Schemas) {
    let v = s.revision;
    // Full: every capability the revision has.
    let mut session = ClientSession::<()>::new(SessionConfig {
        client_info: implementation(v),
        capabilities: client_capabilities(v),
        offered_version: v,
        supported_versions: V::ALL.to_vec(),
    });
    let (_, line) = session.start_initialize(()).unwrap();
    s.assert_message(&line, "InitializeRequest", "JSONRPCRequest");
    let message: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(message["params"]["protocolVersion"], v.as_str());
    s.assert("ClientCapabilities", &message["params"]["capabilities"], Check::Strict);
    s.assert("Implementation", &message["params"]["clientInfo"], Check::Strict);
    // Minimal.
    let mut session: ClientSession<()> =
        ClientSession::new(SessionConfig::new(Implementation::new("c", "1"), ClientCapabilities::default()));
    let (_, line) = session.start_initialize(()).unwrap();
    s.assert_message(&line, "InitializeRequest", "JSONRPCRequest");
}

fn initialize_result(s: &Schemas) {
    let v = s.revision;
    let full = mcp_protocol::InitializeResult {
        protocol_version: v.as_str().into(),
        capabilities: server_capabilities(v),
        server_info: implementation(v),
        instructions: Some("Use get_weather for forecasts.".into()),
        meta: Some(obj(json!({"vendor/trace": "abc"}))),
        extra: Extra::new(),
    };
    s.assert_response(&encode_result(RequestId::Number(1), &full), "InitializeResult", Check::Strict);
    s.assert("ServerCapabilities", &to_value(&full.capabilities), Check::Strict);
    let minimal = mcp_protocol::InitializeResult {
        protocol_version: v.as_str().into(),
        capabilities: ServerCapabilities::default(),
        server_info: Implementation::new("s", "1"),
        instructions: None,
        meta: None,
        extra: Extra::new(),
    };
    s.assert_response(&encode_result(RequestId::from("init"), &minimal), "InitializeResult", Check::Strict);
}

fn initialized_notification(s: &Schemas) {
    let v = s.revision;
    let mut session: ClientSession<()> = ClientSession::new(SessionConfig {
        offered_version: v,
        ..SessionConfig::new(implementation(v), ClientCapabilities::default())
    });
    session.start_initialize(()).unwrap();
    let result =
        json!({"protocolVersion": v.as_str(), "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}});
    let line = session.finish_initialize(&serde_json::value::to_raw_value(&result).unwrap()).unwrap();
    s.assert_message(&line, "InitializedNotification", "JSONRPCNotification");
}

fn capabilities_and_implementation(s: &Schemas) {
    let v = s.revision;
    s.assert("ClientCapabilities", &to_value(&client_capabilities(v)), Check::Strict);
    s.assert("ClientCapabilities", &to_value(&ClientCapabilities::default()), Check::Strict);
    s.assert("ServerCapabilities", &to_value(&server_capabilities(v)), Check::Strict);
    s.assert("ServerCapabilities", &to_value(&ServerCapabilities::default()), Check::Strict);
    s.assert("Implementation", &to_value(&implementation(v)), Check::Strict);
    s.assert("Implementation", &to_value(&Implementation::new("x", "0")), Check::Strict);
}

fn tool_case(s: &Schemas) {
    let v = s.revision;
    s.assert("Tool", &to_value(&tool(v)), Check::Strict);
    s.assert("Tool", &to_value(&Tool::new("t", json!({"type": "object"}))), Check::Strict);
    if since(v, V::V2025_03_26) {
        s.assert("ToolAnnotations", &to_value(&tool(v).annotations.unwrap()), Check::Strict);
        s.assert("ToolAnnotations", &to_value(&ToolAnnotations::default()), Check::Strict);
    }
    if since(v, V::V2025_11_25) {
        s.assert("Icon", &to_value(&icons(v).unwrap()[0]), Check::Strict);
    }
}

fn list_tools_request(s: &Schemas) {
    let mut session = ready_session(s.revision);
    let page = PaginatedRequestParams { cursor: Some("page-2".into()), extra: Extra::new() };
    let (_, line) = session.start_request(methods::TOOLS_LIST, Some(&page), ()).unwrap();
    s.assert_message(&line, "ListToolsRequest", "JSONRPCRequest");
    let (_, line) = session.start_request(methods::TOOLS_LIST, None::<&()>, ()).unwrap();
    s.assert_message(&line, "ListToolsRequest", "JSONRPCRequest");
}

fn list_tools_result(s: &Schemas) {
    let v = s.revision;
    let full = ListToolsResult {
        tools: vec![tool(v), Tool::new("bare", json!({"type": "object"}))],
        next_cursor: Some("next".into()),
        meta: Some(obj(json!({"k": 1}))),
        extra: Extra::new(),
    };
    s.assert_response(&encode_result(RequestId::Number(2), &full), "ListToolsResult", Check::Strict);
    s.assert_response(
        &encode_result(RequestId::Number(2), &ListToolsResult::default()),
        "ListToolsResult",
        Check::Strict,
    );
}

fn call_tool_request(s: &Schemas) {
    let mut session = ready_session(s.revision);
    let full = CallToolRequestParams {
        name: "get_weather".into(),
        arguments: Some(obj(json!({"city": "Paris", "days": 3, "nested": {"a": [1, 2]}}))),
        meta: Some(obj(json!({"progressToken": "tok-1"}))),
        extra: Extra::new(),
    };
    let (_, line) = session.start_request(methods::TOOLS_CALL, Some(&full), ()).unwrap();
    s.assert_message(&line, "CallToolRequest", "JSONRPCRequest");
    let minimal = CallToolRequestParams { name: "noop".into(), arguments: None, meta: None, extra: Extra::new() };
    let (_, line) = session.start_request(methods::TOOLS_CALL, Some(&minimal), ()).unwrap();
    s.assert_message(&line, "CallToolRequest", "JSONRPCRequest");
}

fn call_tool_result(s: &Schemas) {
    let v = s.revision;
    let mut full = CallToolResult {
        content: content_blocks(v),
        structured_content: None,
        is_error: Some(false),
        meta: Some(obj(json!({"k": "v"}))),
        extra: Extra::new(),
    };
    if since(v, V::V2025_06_18) {
        full.structured_content = Some(json!({"temperature": 22.5}));
    }
    s.assert_response(&encode_result(RequestId::Number(3), &full), "CallToolResult", Check::Strict);
    for block in &full.content {
        let def = match block {
            ContentBlock::Text { .. } => "TextContent",
            ContentBlock::Image { .. } => "ImageContent",
            ContentBlock::Audio { .. } => "AudioContent",
            ContentBlock::ResourceLink { .. } => "ResourceLink",
            ContentBlock::Resource { .. } => "EmbeddedResource",
            ContentBlock::Other(_) => continue, // never built above
        };
        s.assert(def, &to_value(block), Check::Strict);
        if s.has("ContentBlock") {
            s.assert("ContentBlock", &to_value(block), Check::Valid);
        }
    }
    let error =
        CallToolResult { content: vec![ContentBlock::text("boom")], is_error: Some(true), ..Default::default() };
    s.assert_response(&encode_result(RequestId::Number(3), &error), "CallToolResult", Check::Strict);
    s.assert_response(
        &encode_result(RequestId::Number(3), &CallToolResult::default()),
        "CallToolResult",
        Check::Strict,
    );
}

fn progress_notification(s: &Schemas) {
    let v = s.revision;
    let full = ProgressNotificationParams {
        progress_token: RequestId::from("tok-1"),
        progress: 50.0,
        total: Some(100.0),
        message: since(v, V::V2025_03_26).then(|| "Reticulating splines".into()),
        extra: Extra::new(),
    };
    let line = encode_notification(methods::PROGRESS, Some(&full)).unwrap();
    s.assert_message(&line, "ProgressNotification", "JSONRPCNotification");
    let minimal = ProgressNotificationParams {
        progress_token: RequestId::Number(7),
        progress: 0.25,
        total: None,
        message: None,
        extra: Extra::new(),
    };
    let line = encode_notification(methods::PROGRESS, Some(&minimal)).unwrap();
    s.assert_message(&line, "ProgressNotification", "JSONRPCNotification");
}

fn cancelled_notification(s: &Schemas) {
    let mut session = ready_session(s.revision);
    let (id, _) = session.start_request(methods::TOOLS_LIST, None::<&()>, ()).unwrap();
    let ((), line) = session.cancel(&id, "user pressed stop").unwrap();
    let line = line.expect("a cancelled notification");
    s.assert_message(&line, "CancelledNotification", "JSONRPCNotification");
}

fn logging_notification(s: &Schemas) {
    for (level, logger) in [("error", Some("database")), ("debug", None)] {
        let params = LoggingMessageNotificationParams {
            level: level.into(),
            logger: logger.map(Into::into),
            data: json!({"error": "Connection failed", "port": 5432}),
            extra: Extra::new(),
        };
        let line = encode_notification(methods::MESSAGE, Some(&params)).unwrap();
        s.assert_message(&line, "LoggingMessageNotification", "JSONRPCNotification");
    }
}

fn list_roots_result(s: &Schemas) {
    let full = ListRootsResult {
        roots: vec![
            Root { uri: "file:///home/user/project".into(), name: Some("Project".into()), extra: Extra::new() },
            Root { uri: "file:///tmp".into(), name: None, extra: Extra::new() },
        ],
        extra: Extra::new(),
    };
    s.assert_response(&encode_result(RequestId::from("roots-1"), &full), "ListRootsResult", Check::Strict);
    for root in &full.roots {
        s.assert("Root", &to_value(root), Check::Strict);
    }
    s.assert_response(
        &encode_result(RequestId::Number(1), &ListRootsResult::default()),
        "ListRootsResult",
        Check::Strict,
    );
}

fn create_message_result(s: &Schemas) {
    let full = CreateMessageResult {
        role: "assistant".into(),
        content: json!({"type": "text", "text": "Paris"}),
        model: "claude-3-sonnet".into(),
        stop_reason: Some("endTurn".into()),
        extra: Extra::new(),
    };
    s.assert_response(&encode_result(RequestId::Number(9), &full), "CreateMessageResult", Check::Strict);
    let image = CreateMessageResult {
        content: json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}),
        stop_reason: None,
        ..full
    };
    s.assert_response(&encode_result(RequestId::Number(9), &image), "CreateMessageResult", Check::Strict);
}

fn elicit_result(s: &Schemas) {
    let accept = ElicitResult {
        action: ElicitAction::Accept,
        content: Some(obj(json!({"name": "octocat", "age": 30, "subscribe": true}))),
        extra: Extra::new(),
    };
    s.assert_response(&encode_result(RequestId::Number(4), &accept), "ElicitResult", Check::Strict);
    for action in [ElicitAction::Accept, ElicitAction::Decline, ElicitAction::Cancel] {
        let minimal = ElicitResult { action, content: None, extra: Extra::new() };
        s.assert_response(&encode_result(RequestId::Number(4), &minimal), "ElicitResult", Check::Strict);
    }
}

fn error_response(s: &Schemas) {
    let generic = if s.has("JSONRPCErrorResponse") { "JSONRPCErrorResponse" } else { "JSONRPCError" };
    let plain = encode_error(RequestId::Number(5), ErrorObject::new(error_codes::METHOD_NOT_FOUND, "Method not found"));
    let mut with_data = ErrorObject::new(error_codes::INVALID_PARAMS, "Invalid params");
    with_data.data = Some(json!({"field": "name"}));
    let with_data = encode_error(RequestId::from("req-7"), with_data);
    for line in [plain, with_data] {
        let message: Value = serde_json::from_str(&line).unwrap();
        s.assert(generic, &message, Check::Valid);
        s.assert("JSONRPCMessage", &message, Check::Valid);
        if s.has("Error") {
            s.assert("Error", &message["error"], Check::Strict);
        }
    }
}

fn ping(s: &Schemas) {
    let mut session: ClientSession<()> =
        ClientSession::new(SessionConfig::new(Implementation::new("c", "1"), ClientCapabilities::default()));
    let (_, line) = session.start_request(methods::PING, None::<&()>, ()).unwrap();
    s.assert_message(&line, "PingRequest", "JSONRPCRequest");
    s.assert_response(&encode_result(RequestId::Number(1), &json!({})), "EmptyResult", Check::Strict);
}

fn resources(s: &Schemas) {
    let v = s.revision;
    s.assert("Resource", &to_value(&resource(v)), Check::Strict);
    s.assert("Resource", &to_value(&minimal_resource()), Check::Strict);
    let page = ListResourcesResult {
        resources: vec![resource(v), minimal_resource()],
        next_cursor: Some("c".into()),
        extra: Extra::new(),
    };
    s.assert_response(&encode_result(RequestId::Number(1), &page), "ListResourcesResult", Check::Strict);
    let mut session = ready_session(v);
    let (_, line) = session.start_request(methods::RESOURCES_LIST, None::<&()>, ()).unwrap();
    s.assert_message(&line, "ListResourcesRequest", "JSONRPCRequest");
}

fn resource_templates(s: &Schemas) {
    let v = s.revision;
    s.assert("ResourceTemplate", &to_value(&resource_template(v)), Check::Strict);
    let page = ListResourceTemplatesResult {
        resource_templates: vec![resource_template(v)],
        next_cursor: None,
        extra: Extra::new(),
    };
    s.assert_response(&encode_result(RequestId::Number(1), &page), "ListResourceTemplatesResult", Check::Strict);
}

fn read_resource(s: &Schemas) {
    let v = s.revision;
    let mut session = ready_session(v);
    let params = ReadResourceRequestParams { uri: "file:///project/README.md".into(), extra: Extra::new() };
    let (_, line) = session.start_request(methods::RESOURCES_READ, Some(&params), ()).unwrap();
    s.assert_message(&line, "ReadResourceRequest", "JSONRPCRequest");
    let result = ReadResourceResult { contents: vec![text_contents(v), blob_contents()], extra: Extra::new() };
    s.assert_response(&encode_result(RequestId::Number(1), &result), "ReadResourceResult", Check::Strict);
    s.assert("TextResourceContents", &to_value(&text_contents(v)), Check::Strict);
    s.assert("BlobResourceContents", &to_value(&blob_contents()), Check::Strict);
}

fn prompts(s: &Schemas) {
    let v = s.revision;
    let bare = Prompt { name: "p".into(), title: None, description: None, arguments: None, extra: Extra::new() };
    s.assert("Prompt", &to_value(&prompt(v)), Check::Strict);
    s.assert("Prompt", &to_value(&bare), Check::Strict);
    let page = ListPromptsResult { prompts: vec![prompt(v), bare], next_cursor: Some("n".into()), extra: Extra::new() };
    s.assert_response(&encode_result(RequestId::Number(1), &page), "ListPromptsResult", Check::Strict);
}

fn get_prompt(s: &Schemas) {
    let v = s.revision;
    let mut session = ready_session(v);
    let params = GetPromptRequestParams {
        name: "code_review".into(),
        arguments: Some(obj(json!({"code": "fn main() {}"}))),
        extra: Extra::new(),
    };
    let (_, line) = session.start_request(methods::PROMPTS_GET, Some(&params), ()).unwrap();
    s.assert_message(&line, "GetPromptRequest", "JSONRPCRequest");
    let messages = content_blocks(v)
        .into_iter()
        .enumerate()
        .map(|(i, content)| PromptMessage {
            role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
            content,
            extra: Extra::new(),
        })
        .collect();
    let result = GetPromptResult { description: Some("Review".into()), messages, extra: Extra::new() };
    s.assert_response(&encode_result(RequestId::Number(1), &result), "GetPromptResult", Check::Strict);
    s.assert_response(
        &encode_result(RequestId::Number(1), &GetPromptResult::default()),
        "GetPromptResult",
        Check::Strict,
    );
}

/// `completion/complete` for a prompt and a resource template, with the context only where the
/// revision has it (2025-06-18 on), as the client sends it.
fn complete(s: &Schemas) {
    let v = s.revision;
    for reference in [CompleteReference::prompt("code_review"), CompleteReference::resource("file:///{path}")] {
        let mut session = ready_session(v);
        let params = CompleteRequestParams {
            reference,
            argument: CompleteArgument { name: "language".into(), value: "py".into(), extra: Extra::new() },
            context: since(v, V::V2025_06_18)
                .then(|| CompleteContext { arguments: Some(obj(json!({"framework": "flask"}))), extra: Extra::new() }),
            extra: Extra::new(),
        };
        let (_, line) = session.start_request(methods::COMPLETION_COMPLETE, Some(&params), ()).unwrap();
        s.assert_message(&line, "CompleteRequest", "JSONRPCRequest");
    }
    let result = CompleteResult {
        completion: Completion {
            values: vec!["python".into(), "pytorch".into()],
            total: Some(10),
            has_more: Some(true),
            extra: Extra::new(),
        },
        extra: Extra::new(),
    };
    s.assert_response(&encode_result(RequestId::Number(1), &result), "CompleteResult", Check::Strict);
    s.assert_response(
        &encode_result(RequestId::Number(1), &CompleteResult::default()),
        "CompleteResult",
        Check::Strict,
    );
}
