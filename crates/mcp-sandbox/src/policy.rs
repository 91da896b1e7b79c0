//! What a confined server may do: the request ([`Sandbox`]), the facts of one start
//! ([`Context`]) and the resolved [`Policy`] the launcher applies, with the server's
//! [`WorkingDir`]. Pure: no file is read here (the facts are gathered by [`crate::probe`]); the
//! applier expands grants around protected paths with [`expand`], given a directory lister,
//! and makes the caches a start form writes to.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::start;

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
/// `standard` lets a typical server work, however it is started (`npx`, `uvx`, `node SCRIPT`,
/// ...): it reads the system (`/usr`, `/etc`, `/proc`, ...), the interpreters' installations,
/// the tools on its PATH, its script's project and `node_modules`, reads and writes its working
/// directory (or a private one), a private temporary directory and the package caches (made
/// when the start form needs one that does not exist yet), and has the network. It never reads
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
    // Homebrew on Linux.
    "/home/linuxbrew/.linuxbrew",
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
    ".cargo/bin",
    "go/bin",
    ".linuxbrew",
    ".gitconfig",
    ".config/git",
    ".cache/ms-playwright",
];

/// Package caches under HOME that `standard` reads and writes when they exist (npx and uvx
/// install into them); those of the server's start form are made when they do not.
const HOME_WRITE: &[&str] = &[
    ".npm",
    ".cache/uv",
    ".local/share/uv",
    ".cache/pip",
    ".cache/pypoetry",
    ".cache/node-gyp",
    ".local/share/pnpm",
    ".cache/pnpm",
    ".local/state/pnpm",
    ".cache/yarn",
    ".bun/install/cache",
    ".cache/deno",
    ".local/share/pipx",
    ".local/pipx",
    ".cache/pipx",
    ".local/state/pipx",
];

/// Facts about one start, gathered by the adapter ([`crate::probe::context`] reads them from
/// the filesystem). Build it with [`Context::new`] and set what is known.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Context {
    /// The server's HOME (its environment's, which may differ from the host's).
    pub home: Option<PathBuf>,
    /// The server's working directory (absolute): the configured one, else the host's.
    pub cwd: PathBuf,
    /// Whether the server's configuration names `cwd` (else it is the host's own, wherever
    /// the host was started: one the sandbox cannot grant gives way to a private one).
    pub cwd_configured: bool,
    /// The server's private temporary directory (absolute); its parent is the shared one.
    pub temp: PathBuf,
    /// The program, absolute: first as found on PATH (its name tells how the server is
    /// started: `npx`, `uvx`, `node`, ...), then with symbolic links resolved, then the
    /// interpreters its `#!` line names (a Python virtual environment links to its interpreter;
    /// `npx` is a script run by `node`).
    pub program: Vec<PathBuf>,
    /// The program's arguments.
    pub args: Vec<OsString>,
    /// Files the command line names (absolute paths of existing files, such as a script):
    /// readable, each file alone.
    pub files: Vec<PathBuf>,
    /// The project folders of the script and program ([`crate::package_root`], or the script's
    /// own folder): readable.
    pub projects: Vec<PathBuf>,
    /// The server's environment: `PATH` (its tools are readable) and the variables that move
    /// package caches (`XDG_CACHE_HOME`, `npm_config_cache`, `UV_CACHE_DIR`, ...).
    pub env: Vec<(OsString, OsString)>,
}

impl Context {
    /// A start in `cwd` (not configured) with the private temporary directory `temp`, and
    /// nothing else known.
    pub fn new(cwd: impl Into<PathBuf>, temp: impl Into<PathBuf>) -> Self {
        Self {
            home: None,
            cwd: cwd.into(),
            cwd_configured: false,
            temp: temp.into(),
            program: Vec::new(),
            args: Vec::new(),
            files: Vec::new(),
            projects: Vec::new(),
            env: Vec::new(),
        }
    }

    /// The shared temporary directory (the private one's parent).
    fn shared_temp(&self) -> Option<PathBuf> {
        normalize(&self.temp).parent().filter(|p| p.parent().is_some()).map(Path::to_path_buf)
    }

