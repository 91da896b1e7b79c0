//! What a server's tool list can make declaring its tools cost: bounded, whatever the schemas
//! and names.

use code_mode::{ScriptTool, ScriptTools};
use serde_json::{Value, json};

fn declared(schemas: &[Value]) -> String {
    let tools = schemas
        .iter()
        .enumerate()
        .map(|(i, schema)| ScriptTool::new(format!("mcp__s__t{i}"), "s", format!("t{i}"), schema.clone()));
    ScriptTools::new(tools).declarations(1 << 20).text
}

/// A reference cycle through a union (`a = anyOf [a]`) recursed until the stack overflowed,
/// which no panic handler catches: the host died when it described the tools.
#[test]
fn a_reference_cycle_through_a_union_is_declared_unknown() {
    let cyclic = |key: &str| {
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}},
               "$defs": {"a": {key: [{"$ref": "#/$defs/a"}, {"type": "string"}]}}})
    };
    let text = declared(&[cyclic("anyOf"), cyclic("oneOf"), cyclic("allOf")]);
    assert!(text.contains("function t0(args: { x?: unknown })"), "{text}");
    assert!(text.contains("function t2("), "{text}");
}

/// References that fan out through unions (each level doubling the work) stop at a budget of
/// schema nodes: at depth 28 this took minutes at every step.
#[test]
fn references_fanning_out_are_read_within_a_budget() {
    let depth = 28;
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/a{}", i + 1);
        defs.insert(format!("a{i}"), json!({"anyOf": [{"$ref": next}, {"$ref": next}]}));
    }
    defs.insert(format!("a{depth}"), json!({"type": "string"}));
    let schema = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs});
    let text = declared(&[schema]);
    assert!(text.contains("function t0(args: { x?:"), "{text}");
}

/// Thousands of tools whose names become the same identifier (alike up to where an
/// identifier keeps them) each get their own, told apart by a suffix.
#[test]
fn tools_named_alike_are_told_apart() {
    let base = "a".repeat(60);
    let tools: Vec<ScriptTool> = (0..3000u32)
        .map(|i| {
            let name = format!("{base}{}", char::from_u32(0x4E00 + i).unwrap());
            ScriptTool::new(format!("mcp__s__{i}"), "s", &name, json!({"type": "object"}))
        })
        .collect();
    let text = ScriptTools::new(tools).declarations(1 << 24).text;
    assert!(text.contains(&format!("function {base}_(")), "{}", &text[..500]);
    assert!(text.contains(&format!("function {base}__3000(")), "the last one");
    assert!(!text.contains(&format!("function {base}__3001(")));
}
