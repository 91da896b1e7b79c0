//! Counting what `cargo test --no-fail-fast` did, from its output (cargo's stderr and the test
//! binaries' stdout, read in order through one pipe).
//!
//! A test counts as passed or failed from the `test result:` line of its binary. Failures are
//! also: a binary that started (`Running ...`, `Doc-tests ...`) but printed no `test result:`
//! (a crash, a signal, an abort), a binary that printed its result and then exited badly, and a
//! crate that did not compile (cargo then runs no test at all), and a binary still running
//! when its step ran past its time limit (named with the tests libtest said were slow).
//! Ignored tests and those a filter left out are counted too: a step that ran no test at all
//! (its filter matched nothing) must not pass.

/// What one or more test commands did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) passed: u64,
    pub(crate) failed: u64,
    /// Tests marked `#[ignore]` (that this command did not run).
    pub(crate) ignored: u64,
    /// Tests a filter left out.
    pub(crate) filtered_out: u64,
    /// One line per failure: a test's name, a crashed binary, a crate that did not compile.
    pub(crate) failures: Vec<String>,
    /// Test binaries that printed a `test result:` line.
    pub(crate) binaries: u64,
    /// Crates (and targets) that did not compile.
    pub(crate) not_compiled: Vec<String>,
    /// The binary running now, until its `test result:` line.
    running: Option<String>,
    /// Tests of the running binary that libtest said have been running for over 60 seconds.
    slow: Vec<String>,
    /// Whether the last finished binary reported failed tests (cargo then says it exited badly,
    /// which is not a second failure).
    last_reported_failures: bool,
}

impl Tally {
    /// Takes one line of output (without its line break).
    pub(crate) fn line(&mut self, line: &str) {
        let trimmed = line.trim();
        if let Some(binary) = started_binary(line) {
            self.crashed("printed no test result");
            self.running = Some(binary);
        } else if let Some(rest) = trimmed.strip_prefix("test result: ") {
            let passed = count(rest, "passed");
            let failed = count(rest, "failed");
            self.passed += passed;
            self.failed += failed;
            self.ignored += count(rest, "ignored");
            self.filtered_out += count(rest, "filtered out");
            self.binaries += 1;
            self.last_reported_failures = failed > 0;
            self.running = None;
            self.slow.clear();
        } else if let Some(name) =
            trimmed.strip_prefix("test ").and_then(|t| t.strip_suffix(" has been running for over 60 seconds"))
        {
            self.slow.push(name.to_owned());
        } else if let Some(name) = trimmed.strip_prefix("test ").and_then(|t| t.strip_suffix(" ... FAILED")) {
            let binary = self.running.as_deref().unwrap_or("?");
            self.failures.push(format!("{name} ({binary})"));
        } else if let Some(rest) = trimmed.strip_prefix("process didn't exit successfully: ") {
            // The status is the last parenthesised part: `(signal: 6, SIGABRT: process abort signal)`.
            let status = rest.rsplit_once(" (").map_or(rest, |(_, s)| s.trim_end_matches(')'));
            if self.running.is_some() {
                self.crashed(&format!("crashed: {status}"));
            } else if !self.last_reported_failures {
                self.failed += 1;
                self.failures.push(format!("a test binary exited badly after its results: {status}"));
            }
        } else if let Some(what) = trimmed
            .strip_prefix("error: could not compile ")
            .or_else(|| trimmed.strip_prefix("error: failed to run custom build command for "))
        {
            let what = what.split(" due to ").next().unwrap_or(what).replace('`', "");
            self.failed += 1;
            self.failures.push(format!("did not compile: {what}"));
            self.not_compiled.push(what);
        }
    }

    /// The output ended: a binary still running never printed its result.
    pub(crate) fn finish(&mut self) {
        self.crashed("printed no test result");
    }

    /// The step ran past its time limit and was killed: the binary running then is a failure,
    /// named with the tests that were running for over a minute.
    pub(crate) fn stopped(&mut self, limit: &str) {
        let slow = match self.slow.as_slice() {
            [] => String::new(),
            names => format!("; running for over 60 s: {}", names.join(", ")),
        };
        self.crashed(&format!("was still running at the step's time limit of {limit}{slow}"));
    }

    /// How many tests ran (passed or failed).
    pub(crate) fn ran(&self) -> u64 {
        self.passed + self.failed
    }

    fn crashed(&mut self, why: &str) {
        if let Some(binary) = self.running.take() {
            self.failed += 1;
            self.failures.push(format!("{binary} {why}"));
        }
        self.slow.clear();
    }

    /// Adds another command's counts.
    pub(crate) fn merge(&mut self, other: Tally) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.ignored += other.ignored;
        self.filtered_out += other.filtered_out;
        self.binaries += other.binaries;
        self.failures.extend(other.failures);
        self.not_compiled.extend(other.not_compiled);
    }
}

/// The binary a `Running ...` or `Doc-tests ...` line of cargo starts.
fn started_binary(line: &str) -> Option<String> {
    // Cargo indents its status words; a test's own output rarely does exactly this.
    if !line.starts_with(' ') {
        return None;
    }
    let trimmed = line.trim();
    if let Some(rest) = trimmed.strip_prefix("Running ") {
        // `Running tests/foo.rs (target/debug/deps/foo-0123abcd)`: keep it as cargo says it.
        return (rest.ends_with(')') && rest.contains(" (")).then(|| rest.to_owned());
    }
    trimmed.strip_prefix("Doc-tests ").map(|krate| format!("doc tests of {krate}"))
}

