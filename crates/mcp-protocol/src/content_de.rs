//! Hand-written decoding of [`ContentBlock`] and [`CallToolResult`].
//!
//! Derived decoding of an internally tagged enum with flattened unknown fields buffers every
//! member twice; these visitors read each member once, keep unknown members in `extra`, and turn
//! an unknown content `type` into [`ContentBlock::Other`] rather than an error.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::types::{Annotations, CallToolResult, ContentBlock, Extra, ResourceContents};

/// The member names the visitors know; anything else is kept by name.
enum Key {
    Type,
    Text,
    Data,
    MimeType,
    Uri,
    Name,
    Title,
    Description,
    Annotations,
    Resource,
    Content,
    StructuredContent,
    IsError,
    Meta,
    Other(String),
}

impl Key {
    fn name(&self) -> &str {
        match self {
            Key::Type => "type",
            Key::Text => "text",
            Key::Data => "data",
            Key::MimeType => "mimeType",
            Key::Uri => "uri",
            Key::Name => "name",
            Key::Title => "title",
            Key::Description => "description",
            Key::Annotations => "annotations",
            Key::Resource => "resource",
            Key::Content => "content",
            Key::StructuredContent => "structuredContent",
            Key::IsError => "isError",
            Key::Meta => "_meta",
            Key::Other(name) => name,
        }
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "type" => Key::Type,
                    "text" => Key::Text,
                    "data" => Key::Data,
                    "mimeType" => Key::MimeType,
                    "uri" => Key::Uri,
                    "name" => Key::Name,
                    "title" => Key::Title,
                    "description" => Key::Description,
                    "annotations" => Key::Annotations,
                    "resource" => Key::Resource,
                    "content" => Key::Content,
                    "structuredContent" => Key::StructuredContent,
                    "isError" => Key::IsError,
                    "_meta" => Key::Meta,
                    other => Key::Other(other.to_owned()),
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

/// Members of a content block, as read; which ones matter depends on `type`, read last.
#[derive(Default)]
struct Members {
    kind: Option<Value>,
    text: Option<Value>,
    data: Option<Value>,
    mime_type: Option<Value>,
    uri: Option<Value>,
    name: Option<Value>,
    title: Option<Value>,
    description: Option<Value>,
    annotations: Option<Value>,
    resource: Option<Value>,
    extra: Extra,
}

fn required<E: de::Error>(value: Option<Value>, field: &'static str) -> Result<Value, E> {
    value.ok_or_else(|| E::missing_field(field))
}

fn string<E: de::Error>(value: Value, field: &str) -> Result<String, E> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(E::custom(format!("content member {field:?} must be a string, got {other}"))),
    }
}

fn optional_string<E: de::Error>(value: Option<Value>, field: &str) -> Result<Option<String>, E> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => string(v, field).map(Some),
    }
}

fn typed<T: de::DeserializeOwned, E: de::Error>(value: Option<Value>, field: &str) -> Result<Option<T>, E> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v).map(Some).map_err(|e| E::custom(format!("content member {field:?}: {e}"))),
    }
}

impl Members {
    /// Every member the block's type did not take, with the unknown ones: kept for the round trip.
    fn rest(&mut self) -> Extra {
        let mut rest = std::mem::take(&mut self.extra);
        let known = [
            ("text", self.text.take()),
            ("data", self.data.take()),
            ("mimeType", self.mime_type.take()),
            ("uri", self.uri.take()),
            ("name", self.name.take()),
            ("title", self.title.take()),
            ("description", self.description.take()),
            ("annotations", self.annotations.take()),
            ("resource", self.resource.take()),
        ];
        for (name, value) in known {
            if let Some(value) = value {
                rest.insert(name.to_owned(), value);
            }
        }
        rest
    }

    fn annotations<E: de::Error>(&mut self) -> Result<Option<Annotations>, E> {
        typed(self.annotations.take(), "annotations")
    }

