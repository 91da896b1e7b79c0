//! `cargo xtask conformance-server [SCENARIO...]`: the official MCP conformance harness's
//! *server* scenarios, against our conformance-style fixture server directly and through the
//! gateway, side by side.
//!
//! Two columns, each the same scenarios against one server on loopback:
//! - `direct`: `mcp-fixture-conformance --http ADDR` (crates/mcp-fixtures), the baseline. Every
//!   scenario the harness lists must pass here; one that cannot is a bug of the fixture, or, when
//!   the suite itself is at fault, an entry of [`EXPECTED_FAILURES`] with the reason.
//! - `gateway`: `mcp-harness serve --http ADDR --transparent` fronting the same fixture over
//!   stdio ([`gateway_command`]). Runs when [`SERVE_BUILT`] says `serve` exists; until then the
//!   step says so ("gateway column: serve not built yet") and the closing line repeats it.
//!
//! The verdict of one scenario is the client run's ([`conformance::judge`]): the harness exited
//! 0, wrote its checks, none is a FAILURE or WARNING (or a status nobody decided on), and at
//! least one is a SUCCESS. The harness's scenario list must equal
//! `xtask/conformance/server-scenarios.txt` (pending scenarios included: the fixture passes them
//! too). An expected failure that passes fails the run, so the list cannot go stale.
//!
//! Time: a server gets [`START_LIMIT`] to listen, a scenario [`SCENARIO_LIMIT`], and both
//! columns' scenarios together `test::limit::SERVER_CONFORMANCE`; what is not run by then fails,
//! saying so.
//!
//! Hermetic: the harness and Node come from npm (the client run's pinned install, shared), the
//! servers listen on `127.0.0.1` only, nothing reaches further.

use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::conformance::{self, Checks, Summary};
use crate::step::{self, Background, Ended};
use crate::{Result, cargo, root, run_within};

/// Whether `mcp-harness serve` exists in this tree: the gateway column runs only when it does.
///
/// To switch the column on (after `serve --http ADDR --transparent` is merged): set this to
/// `true`, and make [`gateway_command`] match `serve`'s flags if they differ.
pub(crate) const SERVE_BUILT: bool = true;

/// What the step says, and the closing line carries, while [`SERVE_BUILT`] is false.
pub(crate) const GATEWAY_NOT_BUILT: &str = "gateway column: serve not built yet";

/// The gateway under test: `mcp-harness serve` over Streamable HTTP at `http://ADDR/mcp`, in
/// transparent mode (the one upstream's names unchanged), with the configuration that names the
/// fixture as its one stdio upstream ([`gateway_config`]).
fn gateway_command(mcp_harness: &Path, config: &Path, addr: SocketAddr) -> Command {
    let mut cmd = Command::new(mcp_harness);
    // The configuration lives under target/, inside the workspace the command runs in: allowed
    // explicitly (it is ours).
    cmd.arg("--config").arg(config).arg("--allow-workspace-config").args([
        "serve",
        "--http",
        &addr.to_string(),
        "--transparent",
    ]);
    cmd
}

/// Where the gateway says it is ready (its pool published, its upstream connected): the column
/// starts when this answers 200 (or 404, a gateway without the route).
const GATEWAY_READY: &str = "/readyz";

/// The gateway's configuration: the fixture over stdio as its only server, every tool allowed
/// (a `confirm` would put an approval form in front of every call the scenarios make), and no
/// confinement (this column checks the gateway's protocol, the sandbox has tests of its own).
fn gateway_config(fixture: &Path) -> String {
    let path = fixture.display().to_string().replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "# Written by `cargo xtask conformance-server`: the gateway column's one upstream.\n\
         [policy]\ndefault = \"allow\"\n\n\
         [servers.conformance]\ncommand = \"{path}\"\nsandbox = \"off\"\n"
    )
}

/// A column of the table: where the scenarios run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Column {
    /// The fixture itself, over HTTP.
    Direct,
    /// `serve --transparent` fronting the fixture.
    Gateway,
}

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::Direct => "direct",
            Column::Gateway => "gateway",
        }
    }
}

/// Failures that are expected, with the reason: counted and printed as `XFAIL`, they do not fail
/// the run; one that passes does (`XPASS`: remove it here). Only for what cannot be fixed on our
/// side (the suite at fault) or, in the gateway column, a gap named in an open issue.
/// Each entry: the column, the scenario, and why (an issue, or the suite's fault). None now.
const EXPECTED_FAILURES: &[(Column, &str, &str)] = &[];

