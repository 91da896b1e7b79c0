//! `cargo xtask bench [GROUP...]`: each group measures one path of the project beside a floor
//! that does the same work with no framework, in the same run (rounds interleaved where the
//! group allows), and prints both figures and their ratio. No group given runs them all.

mod agent;
mod catalog;
mod connect;
mod http;
mod startup;
mod stdio;

pub(crate) use connect::run as connect;

use crate::Result;

/// One benchmark group of `cargo xtask bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    /// stdio `tools/call` against a raw pipe client.
    Stdio,
    /// Streamable HTTP `tools/call` (JSON and SSE answers) and session open against a raw hyper client.
    Http,
    /// `tools --json` over a big catalog against a plain writer.
    Catalog,
    /// The agent loop's own cost per step against a loop with no framework.
    Agent,
    /// Starting one stdio server, and memory per idle server.
    Startup,
}

impl Group {
    /// Every group, in the order `cargo xtask bench` runs them.
    pub(crate) const ALL: [Group; 5] = [Group::Stdio, Group::Http, Group::Catalog, Group::Agent, Group::Startup];

    /// The name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Group::Stdio => "stdio",
            Group::Http => "http",
            Group::Catalog => "catalog",
            Group::Agent => "agent",
            Group::Startup => "startup",
        }
    }

    /// The group a command-line name picks.
    pub(crate) fn from_name(name: &str) -> Option<Group> {
        Group::ALL.into_iter().find(|g| g.name() == name)
    }
}

/// Runs the groups asked for (every group when none is), each `rounds` times; `n` is the number
/// of calls or steps a group's round makes where it has such a count.
pub(crate) fn run(groups: &[Group], n: usize, rounds: usize) -> Result {
    let groups = if groups.is_empty() { &Group::ALL[..] } else { groups };
    let mut failed = Vec::new();
    for group in groups {
        println!("\n=== bench {} ===", group.name());
        let result = match group {
            Group::Stdio => stdio::run(n, rounds),
            Group::Http => http::run(n, rounds),
            Group::Catalog => catalog::run(n, rounds),
            Group::Agent => agent::run(n, rounds),
            Group::Startup => startup::run(n, rounds),
        };
        if let Err(e) = result {
            println!("bench {}: {e}", group.name());
            failed.push(group.name());
        }
    }
    if failed.is_empty() { Ok(()) } else { Err(format!("bench groups failed: {}", failed.join(", "))) }
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set, else the workspace's `target`.
pub(crate) fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| crate::root().join("target"), std::path::PathBuf::from)
}

/// Where cargo puts release builds.
pub(crate) fn release_dir() -> std::path::PathBuf {
    target_dir().join("release")
}

/// Builds the fixture server in release and gives its path. A build of its own: the target
/// selection flags of a group's build would leave the fixture binary out.
pub(crate) fn fixture_server() -> Result<std::path::PathBuf> {
    crate::run(
        "build fixture server (release)",
        crate::cargo().args(["build", "--release", "-p", "mcp-fixtures", "--bins"]),
    )?;
    Ok(release_dir().join("mcp-fixture-server"))
}

/// The number after `"key":` in a one-line JSON figure an example printed.
pub(crate) fn field(line: &str, key: &str) -> Option<f64> {
    let at = line.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = &line[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

/// The median, 0 for no values.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}
