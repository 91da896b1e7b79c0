//! The replicas row of `cargo xtask bench gateway` (issue 34): calls through haproxy, configured
//! as `deploy/haproxy.cfg` is, to 1, 2 and 3 `serve --http` replicas, with the shared store (a
//! redis-server of the bench's own) and without, side by side in one run; and what the store
//! costs a call, in microseconds.
//!
//! Three clients (`http_bench calls`, each its own session, which haproxy keeps on the replica
//! that opened it) run at once, so with several replicas the sessions spread over them. On this
//! 2-core machine every replica, haproxy, Redis and the clients share the same two CPUs: a flat
//! line is expected; the figure to watch is the store's cost per call (a session request renews
//! the session in Redis), measured with one replica and one call in flight.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Bins, Served, field, get_status, harness_env, median, upstreams_text};
use crate::Result;
use crate::bench::Server;

/// Clients running at once, and the calls each keeps in flight.
const CLIENTS: usize = 3;
const IN_FLIGHT_EACH: usize = 11;
/// The longest wait for haproxy to send to every replica.
const FRONT_WITHIN: Duration = Duration::from_secs(20);

/// One measured setup: replicas, store on or off, and its figures (medians over rounds).
struct Row {
    replicas: usize,
    store: bool,
    calls_per_s: f64,
    p50_ms: f64,
    /// p50 of one client with one call in flight (measured with one replica only).
    single_p50_ms: Option<f64>,
}

/// Runs the row; prints why when haproxy or redis-server is missing (and measures nothing).
pub(super) fn run(bins: &Bins, work: &Path, n: usize, rounds: usize) -> Result {
    let (haproxy, redis) = match programs() {
        Ok(found) => found,
        Err(why) => {
            println!("\nreplicas: not measured: {why}");
            return Ok(());
        }
    };
    let key = work.join("gateway.key");
    write_private(&key, &format!("{}\n", "5a".repeat(32)))?;
    let redis_port = free_port()?;
    let _redis = start_redis(&redis, redis_port)?;
    let store_url = format!("redis://127.0.0.1:{redis_port}/0");
    let mut rows = Vec::new();
    for replicas in 1..=3 {
        for store in [false, true] {
            let store = store.then_some(store_url.as_str());
            rows.push(measure(bins, work, &haproxy, &key, store, replicas, n, rounds)?);
        }
    }
    println!(
        "\nreplicas behind haproxy ({CLIENTS} clients x {IN_FLIGHT_EACH} in flight, each its own session; median of \
         {rounds}):\n"
    );
    println!("| replicas | shared store | calls/s | p50 ms | p50 ms, 1 client, 1 in flight |");
    println!("|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {:.0} | {:.3} | {} |",
            row.replicas,
            if row.store { "Redis" } else { "none (sticky)" },
            row.calls_per_s,
            row.p50_ms,
            row.single_p50_ms.map_or_else(|| "-".to_owned(), |p| format!("{p:.3}")),
        );
    }
    let one = |store: bool| rows.iter().find(|r| r.replicas == 1 && r.store == store);
    if let (Some(off), Some(on)) = (one(false), one(true)) {
        if let (Some(a), Some(b)) = (off.single_p50_ms, on.single_p50_ms) {
            println!(
                "\nthe shared store costs a call {:.0} µs at one in flight (p50 with Redis minus without, one replica)",
                (b - a) * 1000.0
            );
        }
        println!(
            "and {:.0} µs of the whole system's time per call at {} in flight (1/calls/s with minus without)",
            (1.0 / on.calls_per_s - 1.0 / off.calls_per_s) * 1e6,
            CLIENTS * IN_FLIGHT_EACH
        );
    }
    Ok(())
}

