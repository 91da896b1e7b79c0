//! `cargo xtask bench [GROUP...]`: each group measures one path of the project beside a floor
//! that does the same work with no framework, in the same run (rounds interleaved where the
//! group allows), and prints both figures and their ratio. No group given runs them all.

mod agent;
mod catalog;
mod connect;
mod footprint;
mod gateway;
mod http;
pub(crate) mod startup;
mod stdio;

pub(crate) use connect::run as connect;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Command;

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
    /// `mcp-harness serve` (HTTP and stdio) fronting the echo fixture against the HTTP and
    /// stdio floors, its memory, and what exporting every span costs.
    Gateway,
}

impl Group {
    /// Every group, in the order `cargo xtask bench` runs them.
    pub(crate) const ALL: [Group; 6] =
        [Group::Stdio, Group::Http, Group::Catalog, Group::Agent, Group::Startup, Group::Gateway];

    /// The name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Group::Stdio => "stdio",
            Group::Http => "http",
            Group::Catalog => "catalog",
            Group::Agent => "agent",
            Group::Startup => "startup",
            Group::Gateway => "gateway",
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
            Group::Gateway => gateway::run(n, rounds),
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

/// Builds `mcp-harness` as shipped (the `dist` profile: whole-program optimization, and the
/// layout of `startup.order`) and gives its path. On its own, as the README installs it: built
/// together with an example, its dependencies get other features, so other symbol names, and
/// `startup.order` would no longer match.
pub(crate) fn shipped_harness() -> Result<std::path::PathBuf> {
    crate::run(
        "build (dist)",
        crate::cargo().args([
            "build",
            "--profile",
            "dist",
            "-p",
            "cli",
            "--bin",
            "mcp-harness",
            "--bin",
            "mcp-harness-sandbox",
        ]),
    )?;
    Ok(target_dir().join("dist").join("mcp-harness"))
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

/// A server process of a benchmark; killed when dropped (closing its stdin, when it has one,
/// asks it to stop first).
pub(crate) struct Server(pub(crate) std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        if !matches!(self.0.try_wait(), Ok(Some(_))) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

impl Server {
    /// Starts `command` (its stdout piped) and reads the first line it prints (its URL).
    pub(crate) fn started(mut command: Command, what: &str) -> Result<(Server, String)> {
        let mut child = command.spawn().map_err(|e| format!("{what}: {e}"))?;
        let stdout = child.stdout.take().ok_or(format!("{what}: no stdout"))?;
        let server = Server(child);
        let mut first = String::new();
        BufReader::new(stdout).read_line(&mut first).map_err(|e| format!("{what}: {e}"))?;
        let first = first.trim().to_owned();
        if !first.starts_with("http://") {
            return Err(format!("{what} printed {first:?}, not its URL"));
        }
        Ok((server, first))
    }
}

/// The load average (1, 5 and 15 minutes), printed beside figures taken on a shared machine.
pub(crate) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The median, 0 for no values.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// Where a benchmark's processes run. With one call in flight, a round trip between two
/// processes (or threads) on this 2-core virtual machine took about 0.03 ms on the same CPU and
/// about 0.08 ms across two (waking an idle virtual CPU), whoever made it; left to the
/// scheduler, runs fell on either side at random and the wall-clock figures of a group moved by
/// 2-3x from run to run. So groups that time round trips place their processes themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Every process of the benchmark on the first CPU this process may use.
    OneCpu,
    /// The server on the second CPU, the client on the first.
    TwoCpus,
}

impl Placement {
    /// The placements this machine allows (the CPUs this process may use, as `taskset` sees
    /// them): none when `taskset` cannot be run, so the caller runs unplaced.
    pub(crate) fn available() -> Vec<Placement> {
        let cpus = allowed_cpus();
        let taskset = Command::new("taskset").arg("-V").output().is_ok_and(|o| o.status.success());
        match cpus.len() {
            _ if !taskset => Vec::new(),
            0 => Vec::new(),
            1 => vec![Placement::OneCpu],
            _ => vec![Placement::OneCpu, Placement::TwoCpus],
        }
    }

    /// The label in the tables.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Placement::OneCpu => "one CPU",
            Placement::TwoCpus => "two CPUs",
        }
    }

    /// A command running `program` as this placement's server (`server`) or client, under
    /// `taskset`.
    pub(crate) fn command(self, program: &Path, server: bool) -> Command {
        on_cpus(program, self.cpu(server))
    }

    /// The command line that starts `program` as this placement's server, for a client that
    /// spawns its server itself (`taskset --cpu-list CPU program`, or `program` alone when the
    /// CPUs are unknown).
    pub(crate) fn server_argv(self, program: &Path) -> Vec<std::ffi::OsString> {
        match self.cpu(true) {
            Some(cpu) => vec!["taskset".into(), "--cpu-list".into(), cpu.into(), program.into()],
            None => vec![program.into()],
        }
    }

    /// The CPU of this placement's server (`server`) or client.
    fn cpu(self, server: bool) -> Option<String> {
        let index = usize::from(server && self == Placement::TwoCpus);
        allowed_cpus().get(index).map(|cpu| cpu.to_string())
    }

    /// A command running `program`, server and client in one process, on this placement's CPUs:
    /// one, or two with its threads placed by the scheduler.
    pub(crate) fn process(self, program: &Path) -> Command {
        let cpus = allowed_cpus();
        let list = match self {
            Placement::OneCpu => cpus.first().map(|cpu| cpu.to_string()),
            Placement::TwoCpus => cpus.get(..2).map(|two| format!("{},{}", two[0], two[1])),
        };
        on_cpus(program, list)
    }
}

/// `program` under `taskset --cpu-list LIST`; with no list, on the CPUs this process has.
fn on_cpus(program: &Path, list: Option<String>) -> Command {
    match list {
        Some(list) => {
            let mut command = Command::new("taskset");
            command.args(["--cpu-list", &list]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// The CPUs this process may use, from `Cpus_allowed_list` in `/proc/self/status` (`0-3,6`).
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap_or_default();
    cpu_list(list)
}

/// The CPUs of a kernel CPU list (`0-3,6`), in order; an unreadable part is skipped.
fn cpu_list(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let bounds = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.trim().parse(), part.trim().parse()),
        };
        if let (Ok(a), Ok(b)) = bounds {
            cpus.extend(a..=b.min(a + 4096));
        }
    }
    cpus
}

#[cfg(test)]
mod tests {
    use super::cpu_list;

    #[test]
    fn kernel_cpu_lists_are_read() {
        assert_eq!(cpu_list("0-1\n"), [0, 1]);
        assert_eq!(cpu_list("0-2,5,7-8"), [0, 1, 2, 5, 7, 8]);
        assert_eq!(cpu_list("3"), [3]);
        assert_eq!(cpu_list(""), Vec::<usize>::new());
        assert_eq!(cpu_list("x,4"), [4]);
    }
}
