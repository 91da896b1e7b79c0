//! `cargo xtask bench gateway`: `mcp-harness serve` fronting the stdio echo fixture, beside the
//! floors of the HTTP and stdio groups, in one run, rounds interleaved (who goes first rotates):
//!
//! - HTTP: `serve --http` against the HTTP group's floor server (`http_bench serve`, hyper, one
//!   thread), both called by the same raw hyper client (`http_bench calls --client hyper`), at 1
//!   and 32 calls in flight; beside them the same `serve --http` with telemetry exporting every
//!   span to a local OTLP sink (`otlp_sink`, mcp-telemetry's test receiver counting spans).
//! - stdio: `serve` over stdio against the fixture called directly, both by the stdio group's
//!   raw pipe client (`raw_pipe_bench`), at 1 and 32 in flight; beside them the same `serve`
//!   exporting every span to the sink.
//! - Memory: `serve --http`'s resident set (VmHWM, VmRSS) with ten idle upstreams, built as
//!   shipped (`--profile dist`, the goal's figure) and as the release build the rest uses.
//! - Replicas: calls through haproxy to 1, 2 and 3 replicas, with and without the shared
//!   store, and the store's cost per call ([`replicas`]).
//!
//! Every server side (the floor server, `serve` and its upstream) runs on one CPU and the clients
//! on the same or the other one ([`Placement`], both measured); the sink runs with the client.
//! The binaries timed are release builds, as the floors'. Upstreams run unconfined (`sandbox = "off"`),
//! as the fixture the stdio floor calls does.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

mod replicas;

use super::{Placement, Server, field, load, median};
use crate::{Result, cargo};

/// Calls kept in flight.
const IN_FLIGHT: [usize; 2] = [1, 32];
/// Goals (issues 33 and 35): `serve --http` at least this share of the HTTP floor's calls/s;
/// `serve` over stdio at least these shares of the direct calls/s at 1 and at 32 in flight;
/// exporting every span costs at most 10% of the calls/s at 32 in flight; `serve` with
/// [`IDLE_UPSTREAMS`] idle upstreams under [`RSS_GOAL_BYTES`].
const HTTP_GOAL: f64 = 0.8;
const STDIO_GOAL: [f64; 2] = [0.5, 0.8];
const TELEMETRY_GOAL: f64 = 0.9;
const IDLE_UPSTREAMS: usize = 10;
const RSS_GOAL_BYTES: f64 = 20e6;
/// The longest wait for `serve` to be ready (its upstreams connected).
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Who answers the HTTP calls.
const FLOOR: &str = "hyper floor";
const SERVE: &str = "serve --http";
const TRACED: &str = "serve --http, every span exported";
/// Who answers the stdio calls.
const DIRECT: &str = "fixture directly";
const SERVE_STDIO: &str = "serve (stdio)";
const TRACED_STDIO: &str = "serve (stdio), every span exported";

