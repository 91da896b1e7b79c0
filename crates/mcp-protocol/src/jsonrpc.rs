//! JSON-RPC 2.0 framing: ids, the four message kinds, and a decoder that never panics.
//!
//! Payloads (`params`, `result`) stay as raw JSON text until someone asks for a type: the
//! envelope is checked in one pass and the payload is parsed once, straight into its final type.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// Standard JSON-RPC error codes.
pub mod error_codes {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The request needs the user to visit URLs first (2025-11-25): `data.elicitations` holds
    /// URL-mode elicitation params.
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
}

/// A request id: a string or an integer (never null for requests).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        RequestId::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        RequestId::String(s.to_owned())
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RequestId::Number(n) => serializer.serialize_i64(*n),
            RequestId::String(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = RequestId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RequestId, E> {
                Ok(RequestId::Number(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RequestId, E> {
                i64::try_from(v).map(RequestId::Number).map_err(|_| E::custom("integer id out of range"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RequestId, E> {
                Ok(RequestId::String(v.to_owned()))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

/// A request: expects a response with the same id.
#[derive(Debug, Clone)]
pub struct Request {
    /// The id the response will carry.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// Raw params, if any.
    pub params: Option<Box<RawValue>>,
}

/// A notification: no id, no response.
#[derive(Debug, Clone)]
pub struct Notification {
    /// The method.
    pub method: String,
    /// Raw params, if any.
    pub params: Option<Box<RawValue>>,
}

/// A successful response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The id of the request answered.
    pub id: RequestId,
    /// The raw result.
    pub result: Box<RawValue>,
}

/// The `error` member of an error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// Error code.
    pub code: i64,
    /// Short description.
    pub message: String,
    /// Extra information (`Some(Value::Null)` when it was sent as `null`).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present_value")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)?;
        if let Some(data) = &self.data {
            write!(f, ": {data}")?;
        }
        Ok(())
    }
}

/// An error response. The id is absent when the request could not be read at all.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorResponse {
    /// The id of the request answered, if it could be read.
    pub id: Option<RequestId>,
    /// The error.
    pub error: ErrorObject,
}

/// Any JSON-RPC message.
#[derive(Debug, Clone)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A successful response.
    Response(Response),
    /// An error response.
    Error(ErrorResponse),
}

/// What was wrong with bytes that are not a JSON-RPC message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// Not JSON (JSON-RPC -32700).
    Parse,
    /// JSON, but not a valid JSON-RPC message (JSON-RPC -32600).
    InvalidRequest,
}

/// Bytes that could not be decoded into a [`Message`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {detail}", match .kind { DecodeErrorKind::Parse => "not JSON", DecodeErrorKind::InvalidRequest => "not a JSON-RPC 2.0 message" })]
pub struct DecodeError {
    /// The class of error.
    pub kind: DecodeErrorKind,
    /// What exactly was wrong.
    pub detail: String,
    /// The id, when it could be read (so an error response can name it).
    pub id: Option<RequestId>,
}

impl DecodeError {
    fn invalid(detail: impl Into<String>, id: Option<RequestId>) -> Self {
        Self { kind: DecodeErrorKind::InvalidRequest, detail: detail.into(), id }
    }

    /// The JSON-RPC error object to send back for this error.
    pub fn to_error_object(&self) -> ErrorObject {
        match self.kind {
            DecodeErrorKind::Parse => ErrorObject::new(error_codes::PARSE_ERROR, "Parse error"),
            DecodeErrorKind::InvalidRequest => {
                ErrorObject::new(error_codes::INVALID_REQUEST, format!("Invalid Request: {}", self.detail))
            }
        }
    }
}

/// The envelope as read in one pass: members borrowed, payloads left raw.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present_raw")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present_raw")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present_raw")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present_raw")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present_raw")]
    error: Option<&'a RawValue>,
}

/// For a line [`Message::decode`] refused: `Some` when it is shaped as a response (an object
/// with a `result` or an `error` and no `method`), holding its id if that reads. Its members
/// are read as `decode` reads them, raw: nothing in a line refused for being too dense is
/// built.
pub fn refused_response_id(text: &str) -> Option<Option<RequestId>> {
    let shape: Shape<'_> = serde_json::from_str(text).ok()?;
    if shape.method || !shape.answer {
        return None;
    }
    Some(shape.id.and_then(|raw| serde_json::from_str(raw.get()).ok()))
}

/// The members [`refused_response_id`] looks at, read as leniently as a map would be (a
/// repeated member, the last `id` kept; any `jsonrpc`), every value skipped or left raw.
struct Shape<'a> {
    method: bool,
    answer: bool,
    id: Option<&'a RawValue>,
}

