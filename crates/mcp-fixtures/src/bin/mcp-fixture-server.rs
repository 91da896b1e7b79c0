//! `mcp-fixture-server MODE [FLAGS]`: a misbehaving-on-request MCP server on stdio (see the
//! crate docs for the modes and tools). Synchronous std I/O and threads keep it small and fast.
#![allow(clippy::print_stderr)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

use mcp_safety::lock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Echo,
    Slow,
    Crash,
    Paginate,
    ListChanging,
    Garbage,
    Gather,
    Snoop,
    Hostile,
    /// Declares only `resources` and `prompts`: no `tools` capability, and `tools/list` is
    /// "Method not found", as a resources-only server answers it.
    Content,
}

/// How long `ask_form` and `ask_url` wait for the client's answer (a person typing).
const ASK_PERSON_LIMIT: Duration = Duration::from_secs(120);
/// How long a waiting fixture waits for the others before it gives up (`gather`, `--rendezvous`).
const GATHER_LIMIT: Duration = Duration::from_secs(60);
/// What `hostile` sends wherever a server's text can reach a person: OSC 52 (writes the
/// clipboard), a screen clear, an OSC 8 link, a carriage return that overwrites the line, a C1
/// CSI, a bidirectional override and BEL, between visible markers.
const HOSTILE: &str = "HOSTILE<\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\u{1b}]8;;http://evil.example\u{1b}\\link\u{1b}]8;;\u{1b}\\\roverwritten\u{9b}31m\u{202e}txt.exe\u{7}>END";

struct Options {
    mode: Mode,
    delay_ms: u64,
    page_size: usize,
    repeat_cursor: bool,
    endless: bool,
    huge_line: usize,
    extra_tools: usize,
    /// Each extra tool's definition is about this many bytes of JSON (`--tool-bytes`).
    tool_bytes: usize,
    /// `gather`: calls wait until this many are in flight together.
    peers: usize,
    /// Wait for calls in flight before exiting at the end of stdin.
    linger: bool,
    /// Answer `initialize` only once `peers` servers have started in this directory.
    rendezvous: Option<PathBuf>,
    /// Every line received is appended here (`--log FILE`).
    log: Option<String>,
    /// Only there to be found in the command line (`--marker TEXT`); children get it too.
    marker: Option<String>,
    /// After the first complete listing, every later page past the first fails.
    fail_relist: bool,
    /// Every tool's description ends with this process's id (which `whoami` returns), so a
    /// test can tell which incarnation of a server it was shown and which one answered.
    tag_pid: bool,
    /// Time spent starting before reading any input (an interpreter loading its packages).
    startup_ms: u64,
    /// Adds the tools with an output schema (`--structured`).
    structured: bool,
    /// Adds `list_records` and `record_details` over this many records (`--records N`).
    records: usize,
    /// Offers those two tools alone (`--records-only`): a server made for the task.
    records_only: bool,
    /// `content --mutable`: also declares `tools` and `listChanged` for everything, with the
    /// tools `add_resource`, `add_prompt`, `add_tool` and `counters`.
    mutable: bool,
    /// The `instructions` of the initialize result (`--instructions TEXT`).
    instructions: Option<String>,
    /// Adds `ask_form` and `ask_url`, which elicit (`--elicit`).
    elicit: bool,
    /// Also speaks 2026-07-28: answers `server/discover`, and `ask_form` / `ask_url` ask through
    /// an `input_required` result instead of a request (`--stateless`).
    stateless: bool,
    /// Answers every `tools/call` with a line that is not UTF-8 (a Latin-1 `é`) (`--not-utf8`).
    not_utf8: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mode = match args.next().as_deref() {
        Some("echo") | None => Mode::Echo,
        Some("slow") => Mode::Slow,
        Some("crash") => Mode::Crash,
        Some("paginate") => Mode::Paginate,
        Some("list-changing") => Mode::ListChanging,
        Some("garbage") => Mode::Garbage,
        Some("gather") => Mode::Gather,
        Some("snoop") => Mode::Snoop,
        Some("hostile") => Mode::Hostile,
        Some("content") => Mode::Content,
        Some("idle") => idle(),
        Some("as-nobody") => as_nobody(args.collect()),
        Some("linger") => linger(),
        Some(other) => return Err(format!("unknown mode {other:?}")),
    };
    let mut o = Options {
        mode,
        delay_ms: 200,
        page_size: if mode == Mode::Paginate { 2 } else { usize::MAX },
        repeat_cursor: false,
        endless: false,
        huge_line: 0,
        extra_tools: 0,
        tool_bytes: 0,
        peers: 2,
        linger: false,
        rendezvous: None,
        log: None,
        marker: None,
        fail_relist: false,
        tag_pid: false,
        startup_ms: 0,
        structured: false,
        records: 0,
        records_only: false,
        mutable: false,
        instructions: None,
        elicit: false,
        stateless: false,
        not_utf8: false,
    };
    while let Some(flag) = args.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            args.next().and_then(|v| v.parse().ok()).ok_or_else(|| format!("{name} needs a number"))
        };
        match flag.as_str() {
            "--delay-ms" => o.delay_ms = num("--delay-ms")?,
            "--page-size" => o.page_size = num("--page-size")? as usize,
            "--repeat-cursor" => o.repeat_cursor = true,
            "--endless" => o.endless = true,
            "--huge-line" => o.huge_line = num("--huge-line")? as usize,
            "--extra-tools" => o.extra_tools = num("--extra-tools")? as usize,
            "--tool-bytes" => o.tool_bytes = num("--tool-bytes")? as usize,
            "--peers" => o.peers = num("--peers")? as usize,
            "--linger" => o.linger = true,
            "--rendezvous" => o.rendezvous = Some(args.next().ok_or("--rendezvous needs a directory")?.into()),
            "--fail-relist" => o.fail_relist = true,
            "--tag-pid" => o.tag_pid = true,
            "--structured" => o.structured = true,
            "--records" => o.records = num("--records")? as usize,
            "--records-only" => o.records_only = true,
            "--mutable" => o.mutable = true,
            "--elicit" => o.elicit = true,
            "--stateless" => o.stateless = true,
            "--not-utf8" => o.not_utf8 = true,
            "--instructions" => o.instructions = Some(args.next().ok_or("--instructions needs a text")?),
            "--startup-ms" => o.startup_ms = num("--startup-ms")?,
            "--log" => o.log = Some(args.next().ok_or("--log needs a file")?),
            "--marker" => o.marker = Some(args.next().ok_or("--marker needs a value")?),
            "--die-at-start" => {
                // A server that fails at once, saying hostile things on stderr.
                eprintln!("starting failed: {HOSTILE}");
                std::process::exit(3);
            }
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    Ok(o)
}

