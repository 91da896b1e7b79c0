//! Confining stdio servers, the configuration's side: each server's configured sandbox put on
//! its start with the host's own configuration and data protected, the kernel probed once, the
//! confinement and working directory `servers` shows, and the grants checked when the
//! configuration is read. The launcher is `mcp-harness-sandbox` beside the running
//! program (installed with it), else the program itself under [`LAUNCH_ARG`]: a program that
//! embeds the host calls [`launch_if_asked`] first in `main` for that (it works too, but
//! starting the whole host costs more).
//!
//! **Invariant:** a stdio server whose sandbox cannot be applied never starts unconfined
//! silently: with `sandbox_required` it does not start, else the host says so once
//! ([`HostEvent::Unconfined`]).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Once, OnceLock};

use mcp_sandbox::launcher::Launcher;
use mcp_sandbox::{Sandbox, SandboxError, WorkingDir};
use mcp_transport::{StdioConfig, StdioSandbox};

use crate::config::{Config, SandboxSetting, ServerSettings, Target};
use crate::{HostEvent, Ports};

/// The hidden first argument that makes the program the sandbox launcher.
pub const LAUNCH_ARG: &str = "__sandbox-launch";

/// Becomes the sandbox launcher (and never returns) when the program was started as one. Call
/// it first in `main`, while the process has one thread: the launcher needs that.
pub fn launch_if_asked() {
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() == Some(OsStr::new(LAUNCH_ARG)) {
        mcp_sandbox::launcher::run(&[LAUNCH_ARG.into()], args.collect());
    }
}

/// How a stdio server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Confinement {
    /// In its sandbox.
    Confined,
    /// A sandbox was asked for, but the kernel has no Landlock (and it was not required).
    Unconfined,
    /// `sandbox = "off"`.
    Off,
}

impl Confinement {
    /// What `servers` shows.
    pub fn label(self) -> &'static str {
        match self {
            Self::Confined => "confined",
            Self::Unconfined => "unconfined: kernel lacks Landlock",
            Self::Off => "off",
        }
    }
}

/// Whether the kernel can confine a server (probed once).
fn kernel_confines() -> bool {
    static ABI: OnceLock<Option<u32>> = OnceLock::new();
    ABI.get_or_init(mcp_sandbox::landlock_abi).is_some()
}

/// How `server` runs (`None` for a remote server). A required sandbox on a kernel without
/// Landlock counts as confined: the server does not start, and says why.
pub fn confinement(server: &ServerSettings) -> Option<Confinement> {
    server.sandbox().map(setting_confinement)
}

fn setting_confinement(setting: &SandboxSetting) -> Confinement {
    match &setting.sandbox {
        None => Confinement::Off,
        Some(_) if kernel_confines() || setting.required => Confinement::Confined,
        Some(_) => Confinement::Unconfined,
    }
}

/// Where `server` of `config` works when it starts here (in this process's directory and
/// environment), for a listing: its working directory, or a private one and why (the host runs
/// in HOME, `/`, ...). `None` when it is not confined (remote, `sandbox = "off"`, a kernel
/// without Landlock), or when its configured `cwd` is refused (its start fails with that).
pub fn working_dir(config: &Config, server: &ServerSettings) -> Option<WorkingDir> {
    let Target::Stdio { config: stdio, sandbox: setting } = &server.target else { return None };
    let mut stdio = stdio.clone();
    put_sandbox(&mut stdio, setting, &host_secrets(config.file.as_deref()));
    stdio.confined_working_dir()?.ok()
}

/// A server's failure `reason` on one line of about `max` characters, for a table or a
/// warning: when it must be cut, the sandbox's hint at its end (what would let a confined
/// server run, [`mcp_sandbox::HINT_LEAD`] on) is kept whole (up to a bound of its own) and
/// what comes before it (the status, its stderr lines) is cut instead.
pub fn failure_line(reason: &str, max: usize) -> String {
    /// A hint is a sentence and an entry with a path of at most a kilobyte.
    const MAX_HINT: usize = 1500;
    /// What is left of the rest, at least.
    const MIN_HEAD: usize = 60;
    use mcp_safety::text::one_line;
    let Some(at) = reason.rfind(&format!("; {}", mcp_sandbox::HINT_LEAD)) else { return one_line(reason, max) };
    let hint = one_line(&reason[at + 2..], MAX_HINT);
    let head = one_line(&reason[..at], max.saturating_sub(hint.chars().count() + 2).max(MIN_HEAD));
    format!("{head}; {hint}")
}

