//! `cargo xtask connect-bench`: many stdio servers connected at once.

use std::process::Command;

use crate::{Result, cargo};

/// `cargo xtask connect-bench`: the connect benchmark example (it prints its own table and
/// whether the goal was met) against the release fixture server.
pub(crate) fn run(rounds: usize) -> Result {
    crate::run(
        "build (release)",
        cargo().args(["build", "--release", "-p", "mcp-client", "--example", "connect_bench"]),
    )?;
    let server = super::fixture_server()?;
    let release = super::release_dir();
    let status = Command::new(release.join("examples").join("connect_bench"))
        .args(["--rounds", &rounds.to_string(), "--"])
        .arg(&server)
        .status()
        .map_err(|e| format!("connect_bench: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("connect_bench failed: {status}")) }
}
