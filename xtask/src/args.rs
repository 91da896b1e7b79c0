//! The command line: a task and its flags. Unknown tasks and flags are errors, so a typo never
//! starts a multi-minute run; `--help` (anywhere) prints the usage of every task.

use crate::bench::Group;

/// What `cargo xtask` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Task {
    Help,
    Test { hermetic: bool },
    Purity,
    Peers,
    Bench { groups: Vec<Group>, n: usize, rounds: usize },
    ConnectBench { rounds: usize },
    Conformance { only: Vec<String> },
    ConformanceServer { only: Vec<String> },
    SearchEval { args: Vec<String> },
    StartupOrder,
}

pub(crate) const USAGE: &str = "\
usage: cargo xtask <task> [flags]

tasks:
  test [--hermetic]            fmt, clippy, purity, every test, the interop suite and the
                               conformance scenarios (client and server); ends with one line
                               that counts them all and names what failed or did not run
                               (non-zero exit if anything did). --hermetic skips what needs
                               npm and PyPI, and says so.
  purity                       the pure crates do no I/O (tidy's workspace::purity tests)
  peers                        install the pinned third-party MCP servers into target/peers
  bench [GROUP...] [--n N] [--rounds R]
                               each path beside a floor with no framework, in one run: stdio,
                               http, catalog, agent, startup, gateway (no GROUP: all; default
                               2000 calls, 3 rounds)
  connect-bench [--rounds R]   time to connect 1, 10 and 50 stdio servers (fast and slow-starting
                               ones) and memory per server (default 5 rounds)
  conformance [SCENARIO...]    the official MCP conformance harness against conformance-client
                               (every client scenario; names pick scenarios)
  conformance-server [SCENARIO...]
                               the harness's server scenarios against our conformance fixture
                               server directly and through `mcp-harness serve --transparent`,
                               side by side (names pick scenarios)
  startup-order                write crates/cli/startup.order, the functions a start of
                               mcp-harness runs (traced with perf), which the linker lays out
                               together (about ten minutes)
  search-eval [--split dev|test|all]
                               recall@1/5/10 of tool search beside plain BM25, with and without
                               our fields, on the labelled set in crates/tool-pool/data/search-eval
                               (not run by `test`); the dev split (tuned on) unless the held-out
                               test split is asked for
  help, --help, -h             this text";

/// Parses the arguments after `cargo xtask`.
pub(crate) fn parse(args: &[String]) -> Result<Task, String> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Task::Help);
    }
    let Some((task, rest)) = args.split_first() else { return Err("no task given".to_owned()) };
    let unknown = |arg: &str| format!("unknown argument `{arg}` for `{task}`");
    match task.as_str() {
        "help" => Ok(Task::Help),
        "test" => {
            let mut hermetic = false;
            for arg in rest {
                match arg.as_str() {
                    "--hermetic" => hermetic = true,
                    other => return Err(unknown(other)),
                }
            }
            Ok(Task::Test { hermetic })
        }
        "purity" | "peers" | "startup-order" => match rest.first() {
            Some(arg) => Err(unknown(arg)),
            None if task == "purity" => Ok(Task::Purity),
            None if task == "peers" => Ok(Task::Peers),
            None => Ok(Task::StartupOrder),
        },
        "bench" => {
            let (mut n, mut rounds) = (2000, 3);
            let mut groups = Vec::new();
            let mut it = rest.iter();
            while let Some(arg) = it.next() {
                let mut number = |flag: &str| -> Result<usize, String> {
                    it.next()
                        .and_then(|v| v.parse().ok())
                        .filter(|v| *v > 0)
                        .ok_or_else(|| format!("{flag} needs a positive number"))
                };
                match arg.as_str() {
                    "--n" => n = number("--n")?,
                    "--rounds" => rounds = number("--rounds")?,
                    other => match Group::from_name(other) {
                        Some(group) if !groups.contains(&group) => groups.push(group),
                        Some(_) => {}
                        None => return Err(unknown(other)),
                    },
                }
            }
            Ok(Task::Bench { groups, n, rounds })
        }
        "connect-bench" => match rest {
            [] => Ok(Task::ConnectBench { rounds: 5 }),
            [flag, value] if flag == "--rounds" => value
                .parse()
                .ok()
                .filter(|v| *v > 0)
                .map(|rounds| Task::ConnectBench { rounds })
                .ok_or_else(|| "--rounds needs a positive number".to_owned()),
            [flag, ..] => Err(unknown(flag)),
        },
        "conformance" | "conformance-server" => match rest.iter().find(|a| a.starts_with('-')) {
            Some(flag) => Err(unknown(flag)),
            None if task == "conformance" => Ok(Task::Conformance { only: rest.to_vec() }),
            None => Ok(Task::ConformanceServer { only: rest.to_vec() }),
        },
        "search-eval" => match rest {
            [] => Ok(Task::SearchEval { args: Vec::new() }),
            [flag, split] if flag == "--split" && matches!(split.as_str(), "dev" | "test" | "all") => {
                Ok(Task::SearchEval { args: rest.to_vec() })
            }
            [flag, ..] => Err(unknown(flag)),
        },
        other => Err(format!("unknown task `{other}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(line: &str) -> Result<Task, String> {
        parse(&line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
    }

    #[test]
    fn tasks_and_their_flags() {
        assert_eq!(parse_str("test"), Ok(Task::Test { hermetic: false }));
        assert_eq!(parse_str("test --hermetic"), Ok(Task::Test { hermetic: true }));
        assert_eq!(parse_str("purity"), Ok(Task::Purity));
        assert_eq!(parse_str("peers"), Ok(Task::Peers));
        assert_eq!(parse_str("startup-order"), Ok(Task::StartupOrder));
        assert!(parse_str("startup-order --fast").is_err());
        assert_eq!(parse_str("bench"), Ok(Task::Bench { groups: vec![], n: 2000, rounds: 3 }));
        assert_eq!(parse_str("bench --n 5000 --rounds 7"), Ok(Task::Bench { groups: vec![], n: 5000, rounds: 7 }));
        assert_eq!(
            parse_str("bench http stdio --rounds 2 http"),
            Ok(Task::Bench { groups: vec![Group::Http, Group::Stdio], n: 2000, rounds: 2 })
        );
        assert_eq!(parse_str("bench htp"), Err("unknown argument `htp` for `bench`".to_owned()));
        assert_eq!(parse_str("connect-bench"), Ok(Task::ConnectBench { rounds: 5 }));
        assert_eq!(parse_str("connect-bench --rounds 2"), Ok(Task::ConnectBench { rounds: 2 }));
        assert!(parse_str("connect-bench --rounds x").is_err());
        assert!(parse_str("connect-bench --fast").is_err());
        assert_eq!(parse_str("search-eval"), Ok(Task::SearchEval { args: vec![] }));
        assert_eq!(
            parse_str("search-eval --split test"),
            Ok(Task::SearchEval { args: vec!["--split".into(), "test".into()] })
        );
        assert!(parse_str("search-eval --split held-out").is_err());
        assert_eq!(parse_str("conformance"), Ok(Task::Conformance { only: vec![] }));
        assert_eq!(
            parse_str("conformance initialize auth/basic-cimd"),
            Ok(Task::Conformance { only: vec!["initialize".into(), "auth/basic-cimd".into()] })
        );
        assert_eq!(parse_str("conformance-server"), Ok(Task::ConformanceServer { only: vec![] }));
        assert_eq!(
            parse_str("conformance-server ping tools-list"),
            Ok(Task::ConformanceServer { only: vec!["ping".into(), "tools-list".into()] })
        );
    }

    #[test]
    fn help_anywhere_wins() {
        for line in
            ["help", "--help", "-h", "test --help", "test --hermetic -h", "bench --n 5 --help", "nonsense --help"]
        {
            assert_eq!(parse_str(line), Ok(Task::Help), "{line}");
        }
    }

    #[test]
    fn unknown_tasks_and_flags_are_errors() {
        assert_eq!(parse_str(""), Err("no task given".to_owned()));
        assert_eq!(parse_str("tset"), Err("unknown task `tset`".to_owned()));
        assert_eq!(parse_str("test --hermitic"), Err("unknown argument `--hermitic` for `test`".to_owned()));
        assert_eq!(parse_str("test hermetic"), Err("unknown argument `hermetic` for `test`".to_owned()));
        assert_eq!(parse_str("purity --fast"), Err("unknown argument `--fast` for `purity`".to_owned()));
        assert_eq!(parse_str("peers x"), Err("unknown argument `x` for `peers`".to_owned()));
        assert_eq!(parse_str("conformance --all"), Err("unknown argument `--all` for `conformance`".to_owned()));
        assert_eq!(
            parse_str("conformance-server --suite"),
            Err("unknown argument `--suite` for `conformance-server`".to_owned())
        );
        assert_eq!(parse_str("bench --n"), Err("--n needs a positive number".to_owned()));
        assert_eq!(parse_str("bench --n 0"), Err("--n needs a positive number".to_owned()));
        assert_eq!(parse_str("bench --warmup 5"), Err("unknown argument `--warmup` for `bench`".to_owned()));
    }
}
