//! The stdio adapter: a child process speaking newline-delimited JSON on stdin/stdout.
//!
//! The child gets a small allowlisted environment plus what its config sets, runs in its own
//! process group, and is always reaped: on `close` (stdin closed, wait, SIGTERM, wait, SIGKILL)
//! and on drop (SIGKILL to the group; tokio reaps the child in the background). Once the
//! server has exited, politely or not, what is left of its process group (children it started
//! and did not stop) gets SIGTERM and, after the grace period, SIGKILL.
//!
//! An answer longer than the size limit is not read whole: its id is read from its ends
//! ([`mcp_protocol::oversize_response_id`]) and that request fails at once. A crash report
//! carries the server's last stderr lines, read to the end of its stderr.
//!
//! A server with a [`StdioSandbox`] is started through the sandbox launcher, which confines
//! itself and then runs the server; the launcher's report of a failure before that is the
//! transport's first line, read here as a start failure. The facts the policy needs are
//! gathered here ([`mcp_sandbox::probe`]); a working directory the sandbox cannot grant (the
//! host was started in HOME) gives way to a private one ([`StdioTransport::working_dir`]) inside
//! the server's private temporary directory (`private_temp`: its `TMPDIR`). When a
//! confined server fails, the reason says that it ran confined and what would let it run
//! ([`mcp_sandbox::diagnose`] reads its stderr).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcp_client::{
    Connector, DirectWrite, Inbound, Opened, ProcessExit, StderrSource, Transport, TransportError, TransportSink,
    TransportStream,
};
use mcp_protocol::Outgoing;
use mcp_sandbox::launcher::Launcher;
use mcp_sandbox::{Context, Launch, Policy, Sandbox, WorkingDir};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;
use tokio::process::{Child, ChildStdout, Command};

use crate::DEFAULT_MAX_MESSAGE_BYTES;
use crate::private_temp::TempDir;

/// Default size of the kept stderr tail.
pub const DEFAULT_STDERR_BUFFER_BYTES: usize = 64 * 1024;
const STDERR_LINE_BYTES: usize = 8 * 1024;
/// The read buffer of a server's stdout. Every idle server holds one (zeroed, so resident),
/// so it is small: a longer message is read in several chunks. With 8 KiB instead of 64 KiB,
/// `cargo xtask bench stdio` still measured above the raw pipe client.
const STDOUT_BUFFER_BYTES: usize = 8 * 1024;
/// The read buffer of a server's stderr (rarely busy).
const STDERR_BUFFER_BYTES: usize = 1024;
/// How long the reason for a closed stdout waits for the exit status (a loaded machine may take
/// a while to reap a server that closed its stdout).
const DEATH_REPORT_WAIT: Duration = Duration::from_secs(2);
/// A server that closed its stdout but whose stderr is still open this much later is alive
/// (an exiting process closes both at once): the reason says so without waiting longer.
const ALIVE_WAIT: Duration = Duration::from_millis(500);
/// How many of the last stderr lines a crash report carries, and at most how many bytes.
const CRASH_TAIL_LINES: usize = 20;
const CRASH_TAIL_BYTES: usize = 4 * 1024;
/// How much of each end of an oversize line is kept to find its id.
const PEEK_BYTES: usize = 4 * 1024;

/// Host variables a server inherits; everything else (API keys included) stays with the host
/// unless the server's config sets it.
const ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "TMPDIR",
    "TZ",
    // Windows twins.
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATHEXT",
    "PROGRAMDATA",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
    "COMSPEC",
    "WINDIR",
];

/// Whether a host variable may pass to a server that was not given it explicitly.
pub fn env_allowed(name: &str) -> bool {
    ENV_ALLOWLIST.contains(&name) || name.starts_with("LC_")
}

/// How to start a stdio server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StdioConfig {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it (on top of the allowlisted host variables).
    pub env: BTreeMap<String, String>,
    /// Working directory (the host's when absent).
    pub cwd: Option<PathBuf>,
    /// A longer incoming message is discarded with an error.
    pub max_message_bytes: usize,
    /// How much of stderr to keep for error messages.
    pub stderr_buffer_bytes: usize,
    /// How long `close` waits after closing stdin, and again after SIGTERM.
    pub close_grace: Duration,
    /// A label for logs (the server's configured name).
    pub label: String,
    /// The confinement it runs in; `None`: unconfined. (Boxed: most configs have none.)
    pub sandbox: Option<Box<StdioSandbox>>,
}

