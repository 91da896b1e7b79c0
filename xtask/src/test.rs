//! `cargo xtask test [--hermetic]`: every check of the project, ending with one line that a CI
//! reader greps:
//!
//! `tests: 431 passed, 0 failed; conformance: 26 passed, 0 failed; failed steps: none; not run: none`
//!
//! Every step runs even when an earlier one failed (tests run after a clippy failure), as far as
//! it can: a step whose prerequisite failed is named under `not run` with the reason. The exit
//! code is non-zero when anything failed or did not run, except what `--hermetic` skipped on
//! purpose (also named under `not run`).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::conformance::{self, Summary};
use crate::tally::Tally;
use crate::{Result, cargo, install_peers, purity, run};

/// Examples that show an adapter written outside the workspace, and the host embedded in a
/// program of its own; `cargo xtask test` runs them.
const ADAPTER_EXAMPLES: &[(&str, &str)] =
    &[("mcp-client", "tcp_transport"), ("agent-loop", "custom_model"), ("mcp-host", "embed")];

pub(crate) fn test(hermetic: bool) -> Result {
    let started = Instant::now();
    let mut report = Report::default();
    report.step("fmt", run("fmt", cargo().args(["fmt", "--all", "--", "--check"])));
    report.step(
        "clippy",
        run(
            "clippy",
            cargo().args([
                "clippy",
                "--workspace",
                "--all-targets",
                "--features",
                "mcp-transport/interop,agent-loop/interop",
                "--",
                "-D",
                "warnings",
            ]),
        ),
    );
    report.step("purity", purity());
    // The transport tests spawn the fixture server binaries and the sandbox launcher, which no
    // test target depends on; build them first (a `-p` filtered run then finds them too).
    report.step(
        "build fixtures",
        run("build fixtures", cargo().args(["build", "-p", "mcp-fixtures", "-p", "mcp-sandbox", "--bins"])),
    );
    report.tests("tests", cargo_args(&["test", "--workspace", "--no-fail-fast"]));
    // Twenty supervised servers killed at random under a calling agent; prints its figures.
    report
        .tests("chaos", cargo_args(&["test", "-p", "agent-loop", "--test", "chaos", "--", "--ignored", "--nocapture"]));
    // The adapters written from outside, as a user would: a transport of their own through the
    // multi-server layer, a language model of their own driving the loop, the host embedded in a
    // program of its own. Each asserts its result.
    for (package, example) in ADAPTER_EXAMPLES {
        let step = format!("example {example}");
        report.step(&step, run(&step, cargo().args(["run", "-q", "-p", package, "--example", example])));
    }
    if hermetic {
        println!("\n--hermetic: skipping the interop suite and conformance (they install from npm and PyPI)");
        for step in ["interop", "agent interop", "conformance"] {
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
                report.tests("interop", interop);
                // An agent session with the scripted model against a third-party server.
                let mut agent = cargo_args(&[
                    "test",
                    "-p",
                    "agent-loop",
                    "--features",
                    "interop",
                    "--test",
                    "interop",
                    "--no-fail-fast",
                ]);
                agent.env("MCP_PEERS_DIR", &peers);
                report.tests("agent interop", agent);
            }
            Err(e) => {
                for step in ["interop", "agent interop"] {
                    report.not_run(step, &format!("peers not installed: {e}"));
                }
            }
        }
        match conformance::conformance(&[]) {
            Ok(summary) => report.conformance = Some(summary),
            Err(e) => report.not_run("conformance", &e),
        }
    }
    report.print(started.elapsed());
    if report.ok() { Ok(()) } else { Err("some steps failed or did not run (see the last line above)".to_owned()) }
}

fn cargo_args(args: &[&str]) -> Command {
    let mut cmd = cargo();
    cmd.args(args);
    cmd
}

/// Runs a `cargo test` command, echoing its output (stdout and stderr through one pipe, so
/// cargo's `Running ...` lines and the binaries' results arrive in order) while counting it.
fn run_tests(step: &str, mut cmd: Command) -> Result<(ExitStatus, Tally)> {
    println!("\n==> {step}: {cmd:?}");
    let started = Instant::now();
    let (reader, writer) = std::io::pipe().map_err(|e| format!("{step}: pipe: {e}"))?;
    let writer_too = writer.try_clone().map_err(|e| format!("{step}: pipe: {e}"))?;
    cmd.stdout(writer).stderr(writer_too);
    let mut child = cmd.spawn().map_err(|e| format!("{step}: could not start: {e}"))?;
    // The command holds our copies of the pipe's write end; the reads below end only once every
    // copy is closed.
    drop(cmd);
    let mut tally = Tally::default();
    let mut reader = BufReader::new(reader);
    let mut out = std::io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        // A line longer than 1 MiB is counted in pieces rather than held whole.
        match reader.by_ref().take(1 << 20).read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {
                let _ = out.write_all(&line);
                tally.line(String::from_utf8_lossy(&line).trim_end_matches(['\n', '\r']));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                println!("{step}: reading the output failed: {e}");
                break;
            }
        }
    }
    tally.finish();
    let status = child.wait().map_err(|e| format!("{step}: {e}"))?;
    println!("<== {step}: {status} in {:.1}s", started.elapsed().as_secs_f64());
    Ok((status, tally))
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
    failed_steps: Vec<String>,
    not_run: Vec<NotRun>,
}

impl Report {
    fn step(&mut self, step: &str, result: Result) {
        if result.is_err() {
            self.failed_steps.push(step.to_owned());
        }
    }

