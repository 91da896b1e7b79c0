//! A message ready for the wire, with what transports route on.
//!
//! The session knows what it encodes (the request's id and method, the revision of a
//! 2026-07-28 envelope); it hands that along with the text so that no transport has to parse
//! an outgoing message again to learn it. The `Mcp-Name` routing value (the tool, prompt or
//! resource a request is about) is read from the text only when a transport asks for it.

use serde::Deserialize;

use crate::jsonrpc::RequestId;
use crate::types::methods;
use crate::version::ProtocolVersion;

/// One encoded message the client sends: a request, a notification or a response.
///
/// Dereferences to its JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    text: String,
    id: Option<RequestId>,
    method: Option<String>,
    protocol_version: Option<ProtocolVersion>,
}

impl Outgoing {
    /// A request the session encoded.
    pub(crate) fn request(text: String, id: RequestId, method: &str, version: Option<ProtocolVersion>) -> Self {
        Self { text, id: Some(id), method: Some(method.to_owned()), protocol_version: version }
    }

    /// A notification (`method`) encoded as `text`.
    pub fn notification(text: String, method: &str) -> Self {
        Self { text, id: None, method: Some(method.to_owned()), protocol_version: None }
    }

    /// A response (result or error) to the server's request `id`, encoded as `text`.
    pub fn response(text: String, id: RequestId) -> Self {
        Self { text, id: Some(id), method: None, protocol_version: None }
    }

    /// Learns what a message is from its text, for messages that did not come from a session
    /// (a test's raw line, say). Text that is not a JSON object yields a message without an
    /// id or method.
    pub fn parse(text: String) -> Self {
        #[derive(Deserialize)]
        struct Head {
            id: Option<RequestId>,
            method: Option<String>,
            params: Option<Params>,
        }
        #[derive(Deserialize)]
        struct Params {
            #[serde(rename = "_meta")]
            meta: Option<Meta>,
        }
        #[derive(Deserialize)]
        struct Meta {
            #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
            version: Option<String>,
        }
        match serde_json::from_str::<Head>(&text) {
            Ok(head) => {
                let protocol_version =
                    head.params.and_then(|p| p.meta).and_then(|m| m.version).and_then(|v| ProtocolVersion::parse(&v));
                Self { id: head.id, method: head.method, protocol_version, text }
            }
            Err(_) => Self { text, id: None, method: None, protocol_version: None },
        }
    }

    /// The JSON text (no trailing newline).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The JSON text, taken.
    pub fn into_text(self) -> String {
        self.text
    }

    /// The id: of the request, or of the server request a response answers.
    pub fn id(&self) -> Option<&RequestId> {
        self.id.as_ref()
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// Whether the message is a request (it has an id and a method): an answer will come.
    pub fn is_request(&self) -> bool {
        self.id.is_some() && self.method.is_some()
    }

    /// The revision a 2026-07-28 request declares in its `_meta` envelope.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.protocol_version
    }

    /// What the request is about, for routing (the `Mcp-Name` header): the tool of
    /// `tools/call`, the prompt of `prompts/get`, the URI of `resources/read`. Read from the
    /// text on demand, so transports that do not route pay nothing.
    pub fn routing_name(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Routed {
            params: Option<RoutedParams>,
        }
        #[derive(Deserialize)]
        struct RoutedParams {
            name: Option<String>,
            uri: Option<String>,
        }
        let method = self.method.as_deref()?;
        if !matches!(method, methods::TOOLS_CALL | methods::PROMPTS_GET | methods::RESOURCES_READ) {
            return None;
        }
        let params = serde_json::from_str::<Routed>(&self.text).ok()?.params?;
        if method == methods::RESOURCES_READ { params.uri } else { params.name }
    }
}

impl std::ops::Deref for Outgoing {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for Outgoing {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_heads_and_routing_names() {
        let call = Outgoing::parse(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"name":"x"},
               "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#
                .to_owned(),
        );
        assert_eq!(call.id(), Some(&RequestId::Number(7)));
        assert_eq!(call.method(), Some("tools/call"));
        assert!(call.is_request());
        assert_eq!(call.routing_name().as_deref(), Some("echo"));
        assert_eq!(call.protocol_version(), ProtocolVersion::parse("2026-07-28"));

        let read = Outgoing::parse(
            r#"{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"file:///a"}}"#.to_owned(),
        );
        assert_eq!(read.routing_name().as_deref(), Some("file:///a"));

        let note = Outgoing::parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned());
        assert!(!note.is_request());
        assert_eq!(note.routing_name(), None);

        let junk = Outgoing::parse("not json".to_owned());
        assert_eq!((junk.id(), junk.method()), (None, None));
        assert_eq!(&*junk, "not json");
    }
}