/// How long one scenario may take (the harness has no time limit of its own; the fixture's
/// questions to the client wait up to 60 s for an answer that never comes).
const SCENARIO_LIMIT: Duration = Duration::from_secs(90);
/// How long a server may take to listen.
const START_LIMIT: Duration = Duration::from_secs(30);

const LIST_FILE: &str = "xtask/conformance/server-scenarios.txt";

/// One cell of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Pass,
    Fail,
    /// Failed, as [`EXPECTED_FAILURES`] says it does.
    ExpectedFail,
    /// Passed although [`EXPECTED_FAILURES`] says it fails.
    UnexpectedPass,
    /// Not run (the column did not run).
    NotRun,
}

impl Verdict {
    fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::ExpectedFail => "XFAIL",
            Verdict::UnexpectedPass => "XPASS",
            Verdict::NotRun => "-",
        }
    }
}

/// What one scenario did in one column.
#[derive(Debug, Clone)]
struct Cell {
    verdict: Verdict,
    checks: Option<Checks>,
    secs: f64,
    notes: Vec<String>,
}

impl Cell {
    fn not_run() -> Cell {
        Cell { verdict: Verdict::NotRun, checks: None, secs: 0.0, notes: Vec::new() }
    }

    fn failed(note: String) -> Cell {
        Cell { verdict: Verdict::Fail, checks: None, secs: 0.0, notes: vec![note] }
    }

    /// `PASS  4/0/0  0.3s`: verdict, SUCCESS/FAILURE/WARNING checks, seconds.
    fn show(&self) -> String {
        match (&self.verdict, &self.checks) {
            (Verdict::NotRun, _) => "-".to_owned(),
            (v, Some(c)) => format!("{:<5} {}/{}/{} {:>5.1}s", v.label(), c.success, c.failure, c.warning, self.secs),
            (v, None) => format!("{:<5} -/-/- {:>5.1}s", v.label(), self.secs),
        }
    }
}

/// Applies [`EXPECTED_FAILURES`] to a scenario's pass or fail.
fn expect(column: Column, scenario: &str, pass: bool, notes: &mut Vec<String>) -> Verdict {
    let expected = EXPECTED_FAILURES.iter().find(|(c, s, _)| *c == column && *s == scenario);
    match (pass, expected) {
        (true, None) => Verdict::Pass,
        (false, None) => Verdict::Fail,
        (false, Some((_, _, why))) => {
            notes.push(format!("expected failure: {why}"));
            Verdict::ExpectedFail
        }
        (true, Some(_)) => {
            notes.push(format!("passes now: remove it from EXPECTED_FAILURES ({})", file!()));
            Verdict::UnexpectedPass
        }
    }
}

/// A loopback address no one listens on right now.
fn free_addr() -> Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| format!("picking a free port: {e}"))
}

/// A server under test, listening.
struct Server {
    process: Background,
    url: String,
    log: PathBuf,
}

