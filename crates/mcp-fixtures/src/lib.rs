//! Fixture MCP servers written in Rust, for hermetic tests and benchmarks.
//!
//! The binary `mcp-fixture-server MODE [FLAGS]` speaks newline-delimited JSON-RPC on stdio.
//! Every mode but `content` offers the same tools; the mode changes how the server misbehaves:
//!
//! | mode | behaviour |
//! |---|---|
//! | `echo` | answers quickly; the benchmark's server |
//! | `slow` | every call waits `--delay-ms` (default 200) before answering |
//! | `crash` | exits with status 3 on the first `tools/call` |
//! | `paginate` | `tools/list` in pages of `--page-size` (default 2); `--repeat-cursor` and `--endless` misbehave |
//! | `list-changing` | sends `notifications/tools/list_changed` after `initialized` and whenever `add_tool` runs |
//! | `garbage` | writes non-JSON lines, invalid JSON-RPC and, with `--huge-line BYTES`, one oversize line before answering |
//! | `snoop` | adds `read_file {path}`, `write_file {path,text}`, `connect {port}` (TCP to 127.0.0.1), `udp_send {port}`, `unix_connect {path}` (`@name`: abstract), `fork_bomb {max}`, which report the OS error they get, `cwd`, and `close_stdout` (answers, then closes stdout and stays alive): what a confined server may and may not do |
//! | `gather` | every call waits until `--peers N` (default 2) calls are in flight together, else fails (after 60 s) |
//! | `content` | declares only `resources`, `prompts` and `completions` (no tools: `tools/list` is "Method not found"); see below |
//! | `as-nobody [--no-userns] -- PROGRAM ARGS` | not a server: as root, hands the paths after `--write` on the command line to nobody (65534), becomes nobody and (with `--no-userns`) enters a user namespace that may hold no other, then runs PROGRAM: the sandbox tests' non-root user, with and without user namespaces |
//! | `hostile` | adds `hostile {where}` (terminal escapes, OSC 52, CR, C1 and bidi overrides as an `error` answer, a `log` notification, a `stdout` line that is not JSON, the `result`, or on stderr before a `crash`), `traceback {lines}` (stderr lines, then exit at once), `big {bytes,id_last}` (an answer of that size, its id first or last) and `spawn_child` (a child that lingers in the server's process group) |
//!
//! Flags of every mode, so tests wait for what the server saw rather than for a time:
//! `--log FILE` appends every line received to FILE; `--linger` keeps the server running
//! after the end of its stdin until its calls in flight are done (as a busy server does; the
//! `linger` mode instead ignores the end of stdin altogether); `--rendezvous DIR` answers
//! `initialize` only once `--peers N` servers have started with the same directory (so only
//! servers started together get past it); `--marker TEXT` is
//! only there to be found in the command line (a `spawn_child` child carries it too);
//! `--die-at-start` writes hostile text to stderr and exits with status 3 at once;
//! `--startup-ms MS` waits before serving (a slow-starting interpreter); `--tag-pid` adds a
//! `whoami` tool answering `pid N` and ends every description with `[pid N]` (which process
//! answered, and which one the model was shown); `--fail-relist` fails every `tools/list` after
//! the first at its second page (a re-listing that fails halfway). `add_tool` with a name that
//! exists changes nothing but still announces `list_changed`. `--structured` adds tools with an
//! output schema: `weather` (text and matching structured content), `weather_quiet` (matching
//! structured content, no text) and `weather_bad` (structured content that does not match).
//! `--records N` adds `list_records` (N customer records, one in 40 from the 8th `overdue`) and
//! `record_details {id}` (owner, balance, notes), both structured with an output schema, for
//! code mode's tests and benchmark (`--records-only`: those two alone).
//! `--elicit` adds `ask_form {hostile?}` (an `elicitation/create` form with every field type:
//! strings with length bounds and the `email`, `date` and `uri` formats, an integer and a
//! number with bounds, a boolean, single-select `enum` and `oneOf`, a multi-select array; with
//! `hostile`, terminal escapes in the message and a title; with a progress token, one progress
//! notification `1/2 asking` first) and `ask_url {url?}` (a URL-mode
//! elicitation); both wait 120 s for the answer and return it as text. `--stateless` also
//! answers `server/discover` (2026-07-28), and then `ask_form` and `ask_url` ask through an
//! `input_required` result and return the `inputResponses` of the retry. `--not-utf8` answers
//! every `tools/call` with a line that is not UTF-8.
//! `--extra-tools N` adds the tools `extra_0` .. `extra_{N-1}`, each of about `--tool-bytes B`
//! bytes of JSON when that is given (the catalog benchmark's 5,000 tools).
//!
//! Tools: `echo {text}`, `add {a,b}`, `sleep {ms}` (progress when a token is given, stops on
//! cancel), `env {name}`, `crash` (a line on stderr, then exit status 3), `add_tool {name}`
//! (registers the tool unless it exists, and announces `list_changed` either way), `ask_roots`,
//! `ask_sampling`, `ask_elicitation` (the server asks the client and returns the answer as text),
//! `stderr {lines}`.
//!
//! `content` offers the resources `fixture://readme` (text), `fixture://logo.png` (a blob),
//! `fixture://hostile` (terminal escapes in its description and text) and `fixture://big` (1
//! MiB of text); the template `fixture://notes/{name}` (any name reads `Note NAME.`); the prompts
//! `greet {name, style?}`, `review {code}` (a user and an assistant message) and `hostile`. Its
//! lists come in pages of `--page-size`; an unknown URI is error -32002. `completion/complete`
//! suggests `greet`'s `name` (`Ada`, `Alan`, `Grace`; titled ones when the context has
//! `style=formal`) and `style` (`casual`, `formal`), and the template's `name` (`ideas`,
//! `todo`): the values starting with what was typed, ignoring case. `content --mutable`
//! also declares `tools` and `listChanged` for tools, resources and prompts, with the tools
//! `add_resource {name}` (adds `fixture://added/NAME` and announces
//! `resources/list_changed`), `add_prompt {name}` (announces `prompts/list_changed`),
//! `add_tool {name}` and `counters` (how many requests of each method arrived, as a JSON
//! object: what a test counts re-listings with). `--instructions TEXT` (any mode) puts TEXT
//! in the initialize result's `instructions`.
//!
//! [`conformance`] is a server of another kind: everything the official conformance suite's
//! server scenarios ask of a server (their tools, resources, template, prompts, logging,
//! completions, subscriptions, progress, sampling and elicitation requests during a call),
//! over stdio and Streamable HTTP, as the binary `mcp-fixture-conformance [--http ADDR]`: the
//! upstream the gateway's conformance run fronts, and the baseline it is compared with.
//!
//! [`http`] is an MCP server over HTTP with switchable faults, for the HTTP transports' tests
//! (in-process) and, as `mcp-fixture-http-server`, by hand; with [`oauth`] it is also an OAuth
//! 2.1 authorization server and `/mcp` a protected resource, for OAuth client tests.
//!
//! [`wait_until`] is how tests wait for something to happen (a request seen, a process gone)
//! instead of sleeping for a time that a loaded machine may not honour.
//!
//! This library part also finds the binaries tests spawn, building them under plain `cargo
//! test` when they are missing or older than their sources:
//!
//! ```no_run
//! let server = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}"));
//! assert!(server.ends_with("mcp-fixture-server"));
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