impl<'de> Deserialize<'de> for Shape<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Shape<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Shape<'de>, A::Error> {
                let mut shape = Shape { method: false, answer: false, id: None };
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match key.as_ref() {
                        "id" => shape.id = Some(map.next_value()?),
                        other => {
                            map.next_value::<de::IgnoredAny>()?;
                            shape.method |= other == "method";
                            shape.answer |= matches!(other, "result" | "error");
                        }
                    }
                }
                Ok(shape)
            }
        }
        d.deserialize_map(Members)
    }
}

/// `Some(raw)` for any present member, `null` included (plain `Option` would turn null into None).
fn present_raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// `Some` for any present member, `null` included, so that a round trip keeps an explicit null.
pub(crate) fn present_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

fn parse_id(raw: &RawValue) -> Result<RequestId, DecodeError> {
    serde_json::from_str(raw.get())
        .map_err(|_| DecodeError::invalid(format!("id must be a string or an integer, got {}", raw.get()), None))
}

impl Message {
    /// Decode one message. Never panics; says what was wrong.
    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let text = std::str::from_utf8(bytes).map_err(|e| DecodeError {
            kind: DecodeErrorKind::Parse,
            detail: format!("invalid UTF-8: {e}"),
            id: None,
        })?;
        Self::decode_str(text)
    }

    /// Decode one message from text. Never panics; says what was wrong. A request or
    /// notification packed with more values than [`check_density`](crate::check_density)
    /// allows is refused (with its id, so it can be answered); a response's result is left raw.
    pub fn decode_str(text: &str) -> Result<Message, DecodeError> {
        // Only an object is a message: serde would also read an array positionally into the
        // envelope (`["2.0",1,"ping"]` as a ping request).
        if !text.trim_start().starts_with('{') {
            return Err(match serde_json::from_str::<de::IgnoredAny>(text) {
                Err(e) => classify_serde_error(text, e),
                Ok(_) => DecodeError::invalid(not_an_object(text), None),
            });
        }
        let envelope: Envelope<'_> = match serde_json::from_str(text) {
            Ok(envelope) => envelope,
            Err(e) => return Err(classify_serde_error(text, e)),
        };
        let id = match envelope.id {
            Some(raw) if is_null(raw) => None,
            Some(raw) => Some(parse_id(raw)?),
            None => None,
        };
        match envelope.jsonrpc.as_deref() {
            Some("2.0") => {}
            Some(other) => return Err(DecodeError::invalid(format!("jsonrpc must be \"2.0\", got {other:?}"), id)),
            None => return Err(DecodeError::invalid("missing \"jsonrpc\": \"2.0\"", id)),
        }
        let params = match envelope.params {
            Some(raw) if is_null(raw) => None,
            Some(raw) if raw.get().starts_with(['{', '[']) => Some(raw.to_owned()),
            Some(_) => return Err(DecodeError::invalid("params must be an object or an array", id)),
            None => None,
        };
        if let Some(method) = envelope.method {
            let method: String = serde_json::from_str(method.get())
                .map_err(|_| DecodeError::invalid("method must be a string", id.clone()))?;
            if envelope.result.is_some() || envelope.error.is_some() {
                return Err(DecodeError::invalid("a message with a method cannot carry result or error", id));
            }
            // Read into values by whoever handles it (arguments checked, a schema kept): a
            // response's result is checked where it is read (`check_density`).
            if let Err(dense) = crate::density::check_density(text) {
                let method = mcp_safety::text::one_line(&method, 100);
                return Err(DecodeError::invalid(format!("{method} refused: {dense}"), id));
            }
            return Ok(match (envelope.id, id) {
                (None, _) => Message::Notification(Notification { method, params }),
                (Some(_), Some(id)) => Message::Request(Request { id, method, params }),
                (Some(_), None) => return Err(DecodeError::invalid("request id must not be null", None)),
            });
        }
        match (envelope.result, envelope.error) {
            (Some(_), Some(_)) => Err(DecodeError::invalid("a response cannot carry both result and error", id)),
            (Some(result), None) => match id {
                Some(id) => Ok(Message::Response(Response { id, result: result.to_owned() })),
                None => Err(DecodeError::invalid("a successful response needs an id", None)),
            },
            (None, Some(error)) => {
                // Its `data` is a value anyone reading the error may look at; too dense, it is
                // left out and the code and message kept.
                if let Err(dense) = crate::density::check_density(error.get()) {
                    #[derive(Deserialize)]
                    struct Head {
                        code: i64,
                        message: String,
                    }
                    let head: Head = serde_json::from_str(error.get()).map_err(|e| {
                        DecodeError::invalid(
                            format!("error must be {{code: integer, message: string}}: {e}"),
                            id.clone(),
                        )
                    })?;
                    let mut error = ErrorObject::new(head.code, head.message);
                    error.data = Some(Value::String(format!("(left out by the receiver: {dense})")));
                    return Ok(Message::Error(ErrorResponse { id, error }));
                }
                let error: ErrorObject = serde_json::from_str(error.get()).map_err(|e| {
                    DecodeError::invalid(format!("error must be {{code: integer, message: string}}: {e}"), id.clone())
                })?;
                Ok(Message::Error(ErrorResponse { id, error }))
            }
            (None, None) => Err(DecodeError::invalid("neither method, result nor error present", id)),
        }
    }

    /// Encode as compact JSON (one line, no trailing newline).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(128);
        self.encode_into(&mut out);
        out
    }

    /// Append the compact JSON encoding to `out`.
    pub fn encode_into(&self, out: &mut String) {
        out.push_str(r#"{"jsonrpc":"2.0""#);
        match self {
            Message::Request(r) => {
                push_member(out, "id", &r.id);
                push_member(out, "method", &r.method);
                if let Some(p) = &r.params {
                    push_raw_member(out, "params", p);
                }
            }
            Message::Notification(n) => {
                push_member(out, "method", &n.method);
                if let Some(p) = &n.params {
                    push_raw_member(out, "params", p);
                }
            }
            Message::Response(r) => {
                push_member(out, "id", &r.id);
                push_raw_member(out, "result", &r.result);
            }
            Message::Error(e) => {
                match &e.id {
                    Some(id) => push_member(out, "id", id),
                    None => out.push_str(r#","id":null"#),
                }
                push_member(out, "error", &e.error);
            }
        }
        out.push('}');
    }

    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request(r) => Some(&r.method),
            Message::Notification(n) => Some(&n.method),
            _ => None,
        }
    }
}

