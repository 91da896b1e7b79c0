//! JSON-RPC framing: how bytes are classified, ids, round trips, unknown fields, and snapshots of
//! the exact wire form of a few messages.

use mcp_protocol::encode_error;
use mcp_protocol::methods;
use mcp_protocol::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientSession, ContentBlock, DecodeError,
    DecodeErrorKind, ErrorObject, ErrorResponse, Extra, Implementation, InitializeResult, Message, Notification,
    Request, RequestId, Response, RootsCapability, SessionConfig, Tool,
};
use mcp_protocol::{empty_object, error_codes, to_raw};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn decode(text: &str) -> Result<Message, DecodeError> {
    Message::decode(text.as_bytes())
}

fn decode_err(text: &str) -> DecodeError {
    match decode(text) {
        Ok(m) => panic!("{text:?} decoded as {m:?}"),
        Err(e) => e,
    }
}

fn assert_kind(text: &str, kind: DecodeErrorKind) -> DecodeError {
    let e = decode_err(text);
    assert_eq!(e.kind, kind, "{text:?}: {e}");
    e
}

fn assert_invalid(text: &str) -> DecodeError {
    assert_kind(text, DecodeErrorKind::InvalidRequest)
}

// ---------------------------------------------------------------------------------------------
// Classification of what is not a message.
// ---------------------------------------------------------------------------------------------

#[test]
fn garbage_is_a_parse_error() {
    for text in [
        "",
        "   ",
        "\n",
        "garbage",
        "{",
        "}",
        "{\"jsonrpc\":",
        "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"",
        "nul",
        "{'jsonrpc':'2.0'}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"} trailing",
        "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"ping\",}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"p\\x\"}",
        // Wrong member types in text that is not JSON either: the syntax error wins.
        "{\"jsonrpc\":2.0,\"id\":1",
        "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":",
        "[1,2",
        "[\"2.0\",1,",
        "\"unterminated",
    ] {
        let e = assert_kind(text, DecodeErrorKind::Parse);
        assert_eq!(e.id, None);
        assert_eq!(e.to_error_object().code, error_codes::PARSE_ERROR);
    }
    let e = Message::decode(&[0x00, 0x01, b'{', 0x7f]).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Parse);
}

#[test]
fn invalid_utf8_is_a_parse_error() {
    for bytes in [
        &[0xff, 0xfe, 0xfd][..],
        b"{\"jsonrpc\":\"2.0\",\"method\":\"\xc3\x28\"}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"a\":\"\xed\xa0\x80\"}}",
    ] {
        let e = Message::decode(bytes).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::Parse, "{bytes:?}");
        assert!(e.detail.contains("UTF-8"), "{}", e.detail);
    }
}

#[test]
fn batches_and_non_objects_are_invalid_requests() {
    for text in ["[]", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", "  [1,2]"] {
        let e = assert_invalid(text);
        assert!(e.detail.contains("batch"), "{text}: {}", e.detail);
        assert_eq!(e.to_error_object().code, error_codes::INVALID_REQUEST);
    }
    // An array shaped like the envelope's members must not be read positionally as one.
    for text in ["[\"2.0\",1,\"ping\"]", "[\"2.0\",null,\"notifications/initialized\"]", "[\"2.0\",1,null,null,{}]"] {
        assert_invalid(text);
    }
    for text in ["1", "\"text\"", "null", "true", "-0.5"] {
        let e = assert_invalid(text);
        assert!(e.detail.contains("object"), "{text}: {}", e.detail);
    }
}

