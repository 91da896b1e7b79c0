//! Loading the tool search evaluation set (`crates/tool-pool/data/search-eval`), shared by the
//! `search_eval` and `search_bench` examples.

// Each example uses part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};

use mcp_protocol::Tool;
use serde::Deserialize;
use serde_json::Value;

/// The set's folder in this repository.
pub(crate) fn default_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data").join("search-eval")
}

#[derive(Deserialize)]
struct ToolRow {
    server: String,
    name: String,
    description: String,
    input_schema: Value,
}

/// One labelled query.
#[derive(Deserialize)]
pub(crate) struct Query {
    /// Its id in the source data set.
    pub(crate) id: String,
    /// `bfcl`, `bfcl_multi_turn` or `livemcpbench`.
    pub(crate) source: String,
    /// `dev` (tuning) or `test` (held out).
    pub(crate) split: String,
    /// What the user asked.
    pub(crate) query: String,
    /// The tools that answer it; each target is a list of acceptable (server, tool) pairs.
    pub(crate) targets: Vec<Vec<(String, String)>>,
}

/// Every tool of the set, by server (sorted), each server's tools in file order.
pub(crate) fn tools(dir: &Path) -> Result<BTreeMap<String, Vec<Tool>>, Box<dyn Error>> {
    let text = std::fs::read_to_string(dir.join("tools.jsonl")).map_err(|e| format!("tools.jsonl: {e}"))?;
    let mut servers: BTreeMap<String, Vec<Tool>> = BTreeMap::new();
    for line in text.lines() {
        let row: ToolRow = serde_json::from_str(line)?;
        let mut tool = Tool::new(row.name, row.input_schema);
        tool.description = Some(row.description);
        servers.entry(row.server).or_default().push(tool);
    }
    Ok(servers)
}

/// Every query of the set, in file order.
pub(crate) fn queries(dir: &Path) -> Result<Vec<Query>, Box<dyn Error>> {
    let text = std::fs::read_to_string(dir.join("queries.jsonl")).map_err(|e| format!("queries.jsonl: {e}"))?;
    Ok(text.lines().map(serde_json::from_str).collect::<Result<_, _>>()?)
}