fn push_member<T: Serialize + ?Sized>(out: &mut String, key: &str, value: &T) {
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":");
    // Serializing ids, strings and error objects into a String cannot fail.
    match serde_json::to_string(value) {
        Ok(json) => out.push_str(&json),
        Err(_) => out.push_str("null"),
    }
}

/// Append a request id as JSON without an intermediate allocation for numbers.
fn push_id(out: &mut Vec<u8>, id: &RequestId) {
    match id {
        RequestId::Number(n) => {
            let _ = std::io::Write::write_fmt(out, format_args!("{n}"));
        }
        RequestId::String(s) => push_json_str(out, s),
    }
}

/// Append a JSON string; plain printable ASCII (every method name) needs no escaping pass.
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing a str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// Encode a request in one buffer, serializing `params` straight into it (the hot path of
/// every call: no intermediate params string, no second copy).
pub fn encode_request<T: Serialize + ?Sized>(
    id: &RequestId,
    method: &str,
    params: Option<&T>,
) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    push_id(&mut out, id);
    out.extend_from_slice(br#","method":"#);
    push_json_str(&mut out, method);
    if let Some(params) = params {
        out.extend_from_slice(br#","params":"#);
        serde_json::to_writer(&mut out, params)?;
    }
    out.push(b'}');
    // serde_json writes UTF-8 and everything else pushed is ASCII or a &str.
    String::from_utf8(out).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

fn push_raw_member(out: &mut String, key: &str, raw: &RawValue) {
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":");
    let json = raw.get();
    // A raw value kept from pretty-printed input may span lines; the encoding must not. (A line
    // break inside a JSON string is always escaped, so a raw one is whitespace between tokens.)
    if json.contains(['\n', '\r']) { push_compact(out, json) } else { out.push_str(json) }
}

/// Append `json` without the whitespace between its tokens.
fn push_compact(out: &mut String, json: &str) {
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            in_string = c == '"';
            out.push(c);
        }
    }
}

fn classify_serde_error(text: &str, e: serde_json::Error) -> DecodeError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => {
            DecodeError { kind: DecodeErrorKind::Parse, detail: e.to_string(), id: None }
        }
        // The wrong shape (an array, a number, a bad member type), noticed before the end of the
        // text: it is only an invalid request if the whole text is JSON.
        Category::Data => match serde_json::from_str::<de::IgnoredAny>(text) {
            Err(syntax) => DecodeError { kind: DecodeErrorKind::Parse, detail: syntax.to_string(), id: None },
            Ok(_) if text.trim_start().starts_with('{') => DecodeError::invalid(e.to_string(), None),
            Ok(_) => DecodeError::invalid(not_an_object(text), None),
        },
    }
}

fn not_an_object(text: &str) -> &'static str {
    if text.trim_start().starts_with('[') {
        "batches are not supported; send one message per line"
    } else {
        "a message must be a JSON object"
    }
}

/// Serialize `value` into a raw JSON value (for `params` and `result`).
pub fn to_raw<T: Serialize + ?Sized>(value: &T) -> Result<Box<RawValue>, serde_json::Error> {
    serde_json::value::to_raw_value(value)
}

/// An empty JSON object, as a raw value.
pub fn empty_object() -> Box<RawValue> {
    // "{}" is valid JSON, so this never fails; fall back defensively rather than panic.
    RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| Box::<RawValue>::default())
}