impl Server {
    /// Starts `cmd` (which listens on `addr`), its output in `log`, and waits until it accepts
    /// connections.
    /// `readiness`: a path answered 200 once the server is ready (a 404 there: the server has
    /// no such route, and listening is ready enough).
    fn start(what: &str, mut cmd: Command, addr: SocketAddr, readiness: Option<&str>, log: PathBuf) -> Result<Server> {
        let file = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = file.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
        cmd.stdout(file).stderr(err);
        let mut process = Background::start(&mut cmd).map_err(|e| format!("starting {what} ({cmd:?}): {e}"))?;
        let limit = step::scaled(START_LIMIT);
        let started = Instant::now();
        loop {
            if let Some(status) = process.exited() {
                return Err(format!("{what} exited with {status} before listening; its output: {}", tail(&log)));
            }
            if ready(addr, readiness) {
                break;
            }
            if started.elapsed() >= limit {
                let how = readiness.map_or_else(String::new, |path| format!(" (200 at {path})"));
                return Err(format!(
                    "{what} was not ready on {addr}{how} within {}; its output: {}",
                    step::show(limit),
                    tail(&log)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Server { process, url: format!("http://{addr}/mcp"), log })
    }
}

/// Whether a server accepts connections on `addr` and, with `path`, answers a GET there with 200
/// (or 404: no such route).
fn ready(addr: SocketAddr, path: Option<&str>) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else { return false };
    let Some(path) = path else { return true };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    if stream.read_exact(&mut head).is_err() {
        return false;
    }
    // `HTTP/1.1 200`
    matches!(&head[9..12], b"200" | b"404")
}

/// The last lines of a log, for an error message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(10)..].join("\n");
    if tail.is_empty() { "(none)".to_owned() } else { format!("\n{tail}") }
}

/// Runs one scenario against `url`.
fn run_scenario(dir: &Path, url: &str, out: &Path, scenario: &str) -> (bool, Option<Checks>, f64, Vec<String>) {
    let sdir = out.join(scenario);
    let _ = std::fs::remove_dir_all(&sdir);
    let _ = std::fs::create_dir_all(&sdir);
    let stdout = File::create(sdir.join("harness.stdout")).ok();
    let log = File::create(sdir.join("harness.log")).ok();
    let limit = step::scaled(SCENARIO_LIMIT);
    let started = Instant::now();
    let ended = step::within(
        Command::new(conformance::node(dir))
            .arg(conformance::harness(dir))
            .args(["server", "--url", url, "--scenario", scenario, "-o"])
            .arg(&sdir)
            .env("PATH", conformance::path_with_node(dir))
            .stdout(stdout.map_or_else(Stdio::null, Stdio::from))
            .stderr(log.map_or_else(Stdio::null, Stdio::from)),
        limit,
        None,
    );
    let secs = started.elapsed().as_secs_f64();
    let harness_ok = matches!(&ended, Ok(Ended::Exited(s)) if s.success());
    let checks = conformance::find_checks(&sdir).map(|path| {
        std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|t| conformance::read_checks(&t))
    });
    let log = std::fs::read_to_string(sdir.join("harness.log")).unwrap_or_default();
    let (pass, mut notes) = conformance::judge(scenario, harness_ok, checks.as_ref(), &log);
    if let Some(Ok(c)) = &checks
        && let Some(problem) = &c.first_problem
    {
        notes.push(format!("first: {problem}"));
    }
    match &ended {
        Err(e) => notes.insert(0, format!("could not run the harness: {e}")),
        Ok(Ended::TimedOut) => notes.insert(0, format!("ran past its time limit of {}", step::show(limit))),
        Ok(Ended::Exited(_)) => {}
    }
    (pass, checks.and_then(|c| c.ok()), secs, notes)
}

/// Runs `scenarios` against a started server, one at a time; a server that stopped fails what
/// is left with the reason.
fn run_column(
    dir: &Path,
    column: Column,
    server: &mut Server,
    out: &Path,
    scenarios: &[String],
    deadline: Instant,
) -> Vec<Cell> {
    println!(
        "{}: {} scenarios against {} (server output in {})",
        column.name(),
        scenarios.len(),
        server.url,
        server.log.display()
    );
    let started = Instant::now();
    let mut cells = Vec::new();
    for scenario in scenarios {
        if Instant::now() >= deadline {
            let limit = step::show(step::scaled(crate::test::limit::SERVER_CONFORMANCE));
            cells.push(Cell::failed(format!("not run: the step ran past its time limit of {limit}")));
            continue;
        }
        if let Some(status) = server.process.exited() {
            cells
                .push(Cell::failed(format!("not run: the server exited with {status} (see {})", server.log.display())));
            continue;
        }
        let (pass, checks, secs, mut notes) = run_scenario(dir, &server.url, out, scenario);
        let verdict = expect(column, scenario, pass, &mut notes);
        cells.push(Cell { verdict, checks, secs, notes });
    }
    println!("{}: done in {:.1}s", column.name(), started.elapsed().as_secs_f64());
    cells
}

/// Builds what a column needs and runs it; a column that cannot start fails each scenario with
/// the reason.
fn column(
    dir: &Path,
    column: Column,
    fixture: &Path,
    out: &Path,
    scenarios: &[String],
    deadline: Instant,
) -> Vec<Cell> {
    let _ = std::fs::create_dir_all(out);
    let started = free_addr().and_then(|addr| match column {
        Column::Direct => {
            let mut cmd = Command::new(fixture);
            cmd.args(["--http", &addr.to_string()]);
            Server::start("mcp-fixture-conformance", cmd, addr, None, out.join("server.log"))
        }
        Column::Gateway => {
            let config = out.join("gateway.toml");
            std::fs::write(&config, gateway_config(fixture)).map_err(|e| format!("{}: {e}", config.display()))?;
            let bin = root().join("target").join("debug").join(format!("mcp-harness{}", std::env::consts::EXE_SUFFIX));
            let cmd = gateway_command(&bin, &config, addr);
            Server::start("mcp-harness serve", cmd, addr, Some(GATEWAY_READY), out.join("server.log"))
        }
    });
    match started {
        Ok(mut server) => run_column(dir, column, &mut server, out, scenarios, deadline),
        Err(e) => {
            println!("{}: {e}", column.name());
            let why =
                format!("not run: the {} column's server did not start (its error is above the table)", column.name());
            scenarios.iter().map(|_| Cell::failed(why.clone())).collect()
        }
    }
}

