//! The launcher: a small single-threaded process between the host and a confined server. It
//! applies the sandbox to itself, then becomes (or, in a PID namespace, starts) the server.
//!
//! Run as `mcp-sandbox-launch ARGS` or inside a host binary under a hidden argument (the CLI's
//! `mcp-harness __sandbox-launch ARGS`): the host calls [`run`] first thing in `main`, before any
//! thread exists (user namespaces need a single-threaded process).
//!
//! Any failure before the server runs is one line on stdout, starting with [`FAILURE_PREFIX`],
//! and exit status 126 (setting up) or 127 (running the program): the adapter reads it as the
//! server's start failure. A server's own output never starts with a NUL byte.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;

use crate::args::Launch;

/// Starts the launcher's failure line on stdout.
pub const FAILURE_PREFIX: &str = "\0mcp-sandbox-launch: ";

/// Where the launcher is: a program and the arguments that select it (none for
/// `mcp-sandbox-launch`; `__sandbox-launch` for a host binary that embeds it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// The program.
    pub program: PathBuf,
    /// The arguments before the launch's own.
    pub args: Vec<OsString>,
}

impl Launcher {
    /// The launcher at `program`, selected by `args`.
    pub fn new(program: impl Into<PathBuf>, args: impl IntoIterator<Item = impl Into<OsString>>) -> Self {
        Self { program: program.into(), args: args.into_iter().map(Into::into).collect() }
    }

    /// The arguments that run `launch` through this launcher (the program is [`Launcher::program`]).
    pub fn arguments(&self, launch: &Launch) -> Vec<OsString> {
        let mut out = self.args.clone();
        out.extend(launch.to_args());
        out
    }
}

/// Runs the launcher with `args` (what follows `prefix` on its command line) and never returns.
/// `prefix` is how this program is selected as the launcher, for the second stage it may start.
pub fn run(prefix: &[OsString], args: Vec<OsString>) -> ! {
    let status = match Launch::parse(args.clone()) {
        Ok((launch, init)) => match stage(prefix, &args, &launch, init.as_deref()) {
            Ok(status) => status,
            Err(failure) => report(failure.status, &failure.message),
        },
        Err(message) => {
            report(2, &format!("{message} (usage: [--read PATH] [--write PATH] [--network off] ... -- PROGRAM ARGS)"))
        }
    };
    std::process::exit(status)
}

fn report(status: i32, message: &str) -> i32 {
    let line = format!("{FAILURE_PREFIX}{}\n", message.replace(['\n', '\r', '\0'], " "));
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
    status
}

#[cfg(not(target_os = "linux"))]
fn stage(_prefix: &[OsString], _args: &[OsString], _launch: &Launch, _init: Option<&str>) -> Result<i32, Failure> {
    Err(Failure { status: 126, message: "confined servers need Linux (Landlock)".to_owned() })
}

#[cfg(not(target_os = "linux"))]
struct Failure {
    status: i32,
    message: String,
}

#[cfg(target_os = "linux")]
use crate::linux::{EXEC_FAILED, Failure, Namespaces, setup};