struct Figure {
    placement: &'static str,
    who: &'static str,
    concurrency: usize,
    calls_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// The binaries the group runs.
struct Bins {
    harness: PathBuf,
    /// `mcp-harness` built as shipped: its resident set is mostly its code's pages, which
    /// whole-program optimization and `startup.order` lay out (the memory goal's binary).
    shipped: PathBuf,
    fixture: PathBuf,
    http_bench: PathBuf,
    raw_pipe: PathBuf,
    sink: PathBuf,
}

pub(crate) fn run(n: usize, rounds: usize) -> Result {
    // mcp-harness on its own, as it is installed (built with an example, its dependencies could
    // get other features).
    crate::run("build (release)", cargo().args(["build", "--release", "-p", "cli", "--bin", "mcp-harness"]))?;
    crate::run(
        "build (release, clients)",
        cargo().args([
            "build",
            "--release",
            "-p",
            "mcp-transport",
            "--example",
            "http_bench",
            "--example",
            "raw_pipe_bench",
        ]),
    )?;
    crate::run(
        "build (release, OTLP sink)",
        cargo().args([
            "build",
            "--release",
            "-p",
            "mcp-telemetry",
            "--features",
            "test-receiver",
            "--example",
            "otlp_sink",
        ]),
    )?;
    let shipped = super::shipped_harness()?;
    let fixture = super::fixture_server()?;
    let release = super::release_dir();
    let examples = release.join("examples");
    let bins = Bins {
        harness: release.join("mcp-harness"),
        shipped,
        fixture,
        http_bench: examples.join("http_bench"),
        raw_pipe: examples.join("raw_pipe_bench"),
        sink: examples.join("otlp_sink"),
    };
    let placements = Placement::available();
    if placements.is_empty() {
        return Err("taskset could not be run, and the figures depend on where the processes run".into());
    }
    // Outside the working directory: mcp-harness refuses a configuration an agent here could write.
    let work = std::env::temp_dir().join(format!("mcp-harness-bench-gateway-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let outcome = measure(&bins, &work, &placements, n, rounds).and_then(|()| replicas::run(&bins, &work, n, rounds));
    let _ = std::fs::remove_dir_all(&work);
    outcome
}

fn measure(bins: &Bins, work: &Path, placements: &[Placement], n: usize, rounds: usize) -> Result {
    let one = upstreams_config(work, &bins.fixture, "one.toml", 1)?;
    let ten = upstreams_config(work, &bins.fixture, "ten.toml", IDLE_UPSTREAMS)?;
    let data = work.join("data");
    let load_before = load();
    let mut figures = Vec::new();
    let mut spans = Vec::new();
    for &place in placements {
        let (place_figures, traced) = http_rounds(bins, &one, &data, place, n, rounds)?;
        figures.extend(place_figures);
        spans.push((place.label(), traced));
        figures.extend(stdio_rounds(bins, &one, &data, place, n, rounds)?);
    }
    let shipped_memory = memory(&bins.shipped, bins, &ten, &data, rounds)?;
    let release_memory = memory(&bins.harness, bins, &ten, &data, rounds)?;
    let load_after = load();

    println!("\nload average (1, 5, 15 min): {load_before} before, {load_after} after");
    let pick = |placement: &str, who: &str, concurrency: usize, f: fn(&Figure) -> f64| {
        median(
            figures
                .iter()
                .filter(|x| x.placement == placement && x.who == who && x.concurrency == concurrency)
                .map(f)
                .collect(),
        )
    };
    let mut verdicts = Vec::new();
    let mut all_met = true;
    // A goal's line (`Some(met)`), or a figure's with no goal (`None`).
    let mut verdict = |met: Option<bool>, text: String| {
        all_met &= met != Some(false);
        verdicts.push(match met {
            Some(met) => format!("{text}: {}", if met { "met" } else { "MISSED" }),
            None => text,
        });
    };
    println!(
        "\n| placement | in flight | calls answered by | calls/s (median of {rounds}) | ÷ floor | p50 ms | p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    for placement in placements.iter().map(|p| p.label()) {
        for (i, concurrency) in IN_FLIGHT.into_iter().enumerate() {
            for (floor, rows) in
                [(FLOOR, [FLOOR, SERVE, TRACED].as_slice()), (DIRECT, [DIRECT, SERVE_STDIO, TRACED_STDIO].as_slice())]
            {
                let base = pick(placement, floor, concurrency, |f| f.calls_per_s);
                for &who in rows {
                    let calls = pick(placement, who, concurrency, |f| f.calls_per_s);
                    println!(
                        "| {placement} | {concurrency} | {who} | {calls:.0} | {:.2} | {:.3} | {:.3} |",
                        calls / base,
                        pick(placement, who, concurrency, |f| f.p50_ms),
                        pick(placement, who, concurrency, |f| f.p99_ms),
                    );
                }
            }
            let ratio = |who: &str, base: &str| {
                pick(placement, who, concurrency, |f| f.calls_per_s)
                    / pick(placement, base, concurrency, |f| f.calls_per_s)
            };
            let http = ratio(SERVE, FLOOR);
            verdict(
                Some(http >= HTTP_GOAL),
                format!(
                    "{placement}, {concurrency} in flight: serve --http {http:.2}x the HTTP floor's calls/s (goal >= \
                     {HTTP_GOAL})"
                ),
            );
            let stdio = ratio(SERVE_STDIO, DIRECT);
            verdict(
                Some(stdio >= STDIO_GOAL[i]),
                format!(
                    "{placement}, {concurrency} in flight: serve over stdio {stdio:.2}x the direct calls/s (goal >= {})",
                    STDIO_GOAL[i]
                ),
            );
            // Telemetry off (today's serve) beside every span exported, over both fronts.
            for (front, traced, off) in
                [("serve --http", TRACED, SERVE), ("serve over stdio", TRACED_STDIO, SERVE_STDIO)]
            {
                let traced = ratio(traced, off);
                let cost = (1.0 - traced) * 100.0;
                let text = format!(
                    "{placement}, {concurrency} in flight: every span exported costs {cost:.1}% of {front}'s calls/s \
                     with telemetry off"
                );
                if concurrency == 32 {
                    verdict(Some(traced >= TELEMETRY_GOAL), format!("{text} (goal <= 10%)"));
                } else {
                    verdict(None, format!("{text} (no goal at 1 in flight)"));
                }
            }
        }
    }
    for (placement, (received, calls)) in spans {
        println!(
            "{placement}: the sink received {received} spans for {calls} calls through the traced serve ({:.2} a call, \
             initialize and warm-up included)",
            received as f64 / calls.max(1) as f64
        );
    }
    let (hwm, rss) = shipped_memory;
    println!(
        "\nserve --http with {IDLE_UPSTREAMS} idle upstreams, after 200 calls to one (median of {rounds} starts):"
    );
    for (build, (hwm, rss)) in [("dist (as shipped)", shipped_memory), ("release", release_memory)] {
        println!("  {build}: VmHWM {:.1} MB, VmRSS {:.1} MB", hwm / 1e6, rss / 1e6);
    }
    verdict(
        Some(hwm < RSS_GOAL_BYTES),
        format!(
            "memory: peak resident set {:.1} MB as shipped, VmRSS {:.1} MB (goal under {:.0} MB)",
            hwm / 1e6,
            rss / 1e6,
            RSS_GOAL_BYTES / 1e6
        ),
    );
    println!();
    for line in &verdicts {
        println!("{line}");
    }
    println!("\nbench: {}", if all_met { "every goal met" } else { "goals missed" });
    Ok(())
}

/// The HTTP rounds of one placement: the floor server, `serve --http`, and `serve --http`
/// exporting every span, each called by the raw hyper client. Also what the sink received:
/// (spans, calls made through the traced serve).
fn http_rounds(
    bins: &Bins,
    config: &Path,
    data: &Path,
    place: Placement,
    n: usize,
    rounds: usize,
) -> Result<(Vec<Figure>, (u64, usize))> {
    let placement = place.label();
    let mut floor = place.command(&bins.http_bench, true);
    floor.arg("serve").stdin(Stdio::piped()).stdout(Stdio::piped());
    let (floor_server, floor_base) = Server::started(floor, "http_bench serve")?;
    let mut sink = Sink::start(place, &bins.sink)?;
    let serve = Served::start(serve_http(bins, config, data, place, None), SERVE)?;
    let traced = Served::start(serve_http(bins, config, data, place, Some(&sink.endpoint)), TRACED)?;
    let targets = [
        (FLOOR, format!("{floor_base}/json"), "echo"),
        (SERVE, serve.url(), "echo__echo"),
        (TRACED, traced.url(), "echo__echo"),
    ];
    let mut figures = Vec::new();
    let mut traced_calls = 0;
    for round in 0..rounds {
        for concurrency in IN_FLIGHT {
            // Rotate who goes first, so warm caches or a busy neighbour favour none.
            for k in 0..targets.len() {
                let (who, url, tool) = &targets[(round + k) % targets.len()];
                let line = super::http::example(
                    place,
                    &bins.http_bench,
                    &[
                        "calls",
                        "--client",
                        "hyper",
                        "--url",
                        url,
                        "--tool",
                        tool,
                        "-n",
                        &n.to_string(),
                        "--concurrency",
                        &concurrency.to_string(),
                    ],
                )?;
                println!("{placement}, round {}, {who}: {line}", round + 1);
                if *who == TRACED {
                    // The measured calls and the warm-up's 50.
                    traced_calls += n + 50;
                }
                figures.push(figure(placement, who, concurrency, &line)?);
            }
        }
    }
    drop(serve);
    // Stopped by SIGTERM, the traced serve exports what it still holds before it exits.
    traced.stop()?;
    let received = sink.spans_settled()?;
    drop(floor_server);
    Ok((figures, (received, traced_calls)))
}

/// The stdio rounds of one placement: the fixture called directly, through `serve`, and
/// through `serve` exporting every span to a sink, by the raw pipe client, which spawns its
/// server for each run.
fn stdio_rounds(
    bins: &Bins,
    config: &Path,
    data: &Path,
    place: Placement,
    n: usize,
    rounds: usize,
) -> Result<Vec<Figure>> {
    let placement = place.label();
    let sink = Sink::start(place, &bins.sink)?;
    let mut figures = Vec::new();
    let whos = [DIRECT, SERVE_STDIO, TRACED_STDIO];
    for round in 0..rounds {
        for concurrency in IN_FLIGHT {
            // Rotate who goes first, so warm caches or a busy neighbour favour none.
            for k in 0..whos.len() {
                let who = whos[(round + k) % whos.len()];
                let mut command = place.command(&bins.raw_pipe, false);
                command.args(["-n", &n.to_string(), "--concurrency", &concurrency.to_string()]);
                if who == DIRECT {
                    command.arg("--").args(place.server_argv(&bins.fixture)).arg("echo");
                } else {
                    command.args(["--tool", "echo__echo", "--"]).args(place.server_argv(&bins.harness));
                    command.arg("--config").arg(config).arg("serve");
                    harness_env(&mut command, data, (who == TRACED_STDIO).then_some(sink.endpoint.as_str()));
                }
                let out = command.output().map_err(|e| format!("raw_pipe_bench: {e}"))?;
                let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if !out.status.success() {
                    return Err(format!("raw_pipe_bench ({who}) failed: {}", String::from_utf8_lossy(&out.stderr)));
                }
                println!("{placement}, round {}, {who}: {line}", round + 1);
                figures.push(figure(placement, who, concurrency, &line)?);
            }
        }
    }
    Ok(figures)
}

/// `harness serve --http` with `upstreams` idle, each start: its peak and current resident set in
/// bytes after 200 calls to one of them (medians).
fn memory(harness: &Path, bins: &Bins, config: &Path, data: &Path, rounds: usize) -> Result<(f64, f64)> {
    let (mut peaks, mut now) = (Vec::new(), Vec::new());
    for _ in 0..rounds.max(1) {
        let mut command = Command::new(harness);
        command.arg("--config").arg(config).args(["serve", "--http", "127.0.0.1:0"]);
        harness_env(&mut command, data, None);
        let served = Served::start(command, "serve --http (10 upstreams)")?;
        let line = super::http::example(
            Placement::OneCpu,
            &bins.http_bench,
            &["calls", "--client", "hyper", "--url", &served.url(), "--tool", "e0__echo", "-n", "200"],
        )?;
        field(&line, "calls_per_s").ok_or(format!("no calls through serve: {line}"))?;
        let status = std::fs::read_to_string(format!("/proc/{}/status", served.server.0.id()))
            .map_err(|e| format!("serve's /proc status: {e}"))?;
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .ok_or(format!("no {key} in serve's /proc status"))
        };
        peaks.push(kib("VmHWM:")? * 1024.0);
        now.push(kib("VmRSS:")? * 1024.0);
    }
    Ok((median(peaks), median(now)))
}

/// One line of a client's JSON output as a figure.
fn figure(placement: &'static str, who: &'static str, concurrency: usize, line: &str) -> Result<Figure> {
    Ok(Figure {
        placement,
        who,
        concurrency,
        calls_per_s: field(line, "calls_per_s").ok_or(format!("no calls_per_s in {line:?}"))?,
        p50_ms: field(line, "p50_ms").unwrap_or(0.0),
        p99_ms: field(line, "p99_ms").unwrap_or(0.0),
    })
}

/// Writes `dir/name`: `count` servers, each the echo fixture, its `echo` allowed (the default
/// asks), unconfined and required (so
/// `/readyz` waits for all of them), and no drain delay (the bench stops what it started).
/// One server is named `echo`, more are `e0`, `e1`, ...
fn upstreams_config(dir: &Path, fixture: &Path, name: &str, count: usize) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, upstreams_text(fixture, count)).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// The text of [`upstreams_config`].
fn upstreams_text(fixture: &Path, count: usize) -> String {
    let mut text = String::from("[serve.drain]\ndelay_s = 0\ntimeout_s = 5\n");
    for i in 0..count {
        let server = if count == 1 { "echo".to_owned() } else { format!("e{i}") };
        text.push_str(&format!(
            "\n[servers.{server}]\ncommand = {:?}\nargs = [\"echo\"]\nsandbox = \"off\"\nrequired = true\n\n\
             [[policy.rules]]\nserver = \"{server}\"\ntool = \"echo\"\ndecision = \"allow\"\n",
            fixture.display().to_string()
        ));
    }
    text
}

/// mcp-harness's environment: a data directory of the bench's own, and telemetry exporting to
/// `otlp` (an OTLP/HTTP endpoint) or, with `None`, off whatever the caller's environment says.
fn harness_env(command: &mut Command, data: &Path, otlp: Option<&str>) {
    command.env("MCP_HARNESS_DATA_DIR", data);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("OTEL_") {
            command.env_remove(key);
        }
    }
    if let Some(endpoint) = otlp {
        command
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
            .env("OTEL_TRACES_SAMPLER", "always_on");
    }
}