type Out = Arc<Mutex<BufWriter<std::io::Stdout>>>;

fn send(out: &Out, msg: &Value, flush: bool) {
    if let Ok(mut w) = out.lock() {
        let _ = serde_json::to_writer(&mut *w, msg);
        let _ = w.write_all(b"\n");
        if flush {
            let _ = w.flush();
        }
    }
}

fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

fn error_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": true})
}

fn base_tools() -> Vec<Value> {
    let obj = |props: Value, req: Value| json!({"type": "object", "properties": props, "required": req});
    vec![
        json!({"name": "echo", "description": "Echo the text back.", "inputSchema": obj(json!({"text": {"type": "string"}}), json!(["text"]))}),
        json!({"name": "add", "description": "Add two numbers.", "inputSchema": obj(json!({"a": {"type": "number"}, "b": {"type": "number"}}), json!(["a", "b"]))}),
        json!({"name": "sleep", "description": "Wait ms milliseconds, reporting progress.", "inputSchema": obj(json!({"ms": {"type": "integer"}}), json!(["ms"]))}),
        json!({"name": "env", "description": "Read one environment variable of the server.", "inputSchema": obj(json!({"name": {"type": "string"}}), json!(["name"]))}),
        json!({"name": "crash", "description": "Exit at once.", "inputSchema": {"type": "object"}}),
        json!({"name": "add_tool", "description": "Register a tool and announce list_changed.", "inputSchema": obj(json!({"name": {"type": "string"}}), json!(["name"]))}),
        json!({"name": "ask_roots", "description": "Ask the client for its roots.", "inputSchema": {"type": "object"}}),
        json!({"name": "ask_sampling", "description": "Ask the client to sample.", "inputSchema": {"type": "object"}}),
        json!({"name": "ask_elicitation", "description": "Ask the client to elicit.", "inputSchema": {"type": "object"}}),
        json!({"name": "stderr", "description": "Write lines to stderr.", "inputSchema": obj(json!({"lines": {"type": "integer"}}), json!(["lines"]))}),
    ]
}

/// The `--elicit` tools.
fn elicit_tools() -> Vec<Value> {
    vec![
        json!({"name": "ask_form", "description": "Ask the user to fill in a form with every field type; returns the answer.",
            "inputSchema": {"type": "object", "properties": {"hostile": {"type": "boolean"}}}}),
        json!({"name": "ask_url", "description": "Ask the user to open a URL; returns the answer.",
            "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}}}),
    ]
}

/// What `ask_form` asks for: every field type of the restricted schema.
fn form_request(hostile: bool) -> Value {
    let message =
        if hostile { format!("Tell us about yourself {HOSTILE}") } else { "Tell us about yourself".to_owned() };
    let name_title = if hostile { format!("Name {HOSTILE}") } else { "Name".to_owned() };
    json!({"mode": "form", "message": message, "requestedSchema": {"type": "object", "required": ["name", "email"], "properties": {
        "name": {"type": "string", "title": name_title, "description": "Your full name", "minLength": 2, "maxLength": 40},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "birthday": {"type": "string", "title": "Birthday", "format": "date"},
        "homepage": {"type": "string", "title": "Homepage", "format": "uri"},
        "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150, "default": 30},
        "rating": {"type": "number", "title": "Rating", "minimum": 0, "maximum": 5},
        "subscribe": {"type": "boolean", "title": "Subscribe", "default": false},
        "color": {"type": "string", "title": "Color", "enum": ["red", "green", "blue"], "default": "green"},
        "size": {"type": "string", "title": "Size", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        "tags": {"type": "array", "title": "Tags", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}}
    }}})
}

/// What `ask_url` asks for.
fn url_request(args: &Value) -> Value {
    let url = args.get("url").and_then(Value::as_str).unwrap_or("https://example.com/login?session=1");
    json!({"mode": "url", "message": "Sign in to continue", "url": url, "elicitationId": "fixture-1"})
}

/// The output schema of the `--structured` tools.
/// Extra tool `i`; with `bytes`, its description and parameters fill about that many bytes of
/// JSON (a big catalog for the `tools --json` benchmark).
fn extra_tool(i: usize, bytes: usize) -> Value {
    const WORDS: [&str; 8] = ["reads", "the", "record", "of", "a", "customer", "and", "returns"];
    let description = format!("Extra tool {i}.");
    if bytes == 0 {
        return json!({"name": format!("extra_{i}"), "description": description, "inputSchema": {"type": "object"}});
    }
    let words = |n: usize| -> String {
        let mut text = String::new();
        for (k, word) in WORDS.iter().cycle().skip(i % WORDS.len()).enumerate() {
            if text.len() >= n {
                break;
            }
            text.push_str(if k == 0 { "" } else { " " });
            text.push_str(word);
        }
        text
    };
    let description = format!("{description} It {}.", words(bytes / 2));
    let mut properties = serde_json::Map::new();
    for p in 0..(bytes * 2 / 5).div_ceil(88).max(1) {
        properties.insert(format!("field_{p}"), json!({"type": "string", "description": words(50)}));
    }
    json!({"name": format!("extra_{i}"), "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": ["field_0"]}})
}

fn weather_schema() -> Value {
    json!({"type": "object", "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"}},
           "required": ["temperature", "conditions"]})
}

/// `--structured`: tools with an output schema, answering with structured content that
/// matches it (with and without text) or does not.
fn structured_tools() -> Vec<Value> {
    let city = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    vec![
        json!({"name": "weather", "description": "The weather, as text and structured content.", "inputSchema": city, "outputSchema": weather_schema()}),
        json!({"name": "weather_quiet", "description": "The weather, as structured content only.", "inputSchema": city, "outputSchema": weather_schema()}),
        json!({"name": "weather_bad", "description": "The weather, as structured content that does not match the output schema.", "inputSchema": city, "outputSchema": weather_schema()}),
    ]
}

/// `--records N`: a listing of N customer records and the details of one, for code mode's
/// tests and benchmark (one record in 40, from the 8th, is overdue).
fn record_tools() -> Vec<Value> {
    let record = json!({"type": "object", "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"}, "region": {"type": "string"}, "status": {"type": "string"}},
        "required": ["id", "name", "region", "status"]});
    vec![
        json!({"name": "list_records", "description": "List every customer record (id, name, region, status).",
            "inputSchema": {"type": "object", "properties": {}},
            "outputSchema": {"type": "object", "properties": {"records": {"type": "array", "items": record}}, "required": ["records"]}}),
        json!({"name": "record_details", "description": "The details of one customer record: owner, balance and notes.",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0}}, "required": ["id"]},
            "outputSchema": {"type": "object", "properties": {"id": {"type": "integer"}, "owner": {"type": "string"},
                "balance": {"type": "number"}, "notes": {"type": "string"}}, "required": ["id", "owner", "balance", "notes"]}}),
    ]
}

