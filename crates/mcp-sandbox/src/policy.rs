//! What a confined server may do: the request ([`Sandbox`]), the facts of one start
//! ([`Context`]) and the resolved [`Policy`] the launcher applies. Pure: no file is read here;
//! the applier expands grants around protected paths with [`expand`], given a directory lister.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Resource limits of a confined server. `None` leaves the host's limit in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Address space (`RLIMIT_AS`), in MiB. Generous by default: V8 and Python reserve far more
    /// address space than they use.
    pub memory_mib: Option<u64>,
    /// Processes and threads (`RLIMIT_NPROC` in the server's own user namespace; for root, who is
    /// exempt from it, the size of the server's PID namespace, at least 300).
    pub processes: Option<u64>,
    /// Open files (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// CPU time in seconds (`RLIMIT_CPU`); the server is killed when it has used that much.
    pub cpu_seconds: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mib: Some(32 * 1024),
            processes: Some(1024),
            open_files: Some(4096),
            cpu_seconds: Some(24 * 3600),
        }
    }
}

/// A confinement as a user asks for it: `standard`, plus these paths, network and limits.
///
/// `standard` lets a typical server work: it reads the system (`/usr`, `/etc`, `/proc`, ...),
/// the interpreters' installations and package caches, reads and writes its working directory,
/// a private temporary directory and the package caches, and has the network. It never reads
/// the [`PROTECTED_IN_HOME`] locations nor the paths in [`Sandbox::protect`] (the host's own
/// configuration and data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// More paths to read (and execute from); each must exist.
    pub read: Vec<PathBuf>,
    /// More paths to read and write; each must exist.
    pub write: Vec<PathBuf>,
    /// `false`: no network at all, loopback included.
    pub network: bool,
    /// Resource limits.
    pub limits: Limits,
    /// The host's own secrets beyond the built-in list (its configuration and data
    /// directories): never readable unless listed in `read` or `write` themselves.
    pub protect: Vec<PathBuf>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::standard()
    }
}

/// Files and directories under HOME that hold credentials: never granted by `standard`, and cut
/// out of any wider grant (a `read` of HOME itself, say). Listing one of them (or a path inside
/// it) in `read` or `write` grants it: that is the only way in.
pub const PROTECTED_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pypirc",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".terraform.d",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gh",
    ".config/hub",
    ".config/git/credentials",
    ".password-store",
    ".local/share/keyrings",
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".node_repl_history",
    ".claude",
    ".claude.json",
    ".codex",
    ".config/github-copilot",
    ".config/mcp-harness",
    ".local/share/mcp-harness",
];

/// System directories `standard` reads (those that exist).
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/etc",
    "/nix/store",
    "/proc",
    "/sys",
    // Where /etc/resolv.conf points on systemd-resolved and resolvconf systems.
    "/run/systemd/resolve",
    "/run/resolvconf",
];

/// Device files `standard` reads and writes.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// Interpreter installations and tools under HOME that `standard` reads.
const HOME_READ: &[&str] = &[
    ".nvm",
    ".volta",
    ".fnm",
    ".bun",
    ".deno",
    ".pyenv",
    ".rye",
    ".local/bin",
    ".local/lib",
    ".gitconfig",
    ".config/git",
    ".cache/ms-playwright",
];

/// Package caches under HOME that `standard` reads and writes (npx and uvx install into them).
const HOME_WRITE: &[&str] = &[
    ".npm",
    ".cache/uv",
    ".local/share/uv",
    ".cache/pip",
    ".cache/pypoetry",
    ".cache/node-gyp",
    ".local/share/pnpm",
    ".cache/pnpm",
    ".cache/yarn",
];

/// Facts about one start, gathered by the adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The server's HOME (its environment's, which may differ from the host's).
    pub home: Option<PathBuf>,
    /// The server's working directory (absolute).
    pub cwd: PathBuf,
    /// The server's private temporary directory (absolute).
    pub temp: PathBuf,
    /// The program, absolute: as found on PATH and with symbolic links resolved (both, when they
    /// differ: a Python virtual environment links to its interpreter).
    pub program: Vec<PathBuf>,
    /// Files the command line names (absolute paths of existing files, such as a script):
    /// readable, each file alone.
    pub files: Vec<PathBuf>,
}

/// One grant of the resolved policy.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// The path (a directory grants everything beneath it).
    pub path: PathBuf,
    /// Read, write and create (else read and execute).
    pub write: bool,
    /// The start fails when it does not exist (the user listed it); `standard`'s own paths are
    /// skipped when absent.
    pub required: bool,
}

/// What the launcher applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Paths the server may use.
    pub grants: Vec<Grant>,
    /// Paths cut out of any grant that contains them (a grant at or inside one stands).
    pub protected: Vec<PathBuf>,
    /// Network allowed.
    pub network: bool,
    /// Resource limits.
    pub limits: Limits,
}

/// Why a sandbox cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A path is not absolute.
    #[error("sandbox path {} is not absolute", .0.display())]
    NotAbsolute(PathBuf),
    /// A write grant would cover HOME (its shell start-up files run unconfined later).
    #[error(
        "the sandbox cannot give write access to {} (it holds your home directory {}, whose start-up files \
         run outside the sandbox); {}",
        path.display(), home.display(), hint
    )]
    WritesHome {
        /// The path.
        path: PathBuf,
        /// HOME.
        home: PathBuf,
        /// What to do instead.
        hint: &'static str,
    },
}

impl Sandbox {
    /// `standard`: nothing beyond the base, network on, default limits.
    pub fn standard() -> Self {
        Self { read: Vec::new(), write: Vec::new(), network: true, limits: Limits::default(), protect: Vec::new() }
    }