    fn not_run(&mut self, step: &str, why: &str) {
        self.not_run.push(NotRun { step: step.to_owned(), why: why.to_owned(), hermetic: false });
    }

    fn tests(&mut self, step: &str, cmd: Command) {
        match run_tests(step, cmd) {
            Ok((status, tally)) => self.add_tests(step, status.success(), &status.to_string(), tally),
            Err(e) => self.not_run(step, &e),
        }
    }

    /// Counts a test step's results; a step that failed without a recognised failure, or that
    /// ran no test binary at all, is a failed step, so a change in cargo's output cannot make a
    /// run green.
    fn add_tests(&mut self, step: &str, success: bool, status: &str, tally: Tally) {
        if !success && tally.failed == 0 {
            self.failed_steps.push(format!("{step} (exited with {status}; no failure recognised in its output)"));
        }
        if success && tally.binaries == 0 {
            self.failed_steps.push(format!("{step} (no test ran)"));
        }
        if !tally.not_compiled.is_empty() {
            self.not_run(step, &format!("did not compile: {}", tally.not_compiled.join(", ")));
        }
        self.tests.merge(tally);
    }

    fn ok(&self) -> bool {
        self.tests.failed == 0
            && self.conformance.as_ref().is_none_or(|c| c.failed == 0)
            && self.failed_steps.is_empty()
            && self.not_run.iter().all(|n| n.hermetic)
    }

    fn closing_line(&self) -> String {
        let conformance = match &self.conformance {
            Some(c) => format!("{} passed, {} failed", c.passed, c.failed),
            None => "not run".to_owned(),
        };
        let list = |items: Vec<String>| if items.is_empty() { "none".to_owned() } else { items.join(", ") };
        let failed = list(self.failed_steps.clone());
        let not_run = list(self.not_run.iter().map(|n| format!("{} ({})", n.step, n.why)).collect());
        // One line, whatever the reasons held.
        format!(
            "tests: {} passed, {} failed; conformance: {conformance}; failed steps: {failed}; not run: {not_run}",
            self.tests.passed, self.tests.failed
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
        Some(Summary { passed, failed, failures: vec![] })
    }

    #[test]
    fn all_green() {
        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", tally(431, 0));
        r.conformance = conformance(26, 0);
        assert!(r.ok());
        assert_eq!(
            r.closing_line(),
            "tests: 431 passed, 0 failed; conformance: 26 passed, 0 failed; failed steps: none; not run: none"
        );
    }

    #[test]
    fn a_failed_step_fails_the_run_and_is_named() {
        let mut r = Report::default();
        r.step("fmt", Ok(()));
        r.step("clippy", Err("clippy failed (exit status: 101)".to_owned()));
        r.add_tests("tests", true, "exit status: 0", tally(10, 0));
        r.conformance = conformance(26, 0);
        assert!(!r.ok());
        assert_eq!(
            r.closing_line(),
            "tests: 10 passed, 0 failed; conformance: 26 passed, 0 failed; failed steps: clippy; not run: none"
        );
    }

    #[test]
    fn what_did_not_run_fails_the_run_unless_hermetic_skipped_it() {
        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", tally(10, 0));
        r.not_run("interop", "peers not installed: npm peers failed (exit status: 1)\nnpm ERR! network");
        r.not_run("conformance", "npm conformance harness failed");
        assert!(!r.ok());
        assert_eq!(
            r.closing_line(),
            "tests: 10 passed, 0 failed; conformance: not run; failed steps: none; not run: interop (peers not \
             installed: npm peers failed (exit status: 1) npm ERR! network), conformance (npm conformance harness failed)"
        );

        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", tally(10, 0));
        r.not_run.push(NotRun { step: "conformance".into(), why: "--hermetic".into(), hermetic: true });
        assert!(r.ok());
        assert!(r.closing_line().ends_with("not run: conformance (--hermetic)"), "{}", r.closing_line());
    }

    #[test]
    fn failed_tests_and_scenarios_fail_the_run() {
        let mut r = Report::default();
        r.add_tests("tests", false, "exit status: 101", tally(9, 1));
        r.conformance = conformance(26, 0);
        assert!(!r.ok());
        assert!(r.failed_steps.is_empty(), "a failed test is counted once, as a test");

        let mut r = Report::default();
        r.add_tests("tests", true, "exit status: 0", tally(10, 0));
        r.conformance = conformance(25, 1);
        assert!(!r.ok());
    }

    #[test]
    fn a_step_cannot_go_green_by_accident() {
        // Exited badly but nothing in the output said why: the output format may have changed.
        let mut r = Report::default();
        r.add_tests("tests", false, "exit status: 101", Tally::default());
        assert!(!r.ok());
        assert_eq!(r.failed_steps, ["tests (exited with exit status: 101; no failure recognised in its output)"]);

        // Exited well without running a single test binary.
        let mut r = Report::default();
        r.add_tests("interop", true, "exit status: 0", Tally::default());
        assert!(!r.ok());
        assert_eq!(r.failed_steps, ["interop (no test ran)"]);
    }

    #[test]
    fn a_compile_failure_is_a_failure_and_says_the_tests_did_not_run() {
        let mut t = Tally::default();
        t.line("error: could not compile `policy` (lib test) due to 1 previous error");
        let mut r = Report::default();
        r.add_tests("tests", false, "exit status: 101", t);
        assert!(!r.ok());
        assert!(
            r.closing_line().starts_with(
                "tests: 0 passed, 1 failed; conformance: not run; failed steps: none; not run: tests (did not \
                 compile: policy (lib test))"
            ),
            "{}",
            r.closing_line()
        );
    }
}