/// Record `i` of `--records`.
fn record(i: usize) -> Value {
    const REGIONS: [&str; 4] = ["north", "south", "east", "west"];
    let status = if i % 40 == 7 {
        "overdue"
    } else if i.is_multiple_of(3) {
        "paid"
    } else {
        "open"
    };
    json!({"id": i, "name": format!("Customer {i:03}"), "region": REGIONS[i % 4], "status": status})
}

/// The answer of a `--records` tool: the structured value, also as its text.
fn records_result(name: &str, args: &Value, count: usize) -> Option<Value> {
    let value = match name {
        "list_records" => json!({"records": (0..count).map(record).collect::<Vec<_>>()}),
        "record_details" => match args.get("id").and_then(Value::as_u64).map(|id| id as usize) {
            Some(id) if id < count => json!({"id": id, "owner": format!("owner{}@example.com", id % 7),
                "balance": (id * 37 % 1000) as f64 + 0.5, "notes": format!("Customer {id:03} was last contacted in week {}.", id % 52)}),
            _ => return Some(error_result(format!("no record {}", args.get("id").unwrap_or(&Value::Null)))),
        },
        _ => return None,
    };
    Some(json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value}))
}

/// The answer of a `--structured` tool.
fn structured_result(name: &str) -> Option<Value> {
    let good = json!({"temperature": 22.5, "conditions": "sunny"});
    Some(match name {
        "weather" => json!({"content": [{"type": "text", "text": "Sunny, 22.5 degrees."}], "structuredContent": good}),
        "weather_quiet" => json!({"content": [], "structuredContent": good}),
        "weather_bad" => {
            json!({"content": [{"type": "text", "text": "hot"}], "structuredContent": {"temperature": "hot"}})
        }
        _ => return None,
    })
}

/// `idle`: a child of `fork_bomb`; waits for its stdin (a pipe the server holds) to close.
fn idle() -> ! {
    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    std::process::exit(0)
}

/// `as-nobody [--no-userns] -- PROGRAM ARGS`: the tests' stand-in for a user other than root.
/// As root, hands the paths after `--write` in the command line (the launcher's writable
/// places: the test's directories, the private temporary one) to nobody (65534) and becomes
/// nobody; with `--no-userns`, also enters a user namespace of its own that may hold no other
/// (as where user namespaces are disabled); then runs PROGRAM.
fn as_nobody(args: Vec<String>) -> ! {
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! {
        eprintln!("mcp-fixture-server as-nobody: {what}: {e}");
        std::process::exit(125)
    };
    let no_userns = args.first().is_some_and(|a| a == "--no-userns");
    let Some(split) = args.iter().position(|a| a == "--") else {
        fail("usage", &"as-nobody [--no-userns] -- PROGRAM ARGS")
    };
    let command = &args[split + 1..];
    let Some(program) = command.first() else { fail("usage", &"the program is missing") };
    let nobody = nix::unistd::Uid::from_raw(65534);
    let nogroup = nix::unistd::Gid::from_raw(65534);
    if nix::unistd::geteuid().is_root() {
        for pair in command.windows(2).filter(|w| w[0] == "--write") {
            if let Err(e) = nix::unistd::chown(pair[1].as_str(), Some(nobody), Some(nogroup)) {
                fail(&format!("chown {}", pair[1]), &e);
            }
        }
        if let Err(e) = nix::unistd::setgroups(&[]) {
            fail("setgroups", &e);
        }
        if let Err(e) = nix::unistd::setresgid(nogroup, nogroup, nogroup) {
            fail("setresgid", &e);
        }
        if let Err(e) = nix::unistd::setresuid(nobody, nobody, nobody) {
            fail("setresuid", &e);
        }
        // A changed identity leaves the process undumpable, its /proc files root's.
        if let Err(e) = nix::sys::prctl::set_dumpable(true) {
            fail("set_dumpable", &e);
        }
    }
    if no_userns {
        let uid = nix::unistd::getuid();
        let gid = nix::unistd::getgid();
        if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER) {
            fail("unshare", &e);
        }
        for (file, text) in [
            ("/proc/self/uid_map", format!("{uid} {uid} 1")),
            ("/proc/self/setgroups", "deny".to_owned()),
            ("/proc/self/gid_map", format!("{gid} {gid} 1")),
            // No user namespace may be made inside this one.
            ("/proc/sys/user/max_user_namespaces", "0".to_owned()),
        ] {
            if let Err(e) = std::fs::write(file, text) {
                fail(file, &e);
            }
        }
    }
    use std::os::unix::process::CommandExt as _;
    let e = std::process::Command::new(program).args(&command[1..]).exec();
    fail(&format!("exec {program}"), &e)
}

/// `unix_connect`: a pathname socket, or `@name` for an abstract one.
fn unix_connect(path: &str) -> std::io::Result<String> {
    use std::os::linux::net::SocketAddrExt as _;
    use std::os::unix::net::{SocketAddr, UnixStream};
    let addr = match path.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name)?,
        None => SocketAddr::from_pathname(path)?,
    };
    UnixStream::connect_addr(&addr).map(|_| format!("connected to {path}"))
}

/// `linger`: a child of `spawn_child`; reads nothing and waits to be killed.
fn linger() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn hostile_tools() -> Vec<Value> {
    let obj = |props: Value, req: Value| json!({"type": "object", "properties": props, "required": req});
    vec![
        json!({"name": "hostile", "description": "Send hostile text: as an error answer (error), a log notification (log), a line that is not JSON (stdout), the result (result), or stderr before dying (crash).", "inputSchema": obj(json!({"where": {"type": "string"}}), json!(["where"]))}),
        json!({"name": "traceback", "description": "Write lines numbered lines to stderr and exit at once.", "inputSchema": obj(json!({"lines": {"type": "integer"}}), json!(["lines"]))}),
        json!({"name": "big", "description": "Answer with a text of bytes bytes (the id last with id_last).", "inputSchema": obj(json!({"bytes": {"type": "integer"}, "id_last": {"type": "boolean"}}), json!(["bytes"]))}),
        json!({"name": "spawn_child", "description": "Start a child process that lingers in our process group; its pid is the result.", "inputSchema": {"type": "object"}}),
    ]
}

