//! Shared helpers: where the specification data lives, and reading it.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The environment variable naming the directory that holds `spec/`.
pub const SHARED_DIR_VAR: &str = "MCP_SHARED_DIR";

/// The shared data directory (the one containing `spec/`).
///
/// `MCP_SHARED_DIR` when set, else `../shared` beside the workspace root. Panics with a plain
/// message when the data is missing: a test that cannot see its data must fail, not pass.
pub fn shared_dir() -> PathBuf {
    let dir = match std::env::var_os(SHARED_DIR_VAR) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    let spec = dir.join("spec");
    assert!(
        spec.is_dir(),
        "the MCP specification data was not found: looked for the directory {}. \
         Set {SHARED_DIR_VAR} to the directory that contains spec/ (for example \
         {SHARED_DIR_VAR}=/path/to/shared cargo test -p mcp-protocol).",
        spec.display()
    );
    dir
}

/// `<shared>/spec/<revision>`.
pub fn spec_dir(revision: &str) -> PathBuf {
    shared_dir().join("spec").join(revision)
}

/// Read and parse a JSON file, panicking with the path on failure.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}