/// A stdio server's confinement: what it may do, and the launcher that applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioSandbox {
    /// What the server may do.
    pub sandbox: Sandbox,
    /// The launcher program.
    pub launcher: Launcher,
}

impl StdioConfig {
    /// A config with defaults for everything but the command line.
    pub fn new(command: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let command = command.into();
        Self {
            label: command.clone(),
            command,
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            stderr_buffer_bytes: DEFAULT_STDERR_BUFFER_BYTES,
            close_grace: Duration::from_secs(2),
            sandbox: None,
        }
    }

    /// The environment the child will get.
    pub fn child_env(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> =
            std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(env_allowed)).collect();
        env.extend(self.env.iter().map(|(k, v)| (k.into(), v.into())));
        env
    }

    /// The command line, for messages.
    fn display_command(&self) -> String {
        std::iter::once(self.command.as_str()).chain(self.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
    }
}

/// A confined start, prepared: the launcher's command line, the private temporary directory,
/// where the server works, and what the failure report needs.
struct Confined {
    program: PathBuf,
    args: Vec<OsString>,
    temp: TempDir,
    cwd: PathBuf,
    working_dir: WorkingDir,
    diagnosis: Arc<Diagnosis>,
}

/// What a confined server's failure is read against.
#[derive(Debug)]
struct Diagnosis {
    policy: Policy,
    home: Option<PathBuf>,
}