    /// The paths this sandbox keeps from the server, for `home`.
    pub fn protected_paths(&self, home: Option<&Path>) -> Vec<PathBuf> {
        let mut out: BTreeSet<PathBuf> = self.protect.iter().map(|p| normalize(p)).collect();
        if let Some(home) = home {
            out.extend(PROTECTED_IN_HOME.iter().map(|rel| normalize(&home.join(rel))));
        }
        out.into_iter().collect()
    }

    /// Resolves the request for one start.
    pub fn policy(&self, ctx: &Context) -> Result<Policy, SandboxError> {
        for path in self.read.iter().chain(&self.write).chain(&self.protect) {
            if !path.is_absolute() {
                return Err(SandboxError::NotAbsolute(path.clone()));
            }
        }
        let home = ctx.home.as_deref().filter(|h| h.is_absolute()).map(normalize);
        let protected = self.protected_paths(home.as_deref());
        let explicit: Vec<PathBuf> = self.read.iter().chain(&self.write).map(|p| normalize(p)).collect();
        let mut grants: BTreeSet<Grant> = BTreeSet::new();
        let mut add = |path: PathBuf, write: bool, required: bool| {
            grants.insert(Grant { path: normalize(&path), write, required });
        };
        for p in SYSTEM_READ {
            add(PathBuf::from(p), false, false);
        }
        for p in DEVICES {
            add(PathBuf::from(p), true, false);
        }
        if let Some(home) = &home {
            for rel in HOME_READ {
                add(home.join(rel), false, false);
            }
            for rel in HOME_WRITE {
                add(home.join(rel), true, false);
            }
        }
        for program in &ctx.program {
            if let Some(dir) = installation(program, home.as_deref()) {
                add(dir, false, false);
            }
        }
        for file in &ctx.files {
            add(file.clone(), false, false);
        }
        add(ctx.temp.clone(), true, true);
        let cwd = normalize(&ctx.cwd);
        if let Some(home) = home.as_deref().filter(|h| h.starts_with(&cwd)) {
            return Err(SandboxError::WritesHome {
                path: cwd,
                home: home.to_path_buf(),
                hint: "give the server a working directory of its own (`cwd`), or `sandbox = \"off\"`",
            });
        }
        add(cwd, true, true);
        for p in &self.read {
            add(p.clone(), false, true);
        }
        for p in &self.write {
            if let Some(home) = home.as_deref().filter(|h| h.starts_with(normalize(p))) {
                return Err(SandboxError::WritesHome {
                    path: p.clone(),
                    home: home.to_path_buf(),
                    hint: "list narrower directories in `write`",
                });
            }
            add(p.clone(), true, true);
        }
        // A grant inside a protected path stands only when the user listed it.
        let grants = grants
            .into_iter()
            .filter(|g| {
                let inside_protected = protected.iter().any(|p| g.path.starts_with(p));
                !inside_protected || explicit.iter().any(|e| e == &g.path)
            })
            .collect();
        Ok(Policy { grants, protected, network: self.network, limits: self.limits })
    }
}

/// The installation a program belongs to: `/x/y` for `/x/y/bin/prog`, else the program's
/// directory; never HOME, `/` or anything holding HOME.
fn installation(program: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let program = normalize(program);
    let dir = program.parent()?;
    let prefix = if dir.file_name().is_some_and(|n| n == "bin") { dir.parent()? } else { dir };
    let too_wide = |p: &Path| p.parent().is_none() || home.is_some_and(|h| h.starts_with(p));
    [prefix, dir].into_iter().find(|p| !too_wide(p)).map(Path::to_path_buf).or_else(|| Some(program.clone()))
}

/// Lexically normalized: `.` removed, `..` applied (never above the root).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// One entry of a directory, as [`expand`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name.
    pub name: OsString,
    /// A symbolic link (never followed when expanding: it could point into a protected path).
    pub symlink: bool,
}

/// The paths that give `grant` minus the protected paths strictly inside it: `grant` itself when
/// none is, else its entries (recursively along the way to each protected path), leaving out
/// the protected ones and symbolic links. `list` lists a directory (empty when unreadable).
pub fn expand(grant: &Path, protected: &[PathBuf], list: &mut dyn FnMut(&Path) -> Vec<Entry>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    expand_into(grant, protected, list, &mut out, 0);
    out
}

/// Deep enough for any real path; a bound against a pathological lister.
const MAX_EXPAND_DEPTH: usize = 64;

fn expand_into(
    grant: &Path,
    protected: &[PathBuf],
    list: &mut dyn FnMut(&Path) -> Vec<Entry>,
    out: &mut Vec<PathBuf>,
    depth: usize,
) {
    let inside: Vec<&PathBuf> = protected.iter().filter(|p| p.starts_with(grant) && p.as_path() != grant).collect();
    if inside.is_empty() {
        out.push(grant.to_path_buf());
        return;
    }
    if depth >= MAX_EXPAND_DEPTH {
        return;
    }
    for entry in list(grant) {
        // A name with a separator or `..` would not be an entry of this directory.
        if Path::new(&entry.name).components().count() != 1
            || matches!(Path::new(&entry.name).components().next(), Some(Component::ParentDir | Component::CurDir))
        {
            continue;
        }
        let child = grant.join(&entry.name);
        // A link could point into a protected path; the applier cannot grant it safely.
        if entry.symlink || inside.iter().any(|p| p.as_path() == child) {
            continue;
        }
        expand_into(&child, protected, list, out, depth + 1);
    }
}

#[cfg(test)]
mod tests;