/// Runs every server scenario the harness knows (or those of `only`) in each column, prints the
/// table and returns the counts (every cell of every column that ran). `Err` when nothing could
/// run (install, build, listing).
pub(crate) fn conformance_server(only: &[String]) -> Result<Summary> {
    let list_path = root().join(LIST_FILE);
    let listed_here = conformance::parse_list(
        &std::fs::read_to_string(&list_path).map_err(|e| format!("{}: {e}", list_path.display()))?,
    );
    let dir = conformance::install()?;
    run_within(
        "build mcp-fixture-conformance",
        crate::test::limit::BUILD_CONFORMANCE,
        cargo().args(["build", "-p", "mcp-fixtures", "--bin", "mcp-fixture-conformance"]),
    )?;
    if SERVE_BUILT {
        run_within(
            "build mcp-harness",
            crate::test::limit::BUILD_CONFORMANCE,
            cargo().args(["build", "-p", "cli", "--bin", "mcp-harness"]),
        )?;
    }
    let fixture =
        root().join("target").join("debug").join(format!("mcp-fixture-conformance{}", std::env::consts::EXE_SUFFIX));
    let known = conformance::list_all(&dir, "server")?;
    let (missing, extra) = conformance::list_diff(&listed_here, &known);
    let scenarios: Vec<String> = known.iter().filter(|s| only.is_empty() || only.contains(s)).cloned().collect();
    let out = dir.join("server-results");
    println!(
        "\n==> conformance-server: @modelcontextprotocol/conformance (pinned in xtask/conformance), results in {}",
        out.display()
    );
    // Both columns' scenarios share one time limit (the builds above have their own).
    let deadline = Instant::now() + step::scaled(crate::test::limit::SERVER_CONFORMANCE);
    let direct = column(&dir, Column::Direct, &fixture, &out.join("direct"), &scenarios, deadline);
    let gateway = if SERVE_BUILT {
        column(&dir, Column::Gateway, &fixture, &out.join("gateway"), &scenarios, deadline)
    } else {
        println!("{GATEWAY_NOT_BUILT} (xtask/src/conformance_server.rs: SERVE_BUILT)");
        scenarios.iter().map(|_| Cell::not_run()).collect()
    };
    let mut summary = Summary::default();
    let width = known.iter().chain(&listed_here).map(String::len).max().unwrap_or(20).max(20);
    println!("\n{:<width$} {:<18} {:<18} NOTE (checks: SUCCESS/FAILURE/WARNING)", "SCENARIO", "DIRECT", "GATEWAY");
    for ((scenario, d), g) in scenarios.iter().zip(&direct).zip(&gateway) {
        let mut notes = Vec::new();
        for (column, cell) in [(Column::Direct, d), (Column::Gateway, g)] {
            if !cell.notes.is_empty() {
                notes.push(format!("{}: {}", column.name(), cell.notes.join("; ")));
            }
            match cell.verdict {
                Verdict::Pass => summary.passed += 1,
                Verdict::ExpectedFail => summary.expected += 1,
                Verdict::NotRun => {}
                Verdict::Fail | Verdict::UnexpectedPass => {
                    summary.fail(&format!("{scenario} ({})", column.name()), &cell.notes.join("; "));
                }
            }
        }
        if extra.contains(scenario) {
            let why = format!("not in {LIST_FILE}: add it there if the new harness pin added it");
            summary.fail(scenario, &why);
            notes.push(why);
        }
        let row = format!("{scenario:<width$} {:<18} {:<18} {}", d.show(), g.show(), notes.join(" | "));
        println!("{}", row.trim_end());
    }
    for scenario in &missing {
        let why = format!("in {LIST_FILE} but the harness does not list it");
        println!("{scenario:<width$} {:<18} {:<18} {why}", "FAIL", "FAIL");
        summary.fail(scenario, &why);
    }
    for scenario in only.iter().filter(|s| !known.contains(s) && !missing.contains(s)) {
        let why = "the harness does not know this scenario";
        println!("{scenario:<width$} {:<18} {:<18} {why}", "FAIL", "FAIL");
        summary.fail(scenario, why);
    }
    let count = |cells: &[Cell], v: Verdict| cells.iter().filter(|c| c.verdict == v).count();
    let column_line = |cells: &[Cell]| {
        format!(
            "{} passed, {} failed, {} expected failures",
            count(cells, Verdict::Pass),
            count(cells, Verdict::Fail) + count(cells, Verdict::UnexpectedPass),
            count(cells, Verdict::ExpectedFail)
        )
    };
    println!("direct: {}", column_line(&direct));
    if SERVE_BUILT {
        println!("gateway: {}", column_line(&gateway));
    } else {
        println!("gateway: not run ({GATEWAY_NOT_BUILT})");
        summary.note = Some(GATEWAY_NOT_BUILT);
    }
    println!("{} passed, {} failed, {} expected failures", summary.passed, summary.failed, summary.expected);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_failures_are_counted_apart_and_cannot_go_stale() {
        let mut notes = Vec::new();
        assert_eq!(expect(Column::Direct, "ping", true, &mut notes), Verdict::Pass);
        assert_eq!(expect(Column::Direct, "ping", false, &mut notes), Verdict::Fail);
        assert!(notes.is_empty());
        // Every entry names a scenario of the list and says why.
        let list = conformance::parse_list(&std::fs::read_to_string(root().join(LIST_FILE)).unwrap());
        for (column, scenario, why) in EXPECTED_FAILURES {
            assert!(list.iter().any(|s| s == scenario), "{scenario} is not a server scenario");
            assert!(!why.trim().is_empty(), "{scenario}: say why it is expected to fail");
            assert_eq!(expect(*column, scenario, false, &mut notes), Verdict::ExpectedFail);
            assert_eq!(expect(*column, scenario, true, &mut notes), Verdict::UnexpectedPass);
        }
    }

    #[test]
    fn the_server_list_has_no_duplicates_and_covers_the_dns_rebinding_scenario() {
        let text = std::fs::read_to_string(root().join(LIST_FILE)).unwrap();
        let list = conformance::parse_list(&text);
        let mut unique = list.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), list.len(), "duplicates in {LIST_FILE}");
        assert!(list.iter().any(|s| s == "dns-rebinding-protection"), "{list:?}");
    }

    #[test]
    fn the_gateway_runs_transparent_over_http_with_the_fixture_as_its_only_upstream() {
        let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        let cmd = gateway_command(Path::new("/bin/mcp-harness"), Path::new("/t/gateway.toml"), addr);
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            args,
            [
                "--config",
                "/t/gateway.toml",
                "--allow-workspace-config",
                "serve",
                "--http",
                "127.0.0.1:4321",
                "--transparent"
            ]
        );
        let config = gateway_config(Path::new("/x/a \"b\"/mcp-fixture-conformance"));
        assert!(config.contains("command = \"/x/a \\\"b\\\"/mcp-fixture-conformance\"\n"), "{config}");
        assert!(config.contains("[policy]\ndefault = \"allow\""), "{config}");
    }

    #[test]
    fn a_server_is_ready_when_its_readiness_path_answers_200_or_has_no_such_route() {
        use std::io::{Read as _, Write as _};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let answers = ["503 Service Unavailable", "200 OK", "404 Not Found"];
        let server = std::thread::spawn(move || {
            for status in answers {
                let (mut stream, _) = listener.accept().unwrap();
                let mut request = [0u8; 256];
                let n = stream.read(&mut request).unwrap();
                assert!(String::from_utf8_lossy(&request[..n]).starts_with("GET /readyz HTTP/1.1\r\n"));
                stream.write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes()).unwrap();
            }
        });
        assert!(!ready(addr, Some("/readyz")), "503: not yet");
        assert!(ready(addr, Some("/readyz")), "200");
        assert!(ready(addr, Some("/readyz")), "404: no such route");
        server.join().unwrap();
        assert!(!ready(addr, None), "nobody listens any more");
    }

    #[test]
    fn a_cell_shows_its_verdict_checks_and_time() {
        let checks =
            conformance::read_checks(r#"[{"status": "SUCCESS"}, {"status": "SUCCESS"}, {"status": "WARNING"}]"#)
                .unwrap();
        let cell = Cell { verdict: Verdict::Fail, checks: Some(checks), secs: 1.0, notes: vec![] };
        assert_eq!(cell.show(), "FAIL  2/0/1   1.0s");
        assert_eq!(Cell::not_run().show(), "-");
        assert_eq!(Cell::failed("x".into()).show(), "FAIL  -/-/-   0.0s");
    }
}
