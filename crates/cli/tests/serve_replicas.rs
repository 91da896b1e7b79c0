//! Issue 34's end-to-end run: three `mcp-harness serve --http` replicas (the real binary, each
//! with the fixture server as its upstream) behind a real haproxy configured as
//! `deploy/haproxy.cfg` is, with a real redis-server as the shared store, or without one.
//!
//! Each scenario counts: every call answered once (the upstreams' own logs of what they
//! received show nothing ran twice), failures only where the scenario expects them.
//!
//! The last test checks `deploy/mcp-harness-serve@.service` the same way: verified by
//! systemd-analyze, its command run as systemd would run it.
//!
//! Needs haproxy, redis-server and systemd-analyze (Debian's packages; `.ci/run` installs them). Missing one
//! fails with one line saying what to install; `MCP_SKIP_REPLICAS=1` skips these tests instead.
//! Needs `cargo build -p mcp-fixtures` first.

#![cfg(unix)]
// Helpers outside #[test] functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

// The store crate's real Redis for tests: one helper for every crate.
#[path = "../../mcp-gateway-store/tests/it/redis_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

use redis_server::RedisServer;

/// How long a replica, haproxy or an answer may take.
const WAIT: Duration = Duration::from_secs(20);
/// How long a replica may take to be ready: its upstream started and Redis answering, on a
/// machine that CI keeps busy with other tests (a restart once took over 20 s there).
const READY_WAIT: Duration = Duration::from_secs(60);
/// The stateless revision.
const STATELESS: &str = "2026-07-28";
/// A session revision.
const SESSION: &str = "2025-11-25";
/// Calls each stateless client makes in the round-robin scenario (the issue's 3 x 1,000).
const N: usize = 1_000;