#[cfg(target_os = "linux")]
fn stage(prefix: &[OsString], args: &[OsString], launch: &Launch, init: Option<&str>) -> Result<i32, Failure> {
    use std::os::unix::process::CommandExt as _;
    use std::process::Command;

    use crate::linux;

    let policy = &launch.policy;
    let not_run = |e: std::io::Error| Failure {
        status: EXEC_FAILED,
        message: format!("cannot run {} in the sandbox: {e}", launch.program.display()),
    };
    if let Some(obtained) = init {
        // Second stage: init of the server's PID namespace, already in its other namespaces.
        let namespaces = Namespaces {
            user: obtained.split(',').any(|n| n == "user"),
            net: obtained.split(',').any(|n| n == "net"),
            pid: true,
            // Only root's servers get a PID namespace.
            root: true,
        };
        // Our parent is the first stage; if it dies, so do we, and with us the namespace.
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
            .map_err(|e| setup(format!("cannot set the parent-death signal: {e}")))?;
        if let Some(processes) = policy.limits.processes {
            linux::bound_pid_namespace(processes)?;
        }
        linux::apply_limits(&policy.limits, namespaces)?;
        linux::apply_landlock(policy, namespaces)?;
        linux::apply_seccomp(namespaces)?;
        let server = Command::new(&launch.program).args(&launch.args).spawn().map_err(not_run)?;
        linux::release_stdio();
        return Ok(reap_until(server.id()));
    }
    let namespaces = linux::enter_namespaces(policy)?;
    if namespaces.pid {
        // The next child is the PID namespace's init: ourselves again, as the second stage.
        let exe = std::env::current_exe().map_err(|e| setup(format!("cannot find the launcher's own program: {e}")))?;
        let obtained: Vec<&str> = [("user", namespaces.user), ("net", namespaces.net)]
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(n, _)| n)
            .collect();
        let mut second = Command::new(exe)
            .args(prefix)
            .arg(crate::args::INIT_FLAG)
            .arg(obtained.join(","))
            .args(args)
            .spawn()
            .map_err(|e| setup(format!("cannot start the sandbox's second stage: {e}")))?;
        // TERM and friends are for the server (in our process group): we wait for it to go.
        let mut set = nix::sys::signal::SigSet::empty();
        for signal in
            [nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGINT, nix::sys::signal::Signal::SIGHUP]
        {
            set.add(signal);
        }
        let _ = set.thread_block();
        // From here on, the second stage reports what goes wrong (on the pipes we let go).
        linux::release_stdio();
        return wait_watching_host(&mut second);
    }
    linux::apply_limits(&policy.limits, namespaces)?;
    linux::apply_landlock(policy, namespaces)?;
    linux::apply_seccomp(namespaces)?;
    Err(not_run(Command::new(&launch.program).args(&launch.args).exec()))
}

/// Waits for the second stage (the sandbox's init) and returns its status as an exit code,
/// ending it (and with it every process in the namespace) when the host that started us is
/// gone: a server busy in a call, or one that ignores the end of its stdin, would otherwise
/// outlive a host killed with SIGKILL. The host's death is seen, once a second, as our parent
/// changing (we are re-parented). Not a parent-death signal: that fires when the parent
/// *thread* ends, and hosts spawn from runtime threads that come and go; and not a thread of
/// ours: none can be made once we have entered a PID namespace for our children.
#[cfg(target_os = "linux")]
fn wait_watching_host(second: &mut std::process::Child) -> Result<i32, Failure> {
    use std::os::unix::process::ExitStatusExt as _;

    use nix::sys::signal::{SigSet, Signal};
    let host = nix::unistd::getppid();
    let waited = |e: std::io::Error| setup(format!("waiting for the sandbox's second stage: {e}"));
    let code = |status: std::process::ExitStatus| status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let mut wake = SigSet::empty();
    wake.add(Signal::SIGCHLD);
    wake.add(Signal::SIGALRM);
    if wake.thread_block().is_err() {
        return second.wait().map(code).map_err(waited);
    }
    loop {
        // Checked before each wait: a SIGCHLD that came before the block was discarded.
        if let Some(status) = second.try_wait().map_err(waited)? {
            return Ok(code(status));
        }
        if nix::unistd::getppid() != host {
            let _ = second.kill();
        }
        nix::unistd::alarm::set(1);
        if wake.wait().is_err() {
            return second.wait().map(code).map_err(waited);
        }
    }
}

/// As a PID namespace's init: reaps every process that ends in it, and returns the server's
/// exit status (128 + signal when killed) once the server ends; the kernel then kills the rest.
#[cfg(target_os = "linux")]
fn reap_until(server: u32) -> i32 {
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::Pid;
    let server = i32::try_from(server).unwrap_or(i32::MAX);
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == server => return code,
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid.as_raw() == server => return 128 + signal as i32,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return 0,
        }
    }
}
