//! `cargo xtask test [--hermetic]`: every check of the project, ending with one line that a CI
//! reader greps:
//!
//! `tests: 431 passed, 0 failed, 0 ignored; conformance: 26 passed, 0 failed; server conformance: 32 passed, 0
//! failed, 0 expected failures; failed steps: none; not run: none`
//!
//! Every step runs even when an earlier one failed (tests run after a clippy failure), as far as
//! it can: a step whose prerequisite failed is named under `not run` with the reason. The exit
//! code is non-zero when anything failed or did not run, except what `--hermetic` skipped on
//! purpose (also named under `not run`).
//!
//! Every step has a time limit (`step.rs`): one that runs past it is killed with everything it
//! started and named under `failed steps`, and a test binary it was running is a failed test,
//! named with the tests that had been running for over a minute. Building the tests is a step
//! of its own, so the limit of running them need not allow for a cold build. A test step that
//! ran no test at all (its filter matched nothing) fails.

use std::env;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::conformance::{self, Summary};
use crate::conformance_server;
use crate::step::{self, Ended, StepError};
use crate::tally::Tally;
use crate::{cargo, install_peers};

/// Examples that show an adapter written outside the workspace, and the host embedded in a
/// program of its own; `cargo xtask test` runs them.
const ADAPTER_EXAMPLES: &[(&str, &str)] =
    &[("mcp-client", "tcp_transport"), ("agent-loop", "custom_model"), ("mcp-host", "embed")];

/// Features a user picks one at a time (`default-features = false`): each must build alone.
const FEATURE_SETS: &[(&str, &str)] =
    &[("mcp-transport", ""), ("mcp-transport", "stdio"), ("mcp-transport", "http"), ("mcp-transport", "ws")];

const fn minutes(n: u64) -> Duration {
    Duration::from_secs(n * 60)
}

/// Each step's time limit (scaled by `XTASK_STEP_LIMIT_SCALE`). Steps that compile allow for a
/// cold build on a loaded two-core machine; the others, for many times what they take there
/// (at a load average of 9: the built tests 80 s, the chaos test 40 s with its own build).
pub(crate) mod limit {
    use super::{Duration, minutes};

    pub(crate) const FMT: Duration = minutes(5);
    pub(crate) const CLIPPY: Duration = minutes(40);
    pub(crate) const DOCS: Duration = minutes(20);
    /// One `cargo check` of a crate with one feature.
    pub(crate) const FEATURES: Duration = minutes(10);
    /// Builds tidy's tests, then runs the purity tests.
    pub(crate) const PURITY: Duration = minutes(20);
    pub(crate) const BUILD_FIXTURES: Duration = minutes(20);
    pub(crate) const BUILD_TESTS: Duration = minutes(40);
    pub(crate) const TESTS: Duration = minutes(15);
    /// Runs for 30 s (after a build of its own when `-p` resolves other features).
    pub(crate) const CHAOS: Duration = minutes(10);
    /// Build and run one example.
    pub(crate) const EXAMPLE: Duration = minutes(15);
    /// One `npm ci` or `pip install` of pinned packages.
    pub(crate) const INSTALL: Duration = minutes(15);
    /// Builds with the `interop` feature, then runs.
    pub(crate) const INTEROP: Duration = minutes(30);
    pub(crate) const AGENT_INTEROP: Duration = minutes(20);
    pub(crate) const BUILD_CONFORMANCE: Duration = minutes(20);
    /// The server scenarios of both columns (about 2 s each at a load average of 9; 64 of them).
    pub(crate) const SERVER_CONFORMANCE: Duration = minutes(15);
}