    /// The value the server sees for `name`.
    fn var(&self, name: &str) -> Option<&OsString> {
        self.env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

/// Whether a grant's path must exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Presence {
    /// The start fails when it does not exist (the user listed it).
    Required,
    /// Skipped when absent (`standard`'s own paths).
    IfExists,
    /// Made (mode 0700) when absent, if what is missing lies in a folder of the user's own: a
    /// package cache that the start form writes to (a user who never ran `npx` has no `~/.npm`).
    Create,
}

/// One grant of the resolved policy.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// The path (a directory grants everything beneath it).
    pub path: PathBuf,
    /// Read, write and create (else read and execute).
    pub write: bool,
    /// What happens when it does not exist.
    pub presence: Presence,
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

impl Policy {
    /// Whether the policy lets the server read (`write`: also write) `path`: a grant holds it
    /// and no protected path that the grant does not itself lie in.
    pub fn allows(&self, path: &Path, write: bool) -> bool {
        let path = normalize(path);
        self.grants.iter().any(|g| {
            path.starts_with(&g.path)
                && (g.write || !write)
                && !self.protected.iter().any(|p| path.starts_with(p) && !g.path.starts_with(p))
        })
    }
}

/// One start, resolved: the policy and where the server works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What the launcher applies.
    pub policy: Policy,
    /// Where the server works, and why there.
    pub working_dir: WorkingDir,
    /// The directory to start the server in: the granted working directory, or the private
    /// one ([`Resolved::PRIVATE_CWD`] in the private temporary directory, which the adapter
    /// makes).
    pub cwd: PathBuf,
}

impl Resolved {
    /// The private working directory's name inside the private temporary directory.
    pub const PRIVATE_CWD: &'static str = "work";
}

/// Where a confined server works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkingDir {
    /// The directory it was started in, readable and writable.
    Granted(PathBuf),
    /// A private folder of its own (removed when it stops), because the directory the host
    /// was started in cannot be granted.
    Private {
        /// The host's directory the server would have worked in.
        requested: PathBuf,
        /// Why it cannot be granted.
        problem: CwdProblem,
    },
}

impl std::fmt::Display for WorkingDir {
    /// `PATH`, or `private, because PATH is your home directory (...)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Granted(path) => write!(f, "{}", path.display()),
            Self::Private { requested, problem } => write!(
                f,
                "private (a folder of its own, removed when it stops), because {} {problem}; \
                 a `cwd` in its configuration chooses one",
                requested.display()
            ),
        }
    }
}

/// Why a directory cannot be a confined server's working directory (it would be writable).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CwdProblem {
    /// It is or holds HOME, whose shell start-up files run outside the sandbox later.
    HoldsHome {
        /// HOME.
        home: PathBuf,
        /// It is HOME itself.
        is_home: bool,
    },
    /// It is `/`.
    Root,
    /// It is or holds a system directory (`/usr`, `/etc`, ...).
    HoldsSystem(PathBuf),
    /// It lies in a system directory (only a configured `cwd` may).
    InsideSystem(PathBuf),
    /// It is or holds the shared temporary directory, where other programs keep their files.
    SharedTemp(PathBuf),
    /// It lies in a protected path (listing it in `write` grants it).
    InsideProtected(PathBuf),
    /// It holds a protected path, which Landlock cannot leave out of a writable directory.
    HoldsProtected(PathBuf),
}

impl std::fmt::Display for CwdProblem {
    /// A predicate: "is your home directory (...)".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::HoldsHome { is_home: true, .. } => {
                write!(f, "is your home directory (whose start-up files run outside the sandbox)")
            }
            Self::HoldsHome { home, .. } => {
                write!(f, "holds your home directory {} (whose start-up files run outside the sandbox)", home.display())
            }
            Self::Root => write!(f, "is the root directory"),
            Self::HoldsSystem(dir) => write!(f, "is or holds the system directory {}", dir.display()),
            Self::InsideSystem(dir) => write!(f, "is inside the system directory {}", dir.display()),
            Self::SharedTemp(dir) => {
                write!(f, "is or holds the shared temporary directory {} (other programs' files)", dir.display())
            }
            Self::InsideProtected(p) => write!(f, "is inside {}, which the sandbox keeps from servers", p.display()),
            Self::HoldsProtected(p) => write!(
                f,
                "holds {}, which the sandbox keeps from servers (Landlock cannot leave it out of a writable folder)",
                p.display()
            ),
        }
    }
}

/// How many suggested replacements a refused grant lists.
const MAX_INSTEAD: usize = 12;

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
    /// A `write` entry holds a protected path: Landlock cannot leave a folder out of a
    /// writable one, so the grant would shrink to the entries beside it (no file could be
    /// created in it).
    #[error(
        "the sandbox cannot give write access to {}: it holds {}, which the sandbox keeps from servers, and \
         Landlock cannot leave a folder out of a writable one; {}",
        grant.display(), protected.display(), instead_text(grant, protected, instead)
    )]
    HoldsProtected {
        /// The `write` entry.
        grant: PathBuf,
        /// The protected path inside it.
        protected: PathBuf,
        /// What gives the rest of it: its entries beside the protected path (as far as they
        /// were listed; at most a few).
        instead: Vec<PathBuf>,
    },
    /// The configured working directory cannot be granted.
    #[error("the sandbox cannot give the server its working directory {}: it {problem}; {}", cwd.display(), cwd_hint(problem))]
    WorkingDir {
        /// The configured `cwd`.
        cwd: PathBuf,
        /// Why not.
        problem: CwdProblem,
    },
}