fn snoop_tools() -> Vec<Value> {
    let obj = |props: Value, req: Value| json!({"type": "object", "properties": props, "required": req});
    vec![
        json!({"name": "read_file", "description": "Read a file; the result is its text or the OS error.", "inputSchema": obj(json!({"path": {"type": "string"}}), json!(["path"]))}),
        json!({"name": "write_file", "description": "Write text to a file; the result is the OS error, if any.", "inputSchema": obj(json!({"path": {"type": "string"}, "text": {"type": "string"}}), json!(["path", "text"]))}),
        json!({"name": "connect", "description": "Open a TCP connection to 127.0.0.1:port and close it.", "inputSchema": obj(json!({"port": {"type": "integer"}}), json!(["port"]))}),
        json!({"name": "udp_send", "description": "Send a UDP datagram to 127.0.0.1:port.", "inputSchema": obj(json!({"port": {"type": "integer"}}), json!(["port"]))}),
        json!({"name": "unix_connect", "description": "Connect to a UNIX socket: a path, or @name for an abstract one.", "inputSchema": obj(json!({"path": {"type": "string"}}), json!(["path"]))}),
        json!({"name": "cwd", "description": "The server's working directory.", "inputSchema": {"type": "object"}}),
        json!({"name": "close_stdout", "description": "Answer, then close stdout and stay alive (reading stdin).", "inputSchema": {"type": "object"}}),
        json!({"name": "fork_bomb", "description": "Start idle child processes until one fails or max are running.", "inputSchema": obj(json!({"max": {"type": "integer"}}), json!(["max"]))}),
    ]
}

/// The children of `fork_bomb` and the pipe that keeps them alive (they exit when we do).
#[derive(Default)]
struct Bomb {
    children: Vec<std::process::Child>,
    keep_alive: Option<std::io::PipeWriter>,
}

fn fork_bomb(bomb: &Mutex<Bomb>, max: u64) -> Value {
    let Ok(mut bomb) = bomb.lock() else { return error_result("lock poisoned") };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return error_result(format!("current_exe: {e}")),
    };
    let reader = match bomb.keep_alive {
        Some(_) => None,
        None => match std::io::pipe() {
            Ok((reader, writer)) => {
                bomb.keep_alive = Some(writer);
                Some(reader)
            }
            Err(e) => return error_result(format!("pipe: {e}")),
        },
    };
    let Some(reader) = reader else { return error_result("fork_bomb runs once") };
    let before = bomb.children.len();
    let mut failure = None;
    while (bomb.children.len() as u64) < max {
        let spawned = reader.try_clone().and_then(|stdin| {
            std::process::Command::new(&exe)
                .arg("idle")
                .stdin(stdin)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
        });
        match spawned {
            Ok(child) => bomb.children.push(child),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let spawned = bomb.children.len() - before;
    match failure {
        Some(e) => text_result(format!("spawned {spawned} processes, then: {e}")),
        None => text_result(format!("spawned {spawned} processes")),
    }
}

fn io_result(result: std::io::Result<String>) -> Value {
    match result {
        Ok(text) => text_result(text),
        Err(e) => error_result(e.to_string()),
    }
}

/// The resources of `content`: text, a blob (PNG bytes in base64) and hostile text.
fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "fixture://readme", "name": "readme", "title": "Read me", "description": "A short text.", "mimeType": "text/plain"}),
        json!({"uri": "fixture://logo.png", "name": "logo", "description": "Eight bytes of PNG.", "mimeType": "image/png", "size": 8}),
        json!({"uri": "fixture://hostile", "name": "hostile", "description": HOSTILE, "mimeType": "text/plain"}),
        json!({"uri": "fixture://big", "name": "big", "description": "One mebibyte of text.", "mimeType": "text/plain"}),
    ]
}

/// The text of `fixture://readme`.
const README: &str = "Fixture readme.\nSecond line.\n";
/// The bytes of `fixture://logo.png` in base64 (the PNG signature).
const LOGO: &str = "iVBORw0KGgo=";

fn templates() -> Vec<Value> {
    vec![
        json!({"uriTemplate": "fixture://notes/{name}", "name": "note", "description": "A note by name.", "mimeType": "text/plain"}),
    ]
}

fn prompts() -> Vec<Value> {
    vec![
        json!({"name": "greet", "title": "Greeting", "description": "Greet someone.", "arguments": [
            {"name": "name", "description": "Who to greet.", "required": true},
            {"name": "style", "description": "How (formal or casual)."}]}),
        json!({"name": "review", "description": "A review conversation.", "arguments": [
            {"name": "code", "required": true}]}),
        json!({"name": "hostile", "description": HOSTILE}),
    ]
}

/// The tools of `content --mutable`: each changes a list and announces it, and `counters`
/// says how many requests of each method the server received (so a test sees what was
/// re-listed).
fn mutable_tools() -> Vec<Value> {
    let named = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    vec![
        json!({"name": "add_resource", "description": "Add resource fixture://added/NAME and announce resources/list_changed.", "inputSchema": named}),
        json!({"name": "add_prompt", "description": "Add prompt NAME and announce prompts/list_changed.", "inputSchema": named}),
        json!({"name": "add_tool", "description": "Register a tool and announce list_changed.", "inputSchema": named}),
        json!({"name": "counters", "description": "How many requests of each method arrived, as a JSON object.", "inputSchema": {"type": "object"}}),
    ]
}

/// `resources/read` of `content`: the contents, or a JSON-RPC error (code, message).
fn read_resource(uri: &str) -> Result<Value, (i64, String)> {
    let text = |text: String| Ok(json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}));
    match uri {
        "fixture://readme" => text(README.to_owned()),
        "fixture://logo.png" => Ok(json!({"contents": [{"uri": uri, "mimeType": "image/png", "blob": LOGO}]})),
        "fixture://hostile" => text(HOSTILE.to_owned()),
        "fixture://big" => text("x".repeat(1024 * 1024)),
        _ => match uri.strip_prefix("fixture://notes/").or_else(|| uri.strip_prefix("fixture://added/")) {
            Some(name) if !name.is_empty() => text(format!("Note {name}.")),
            _ => Err((-32002, format!("Resource not found: {uri}"))),
        },
    }
}

