//! The Streamable HTTP headers that mirror a request's body (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`, `Mcp-Param-{Name}`), and the server's check that they agree with it.
//!
//! Since the 2026-07-28 revision, intermediaries route on these headers without reading bodies,
//! so a server that acts on the body must refuse a request whose headers say something else
//! (`400 Bad Request` with a `-32020` error): a load balancer and the server must never act on two
//! different requests. Values that cannot ride in a header as plain ASCII come in the sentinel
//! form `=?base64?{standard Base64 of the UTF-8}?=`, decoded before they are compared.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::jsonrpc::ErrorObject;
use crate::server::server_error_codes::HEADER_MISMATCH;
use crate::types::methods;
use crate::version::ProtocolVersion;

/// `MCP-Protocol-Version`.
pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Mcp-Method`.
pub const HEADER_METHOD: &str = "mcp-method";
/// `Mcp-Name`.
pub const HEADER_NAME: &str = "mcp-name";
/// The prefix of the headers that mirror tool arguments (`Mcp-Param-{Name}`).
pub const HEADER_PARAM_PREFIX: &str = "mcp-param-";
/// The schema keyword by which a tool asks for an argument to be mirrored into a header.
pub const X_MCP_HEADER: &str = "x-mcp-header";

const SENTINEL_PREFIX: &str = "=?base64?";
const SENTINEL_SUFFIX: &str = "?=";
/// Longest header value shown in an error message, in characters.
const SHOWN_CHARS: usize = 80;

/// The mirrored headers of one POST, as raw bytes (`None` when absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct MirroredHeaders<'a> {
    /// `MCP-Protocol-Version`.
    pub protocol_version: Option<&'a [u8]>,
    /// `Mcp-Method`.
    pub method: Option<&'a [u8]>,
    /// `Mcp-Name`.
    pub name: Option<&'a [u8]>,
}

/// What the body says, for comparison with the headers.
#[derive(Debug, Clone, Copy)]
pub struct BodyFacts<'a> {
    /// The JSON-RPC method.
    pub method: &'a str,
    /// `params.name` or `params.uri` of the methods that have one.
    pub name: Option<&'a str>,
    /// The revision the header must equal: the envelope's for a 2026-07-28 request. `None`
    /// (`initialize`, or a session request whose server accepts any revision it speaks, as the
    /// TypeScript SDK's servers do and its conformance suite expects) only asks the header, when
    /// present, to name a protocol revision.
    pub protocol_version: Option<&'a str>,
    /// Whether the request is of the stateless revision (every standard header is then required).
    pub stateless: bool,
}

/// Headers that disagree with the body, are missing, or are malformed: answer `400 Bad Request`
/// with [`HeaderMismatch::to_error_object`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Header mismatch: {0}")]
pub struct HeaderMismatch(pub String);

impl HeaderMismatch {
    /// The JSON-RPC error (`-32020`).
    pub fn to_error_object(&self) -> ErrorObject {
        ErrorObject::new(HEADER_MISMATCH, self.to_string())
    }
}

/// Whether `method` requires `Mcp-Name` (its body names a tool, prompt or resource).
pub fn method_has_name(method: &str) -> bool {
    matches!(method, methods::TOOLS_CALL | methods::PROMPTS_GET | methods::RESOURCES_READ)
}

/// Checks the standard mirrored headers against the body.
///
/// For a stateless request all of `MCP-Protocol-Version`, `Mcp-Method` and (where the method
/// names something) `Mcp-Name` are required. For a session request a header that is present
/// must agree; an absent one is fine (the session knows its revision, and clients of
/// 2025-03-26 sent no headers).
pub fn check_headers(headers: &MirroredHeaders<'_>, body: &BodyFacts<'_>) -> Result<(), HeaderMismatch> {
    match (headers.protocol_version, body.protocol_version) {
        (Some(raw), Some(expected)) => {
            let value = plain(raw, "MCP-Protocol-Version")?;
            if value != expected {
                return Err(HeaderMismatch(format!(
                    "MCP-Protocol-Version header value '{}' does not match the request's protocol version '{}'",
                    shown(value),
                    shown(expected)
                )));
            }
        }
        (Some(raw), None) => {
            // `initialize` has no revision yet; the header must still name one.
            let value = plain(raw, "MCP-Protocol-Version")?;
            if ProtocolVersion::parse(value).is_none() {
                return Err(HeaderMismatch(format!(
                    "MCP-Protocol-Version header value '{}' is not a protocol version",
                    shown(value)
                )));
            }
        }
        (None, _) if body.stateless => {
            return Err(HeaderMismatch("the MCP-Protocol-Version header is required".to_owned()));
        }
        // A session knows its revision; clients of 2025-03-26 sent no header.
        (None, _) => {}
    }
    match headers.method {
        Some(raw) => {
            let value = plain(raw, "Mcp-Method")?;
            if value != body.method {
                return Err(HeaderMismatch(format!(
                    "Mcp-Method header value '{}' does not match body value '{}'",
                    shown(value),
                    shown(body.method)
                )));
            }
        }
        None if body.stateless => return Err(HeaderMismatch("the Mcp-Method header is required".to_owned())),
        None => {}
    }
    match (headers.name, body.name) {
        (Some(raw), name) => {
            let value = decode_header_value(raw).map_err(|why| HeaderMismatch(format!("Mcp-Name header {why}")))?;
            match name {
                Some(name) if value == name => {}
                Some(name) => {
                    return Err(HeaderMismatch(format!(
                        "Mcp-Name header value '{}' does not match body value '{}'",
                        shown(&value),
                        shown(name)
                    )));
                }
                None => {
                    return Err(HeaderMismatch(format!(
                        "Mcp-Name header value '{}' was sent for {}, which names nothing",
                        shown(&value),
                        shown(body.method)
                    )));
                }
            }
        }
        (None, Some(_)) if body.stateless && method_has_name(body.method) => {
            return Err(HeaderMismatch(format!("the Mcp-Name header is required for {}", body.method)));
        }
        (None, _) => {}
    }
    Ok(())
}

/// A header value that must be plain visible ASCII (no sentinel encoding).
fn plain<'a>(raw: &'a [u8], header: &str) -> Result<&'a str, HeaderMismatch> {
    match std::str::from_utf8(raw) {
        Ok(text) if text.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) => Ok(text.trim()),
        _ => Err(HeaderMismatch(format!("{header} header contains invalid characters"))),
    }
}

/// `text` cut and cleaned for an error message (header and body values are the client's).
fn shown(text: &str) -> String {
    let mut out: String = text.chars().filter(|c| !c.is_control()).take(SHOWN_CHARS).collect();
    if text.chars().count() > SHOWN_CHARS {
        out.push('…');
    }
    out
}

/// The value a mirrored header carries: the sentinel form decoded, plain visible ASCII as is;
/// `Err` says what is wrong (invalid characters, bad Base64, not UTF-8).
pub fn decode_header_value(raw: &[u8]) -> Result<String, &'static str> {
    let text = std::str::from_utf8(raw).map_err(|_| "contains invalid characters")?;
    if !text.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        return Err("contains invalid characters");
    }
    match text.strip_prefix(SENTINEL_PREFIX).and_then(|rest| rest.strip_suffix(SENTINEL_SUFFIX)) {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|_| "is not valid Base64 inside =?base64?…?=")?;
            String::from_utf8(bytes).map_err(|_| "does not decode to UTF-8")
        }
        // Leading and trailing whitespace is not part of a field value.
        None => Ok(text.trim_matches([' ', '\t']).to_owned()),
    }
}

/// The header value for `value`: as is when it is plain visible ASCII without surrounding
/// whitespace and does not look like the sentinel, else the sentinel form.
pub fn encode_header_value(value: &str) -> String {
    let looks_encoded = value.starts_with(SENTINEL_PREFIX) && value.ends_with(SENTINEL_SUFFIX);
    let padded = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    if value.bytes().all(|b| (0x20..0x7f).contains(&b)) && !padded && !looks_encoded {
        value.to_owned()
    } else {
        format!("{SENTINEL_PREFIX}{}{SENTINEL_SUFFIX}", base64::engine::general_purpose::STANDARD.encode(value))
    }
}

/// One argument a tool asks to be mirrored into `Mcp-Param-{header}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The `{Name}` part, as the schema gives it.
    pub header: String,
    /// The chain of `properties` keys from the schema's root to the argument.
    pub path: Vec<String>,
}