pub(crate) fn test(hermetic: bool) -> crate::Result {
    let started = Instant::now();
    let mut report = Report::default();
    report.step("fmt", step::run("fmt", limit::FMT, cargo().args(["fmt", "--all", "--", "--check"])));
    report.step(
        "clippy",
        step::run(
            "clippy",
            limit::CLIPPY,
            cargo().args([
                "clippy",
                "--workspace",
                "--all-targets",
                "--features",
                "mcp-transport/interop,agent-loop/interop,cli/interop",
                "--",
                "-D",
                "warnings",
            ]),
        ),
    );
    // Every intra-doc link resolves and no public doc points at a private item.
    report.step(
        "docs",
        step::run(
            "docs",
            limit::DOCS,
            cargo().args(["doc", "--workspace", "--no-deps", "--quiet"]).env("RUSTDOCFLAGS", "-D warnings"),
        ),
    );
    for (package, features) in FEATURE_SETS {
        let name = format!("features {package}/{}", if features.is_empty() { "none" } else { features });
        let mut check = cargo_args(&["check", "--quiet", "-p", package, "--no-default-features"]);
        if !features.is_empty() {
            check.args(["--features", features]);
        }
        report.step(&name, step::run(&name, limit::FEATURES, &mut check));
    }
    report.step("purity", purity());
    // The transport tests spawn the fixture server binaries and the sandbox launcher, which no
    // test target depends on; build them first (the tests would build them too, one test
    // process at a time, each waiting for the build).
    report.step(
        "build fixtures",
        step::run(
            "build fixtures",
            limit::BUILD_FIXTURES,
            cargo().args(["build", "-p", "mcp-fixtures", "-p", "mcp-sandbox", "--bins"]),
        ),
    );
    // A build that fails here is reported again, crate by crate, by the tests step.
    report.step(
        "build tests",
        step::run("build tests", limit::BUILD_TESTS, cargo().args(["test", "--workspace", "--no-run"])),
    );
    // The gateway replicas' shared-state tests start their own redis-server (Debian's
    // package, which `.ci/run` installs); they are told where it is.
    let mut tests = cargo_args(&["test", "--workspace", "--no-fail-fast"]);
    match redis_server() {
        Ok(path) => {
            tests.env("MCP_REDIS_SERVER", path);
        }
        Err(why) => {
            println!("\n{why}");
            report.failed_steps.push(format!("redis-server ({why})"));
        }
    }
    report.tests("tests", limit::TESTS, tests, Counts::All);
    // Twenty supervised servers killed at random under a calling agent; prints its figures.
    report.tests(
        "chaos",
        limit::CHAOS,
        cargo_args(&["test", "-p", "agent-loop", "--test", "chaos", "--", "--ignored", "--nocapture"]),
        Counts::IgnoredByTests,
    );
    // The adapters written from outside, as a user would: a transport of their own through the
    // multi-server layer, a language model of their own driving the loop, the host embedded in a
    // program of its own. Each asserts its result.
    for (package, example) in ADAPTER_EXAMPLES {
        let name = format!("example {example}");
        report.step(
            &name,
            step::run(&name, limit::EXAMPLE, cargo().args(["run", "-q", "-p", package, "--example", example])),
        );
    }
    if hermetic {
        println!("\n--hermetic: skipping the interop suite and conformance (they install from npm and PyPI)");
        for step in ["interop", "agent interop", "serve interop", "conformance", "server conformance"] {
            report.not_run.push(NotRun { step: step.to_owned(), why: "--hermetic".to_owned(), hermetic: true });
        }
    } else {
        match install_peers() {
            Ok(peers) => {
                let mut interop = cargo_args(&[
                    "test",
                    "-p",
                    "mcp-transport",
                    "--features",
                    "interop",
                    "--test",
                    "interop",
                    "--test",
                    "interop_http",
                    "--no-fail-fast",
                ]);
                interop.env("MCP_PEERS_DIR", &peers);
                report.tests("interop", limit::INTEROP, interop, Counts::All);
                // An agent session with the scripted model against a third-party server, and
                // the command line with one from a fresh HOME.
                let mut agent = cargo_args(&[
                    "test",
                    "-p",
                    "agent-loop",
                    "-p",
                    "cli",
                    "--features",
                    "agent-loop/interop,cli/interop",
                    "--test",
                    "interop",
                    "--no-fail-fast",
                ]);
                agent.env("MCP_PEERS_DIR", &peers);
                report.tests("agent interop", limit::AGENT_INTEROP, agent, Counts::All);
                // The SDKs' clients (TypeScript, Python) through `mcp-harness serve`.
                let mut serve = cargo_args(&[
                    "test",
                    "-p",
                    "cli",
                    "--features",
                    "interop",
                    "--test",
                    "serve_peers",
                    "--no-fail-fast",
                ]);
                serve.env("MCP_PEERS_DIR", &peers);
                report.tests("serve interop", limit::AGENT_INTEROP, serve, Counts::All);
            }
            Err(e) => {
                for step in ["interop", "agent interop", "serve interop"] {
                    report.not_run(step, &format!("peers not installed: {e}"));
                }
            }
        }
        match conformance::conformance(&[]) {
            Ok(summary) => report.conformance = Some(summary),
            Err(e) => report.not_run("conformance", &e),
        }
        // The server scenarios against our conformance fixture, directly and through the gateway.
        match conformance_server::conformance_server(&[]) {
            Ok(summary) => report.server_conformance = Some(summary),
            Err(e) => report.not_run("server conformance", &e),
        }
    }
    report.print(started.elapsed());
    if report.ok() { Ok(()) } else { Err("some steps failed or did not run (see the last line above)".to_owned()) }
}

