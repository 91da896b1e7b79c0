//! Confining stdio servers: the configured sandbox put on each server's start, the kernel
//! probed once, and what `servers` shows. The launcher is `mcp-harness-sandbox` beside this
//! binary (installed with it), else this binary under a hidden argument: it works too, but
//! starting the whole host costs more.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Once, OnceLock};

use crate::config::{Config, ServerConfig, ServerTarget};
use crate::output;
use mcp_sandbox::launcher::Launcher;
use mcp_transport::StdioSandbox;

/// The hidden first argument that makes this binary the sandbox launcher.
const LAUNCH_ARG: &str = "__sandbox-launch";

/// Becomes the sandbox launcher (and never returns) when the binary was started as one. Called
/// first in `main`, while the process has one thread: the launcher needs that.
pub(crate) fn launch_if_asked() {
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() == Some(OsStr::new(LAUNCH_ARG)) {
        mcp_sandbox::launcher::run(&[LAUNCH_ARG.into()], args.collect());
    }
}

/// How a stdio server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Confinement {
    /// In its sandbox.
    Confined,
    /// A sandbox was asked for, but the kernel has no Landlock (and it was not required).
    Unconfined,
    /// `sandbox = "off"`.
    Off,
}

impl Confinement {
    /// What `servers` shows.
    pub(crate) fn label(self) -> &'static str {
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

/// How the server `name` runs (`None` for a remote server). A required sandbox on a kernel
/// without Landlock counts as confined: the server does not start, and says why.
pub(crate) fn confinement(config: &Config, name: &str) -> Option<Confinement> {
    let setting = config.sandboxes.get(name)?;
    Some(match &setting.sandbox {
        None => Confinement::Off,
        Some(_) if kernel_confines() || setting.required => Confinement::Confined,
        Some(_) => Confinement::Unconfined,
    })
}

/// `spec` with its configured sandbox, which keeps the host's configuration and data away.
pub(crate) fn apply(mut spec: ServerConfig, config: &Config) -> ServerConfig {
    let confined = confinement(config, &spec.name);
    if confined == Some(Confinement::Unconfined) {
        warn_once();
    }
    if let (ServerTarget::Stdio(stdio), Some(Confinement::Confined), Some(setting)) =
        (&mut spec.target, confined, config.sandboxes.get(&spec.name))
        && let Some(sandbox) = &setting.sandbox
    {
        let mut sandbox = sandbox.clone();
        sandbox.protect.extend(host_secrets(config));
        stdio.sandbox = Some(Box::new(StdioSandbox { sandbox, launcher: launcher() }));
    }
    spec
}

fn launcher() -> Launcher {
    // The kernel's name for this very program, should the path be unknown.
    let host = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let small = host.with_file_name(format!("mcp-harness-sandbox{}", std::env::consts::EXE_SUFFIX));
    if small.is_file() { Launcher::new(small, Vec::<String>::new()) } else { Launcher::new(host, [LAUNCH_ARG]) }
}

/// The host's own configuration (the file in use and the default directory) and data
/// directory (tokens, transcripts): a server never reads them.
fn host_secrets(config: &Config) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = config.file.iter().cloned().collect();
    out.extend(crate::config::default_dir());
    out.extend(crate::auth::data_dir().ok());
    out.into_iter().filter(|p| p.is_absolute()).collect()
}

fn warn_once() {
    static WARNED: Once = Once::new();
    WARNED.call_once(|| {
        let _ = output::stderr(
            "warning: this kernel has no Landlock, so stdio servers run unconfined \
             (`sandbox_required = true` refuses to start them instead)\n",
        );
    });
}