/// `N word` in `ok. 3 passed; 1 failed; 0 ignored; ...`.
fn count(result: &str, word: &str) -> u64 {
    result
        .split([';', '.'])
        .find_map(|part| part.trim().strip_suffix(word).and_then(|n| n.trim().parse().ok()))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(output: &str) -> Tally {
        let mut t = Tally::default();
        for line in output.lines() {
            t.line(line);
        }
        t.finish();
        t
    }

    #[test]
    fn results_are_summed_and_failed_tests_named() {
        let t = tally(
            "     Running unittests src/lib.rs (target/debug/deps/scratch-eac2f1ee85d95d2d)\n\
             \n\
             running 2 tests\n\
             test tests::ok ... ok\n\
             test tests::bad ... FAILED\n\
             \n\
             failures:\n\
             \x20   tests::bad\n\
             \n\
             test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.23s\n\
             \n\
             error: test failed, to rerun pass `--lib`\n\
             \x20    Running tests/zzz.rs (target/debug/deps/zzz-367a9e435645f6c2)\n\
             test result: ok. 12 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\
             \x20  Doc-tests scratch\n\
             test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
        );
        assert_eq!((t.passed, t.failed, t.binaries), (13, 1, 3));
        assert_eq!(t.failures, ["tests::bad (unittests src/lib.rs (target/debug/deps/scratch-eac2f1ee85d95d2d))"]);
    }

    #[test]
    fn a_binary_that_crashes_is_a_failure_with_its_name() {
        let t = tally(
            "     Running tests/crash.rs (target/debug/deps/crash-7a962d16f615b91a)\n\
             \n\
             running 2 tests\n\
             error: test failed, to rerun pass `--test crash`\n\
             \n\
             Caused by:\n\
             \x20 process didn't exit successfully: `/w/target/debug/deps/crash-7a962d16f615b91a` (signal: 6, SIGABRT: process abort signal)\n\
             \x20    Running tests/zzz.rs (target/debug/deps/zzz-367a9e435645f6c2)\n\
             test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
        );
        assert_eq!((t.passed, t.failed), (1, 1));
        assert_eq!(
            t.failures,
            [
                "tests/crash.rs (target/debug/deps/crash-7a962d16f615b91a) crashed: signal: 6, SIGABRT: process abort signal"
            ]
        );
    }

    #[test]
    fn a_binary_without_a_result_is_a_failure_even_without_cargo_saying_so() {
        let t = tally(
            "     Running tests/a.rs (target/debug/deps/a-1)\nrunning 1 test\n\
             \x20    Running tests/b.rs (target/debug/deps/b-2)\nrunning 3 tests\n",
        );
        assert_eq!(t.failed, 2);
        assert_eq!(
            t.failures,
            [
                "tests/a.rs (target/debug/deps/a-1) printed no test result",
                "tests/b.rs (target/debug/deps/b-2) printed no test result"
            ]
        );
    }

    #[test]
    fn a_compile_failure_is_a_failure() {
        let t = tally(
            "error[E0308]: mismatched types\n --> tests/zzz.rs:2:22\n\
             error: could not compile `scratch` (test \"zzz\") due to 1 previous error\n",
        );
        assert_eq!((t.passed, t.failed), (0, 1));
        assert_eq!(t.failures, ["did not compile: scratch (test \"zzz\")"]);
        assert_eq!(t.not_compiled, ["scratch (test \"zzz\")"]);
    }

    #[test]
    fn a_bad_exit_after_a_clean_result_is_a_failure_but_a_failed_result_is_not_counted_twice() {
        let t = tally(
            "     Running tests/a.rs (target/debug/deps/a-1)\n\
             test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\
             \x20 process didn't exit successfully: `a-1` (exit status: 3)\n\
             \x20    Running tests/b.rs (target/debug/deps/b-2)\n\
             test b ... FAILED\n\
             test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\
             \x20 process didn't exit successfully: `b-2` (exit status: 101)\n",
        );
        assert_eq!((t.passed, t.failed), (2, 2));
        assert_eq!(
            t.failures,
            ["a test binary exited badly after its results: exit status: 3", "b (tests/b.rs (target/debug/deps/b-2))"]
        );
    }

    #[test]
    fn ignored_and_filtered_out_tests_are_counted() {
        let t = tally(
            "     Running tests/a.rs (target/debug/deps/a-1)\n\
             test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 5 filtered out; finished in 0.00s\n\
             \x20    Running tests/b.rs (target/debug/deps/b-2)\n\
             test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 7 filtered out; finished in 0.00s\n",
        );
        assert_eq!((t.passed, t.failed, t.ignored, t.filtered_out, t.ran()), (2, 0, 1, 12, 2));
    }

    #[test]
    fn a_binary_stopped_at_the_limit_is_a_failure_naming_its_slow_tests() {
        let mut t = Tally::default();
        for line in [
            "     Running tests/a.rs (target/debug/deps/a-1)",
            "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
            "     Running tests/hang.rs (target/debug/deps/hang-2)",
            "running 3 tests",
            "test fine ... ok",
            "test waits_forever has been running for over 60 seconds",
            "test waits_too has been running for over 60 seconds",
        ] {
            t.line(line);
        }
        t.stopped("20 min");
        t.finish();
        assert_eq!((t.passed, t.failed), (1, 1));
        assert_eq!(
            t.failures,
            ["tests/hang.rs (target/debug/deps/hang-2) was still running at the step's time limit of 20 min; \
              running for over 60 s: waits_forever, waits_too"]
        );
    }

    #[test]
    fn test_output_that_looks_like_cargo_is_not_a_binary() {
        let t = tally("Running the server\ntest result: ok. 1 passed; 0 failed\n");
        assert_eq!((t.passed, t.failed, t.binaries), (1, 0, 1));
    }
}