/// `prompts/get` of `content`: the result, or a JSON-RPC error (code, message).
fn get_prompt(params: &Value) -> Result<Value, (i64, String)> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
    let arg = |key: &str| params.get("arguments").and_then(|a| a.get(key)).and_then(Value::as_str).map(str::to_owned);
    let user = |text: String| json!({"role": "user", "content": {"type": "text", "text": text}});
    match name {
        "greet" => {
            let who = arg("name").ok_or((-32602, "greet needs the argument \"name\"".to_owned()))?;
            let style = arg("style").unwrap_or_else(|| "casual".to_owned());
            Ok(json!({"description": "A greeting.", "messages": [user(format!("Greet {who}, {style}."))]}))
        }
        "review" => {
            let code = arg("code").ok_or((-32602, "review needs the argument \"code\"".to_owned()))?;
            Ok(json!({"messages": [
                user(format!("Review this code:\n{code}")),
                {"role": "assistant", "content": {"type": "text", "text": "What should I look for?"}},
            ]}))
        }
        "hostile" => Ok(json!({"messages": [user(HOSTILE.to_owned())]})),
        other => Err((-32602, format!("Unknown prompt: {other}"))),
    }
}

/// `completion/complete` of `content`: values of the argument that start with what was typed
/// (case-insensitive), or a JSON-RPC error. `greet`'s `name` suggests other names once `style`
/// is `formal` (the context of 2025-06-18 on).
fn complete(params: &Value) -> Result<Value, (i64, String)> {
    let reference = params.get("ref").unwrap_or(&Value::Null);
    let argument = params.get("argument").and_then(|a| a.get("name")).and_then(Value::as_str).unwrap_or_default();
    let typed = params.get("argument").and_then(|a| a.get("value")).and_then(Value::as_str).unwrap_or_default();
    let formal = params.pointer("/context/arguments/style").and_then(Value::as_str) == Some("formal");
    let candidates: &[&str] = match (
        reference.get("type").and_then(Value::as_str),
        reference.get("name").or_else(|| reference.get("uri")).and_then(Value::as_str),
        argument,
    ) {
        (Some("ref/prompt"), Some("greet"), "name") if formal => &["Dr. Ada Lovelace", "Dr. Alan Turing"],
        (Some("ref/prompt"), Some("greet"), "name") => &["Ada", "Alan", "Grace"],
        (Some("ref/prompt"), Some("greet"), "style") => &["casual", "formal"],
        (Some("ref/resource"), Some("fixture://notes/{name}"), "name") => &["ideas", "todo"],
        (Some("ref/prompt" | "ref/resource"), _, _) => &[],
        _ => return Err((-32602, "completion/complete needs ref/prompt or ref/resource".to_owned())),
    };
    let lower = typed.to_lowercase();
    let values: Vec<&str> = candidates.iter().copied().filter(|c| c.to_lowercase().starts_with(&lower)).collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}

struct Server {
    bomb: Mutex<Bomb>,
    opts: Options,
    out: Out,
    tools: Mutex<Vec<Value>>,
    cancelled: Mutex<HashSet<String>>,
    next_server_id: AtomicI64,
    waiting: Mutex<HashMap<i64, mpsc::Sender<Value>>>,
    /// Calls running on threads of their own, for `gather` and `--linger`.
    in_flight: Mutex<usize>,
    in_flight_changed: Condvar,
    /// `gather`: how many calls have arrived so far.
    gathered: Mutex<usize>,
    gathered_changed: Condvar,
    listed_once: std::sync::atomic::AtomicBool,
    /// `content --mutable`: resources and prompts added by `add_resource` / `add_prompt`.
    added_resources: Mutex<Vec<Value>>,
    added_prompts: Mutex<Vec<Value>>,
    /// Requests received, by method (`counters`).
    counts: Mutex<HashMap<String, u64>>,
}

impl Server {
    fn respond(&self, id: &Value, result: Value, flush: bool) {
        send(&self.out, &json!({"jsonrpc": "2.0", "id": id, "result": result}), flush);
    }

