//! The sans-I/O client session: ids, pending requests, lifecycle, and classification of what the
//! server sends.

use mcp_protocol::encode_result;
use mcp_protocol::methods;
use mcp_protocol::{
    ClientCapabilities, ClientSession, ElicitAction, ElicitResult, ErrorObject, Implementation, Incoming, Message,
    ProtocolVersion, RequestId, ServerNotification, ServerRequest, SessionConfig, SessionError, SessionState,
};
use mcp_protocol::{error_codes, to_raw};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn config() -> SessionConfig {
    SessionConfig::new(Implementation::new("test-client", "1.0"), ClientCapabilities::default())
}

fn msg(text: &str) -> Message {
    Message::decode_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn init_result(version: &str) -> Box<serde_json::value::RawValue> {
    to_raw(&json!({"protocolVersion": version, "capabilities": {"tools": {"listChanged": true}}, "serverInfo": {"name": "srv", "version": "2"}})).unwrap()
}

fn ready<P>(payload: P) -> ClientSession<P> {
    let mut s = ClientSession::new(config());
    let (id, _) = s.start_initialize(payload).unwrap();
    let Incoming::Response { outcome: Ok(result), .. } =
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#, init_result("2025-06-18").get())))
    else {
        panic!("no initialize result");
    };
    s.finish_initialize(&result).unwrap();
    assert_eq!(s.state(), SessionState::Ready);
    s
}

fn parse(line: &str) -> Value {
    assert!(!line.contains('\n'), "{line}");
    serde_json::from_str(line).unwrap()
}

#[test]
fn the_handshake_moves_to_ready() {
    let mut s: ClientSession<&str> = ClientSession::new(config());
    assert_eq!(s.state(), SessionState::Initializing);
    assert_eq!(s.protocol_version(), None);
    let (id, line) = s.start_initialize("init").unwrap();
    let request = parse(&line);
    assert_eq!(request["method"], "initialize");
    assert_eq!(request["params"]["protocolVersion"], ProtocolVersion::LATEST.as_str());
    assert_eq!(request["params"]["clientInfo"], json!({"name": "test-client", "version": "1.0"}));
    assert_eq!(request["params"]["capabilities"], json!({}));
    assert!(matches!(s.start_initialize("again"), Err(SessionError::AlreadyInitialized)));
    assert_eq!(s.pending_count(), 1);
    let Incoming::Response { id: got, method, payload, outcome: Ok(result) } =
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#, init_result("2025-03-26").get())))
    else {
        panic!()
    };
    assert_eq!((got, method.as_str(), payload), (id, "initialize", "init"));
    let initialized = s.finish_initialize(&result).unwrap();
    assert_eq!(initialized.text(), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(s.state(), SessionState::Ready);
    assert_eq!(s.protocol_version(), Some(ProtocolVersion::V2025_03_26));
    assert_eq!(s.server().unwrap().server_info.name, "srv");
    assert!(matches!(s.finish_initialize(&result), Err(SessionError::AlreadyInitialized)));
    assert!(matches!(s.start_initialize("late"), Err(SessionError::AlreadyInitialized)));
}

#[test]
fn a_bad_initialize_result_leaves_the_session_initializing() {
    let mut s: ClientSession<()> = ClientSession::new(config());
    s.start_initialize(()).unwrap();
    let e = s.finish_initialize(&to_raw(&json!({"protocolVersion": 1})).unwrap()).unwrap_err();
    assert!(matches!(e, SessionError::BadInitializeResult(_)), "{e}");
    // Unknown members packed with values (kept as values, up to ~100x their text) are refused.
    let dense = format!(
        r#"{{"protocolVersion":"2025-06-18","capabilities":{{}},"serverInfo":{{"name":"s","version":"1"}},"x":[{}0]}}"#,
        "[[0]],".repeat(1 << 20)
    );
    let e = s.finish_initialize(&serde_json::value::RawValue::from_string(dense).unwrap()).unwrap_err();
    assert!(matches!(e, SessionError::DenseInitializeResult(_)), "{e}");
    assert!(e.to_string().contains("JSON values"), "{e}");
    let e = s.finish_initialize(&init_result("2099-01-01")).unwrap_err();
    let SessionError::Negotiation(n) = &e else { panic!("{e}") };
    assert_eq!(n.answered, "2099-01-01");
    assert!(e.to_string().contains("2099-01-01") && e.to_string().contains(ProtocolVersion::LATEST.as_str()), "{e}");
    assert_eq!(s.state(), SessionState::Initializing);
    assert_eq!(s.protocol_version(), None);
    // Offering an older revision refuses a newer answer.
    let mut s: ClientSession<()> =
        ClientSession::new(SessionConfig { offered_version: ProtocolVersion::V2025_03_26, ..config() });
    let (_, line) = s.start_initialize(()).unwrap();
    assert_eq!(parse(&line)["params"]["protocolVersion"], "2025-03-26");
    assert!(matches!(s.finish_initialize(&init_result("2025-06-18")), Err(SessionError::Negotiation(_))));
    s.finish_initialize(&init_result("2024-11-05")).unwrap();
}

#[test]
fn ids_increase_and_are_unique() {
    let mut s = ready(0_usize);
    let mut ids = vec![];
    for i in 0..50 {
        let next = s.peek_next_id();
        let (id, line) = s.start_request(methods::TOOLS_LIST, None::<&()>, i).unwrap();
        assert_eq!(id, next);
        let request = parse(&line);
        assert_eq!(request["id"], serde_json::to_value(&id).unwrap());
        assert_eq!(request.get("params"), None);
        ids.push(id);
    }
    assert!(ids.windows(2).all(|w| match (&w[0], &w[1]) {
        (RequestId::Number(a), RequestId::Number(b)) => a < b,
        _ => false,
    }));
    // The initialize request took an id too.
    assert!(!ids.contains(&RequestId::Number(1)));
    assert_eq!(s.pending_count(), 50);
}

#[test]
fn responses_are_matched_to_their_pending_payloads() {
    let mut s = ready("init");
    let (a, _) = s.start_request(methods::TOOLS_LIST, None::<&()>, "a").unwrap();
    let (b, _) = s.start_request(methods::TOOLS_CALL, Some(&json!({"name": "t"})), "b").unwrap();
    let (c, _) = s.start_request(methods::PING, None::<&()>, "c").unwrap();
    *s.pending_mut(&c).unwrap() = "c2";
    assert_eq!(s.pending_count(), 3);

    let Incoming::Response { id, method, payload, outcome } =
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{b},"error":{{"code":-32602,"message":"bad"}}}}"#)))
    else {
        panic!()
    };
    assert_eq!((id, method.as_str(), payload), (b.clone(), "tools/call", "b"));
    assert_eq!(outcome.unwrap_err(), ErrorObject::new(error_codes::INVALID_PARAMS, "bad"));

    let Incoming::Response { payload, outcome, .. } =
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{c},"result":{{}}}}"#)))
    else {
        panic!()
    };
    assert_eq!((payload, outcome.unwrap().get()), ("c2", "{}"));

    let Incoming::Response { method, payload, outcome, .. } =
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{a},"result":{{"tools":[]}}}}"#)))
    else {
        panic!()
    };
    assert_eq!((method.as_str(), payload, outcome.unwrap().get()), ("tools/list", "a", r#"{"tools":[]}"#));
    assert_eq!(s.pending_count(), 0);
}

#[test]
fn unmatched_responses_are_classified() {
    let mut s = ready(());
    let (id, _) = s.start_request(methods::TOOLS_LIST, None::<&()>, ()).unwrap();
    let RequestId::Number(n) = id else { panic!() };
    // An id never issued, and the same number as a string.
    let Incoming::UnmatchedResponse { id: Some(RequestId::Number(999)) } =
        s.receive(msg(r#"{"jsonrpc":"2.0","id":999,"result":{}}"#))
    else {
        panic!()
    };
    let Incoming::UnmatchedResponse { id: Some(RequestId::String(sid)) } =
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":"{n}","result":{{}}}}"#)))
    else {
        panic!()
    };
    assert_eq!(sid, n.to_string());
    assert_eq!(s.pending_count(), 1);
    // A duplicate answer: the first matches, the second does not.
    assert!(matches!(
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{}}}}"#))),
        Incoming::Response { .. }
    ));
    assert!(matches!(
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{n},"error":{{"code":1,"message":"m"}}}}"#))),
        Incoming::UnmatchedResponse { id: Some(_) }
    ));
    // An error without an id.
    let Incoming::ServerReportedError(e) =
        s.receive(msg(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#))
    else {
        panic!()
    };
    assert_eq!(e.code, error_codes::PARSE_ERROR);
}

#[test]
fn only_initialize_and_ping_may_be_sent_before_ready() {
    let mut s: ClientSession<()> = ClientSession::new(config());
    for method in [methods::TOOLS_LIST, methods::TOOLS_CALL, methods::RESOURCES_READ, methods::PROMPTS_GET, "custom/x"]
    {
        let e = s.start_request(method, None::<&()>, ()).unwrap_err();
        let SessionError::NotReady { method: m } = &e else { panic!("{e}") };
        assert_eq!(m, method);
        assert!(e.to_string().contains(method), "{e}");
    }
    // initialize goes through start_initialize, not start_request.
    assert!(matches!(s.start_request(methods::INITIALIZE, None::<&()>, ()), Err(SessionError::NotReady { .. })));
    assert_eq!(s.pending_count(), 0);
    let (_, line) = s.start_request(methods::PING, None::<&()>, ()).unwrap();
    assert_eq!(parse(&line)["method"], "ping");
    s.start_initialize(()).unwrap();
    assert_eq!(s.pending_count(), 2);
}

#[test]
fn cancel_sends_a_cancelled_notification_except_for_initialize() {
    let mut s: ClientSession<&str> = ClientSession::new(config());
    let (init, _) = s.start_initialize("init").unwrap();
    assert_eq!(s.cancel(&init, "timeout"), Some(("init", None)));
    assert_eq!(s.pending_count(), 0);

    let mut s = ready("init");
    let (id, _) = s.start_request(methods::TOOLS_CALL, Some(&json!({"name": "slow"})), "call").unwrap();
    let (payload, line) = s.cancel(&id, "user pressed stop").unwrap();
    assert_eq!(payload, "call");
    let notification = parse(&line.unwrap());
    assert_eq!(
        notification,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": serde_json::to_value(&id).unwrap(), "reason": "user pressed stop"}})
    );
    assert_eq!(s.cancel(&id, "again"), None);
    assert!(matches!(
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#))),
        Incoming::UnmatchedResponse { .. }
    ));
    assert_eq!(s.cancel(&RequestId::from("never"), "x"), None);
}

#[test]
fn close_drains_pending_requests() {
    let mut s = ready("init");
    let (a, _) = s.start_request(methods::TOOLS_LIST, None::<&()>, "a").unwrap();
    let (b, _) = s.start_request(methods::PING, None::<&()>, "b").unwrap();
    let mut drained = s.close();
    drained.sort_by(|x, y| x.0.cmp(&y.0));
    let drained: Vec<(RequestId, String, &str)> =
        drained.into_iter().map(|(id, p)| (id, p.method, p.payload)).collect();
    assert_eq!(drained, vec![(a.clone(), "tools/list".to_owned(), "a"), (b, "ping".to_owned(), "b")]);
    assert_eq!(s.state(), SessionState::Closed);
    assert_eq!(s.pending_count(), 0);
    assert!(matches!(s.start_request(methods::PING, None::<&()>, "c"), Err(SessionError::Closed)));
    assert_eq!(s.cancel(&a, "late"), None);
    assert!(s.close().is_empty());
    assert!(matches!(
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{a},"result":{{}}}}"#))),
        Incoming::UnmatchedResponse { .. }
    ));
}