fn cwd_hint(problem: &CwdProblem) -> &'static str {
    match problem {
        CwdProblem::InsideProtected(_) => "list it in `write` to grant it, or choose another `cwd`",
        _ => "give the server a working directory of its own (`cwd`), or `sandbox = \"off\"`",
    }
}

/// A path as a TOML string.
pub(crate) fn toml_string(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn instead_text(grant: &Path, protected: &Path, instead: &[PathBuf]) -> String {
    if instead.is_empty() {
        return format!(
            "list the folders inside {} that the server needs (not {}) in `write` instead",
            grant.display(),
            protected.display()
        );
    }
    let shown: Vec<String> = instead.iter().take(MAX_INSTEAD).map(|p| toml_string(p)).collect();
    let more = if instead.len() > MAX_INSTEAD { ", ..." } else { "" };
    format!("write instead `write = [{}{more}]` (what is beside it), or only what the server needs", shown.join(", "))
}

/// System directories a server never gets as its working directory, nor one that holds them;
/// nor, unless it is configured, one inside them.
const SYSTEM_CWD: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/boot",
    "/dev",
    "/proc",
    "/sys",
    "/run",
    "/nix",
    "/var/lib",
    "/var/cache",
    "/var/log",
    "/var/spool",
    "/var/mail",
];

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

    /// The protected paths that are cut out of wider grants: all but those listed themselves in
    /// `write` (granted whole, so nothing needs cutting).
    fn cut_out(&self, home: Option<&Path>) -> Vec<PathBuf> {
        let listed: Vec<PathBuf> = self.write.iter().map(|p| normalize(p)).collect();
        self.protected_paths(home).into_iter().filter(|p| !listed.contains(p)).collect()
    }

    /// Checks the request as written, for the configuration reader: every path absolute, no
    /// `write` entry holding HOME, and none holding a protected path (the host's configuration
    /// and data must be in [`Sandbox::protect`] by then). The refusal names both paths and
    /// what to write instead: `list` lists a directory for that (`|_| Vec::new()` for no
    /// listing; [`crate::probe::list_dir`] reads the filesystem). [`Sandbox::resolve`] refuses
    /// the same at each start.
    pub fn check(&self, home: Option<&Path>, list: &mut dyn FnMut(&Path) -> Vec<Entry>) -> Result<(), SandboxError> {
        for path in self.read.iter().chain(&self.write).chain(&self.protect) {
            if !path.is_absolute() {
                return Err(SandboxError::NotAbsolute(path.clone()));
            }
        }
        let home = home.filter(|h| h.is_absolute()).map(normalize);
        let cut_out = self.cut_out(home.as_deref());
        for path in &self.write {
            let path = normalize(path);
            if let Some(home) = home.as_deref().filter(|h| h.starts_with(&path)) {
                return Err(SandboxError::WritesHome {
                    path,
                    home: home.to_path_buf(),
                    hint: "list narrower directories in `write`",
                });
            }
            if let Some(protected) = cut_out.iter().find(|p| p.starts_with(&path) && **p != path) {
                let mut instead = expand(&path, &cut_out, list);
                instead.sort();
                instead.truncate(MAX_INSTEAD + 1);
                return Err(SandboxError::HoldsProtected { grant: path, protected: protected.clone(), instead });
            }
        }
        Ok(())
    }

    /// Resolves the request for one start into the [`Policy`] (see [`Sandbox::resolve`]).
    pub fn policy(&self, ctx: &Context) -> Result<Policy, SandboxError> {
        self.resolve(ctx).map(|r| r.policy)
    }

    /// Where a server of this start works: the working directory, or a private one when the
    /// host's cannot be granted (HOME, `/`, a system or protected folder, ...). A configured
    /// `cwd` that cannot be granted is refused instead.
    pub fn working_dir(&self, ctx: &Context) -> Result<WorkingDir, SandboxError> {
        let home = ctx.home.as_deref().filter(|h| h.is_absolute()).map(normalize);
        let cut_out = self.cut_out(home.as_deref());
        let explicit: Vec<PathBuf> = self.read.iter().chain(&self.write).map(|p| normalize(p)).collect();
        let cwd = normalize(&ctx.cwd);
        let problem = cwd_problem(&cwd, ctx, home.as_deref(), &cut_out, &explicit);
        match problem {
            None => Ok(WorkingDir::Granted(cwd)),
            Some(problem) if ctx.cwd_configured => Err(SandboxError::WorkingDir { cwd, problem }),
            Some(problem) => Ok(WorkingDir::Private { requested: cwd, problem }),
        }
    }

    /// Resolves the request for one start: what `standard` grants for this start form (its
    /// program's installation, its script's project and `node_modules`, the caches its
    /// launcher writes, to be made when missing), the user's paths, and the working directory.
    pub fn resolve(&self, ctx: &Context) -> Result<Resolved, SandboxError> {
        self.check(ctx.home.as_deref(), &mut |_| Vec::new())?;
        let home = ctx.home.as_deref().filter(|h| h.is_absolute()).map(normalize);
        let shared_temp = ctx.shared_temp();
        let protected = self.cut_out(home.as_deref());
        let explicit: Vec<PathBuf> = self.read.iter().chain(&self.write).map(|p| normalize(p)).collect();
        let mut grants: BTreeSet<Grant> = BTreeSet::new();
        let mut add = |path: PathBuf, write: bool, presence: Presence| {
            grants.insert(Grant { path: normalize(&path), write, presence });
        };
        for p in SYSTEM_READ {
            add(PathBuf::from(p), false, Presence::IfExists);
        }
        for p in DEVICES {
            add(PathBuf::from(p), true, Presence::IfExists);
        }
        if let Some(home) = &home {
            for rel in HOME_READ {
                add(home.join(rel), false, Presence::IfExists);
            }
            for rel in HOME_WRITE {
                add(home.join(rel), true, Presence::IfExists);
            }
        }
        let form = ctx.program.first().map_or(start::Form::Other, |p| start::Form::of(p, &ctx.args));
        let env = start::Env { vars: &ctx.env, home: home.as_deref() };
        let made = start::caches(form, &env).into_iter().map(|p| (p, true));
        for (dir, write) in made.chain(start::needed_folders(form, &env).into_iter().map(|p| (p, false))) {
            if !start::too_wide(&normalize(&dir), home.as_deref(), shared_temp.as_deref()) {
                add(dir, write, Presence::Create);
            }
        }
        for program in &ctx.program {
            if let Some(dir) = installation(program, home.as_deref(), shared_temp.as_deref()) {
                add(dir, false, Presence::IfExists);
            }
        }
        // The tools on the server's PATH (a server runs `git`, `uv` finds `python3` there).
        if let Some(path) = ctx.var("PATH") {
            for dir in std::env::split_paths(path).filter(|d| d.is_absolute()) {
                if let Some(dir) = installation(&dir.join("_"), home.as_deref(), shared_temp.as_deref()) {
                    add(dir, false, Presence::IfExists);
                }
            }
        }
        if let Some(node_path) = ctx.var("NODE_PATH") {
            for dir in std::env::split_paths(node_path).filter(|d| d.is_absolute()) {
                if !start::too_wide(&normalize(&dir), home.as_deref(), shared_temp.as_deref()) {
                    add(dir, false, Presence::IfExists);
                }
            }
        }
        for file in &ctx.files {
            add(file.clone(), false, Presence::IfExists);
        }
        for project in &ctx.projects {
            if !start::too_wide(&normalize(project), home.as_deref(), shared_temp.as_deref()) {
                add(project.clone(), false, Presence::IfExists);
            }
        }
        // Node looks for a script's packages in every `node_modules` above it.
        let javascript = |f: &&PathBuf| start::is_script(f) && !f.extension().is_some_and(|e| e == "py" || e == "pyw");
        for file in ctx.files.iter().chain(&ctx.program).filter(javascript) {
            for dir in start::node_modules_path(file) {
                add(dir, false, Presence::IfExists);
            }
        }
        // `uv --directory DIR run ...` works in DIR as in a working directory (its `.venv`).
        if form == start::Form::Uv {
            for dir in start::uv_directories(&ctx.args) {
                let dir = normalize(&ctx.cwd.join(dir));
                let mut as_cwd = ctx.clone();
                as_cwd.cwd.clone_from(&dir);
                as_cwd.cwd_configured = true;
                if cwd_problem(&dir, &as_cwd, home.as_deref(), &protected, &explicit).is_none() {
                    add(dir, true, Presence::IfExists);
                }
            }
        }
        add(ctx.temp.clone(), true, Presence::Required);
        let working_dir = self.working_dir(ctx)?;
        let cwd = match &working_dir {
            WorkingDir::Granted(cwd) => {
                add(cwd.clone(), true, Presence::Required);
                cwd.clone()
            }
            WorkingDir::Private { .. } => normalize(&ctx.temp).join(Resolved::PRIVATE_CWD),
        };
        for p in &self.read {
            add(p.clone(), false, Presence::Required);
        }
        for p in &self.write {
            add(p.clone(), true, Presence::Required);
        }
        // A grant inside a protected path stands only when the user listed it.
        let grants = grants
            .into_iter()
            .filter(|g| {
                let inside_protected = protected.iter().any(|p| g.path.starts_with(p));
                !inside_protected || explicit.iter().any(|e| e == &g.path)
            })
            .collect();
        let policy = Policy { grants, protected, network: self.network, limits: self.limits };
        Ok(Resolved { policy, working_dir, cwd })
    }
}