/// The value the child sees for `name` (the last one set wins, as with `Command::envs`).
fn env_var(env: &[(OsString, OsString)], name: &str) -> Option<OsString> {
    env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

impl StdioConfig {
    /// The child's working directory, absolute.
    fn child_cwd(&self) -> std::io::Result<PathBuf> {
        match &self.cwd {
            Some(dir) => std::path::absolute(dir),
            None => std::env::current_dir(),
        }
    }

    /// The program the child will run, found on the child's PATH (`env`).
    fn resolve_program(&self, env: &[(OsString, OsString)]) -> std::io::Result<PathBuf> {
        mcp_sandbox::probe::find_program(&self.command, env_var(env, "PATH").as_deref(), &self.child_cwd()?)
    }

    /// Prepares a confined start: resolves the program, checks the grants, makes the private
    /// temporary directory, gathers the start's facts, resolves the policy (and makes the
    /// private working directory when the host's cannot be granted), and sets the child's
    /// temporary-directory variables.
    fn confine(&self, sandbox: &StdioSandbox, env: &mut Vec<(OsString, OsString)>) -> Result<Confined, TransportError> {
        let spawn_error = |source: std::io::Error| TransportError::Spawn { command: self.display_command(), source };
        let refused = |e: mcp_sandbox::SandboxError| spawn_error(std::io::Error::other(e));
        let cwd = self.child_cwd().map_err(spawn_error)?;
        let found = mcp_sandbox::probe::find_program(&self.command, env_var(env, "PATH").as_deref(), &cwd)
            .map_err(spawn_error)?;
        let home = env_var(env, "HOME").map(PathBuf::from);
        // Refused with what to write instead (the folders beside the protected one).
        sandbox.sandbox.check(home.as_deref(), &mut mcp_sandbox::probe::list_dir).map_err(refused)?;
        let temp = TempDir::create().map_err(|e| {
            spawn_error(std::io::Error::new(e.kind(), format!("cannot make its temporary directory: {e}")))
        })?;
        let args: Vec<OsString> = self.args.iter().map(OsString::from).collect();
        let context = mcp_sandbox::probe::context(&found, &args, &cwd, self.cwd.is_some(), temp.path(), env);
        let resolved = sandbox.sandbox.resolve(&context).map_err(refused)?;
        if let WorkingDir::Private { .. } = &resolved.working_dir {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new().mode(0o700).create(&resolved.cwd).map_err(|e| {
                spawn_error(std::io::Error::new(e.kind(), format!("cannot make its private working directory: {e}")))
            })?;
            tracing::info!(server = %self.label, "working directory: {}", resolved.working_dir);
        }
        for name in ["TMPDIR", "TMP", "TEMP"] {
            if !self.env.contains_key(name) {
                env.push((name.into(), temp.path().as_os_str().to_owned()));
            }
        }
        let diagnosis = Arc::new(Diagnosis { policy: resolved.policy.clone(), home });
        let launch = Launch { policy: resolved.policy, program: found, args };
        Ok(Confined {
            program: sandbox.launcher.program.clone(),
            args: sandbox.launcher.arguments(&launch),
            temp,
            cwd: resolved.cwd,
            working_dir: resolved.working_dir,
            diagnosis,
        })
    }

    /// Where the server would work under its sandbox, without starting it (for a listing):
    /// `None` when it has none; a refused `cwd` is the error [`StdioTransport::spawn`] gives.
    pub fn confined_working_dir(&self) -> Option<Result<WorkingDir, TransportError>> {
        let sandbox = self.sandbox.as_ref()?;
        let spawn_error = |source: std::io::Error| TransportError::Spawn { command: self.display_command(), source };
        Some((|| {
            let cwd = self.child_cwd().map_err(spawn_error)?;
            let env = self.child_env();
            let mut context = Context::new(cwd, std::env::temp_dir().join("mcp-sandbox-preview"));
            context.home = env_var(&env, "HOME").map(PathBuf::from);
            context.cwd_configured = self.cwd.is_some();
            sandbox.sandbox.working_dir(&context).map_err(|e| spawn_error(std::io::Error::other(e)))
        })())
    }
}

impl Diagnosis {
    /// What would let the server run, if `text` shows a permission or module error. Read
    /// against what the launcher applied: it skipped what was missing of standard's own paths.
    fn hint(&self, text: &str) -> Option<String> {
        let mut applied = self.policy.clone();
        applied.grants.retain(|g| g.presence != mcp_sandbox::Presence::IfExists || g.path.exists());
        mcp_sandbox::diagnose(text, &applied, self.home.as_deref()).map(|h| h.to_string())
    }
}

/// The last lines a server wrote to stderr, bounded in bytes.
#[derive(Debug, Clone, Default)]
pub struct StderrTail {
    inner: Arc<Mutex<(VecDeque<String>, usize)>>,
    limit: usize,
    /// Set when the reader has reached the end of stderr.
    ended: Arc<(std::sync::atomic::AtomicBool, tokio::sync::Notify)>,
}

impl StderrTail {
    fn new(limit: usize) -> Self {
        Self { inner: Arc::default(), limit, ended: Arc::default() }
    }

    fn end(&self) {
        self.ended.0.store(true, std::sync::atomic::Ordering::SeqCst);
        self.ended.1.notify_waiters();
    }

    /// Whether the reader has reached the end of stderr.
    fn has_ended(&self) -> bool {
        self.ended.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits (at most `limit`) until every line the server wrote has been read: after it
    /// exited, the reader may not have caught up yet.
    async fn settled(&self, limit: Duration) {
        let ended = async {
            loop {
                let notified = self.ended.1.notified();
                if self.ended.0.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(limit, ended).await;
    }

    /// The last lines for a crash report: up to [`CRASH_TAIL_LINES`] whole lines within
    /// [`CRASH_TAIL_BYTES`] (a single longer line is cut at its start).
    fn crash_report(&self) -> String {
        let lines = self.lines();
        let mut kept: Vec<&str> = Vec::new();
        let mut bytes = 0;
        for line in lines.iter().rev().take(CRASH_TAIL_LINES) {
            if bytes + line.len() > CRASH_TAIL_BYTES {
                if kept.is_empty() {
                    let cut = line.len() - CRASH_TAIL_BYTES;
                    let start = (cut..line.len()).find(|&i| line.is_char_boundary(i)).unwrap_or(line.len());
                    kept.push(&line[start..]);
                }
                break;
            }
            bytes += line.len() + 1;
            kept.push(line);
        }
        kept.reverse();
        kept.join("\n")
    }

    fn push(&self, line: String) {
        if let Ok(mut guard) = self.inner.lock() {
            let (lines, bytes) = &mut *guard;
            *bytes += kept_cost(&line);
            lines.push_back(line);
            while *bytes > self.limit {
                match lines.pop_front() {
                    Some(old) => *bytes -= kept_cost(&old),
                    None => break,
                }
            }
        }
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.inner.lock().map(|g| g.0.iter().cloned().collect()).unwrap_or_default()
    }

    /// The last `n` lines joined, for error messages.
    pub fn last(&self, n: usize) -> String {
        let lines = self.lines();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// What a kept stderr line counts against the tail's limit: its text and the string holding
/// it, so that blank lines (nothing but a newline each) are counted too.
fn kept_cost(line: &str) -> usize {
    line.len() + std::mem::size_of::<String>()
}

/// A running stdio server.
pub struct StdioTransport {
    temp: Option<TempDir>,
    working_dir: Option<WorkingDir>,
    diagnosis: Option<Arc<Diagnosis>>,
    child: Arc<Mutex<Option<Child>>>,
    pid: Option<u32>,
    stdin: Arc<StdinPipe>,
    stdout: BufReader<ChildStdout>,
    stderr_tail: StderrTail,
    config: StdioConfig,
}

impl std::fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioTransport").field("pid", &self.pid).field("command", &self.config.command).finish()
    }
}

impl StderrSource for StderrTail {
    fn last_lines(&self, n: usize) -> String {
        self.last(n)
    }
}

#[async_trait]
impl Connector for StdioConfig {
    async fn open(&self, name: &str) -> Result<Opened, TransportError> {
        let mut config = self.clone();
        config.label = name.to_owned();
        let transport = StdioTransport::spawn(config)?;
        let stderr: Arc<dyn StderrSource> = Arc::new(transport.stderr_tail());
        Ok(Opened { transport: Box::new(transport), stderr: Some(stderr) })
    }

    fn is_local(&self) -> bool {
        true
    }
}

impl StdioTransport {
    /// Start the server.
    pub fn spawn(config: StdioConfig) -> Result<Self, TransportError> {
        // A missing directory makes spawn fail with "No such file or directory", which reads
        // as if the program were missing: say which one it is.
        if let Some(cwd) = &config.cwd
            && !cwd.is_dir()
        {
            return Err(TransportError::MissingDirectory {
                command: config.display_command(),
                cwd: cwd.display().to_string(),
            });
        }
        let mut env = config.child_env();
        let confined = config.sandbox.as_ref().map(|s| config.confine(s, &mut env)).transpose()?;
        let command = |resolved: Option<&Path>| {
            let mut command = match (&confined, resolved) {
                (Some(c), _) => {
                    let mut command = Command::new(&c.program);
                    command.args(&c.args);
                    command
                }
                (None, Some(program)) => {
                    let mut command = Command::new(program);
                    command.arg0(&config.command).args(&config.args);
                    command
                }
                (None, None) => {
                    let mut command = Command::new(&config.command);
                    command.args(&config.args);
                    command
                }
            };
            command
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .process_group(0);
            match (&confined, &config.cwd) {
                (Some(c), _) => {
                    command.current_dir(&c.cwd);
                }
                (None, Some(cwd)) => {
                    command.current_dir(cwd);
                }
                (None, None) => {}
            }
            command
        };
        // Given a name and a PATH of its own, std forks the whole host so that the child can
        // search that PATH; found here, the child starts with posix_spawn (a vfork), which
        // spares the host's page tables and its copy-on-write faults afterwards.
        let resolved =
            (confined.is_none() && !config.command.contains('/')).then(|| config.resolve_program(&env).ok()).flatten();
        let mut spawned = command(resolved.as_deref()).spawn();
        if resolved.is_some()
            && spawned.as_ref().is_err_and(|e| e.raw_os_error() == Some(nix::errno::Errno::ENOEXEC as i32))
        {
            // A script without a `#!` line: only the PATH search in the child hands it to
            // the shell.
            spawned = command(None).spawn();
        }
        let mut child = spawned.map_err(|source| match &confined {
            Some(c) => TransportError::Spawn {
                command: config.display_command(),
                source: std::io::Error::new(
                    source.kind(),
                    format!("cannot start the sandbox launcher {}: {source}", c.program.display()),
                ),
            },
            None => TransportError::Spawn { command: config.display_command(), source },
        })?;
        let missing = |what: &str| TransportError::Closed(format!("the child's {what} was not captured"));
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        // A pipe sender can be written from any task without blocking (`try_write`), which lets
        // callers put a request on the wire without a hop through the writer task.
        let stdin = stdin
            .into_owned_fd()
            .and_then(pipe::Sender::from_owned_fd)
            .map_err(|source| TransportError::Io { context: "setting up the server's stdin".into(), source })?;
        let stdin = Arc::new(StdinPipe {
            sender: Mutex::new(Some(Arc::new(stdin))),
            pid: child.id(),
            one_cpu: OnceLock::new(),
        });
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
        let stderr_tail = StderrTail::new(config.stderr_buffer_bytes);
        let tail = stderr_tail.clone();
        let label = config.label.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::with_capacity(STDERR_BUFFER_BYTES, stderr);
            let mut line = Vec::new();
            loop {
                match read_line_bounded(&mut reader, &mut line, STDERR_LINE_BYTES, None).await {
                    Ok(Some(())) => {
                        let text = String::from_utf8_lossy(&line).into_owned();
                        tracing::debug!(server = %label, "stderr: {text}");
                        tail.push(text);
                    }
                    Ok(None) => break,
                    Err(LineError::TooLong) => tail.push("[a stderr line too long to keep]".to_owned()),
                    Err(LineError::Io(_)) => break,
                }
            }
            tail.end();
        });
        let (temp, working_dir, diagnosis) = match confined {
            Some(c) => (Some(c.temp), Some(c.working_dir), Some(c.diagnosis)),
            None => (None, None, None),
        };
        Ok(Self {
            temp,
            working_dir,
            diagnosis,
            pid: child.id(),
            child: Arc::new(Mutex::new(Some(child))),
            stdin,
            stdout: BufReader::with_capacity(STDOUT_BUFFER_BYTES, stdout),
            stderr_tail,
            config,
        })
    }

    /// The child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Where a confined server works (`None` unconfined): its working directory, or a private
    /// one and why (`private, because /home/u is your home directory (...)`), for a listing.
    pub fn working_dir(&self) -> Option<&WorkingDir> {
        self.working_dir.as_ref()
    }

    /// The server's recent stderr.
    pub fn stderr_tail(&self) -> StderrTail {
        self.stderr_tail.clone()
    }
}

enum LineError {
    TooLong,
    Io(std::io::Error),
}

/// The two ends of a line too long to keep, for finding its id.
#[derive(Default)]
struct Ends {
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Ends {
    fn clear(&mut self) {
        self.head.clear();
        self.tail.clear();
    }

    /// The line turned out too long: keep its start (what was read of it, then `chunk`).
    fn start(&mut self, line: &[u8], chunk: &[u8]) {
        self.head.extend_from_slice(&line[..line.len().min(PEEK_BYTES)]);
        let more = PEEK_BYTES.saturating_sub(self.head.len()).min(chunk.len());
        self.head.extend_from_slice(&chunk[..more]);
    }

    /// Keep the last [`PEEK_BYTES`] seen.
    fn push(&mut self, chunk: &[u8]) {
        self.tail.extend_from_slice(&chunk[chunk.len().saturating_sub(PEEK_BYTES)..]);
        if self.tail.len() > 2 * PEEK_BYTES {
            self.tail.drain(..self.tail.len() - PEEK_BYTES);
        }
    }

    fn tail(&self) -> &[u8] {
        &self.tail[self.tail.len().saturating_sub(PEEK_BYTES)..]
    }
}

/// Read one `\n`-terminated line into `line` (without the newline), never holding more than
/// `max` bytes: a longer line is consumed up to its end and reported as `TooLong` (with its
/// first and last bytes in `ends`, when given). `Ok(None)` at end of input.
async fn read_line_bounded<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
    mut ends: Option<&mut Ends>,
) -> Result<Option<()>, LineError> {
    line.clear();
    if line.capacity() > 1024 * 1024 {
        line.shrink_to(64 * 1024); // don't keep a huge buffer after one big message
    }
    if let Some(ends) = ends.as_deref_mut() {
        ends.clear();
    }
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await.map_err(LineError::Io)?;
        if available.is_empty() {
            // End of input: a last line without a newline still counts.
            return match (too_long, line.is_empty()) {
                (true, _) => Err(LineError::TooLong),
                (false, true) => Ok(None),
                (false, false) => Ok(Some(())),
            };
        }
        let (chunk, found) = match memchr::memchr(b'\n', available) {
            Some(pos) => (&available[..pos], Some(pos + 1)),
            None => (available, None),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                if let Some(ends) = ends.as_deref_mut() {
                    ends.start(line, chunk);
                    ends.push(line);
                }
                line.clear();
                line.shrink_to(64 * 1024);
            } else {
                line.extend_from_slice(chunk);
            }
        }
        if too_long && let Some(ends) = ends.as_deref_mut() {
            ends.push(chunk);
        }
        let consumed = found.unwrap_or(available.len());
        reader.consume(consumed);
        if found.is_some() {
            if too_long {
                return Err(LineError::TooLong);
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Some(()));
        }
    }
}

