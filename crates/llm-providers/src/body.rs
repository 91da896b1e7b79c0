//! Request bodies, written as compact JSON field by field, with the conversation spliced in from
//! a cache of the messages' serialized wire form.
//!
//! An agent sends the whole conversation at every step, and the conversation only grows: the
//! cache keeps the bytes of the messages the last request carried, so step N serializes only
//! its new messages and copies the rest (turning every message into `Value`s and serializing
//! it again was half the CPU of a long run). The loop sends the same `Arc`s at every step, so
//! a cached message is recognized by its pointer; a request built anew is compared message by
//! message. The bytes are exactly what serializing the whole body as one `serde_json::Value`
//! gives: compact JSON of an array is its elements' compact JSON joined by commas.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_loop::{Block, Message, ModelError, ToolSpec};
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

    /// Adds `"key":value` where `value` is JSON already serialized compactly.
    pub(crate) fn raw_field(&mut self, key: &str, json: &[u8]) -> Result<(), ModelError> {
        self.key(key)?;
        self.out.extend_from_slice(json);
        Ok(())
    }

    /// Adds `"key":[...]`: `leading` elements, then the wire form of every message of `messages`
    /// (through `cache`).
    pub(crate) fn messages(
        &mut self,
        key: &str,
        leading: &[&dyn erased::Element],
        messages: &[Arc<Message>],
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
            element.write(&mut self.out).map_err(|e| encode_error(&e))?;
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

/// Elements of the messages array written before the conversation (a system message).
pub(crate) mod erased {
    /// A value serialized as one array element.
    pub(crate) trait Element {
        /// Writes its compact JSON to `out`.
        fn write(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error>;
    }

    impl<T: serde::Serialize> Element for T {
        fn write(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
            serde_json::to_writer(out, self)
        }
    }
}

/// One message's wire form: writes the array elements it becomes (none, one, or several),
/// joined by commas, to the buffer.
pub(crate) type Encode = fn(&Message, &mut Vec<u8>) -> Result<(), serde_json::Error>;

/// Whether two messages serialize to the same bytes: equal, with objects' keys in the same
/// order (serde_json keeps insertion order, so `==`, which ignores it, is not enough) and
/// floats equal bit for bit (`0.0 == -0.0`). Comparing in order is also cheaper than `==`,
/// which looks every key up by hash.
fn same_message(a: &Message, b: &Message) -> bool {
    a.role == b.role
        && a.content.len() == b.content.len()
        && a.content.iter().zip(&b.content).all(|(x, y)| same_block(x, y))
}

fn same_block(a: &Block, b: &Block) -> bool {
    match (a, b) {
        (Block::Text { text: x }, Block::Text { text: y }) => x == y,
        (Block::ToolUse { id: i, name: n, input: x }, Block::ToolUse { id: j, name: m, input: y }) => {
            i == j && n == m && same_json(x, y)
        }
        (
            Block::ToolResult { tool_use_id: i, content: x, is_error: e },
            Block::ToolResult { tool_use_id: j, content: y, is_error: f },
        ) => i == j && x == y && e == f,
        (Block::Provider { provider: p, block: x }, Block::Provider { provider: q, block: y }) => {
            p == q && same_json(x, y)
        }
        _ => false,
    }
}

/// Whether two values serialize to the same bytes (see [`same_message`]).
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k, v), (l, w))| k == l && same_json(v, w))
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_json(v, w)),
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits) && x.is_f64() == y.is_f64()
        }
        _ => a == b,
    }
}

/// The serialized wire form of the messages of an adapter's last request, in order.
///
/// A message is reused only where it is the one cached at the same position: the same `Arc`
/// (the loop's requests; the cache holds a clone, so that message cannot have changed), or else
/// an equal message (a comparison, far cheaper than encoding it; the request's `Arc` then
/// replaces the cached one, so the next request is known by pointer). From the first
/// difference on, the messages are encoded again and replace the cache. Clones of an adapter
/// share it; a request of another conversation only costs its own encoding.
#[derive(Clone)]
pub(crate) struct MessageCache {
    encode: Encode,
    entries: Arc<Mutex<Vec<Cached>>>,
    /// The length of the last body: the next one is that and its new messages, so it is
    /// allocated at once instead of grown (and copied) as it is written.
    last_body: Arc<AtomicUsize>,
}

/// Room for a step's new messages and the fields around them, beyond the last body's length.
const BODY_SLACK: usize = 4096;