/// Why `cwd` cannot be granted as the working directory, if it cannot.
fn cwd_problem(
    cwd: &Path,
    ctx: &Context,
    home: Option<&Path>,
    protected: &[PathBuf],
    explicit: &[PathBuf],
) -> Option<CwdProblem> {
    if let Some(home) = home.filter(|h| h.starts_with(cwd)) {
        return Some(CwdProblem::HoldsHome { home: home.to_path_buf(), is_home: home == cwd });
    }
    if cwd.parent().is_none() {
        return Some(CwdProblem::Root);
    }
    if let Some(dir) = SYSTEM_CWD.iter().map(Path::new).find(|s| s.starts_with(cwd)) {
        return Some(CwdProblem::HoldsSystem(dir.to_path_buf()));
    }
    if let Some(dir) = SYSTEM_CWD.iter().map(Path::new).find(|s| cwd.starts_with(s))
        && !ctx.cwd_configured
    {
        return Some(CwdProblem::InsideSystem(dir.to_path_buf()));
    }
    if let Some(temp) = ctx.shared_temp().filter(|t| t.starts_with(cwd)) {
        return Some(CwdProblem::SharedTemp(temp));
    }
    let listed_inside = |p: &Path| explicit.iter().any(|e| cwd.starts_with(e) && e.starts_with(p));
    if let Some(p) = protected.iter().find(|p| cwd.starts_with(p) && !listed_inside(p)) {
        return Some(CwdProblem::InsideProtected(p.clone()));
    }
    if let Some(p) = protected.iter().find(|p| p.starts_with(cwd) && p.as_path() != cwd) {
        return Some(CwdProblem::HoldsProtected(p.clone()));
    }
    None
}