/// The child's stdin, shared by the writer task and callers; `None` once closed.
struct StdinPipe {
    sender: Mutex<Option<Arc<pipe::Sender>>>,
    /// The server's process, for [`DirectWrite::shares_one_cpu`].
    pid: Option<u32>,
    /// Learned at the first question: by then the server (or a `taskset` before it) has exec'd.
    one_cpu: OnceLock<bool>,
}

impl StdinPipe {
    fn get(&self) -> std::io::Result<Arc<pipe::Sender>> {
        self.sender
            .lock()
            .ok()
            .and_then(|s| s.clone())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin was closed"))
    }

    fn close(&self) {
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
    }
}

#[async_trait]
impl DirectWrite for StdinPipe {
    fn try_write(&self, bytes: &[u8]) -> std::io::Result<usize> {
        self.get()?.try_write(bytes)
    }

    async fn writable(&self) -> std::io::Result<()> {
        // Clone out of the lock: it must not be held across the wait.
        let sender = self.get()?;
        sender.writable().await
    }

    fn shares_one_cpu(&self) -> bool {
        *self.one_cpu.get_or_init(|| self.pid.is_some_and(shares_one_cpu_with))
    }
}

/// Whether this thread and process `pid` may each run on one CPU only, the same one: then a
/// message written to `pid` at once only hands it the CPU and back, and messages written
/// together cost one wake-up for all of them. `false` when either may run elsewhere or the
/// affinities cannot be read.
pub fn shares_one_cpu_with(pid: u32) -> bool {
    use nix::sched::{CpuSet, sched_getaffinity};
    use nix::unistd::Pid;
    let single = |set: &CpuSet| {
        let mut cpus = (0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false));
        match (cpus.next(), cpus.next()) {
            (Some(cpu), None) => Some(cpu),
            _ => None,
        }
    };
    let Ok(pid) = i32::try_from(pid) else { return false };
    match (sched_getaffinity(Pid::from_raw(0)), sched_getaffinity(Pid::from_raw(pid))) {
        (Ok(ours), Ok(theirs)) => single(&ours).is_some_and(|cpu| single(&theirs) == Some(cpu)),
        _ => false,
    }
}