/// One cluster at a time: six of them (three replicas, haproxy and Redis each) at once on two
/// busy cores made a restarted replica take over 20 s to be ready.
static ONE_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The external programs, or `None` when `MCP_SKIP_REPLICAS=1` says to skip.
fn programs() -> Option<PathBuf> {
    if std::env::var_os("MCP_SKIP_REPLICAS").is_some_and(|v| v == "1") {
        eprintln!("skipped: MCP_SKIP_REPLICAS=1");
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let find = |name: &str, extra: &[&str]| {
        std::env::split_paths(&path)
            .chain(extra.iter().map(PathBuf::from))
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    };
    let redis = std::env::var_os("MCP_REDIS_SERVER").map(PathBuf::from).or_else(|| find("redis-server", &[]));
    assert!(
        redis.is_some_and(|p| p.is_file()),
        "redis-server not found: install Debian's redis-server (apt-get install -y redis-server) or set \
         MCP_REDIS_SERVER; MCP_SKIP_REPLICAS=1 skips these tests"
    );
    let haproxy = std::env::var_os("MCP_HAPROXY")
        .map(PathBuf::from)
        .or_else(|| find("haproxy", &["/usr/sbin", "/usr/local/sbin"]))
        .filter(|p| p.is_file());
    Some(haproxy.unwrap_or_else(|| {
        panic!(
            "haproxy not found: install Debian's haproxy (apt-get install -y haproxy) or set MCP_HAPROXY; \
             MCP_SKIP_REPLICAS=1 skips these tests"
        )
    }))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One replica process and what it said on stderr.
struct Replica {
    child: Child,
    said: Arc<Mutex<String>>,
}

/// How the replicas are set up.
struct Setup {
    store: bool,
    /// More configuration (`[[serve.limits]]`).
    extra: &'static str,
}

/// Three replicas behind haproxy, and Redis when the setup has a store.
struct Cluster {
    dir: TempDir,
    fx: String,
    setup: Setup,
    redis: Option<RedisServer>,
    replicas: Vec<Option<Replica>>,
    _haproxy: Child,
    view: Arc<View>,
}

/// What a client needs to reach the replicas: haproxy's front, and each replica's port.
struct View {
    http: reqwest::Client,
    front: String,
    ports: [u16; 3],
}

impl std::ops::Deref for Cluster {
    type Target = View;
    fn deref(&self) -> &View {
        &self.view
    }
}

/// What an answer through haproxy was, and which replica sent it (`X-Replica`, set by haproxy).
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    replica: String,
    body: Value,
}

impl Answer {
    fn text(&self) -> String {
        self.body["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
    }

    /// A tool result that is not an error.
    fn ok(&self) -> bool {
        self.status == 200 && self.body.get("result").is_some() && self.body["result"]["isError"] != json!(true)
    }
}

impl Cluster {
    async fn start(haproxy: &Path, setup: Setup) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fx = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
        {
            use std::os::unix::fs::PermissionsExt;
            let key = dir.path().join("gateway.key");
            std::fs::write(&key, format!("{}\n", "5a".repeat(32))).unwrap();
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let redis = setup.store.then(RedisServer::start);
        let dir_path = dir.path().to_owned();
        let ports = [free_port(), free_port(), free_port()];
        let front_port = free_port();
        let mut cluster = Self {
            dir,
            fx,
            setup,
            redis,
            replicas: Vec::new(),
            _haproxy: start_haproxy(haproxy, &dir_path, front_port, ports),
            view: Arc::new(View {
                http: reqwest::Client::new(),
                front: format!("http://127.0.0.1:{front_port}/mcp"),
                ports,
            }),
        };
        for i in 0..3 {
            let replica = cluster.spawn(i).await;
            cluster.replicas.push(Some(replica));
        }
        // haproxy sends to every replica once its checks see them ready.
        let deadline = Instant::now() + WAIT;
        let mut seen = BTreeSet::new();
        while seen.len() < 3 {
            let answer = cluster.stateless("tools/list", json!({}), 0).await;
            if answer.status == 200 {
                seen.insert(answer.replica);
            }
            assert!(Instant::now() < deadline, "haproxy never sent to all three replicas: {seen:?}");
        }
        cluster
    }

    fn config(&self, i: usize) -> PathBuf {
        let dir = self.dir.path().display();
        let store = match &self.redis {
            Some(redis) => format!("store = \"{}\"\nnamespace = \"replicas-test\"\n", redis.url()),
            None => String::new(),
        };
        let text = format!(
            r#"[servers.fx]
command = "{fx}"
args = ["echo", "--log", "{dir}/calls-{i}.jsonl"]
required = true
# It writes its log of what it received outside the standard sandbox's reach.
sandbox = "off"

[policy]
default = "allow"

[[policy.rules]]
server = "fx"
tool = "add"
decision = "confirm"

[serve.replicas]
key_file = "{dir}/gateway.key"
{store}
[serve.drain]
delay_s = 1.5
timeout_s = 10
{extra}
"#,
            fx = self.fx,
            extra = self.setup.extra,
        );
        let path = self.dir.path().join(format!("replica-{i}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Starts replica `i` on its port and waits until it is ready.
    async fn spawn(&self, i: usize) -> Replica {
        let data = self.dir.path().join(format!("data-{i}"));
        // Its working directory holds no configuration (one there would be refused).
        let work = self.dir.path().join(format!("work-{i}"));
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-harness"));
        command
            .current_dir(&work)
            .env_remove("MCP_HARNESS_CONFIG")
            .env("RUST_LOG", std::env::var("SERVE_TEST_LOG").unwrap_or_else(|_| "error".to_owned()))
            .env("MCP_HARNESS_DATA_DIR", &data)
            .arg("--config")
            .arg(self.config(i))
            .args(["serve", "--http", &format!("127.0.0.1:{}", self.ports[i])]);
        let (mut child, said) = spawn_keeping_stderr(&mut command);
        let ready = format!("http://127.0.0.1:{}/readyz", self.ports[i]);
        let deadline = Instant::now() + READY_WAIT;
        let mut why = String::from("/readyz never answered");
        loop {
            if let Ok(answer) = self.http.get(&ready).send().await {
                if answer.status() == 200 {
                    return Replica { child, said };
                }
                why = answer.text().await.unwrap_or_default();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("replica {i} exited ({status}): {}", said.lock().unwrap());
            }
            assert!(
                Instant::now() < deadline,
                "replica {i} not ready within {READY_WAIT:?} ({why}): {}",
                said.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What replica `i` said on stderr.
    fn said(&self, i: usize) -> String {
        self.replicas[i].as_ref().map(|r| r.said.lock().unwrap().clone()).unwrap_or_default()
    }

    fn pid(&self, i: usize) -> String {
        self.replicas[i].as_ref().unwrap().child.id().unwrap().to_string()
    }

    /// The replica's index from haproxy's name of it (`r1`..`r3`).
    fn index(name: &str) -> usize {
        name.strip_prefix('r').and_then(|n| n.parse::<usize>().ok()).map_or(usize::MAX, |n| n - 1)
    }

    /// A view for tasks that run beside the test.
    fn view(&self) -> Arc<View> {
        Arc::clone(&self.view)
    }
}

impl View {
    /// A 2026-07-28 request through haproxy.
    async fn stateless(&self, method: &str, params: Value, id: u64) -> Answer {
        send(&self.http, &self.front, None, method, params, id).await
    }

    /// A session request through haproxy (or to `url`).
    async fn in_session(&self, url: &str, session: &str, method: &str, params: Value, id: u64) -> Answer {
        send(&self.http, url, Some(session), method, params, id).await
    }

    /// A 2026-07-28 request to `url`.
    async fn stateless_at(&self, url: &str, params: Value) -> Answer {
        send(&self.http, url, None, "tools/call", params, 1).await
    }

    /// A replica's own MCP endpoint (bypassing haproxy).
    fn direct(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}/mcp", self.ports[i])
    }
}

impl Cluster {
    /// Opens a session through haproxy (able to answer approval forms); its id and replica.
    async fn open_session(&self) -> (String, String) {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": SESSION, "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "replicas-test", "version": "1"}}});
        let answer = self
            .http
            .post(&self.front)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "initialize");
        let replica = header(&answer, "x-replica");
        let session = header(&answer, "mcp-session-id");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let done = session_post(&self.http, &self.front, &session, &initialized).await;
        assert_eq!(done.status(), 202);
        (session, replica)
    }

    /// Every `tools/call` the upstreams received: arguments (as JSON text) to how many times.
    fn upstream_calls(&self) -> BTreeMap<String, usize> {
        let mut seen = BTreeMap::new();
        for i in 0..3 {
            let text = std::fs::read_to_string(self.dir.path().join(format!("calls-{i}.jsonl"))).unwrap_or_default();
            for line in text.lines() {
                let Ok(message) = serde_json::from_str::<Value>(line) else { continue };
                if message["method"] == "tools/call" {
                    *seen.entry(message["params"]["arguments"].to_string()).or_insert(0) += 1;
                }
            }
        }
        seen
    }

    /// Sends `signal` to replica `i`.
    fn signal(&self, i: usize, signal: &str) {
        let pid = self.pid(i);
        assert!(std::process::Command::new("kill").args([signal, &pid]).status().unwrap().success());
    }

    /// SIGTERMs replica `i`, waits for its drained exit 0 (no call cut off), and starts it
    /// again; how many requests were in flight when it stopped taking new ones.
    async fn restart(&mut self, i: usize) -> usize {
        self.signal(i, "-TERM");
        let mut replica = self.replicas[i].take().unwrap();
        let status = tokio::time::timeout(WAIT, replica.child.wait()).await.expect("drained in time").unwrap();
        let said = replica.said.lock().unwrap().clone();
        assert_eq!(status.code(), Some(0), "replica {i} after SIGTERM: {said}");
        let report = said.lines().find_map(|l| l.strip_prefix("drained: ")).unwrap_or_else(|| panic!("{said}"));
        assert!(report.ends_with("0 call(s) cut off at the timeout"), "{report}");
        self.replicas[i] = Some(self.spawn(i).await);
        report.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{report}"))
    }
}

/// Starts `command` (killed when dropped), keeping what it says on stderr.
fn spawn_keeping_stderr(command: &mut Command) -> (Child, Arc<Mutex<String>>) {
    let mut child =
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true).spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let said = Arc::new(Mutex::new(String::new()));
    let keep = Arc::clone(&said);
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            keep.lock().unwrap().push_str(&format!("{line}\n"));
        }
    });
    (child, said)
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// haproxy as `deploy/haproxy.cfg` has it, on loopback ports, with faster checks, naming the
/// replica that answered in `X-Replica`.
fn start_haproxy(haproxy: &Path, dir: &Path, front: u16, ports: [u16; 3]) -> Child {
    let shipped = include_str!("../../../deploy/haproxy.cfg");
    let mut cfg = String::new();
    for line in shipped.lines() {
        let trimmed = line.trim_start();
        // Logs would go to our stdout; the test reads answers, not logs.
        if trimmed.starts_with("log ") || trimmed.starts_with("option httplog") {
            continue;
        }
        let line = line
            .replace("bind 127.0.0.1:8080", &format!("bind 127.0.0.1:{front}"))
            .replace("127.0.0.1:8101", &format!("127.0.0.1:{}", ports[0]))
            .replace("127.0.0.1:8102", &format!("127.0.0.1:{}", ports[1]))
            .replace("127.0.0.1:8103", &format!("127.0.0.1:{}", ports[2]))
            // Checks every 100 ms, each given 1 s (a debug build on busy cores is slow to
            // answer): the replicas' drain delay (1.5 s here) exceeds what noticing takes.
            .replace("inter 2s fall 2 rise 2", "inter 100ms fall 2 rise 1")
            .replace("timeout check 2s", "timeout check 1s");
        cfg.push_str(&line);
        cfg.push('\n');
        if trimmed.starts_with("balance ") {
            cfg.push_str("    http-response set-header X-Replica %s\n");
        }
    }
    assert!(cfg.contains(&format!("127.0.0.1:{}", ports[2])), "deploy/haproxy.cfg changed shape:\n{cfg}");
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, cfg).unwrap();
    Command::new(haproxy)
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// One JSON-RPC request: in `session`, or stateless (the 2026-07-28 envelope and headers,
/// able to answer forms); the answer (one JSON-RPC message, from JSON or SSE).
async fn send(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    method: &str,
    params: Value,
    id: u64,
) -> Answer {
    let mut params = params;
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-method", method);
    match session {
        Some(session) => request = request.header("mcp-session-id", session).header("mcp-protocol-version", SESSION),
        None => {
            params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": STATELESS,
                "io.modelcontextprotocol/clientInfo": {"name": "replicas-modern", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}});
            request = request.header("mcp-protocol-version", STATELESS);
            if let Some(name) = params["name"].as_str() {
                request = request.header("mcp-name", name.to_owned());
            }
        }
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let response = match request.body(body.to_string()).send().await {
        Ok(response) => response,
        Err(e) => return Answer { status: 0, replica: String::new(), body: json!({"transport": e.to_string()}) },
    };
    let status = response.status().as_u16();
    let replica = header(&response, "x-replica");
    // A body cut off (a replica killed while its answer streams, after the status was sent) is
    // as much a transport failure as a refused connection.
    let text = match response.text().await {
        Ok(text) => text,
        Err(e) => return Answer { status: 0, replica, body: json!({"transport": e.to_string()}) },
    };
    let body = serde_json::from_str::<Value>(&text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id").is_some() && m.get("method").is_none())
            .unwrap_or_else(|| json!({"text": text}))
    });
    Answer { status, replica, body }
}

