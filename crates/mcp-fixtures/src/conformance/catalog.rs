//! What the conformance server offers, as data: the exact names and contents the official
//! conformance suite's server scenarios ask for (`@modelcontextprotocol/conformance`, pinned in
//! `xtask/conformance/`), plus `update_watched_resource`, which is ours.

use base64::Engine;
use serde_json::{Value, json};

/// A 1x1 red PNG in base64 (written for this fixture with Python's `zlib` and `struct`).
pub(crate) const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

/// The watched resource, which `update_watched_resource` changes.
pub(crate) const WATCHED: &str = "test://watched-resource";

/// The template of `resources-templates-read`.
const TEMPLATE_PREFIX: &str = "test://template/";

/// A short WAV (8 kHz, 8-bit mono PCM, eight samples of silence), in base64.
pub(crate) fn wav() -> String {
    let samples = [128u8; 8];
    let mut wav = Vec::with_capacity(44 + samples.len());
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // the fmt chunk's size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // one channel
    wav.extend_from_slice(&8000u32.to_le_bytes()); // samples per second
    wav.extend_from_slice(&8000u32.to_le_bytes()); // bytes per second
    wav.extend_from_slice(&1u16.to_le_bytes()); // bytes per frame
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(&samples);
    base64::engine::general_purpose::STANDARD.encode(wav)
}

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({"name": name, "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required}})
}

/// Every tool.
pub(crate) fn tools() -> Vec<Value> {
    let none = || json!({});
    vec![
        tool("test_simple_text", "Returns a simple text.", none(), &[]),
        tool("test_image_content", "Returns a PNG image.", none(), &[]),
        tool("test_audio_content", "Returns a WAV sound.", none(), &[]),
        tool("test_embedded_resource", "Returns an embedded text resource.", none(), &[]),
        tool("test_multiple_content_types", "Returns a text, an image and an embedded JSON resource.", none(), &[]),
        tool("test_tool_with_logging", "Logs three messages at info, 50 ms apart, while it runs.", none(), &[]),
        tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100, 50 ms apart.", none(), &[]),
        tool("test_error_handling", "Always fails, with an error result.", none(), &[]),
        tool(
            "test_sampling",
            "Asks the client to sample (sampling/createMessage) and returns what the model said.",
            json!({"prompt": {"type": "string", "description": "The prompt to send to the model"}}),
            &["prompt"],
        ),
        tool(
            "test_elicitation",
            "Asks the user for a username and an email (elicitation/create) and returns the answer.",
            json!({"message": {"type": "string", "description": "The message to show the user"}}),
            &["message"],
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Asks for a form whose every field has a default (SEP-1034).",
            none(),
            &[],
        ),
        tool("test_elicitation_sep1330_enums", "Asks for a form with the five enum shapes (SEP-1330).", none(), &[]),
        json!({"name": "json_schema_2020_12_tool", "description": "Has a JSON Schema 2020-12 input schema (SEP-1613).",
        "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": false
        }}),
        tool(
            "test_reconnection",
            "Over HTTP, closes its answer stream after the priming event and answers on the resumed stream (SEP-1699).",
            none(),
            &[],
        ),
        tool(
            "update_watched_resource",
            "Changes test://watched-resource and tells its subscribers (notifications/resources/updated).",
            none(),
            &[],
        ),
    ]
}

/// The direct resources.
pub(crate) fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "test://static-text", "name": "static-text", "title": "Static text",
            "description": "A text resource.", "mimeType": "text/plain"}),
        json!({"uri": "test://static-binary", "name": "static-binary", "title": "Static binary",
            "description": "A PNG image.", "mimeType": "image/png"}),
        json!({"uri": WATCHED, "name": "watched-resource", "title": "Watched resource",
            "description": "Changed by update_watched_resource; subscribe to hear of it.", "mimeType": "text/plain"}),
    ]
}

/// The resource templates.
pub(crate) fn templates() -> Vec<Value> {
    vec![json!({"uriTemplate": "test://template/{id}/data", "name": "template", "title": "Data by id",
        "description": "JSON data naming the id it was read with.", "mimeType": "application/json"})]
}

/// Reads `uri`; `version` counts the watched resource's changes. `Err`: the JSON-RPC error.
pub(crate) fn read(uri: &str, version: u64) -> Result<Value, (i64, String)> {
    let contents = match uri {
        "test://static-text" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
        }
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
        WATCHED => {
            json!({"uri": uri, "mimeType": "text/plain", "text": format!("Watched resource, version {version}.")})
        }
        _ => match uri.strip_prefix(TEMPLATE_PREFIX).and_then(|rest| rest.strip_suffix("/data")) {
            Some(id) if !id.is_empty() && !id.contains('/') => {
                let text = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                json!({"uri": uri, "mimeType": "application/json", "text": text.to_string()})
            }
            _ => return Err((-32002, format!("Resource not found: {uri}"))),
        },
    };
    Ok(json!({"contents": [contents]}))
}