/// `mcp-harness --config CONFIG serve --http 127.0.0.1:0` on this placement's server CPU.
fn serve_http(bins: &Bins, config: &Path, data: &Path, place: Placement, otlp: Option<&str>) -> Command {
    let mut command = place.command(&bins.harness, true);
    command.arg("--config").arg(config).args(["serve", "--http", "127.0.0.1:0"]);
    harness_env(&mut command, data, otlp);
    command
}

/// A running `serve --http`, ready.
struct Served {
    server: Server,
    /// `127.0.0.1:PORT`.
    addr: String,
}

impl Served {
    /// Starts `command` (a `serve --http`), reads its address from what it says on stderr and
    /// waits until `/readyz` answers 200.
    fn start(mut command: Command, what: &str) -> Result<Served> {
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| format!("{what}: {e}"))?;
        let stderr = child.stderr.take().ok_or(format!("{what}: no stderr"))?;
        let server = Server(child);
        let mut lines = BufReader::new(stderr);
        let mut said = String::new();
        let addr = loop {
            let mut line = String::new();
            if lines.read_line(&mut line).map_err(|e| format!("{what}: {e}"))? == 0 {
                return Err(format!("{what} ended without listening: {said}"));
            }
            if let Some(url) = line.trim().strip_prefix("listening on http://") {
                break url.trim_end_matches("/mcp").to_owned();
            }
            said.push_str(&line);
        };
        // Whatever else it says is read and dropped, so it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
        let deadline = Instant::now() + READY_WITHIN;
        while get_status(&addr, "/readyz") != Some(200) {
            if Instant::now() > deadline {
                return Err(format!("{what} at {addr} was not ready within {READY_WITHIN:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Served { server, addr })
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stops it with SIGTERM (it drains, exports what it holds and exits) and waits for it.
    fn stop(mut self) -> Result {
        let pid = self.server.0.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().map_err(|e| format!("kill: {e}"))?;
        if !sent.success() {
            return Err(format!("kill -TERM {pid} failed"));
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if matches!(self.server.0.try_wait(), Ok(Some(_))) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("serve (pid {pid}) did not exit within 15 s of SIGTERM"))
    }
}

/// The status code of `GET path` from `addr`, by hand (xtask has no HTTP client); `None` when
/// nothing answers.
fn get_status(addr: &str, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(head.get(9..12)?).ok()?.parse().ok()
}

/// The OTLP sink (`otlp_sink`): its endpoint, and the span count it gives for every line it
/// reads.
struct Sink {
    _server: Server,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    endpoint: String,
}

impl Sink {
    fn start(place: Placement, sink: &Path) -> Result<Sink> {
        let mut child = place
            .command(sink, false)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("otlp_sink: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("otlp_sink: no stdin or stdout".into());
        };
        let server = Server(child);
        let mut stdout = BufReader::new(stdout);
        let mut endpoint = String::new();
        stdout.read_line(&mut endpoint).map_err(|e| format!("otlp_sink: {e}"))?;
        let endpoint = endpoint.trim().to_owned();
        if !endpoint.starts_with("http://") {
            return Err(format!("otlp_sink printed {endpoint:?}, not its endpoint"));
        }
        Ok(Sink { _server: server, stdin, stdout, endpoint })
    }

    fn spans(&mut self) -> Result<u64> {
        writeln!(self.stdin).map_err(|e| format!("otlp_sink: {e}"))?;
        let mut line = String::new();
        self.stdout.read_line(&mut line).map_err(|e| format!("otlp_sink: {e}"))?;
        line.trim().parse().map_err(|e| format!("otlp_sink said {line:?}: {e}"))
    }

    /// The span count once it stopped growing (an export in flight lands within a second).
    fn spans_settled(&mut self) -> Result<u64> {
        let mut last = self.spans()?;
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let now = self.spans()?;
            if now == last {
                return Ok(now);
            }
            last = now;
        }
    }
}
