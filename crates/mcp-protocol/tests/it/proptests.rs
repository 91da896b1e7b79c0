//! Property tests: the decoder never panics, and encode → decode → encode is stable.

use mcp_protocol::to_raw;
use mcp_protocol::{ErrorObject, ErrorResponse, Message, Notification, Request, RequestId, Response};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("\\PC{0,8}", inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn arb_id() -> impl Strategy<Value = RequestId> {
    prop_oneof![any::<i64>().prop_map(RequestId::Number), "\\PC{0,16}".prop_map(RequestId::String)]
}

fn arb_structured() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::collection::vec(arb_json(), 0..4).prop_map(Value::Array),
        prop::collection::vec(("[a-zA-Z_]{1,8}", arb_json()), 0..4)
            .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
    ]
}

/// A plausible or arbitrary value for each envelope member, each possibly absent.
fn arb_envelope() -> impl Strategy<Value = String> {
    let member = |plausible: BoxedStrategy<Value>| prop::option::of(prop_oneof![3 => plausible, 1 => arb_json()]);
    (
        member(prop_oneof![Just(Value::from("2.0")), Just(Value::from("1.0"))].boxed()),
        member(
            prop_oneof![any::<i64>().prop_map(Value::from), "[a-z0-9]{0,6}".prop_map(Value::from), Just(Value::Null)]
                .boxed(),
        ),
        member("[a-z/_]{1,20}".prop_map(Value::from).boxed()),
        member(arb_structured().boxed()),
        member(arb_json().boxed()),
        member(
            (any::<i32>(), "\\PC{0,10}", prop::option::of(arb_json()))
                .prop_map(|(code, message, data)| {
                    let mut error = serde_json::json!({"code": code, "message": message});
                    if let Some(data) = data {
                        error["data"] = data;
                    }
                    error
                })
                .boxed(),
        ),
        prop::collection::vec(("x-[a-z]{1,4}", arb_json()), 0..2),
    )
        .prop_map(|(jsonrpc, id, method, params, result, error, extra)| {
            let mut envelope = Map::new();
            for (key, value) in [
                ("jsonrpc", jsonrpc),
                ("id", id),
                ("method", method),
                ("params", params),
                ("result", result),
                ("error", error),
            ] {
                if let Some(value) = value {
                    envelope.insert(key.to_owned(), value);
                }
            }
            envelope.extend(extra);
            Value::Object(envelope).to_string()
        })
}

fn arb_message() -> impl Strategy<Value = Message> {
    let raw = |v: Value| to_raw(&v).unwrap();
    let method = "[a-zA-Z/_]{1,24}";
    prop_oneof![
        (arb_id(), method, prop::option::of(arb_structured())).prop_map(move |(id, method, params)| {
            Message::Request(Request { id, method, params: params.map(raw) })
        }),
        (method, prop::option::of(arb_structured()))
            .prop_map(move |(method, params)| Message::Notification(Notification { method, params: params.map(raw) })),
        (arb_id(), arb_json()).prop_map(move |(id, result)| Message::Response(Response { id, result: raw(result) })),
        (prop::option::of(arb_id()), any::<i64>(), "\\PC{0,16}", prop::option::of(arb_json())).prop_map(
            |(id, code, message, data)| Message::Error(ErrorResponse {
                id,
                error: ErrorObject { code, message, data }
            })
        ),
    ]
}

fn kind(m: &Message) -> &'static str {
    match m {
        Message::Request(_) => "request",
        Message::Notification(_) => "notification",
        Message::Response(_) => "response",
        Message::Error(_) => "error",
    }
}

/// Whatever decodes re-encodes to one line that decodes to the same encoding.
fn assert_stable(decoded: &Message) -> Result<(), TestCaseError> {
    let line = decoded.encode();
    prop_assert!(!line.contains('\n'), "{}", line);
    let again = Message::decode(line.as_bytes());
    prop_assert!(again.is_ok(), "{} does not decode: {:?}", line, again.err());
    let again = again.unwrap();
    prop_assert_eq!(kind(&again), kind(decoded));
    prop_assert_eq!(again.encode(), line);
    Ok(())
}

proptest! {
    #[test]
    fn decode_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(m) = Message::decode(&bytes) {
            assert_stable(&m)?;
        }
    }

    #[test]
    fn decode_never_panics_on_json_values(value in arb_json()) {
        let text = value.to_string();
        if let Ok(m) = Message::decode_str(&text) {
            assert_stable(&m)?;
        }
    }

    #[test]
    fn decode_never_panics_on_envelopes(text in arb_envelope(), cut in any::<prop::sample::Index>()) {
        match Message::decode_str(&text) {
            Ok(m) => assert_stable(&m)?,
            Err(e) => prop_assert!(!e.detail.is_empty()),
        }
        // And on a truncated copy.
        let mut end = cut.index(text.len() + 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let _ = Message::decode(&text.as_bytes()[..end]);
    }

    #[test]
    fn decode_inverts_encode(message in arb_message()) {
        let line = message.encode();
        let decoded = Message::decode(line.as_bytes());
        prop_assert!(decoded.is_ok(), "{} does not decode: {:?}", line, decoded.err());
        let decoded = decoded.unwrap();
        prop_assert_eq!(kind(&decoded), kind(&message));
        prop_assert_eq!(decoded.encode(), line);
    }

    #[test]
    fn pretty_printed_messages_re_encode_compactly(message in arb_message()) {
        let compact = message.encode();
        let value: Value = serde_json::from_str(&compact).unwrap();
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let decoded = Message::decode_str(&pretty);
        prop_assert!(decoded.is_ok(), "{}", pretty);
        let line = decoded.unwrap().encode();
        prop_assert!(!line.contains('\n'), "{}", line);
        let reparsed: Value = serde_json::from_str(&line).unwrap();
        prop_assert_eq!(reparsed, value);
    }
}