/// The installation a program belongs to: `/x/y` for `/x/y/bin/prog` (or `/x/y/shims/prog`,
/// pyenv's and asdf's shims), else the program's directory; only the `bin` folder when `/x/y`
/// is a folder of HOME's own shared with much else (`~/.local`, `~/.cargo`, `~/go`); never
/// HOME, `/`, the shared temporary folder or anything holding one (a program in `/tmp` brings
/// itself only, not every other user's files there).
fn installation(program: &Path, home: Option<&Path>, shared_temp: Option<&Path>) -> Option<PathBuf> {
    let program = normalize(program);
    let dir = program.parent()?;
    let is_bin = dir.file_name().is_some_and(|n| n == "bin" || n == "shims");
    let too_wide = |p: &Path| start::too_wide(p, home, shared_temp);
    let shared = |p: &Path| home.is_some_and(|h| p.parent() == Some(h));
    let prefix = dir.parent().filter(|p| is_bin && !too_wide(p) && !shared(p));
    prefix.or(Some(dir).filter(|d| !too_wide(d))).map(Path::to_path_buf).or(Some(program))
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

/// Whether a grant written as `written`, which resolves to `resolved` once its links are
/// followed, was led by a link onto protected ground: into a protected path it was not written
/// inside, or onto a folder holding one (the home, say) when it was written over none. Grants
/// come from places a server may write (a file on its command line, `node_modules`, `uv
/// --directory`, its working folder), so a server could plant such a link for its next start;
/// the applier leaves those grants out. `protected` holds each protected path as written and
/// resolved.
pub(crate) fn redirected_onto_protected(written: &Path, resolved: &Path, protected: &[PathBuf]) -> bool {
    if written == resolved {
        return false;
    }
    let written_inside = protected.iter().any(|p| written.starts_with(p));
    let written_over = protected.iter().any(|p| p.starts_with(written));
    let into = !written_inside && protected.iter().any(|p| resolved.starts_with(p));
    let over = !written_over && protected.iter().any(|p| p.starts_with(resolved));
    into || over
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