struct StdioSink {
    /// Removed when the sink goes (after the kill in `Drop`, or after `close` reaped the child).
    _temp: Option<TempDir>,
    stdin: Arc<StdinPipe>,
    child: Arc<Mutex<Option<Child>>>,
    pid: Option<u32>,
    grace: Duration,
    buffer: Vec<u8>,
}

struct StdioStream {
    /// Until the first line: the launcher may report that the server could not be started.
    launcher_command: Option<String>,
    /// A confined server's policy, to read its failure against.
    diagnosis: Option<Arc<Diagnosis>>,
    /// Whether the server has written a message yet (before one, a failure is a start failure).
    started: bool,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
    ends: Ends,
    max: usize,
    child: Arc<Mutex<Option<Child>>>,
    pid: Option<u32>,
    grace: Duration,
    stderr_tail: StderrTail,
    /// How the process ended, once [`TransportStream::closed_reason`] saw it end.
    exit: Option<ProcessExit>,
}

impl Transport for StdioTransport {
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>) {
        let sink = StdioSink {
            _temp: self.temp,
            stdin: self.stdin,
            child: Arc::clone(&self.child),
            pid: self.pid,
            grace: self.config.close_grace,
            // Grown by the first batch that needs it: callers mostly write through the direct path.
            buffer: Vec::new(),
        };
        let stream = StdioStream {
            launcher_command: self.config.sandbox.is_some().then(|| self.config.display_command()),
            diagnosis: self.diagnosis,
            started: false,
            stdout: self.stdout,
            line: Vec::with_capacity(4096),
            ends: Ends::default(),
            max: self.config.max_message_bytes,
            child: self.child,
            pid: self.pid,
            grace: self.config.close_grace,
            exit: None,
            stderr_tail: self.stderr_tail,
        };
        (Box::new(sink), Box::new(stream))
    }
}

