//! Confinement of stdio MCP servers.
//!
//! A stdio server is usually a package fetched by `npx` or `uvx`, running with all of the user's
//! rights. This crate describes what a server may do and applies it on Linux with the kernel's
//! own mechanisms, no container runtime:
//!
//! - [`Sandbox`] is the request (`standard` plus read / write paths, network, limits) and
//!   [`Sandbox::resolve`] resolves it, for one start's [`Context`], into the [`Policy`] the
//!   launcher applies and the server's [`WorkingDir`] (a private one when the host's cannot be
//!   granted: HOME, say). `standard` covers the common start forms (`npx`, `pnpm dlx`, `bunx`,
//!   `uvx`, `uv run`, `pipx run`, `node|python|deno|bun SCRIPT` with its project) with no entry
//!   of the user's. [`Sandbox::check`] refuses a grant that cannot be given as written (one
//!   holding a protected path), for the configuration reader. [`diagnose`] reads a confined
//!   server's failure for what would let it run. This part is pure: it is tested without a
//!   kernel.
//! - [`probe`] gathers a start's facts from the filesystem (the program's `#!` interpreter,
//!   its script's project) for the pure part.
//! - [`launcher`] is the small process the stdio adapter starts instead of the server: single
//!   threaded, it sets no-new-privileges, enters a user namespace (and a network namespace for
//!   `network = false`, a PID namespace to bound root's processes), sets the resource limits,
//!   restricts itself with Landlock, and then runs the server. A failure before that is reported
//!   to the adapter ([`launcher::FAILURE_PREFIX`]), never a silent unconfined start.
//! - [`landlock_abi`] probes the kernel once, so a host can say honestly when it cannot confine.
//!
//! ```
//! use std::path::PathBuf;
//!
//! use mcp_sandbox::{Context, Sandbox, WorkingDir};
//!
//! let mut ctx = Context::new("/home/u/project", "/tmp/mcp-sandbox-1");
//! ctx.home = Some(PathBuf::from("/home/u"));
//! ctx.program = vec![PathBuf::from("/usr/bin/npx")];
//! let start = Sandbox::standard().resolve(&ctx)?;
//! let granted = |p: &str| start.policy.grants.iter().any(|g| g.path == PathBuf::from(p));
//! assert!(granted("/usr") && granted("/home/u/project") && granted("/home/u/.npm"));
//! assert!(!granted("/home/u") && start.policy.protected.contains(&PathBuf::from("/home/u/.ssh")));
//!
//! // Started from HOME, the server works in a private folder, and says why.
//! ctx.cwd = PathBuf::from("/home/u");
//! let start = Sandbox::standard().resolve(&ctx)?;
//! assert!(matches!(start.working_dir, WorkingDir::Private { .. }));
//! assert!(start.working_dir.to_string().starts_with("private"));
//! # Ok::<(), mcp_sandbox::SandboxError>(())
//! ```

mod args;
mod diagnose;
pub mod launcher;
#[cfg(target_os = "linux")]
mod linux;
mod policy;
#[cfg(unix)]
pub mod probe;
mod start;

pub use args::Launch;
pub use diagnose::{Access, CONFINED_START_FAILED, Cause, HINT_LEAD, Hint, diagnose};
pub use policy::{
    Context, CwdProblem, Entry, Grant, Limits, PROTECTED_IN_HOME, Policy, Presence, Resolved, Sandbox, SandboxError,
    WorkingDir, expand, normalize,
};
pub use start::{PROJECT_MARKERS, package_root};

/// The kernel's Landlock ABI version, or `None` when it cannot confine a server (no Landlock, or
/// not Linux). Cheap, but the answer does not change: probe once.
pub fn landlock_abi() -> Option<u32> {
    #[cfg(target_os = "linux")]
    return linux::landlock_abi();
    #[cfg(not(target_os = "linux"))]
    None
}
