//! Measures the cost of decoding and encoding typical messages (a quick profiling aid).
#![allow(clippy::print_stdout, missing_docs)]
use mcp_protocol::{CallToolResult, Message};
use std::time::Instant;

fn main() {
    let line = r#"{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"hello 12345"}]}}"#;
    let n = 200_000;
    let t = Instant::now();
    for _ in 0..n {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        std::hint::black_box(v);
    }
    println!("value parse: {:?}/msg", t.elapsed() / n);
    let t = Instant::now();
    for _ in 0..n {
        if let Ok(Message::Response(r)) = Message::decode_str(line) {
            let res: CallToolResult = serde_json::from_str(r.result.get()).unwrap_or_default();
            std::hint::black_box(res);
        }
    }
    println!("envelope + typed: {:?}/msg", t.elapsed() / n);
    let t = Instant::now();
    for _ in 0..n {
        let m = Message::decode_str(line);
        let _ = std::hint::black_box(m);
    }
    println!("envelope only: {:?}/msg", t.elapsed() / n);
}