#[async_trait]
impl TransportSink for StdioSink {
    fn direct(&self) -> Option<Arc<dyn DirectWrite>> {
        Some(Arc::clone(&self.stdin) as Arc<dyn DirectWrite>)
    }

    async fn send(&mut self, messages: &[Outgoing]) -> Result<(), TransportError> {
        self.buffer.clear();
        for m in messages {
            self.buffer.extend_from_slice(m.text().as_bytes());
            self.buffer.push(b'\n');
        }
        let io = |source| TransportError::Io { context: "writing to the server's stdin".into(), source };
        let mut written = 0;
        while written < self.buffer.len() {
            self.stdin.writable().await.map_err(io)?;
            match self.stdin.try_write(&self.buffer[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(io(e)),
            }
        }
        if self.buffer.capacity() > 1024 * 1024 {
            self.buffer = Vec::with_capacity(64 * 1024);
        }
        Ok(())
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        // Closing stdin is the polite request to exit.
        self.stdin.close();
        let Some(mut child) = self.child.lock().ok().and_then(|mut c| c.take()) else {
            return Ok(());
        };
        let mut exited = tokio::time::timeout(self.grace, child.wait()).await.is_ok();
        if !exited {
            signal_group(self.pid, Signal::Term);
            exited = tokio::time::timeout(self.grace, child.wait()).await.is_ok();
        }
        if !exited {
            signal_group(self.pid, Signal::Kill);
            let _ = child.kill().await;
            child
                .wait()
                .await
                .map_err(|source| TransportError::Io { context: "reaping the server process".into(), source })?;
        }
        // A server that exited politely may have left children behind in its group.
        end_group(self.pid, self.grace).await;
        Ok(())
    }
}

impl Drop for StdioSink {
    fn drop(&mut self) {
        // Dropped without close: the child (and anything it spawned in its group) must not
        // outlive us. kill_on_drop then lets tokio reap it.
        if self.child.lock().map(|c| c.is_some()).unwrap_or(false) {
            signal_group(self.pid, Signal::Kill);
        }
    }
}

#[async_trait]
impl TransportStream for StdioStream {
    async fn recv(&mut self) -> Result<Option<Inbound>, TransportError> {
        loop {
            match read_line_bounded(&mut self.stdout, &mut self.line, self.max, Some(&mut self.ends)).await {
                Ok(Some(())) => {
                    if self.line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    if let Some(command) = self.launcher_command.take()
                        && let Some(cause) = self.line.strip_prefix(mcp_sandbox::launcher::FAILURE_PREFIX.as_bytes())
                    {
                        // The launcher writes this line, but a server could write its like
                        // first: it is cleaned and bounded like any text a server controls.
                        let mut cause = mcp_safety::text::one_line(&String::from_utf8_lossy(cause), 1000);
                        if let Some(hint) = self.diagnosis.as_ref().and_then(|d| d.hint(&cause)) {
                            cause.push_str("; ");
                            cause.push_str(&hint);
                        }
                        // Said: the closing reason adds no second, vaguer hint.
                        self.started = true;
                        return Err(TransportError::Spawn { command, source: std::io::Error::other(cause) });
                    }
                    self.started = true;
                    // Copy out at the exact size and keep the grown buffer for the next line.
                    return match std::str::from_utf8(&self.line) {
                        Ok(text) => Ok(Some(Inbound::Message(text.to_owned()))),
                        // An answer that is not UTF-8 fails its request now, not at its timeout.
                        Err(_) => match not_utf8_answer_id(&self.line) {
                            Some(id) => Ok(Some(Inbound::Failed { id, error: TransportError::NotUtf8 })),
                            None => Err(TransportError::NotUtf8),
                        },
                    };
                }
                Ok(None) => return Ok(None),
                // An answer too large to read fails its request now, not at its timeout.
                Err(LineError::TooLong) => {
                    return match mcp_protocol::oversize_response_id(&self.ends.head, self.ends.tail()) {
                        Some(id) => {
                            Ok(Some(Inbound::Failed { id, error: TransportError::AnswerTooLarge { limit: self.max } }))
                        }
                        None => Err(TransportError::MessageTooLarge { limit: self.max }),
                    };
                }
                Err(LineError::Io(source)) => {
                    return Err(TransportError::Io { context: "reading the server's stdout".into(), source });
                }
            }
        }
    }

