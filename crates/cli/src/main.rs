//! `mcp-harness`: the command-line agent.
fn main() {}