/// One setup: `replicas` replicas (sharing `store` when given) behind haproxy, measured.
#[allow(clippy::too_many_arguments)]
fn measure(
    bins: &Bins,
    work: &Path,
    haproxy: &Path,
    key: &Path,
    store: Option<&str>,
    replicas: usize,
    n: usize,
    rounds: usize,
) -> Result<Row> {
    let label = format!("{replicas} replica(s), store {}", if store.is_some() { "on" } else { "off" });
    let config = work.join(format!("replicas-{replicas}-{}.toml", store.is_some()));
    let mut text = upstreams_text(&bins.fixture, 1);
    text.push_str(&format!("\n[serve.replicas]\nkey_file = {:?}\n", key.display().to_string()));
    if let Some(url) = store {
        text.push_str(&format!("store = {url:?}\nnamespace = \"bench-{replicas}\"\n"));
    }
    std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
    let mut served = Vec::new();
    for i in 0..replicas {
        let mut command = Command::new(&bins.harness);
        command.arg("--config").arg(&config).args(["serve", "--http", "127.0.0.1:0"]);
        harness_env(&mut command, &work.join(format!("data-r{i}")), None);
        served.push(Served::start(command, &format!("replica {} of {label}", i + 1))?);
    }
    let front_port = free_port()?;
    let addrs: Vec<&str> = served.iter().map(|s| s.addr.as_str()).collect();
    let _haproxy = start_haproxy(haproxy, work, front_port, &addrs)?;
    let front = format!("127.0.0.1:{front_port}");
    let deadline = Instant::now() + FRONT_WITHIN;
    while get_status(&front, "/readyz") != Some(200) {
        if Instant::now() > deadline {
            return Err(format!("haproxy at {front} did not reach a ready replica within {FRONT_WITHIN:?} ({label})"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://{front}/mcp");
    let (mut rates, mut p50s, mut singles) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let lines = clients(&bins.http_bench, &url, CLIENTS, (n / CLIENTS).max(1), IN_FLIGHT_EACH)?;
        let mut rate = 0.0;
        let mut p50 = Vec::new();
        for line in &lines {
            rate += field(line, "calls_per_s").ok_or(format!("no calls_per_s in {line:?} ({label})"))?;
            p50.push(field(line, "p50_ms").unwrap_or(0.0));
        }
        println!("replicas, round {}, {label}: {rate:.0} calls/s from {CLIENTS} clients", round + 1);
        rates.push(rate);
        p50s.push(median(p50));
        if replicas == 1 {
            let line = clients(&bins.http_bench, &url, 1, (n / 4).max(1), 1)?;
            let one = line.first().and_then(|l| field(l, "p50_ms")).ok_or(format!("no p50_ms ({label})"))?;
            singles.push(one);
        }
    }
    Ok(Row {
        replicas,
        store: store.is_some(),
        calls_per_s: median(rates),
        p50_ms: median(p50s),
        single_p50_ms: (!singles.is_empty()).then(|| median(singles)),
    })
}

/// `count` `http_bench calls` at once against `url`, each `n` calls with `in_flight` in flight;
/// their JSON lines.
fn clients(bench: &Path, url: &str, count: usize, n: usize, in_flight: usize) -> Result<Vec<String>> {
    let mut children = Vec::new();
    for _ in 0..count {
        let child = Command::new(bench)
            .args(["calls", "--client", "hyper", "--url", url, "--tool", "echo__echo"])
            .args(["-n", &n.to_string(), "--concurrency", &in_flight.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("http_bench: {e}"))?;
        children.push(child);
    }
    let mut lines = Vec::new();
    for child in children {
        let out = child.wait_with_output().map_err(|e| format!("http_bench: {e}"))?;
        if !out.status.success() {
            return Err(format!("http_bench through haproxy failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        lines.push(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    }
    Ok(lines)
}

/// haproxy and redis-server, where the replicas test finds them (`MCP_HAPROXY`, `PATH`,
/// `/usr/sbin`; redis-server as `cargo xtask test` finds it).
fn programs() -> Result<(PathBuf, PathBuf)> {
    let haproxy = match std::env::var_os("MCP_HAPROXY") {
        Some(path) => Some(PathBuf::from(path)).filter(|p| p.is_file()),
        None => std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .chain(["/usr/sbin", "/usr/local/sbin"].map(PathBuf::from))
            .map(|dir| dir.join("haproxy"))
            .find(|p| p.is_file()),
    };
    let haproxy = haproxy.ok_or("haproxy not found (apt-get install -y haproxy, or set MCP_HAPROXY)")?;
    let redis = crate::test::redis_server()?;
    Ok((haproxy, redis))
}

/// A loopback port nobody listens on now.
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("a free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| format!("a free port: {e}"))
}

/// A file only its owner reads (the replicas refuse a key file others can read).
fn write_private(path: &Path, text: &str) -> Result {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

/// redis-server on `port`, keeping nothing on disk; ready when it accepts connections.
fn start_redis(redis: &Path, port: u16) -> Result<Server> {
    let child = Command::new(redis)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("redis-server: {e}"))?;
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(format!("redis-server did not listen on port {port} within 10 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(server)
}

/// haproxy with `deploy/haproxy.cfg`, its front on `front` and its servers `replicas`, checks
/// every 200 ms (the shipped 2 s would only slow the start), logging nowhere.
fn start_haproxy(haproxy: &Path, work: &Path, front: u16, replicas: &[&str]) -> Result<Server> {
    let shipped = include_str!("../../../../deploy/haproxy.cfg");
    let mut cfg = String::new();
    for line in shipped.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("server ") || trimmed.starts_with("log ") {
            continue;
        }
        if trimmed.starts_with("bind ") {
            cfg.push_str(&format!("    bind 127.0.0.1:{front}\n"));
        } else if trimmed.starts_with("default-server ") {
            cfg.push_str("    default-server inter 200ms fall 2 rise 1\n");
        } else {
            cfg.push_str(line);
            cfg.push('\n');
        }
    }
    for (i, addr) in replicas.iter().enumerate() {
        cfg.push_str(&format!("    server r{} {addr} check\n", i + 1));
    }
    let path = work.join(format!("haproxy-{front}.cfg"));
    std::fs::write(&path, cfg).map_err(|e| format!("{}: {e}", path.display()))?;
    let child = Command::new(haproxy)
        .arg("-f")
        .arg(&path)
        .arg("-db")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("haproxy: {e}"))?;
    Ok(Server(child))
}