    async fn closed_reason(&mut self) -> String {
        // stdout closing usually means the process is exiting; give it a moment so the
        // reason can name the exit status and what it said last on stderr (read to its end:
        // the reader of stderr may be behind the reader of stdout).
        let started = Instant::now();
        let status = loop {
            let status = self.child.lock().ok().and_then(|mut c| c.as_mut().and_then(|c| c.try_wait().ok().flatten()));
            let waited = started.elapsed();
            // An exiting server closes stderr with stdout: one whose stderr stays open is alive.
            let alive = waited >= ALIVE_WAIT && !self.stderr_tail.has_ended();
            if status.is_some() || waited >= DEATH_REPORT_WAIT || alive {
                break status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        if status.is_some() {
            // The session is over: nothing of the server's process group stays behind (that
            // also ends children that hold its stderr open), and stderr is read to its end,
            // so the report has the last lines the server wrote.
            tokio::spawn(end_group(self.pid, self.grace));
            self.stderr_tail.settled(self.grace + Duration::from_secs(1)).await;
        }
        self.exit = status.and_then(process_exit);
        let mut reason = match status {
            Some(status) => format!("the server exited ({})", describe_status(status)),
            None => "the server closed its stdout".to_owned(),
        };
        let tail = self.stderr_tail.crash_report();
        if !tail.is_empty() {
            reason.push_str("; its last stderr lines: ");
            reason.push_str(&tail);
        }
        if let Some(diagnosis) = &self.diagnosis {
            let hint = diagnosis.hint(&self.stderr_tail.lines().join("\n"));
            let hint = hint.or_else(|| (!self.started).then(|| mcp_sandbox::CONFINED_START_FAILED.to_owned()));
            if let Some(hint) = hint {
                reason.push_str("; ");
                reason.push_str(&hint);
            }
        }
        reason
    }

    fn exit(&self) -> Option<ProcessExit> {
        self.exit
    }
}

/// `status` as a [`ProcessExit`] (`None` for a status that is neither a code nor a signal).
fn process_exit(status: ExitStatus) -> Option<ProcessExit> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return Some(ProcessExit::Signal(signal));
        }
    }
    status.code().map(ProcessExit::Status)
}