    fn respond_error(&self, id: &Value, code: i64, message: &str) {
        send(&self.out, &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}), true);
    }

    fn ask_client(&self, method: &str, params: Value) -> Value {
        self.ask_client_within(method, params, Duration::from_secs(10))
    }

    /// Asks the client and waits `limit` for the answer (a person filling a form takes longer).
    fn ask_client_within(&self, method: &str, params: Value, limit: Duration) -> Value {
        let id = self.next_server_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(id, tx);
        }
        send(
            &self.out,
            &json!({"jsonrpc": "2.0", "id": format!("srv-{id}"), "method": method, "params": params}),
            true,
        );
        rx.recv_timeout(limit).unwrap_or_else(|_| json!({"timeout": true}))
    }

    fn list_tools(&self, id: &Value, params: &Value) {
        let tools = self.tools.lock().map(|t| t.clone()).unwrap_or_default();
        let start: usize = params.get("cursor").and_then(Value::as_str).and_then(|c| c.parse().ok()).unwrap_or(0);
        if self.opts.fail_relist && start > 0 && self.listed_once.load(Ordering::SeqCst) {
            self.respond_error(id, -32603, "listing failed on purpose (--fail-relist)");
            return;
        }
        let end = start.saturating_add(self.opts.page_size).min(tools.len());
        let page: Vec<Value> = tools.get(start..end).map(<[Value]>::to_vec).unwrap_or_default();
        let mut result = json!({"tools": page});
        if self.opts.repeat_cursor {
            result["nextCursor"] = json!("0");
        } else if self.opts.endless {
            result["nextCursor"] = json!((start + 1).to_string());
        } else if end < tools.len() {
            result["nextCursor"] = json!(end.to_string());
        } else {
            self.listed_once.store(true, Ordering::SeqCst);
        }
        self.respond(id, result, true);
    }

    /// One page of a `content` list (`key` is `resources`, `resourceTemplates` or `prompts`),
    /// in pages of `--page-size`.
    fn list_page(&self, id: &Value, params: &Value, key: &str, items: &[Value]) {
        let start: usize = params.get("cursor").and_then(Value::as_str).and_then(|c| c.parse().ok()).unwrap_or(0);
        let end = start.saturating_add(self.opts.page_size).min(items.len());
        let page: Vec<Value> = items.get(start..end).map(<[Value]>::to_vec).unwrap_or_default();
        let mut result = json!({ key: page });
        if end < items.len() {
            result["nextCursor"] = json!(end.to_string());
        }
        self.respond(id, result, true);
    }

    fn answer(&self, id: &Value, outcome: Result<Value, (i64, String)>) {
        match outcome {
            Ok(result) => self.respond(id, result, true),
            Err((code, message)) => self.respond_error(id, code, &message),
        }
    }

    fn call_tool(self: &Arc<Self>, id: Value, params: Value) {
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let args = params.get("arguments").cloned().unwrap_or(json!({}));
        let token = params.get("_meta").and_then(|m| m.get("progressToken")).cloned();
        if self.opts.mode == Mode::Crash {
            crash();
        }
        if self.opts.stateless && self.opts.elicit && (name == "ask_form" || name == "ask_url") {
            // 2026-07-28: ask through the result, and answer the retry that carries the input.
            let result = match params.get("inputResponses").and_then(|r| r.get("answer")) {
                Some(answer) => text_result(answer.to_string()),
                None => {
                    let hostile = args.get("hostile").and_then(Value::as_bool).unwrap_or(false);
                    let request = if name == "ask_form" { form_request(hostile) } else { url_request(&args) };
                    json!({"resultType": "input_required", "requestState": "fixture",
                        "inputRequests": {"answer": {"method": "elicitation/create", "params": request}}})
                }
            };
            self.respond(&id, result, true);
            return;
        }
        if matches!(self.opts.mode, Mode::Slow | Mode::Gather) || name == "sleep" || name.starts_with("ask_") {
            let me = Arc::clone(self);
            *lock(&self.in_flight) += 1;
            std::thread::spawn(move || {
                me.call_tool_blocking(id, &name, &args, token, false);
                *lock(&me.in_flight) -= 1;
                me.in_flight_changed.notify_all();
            });
            return;
        }
        self.call_tool_blocking(id, &name, &args, token, true);
    }

    fn call_tool_blocking(&self, id: Value, name: &str, args: &Value, token: Option<Value>, inline: bool) {
        if self.opts.mode == Mode::Slow {
            std::thread::sleep(Duration::from_millis(self.opts.delay_ms));
        }
        if self.opts.mode == Mode::Gather
            && let Err(arrived) = self.gather()
        {
            let text = format!("only {arrived} of {} calls were in flight together", self.opts.peers);
            self.respond(&id, error_result(text), true);
            return;
        }
        let result = match name {
            "echo" => match args.get("text").and_then(Value::as_str) {
                Some(t) => text_result(t),
                None => error_result("echo needs a string argument \"text\""),
            },
            "add" => match (args.get("a").and_then(Value::as_f64), args.get("b").and_then(Value::as_f64)) {
                (Some(a), Some(b)) => text_result((a + b).to_string()),
                _ => error_result("add needs numbers a and b"),
            },
            "sleep" => {
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
                let steps = 10u64;
                for i in 1..=steps {
                    std::thread::sleep(Duration::from_millis(ms / steps));
                    if self.cancelled.lock().map(|c| c.contains(&id.to_string())).unwrap_or(false) {
                        return; // cancelled requests get no response
                    }
                    if let Some(token) = &token {
                        send(&self.out, &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": i, "total": steps, "message": format!("step {i}")}}), true);
                    }
                }
                text_result(format!("slept {ms} ms"))
            }
            "env" => {
                let key = args.get("name").and_then(Value::as_str).unwrap_or_default();
                text_result(std::env::var(key).unwrap_or_else(|_| "<unset>".to_owned()))
            }
            "crash" => crash(),
            "whoami" => text_result(format!("pid {}", std::process::id())),
            "add_tool" => {
                let new = args.get("name").and_then(Value::as_str).unwrap_or("added").to_owned();
                // A name already registered changes nothing but is still announced: what a
                // server that sends list_changed too eagerly looks like.
                if let Ok(mut t) = self.tools.lock()
                    && !t.iter().any(|tool| tool["name"] == new.as_str())
                {
                    t.push(json!({"name": new, "inputSchema": {"type": "object"}}));
                }
                send(&self.out, &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}), true);
                text_result(format!("added {new}"))
            }
            "add_resource" | "add_prompt" if self.opts.mutable => {
                let new = args.get("name").and_then(Value::as_str).unwrap_or("added").to_owned();
                let (list, item, method) = if name == "add_resource" {
                    let uri = format!("fixture://added/{new}");
                    (&self.added_resources, json!({"uri": uri, "name": new, "mimeType": "text/plain"}), "resources")
                } else {
                    (&self.added_prompts, json!({"name": new, "description": "An added prompt."}), "prompts")
                };
                lock(list).push(item);
                send(&self.out, &json!({"jsonrpc": "2.0", "method": format!("notifications/{method}/list_changed")}), true);
                text_result(format!("added {new}"))
            }
            "counters" if self.opts.mutable => {
                let counts = lock(&self.counts).clone();
                text_result(json!(counts).to_string())
            }
            "ask_roots" => text_result(self.ask_client("roots/list", json!({})).to_string()),
            "ask_sampling" => text_result(
                self.ask_client(
                    "sampling/createMessage",
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}),
                )
                .to_string(),
            ),
            "ask_elicitation" => text_result(
                self.ask_client(
                    "elicitation/create",
                    json!({"message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}),
                )
                .to_string(),
            ),
            "ask_form" if self.opts.elicit => {
                if let Some(token) = &token {
                    // A bar on the client's terminal before the form: it must make way for it.
                    send(&self.out, &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": 1, "total": 2, "message": "asking"}}), true);
                }
                let hostile = args.get("hostile").and_then(Value::as_bool).unwrap_or(false);
                let answer = self.ask_client_within("elicitation/create", form_request(hostile), ASK_PERSON_LIMIT);
                text_result(answer.to_string())
            }
            "ask_url" if self.opts.elicit => {
                text_result(self.ask_client_within("elicitation/create", url_request(args), ASK_PERSON_LIMIT).to_string())
            }
            "read_file" if self.opts.mode == Mode::Snoop => {
                io_result(std::fs::read_to_string(args.get("path").and_then(Value::as_str).unwrap_or_default()))
            }
            "write_file" if self.opts.mode == Mode::Snoop => {
                let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
                let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
                io_result(std::fs::write(path, text).map(|()| format!("wrote {path}")))
            }
            "connect" if self.opts.mode == Mode::Snoop => {
                let port = args.get("port").and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok()).unwrap_or(0);
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
                io_result(
                    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map(|_| format!("connected to {addr}")),
                )
            }
            "udp_send" if self.opts.mode == Mode::Snoop => {
                let port = args.get("port").and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok()).unwrap_or(0);
                let sent = std::net::UdpSocket::bind(("0.0.0.0", 0))
                    .and_then(|socket| socket.send_to(b"snoop", ("127.0.0.1", port)))
                    .map(|n| format!("sent {n} bytes to 127.0.0.1:{port}"));
                io_result(sent)
            }
            "unix_connect" if self.opts.mode == Mode::Snoop => {
                io_result(unix_connect(args.get("path").and_then(Value::as_str).unwrap_or_default()))
            }
            "cwd" if self.opts.mode == Mode::Snoop => {
                io_result(std::env::current_dir().map(|d| d.to_string_lossy().into_owned()))
            }
            "close_stdout" if self.opts.mode == Mode::Snoop => {
                self.respond(&id, text_result("closing stdout"), true);
                // Every later write goes nowhere; the host sees the end of our stdout now.
                if let Ok(mut out) = self.out.lock() {
                    let _ = out.flush();
                    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
                        let _ = nix::unistd::dup2_stdout(&null);
                    }
                }
                return;
            }
            "fork_bomb" if self.opts.mode == Mode::Snoop => {
                fork_bomb(&self.bomb, args.get("max").and_then(Value::as_u64).unwrap_or(100))
            }
            "hostile" if self.opts.mode == Mode::Hostile => {
                match args.get("where").and_then(Value::as_str).unwrap_or_default() {
                    "error" => {
                        self.respond_error(&id, -32000, HOSTILE);
                        return;
                    }
                    "log" => send(&self.out, &json!({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "error", "logger": HOSTILE, "data": HOSTILE}}), true),
                    "stdout" => {
                        if let Ok(mut w) = self.out.lock() {
                            let _ = writeln!(w, "{HOSTILE}");
                        }
                    }
                    "crash" => {
                        eprintln!("Traceback: {HOSTILE}");
                        eprintln!("{HOSTILE}");
                        std::process::exit(3);
                    }
                    _ => {}
                }
                text_result(HOSTILE)
            }
            "traceback" if self.opts.mode == Mode::Hostile => {
                let n = args.get("lines").and_then(Value::as_u64).unwrap_or(10);
                let mut err = std::io::stderr().lock();
                for i in 1..=n {
                    let _ = writeln!(err, "traceback line {i} of {n}");
                }
                std::process::exit(3);
            }
            "big" if self.opts.mode == Mode::Hostile => {
                let bytes = args.get("bytes").and_then(Value::as_u64).unwrap_or(0) as usize;
                let result = text_result("x".repeat(bytes));
                let line = if args.get("id_last").and_then(Value::as_bool).unwrap_or(false) {
                    format!("{{\"jsonrpc\":\"2.0\",\"result\":{result},\"id\":{id}}}")
                } else {
                    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}")
                };
                if let Ok(mut w) = self.out.lock() {
                    let _ = w.write_all(line.as_bytes());
                    let _ = w.write_all(b"\n");
                    let _ = w.flush();
                }
                return;
            }
            "spawn_child" if self.opts.mode == Mode::Hostile => {
                let mut child = std::process::Command::new(std::env::current_exe().unwrap_or_default());
                child.arg("linger");
                if let Some(marker) = &self.opts.marker {
                    child.args(["--marker", marker]);
                }
                let spawned = child
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn();
                match spawned {
                    Ok(child) => text_result(child.id().to_string()),
                    Err(e) => error_result(format!("spawn: {e}")),
                }
            }
            "stderr" => {
                let n = args.get("lines").and_then(Value::as_u64).unwrap_or(1);
                for i in 0..n {
                    eprintln!("fixture stderr line {i}");
                }
                text_result(format!("wrote {n} lines"))
            }
            other if self.opts.structured && structured_result(other).is_some() => {
                structured_result(other).unwrap_or_default()
            }
            other if self.opts.records > 0 && records_result(other, args, self.opts.records).is_some() => {
                records_result(other, args, self.opts.records).unwrap_or_default()
            }
            other => {
                if self.tools.lock().map(|t| t.iter().any(|x| x["name"] == other)).unwrap_or(false) {
                    text_result(format!("called {other}"))
                } else {
                    self.respond_error(&id, -32602, &format!("Unknown tool: {other}"));
                    return;
                }
            }
        };
        // Inline answers are flushed by the read loop once no more input is buffered.
        self.respond(&id, result, !inline);
    }

    /// `gather`: waits until `peers` calls have arrived; `Err` with how many did if they did
    /// not within [`GATHER_LIMIT`].
    fn gather(&self) -> Result<(), usize> {
        let mut arrived = lock(&self.gathered);
        *arrived += 1;
        self.gathered_changed.notify_all();
        let deadline = Instant::now() + GATHER_LIMIT;
        while *arrived < self.opts.peers {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(*arrived);
            }
            arrived =
                self.gathered_changed.wait_timeout(arrived, left).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0);
        }
        Ok(())
    }

    /// `--linger`: the end of stdin does not end the server while calls are running.
    fn wait_for_calls(&self) {
        let mut running = lock(&self.in_flight);
        while *running > 0 {
            running = self.in_flight_changed.wait(running).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Exits with status 3, saying so on stderr first (tests check that the tail reaches the client).
fn crash() -> ! {
    eprintln!("fixture crashing on purpose");
    std::process::exit(3);
}

/// `--rendezvous DIR`: marks this server as started in `dir` and waits until `peers` have,
/// so servers started one after another would never get past it.
fn rendezvous(dir: &std::path::Path, peers: usize) -> Result<(), String> {
    let me = dir.join(format!("started-{}", std::process::id()));
    std::fs::write(&me, b"").map_err(|e| format!("cannot write {}: {e}", me.display()))?;
    let deadline = Instant::now() + GATHER_LIMIT;
    loop {
        let started = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
        if started >= peers {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("only {started} of {peers} servers started together"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mcp-fixture-server: {e}");
            std::process::exit(2);
        }
    };
    std::thread::sleep(Duration::from_millis(opts.startup_ms));
    let mut tools = if opts.mutable { mutable_tools() } else { base_tools() };
    if opts.mode == Mode::Snoop {
        tools.extend(snoop_tools());
    }
    if opts.mode == Mode::Hostile {
        tools.extend(hostile_tools());
    }
    if opts.structured {
        tools.extend(structured_tools());
    }
    if opts.elicit {
        tools.extend(elicit_tools());
    }
    if opts.records > 0 {
        if opts.records_only {
            tools.clear();
        }
        tools.extend(record_tools());
    }
    let mut log = opts.log.as_deref().and_then(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| eprintln!("--log {path}: {e}"))
            .ok()
    });
    for i in 0..opts.extra_tools {
        tools.push(extra_tool(i, opts.tool_bytes));
    }
    if opts.tag_pid {
        tools.push(
            json!({"name": "whoami", "description": "Say which process answers.", "inputSchema": {"type": "object"}}),
        );
        let pid = std::process::id();
        for tool in &mut tools {
            let description = tool["description"].as_str().unwrap_or_default().to_owned();
            tool["description"] = json!(format!("{description} [pid {pid}]"));
        }
    }
    let server = Arc::new(Server {
        bomb: Mutex::default(),
        out: Arc::new(Mutex::new(BufWriter::with_capacity(64 * 1024, std::io::stdout()))),
        tools: Mutex::new(tools),
        cancelled: Mutex::new(HashSet::new()),
        next_server_id: AtomicI64::new(1),
        waiting: Mutex::new(HashMap::new()),
        in_flight: Mutex::new(0),
        in_flight_changed: Condvar::new(),
        gathered: Mutex::new(0),
        gathered_changed: Condvar::new(),
        listed_once: std::sync::atomic::AtomicBool::new(false),
        added_resources: Mutex::default(),
        added_prompts: Mutex::default(),
        counts: Mutex::default(),
        opts,
    });
    if server.opts.huge_line > 0
        && let Ok(mut w) = server.out.lock()
    {
        {
            let _ = w.write_all(
                b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"",
            );
            let _ = w.write_all(&vec![b'x'; server.opts.huge_line]);
            let _ = w.write_all(b"\"}}\n");
            let _ = w.flush();
        }
    }
    let stdin = std::io::stdin();
    let mut reader = BufReader::with_capacity(64 * 1024, stdin.lock());
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Some(log) = &mut log {
            let _ = log.write_all(line.as_bytes());
            let _ = log.flush();
        }
        let msg: Value = match serde_json::from_str(line.trim()) {
            Ok(v) => v,
            Err(_) => {
                send(
                    &server.out,
                    &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
                    true,
                );
                continue;
            }
        };
        // Flush only when no more input is already buffered, so pipelined calls batch their writes.
        let flush = reader.buffer().is_empty();
        handle(&server, msg, flush);
    }
    if let Ok(mut w) = server.out.lock() {
        let _ = w.flush();
    }
    if server.opts.linger {
        // Not eprintln!: with the host gone, stderr is a broken pipe, and a server that lingers
        // is one that outlives that too.
        let _ = writeln!(std::io::stderr(), "stdin closed; finishing the calls in flight first");
        server.wait_for_calls();
    }
}