fn argument(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "required": true})
}

/// The prompts.
pub(crate) fn prompts() -> Vec<Value> {
    vec![
        json!({"name": "test_simple_prompt", "title": "Simple prompt", "description": "A prompt without arguments."}),
        json!({"name": "test_prompt_with_arguments", "title": "Prompt with arguments",
            "description": "A prompt that says its two arguments.",
            "arguments": [argument("arg1", "First test argument"), argument("arg2", "Second test argument")]}),
        json!({"name": "test_prompt_with_embedded_resource", "title": "Prompt with an embedded resource",
            "description": "A prompt that embeds the resource it is given.",
            "arguments": [argument("resourceUri", "URI of the resource to embed")]}),
        json!({"name": "test_prompt_with_image", "title": "Prompt with an image", "description": "A prompt with a PNG image."}),
    ]
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// Gets a prompt (`params` of `prompts/get`). `Err`: the JSON-RPC error.
pub(crate) fn get_prompt(params: &Value) -> Result<Value, (i64, String)> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
    let arg = |key: &str| -> Result<&str, (i64, String)> {
        params
            .get("arguments")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .ok_or_else(|| (-32602, format!("Invalid params: prompt {name} needs the argument {key}")))
    };
    let messages = match name {
        "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => {
            let said = format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1")?, arg("arg2")?);
            vec![user(text(&said))]
        }
        "test_prompt_with_embedded_resource" => vec![
            user(json!({"type": "resource", "resource": {"uri": arg("resourceUri")?, "mimeType": "text/plain",
                "text": "Embedded resource content for testing."}})),
            user(text("Please process the embedded resource above.")),
        ],
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
            user(text("Please analyze the image above.")),
        ],
        _ => return Err((-32602, format!("Invalid params: unknown prompt {name:?}"))),
    };
    Ok(json!({"messages": messages}))
}

/// Answers `completion/complete`: the candidates of the argument that start with what was typed.
pub(crate) fn complete(params: &Value) -> Value {
    let reference = params.get("ref").cloned().unwrap_or_default();
    let argument = params.get("argument").and_then(|a| a.get("name")).and_then(Value::as_str).unwrap_or_default();
    let typed = params.get("argument").and_then(|a| a.get("value")).and_then(Value::as_str).unwrap_or_default();
    let candidates: &[&str] = match (reference.get("type").and_then(Value::as_str), argument) {
        (Some("ref/prompt"), "arg1" | "arg2")
            if reference.get("name").and_then(Value::as_str) == Some("test_prompt_with_arguments") =>
        {
            &["test", "testing", "paris", "park"]
        }
        (Some("ref/resource"), "id") => &["123", "456"],
        _ => &[],
    };
    let values: Vec<&str> = candidates.iter().copied().filter(|c| c.starts_with(typed)).collect();
    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}})
}

/// The form of `test_elicitation`.
pub(crate) fn elicit_user(message: &str) -> Value {
    json!({"mode": "form", "message": message, "requestedSchema": {"type": "object", "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"}
    }, "required": ["username", "email"]}})
}

/// The form of `test_elicitation_sep1034_defaults`: a default for every primitive type.
pub(crate) fn elicit_defaults() -> Value {
    json!({"mode": "form", "message": "Please review the fields; each has a default", "requestedSchema": {
        "type": "object", "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        }, "required": []}})
}

/// The form of `test_elicitation_sep1330_enums`: the five enum shapes.
pub(crate) fn elicit_enums() -> Value {
    let titled = |prefix: &str, kind: &str| -> Value {
        let words = ["First", "Second", "Third"];
        let items = words
            .iter()
            .zip(1..)
            .map(|(word, i)| json!({"const": format!("{prefix}{i}"), "title": format!("{word} {kind}")}));
        Value::Array(items.collect())
    };
    json!({"mode": "form", "message": "Please pick from each list", "requestedSchema": {
        "type": "object", "properties": {
            "untitledSingle": {"type": "string", "description": "Pick one", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Pick one (titled)", "oneOf": titled("value", "Option")},
            "legacyEnum": {"type": "string", "description": "Pick one (legacy titles)", "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Pick some", "minItems": 1, "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Pick some (titled)", "minItems": 1, "maxItems": 3,
                "items": {"anyOf": titled("value", "Choice")}}
        }, "required": []}})
}