    fn take_block<E: de::Error>(&mut self) -> Result<ContentBlock, E> {
        let kind = match self.kind.take() {
            Some(Value::String(kind)) => kind,
            Some(other) => return Err(E::custom(format!("content \"type\" must be a string, got {other}"))),
            None => return Err(E::missing_field("type")),
        };
        let block = match kind.as_str() {
            "text" => {
                let text = string(required(self.text.take(), "text")?, "text")?;
                ContentBlock::Text { text, annotations: self.annotations()?, extra: self.rest() }
            }
            "image" | "audio" => {
                let data = string(required(self.data.take(), "data")?, "data")?;
                let mime_type = string(required(self.mime_type.take(), "mimeType")?, "mimeType")?;
                let (annotations, extra) = (self.annotations()?, self.rest());
                if kind == "image" {
                    ContentBlock::Image { data, mime_type, annotations, extra }
                } else {
                    ContentBlock::Audio { data, mime_type, annotations, extra }
                }
            }
            "resource_link" => {
                let uri = string(required(self.uri.take(), "uri")?, "uri")?;
                let name = string(required(self.name.take(), "name")?, "name")?;
                let title = optional_string(self.title.take(), "title")?;
                let description = optional_string(self.description.take(), "description")?;
                let mime_type = optional_string(self.mime_type.take(), "mimeType")?;
                let (annotations, extra) = (self.annotations()?, self.rest());
                ContentBlock::ResourceLink { uri, name, title, description, mime_type, annotations, extra }
            }
            "resource" => {
                let resource: ResourceContents =
                    typed(self.resource.take(), "resource")?.ok_or_else(|| E::missing_field("resource"))?;
                ContentBlock::Resource { resource, annotations: self.annotations()?, extra: self.rest() }
            }
            _ => {
                // Unknown type: keep every member as it came.
                let mut all = Map::new();
                all.insert("type".to_owned(), Value::String(kind));
                all.extend(self.rest());
                ContentBlock::Other(all)
            }
        };
        Ok(block)
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BlockVisitor;
        impl<'de> Visitor<'de> for BlockVisitor {
            type Value = ContentBlock;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block object with a \"type\"")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContentBlock, A::Error> {
                let mut m = Members::default();
                while let Some(key) = map.next_key::<Key>()? {
                    let slot = match key {
                        Key::Type => &mut m.kind,
                        Key::Text => &mut m.text,
                        Key::Data => &mut m.data,
                        Key::MimeType => &mut m.mime_type,
                        Key::Uri => &mut m.uri,
                        Key::Name => &mut m.name,
                        Key::Title => &mut m.title,
                        Key::Description => &mut m.description,
                        Key::Annotations => &mut m.annotations,
                        Key::Resource => &mut m.resource,
                        other => {
                            let value = map.next_value::<Value>()?;
                            m.extra.insert(other.name().to_owned(), value);
                            continue;
                        }
                    };
                    *slot = Some(map.next_value::<Value>()?);
                }
                m.take_block()
            }
        }
        d.deserialize_map(BlockVisitor)
    }
}

/// A list of blocks that starts small: most results carry one block, and serde's default
/// first allocation (four blocks of several hundred bytes) is large enough to make the
/// allocator consolidate its free lists on every call.
#[derive(Default)]
struct Blocks(Vec<ContentBlock>);

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BlocksVisitor;
        impl<'de> Visitor<'de> for BlocksVisitor {
            type Value = Blocks;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of content blocks")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Blocks, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(1).clamp(1, 64));
                while let Some(block) = seq.next_element()? {
                    blocks.push(block);
                }
                Ok(Blocks(blocks))
            }
        }
        d.deserialize_seq(BlocksVisitor)
    }
}

impl<'de> Deserialize<'de> for CallToolResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ResultVisitor;
        impl<'de> Visitor<'de> for ResultVisitor {
            type Value = CallToolResult;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tools/call result object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CallToolResult, A::Error> {
                let mut result = CallToolResult::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Content => result.content = map.next_value::<Option<Blocks>>()?.unwrap_or_default().0,
                        // Kept even when null: `Some(Value::Null)` round-trips as sent.
                        Key::StructuredContent => result.structured_content = Some(map.next_value()?),
                        Key::IsError => result.is_error = map.next_value()?,
                        Key::Meta => result.meta = map.next_value()?,
                        other => {
                            let value = map.next_value::<Value>()?;
                            result.extra.insert(other.name().to_owned(), value);
                        }
                    }
                }
                Ok(result)
            }
        }
        d.deserialize_map(ResultVisitor)
    }
}