fn handle(server: &Arc<Server>, msg: Value, flush: bool) {
    let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
    let id = msg.get("id").cloned();
    let params = msg.get("params").cloned().unwrap_or(json!({}));
    if server.opts.mode == Mode::Garbage
        && id.is_some()
        && method.is_some()
        && let Ok(mut w) = server.out.lock()
    {
        {
            let _ = w.write_all(b"this is not json\n\n{\"half\": \n[1,2,3]\n{\"jsonrpc\":\"1.0\",\"id\":99}\n");
        }
    }
    if let (Some(method), Some(_)) = (&method, &id) {
        *lock(&server.counts).entry(method.clone()).or_default() += 1;
    }
    match (method.as_deref(), id) {
        (Some("initialize"), Some(id)) => {
            if let Some(dir) = &server.opts.rendezvous
                && let Err(e) = rendezvous(dir, server.opts.peers)
            {
                server.respond_error(&id, -32603, &e);
                return;
            }
            let requested = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("2025-11-25");
            let known = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
            let version = if known.contains(&requested) { requested } else { "2025-11-25" };
            let capabilities = if server.opts.mode == Mode::Content && server.opts.mutable {
                json!({"tools": {"listChanged": true}, "resources": {"listChanged": true}, "prompts": {"listChanged": true}, "completions": {}})
            } else if server.opts.mode == Mode::Content {
                json!({"resources": {}, "prompts": {}, "completions": {}})
            } else {
                json!({"tools": {"listChanged": true}, "logging": {}})
            };
            let mut result = json!({"protocolVersion": version,
                   "capabilities": capabilities,
                   "serverInfo": {"name": "mcp-fixture-server", "version": env!("CARGO_PKG_VERSION")}});
            if let Some(instructions) = &server.opts.instructions {
                result["instructions"] = json!(instructions);
            }
            server.respond(&id, result, true);
        }
        (Some("server/discover"), Some(id)) if server.opts.stateless => {
            let result = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": true}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "mcp-fixture-server", "version": env!("CARGO_PKG_VERSION")}}});
            server.respond(&id, result, true);
        }
        (Some("notifications/initialized"), None) => {
            if server.opts.mode == Mode::ListChanging {
                send(&server.out, &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}), true);
            }
        }
        (Some("notifications/cancelled"), None) => {
            if let (Some(rid), Ok(mut c)) = (params.get("requestId"), server.cancelled.lock()) {
                c.insert(rid.to_string());
            }
        }
        (Some("ping"), Some(id)) => server.respond(&id, json!({}), true),
        (Some("tools/list" | "tools/call"), Some(id)) if server.opts.mode == Mode::Content && !server.opts.mutable => {
            server.respond_error(&id, -32601, "Method not found");
        }
        (Some("tools/list"), Some(id)) => server.list_tools(&id, &params),
        (Some("tools/call"), Some(id)) if server.opts.not_utf8 => {
            if let Ok(mut w) = server.out.lock() {
                let _ = write!(w, r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"caf"#);
                let _ = w.write_all(b"\xe9\"}]}}\n");
                let _ = w.flush();
            }
        }
        (Some("tools/call"), Some(id)) => server.call_tool(id, params),
        (Some(method @ ("resources/list" | "resources/templates/list" | "prompts/list")), Some(id))
            if server.opts.mode == Mode::Content =>
        {
            let (key, items) = match method {
                "resources/list" => ("resources", [resources(), lock(&server.added_resources).clone()].concat()),
                "resources/templates/list" => ("resourceTemplates", templates()),
                _ => ("prompts", [prompts(), lock(&server.added_prompts).clone()].concat()),
            };
            server.list_page(&id, &params, key, &items);
        }
        (Some("resources/read"), Some(id)) if server.opts.mode == Mode::Content => {
            let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default();
            server.answer(&id, read_resource(uri));
        }
        (Some("prompts/get"), Some(id)) if server.opts.mode == Mode::Content => server.answer(&id, get_prompt(&params)),
        (Some("completion/complete"), Some(id)) if server.opts.mode == Mode::Content => {
            server.answer(&id, complete(&params));
        }
        (Some(_), Some(id)) => server.respond_error(&id, -32601, "Method not found"),
        (Some(_), None) => {}
        (None, Some(id)) => {
            // A response to one of our requests.
            let key = id.as_str().and_then(|s| s.strip_prefix("srv-")).and_then(|n| n.parse::<i64>().ok());
            let waiter = key.and_then(|k| server.waiting.lock().ok().and_then(|mut w| w.remove(&k)));
            if let Some(tx) = waiter {
                let answer = msg.get("result").or_else(|| msg.get("error")).cloned().unwrap_or(Value::Null);
                let _ = tx.send(answer);
            }
        }
        (None, None) => {}
    }
    let _ = flush_if(server, flush);
}

fn flush_if(server: &Server, flush: bool) -> std::io::Result<()> {
    if flush && let Ok(mut w) = server.out.lock() {
        w.flush()?;
    }
    Ok(())
}
