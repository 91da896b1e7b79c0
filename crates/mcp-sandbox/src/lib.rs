//! Confinement of stdio MCP servers.
//!
//! A stdio server is usually a package fetched by `npx` or `uvx`, running with all of the user's
//! rights. This crate describes what a server may do and applies it on Linux with the kernel's
//! own mechanisms, no container runtime:
//!
//! - [`Sandbox`] is the request (`standard` plus read / write paths, network, limits) and
//!   [`Sandbox::policy`] resolves it, for one start's [`Context`], into the [`Policy`] the
//!   launcher applies. This part is pure: it is tested without a kernel.
//! - [`launcher`] is the small process the stdio adapter starts instead of the server: single
//!   threaded, it sets no-new-privileges, enters a user namespace (and a network namespace for
//!   `network = false`, a PID namespace to bound root's processes), sets the resource limits,
//!   restricts itself with Landlock, and then runs the server. A failure before that is reported
//!   to the adapter ([`launcher::FAILURE_PREFIX`]), never a silent unconfined start.
//! - [`landlock_abi`] probes the kernel once, so a host can say honestly when it cannot confine.
//!
//! ```
//! use std::path::PathBuf;
//! use mcp_sandbox::{Context, Sandbox};
//!
//! let ctx = Context {
//!     home: Some(PathBuf::from("/home/u")),
//!     cwd: PathBuf::from("/home/u/project"),
//!     temp: PathBuf::from("/tmp/mcp-sandbox-1"),
//!     program: vec![PathBuf::from("/usr/bin/node")],
//!     files: vec![],
//! };
//! let policy = Sandbox::standard().policy(&ctx)?;
//! let granted = |p: &str| policy.grants.iter().any(|g| g.path == PathBuf::from(p));
//! assert!(granted("/usr") && granted("/home/u/project") && granted("/home/u/.npm"));
//! assert!(!granted("/home/u") && policy.protected.contains(&PathBuf::from("/home/u/.ssh")));
//! # Ok::<(), mcp_sandbox::SandboxError>(())
//! ```

mod args;
pub mod launcher;
#[cfg(target_os = "linux")]
mod linux;
mod policy;

pub use args::Launch;

pub use policy::{Context, Entry, Grant, Limits, PROTECTED_IN_HOME, Policy, Sandbox, SandboxError, expand, normalize};

/// The kernel's Landlock ABI version, or `None` when it cannot confine a server (no Landlock, or
/// not Linux). Cheap, but the answer does not change: probe once.
pub fn landlock_abi() -> Option<u32> {
    #[cfg(target_os = "linux")]
    return linux::landlock_abi();
    #[cfg(not(target_os = "linux"))]
    None
}