/// The `x-mcp-header` declarations of an input schema, or why the schema's use of them is
/// invalid (a tool with an invalid declaration is not offered over HTTP).
///
/// Declarations are only valid on properties reachable through `properties` keys alone, on
/// `string`, `integer` or `boolean` properties, with a token-syntax name unique regardless of
/// case; at most `limit` are read.
pub fn param_headers(schema: &Value, limit: usize) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    collect(schema, &mut Vec::new(), &mut found, limit, 0)?;
    let mut seen = std::collections::HashSet::new();
    for declared in &found {
        if !seen.insert(declared.header.to_ascii_lowercase()) {
            return Err(format!("x-mcp-header {:?} is declared twice", shown(&declared.header)));
        }
    }
    Ok(found)
}

/// Nesting deeper than this is not searched for declarations.
const MAX_DEPTH: usize = 16;

fn collect(
    schema: &Value,
    path: &mut Vec<String>,
    found: &mut Vec<ParamHeader>,
    limit: usize,
    depth: usize,
) -> Result<(), String> {
    let Some(object) = schema.as_object() else { return Ok(()) };
    if depth > MAX_DEPTH {
        return Ok(());
    }
    if let Some(header) = object.get(X_MCP_HEADER) {
        let Some(header) = header.as_str().filter(|h| is_token(h)) else {
            return Err(format!("x-mcp-header at /{} is not a header name token", path.join("/")));
        };
        if path.is_empty() {
            return Err("x-mcp-header on the schema's root".to_owned());
        }
        match object.get("type").and_then(Value::as_str) {
            Some("string" | "integer" | "boolean") => {}
            _ => {
                return Err(format!(
                    "x-mcp-header {header:?} is on a property that is not a string, integer or boolean"
                ));
            }
        }
        if found.len() >= limit {
            return Err(format!("more than {limit} x-mcp-header declarations"));
        }
        found.push(ParamHeader { header: header.to_owned(), path: path.clone() });
    }
    for (key, sub) in object {
        match key.as_str() {
            "properties" => {
                if let Some(properties) = sub.as_object() {
                    for (name, property) in properties {
                        path.push(name.clone());
                        let result = collect(property, path, found, limit, depth + 1);
                        path.pop();
                        result?;
                    }
                }
            }
            // Anywhere else a declaration is not statically reachable, which makes it invalid.
            _ if contains_declaration(sub, 0) => {
                return Err(format!(
                    "x-mcp-header under {key:?} at /{} is not reachable through properties alone",
                    path.join("/")
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

fn contains_declaration(value: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match value {
        Value::Object(map) => {
            map.contains_key(X_MCP_HEADER) || map.values().any(|v| contains_declaration(v, depth + 1))
        }
        Value::Array(items) => items.iter().any(|v| contains_declaration(v, depth + 1)),
        _ => false,
    }
}

/// RFC 9110 `token`: one or more of the `tchar` characters.
fn is_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks the `Mcp-Param-{Name}` headers of a `tools/call` against its arguments: each
/// declared argument that is present (and not null) must come with its header, equal after
/// decoding (integers compared as numbers); one that is absent must not. `header` looks a
/// header up by its lower-case name.
pub fn check_param_headers<'h>(
    declared: &[ParamHeader],
    arguments: Option<&Map<String, Value>>,
    header: impl Fn(&str) -> Option<&'h [u8]>,
) -> Result<(), HeaderMismatch> {
    for ParamHeader { header: name, path } in declared {
        let header_name = format!("{HEADER_PARAM_PREFIX}{}", name.to_ascii_lowercase());
        let mut value = arguments.and_then(|args| args.get(path.first()?.as_str()));
        for key in path.iter().skip(1) {
            value = value.and_then(|v| v.get(key.as_str()));
        }
        let value = value.filter(|v| !v.is_null());
        match (header(&header_name), value) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(HeaderMismatch(format!("the Mcp-Param-{} header is required", shown(name))));
            }
            (Some(_), None) => {
                return Err(HeaderMismatch(format!(
                    "Mcp-Param-{} header was sent but the argument is absent",
                    shown(name)
                )));
            }
            (Some(raw), Some(value)) => {
                let got = decode_header_value(raw)
                    .map_err(|why| HeaderMismatch(format!("Mcp-Param-{} header {why}", shown(name))))?;
                let agrees = match value {
                    Value::String(s) => got == *s,
                    Value::Bool(b) => got == if *b { "true" } else { "false" },
                    Value::Number(n) => match (got.parse::<f64>(), n.as_f64()) {
                        (Ok(a), Some(b)) => a == b,
                        _ => false,
                    },
                    _ => false,
                };
                if !agrees {
                    return Err(HeaderMismatch(format!(
                        "Mcp-Param-{} header value '{}' does not match the argument",
                        shown(name),
                        shown(&got)
                    )));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stateless<'a>(method: &'a str, name: Option<&'a str>) -> BodyFacts<'a> {
        BodyFacts { method, name, protocol_version: Some("2026-07-28"), stateless: true }
    }

    fn headers<'a>(version: Option<&'a str>, method: Option<&'a str>, name: Option<&'a str>) -> MirroredHeaders<'a> {
        MirroredHeaders {
            protocol_version: version.map(str::as_bytes),
            method: method.map(str::as_bytes),
            name: name.map(str::as_bytes),
        }
    }

    #[test]
    fn stateless_requests_need_every_header_and_agreement() {
        let call = stateless("tools/call", Some("files__read"));
        let ok = headers(Some("2026-07-28"), Some("tools/call"), Some("files__read"));
        assert_eq!(check_headers(&ok, &call), Ok(()));
        let cases = [
            (headers(None, Some("tools/call"), Some("files__read")), "the MCP-Protocol-Version header is required"),
            (headers(Some("2026-07-28"), None, Some("files__read")), "the Mcp-Method header is required"),
            (headers(Some("2026-07-28"), Some("tools/call"), None), "the Mcp-Name header is required for tools/call"),
            (
                headers(Some("2025-11-25"), Some("tools/call"), Some("files__read")),
                "MCP-Protocol-Version header value '2025-11-25' does not match the request's protocol version '2026-07-28'",
            ),
            (
                headers(Some("2026-07-28"), Some("tools/list"), Some("files__read")),
                "Mcp-Method header value 'tools/list' does not match body value 'tools/call'",
            ),
            (
                headers(Some("2026-07-28"), Some("tools/call"), Some("files__write")),
                "Mcp-Name header value 'files__write' does not match body value 'files__read'",
            ),
        ];
        for (h, why) in cases {
            let error = check_headers(&h, &call).unwrap_err();
            assert_eq!(error.0, why);
            assert_eq!(error.to_error_object().code, -32020);
        }
        // A listing names nothing: no Mcp-Name needed, and one sent is refused.
        let list = stateless("tools/list", None);
        assert_eq!(check_headers(&headers(Some("2026-07-28"), Some("tools/list"), None), &list), Ok(()));
        assert!(check_headers(&headers(Some("2026-07-28"), Some("tools/list"), Some("x")), &list).is_err());
    }

    #[test]
    fn session_requests_check_what_is_there() {
        let body =
            BodyFacts { method: "tools/call", name: Some("a"), protocol_version: Some("2025-06-18"), stateless: false };
        assert_eq!(check_headers(&headers(Some("2025-06-18"), None, None), &body), Ok(()));
        assert_eq!(check_headers(&headers(None, None, None), &body), Ok(()));
        assert!(check_headers(&headers(Some("2025-03-26"), None, None), &body).is_err());
        assert!(check_headers(&headers(Some("2025-06-18"), Some("tools/list"), None), &body).is_err());
        assert!(check_headers(&headers(Some("2025-06-18"), Some("tools/call"), Some("b")), &body).is_err());
        let init = BodyFacts { method: "initialize", name: None, protocol_version: None, stateless: false };
        assert_eq!(check_headers(&headers(None, None, None), &init), Ok(()));
        assert_eq!(check_headers(&headers(Some("2025-06-18"), Some("initialize"), None), &init), Ok(()));
        assert!(check_headers(&headers(Some("soon"), None, None), &init).is_err());
        let bad = MirroredHeaders { method: Some(b"tools/call\xff"), ..MirroredHeaders::default() };
        assert_eq!(check_headers(&bad, &body).unwrap_err().0, "Mcp-Method header contains invalid characters");
    }

    #[test]
    fn sentinel_values() {
        for (value, encoded) in [
            ("us-west1", "us-west1"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ] {
            assert_eq!(encode_header_value(value), encoded);
            assert_eq!(decode_header_value(encoded.as_bytes()).as_deref(), Ok(value));
        }
        assert!(decode_header_value(b"=?base64?***?=").is_err());
        assert!(decode_header_value("caf\u{e9}".as_bytes()).is_err());
        assert!(decode_header_value(b"=?base64?/w==?=").is_err(), "not UTF-8");
        let call = stateless("tools/call", Some("wetter für köln"));
        let h = headers(Some("2026-07-28"), Some("tools/call"), Some("=?base64?d2V0dGVyIGbDvHIga8O2bG4=?="));
        assert_eq!(check_headers(&h, &call), Ok(()));
    }

    #[test]
    fn param_headers_are_declared_and_checked() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry"}}},
            "query": {"type": "string"}}});
        let declared = param_headers(&schema, 8).unwrap();
        assert_eq!(declared.len(), 3);
        let args = json!({"region": "eu", "limit": 42, "opts": {"dry": true}, "query": "q"});
        let args = args.as_object();
        let sent = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_bytes())
        };
        let all = sent(&[("mcp-param-region", "eu"), ("mcp-param-limit", "42.0"), ("mcp-param-dry", "true")]);
        assert_eq!(check_param_headers(&declared, args, all), Ok(()));
        let missing = sent(&[("mcp-param-region", "eu"), ("mcp-param-limit", "42")]);
        assert!(check_param_headers(&declared, args, missing).is_err());
        let wrong = sent(&[("mcp-param-region", "us"), ("mcp-param-limit", "42"), ("mcp-param-dry", "true")]);
        assert!(check_param_headers(&declared, args, wrong).is_err());
        let absent = json!({"query": "q"});
        assert_eq!(check_param_headers(&declared, absent.as_object(), sent(&[])), Ok(()));
        assert!(check_param_headers(&declared, absent.as_object(), sent(&[("mcp-param-region", "eu")])).is_err());

        for invalid in [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A b"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
        ] {
            assert!(param_headers(&invalid, 8).is_err(), "{invalid}");
        }
        assert_eq!(param_headers(&json!({"type": "object"}), 8), Ok(vec![]));
    }
}