/// Puts `setting`'s sandbox on `stdio`'s start, `protect` kept away from it, when it runs
/// confined.
fn put_sandbox(stdio: &mut StdioConfig, setting: &SandboxSetting, protect: &[PathBuf]) {
    if let (Confinement::Confined, Some(sandbox)) = (setting_confinement(setting), &setting.sandbox) {
        let mut sandbox = sandbox.clone();
        sandbox.protect.extend(protect.iter().cloned());
        stdio.sandbox = Some(Box::new(StdioSandbox { sandbox, launcher: launcher() }));
    }
}

/// `stdio` with `setting`'s sandbox put on its start, `protect` (the host's configuration and
/// data) kept away from it.
pub(crate) fn confined(
    mut stdio: StdioConfig,
    setting: &SandboxSetting,
    protect: &[PathBuf],
    ports: &Ports,
) -> StdioConfig {
    if setting_confinement(setting) == Confinement::Unconfined {
        static WARNED: Once = Once::new();
        WARNED.call_once(|| (ports.events)(&HostEvent::Unconfined));
    }
    put_sandbox(&mut stdio, setting, protect);
    stdio
}

/// The host's own configuration (`file`, the file in use, and the default directory) and data
/// directory (tokens, transcripts): a server never reads them unless a grant names them.
pub(crate) fn host_secrets(file: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = file.map(Path::to_path_buf).into_iter().collect();
    out.extend(crate::config::default_dir());
    out.extend(crate::auth::data_dir().ok());
    out.into_iter().filter(|p| p.is_absolute()).collect()
}

/// Checks `sandbox`'s grants as written, with the host's secrets (of the configuration `file`)
/// protected, for the configuration reader: a `write` entry holding HOME or a protected path is
/// refused here rather than at each start, naming both paths and the entries to write instead
/// (the directory is listed for those).
pub(crate) fn check_grants(sandbox: &Sandbox, file: Option<&Path>, home: Option<&Path>) -> Result<(), SandboxError> {
    let mut sandbox = sandbox.clone();
    sandbox.protect.extend(host_secrets(file));
    #[cfg(unix)]
    let mut list = mcp_sandbox::probe::list_dir;
    #[cfg(not(unix))]
    let mut list = |_: &Path| Vec::new();
    sandbox.check(home, &mut list)
}

fn launcher() -> Launcher {
    // The kernel's name for this very program, should the path be unknown.
    let host = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let small = host.with_file_name(format!("mcp-harness-sandbox{}", std::env::consts::EXE_SUFFIX));
    if small.is_file() { Launcher::new(small, Vec::<String>::new()) } else { Launcher::new(host, [LAUNCH_ARG]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_cut_to_fit_keeps_the_sandboxs_hint_whole() {
        let hint = format!("{}, which denied it reading /h/notes: `read = [\"/h/notes\"]`", mcp_sandbox::HINT_LEAD);
        let reason = format!("the server exited (status 1); its last stderr lines: {}; {hint}", "x\n".repeat(500));
        let line = failure_line(&reason, 200);
        assert!(line.starts_with("the server exited (status 1)") && line.ends_with(&hint), "{line}");
        assert!(line.chars().count() <= 200 && !line.contains('\n'), "{line}");
        // Short enough: as it is (on one line); no hint: cut as any text.
        assert_eq!(failure_line("the server exited\n(status 1)", 200), "the server exited (status 1)");
        assert_eq!(failure_line(&"y".repeat(300), 10).chars().count(), 10);
        // Control characters in the server's part go, as everywhere.
        assert!(!failure_line(&format!("\u{1b}[2J{reason}"), 200).contains('\u{1b}'));
    }
}