fn describe_status(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("status {code}"),
        None => status.to_string(),
    }
}

enum Signal {
    Term,
    Kill,
}

/// Whether any process of the group `pid` leads is left.
fn group_alive(pid: Option<u32>) -> bool {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        return nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), None).is_ok();
    }
    let _ = pid;
    false
}

/// Ends what is left of the server's process group once the server has exited: SIGTERM, and
/// SIGKILL for whatever is still there after `grace`.
async fn end_group(pid: Option<u32>, grace: Duration) {
    if !group_alive(pid) {
        return;
    }
    signal_group(pid, Signal::Term);
    let deadline = tokio::time::Instant::now() + grace;
    while group_alive(pid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if group_alive(pid) {
        signal_group(pid, Signal::Kill);
    }
}

fn signal_group(pid: Option<u32>, signal: Signal) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        use nix::sys::signal::{Signal as S, killpg};
        use nix::unistd::Pid;
        let signal = match signal {
            Signal::Term => S::SIGTERM,
            Signal::Kill => S::SIGKILL,
        };
        // The child leads its own group (process_group(0)), so its pid is the group id.
        let _ = killpg(Pid::from_raw(pid), signal);
    }
    #[cfg(not(unix))]
    let _ = (pid, signal);
}

/// The id of the response `line` (not UTF-8) is, when it is one: read with the invalid bytes
/// replaced, a response has an `id`, a `result` or an `error`, and no `method`.
fn not_utf8_answer_id(line: &[u8]) -> Option<mcp_protocol::RequestId> {
    mcp_protocol::refused_response_id(&String::from_utf8_lossy(line)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blank lines counted nothing, so a server writing newlines without end grew the tail
    /// without end.
    #[test]
    fn blank_stderr_lines_count_against_the_tail() {
        let tail = StderrTail::new(1000);
        for _ in 0..100_000 {
            tail.push(String::new());
        }
        tail.push("last".to_owned());
        let lines = tail.lines();
        assert!(lines.len() <= 1000 / std::mem::size_of::<String>(), "kept {} lines", lines.len());
        assert_eq!(lines.last().map(String::as_str), Some("last"));
    }
}