#[test]
fn a_wrong_or_missing_version_is_an_invalid_request_that_keeps_the_id() {
    let e = assert_invalid(r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#);
    assert_eq!(e.id, Some(RequestId::Number(7)));
    assert!(e.detail.contains("1.0"), "{}", e.detail);
    let e = assert_invalid(r#"{"jsonrpc":"1.0","id":"abc","method":"ping"}"#);
    assert_eq!(e.id, Some(RequestId::from("abc")));
    let e = assert_invalid(r#"{"id":3,"method":"ping"}"#);
    assert_eq!(e.id, Some(RequestId::Number(3)));
    assert!(e.detail.contains("jsonrpc"), "{}", e.detail);
    assert_invalid(r#"{"method":"notifications/initialized"}"#);
    assert_invalid(r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#);
    assert_invalid(r#"{"jsonrpc":null,"id":1,"method":"ping"}"#);
    assert_invalid(r#"{"jsonrpc":"2.0 ","id":1,"method":"ping"}"#);
    // The error object names the problem.
    let object = e.to_error_object();
    assert_eq!(object.code, error_codes::INVALID_REQUEST);
    assert!(object.message.starts_with("Invalid Request"), "{object}");
}

#[test]
fn ids_must_be_strings_or_integers() {
    for id in ["1.5", "1.0", "1e3", "true", "false", "{}", "{\"a\":1}", "[]", "[1]", "18446744073709551615"] {
        let e = assert_invalid(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
        assert_eq!(e.id, None, "{id}");
        assert!(e.detail.contains("id"), "{id}: {}", e.detail);
        assert_invalid(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#));
    }
    for (id, expected) in [
        ("0", RequestId::Number(0)),
        ("-1", RequestId::Number(-1)),
        ("9223372036854775807", RequestId::Number(i64::MAX)),
        ("-9223372036854775808", RequestId::Number(i64::MIN)),
        ("\"\"", RequestId::from("")),
        ("\"42\"", RequestId::from("42")),
        ("\"caf\\u00e9 \\\"q\\\"\"", RequestId::from("café \"q\"")),
    ] {
        let Ok(Message::Request(r)) = decode(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)) else {
            panic!("{id} did not decode as a request");
        };
        assert_eq!(r.id, expected);
    }
    assert_ne!(RequestId::Number(1), RequestId::from("1"), "number and string ids are distinct");
}

#[test]
fn the_four_kinds_are_told_apart() {
    match decode(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}"#).unwrap() {
        Message::Request(r) => {
            assert_eq!((r.id, r.method.as_str()), (RequestId::Number(1), "tools/list"));
            assert_eq!(r.params.unwrap().get(), r#"{"cursor":"c"}"#);
        }
        other => panic!("{other:?}"),
    }
    match decode(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":[1,2]}"#).unwrap() {
        Message::Notification(n) => {
            assert_eq!(n.method, "notifications/progress");
            assert_eq!(n.params.unwrap().get(), "[1,2]");
        }
        other => panic!("{other:?}"),
    }
    match decode(r#"{"jsonrpc":"2.0","id":"x","result":{"ok":true}}"#).unwrap() {
        Message::Response(r) => {
            assert_eq!(r.id, RequestId::from("x"));
            assert_eq!(r.result.get(), r#"{"ok":true}"#);
        }
        other => panic!("{other:?}"),
    }
    match decode(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope","data":{"m":"x"}}}"#).unwrap() {
        Message::Error(e) => {
            assert_eq!(e.id, Some(RequestId::Number(2)));
            assert_eq!(e.error.code, error_codes::METHOD_NOT_FOUND);
            assert_eq!(e.error.data, Some(json!({"m": "x"})));
        }
        other => panic!("{other:?}"),
    }
    // Member order does not matter; unknown envelope members are ignored.
    let m = decode(r#"{"params":{},"method":"ping","x-trace":[1],"id":5,"jsonrpc":"2.0"}"#).unwrap();
    assert!(matches!(m, Message::Request(Request { id: RequestId::Number(5), .. })));
    assert_eq!(m.method(), Some("ping"));
    // Whitespace around the message and between tokens.
    let m = decode(" \t{ \"jsonrpc\" : \"2.0\" , \"method\" : \"tools\\/list\" , \"id\" : 1 }\r\n").unwrap();
    assert_eq!(m.method(), Some("tools/list"));
}

#[test]
fn error_responses_may_have_a_null_id() {
    let m = decode(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#).unwrap();
    let Message::Error(ErrorResponse { id: None, error }) = &m else { panic!("{m:?}") };
    assert_eq!(error.code, error_codes::PARSE_ERROR);
    assert_eq!(m.encode(), r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#);
    // A missing id on an error response reads the same.
    let m = decode(r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#).unwrap();
    assert!(matches!(m, Message::Error(ErrorResponse { id: None, .. })));
    // But not on a successful response, nor on a request.
    assert_invalid(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#);
    assert_invalid(r#"{"jsonrpc":"2.0","result":{}}"#);
    assert_invalid(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
}

#[test]
fn a_null_result_is_a_result() {
    let m = decode(r#"{"jsonrpc":"2.0","id":1,"result":null}"#).unwrap();
    let Message::Response(r) = &m else { panic!("{m:?}") };
    assert_eq!(r.result.get(), "null");
    assert_eq!(m.encode(), r#"{"jsonrpc":"2.0","id":1,"result":null}"#);
}

#[test]
fn malformed_members_are_invalid_requests() {
    // method not a string: the id is kept for the error reply.
    for method in ["1", "null", "{}", "[\"ping\"]", "true"] {
        let e = assert_invalid(&format!(r#"{{"jsonrpc":"2.0","id":4,"method":{method}}}"#));
        assert_eq!(e.id, Some(RequestId::Number(4)), "{method}");
    }
    // params must be structured.
    for params in ["\"a string\"", "1", "true", "-2.5"] {
        let e = assert_invalid(&format!(r#"{{"jsonrpc":"2.0","id":4,"method":"ping","params":{params}}}"#));
        assert_eq!(e.id, Some(RequestId::Number(4)));
        assert!(e.detail.contains("params"), "{}", e.detail);
        assert_invalid(&format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{params}}}"#));
    }
    // params null is read as absent.
    let Message::Request(r) = decode(r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":null}"#).unwrap() else {
        panic!()
    };
    assert!(r.params.is_none());
    // Conflicting members.
    for text in [
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","error":{"code":1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0"}"#,
        r#"{}"#,
    ] {
        assert_invalid(text);
    }
    // Malformed error objects keep the id.
    for error in [
        "{}",
        "{\"code\":\"x\",\"message\":\"m\"}",
        "{\"code\":1.5,\"message\":\"m\"}",
        "{\"code\":1}",
        "null",
        "\"boom\"",
    ] {
        let e = assert_invalid(&format!(r#"{{"jsonrpc":"2.0","id":9,"error":{error}}}"#));
        assert_eq!(e.id, Some(RequestId::Number(9)), "{error}");
    }
    // Duplicate members.
    assert_invalid(r#"{"jsonrpc":"2.0","jsonrpc":"2.0","method":"ping"}"#);
    assert_invalid(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#);
}

#[test]
fn deep_nesting_does_not_overflow() {
    let deep = format!(r#"{{"jsonrpc":"2.0","method":"x","params":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
    let _ = decode(&deep);
    let deep = "[".repeat(100_000);
    assert_eq!(decode_err(&deep).kind, DecodeErrorKind::Parse);
    let deep = format!("{}{}", "{\"a\":".repeat(50_000), "}".repeat(50_000));
    let _ = decode(&deep);
}

// ---------------------------------------------------------------------------------------------
// Encoding.
// ---------------------------------------------------------------------------------------------

fn round_trip(m: &Message) -> String {
    let line = m.encode();
    let again = Message::decode(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
    assert_eq!(again.encode(), line);
    line
}

#[test]
fn encode_then_decode_is_the_identity() {
    let raw = |v: Value| to_raw(&v).unwrap();
    let lines = [
        round_trip(&Message::Request(Request { id: 1.into(), method: "tools/list".into(), params: None })),
        round_trip(&Message::Request(Request {
            id: "req-\"1\"".into(),
            method: "tools/call".into(),
            params: Some(raw(json!({"name": "t", "arguments": {"a": [1, 2.5, null, "ü"]}}))),
        })),
        round_trip(&Message::Notification(Notification { method: "notifications/initialized".into(), params: None })),
        round_trip(&Message::Notification(Notification { method: "x".into(), params: Some(empty_object()) })),
        round_trip(&Message::Response(Response { id: (-3).into(), result: raw(json!({"tools": []})) })),
        round_trip(&Message::Response(Response { id: "".into(), result: raw(json!(null)) })),
        round_trip(&Message::Error(ErrorResponse { id: Some(2.into()), error: ErrorObject::new(-32000, "custom") })),
        round_trip(&Message::Error(ErrorResponse {
            id: None,
            error: ErrorObject { code: -32700, message: "Parse error".into(), data: Some(json!([1])) },
        })),
    ];
    for line in &lines {
        assert!(!line.contains('\n') && line.starts_with(r#"{"jsonrpc":"2.0","#), "{line}");
    }
    assert_eq!(lines[0], r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    assert_eq!(
        lines[1],
        r#"{"jsonrpc":"2.0","id":"req-\"1\"","method":"tools/call","params":{"name":"t","arguments":{"a":[1,2.5,null,"ü"]}}}"#
    );
}

#[test]
fn re_encoding_a_pretty_printed_message_stays_on_one_line() {
    let pretty = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"method\": \"tools/call\",\n  \"params\": {\n    \"name\": \"a b\",\n    \"arguments\": { \"text\": \"line1\\nline2 \\\" {\" }\r\n  }\n}\n";
    let m = decode(pretty).unwrap();
    let line = m.encode();
    assert_eq!(
        line,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a b","arguments":{"text":"line1\nline2 \" {"}}}"#
    );
    let pretty_result = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\n[ 1,\n 2 ]}";
    assert_eq!(decode(pretty_result).unwrap().encode(), r#"{"jsonrpc":"2.0","id":2,"result":[1,2]}"#);
}

#[test]
fn decode_errors_display_their_class() {
    let e = decode_err("{");
    assert!(e.to_string().starts_with("not JSON"), "{e}");
    let e = decode_err("[]");
    assert!(e.to_string().starts_with("not a JSON-RPC 2.0 message"), "{e}");
    assert_eq!(RequestId::from("a").to_string(), "\"a\"");
    assert_eq!(RequestId::Number(3).to_string(), "3");
}

/// A request or notification packed with values is refused with its id (so it is answered);
/// a response is left raw (its result is checked where it is read).
#[test]
fn a_dense_request_is_refused_with_its_id_and_a_response_is_left_raw() {
    let dense = format!("[{}0]", "[[0]],".repeat(1 << 20));
    let e = assert_kind(
        &format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"t","arguments":{{"x":{dense}}}}}}}"#
        ),
        DecodeErrorKind::InvalidRequest,
    );
    assert_eq!(e.id, Some(RequestId::Number(7)));
    assert!(e.to_string().contains("tools/call refused") && e.to_string().contains("JSON values"), "{e}");
    let e = decode_err(&format!(r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":{dense}}}}}"#));
    assert_eq!((e.kind, e.id), (DecodeErrorKind::InvalidRequest, None));
    assert!(matches!(
        decode(&format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"x":{dense}}}}}"#)),
        Ok(Message::Response(_))
    ));
    // An error's data is left out, its code and message kept.
    let Ok(Message::Error(e)) =
        decode(&format!(r#"{{"jsonrpc":"2.0","id":7,"error":{{"code":-32000,"message":"boom","data":{dense}}}}}"#))
    else {
        panic!("an error response")
    };
    assert_eq!((e.id, e.error.code, e.error.message.as_str()), (Some(RequestId::Number(7)), -32000, "boom"));
    let note = e.error.data.unwrap();
    assert!(note.as_str().unwrap().starts_with("(left out by the receiver: it packs"), "{note}");
    // A refused line shaped as a response gives its id, read raw.
    let refused = format!(r#"{{"jsonrpc":"2.0","id":"r","result":{dense},"extra":{dense}}}"#);
    assert_eq!(mcp_protocol::refused_response_id(&refused), Some(Some(RequestId::from("r"))));
    assert_eq!(mcp_protocol::refused_response_id(r#"{"error":{},"id":{"x":1}}"#), Some(None));
    assert_eq!(mcp_protocol::refused_response_id(r#"{"method":"m","result":1,"id":1}"#), None);
    assert_eq!(mcp_protocol::refused_response_id(r#"{"id":1}"#), None);
    // As leniently as a map: a repeated member (the last id kept), a `jsonrpc` of any kind.
    let repeated = r#"{"jsonrpc":2.0,"id":1,"result":1,"result":2,"id":"b"}"#;
    assert_eq!(mcp_protocol::refused_response_id(repeated), Some(Some(RequestId::from("b"))));
    assert_eq!(mcp_protocol::refused_response_id("[1]"), None);
    // The same shape, small, is a request like any other.
    let small =
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"x":[[[0]],[[0]]]}}}"#;
    assert!(matches!(decode(small), Ok(Message::Request(_))));
}

// ---------------------------------------------------------------------------------------------
// Unknown fields survive a round trip through the types.
// ---------------------------------------------------------------------------------------------

#[test]
fn unknown_fields_survive_round_trips() {
    let tool = json!({
        "name": "t",
        "inputSchema": {"type": "object", "$defs": {"x": {}}, "additionalProperties": false},
        "execution": {"taskSupport": "optional"},
        "x-custom": [1, {"deep": true}],
        "annotations": {"readOnlyHint": true, "x-hint": "h"},
        "icons": [{"src": "data:image/png;base64,AA==", "theme": "dark"}],
        "_meta": {"vendor/k": 1}
    });
    let decoded: Tool = serde_json::from_value(tool.clone()).unwrap();
    assert_eq!(decoded.extra.get("execution"), Some(&json!({"taskSupport": "optional"})));
    assert_eq!(decoded.annotations.as_ref().unwrap().read_only_hint, Some(true));
    assert_eq!(serde_json::to_value(&decoded).unwrap(), tool);

    let result = json!({
        "content": [
            {"type": "text", "text": "hi", "_meta": {"m": 1}},
            {"type": "resource_link", "uri": "file:///a", "name": "a", "size": 10, "icons": []},
            {"type": "resource", "resource": {"uri": "file:///b", "text": "b", "x": 1}}
        ],
        "structuredContent": [1, "two"],
        "resultType": "complete",
        "isError": false
    });
    let decoded: CallToolResult = serde_json::from_value(result.clone()).unwrap();
    assert_eq!(decoded.joined_text(), "hi");
    assert!(!decoded.is_error());
    assert_eq!(serde_json::to_value(&decoded).unwrap(), result);

    let init = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": true, "x": 1}, "tasks": {"list": {}}},
        "serverInfo": {"name": "s", "version": "1", "websiteUrl": "https://example.com", "icons": []},
        "x-top": null
    });
    let decoded: InitializeResult = serde_json::from_value(init.clone()).unwrap();
    assert_eq!(decoded.extra.get("x-top"), Some(&Value::Null));
    assert_eq!(serde_json::to_value(&decoded).unwrap(), init);

    let caps = json!({"roots": {"listChanged": false, "x": 1}, "tasks": {}, "extensions": {"a/b": {}}});
    let decoded: ClientCapabilities = serde_json::from_value(caps.clone()).unwrap();
    assert_eq!(serde_json::to_value(&decoded).unwrap(), caps);

    let params = json!({"name": "t", "arguments": {}, "task": {"ttl": 1000}, "_meta": {"progressToken": 3}});
    let decoded: CallToolRequestParams = serde_json::from_value(params.clone()).unwrap();
    assert_eq!(serde_json::to_value(&decoded).unwrap(), params);
}

#[test]
fn explicit_nulls_survive_round_trips() {
    let line = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"m","data":null}}"#;
    let m = decode(line).unwrap();
    let Message::Error(e) = &m else { panic!("{m:?}") };
    assert_eq!(e.error.data, Some(Value::Null));
    assert_eq!(m.encode(), line);
    let result = json!({"content": [], "structuredContent": null});
    let decoded: CallToolResult = serde_json::from_value(result.clone()).unwrap();
    assert_eq!(decoded.structured_content, Some(Value::Null));
    assert_eq!(serde_json::to_value(&decoded).unwrap(), result);
    // Absent stays absent.
    let decoded: CallToolResult = serde_json::from_value(json!({"content": []})).unwrap();
    assert_eq!(decoded.structured_content, None);
    assert_eq!(serde_json::to_value(&decoded).unwrap(), json!({"content": []}));
}

#[test]
fn integral_numbers_are_written_back_as_integers() {
    let progress = json!({"progressToken": 1, "progress": 50, "total": 100});
    let decoded: mcp_protocol::ProgressNotificationParams = serde_json::from_value(progress.clone()).unwrap();
    assert_eq!(serde_json::to_string(&decoded).unwrap(), r#"{"progressToken":1,"progress":50,"total":100}"#);
    let fractional = json!({"progressToken": "t", "progress": 0.5, "total": 1.0e20});
    let decoded: mcp_protocol::ProgressNotificationParams = serde_json::from_value(fractional).unwrap();
    assert_eq!(serde_json::to_string(&decoded).unwrap(), r#"{"progressToken":"t","progress":0.5,"total":1e+20}"#);
    let annotations: mcp_protocol::Annotations = serde_json::from_value(json!({"priority": 1})).unwrap();
    assert_eq!(serde_json::to_value(&annotations).unwrap(), json!({"priority": 1}));
}

#[test]
fn an_unknown_content_type_is_kept_and_a_missing_type_rejected() {
    let video = serde_json::from_value::<ContentBlock>(json!({"type": "video", "url": "x"})).unwrap();
    assert!(matches!(video, ContentBlock::Other(ref m) if m["url"] == "x"));
    assert!(serde_json::from_value::<ContentBlock>(json!({"text": "no type"})).is_err());
}

// ---------------------------------------------------------------------------------------------
// Snapshots of the exact wire form.
// ---------------------------------------------------------------------------------------------

fn snapshot_session() -> ClientSession<()> {
    let mut info = Implementation::new("mcp-harness", "0.1.0");
    info.title = Some("MCP Harness".into());
    let capabilities = ClientCapabilities {
        roots: Some(RootsCapability { list_changed: Some(true), extra: Extra::new() }),
        ..Default::default()
    };
    ClientSession::new(SessionConfig::new(info, capabilities))
}

#[test]
fn wire_snapshots() {
    let mut session = snapshot_session();
    let (_, initialize) = session.start_initialize(()).unwrap();
    insta::assert_snapshot!("initialize_request", initialize);

    let result = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}});
    let initialized = session.finish_initialize(&to_raw(&result).unwrap()).unwrap();
    insta::assert_snapshot!("initialized_notification", initialized);

    let mut arguments = serde_json::Map::new();
    arguments.insert("city".into(), json!("Paris"));
    let call = CallToolRequestParams {
        name: "get_weather".into(),
        arguments: Some(arguments),
        meta: Some(serde_json::from_value(json!({"progressToken": 2})).unwrap()),
        extra: Extra::new(),
    };
    let (id, line) = session.start_request(methods::TOOLS_CALL, Some(&call), ()).unwrap();
    insta::assert_snapshot!("tools_call_request", line);

    let ((), cancelled) = session.cancel(&id, "user pressed stop").unwrap();
    insta::assert_snapshot!("cancelled_notification", cancelled.unwrap());

    let mut error = ErrorObject::new(error_codes::INVALID_PARAMS, "Invalid params: missing field `messages`");
    error.data = Some(json!({"method": "sampling/createMessage"}));
    insta::assert_snapshot!("error_response", encode_error(RequestId::from("srv-1"), error));
}

#[test]
fn encode_request_escapes_what_needs_escaping() {
    use mcp_protocol::encode_request;
    for method in ["tools/call", "we\"ird", "back\\slash", "tab\there", "ünïcode", "nul\u{0}", ""] {
        for id in [RequestId::Number(-7), RequestId::Number(i64::MAX), RequestId::String("a\"b".into())] {
            let line = encode_request(&id, method, Some(&json!({"x": [1, "two"]}))).unwrap();
            assert!(!line.contains('\n'));
            let Message::Request(request) = Message::decode_str(&line).unwrap() else { panic!("{line}") };
            assert_eq!(request.id, id);
            assert_eq!(request.method, method);
            assert_eq!(request.params.unwrap().get(), r#"{"x":[1,"two"]}"#);
        }
    }
    let line = encode_request::<Value>(&RequestId::Number(1), "ping", None).unwrap();
    assert_eq!(line, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
}