async fn session_post(http: &reqwest::Client, url: &str, session: &str, body: &Value) -> reqwest::Response {
    http.post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", SESSION)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// The next JSON-RPC message of an SSE answer being read.
async fn next_message(response: &mut reqwest::Response, pending: &mut String) -> Value {
    loop {
        if let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
            // A priming event (an id, empty data) carries no message.
            if data.iter().any(|d| !d.is_empty()) {
                return serde_json::from_str(&data.join("\n")).unwrap();
            }
            continue;
        }
        let chunk = tokio::time::timeout(WAIT, response.chunk()).await.expect("an event in time").unwrap();
        pending.push_str(std::str::from_utf8(&chunk.expect("the stream is open")).unwrap());
    }
}

/// An echo call's arguments, unique to the run.
fn echo(tag: &str) -> Value {
    json!({"name": "fx__echo", "arguments": {"text": tag}})
}

/// The arguments as the upstream log shows them.
fn logged(arguments: &Value) -> String {
    arguments.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_clients_round_robin_with_approval_rounds_answered_on_other_replicas() {
    let Some(haproxy) = programs() else { return };
    let _one = ONE_CLUSTER.lock().await;
    let started = Instant::now();
    let cluster = Arc::new(Cluster::start(&haproxy, Setup { store: true, extra: "" }).await);

    // One round by hand: asked through haproxy, answered directly on another replica.
    let add = |a: u64| json!({"name": "fx__add", "arguments": {"a": a, "b": 1}});
    let asked = cluster.stateless("tools/call", add(1_000_000), 1).await;
    assert_eq!(asked.body["result"]["resultType"], "input_required", "{asked:?}");
    let asker = Cluster::index(&asked.replica);
    let other = (asker + 1) % 3;
    let mut retry = add(1_000_000);
    retry["requestState"] = asked.body["result"]["requestState"].clone();
    retry["inputResponses"] = json!({"approval": {"action": "accept", "content": {"decision": "yes"}}});
    let done = send(&cluster.http, &cluster.direct(other), None, "tools/call", retry.clone(), 2).await;
    assert_eq!(done.text(), "1000001", "{done:?}");
    // The same state presented again, at the third replica: refused (the replay cache is shared).
    let third = (asker + 2) % 3;
    let replayed = send(&cluster.http, &cluster.direct(third), None, "tools/call", retry, 3).await;
    assert!(!replayed.ok(), "a replayed approval ran again: {replayed:?}");

    // 3 clients x N calls; every tenth an approval round, its retry wherever haproxy sends it.
    let mut clients = Vec::new();
    for c in 0..3u64 {
        let cluster = Arc::clone(&cluster);
        clients.push(tokio::spawn(async move {
            let mut answered = Vec::new();
            let mut crossed = 0;
            for i in 0..N as u64 {
                let id = c * 10_000 + i;
                if i.is_multiple_of(10) {
                    let asked = cluster.stateless("tools/call", add(id), id).await;
                    assert_eq!(asked.body["result"]["resultType"], "input_required", "{asked:?}");
                    let mut retry = add(id);
                    retry["requestState"] = asked.body["result"]["requestState"].clone();
                    retry["inputResponses"] = json!({"approval": {"action": "accept", "content": {"decision": "yes"}}});
                    let done = cluster.stateless("tools/call", retry, id).await;
                    assert!(done.ok(), "{done:?}");
                    assert_eq!(done.text(), (id + 1).to_string());
                    crossed += usize::from(done.replica != asked.replica);
                    answered.push((add(id)["arguments"].clone(), done.replica));
                } else {
                    let tag = format!("c{c}-{i}");
                    let done = cluster.stateless("tools/call", echo(&tag), id).await;
                    assert!(done.ok(), "{done:?}");
                    assert_eq!(done.text(), tag);
                    answered.push((echo(&tag)["arguments"].clone(), done.replica));
                }
            }
            (answered, crossed)
        }));
    }
    let mut answered = Vec::new();
    let mut crossed = 0;
    for client in clients {
        let (mine, crossings) = client.await.unwrap();
        answered.extend(mine);
        crossed += crossings;
    }
    assert_eq!(answered.len(), 3 * N);
    let mut per_replica = BTreeMap::new();
    for (_, replica) in &answered {
        *per_replica.entry(replica.clone()).or_insert(0) += 1;
    }
    assert_eq!(per_replica.len(), 3, "round robin reaches all three: {per_replica:?}");
    assert!(per_replica.values().all(|&n| n >= N / 2), "round robin spreads the calls: {per_replica:?}");
    assert!(crossed > 0, "no approval round was answered on another replica than the one that asked");
    // Every call reached an upstream exactly once (the asking halves of approval rounds never do).
    let upstream = cluster.upstream_calls();
    for (arguments, _) in &answered {
        assert_eq!(
            upstream.get(&logged(arguments)),
            Some(&1),
            "{arguments}: {:?}",
            upstream.keys().take(5).collect::<Vec<_>>()
        );
    }
    assert_eq!(upstream.get(&logged(&add(1_000_000)["arguments"])), Some(&1), "the replayed state ran once");
    assert_eq!(upstream.values().sum::<usize>(), 3 * N + 1, "nothing else ran");
    eprintln!(
        "round robin: {} calls + 1 by hand, {} approval rounds ({crossed} answered on another replica), \
         per replica {per_replica:?}, {:.1} s",
        3 * N,
        3 * N / 10,
        started.elapsed().as_secs_f64()
    );
}

/// Session clients calling in a loop (`fx__sleep` long enough to be in flight at any time,
/// then an approved `fx__add`) until `stop`; each call's arguments and answer.
async fn session_load(
    cluster: Arc<View>,
    session: String,
    c: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(Value, Instant, Answer)> {
    let mut calls = Vec::new();
    let mut i = 0u64;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let id = c * 10_000 + i;
        let params = if i.is_multiple_of(2) {
            json!({"name": "fx__sleep", "arguments": {"ms": 200, "tag": id}})
        } else {
            json!({"name": "fx__add", "arguments": {"a": id, "b": 1}})
        };
        let sent = Instant::now();
        let answer = cluster.in_session(&cluster.front, &session, "tools/call", params.clone(), id).await;
        calls.push((params["arguments"].clone(), sent, answer));
        i += 1;
    }
    calls
}

/// Opens a session and approves `fx__add` "yes for this client" in it (asked on the call's
/// stream, answered in the same session).
async fn approved_session(cluster: &Cluster) -> (String, String) {
    let (session, replica) = cluster.open_session().await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fx__add", "arguments": {"a": 0.5, "b": 0.25}}});
    let mut response = session_post(&cluster.http, &cluster.front, &session, &call).await;
    let mut pending = String::new();
    let asked = next_message(&mut response, &mut pending).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let reply =
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"decision": "always"}}});
    assert_eq!(session_post(&cluster.http, &cluster.front, &session, &reply).await.status(), 202);
    let done = next_message(&mut response, &mut pending).await;
    assert_eq!(done["result"]["content"][0]["text"], "0.75", "{done}");
    (session, replica)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_store_sessions_go_on_across_replicas_and_a_killed_replicas_calls_fail_only_in_flight() {
    let Some(haproxy) = programs() else { return };
    let _one = ONE_CLUSTER.lock().await;
    let started = Instant::now();
    let mut cluster = Cluster::start(&haproxy, Setup { store: true, extra: "" }).await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(approved_session(&cluster).await);
    }
    // Each session goes on at every replica, directly, with its approval: no question asked.
    for (c, (session, _)) in sessions.iter().enumerate() {
        for i in 0..3 {
            let params = json!({"name": "fx__add", "arguments": {"a": 100 + c * 10 + i, "b": 1}});
            let done = cluster.in_session(&cluster.direct(i), session, "tools/call", params, 7).await;
            assert_eq!(done.text(), (101 + c * 10 + i).to_string(), "session {c} at replica {i}: {done:?}");
        }
    }

    // Load in every session; the replica of session 0 is killed in the middle.
    let victim = Cluster::index(&sessions[0].1);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let view = Arc::new(cluster.view());
    let mut load = Vec::new();
    for (c, (session, _)) in sessions.iter().enumerate() {
        load.push(tokio::spawn(session_load(Arc::clone(&view), session.clone(), c as u64 + 1, Arc::clone(&stop))));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    cluster.signal(victim, "-KILL");
    let _ = cluster.replicas[victim].take().unwrap().child.wait().await;
    // From here on it is gone: what is sent now must succeed elsewhere.
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut calls = Vec::new();
    let mut moved = 0;
    for (c, task) in load.into_iter().enumerate() {
        let mine = task.await.unwrap();
        if c == 0 {
            // The killed replica's session went on at the others, approval included.
            let victim_name = format!("r{}", victim + 1);
            moved = mine.iter().filter(|(_, sent, a)| *sent > killed && a.ok() && a.replica != victim_name).count();
        }
        calls.extend(mine);
    }
    assert!(moved >= 2, "the killed replica's session did not go on elsewhere: {moved}");
    let failed: Vec<_> = calls.iter().filter(|(_, _, a)| !a.ok()).collect();
    let after = calls.iter().filter(|(_, sent, _)| *sent > killed).count();
    assert!(!failed.is_empty(), "a call in flight on the killed replica must fail");
    for (arguments, sent, answer) in &failed {
        assert!(*sent < killed, "a call sent after the kill failed: {arguments} {answer:?}");
        assert!(answer.status >= 500 || answer.status == 0, "failed with an error at the client: {answer:?}");
    }
    assert!(after >= 3, "calls went on after the kill: {after}");
    // Nothing ran twice; every call answered ran once.
    let upstream = cluster.upstream_calls();
    for (arguments, _, answer) in &calls {
        let ran = upstream.get(&logged(arguments)).copied().unwrap_or(0);
        assert!(ran <= 1, "{arguments} ran {ran} times");
        if answer.ok() {
            assert_eq!(ran, 1, "{arguments} answered but not run: {answer:?}");
        }
    }
    eprintln!(
        "sessions with the store: {} calls, {} failed (all in flight at the SIGKILL), {after} after it all answered \
         ({moved} of the killed replica's session, elsewhere), {:.1} s",
        calls.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_steady_load_fails_no_call() {
    let Some(haproxy) = programs() else { return };
    let _one = ONE_CLUSTER.lock().await;
    let started = Instant::now();
    let mut cluster = Cluster::start(&haproxy, Setup { store: true, extra: "" }).await;
    let (session, _) = approved_session(&cluster).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let view = Arc::new(cluster.view());
    let mut load = vec![tokio::spawn(session_load(Arc::clone(&view), session, 1, Arc::clone(&stop)))];
    for c in 2..4u64 {
        let view = Arc::clone(&view);
        let stop = Arc::clone(&stop);
        load.push(tokio::spawn(async move {
            let mut calls = Vec::new();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let id = c * 10_000 + i;
                let params = json!({"name": "fx__sleep", "arguments": {"ms": 150, "tag": id}});
                let sent = Instant::now();
                let answer = view.stateless("tools/call", params.clone(), id).await;
                calls.push((params["arguments"].clone(), sent, answer));
                i += 1;
            }
            calls
        }));
    }
    let mut drained = 0;
    let mut long = Vec::new();
    for i in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        // A call that outlasts the drain's delay, in flight when the replica stops taking
        // new requests: its drain waits for it.
        let url = cluster.direct(i);
        let view = cluster.view();
        let params = json!({"name": "fx__sleep", "arguments": {"ms": 2500, "tag": 90_000 + i}});
        long.push(tokio::spawn(async move { view.stateless_at(&url, params).await }));
        tokio::time::sleep(Duration::from_millis(200)).await;
        drained += cluster.restart(i).await;
    }
    for call in long {
        let answer = call.await.unwrap();
        assert_eq!(answer.text(), "slept 2500 ms", "a call in flight through a drain: {answer:?}");
    }
    assert!(drained >= 3, "each drain had the long call in flight: {drained}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut calls = Vec::new();
    for task in load {
        calls.extend(task.await.unwrap());
    }
    let failed: Vec<_> = calls.iter().filter(|(_, _, a)| !a.ok()).map(|(args, _, a)| (args, a)).collect();
    assert!(failed.is_empty(), "{} of {} calls failed: {failed:?}", failed.len(), calls.len());
    let upstream = cluster.upstream_calls();
    for (arguments, _, _) in &calls {
        assert_eq!(upstream.get(&logged(arguments)), Some(&1), "{arguments}");
    }
    eprintln!(
        "rolling restart: {} calls, 0 failed, 3 replicas restarted ({drained} request(s) in flight at their drains), {:.1} s",
        calls.len(),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_store_sessions_stick_and_a_killed_replicas_clients_get_404_and_start_again() {
    let Some(haproxy) = programs() else { return };
    let _one = ONE_CLUSTER.lock().await;
    let started = Instant::now();
    let mut cluster = Cluster::start(&haproxy, Setup { store: false, extra: "" }).await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(cluster.open_session().await);
    }
    // Sticky: every call of a session is answered by the replica that opened it.
    for round in 0..10 {
        for (c, (session, replica)) in sessions.iter().enumerate() {
            let tag = format!("sticky-{c}-{round}");
            let done = cluster.in_session(&cluster.front, session, "tools/call", echo(&tag), round).await;
            assert_eq!((done.text(), &done.replica), (tag, replica), "{done:?}");
        }
    }
    let victim = Cluster::index(&sessions[0].1);
    cluster.signal(victim, "-KILL");
    let _ = cluster.replicas[victim].take().unwrap().child.wait().await;
    let mut restarted = 0;
    for (c, (session, replica)) in sessions.iter_mut().enumerate() {
        let tag = format!("after-{c}");
        let mut done = cluster.in_session(&cluster.front, session, "tools/call", echo(&tag), 1).await;
        if Cluster::index(replica) == victim {
            // Another replica never heard of this session: 404, initialize again, go on.
            assert_eq!(done.status, 404, "{done:?}");
            assert!(done.body["error"]["message"].as_str().unwrap_or_default().contains("Session not found"));
            *session = cluster.open_session().await.0;
            done = cluster.in_session(&cluster.front, session, "tools/call", echo(&tag), 2).await;
            restarted += 1;
        }
        assert_eq!(done.text(), tag, "{done:?}");
    }
    assert!(restarted >= 1);
    eprintln!(
        "sticky without a store: 30 calls on their replicas, {restarted} session(s) started again after the SIGKILL, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_holds_across_the_three_replicas_and_says_when_to_retry() {
    let Some(haproxy) = programs() else { return };
    let _one = ONE_CLUSTER.lock().await;
    let started = Instant::now();
    let limits = "[[serve.limits]]\ntool = \"fx__echo\"\ncalls_per_minute = 9\n";
    let cluster = Cluster::start(&haproxy, Setup { store: true, extra: limits }).await;
    let mut allowed = BTreeMap::new();
    let mut refused = Vec::new();
    // Each replica in turn, directly: which replica haproxy picks depends on its health
    // checks, which a loaded machine can fail for a moment (one replica then sat out all 30
    // calls in a CI run), and the limit is the replicas' to hold, not haproxy's.
    for i in 0..30 {
        let replica = i % 3;
        let done = cluster.stateless_at(&cluster.direct(replica), echo(&format!("limited-{i}"))).await;
        assert_eq!(done.status, 200, "{done:?}");
        if done.ok() {
            *allowed.entry(replica).or_insert(0) += 1;
        } else {
            refused.push((replica, done));
        }
    }
    assert_eq!(allowed.values().sum::<usize>(), 9, "9 a minute across the replicas: {allowed:?}");
    assert_eq!(allowed, BTreeMap::from([(0, 3), (1, 3), (2, 3)]), "the first 9 calls, 3 on each replica");
    let replicas: BTreeSet<_> = refused.iter().map(|(replica, _)| *replica).collect();
    assert_eq!(replicas.len(), 3, "every replica refused some");
    for (_, refusal) in &refused {
        let text = refusal.text();
        assert!(text.contains("rate limit reached") && text.contains("retry after"), "{text}");
    }
    assert_eq!(cluster.upstream_calls().len(), 9, "only the allowed calls reached an upstream");
    eprintln!(
        "rate limit: 30 calls, 9 allowed {allowed:?}, 21 refused (\"{}\"), {:.1} s",
        refused[0].1.text(),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_gives_clear_errors_and_the_replicas_recover_when_it_returns() {
    let Some(haproxy) = programs() else { return };
    let _one = ONE_CLUSTER.lock().await;
    let started = Instant::now();
    let limits = "[[serve.limits]]\ntool = \"fx__echo\"\ncalls_per_minute = 100000\n";
    let mut cluster = Cluster::start(&haproxy, Setup { store: true, extra: limits }).await;
    let (session, _) = cluster.open_session().await;
    assert!(cluster.stateless("tools/call", echo("before"), 1).await.ok());
    cluster.redis.as_mut().unwrap().kill();
    // Each replica, asked directly: the limit cannot be counted, a session cannot be read.
    for i in 0..3 {
        let call = send(&cluster.http, &cluster.direct(i), None, "tools/call", echo(&format!("down-{i}")), 2).await;
        assert!(!call.ok(), "a call went through without its limit counted: {call:?}");
        let said = format!("{} {}", call.text(), call.body);
        assert!(said.contains("shared state store"), "{said}");
        let in_session = cluster.in_session(&cluster.direct(i), &session, "ping", json!({}), 3).await;
        assert_eq!(in_session.status, 503, "{in_session:?}");
        assert!(in_session.body.to_string().contains("shared state store"), "{in_session:?}");
    }
    // The replicas turn not ready; haproxy then has nobody to send to.
    let deadline = Instant::now() + WAIT;
    loop {
        let down = cluster.stateless("tools/call", echo("while-down"), 4).await;
        assert!(!down.ok(), "{down:?}");
        if down.status == 503 && down.replica.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the replicas stayed ready without Redis: {down:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster.redis.as_mut().unwrap().restart();
    let returned = Instant::now();
    let deadline = Instant::now() + WAIT;
    let mut seen = BTreeSet::new();
    let mut i = 0;
    while seen.len() < 3 {
        i += 1;
        let call = cluster.stateless("tools/call", echo(&format!("back-{i}")), 5).await;
        if call.ok() {
            seen.insert(call.replica.clone());
        }
        assert!(Instant::now() < deadline, "not every replica recovered: {seen:?} {call:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The session lived in the Redis that was lost (nothing saved): 404, initialize again.
    let gone = cluster.in_session(&cluster.front, &session, "ping", json!({}), 6).await;
    assert_eq!(gone.status, 404, "{gone:?}");
    let (session, _) = cluster.open_session().await;
    assert_eq!(cluster.in_session(&cluster.front, &session, "ping", json!({}), 7).await.body["result"], json!({}));
    for i in 0..3 {
        assert!(!cluster.said(i).contains("panicked"), "{}", cluster.said(i));
    }
    eprintln!(
        "redis stopped and started: clear errors at all three, all three serving {:.1} s after it returned, {:.1} s",
        returned.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// `deploy/mcp-harness-serve@.service` as shipped: `systemd-analyze verify` finds nothing to
/// say of it (with this build's binary and a configuration at the paths it names), and its
/// `ExecStart=` line, run as systemd would run instance PORT, serves on that port; its
/// `KillSignal=` drains it to exit 0 within its `TimeoutStopSec=`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_systemd_unit_verifies_and_its_command_serves_and_drains_on_its_stop_signal() {
    if programs().is_none() {
        return;
    }
    let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/mcp-harness-serve@.service"))
        .unwrap();
    let (binary, config_path) = ("/usr/local/bin/mcp-harness", "/etc/mcp-harness/config.toml");
    assert!(unit.contains(binary) && unit.contains(config_path), "the unit names other paths: update this test");
    let dir = tempfile::tempdir().unwrap();
    let fx = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.fx]\ncommand = \"{fx}\"\nargs = [\"echo\"]\nrequired = true\n\n[policy]\ndefault = \
             \"allow\"\n\n[serve.drain]\ndelay_s = 0.5\ntimeout_s = 5\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let ours =
        unit.replace(binary, env!("CARGO_BIN_EXE_mcp-harness")).replace(config_path, &config.display().to_string());
    let setting = |key: &str| {
        ours.lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("the unit sets no {key}"))
            .trim()
            .to_owned()
    };
    let unit_file = dir.path().join(format!("mcp-harness-serve@{port}.service"));
    std::fs::write(&unit_file, &ours).unwrap();

    let verify = std::process::Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&unit_file).output();
    let verify = verify.unwrap_or_else(|e| {
        panic!("systemd-analyze: {e}; install systemd (apt-get install -y systemd) or set MCP_SKIP_REPLICAS=1")
    });
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success() && said.trim().is_empty(), "systemd-analyze verify: {said}");

    // ExecStart= as systemd runs instance `port`: %i is the instance, words split on spaces.
    let exec = setting("ExecStart").replace("%i", &port.to_string());
    let words: Vec<&str> = exec.split_whitespace().collect();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut command = Command::new(words[0]);
    command
        .args(&words[1..])
        .current_dir(&work)
        .env_remove("MCP_HARNESS_CONFIG")
        .env("MCP_HARNESS_DATA_DIR", dir.path().join("data"));
    let (mut child, said) = spawn_keeping_stderr(&mut command);
    let http = reqwest::Client::new();
    let deadline = Instant::now() + READY_WAIT;
    while !http.get(format!("http://127.0.0.1:{port}/readyz")).send().await.is_ok_and(|answer| answer.status() == 200) {
        assert!(child.try_wait().unwrap().is_none(), "exited: {}", said.lock().unwrap());
        assert!(Instant::now() < deadline, "not ready in {READY_WAIT:?}: {}", said.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let answer = send(&http, &url, None, "tools/call", echo("unit"), 1).await;
    assert!(answer.ok() && answer.text().contains("unit"), "{answer:?}");

    assert_eq!(setting("KillSignal"), "SIGTERM", "the drain below is SIGTERM's");
    let stop_within = Duration::from_secs(setting("TimeoutStopSec").parse().unwrap());
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(stop_within, child.wait()).await.expect("stopped within TimeoutStopSec").unwrap();
    let said = said.lock().unwrap().clone();
    assert_eq!(status.code(), Some(0), "{said}");
    assert!(said.contains("drained: "), "{said}");
}