/// The pure crates do no I/O: tidy's purity tests (the one implementation of the check; plain
/// `cargo test` runs them too, so `test` counts them there, not here). Fails when the filter
/// matched no test.
pub(crate) fn purity() -> Result<(), StepError> {
    let cmd = cargo_args(&["test", "-p", "tidy", "--test", "tidy", "--", "workspace::purity"]);
    let (ended, tally) = run_tests("purity", limit::PURITY, cmd).map_err(StepError::Start)?;
    match ended {
        Ended::TimedOut => Err(StepError::TimedOut(step::scaled(limit::PURITY))),
        Ended::Exited(status) if !status.success() => Err(StepError::Failed(status.to_string())),
        Ended::Exited(_) if tally.ran() == 0 => Err(StepError::Failed(no_test_ran(&tally))),
        Ended::Exited(_) => Ok(()),
    }
}

/// Where `redis-server` is: `MCP_REDIS_SERVER`, else on `PATH` or in the usual places; else
/// one line saying what to install.
pub(crate) fn redis_server() -> Result<PathBuf, String> {
    locate_redis_server(env::var_os("MCP_REDIS_SERVER"), &env::var_os("PATH").unwrap_or_default())
}

fn locate_redis_server(configured: Option<OsString>, path: &OsStr) -> Result<PathBuf, String> {
    if let Some(configured) = configured {
        let configured = PathBuf::from(configured);
        return if configured.is_file() {
            Ok(configured)
        } else {
            Err(format!("redis-server not found at MCP_REDIS_SERVER={}", configured.display()))
        };
    }
    env::split_paths(path)
        .chain(["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from))
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            "redis-server not found: install Debian's redis-server (apt-get install -y redis-server) or set MCP_REDIS_SERVER"
                .to_owned()
        })
}

fn cargo_args(args: &[&str]) -> Command {
    let mut cmd = cargo();
    cmd.args(args);
    cmd
}

/// Why a test step that ran no test fails.
fn no_test_ran(tally: &Tally) -> String {
    if tally.binaries == 0 {
        "no test ran".to_owned()
    } else {
        format!("no test ran: its filter matched none ({} filtered out, {} ignored)", tally.filtered_out, tally.ignored)
    }
}

/// Runs a `cargo test` command within `limit`, echoing its output (stdout and stderr through
/// one pipe, so cargo's `Running ...` lines and the binaries' results arrive in order) while
/// counting it.
fn run_tests(step: &str, limit: Duration, mut cmd: Command) -> Result<(Ended, Tally), String> {
    let limit = step::scaled(limit);
    println!("\n==> {step}: {cmd:?} (time limit {})", step::show(limit));
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut out = std::io::stdout();
    let mut on_line = |line: &[u8]| {
        let _ = out.write_all(line);
        let _ = out.write_all(b"\n");
        tally.line(&String::from_utf8_lossy(line));
    };
    let ended = step::within(&mut cmd, limit, Some(&mut on_line)).map_err(|e| format!("could not start: {e}"))?;
    let took = started.elapsed().as_secs_f64();
    match ended {
        Ended::Exited(status) => println!("<== {step}: {status} in {took:.1}s"),
        Ended::TimedOut => {
            tally.stopped(&step::show(limit));
            println!("<== {step}: ran past its time limit of {} and was stopped after {took:.1}s", step::show(limit));
        }
    }
    tally.finish();
    Ok((ended, tally))
}

/// How a test step's counts join the run's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counts {
    All,
    /// It runs tests that the `tests` step counted as ignored (`--ignored`): they ran after all.
    IgnoredByTests,
}

