//! Request bodies, written as compact JSON field by field, with the conversation spliced in from
//! a cache of each message's serialized wire form.
//!
//! An agent sends the whole conversation at every step, and the conversation only grows: the
//! cache keeps the bytes of the messages the last request carried, so step N serializes only
//! its new messages and copies the rest (turning every message into `Value`s and serializing
//! it again was half the CPU of a long run). The bytes are exactly what serializing the whole
//! body as one `serde_json::Value` gives: compact JSON of an array is its elements' compact
//! JSON joined by commas.

use std::sync::{Arc, Mutex};

use agent_loop::{Message, ModelError};
use serde::Serialize;
use serde_json::Value;

/// Fails unless a model is named, in the request or by the adapter.
pub(crate) fn check_model(request_model: &str, adapter_model: &str) -> Result<(), ModelError> {
    if request_model.is_empty() && adapter_model.is_empty() {
        return Err(ModelError::Configuration("no model named: set one in the request or with with_model".into()));
    }
    Ok(())
}

fn encode_error(e: &serde_json::Error) -> ModelError {
    ModelError::Configuration(format!("could not encode the request: {e}"))
}

/// A JSON object written one field at a time, as serde_json writes a `Value::Object` (compact,
/// fields in the order they are added).
pub(crate) struct Body {
    out: Vec<u8>,
    fields: usize,
}

impl Body {
    /// An empty object, with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        out.push(b'{');
        Self { out, fields: 0 }
    }

    /// Adds `"key":value`.
    pub(crate) fn field(&mut self, key: &str, value: &impl Serialize) -> Result<(), ModelError> {
        self.key(key)?;
        serde_json::to_writer(&mut self.out, value).map_err(|e| encode_error(&e))
    }

    /// Adds `"key":[...]`: `leading` elements, then the wire form of every message of `messages`
    /// (through `cache`).
    pub(crate) fn messages(
        &mut self,
        key: &str,
        leading: &[Value],
        messages: &[Message],
        cache: &MessageCache,
    ) -> Result<(), ModelError> {
        self.key(key)?;
        self.out.push(b'[');
        let mut first = true;
        for element in leading {
            if !first {
                self.out.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut self.out, element).map_err(|e| encode_error(&e))?;
        }
        cache.write(&mut self.out, first, messages)?;
        self.out.push(b']');
        Ok(())
    }

    /// The object's bytes.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.out.push(b'}');
        self.out
    }

    fn key(&mut self, key: &str) -> Result<(), ModelError> {
        if self.fields > 0 {
            self.out.push(b',');
        }
        self.fields += 1;
        serde_json::to_writer(&mut self.out, key).map_err(|e| encode_error(&e))?;
        self.out.push(b':');
        Ok(())
    }
}

/// One message's wire form: the array elements it becomes (none, one, or several).
pub(crate) type Encode = fn(&Message) -> Vec<Value>;

/// The serialized wire form of the messages of an adapter's last request, in order.
///
/// A message is reused only where it equals the one cached at the same position (a comparison,
/// far cheaper than building and serializing its `Value`s); from the first difference on, the
/// messages are encoded again and replace the cache. Clones of an adapter share it; a request
/// of another conversation only costs its own encoding.
#[derive(Clone)]
pub(crate) struct MessageCache {
    encode: Encode,
    entries: Arc<Mutex<Vec<Cached>>>,
}

/// A message and the compact JSON of its elements, joined by commas (empty for none).
struct Cached {
    message: Message,
    json: Vec<u8>,
}

impl MessageCache {
    /// An empty cache of messages encoded by `encode`.
    pub(crate) fn new(encode: Encode) -> Self {
        Self { encode, entries: Arc::default() }
    }

    /// Writes the elements of `messages` to `out` (a comma before each unless `first` and
    /// nothing written yet).
    fn write(&self, out: &mut Vec<u8>, mut first: bool, messages: &[Message]) -> Result<(), ModelError> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let same = entries.iter().zip(messages).take_while(|(cached, message)| cached.message == **message).count();
        entries.truncate(same);
        for message in &messages[same..] {
            let mut json = Vec::new();
            for (i, element) in (self.encode)(message).iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                serde_json::to_writer(&mut json, element).map_err(|e| encode_error(&e))?;
            }
            entries.push(Cached { message: message.clone(), json });
        }
        for cached in entries.iter().filter(|c| !c.json.is_empty()) {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(&cached.json);
        }
        Ok(())
    }
}

impl std::fmt::Debug for MessageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cached = self.entries.lock().map_or(0, |e| e.len());
        f.debug_struct("MessageCache").field("cached", &cached).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use agent_loop::{Block, Role};
    use serde_json::json;

    use super::*;

    /// The user's text as one element, an assistant's blocks as one each, nothing for an empty
    /// message.
    fn encode(message: &Message) -> Vec<Value> {
        match message.role {
            Role::User => vec![json!({"u": message.text()})],
            Role::Assistant => message.content.iter().map(|b| json!({"a": b})).collect(),
        }
    }

    fn body(messages: &[Message], cache: &MessageCache) -> Vec<u8> {
        let mut body = Body::with_capacity(0);
        body.field("model", &"m").unwrap();
        body.messages("messages", &[json!({"system": "s\u{202e}\"x"})], messages, cache).unwrap();
        body.field("stream", &true).unwrap();
        body.finish()
    }

    fn reference(messages: &[Message]) -> Vec<u8> {
        let mut all = vec![json!({"system": "s\u{202e}\"x"})];
        all.extend(messages.iter().flat_map(encode));
        serde_json::to_vec(&json!({"model": "m", "messages": all, "stream": true})).unwrap()
    }

    /// Growing, rewritten, shrunk and emptied conversations all give exactly the bytes of the
    /// whole body serialized as one value.
    #[test]
    fn bodies_are_the_whole_value_serialized() {
        let cache = MessageCache::new(encode);
        let assistant = |blocks: Vec<Block>| Message { role: Role::Assistant, content: blocks };
        let mut messages = vec![Message::user("hi \"there\"\n")];
        assert_eq!(body(&messages, &cache), reference(&messages));
        messages.push(assistant(vec![]));
        messages.push(assistant(vec![
            Block::text("a"),
            Block::ToolUse { id: "1".into(), name: "t".into(), input: json!({"x": [1, 2.5]}) },
        ]));
        messages.push(Message::user("é"));
        assert_eq!(body(&messages, &cache), reference(&messages));
        assert_eq!(body(&messages, &cache), reference(&messages));
        messages[1] = Message::user("changed");
        assert_eq!(body(&messages, &cache), reference(&messages));
        messages.truncate(1);
        assert_eq!(body(&messages, &cache), reference(&messages));
        assert_eq!(body(&[], &cache), reference(&[]));
        assert_eq!(
            String::from_utf8(body(&[], &cache)).unwrap(),
            "{\"model\":\"m\",\"messages\":[{\"system\":\"s\u{202e}\\\"x\"}],\"stream\":true}"
        );
    }
}
