//! Shared helpers: where the specification data lives (`tests/spec`), and reading it.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `tests/spec/<revision>`: the official schemas and examples, carried in the repository (see
/// `tests/spec/NOTICE` for their source and licence).
pub fn spec_dir(revision: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spec").join(revision);
    // A test that cannot see its data must fail, not pass.
    assert!(dir.is_dir(), "the MCP specification data for {revision} is missing: {}", dir.display());
    dir
}

/// Read and parse a JSON file, panicking with the path on failure.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}