/// A step that did not run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NotRun {
    step: String,
    why: String,
    /// Skipped on purpose by `--hermetic`: does not fail the run.
    hermetic: bool,
}

/// Everything `test` counted.
#[derive(Debug, Default)]
struct Report {
    tests: Tally,
    conformance: Option<Summary>,
    server_conformance: Option<Summary>,
    failed_steps: Vec<String>,
    not_run: Vec<NotRun>,
    /// Tests run by a step of [`Counts::IgnoredByTests`].
    ran_ignored: u64,
}

impl Report {
    fn step(&mut self, step: &str, result: Result<(), StepError>) {
        match result {
            Ok(()) => {}
            Err(StepError::Failed(_)) => self.failed_steps.push(step.to_owned()),
            Err(e) => self.failed_steps.push(format!("{step} ({e})")),
        }
    }

    fn not_run(&mut self, step: &str, why: &str) {
        self.not_run.push(NotRun { step: step.to_owned(), why: why.to_owned(), hermetic: false });
    }

    fn tests(&mut self, step: &str, limit: Duration, cmd: Command, counts: Counts) {
        match run_tests(step, limit, cmd) {
            Ok((Ended::Exited(status), tally)) => {
                self.add_tests(step, status.success(), &status.to_string(), tally, counts);
            }
            Ok((Ended::TimedOut, tally)) => self.timed_out(step, step::scaled(limit), tally, counts),
            Err(e) => self.not_run(step, &e),
        }
    }

    /// A test step that ran past its `limit`: it failed, and what it counted still counts.
    fn timed_out(&mut self, step: &str, limit: Duration, tally: Tally, counts: Counts) {
        self.failed_steps.push(format!("{step} ({})", StepError::TimedOut(limit)));
        self.merge(step, tally, counts);
    }

    /// Counts a test step's results; a step that failed without a recognised failure, or that
    /// ran no test at all (no binary, or a filter that matched nothing), is a failed step, so a
    /// change in cargo's output or a renamed test cannot make a run green.
    fn add_tests(&mut self, step: &str, success: bool, status: &str, tally: Tally, counts: Counts) {
        if !success && tally.failed == 0 {
            self.failed_steps.push(format!("{step} (exited with {status}; no failure recognised in its output)"));
        }
        if success && tally.ran() == 0 && tally.not_compiled.is_empty() {
            self.failed_steps.push(format!("{step} ({})", no_test_ran(&tally)));
        }
        self.merge(step, tally, counts);
    }

    fn merge(&mut self, step: &str, tally: Tally, counts: Counts) {
        if !tally.not_compiled.is_empty() {
            self.not_run(step, &format!("did not compile: {}", tally.not_compiled.join(", ")));
        }
        if counts == Counts::IgnoredByTests {
            self.ran_ignored += tally.ran();
        }
        self.tests.merge(tally);
    }

    /// Tests that no step ran: ignored by one step and not run by another.
    fn ignored(&self) -> u64 {
        self.tests.ignored.saturating_sub(self.ran_ignored)
    }

    fn ok(&self) -> bool {
        self.tests.failed == 0
            && self.conformance.as_ref().is_none_or(|c| c.failed == 0)
            && self.server_conformance.as_ref().is_none_or(|c| c.failed == 0)
            && self.failed_steps.is_empty()
            && self.not_run.iter().all(|n| n.hermetic)
    }

    fn closing_line(&self) -> String {
        let conformance = match &self.conformance {
            Some(c) => format!("{} passed, {} failed", c.passed, c.failed),
            None => "not run".to_owned(),
        };
        let server = match &self.server_conformance {
            Some(c) => {
                let note = c.note.map(|n| format!(" ({n})")).unwrap_or_default();
                format!("{} passed, {} failed, {} expected failures{note}", c.passed, c.failed, c.expected)
            }
            None => "not run".to_owned(),
        };
        let list = |items: Vec<String>| if items.is_empty() { "none".to_owned() } else { items.join(", ") };
        let failed = list(self.failed_steps.clone());
        let not_run = list(self.not_run.iter().map(|n| format!("{} ({})", n.step, n.why)).collect());
        // One line, whatever the reasons held.
        format!(
            "tests: {} passed, {} failed, {} ignored; conformance: {conformance}; server conformance: {server}; failed \
             steps: {failed}; not run: {not_run}",
            self.tests.passed,
            self.tests.failed,
            self.ignored()
        )
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
    }