/// A message and the compact JSON of its elements, joined by commas (empty for none).
///
/// Each message keeps its own bytes, and a body copies them one by one, as the floor of
/// `cargo xtask bench agent` copies its history: one buffer of the whole history copied at once
/// costs no less on the hardware, but callgrind counts glibc's `rep movsb` for large copies
/// as one instruction per byte (70k more instructions per step at 401 steps per turn).
struct Cached {
    message: Arc<Message>,
    json: Vec<u8>,
}

impl MessageCache {
    /// An empty cache of messages encoded by `encode`.
    pub(crate) fn new(encode: Encode) -> Self {
        Self { encode, entries: Arc::default(), last_body: Arc::default() }
    }

    /// An empty body with room for the next request of this conversation.
    pub(crate) fn body(&self) -> Body {
        Body::with_capacity(self.last_body.load(Ordering::Relaxed).saturating_add(BODY_SLACK))
    }

    /// The bytes of `body`, its length remembered for [`body`](Self::body).
    pub(crate) fn finish(&self, body: Body) -> Vec<u8> {
        let bytes = body.finish();
        self.last_body.store(bytes.len(), Ordering::Relaxed);
        bytes
    }

    /// Writes the elements of `messages` to `out` (a comma before each unless `first` and
    /// nothing written yet).
    fn write(&self, out: &mut Vec<u8>, mut first: bool, messages: &[Arc<Message>]) -> Result<(), ModelError> {
        let mut entries = mcp_safety::lock(&self.entries);
        let mut same = 0;
        for (cached, message) in entries.iter_mut().zip(messages) {
            if !Arc::ptr_eq(&cached.message, message) {
                if !same_message(&cached.message, message) {
                    break;
                }
                cached.message = Arc::clone(message);
            }
            same += 1;
        }
        entries.truncate(same);
        for message in &messages[same..] {
            let mut json = Vec::new();
            (self.encode)(message, &mut json).map_err(|e| encode_error(&e))?;
            entries.push(Cached { message: Arc::clone(message), json });
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

/// The serialized tool list of an adapter's last request, reused while the request's tools are
/// the same (the loop sends the same list at every step until the pool changes). Clones of an
/// adapter share it.
#[derive(Clone, Default)]
pub(crate) struct ToolsCache {
    last: Arc<Mutex<Option<CachedTools>>>,
}

/// Tools and their compact JSON array.
type CachedTools = (Vec<ToolSpec>, Vec<u8>);

impl ToolsCache {
    /// Adds `"key":tools` to `body`: the cached bytes when `tools` are the cached ones, else
    /// what `encode` gives (then cached).
    pub(crate) fn write(
        &self,
        body: &mut Body,
        key: &str,
        tools: &[ToolSpec],
        encode: impl FnOnce(&[ToolSpec]) -> Result<Vec<u8>, serde_json::Error>,
    ) -> Result<(), ModelError> {
        let mut last = mcp_safety::lock(&self.last);
        if let Some((cached, json)) = last.as_ref()
            && cached.len() == tools.len()
            && cached.iter().zip(tools).all(|(a, b)| same_spec(a, b))
        {
            return body.raw_field(key, json);
        }
        let json = encode(tools).map_err(|e| encode_error(&e))?;
        body.raw_field(key, &json)?;
        *last = Some((tools.to_vec(), json));
        Ok(())
    }
}

impl std::fmt::Debug for ToolsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsCache").finish_non_exhaustive()
    }
}

/// Whether two tools serialize alike (see [`same_message`]).
fn same_spec(a: &ToolSpec, b: &ToolSpec) -> bool {
    a.name == b.name
        && a.description == b.description
        && a.defer_loading == b.defer_loading
        && same_json(&a.input_schema, &b.input_schema)
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
    fn elements(message: &Message) -> Vec<Value> {
        match message.role {
            Role::Assistant => message.content.iter().map(|b| json!({"a": b})).collect(),
            _ => vec![json!({"u": message.text()})],
        }
    }

    fn encode(message: &Message, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        for (i, element) in elements(message).iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut *out, element)?;
        }
        Ok(())
    }

    fn body(messages: &[Arc<Message>], cache: &MessageCache) -> Vec<u8> {
        let mut body = Body::with_capacity(0);
        body.field("model", &"m").unwrap();
        body.messages("messages", &[&json!({"system": "s\u{202e}\"x"})], messages, cache).unwrap();
        body.field("stream", &true).unwrap();
        body.finish()
    }

    fn reference(messages: &[Arc<Message>]) -> Vec<u8> {
        let mut all = vec![json!({"system": "s\u{202e}\"x"})];
        all.extend(messages.iter().flat_map(|m| elements(m)));
        serde_json::to_vec(&json!({"model": "m", "messages": all, "stream": true})).unwrap()
    }

    fn assistant(blocks: Vec<Block>) -> Arc<Message> {
        Arc::new(Message { role: Role::Assistant, content: blocks })
    }

    fn tool_use(input: Value) -> Block {
        Block::ToolUse { id: "1".into(), name: "t".into(), input }
    }

    /// Growing, rewritten, shrunk and emptied conversations all give exactly the bytes of the
    /// whole body serialized as one value.
    #[test]
    fn bodies_are_the_whole_value_serialized() {
        let cache = MessageCache::new(encode);
        let mut messages = vec![Arc::new(Message::user("hi \"there\"\n"))];
        assert_eq!(body(&messages, &cache), reference(&messages));
        messages.push(assistant(vec![]));
        messages.push(assistant(vec![Block::text("a"), tool_use(json!({"x": [1, 2.5]}))]));
        messages.push(Message::user("é").into());
        assert_eq!(body(&messages, &cache), reference(&messages));
        assert_eq!(body(&messages, &cache), reference(&messages));
        messages[1] = Message::user("changed").into();
        assert_eq!(body(&messages, &cache), reference(&messages));
        // Equal under `==`, but its keys in another order: written again, not reused.
        messages[2] = assistant(vec![Block::text("a"), tool_use(json!({"y": 0.0, "x": 1}))]);
        assert_eq!(body(&messages, &cache), reference(&messages));
        messages[2] = assistant(vec![Block::text("a"), tool_use(json!({"x": 1, "y": 0.0}))]);
        assert_eq!(body(&messages, &cache), reference(&messages));
        messages[2] = assistant(vec![Block::text("a"), tool_use(json!({"x": 1, "y": -0.0}))]);
        assert_eq!(body(&messages, &cache), reference(&messages));
        messages.truncate(1);
        assert_eq!(body(&messages, &cache), reference(&messages));
        assert_eq!(body(&[], &cache), reference(&[]));
        assert_eq!(
            String::from_utf8(body(&[], &cache)).unwrap(),
            "{\"model\":\"m\",\"messages\":[{\"system\":\"s\u{202e}\\\"x\"}],\"stream\":true}"
        );
    }

    /// A changed message is never reused: not one replaced at an old position by another of the
    /// same length, not one changed through a clone of its `Arc` (which copies it, since the
    /// cache holds the other clone), not one in an `Arc` of its own.
    #[test]
    fn a_changed_message_is_written_again() {
        let cache = MessageCache::new(encode);
        let mut messages: Vec<Arc<Message>> =
            vec![Message::user("abc").into(), assistant(vec![Block::text("x")]), Message::user("def").into()];
        assert_eq!(body(&messages, &cache), reference(&messages));
        messages[0] = Message::user("abd").into();
        messages.push(assistant(vec![Block::text("y")]));
        assert_eq!(body(&messages, &cache), reference(&messages));
        let kept = Arc::clone(&messages[1]);
        Arc::make_mut(&mut messages[1]).content[0] = Block::text("z");
        assert_eq!(kept.text(), "x", "the cache's clone is untouched");
        assert_eq!(body(&messages, &cache), reference(&messages));
        let mut copy = Message::clone(&messages[2]);
        copy.content[0] = Block::text("deg");
        messages[2] = Arc::new(copy);
        assert_eq!(body(&messages, &cache), reference(&messages));
        assert!(
            String::from_utf8(body(&messages, &cache))
                .unwrap()
                .contains(r#"{"u":"abd"},{"a":{"type":"text","text":"z"}},{"u":"deg"}"#)
        );
    }

    /// The same messages in `Arc`s of their own (a request built anew) are reused, and their
    /// `Arc`s kept, so the next request is recognized by pointer.
    #[test]
    fn equal_messages_in_new_arcs_are_reused_and_adopted() {
        let cache = MessageCache::new(encode);
        let first: Vec<Arc<Message>> = vec![Message::user("a").into(), assistant(vec![Block::text("b")])];
        assert_eq!(body(&first, &cache), reference(&first));
        let second: Vec<Arc<Message>> = first.iter().map(|m| Arc::new(Message::clone(m))).collect();
        assert_eq!(body(&second, &cache), reference(&second));
        let entries = cache.entries.lock().unwrap();
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().zip(&second).all(|(cached, m)| Arc::ptr_eq(&cached.message, m)));
    }
}