#[test]
fn closing_before_the_handshake_refuses_everything_as_closed() {
    let mut s: ClientSession<()> = ClientSession::new(config());
    s.start_initialize(()).unwrap();
    assert_eq!(s.close().len(), 1);
    assert!(matches!(s.start_request(methods::PING, None::<&()>, ()), Err(SessionError::Closed)));
    assert!(matches!(s.start_initialize(()), Err(SessionError::Closed)));
    assert!(matches!(s.finish_initialize(&init_result("2025-06-18")), Err(SessionError::Closed)));
    assert_eq!(s.state(), SessionState::Closed);
}

fn server_request(s: &mut ClientSession<()>, text: &str) -> (RequestId, ServerRequest) {
    match s.receive(msg(text)) {
        Incoming::Request { id, request } => (id, request),
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn server_requests_are_classified() {
    let mut s = ready(());
    assert_eq!(
        server_request(&mut s, r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#),
        (RequestId::from("p"), ServerRequest::Ping)
    );
    assert_eq!(
        server_request(&mut s, r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{}}}"#).1,
        ServerRequest::Ping
    );
    assert_eq!(server_request(&mut s, r#"{"jsonrpc":"2.0","id":2,"method":"roots/list"}"#).1, ServerRequest::ListRoots);

    let (_, request) = server_request(
        &mut s,
        r#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":100,"systemPrompt":"be brief","x":1}}"#,
    );
    let ServerRequest::CreateMessage(params) = request else { panic!("{request:?}") };
    assert_eq!((params.max_tokens, params.messages[0].role.as_str()), (100, "user"));
    assert_eq!(params.system_prompt.as_deref(), Some("be brief"));
    assert_eq!(params.extra.get("x"), Some(&json!(1)));

    let (_, request) = server_request(
        &mut s,
        r#"{"jsonrpc":"2.0","id":4,"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}"#,
    );
    let ServerRequest::Elicit(params) = request else { panic!("{request:?}") };
    assert_eq!((params.message.as_str(), params.mode.as_deref()), ("Name?", None));
    let (_, request) = server_request(
        &mut s,
        r#"{"jsonrpc":"2.0","id":5,"method":"elicitation/create","params":{"mode":"url","message":"Go","url":"https://x","elicitationId":"e1"}}"#,
    );
    let ServerRequest::Elicit(params) = request else { panic!("{request:?}") };
    assert_eq!((params.url.as_deref(), params.elicitation_id.as_deref()), (Some("https://x"), Some("e1")));

    let (id, request) = server_request(&mut s, r#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#);
    assert_eq!((id, request), (RequestId::Number(6), ServerRequest::Unknown { method: "tools/list".into() }));
    // Server requests do not touch the pending table.
    assert_eq!(s.pending_count(), 0);
}

#[test]
fn server_requests_with_invalid_params_get_an_invalid_params_reply() {
    let mut s = ready(());
    for (id, text) in [
        ("7", r#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"messages":"no"}}"#),
        ("8", r#"{"jsonrpc":"2.0","id":8,"method":"sampling/createMessage"}"#),
        ("\"e\"", r#"{"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{}}"#),
        ("9", r#"{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":[1]}"#),
    ] {
        let Incoming::InvalidRequest { reply } = s.receive(msg(text)) else { panic!("{text}") };
        let reply = parse(&reply);
        assert_eq!(reply["id"], serde_json::from_str::<Value>(id).unwrap(), "{text}");
        assert_eq!(reply["error"]["code"], error_codes::INVALID_PARAMS, "{text}");
        assert!(reply["error"]["message"].as_str().unwrap().starts_with("Invalid params"), "{reply}");
        assert!(matches!(Message::decode_str(&serde_json::to_string(&reply).unwrap()).unwrap(), Message::Error(_)));
    }
}

fn notification(s: &mut ClientSession<()>, text: &str) -> ServerNotification {
    match s.receive(msg(text)) {
        Incoming::Notification(n) => n,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn notifications_are_classified() {
    let mut s = ready(());
    let n = |s: &mut ClientSession<()>, method: &str| {
        notification(s, &format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#))
    };
    assert!(matches!(n(&mut s, methods::TOOLS_LIST_CHANGED), ServerNotification::ToolsListChanged));
    assert!(matches!(n(&mut s, methods::PROMPTS_LIST_CHANGED), ServerNotification::PromptsListChanged));
    assert!(matches!(n(&mut s, methods::RESOURCES_LIST_CHANGED), ServerNotification::ResourcesListChanged));
    assert!(matches!(
        notification(
            &mut s,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"x":1}}}"#
        ),
        ServerNotification::ToolsListChanged
    ));

    let ServerNotification::Progress(p) = notification(
        &mut s,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":50,"total":100,"message":"half"}}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        (p.progress_token, p.progress, p.total, p.message.as_deref()),
        (RequestId::from("t"), 50.0, Some(100.0), Some("half"))
    );
    let ServerNotification::Progress(p) = notification(
        &mut s,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":0.5}}"#,
    ) else {
        panic!()
    };
    assert_eq!((p.progress_token, p.progress), (RequestId::Number(3), 0.5));

    let ServerNotification::Cancelled(c) = notification(
        &mut s,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"123","reason":"User requested cancellation"}}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        (c.request_id, c.reason.as_deref()),
        (Some(RequestId::from("123")), Some("User requested cancellation"))
    );

    let ServerNotification::Log(l) = notification(
        &mut s,
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","logger":"db","data":{"e":1}}}"#,
    ) else {
        panic!()
    };
    assert_eq!((l.level.as_str(), l.logger.as_deref(), l.data), ("error", Some("db"), json!({"e": 1})));

    let ServerNotification::ResourceUpdated(u) = notification(
        &mut s,
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a"}}"#,
    ) else {
        panic!()
    };
    assert_eq!(u.uri, "file:///a");

    // Unknown methods and known ones with unreadable params are kept raw.
    let ServerNotification::Other { method, params } =
        notification(&mut s, r#"{"jsonrpc":"2.0","method":"notifications/custom","params":{"a":1}}"#)
    else {
        panic!()
    };
    assert_eq!((method.as_str(), params.unwrap().get()), ("notifications/custom", r#"{"a":1}"#));
    let ServerNotification::Other { method, params } =
        notification(&mut s, r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":"half"}}"#)
    else {
        panic!()
    };
    assert_eq!((method.as_str(), params.unwrap().get()), ("notifications/progress", r#"{"progress":"half"}"#));
    assert!(matches!(
        notification(&mut s, r#"{"jsonrpc":"2.0","method":"notifications/message"}"#),
        ServerNotification::Other { params: None, .. }
    ));
}

#[test]
fn answers_to_server_requests_are_encoded() {
    let line = encode_result(
        RequestId::from("e"),
        &ElicitResult { action: ElicitAction::Decline, content: None, extra: Default::default() },
    );
    assert_eq!(line, r#"{"jsonrpc":"2.0","id":"e","result":{"action":"decline"}}"#);
    let line = ClientSession::<()>::encode_result(RequestId::Number(1), &json!({}));
    assert_eq!(line, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let line = ClientSession::<()>::encode_error(
        RequestId::Number(2),
        ErrorObject::new(error_codes::METHOD_NOT_FOUND, "Method not found"),
    );
    assert_eq!(line, r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not found"}}"#);
}

#[test]
fn discover_makes_a_stateless_session_whose_requests_carry_the_envelope() {
    let mut s: ClientSession<()> = ClientSession::new(config());
    let (id, line) = s.start_discover(()).unwrap();
    let sent = parse(&line);
    assert_eq!(sent["method"], "server/discover");
    assert_eq!(sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_eq!(sent["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"], "test-client");
    let answer = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "9"}}});
    let Incoming::Response { outcome: Ok(result), .. } =
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{answer}}}"#)))
    else {
        panic!("no discover result");
    };
    s.finish_discover(&result).unwrap();
    assert_eq!(s.state(), SessionState::Ready);
    assert_eq!(s.protocol_version(), Some(ProtocolVersion::STATELESS));
    assert_eq!(s.server().unwrap().server_info.name, "modern");
    let (_, line) =
        s.start_request("tools/call", Some(&json!({"name": "echo", "_meta": {"progressToken": 7}})), ()).unwrap();
    let sent = parse(&line);
    assert_eq!(sent["params"]["name"], "echo");
    assert_eq!(sent["params"]["_meta"]["progressToken"], 7);
    assert_eq!(sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert!(sent["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].is_object());
}

#[test]
fn a_discover_answer_without_the_stateless_revision_is_refused_and_initialize_may_follow() {
    let mut s: ClientSession<()> = ClientSession::new(config());
    let (id, _) = s.start_discover(()).unwrap();
    let answer = json!({"supportedVersions": ["2025-11-25"], "capabilities": {}});
    let Incoming::Response { outcome: Ok(result), .. } =
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{answer}}}"#)))
    else {
        panic!("no discover result");
    };
    assert!(matches!(s.finish_discover(&result), Err(SessionError::Negotiation(_))));
    assert_eq!(s.state(), SessionState::Initializing);
    let (_, line) = s.start_initialize(()).unwrap();
    assert!(parse(&line)["params"].get("_meta").is_none(), "the handshake era has no envelope");
}

#[test]
fn a_lost_session_is_restored_by_a_new_handshake_and_learns_what_the_server_says_now() {
    let mut s = ready("init");
    let (pending, _) = s.start_request(methods::TOOLS_CALL, Some(&json!({"name": "t"})), "call").unwrap();
    assert!(s.restart(), "an open session is lost");
    assert!(!s.restart(), "one loss, one restore");
    assert_eq!(s.state(), SessionState::Initializing);
    assert!(s.is_restoring());
    // Until the new handshake nothing else goes out, not even a ping.
    for method in [methods::TOOLS_LIST, methods::PING] {
        let refused = s.start_request(method, None::<&()>, "early").unwrap_err();
        assert!(matches!(refused, SessionError::NotReady { .. }), "{method}: {refused}");
    }
    // What was negotiated before says which handshake to make again; the request in flight stays.
    assert_eq!(s.protocol_version(), Some(ProtocolVersion::V2025_06_18));
    assert_eq!(s.pending_method(&pending), Some(methods::TOOLS_CALL));
    let (id, line) = s.start_initialize("again").unwrap();
    assert_eq!(parse(&line)["method"], "initialize");
    let answer = json!({"protocolVersion": "2025-03-26", "capabilities": {}, "instructions": "the new session",
                        "serverInfo": {"name": "srv", "version": "3"}});
    let Incoming::Response { outcome: Ok(result), payload, .. } =
        s.receive(msg(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{answer}}}"#)))
    else {
        panic!("no initialize result");
    };
    assert_eq!(payload, "again");
    s.finish_initialize(&result).unwrap();
    assert_eq!(s.state(), SessionState::Ready);
    assert!(!s.is_restoring());
    assert_eq!(s.protocol_version(), Some(ProtocolVersion::V2025_03_26));
    let server = s.server().unwrap();
    assert_eq!((server.server_info.version.as_str(), server.instructions.as_deref()), ("3", Some("the new session")));
    assert!(server.capabilities.tools.is_none());
    s.start_request(methods::PING, None::<&()>, "after").unwrap();
}

#[test]
fn only_an_open_session_can_be_lost() {
    let mut opening: ClientSession<()> = ClientSession::new(config());
    assert!(!opening.restart());
    assert!(!opening.is_restoring());
    opening.start_request(methods::PING, None::<&()>, ()).unwrap();
    let mut closed = ready(());
    closed.close();
    assert!(!closed.restart());
    assert_eq!(closed.state(), SessionState::Closed);
    // A lost session that closes is closed, not restoring.
    let mut lost = ready(());
    assert!(lost.restart());
    lost.close();
    assert!(!lost.is_restoring());
    assert!(matches!(lost.start_initialize(()), Err(SessionError::Closed)));
}
