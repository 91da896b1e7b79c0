//! `raw_catalog SERVER CMD...`: the floor of `cargo xtask bench catalog`.
//!
//! What `mcp-harness tools --json` does for one server, with no framework: initialize over the
//! child's pipes, list every page of tools, and write the pool as pretty JSON with serde
//! straight to stdout (each tool's model name, server, raw name, decision, description and
//! schema, then an exposure entry per tool), so both write about the same bytes.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs, unreachable_pub)]

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Command, Stdio};

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Value, json};

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raw_catalog: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The tools as the harness prints them, serialized as they are written.
struct Catalog<'a> {
    server: &'a str,
    tools: &'a [Value],
}

/// A sequence serialized from an iterator as it is written.
struct Seq<F>(F);

impl<I: Iterator<Item = Value>, F: Fn() -> I> Serialize for Seq<F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq((self.0)())
    }
}

impl Serialize for Catalog<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let name = |t: &Value| format!("mcp__{}__{}", self.server, t["name"].as_str().unwrap_or(""));
        let tools = || {
            self.tools.iter().map(|t| {
                json!({"name": name(t), "server": self.server, "tool": t["name"], "decision": "allow",
                       "rule": "default", "description": t["description"], "input_schema": t["inputSchema"]})
            })
        };
        let exposed = || {
            self.tools.iter().map(|t| {
                json!({"name": name(t), "size": t.to_string().len(), "state": "loaded", "reason": "within every budget"})
            })
        };
        struct Exposure<F>(F);
        impl<I: Iterator<Item = Value>, F: Fn() -> I> Serialize for Exposure<F> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("revision", &1)?;
                map.serialize_entry("tools", &Seq(&self.0))?;
                map.serialize_entry("diagnostics", &[(); 0])?;
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("revision", &1)?;
        map.serialize_entry("tools", &Seq(tools))?;
        map.serialize_entry("diagnostics", &[(); 0])?;
        map.serialize_entry("hidden", &[(); 0])?;
        map.serialize_entry("exposure", &Exposure(exposed))?;
        map.end()
    }
}

fn run() -> Result<(), String> {
    let command: Vec<String> = std::env::args().skip(1).collect();
    let (program, args) = command.split_first().ok_or("usage: raw_catalog SERVER CMD...")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdin = BufWriter::new(child.stdin.take().ok_or("no stdin")?);
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    let mut ask = |request: Value, line: &mut String| -> Result<Value, String> {
        writeln!(stdin, "{request}").map_err(|e| e.to_string())?;
        stdin.flush().map_err(|e| e.to_string())?;
        line.clear();
        stdout.read_line(line).map_err(|e| e.to_string())?;
        let mut answer: Value = serde_json::from_str(line).map_err(|e| format!("bad answer: {e}"))?;
        Ok(answer["result"].take())
    };
    ask(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}),
        &mut line,
    )?;
    let mut tools = Vec::new();
    let mut cursor = Value::Null;
    for id in 1.. {
        let params = if cursor.is_null() { json!({}) } else { json!({"cursor": cursor}) };
        let mut page = ask(json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params}), &mut line)?;
        if let Value::Array(listed) = page["tools"].take() {
            tools.extend(listed);
        }
        cursor = page["nextCursor"].take();
        if cursor.is_null() {
            break;
        }
    }
    let mut out = BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, &Catalog { server: "fx", tools: &tools }).map_err(|e| e.to_string())?;
    out.write_all(b"\n").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    drop(stdin);
    let _ = child.wait();
    Ok(())
}