mod binaries;
pub mod conformance;
pub mod http;
pub mod oauth;
pub mod ws;

pub use binaries::build_command;

/// Where the fixture server binary `mcp-fixture-server` is: at `MCP_FIXTURE_SERVER` when that
/// is set, else in the running test executable's target directory (`target/<profile>/`).
///
/// Under cargo (plain `cargo test`), a binary that is missing or older than its sources is
/// built first, once for every binary tests spawn ([`build_command`]); test processes that start
/// together build once. Without cargo, or when the build fails, the error is one line that says
/// what was wrong and the command that mends it.
pub fn server_binary() -> Result<PathBuf, String> {
    binaries::locate(binaries::SERVER)
}

/// Where the conformance server `mcp-fixture-conformance` is: at `MCP_FIXTURE_CONFORMANCE` when
/// that is set, else found (and built) like [`server_binary`].
pub fn conformance_binary() -> Result<PathBuf, String> {
    binaries::locate(binaries::CONFORMANCE)
}

/// Where the sandbox launcher `mcp-sandbox-launch` (of `mcp-sandbox`) is: at
/// `MCP_SANDBOX_LAUNCHER` when that is set, else found (and built) like [`server_binary`].
pub fn launcher_binary() -> Result<PathBuf, String> {
    binaries::locate(binaries::LAUNCHER)
}

/// Variables a user sets for their package registry, proxy or certificates: the interop tests
/// hand those they have to a server that downloads (its environment is otherwise the
/// sandbox's allowlist).
pub const REGISTRY_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "PIP_INDEX_URL",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "npm_config_registry",
    "NPM_CONFIG_REGISTRY",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
];

/// How long a test waits for an event before calling it missing: long, because a loaded
/// machine can be slow; an event that happens ends the wait at once.
pub const EVENT_DEADLINE: Duration = Duration::from_secs(30);

/// How often [`wait_until`] looks again.
const POLL: Duration = Duration::from_millis(5);

/// Waits until `ready` returns true, looking again every few milliseconds, for at most
/// `deadline`; whether it became true. Assert on the result, naming what was awaited:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let done = Arc::new(AtomicBool::new(false));
/// let flag = Arc::clone(&done);
/// tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
/// let seen = mcp_fixtures::wait_until(mcp_fixtures::EVENT_DEADLINE, || done.load(Ordering::SeqCst)).await;
/// assert!(seen, "the task ran");
/// # }
/// ```
pub async fn wait_until(deadline: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`wait_until`] for a test without an async runtime (it blocks the thread).
pub fn wait_until_blocking(deadline: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(POLL);
    }
}