    fn print(&self, took: Duration) {
        let failures: Vec<String> = self
            .tests
            .failures
            .iter()
            .cloned()
            .chain(self.conformance.iter().flat_map(|c| c.failures.iter().map(|f| format!("conformance {f}"))))
            .chain(
                self.server_conformance
                    .iter()
                    .flat_map(|c| c.failures.iter().map(|f| format!("server conformance {f}"))),
            )
            .collect();
        if !failures.is_empty() {
            println!("\nfailures:");
            for failure in &failures {
                println!("  {failure}");
            }
        }
        let verdict = if self.ok() { "passed" } else { "FAILED" };
        println!("\nxtask test: {verdict} in {:.0}s", took.as_secs_f64());
        println!("{}", self.closing_line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(passed: u64, failed: u64) -> Tally {
        let mut t = Tally::default();
        t.line("     Running unittests src/lib.rs (target/debug/deps/a-1)");
        t.line(&format!("test result: ok. {passed} passed; {failed} failed; 0 ignored"));
        t
    }

    fn conformance(passed: usize, failed: usize) -> Option<Summary> {
        Some(Summary { passed, failed, ..Summary::default() })
    }

    #[test]
    fn all_green() {
        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", tally(431, 0), Counts::All);
        r.conformance = conformance(26, 0);
        r.server_conformance = Some(Summary {
            passed: 32,
            expected: 1,
            note: Some(conformance_server::GATEWAY_NOT_BUILT),
            ..Summary::default()
        });
        assert!(r.ok());
        assert_eq!(
            r.closing_line(),
            "tests: 431 passed, 0 failed, 0 ignored; conformance: 26 passed, 0 failed; server conformance: 32 passed, 0 \
             failed, 1 expected failures (gateway column: serve not built yet); failed steps: none; not run: none"
        );
    }

    #[test]
    fn a_failed_step_fails_the_run_and_is_named() {
        let mut r = Report::default();
        r.step("fmt", Ok(()));
        r.step("clippy", Err(StepError::Failed("exit status: 101".to_owned())));
        r.add_tests("tests", true, "exit status: 0", tally(10, 0), Counts::All);
        r.conformance = conformance(26, 0);
        assert!(!r.ok());
        assert_eq!(
            r.closing_line(),
            "tests: 10 passed, 0 failed, 0 ignored; conformance: 26 passed, 0 failed; server conformance: not run; failed \
             steps: clippy; not run: none"
        );
    }

    #[test]
    fn what_did_not_run_fails_the_run_unless_hermetic_skipped_it() {
        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", tally(10, 0), Counts::All);
        r.not_run("interop", "peers not installed: npm peers failed (exit status: 1)\nnpm ERR! network");
        r.not_run("conformance", "npm conformance harness failed");
        assert!(!r.ok());
        assert_eq!(
            r.closing_line(),
            "tests: 10 passed, 0 failed, 0 ignored; conformance: not run; server conformance: not run; failed steps: none; \
             not run: interop (peers not installed: npm peers failed (exit status: 1) npm ERR! network), conformance \
             (npm conformance harness failed)"
        );

        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", tally(10, 0), Counts::All);
        r.not_run.push(NotRun { step: "conformance".into(), why: "--hermetic".into(), hermetic: true });
        assert!(r.ok());
        assert!(r.closing_line().ends_with("not run: conformance (--hermetic)"), "{}", r.closing_line());
    }

    #[test]
    fn failed_tests_and_scenarios_fail_the_run() {
        let mut r = Report::default();
        r.add_tests("tests", false, "exit status: 101", tally(9, 1), Counts::All);
        r.conformance = conformance(26, 0);
        assert!(!r.ok());
        assert!(r.failed_steps.is_empty(), "a failed test is counted once, as a test");

        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", tally(10, 0), Counts::All);
        r.conformance = conformance(25, 1);
        assert!(!r.ok());

        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", tally(10, 0), Counts::All);
        r.server_conformance = conformance(31, 1);
        assert!(!r.ok(), "a failed server scenario fails the run");
    }

    #[test]
    fn a_step_cannot_go_green_by_accident() {
        // Exited badly but nothing in the output said why: the output format may have changed.
        let mut r = Report::default();
        r.add_tests("tests", false, "exit status: 101", Tally::default(), Counts::All);
        assert!(!r.ok());
        assert_eq!(r.failed_steps, ["tests (exited with exit status: 101; no failure recognised in its output)"]);

        // Exited well without running a single test binary.
        let mut r = Report::default();
        r.add_tests("interop", true, "exit status: 0", Tally::default(), Counts::All);
        assert!(!r.ok());
        assert_eq!(r.failed_steps, ["interop (no test ran)"]);
    }

    /// A tally of one binary's `test result:` line.
    fn result(passed: u64, ignored: u64, filtered_out: u64) -> Tally {
        let mut t = Tally::default();
        t.line("     Running tests/a.rs (target/debug/deps/a-1)");
        t.line(&format!(
            "test result: ok. {passed} passed; 0 failed; {ignored} ignored; 0 measured; {filtered_out} filtered out"
        ));
        t
    }

    #[test]
    fn ignored_tests_that_a_later_step_ran_are_not_counted_as_ignored() {
        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", result(10, 3, 0), Counts::All);
        r.add_tests("chaos", true, "exit status: 0", result(1, 0, 0), Counts::IgnoredByTests);
        assert!(r.ok());
        assert!(r.closing_line().starts_with("tests: 11 passed, 0 failed, 2 ignored;"), "{}", r.closing_line());
    }

    #[test]
    fn a_step_whose_filter_matched_nothing_fails() {
        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", result(10, 0, 0), Counts::All);
        r.add_tests("chaos", true, "exit status: 0", result(0, 0, 12), Counts::IgnoredByTests);
        assert!(!r.ok());
        assert_eq!(r.failed_steps, ["chaos (no test ran: its filter matched none (12 filtered out, 0 ignored))"]);
        // Only ignored tests, none run: the same.
        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", result(0, 4, 0), Counts::All);
        assert_eq!(r.failed_steps, ["tests (no test ran: its filter matched none (0 filtered out, 4 ignored))"]);
    }

    #[test]
    fn a_step_past_its_limit_is_named_with_the_limit() {
        let mut r = Report::default();
        r.step("clippy", Err(StepError::TimedOut(minutes(40))));
        let mut t = result(5, 0, 0);
        t.line("     Running tests/hang.rs (target/debug/deps/hang-2)");
        t.stopped("15 min");
        t.finish();
        r.timed_out("tests", minutes(15), t, Counts::All);
        assert!(!r.ok());
        assert!(
            r.closing_line().starts_with(
                "tests: 5 passed, 1 failed, 0 ignored; conformance: not run; server conformance: not run; failed steps: \
                 clippy (ran past its time limit of 40 min), tests (ran past its time limit of 15 min);"
            ),
            "{}",
            r.closing_line()
        );
        assert_eq!(
            r.tests.failures,
            ["tests/hang.rs (target/debug/deps/hang-2) was still running at the step's time limit of 15 min"]
        );
    }

    #[test]
    fn a_compile_failure_is_a_failure_and_says_the_tests_did_not_run() {
        let mut t = Tally::default();
        t.line("error: could not compile `policy` (lib test) due to 1 previous error");
        let mut r = Report::default();
        r.add_tests("tests", false, "exit status: 101", t, Counts::All);
        assert!(!r.ok());
        assert!(
            r.closing_line().starts_with(
                "tests: 0 passed, 1 failed, 0 ignored; conformance: not run; server conformance: not run; failed steps: \
                 none; not run: tests (did not compile: policy (lib test))"
            ),
            "{}",
            r.closing_line()
        );
    }

    #[test]
    fn redis_server_is_found_where_configured_or_named_in_one_line() {
        let dir = tempfile_dir();
        let fake = dir.join("redis-server");
        std::fs::write(&fake, "").unwrap();
        assert_eq!(locate_redis_server(Some(fake.clone().into()), OsStr::new("")), Ok(fake.clone()));
        let missing = locate_redis_server(Some(dir.join("nope").into()), OsStr::new(""));
        assert_eq!(missing, Err(format!("redis-server not found at MCP_REDIS_SERVER={}", dir.join("nope").display())));
        assert_eq!(locate_redis_server(None, dir.as_os_str()), Ok(fake));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = env::temp_dir().join(format!("xtask-redis-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
