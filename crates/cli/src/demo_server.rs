//! The notes server of the offline demo, over stdio: `mcp-harness demo` runs this same binary
//! as `mcp-harness demo-server` (a hidden command), so the demo needs nothing else built.
//!
//! Tools: `list_notes`, `read_note {name}`, `write_note {name, text}`. The notes live in memory
//! and start with a few examples, so the demo touches nothing on disk.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn tools() -> Value {
    json!([
        {"name": "list_notes", "title": "List notes", "description": "List the names of all notes.",
         "inputSchema": {"type": "object", "properties": {}},
         "annotations": {"readOnlyHint": true}},
        {"name": "read_note", "title": "Read a note", "description": "Read one note by name.",
         "inputSchema": {"type": "object", "properties": {"name": {"type": "string", "description": "The note's name"}}, "required": ["name"]},
         "annotations": {"readOnlyHint": true}},
        {"name": "write_note", "title": "Write a note", "description": "Create or replace a note.",
         "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}, "text": {"type": "string"}}, "required": ["name", "text"]},
         "annotations": {"destructiveHint": true}}
    ])
}

fn text(t: impl Into<String>, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": t.into()}], "isError": is_error})
}

fn call(notes: &mut BTreeMap<String, String>, name: &str, args: &Value) -> Value {
    let arg = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
    match name {
        "list_notes" => text(notes.keys().cloned().collect::<Vec<_>>().join("\n"), false),
        "read_note" => match arg("name").and_then(|n| notes.get(&n).cloned()) {
            Some(body) => text(body, false),
            None => {
                text(format!("no note named {:?}; list_notes shows the names", arg("name").unwrap_or_default()), true)
            }
        },
        "write_note" => match (arg("name"), arg("text")) {
            (Some(n), Some(t)) => {
                let existed = notes.insert(n.clone(), t).is_some();
                text(format!("{} note {n:?}", if existed { "replaced" } else { "created" }), false)
            }
            _ => text("write_note needs a name and a text", true),
        },
        other => text(format!("unknown tool {other:?}"), true),
    }
}

/// Serves newline-delimited JSON-RPC on stdin / stdout until stdin ends.
pub(crate) fn serve() {
    let mut notes = BTreeMap::from([
        (
            "ideas".to_owned(),
            "- A tool pool per model step\n- Host policy beats server hints\n- Errors stay at the tool boundary"
                .to_owned(),
        ),
        ("todo".to_owned(), "- Write the README\n- Run cargo xtask test".to_owned()),
    ]);
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            let _ = crate::output::stderr("mcp-harness demo-server: skipped a line that is not JSON\n");
            continue;
        };
        let Some(id) = msg.get("id").cloned() else { continue }; // notifications need no answer
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        let result = match msg.get("method").and_then(Value::as_str) {
            Some("initialize") => {
                let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("2025-06-18");
                let version = if ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"].contains(&asked) {
                    asked
                } else {
                    "2025-06-18"
                };
                Ok(json!({"protocolVersion": version, "capabilities": {"tools": {}},
                          "serverInfo": {"name": "mcp-demo-notes", "version": env!("CARGO_PKG_VERSION")}}))
            }
            Some("ping") => Ok(json!({})),
            Some("tools/list") => Ok(json!({"tools": tools()})),
            Some("tools/call") => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                Ok(call(&mut notes, &name, params.get("arguments").unwrap_or(&json!({}))))
            }
            _ => Err(json!({"code": -32601, "message": "Method not found"})),
        };
        let reply = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        if writeln!(stdout, "{reply}").and_then(|()| stdout.flush()).is_err() {
            break;
        }
    }
}
