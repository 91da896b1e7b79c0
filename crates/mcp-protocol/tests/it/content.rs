//! Decoding of tool results and content blocks: every member kept, unknown types tolerated,
//! malformed blocks named.

use mcp_protocol::{CallToolResult, ContentBlock};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn round_trip(value: Value) -> CallToolResult {
    let decoded: CallToolResult = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(serde_json::to_value(&decoded).unwrap(), value, "nothing lost");
    decoded
}

#[test]
fn every_known_block_round_trips_with_unknown_members() {
    let result = round_trip(json!({
        "content": [
            {"type": "text", "text": "hi", "annotations": {"priority": 1}, "x-note": [1, 2], "_meta": {"a": 1}},
            {"type": "image", "data": "aGk=", "mimeType": "image/png", "name": "stray member"},
            {"type": "audio", "data": "aGk=", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///a", "name": "a", "title": "A", "size": 3},
            {"type": "resource", "resource": {"uri": "file:///b", "text": "b"}, "text": "stray"}
        ],
        "structuredContent": null,
        "isError": false,
        "_meta": {"trace": "t"},
        "resultType": "complete"
    }));
    assert_eq!(result.content.len(), 5);
    assert_eq!(result.joined_text(), "hi");
    assert_eq!(result.structured_content, Some(Value::Null));
    assert!(matches!(&result.content[3], ContentBlock::ResourceLink { title: Some(t), .. } if t == "A"));
    assert_eq!(result.extra.get("resultType"), Some(&json!("complete")));
}

#[test]
fn an_unknown_content_type_is_kept_whole() {
    let result = round_trip(json!({
        "content": [{"type": "hologram", "frames": 3, "text": "not a text block"}, {"type": "text", "text": "ok"}]
    }));
    assert!(matches!(&result.content[0], ContentBlock::Other(m) if m["frames"] == 3));
    assert_eq!(result.joined_text(), "ok");
}

#[test]
fn malformed_blocks_are_named() {
    for (block, expected) in [
        (json!({"text": "no type"}), "type"),
        (json!({"type": "text"}), "text"),
        (json!({"type": "text", "text": 5}), "\"text\" must be a string"),
        (json!({"type": "image", "data": "x"}), "mimeType"),
        (json!({"type": "resource"}), "resource"),
        (json!({"type": 7}), "must be a string"),
    ] {
        let err = serde_json::from_value::<CallToolResult>(json!({"content": [block.clone()]})).unwrap_err();
        assert!(err.to_string().contains(expected), "{block}: {err}");
    }
}

#[test]
fn missing_or_null_content_is_empty() {
    assert!(serde_json::from_value::<CallToolResult>(json!({})).unwrap().content.is_empty());
    assert!(serde_json::from_value::<CallToolResult>(json!({"content": null})).unwrap().content.is_empty());
}
