//! The common ways a server is started, as far as its confinement cares: which package caches
//! the launcher program (`npx`, `uvx`, ...) writes to, and where a script's project is. Pure:
//! existence is asked of the caller ([`package_root`]).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// How a server's command starts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// `npx`, `npm exec`, `npm x`.
    Npx,
    /// `pnpm dlx`, `pnpx` (and `pnpm` otherwise).
    Pnpm,
    /// `bunx`, `bun x`, `bun SCRIPT` (bun installs missing packages on the fly).
    Bun,
    /// `uvx`, `uv run`, `uv tool run`.
    Uv,
    /// `pipx run`.
    Pipx,
    /// `deno run`.
    Deno,
    /// `node SCRIPT` (and `tsx`, `ts-node`).
    Node,
    /// `python SCRIPT`.
    Python,
    /// Anything else: a binary, a script with a `#!` line.
    Other,
}

impl Form {
    /// The form of `program` (as found on PATH, so its name is the command's) run with `args`.
    pub(crate) fn of(program: &Path, args: &[OsString]) -> Self {
        let name = program.file_name().and_then(OsStr::to_str).unwrap_or_default();
        let first = args.iter().find(|a| !a.to_string_lossy().starts_with('-')).and_then(|a| a.to_str());
        match name {
            "npx" => Self::Npx,
            "npm" if matches!(first, Some("exec" | "x")) => Self::Npx,
            "pnpm" | "pnpx" => Self::Pnpm,
            "bun" | "bunx" => Self::Bun,
            "uv" | "uvx" => Self::Uv,
            "pipx" => Self::Pipx,
            "deno" => Self::Deno,
            "node" | "nodejs" | "tsx" | "ts-node" => Self::Node,
            _ if is_python(name) => Self::Python,
            _ => Self::Other,
        }
    }

    /// Whether its first file argument is a script of a project.
    pub(crate) fn runs_a_script(self) -> bool {
        matches!(self, Self::Node | Self::Bun | Self::Deno | Self::Python | Self::Uv)
    }
}

/// `python`, `python3`, `python3.12`, `pypy3`.
fn is_python(name: &str) -> bool {
    let rest = name.strip_prefix("python").or_else(|| name.strip_prefix("pypy")).unwrap_or("-");
    rest.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// The server's environment, as far as cache locations go.
pub(crate) struct Env<'a> {
    pub(crate) vars: &'a [(OsString, OsString)],
    pub(crate) home: Option<&'a Path>,
}

impl Env<'_> {
    /// An absolute path the variable `name` sets (the last one set wins).
    fn path(&self, name: &str) -> Option<PathBuf> {
        let (_, value) = self.vars.iter().rev().find(|(k, _)| k == name)?;
        let path = PathBuf::from(value);
        path.is_absolute().then_some(path)
    }

    /// `$var`, else HOME/`rel`.
    fn base(&self, var: &str, rel: &str) -> Option<PathBuf> {
        self.path(var).or_else(|| self.home.map(|h| h.join(rel)))
    }

    fn cache(&self) -> Option<PathBuf> {
        self.base("XDG_CACHE_HOME", ".cache")
    }

    fn data(&self) -> Option<PathBuf> {
        self.base("XDG_DATA_HOME", ".local/share")
    }

    fn state(&self) -> Option<PathBuf> {
        self.base("XDG_STATE_HOME", ".local/state")
    }

    /// `$var` when set, else `fallback`.
    fn or(&self, var: &str, fallback: Option<PathBuf>) -> Option<PathBuf> {
        self.path(var).or(fallback)
    }
}

/// The package caches and tool folders `form` writes to, which the sandbox creates (0700) when
/// they do not exist yet: a user who never ran `npx` has no `~/.npm`.
pub(crate) fn caches(form: Form, env: &Env<'_>) -> Vec<PathBuf> {
    let join = |base: Option<PathBuf>, rel: &str| base.map(|b| b.join(rel));
    let out = match form {
        Form::Npx => vec![
            env.or("npm_config_cache", env.or("NPM_CONFIG_CACHE", env.home.map(|h| h.join(".npm")))),
            join(env.cache(), "node-gyp"),
        ],
        Form::Pnpm => {
            vec![env.or("PNPM_HOME", join(env.data(), "pnpm")), join(env.cache(), "pnpm"), join(env.state(), "pnpm")]
        }
        Form::Bun => vec![env.or(
            "BUN_INSTALL_CACHE_DIR",
            join(env.or("BUN_INSTALL", env.home.map(|h| h.join(".bun"))), "install/cache"),
        )],
        Form::Uv => vec![
            env.or("UV_CACHE_DIR", join(env.cache(), "uv")),
            join(env.data(), "uv"),
            env.path("UV_TOOL_DIR"),
            env.path("UV_PYTHON_INSTALL_DIR"),
        ],
        // pipx makes its environments with uv when uv is there (else pip).
        Form::Pipx => vec![
            env.or("PIPX_HOME", join(env.data(), "pipx")),
            join(env.cache(), "pipx"),
            join(env.state(), "pipx"),
            join(env.cache(), "pip"),
            env.or("UV_CACHE_DIR", join(env.cache(), "uv")),
            join(env.data(), "uv"),
        ],
        Form::Deno => vec![env.or("DENO_DIR", join(env.cache(), "deno"))],
        Form::Node | Form::Python | Form::Other => Vec::new(),
    };
    out.into_iter().flatten().collect()
}

/// Folders `form` only needs to exist (it makes them, and fails when it cannot, but writes
/// nothing there for a run): made (0700) when missing, and readable. `pipx run` makes its
/// `bin` and `man` folders at every start; the `bin` folder is on the user's PATH, so it is
/// never writable.
pub(crate) fn needed_folders(form: Form, env: &Env<'_>) -> Vec<PathBuf> {
    match form {
        Form::Pipx => [
            env.or("PIPX_BIN_DIR", env.home.map(|h| h.join(".local/bin"))),
            env.or("PIPX_MAN_DIR", env.data().map(|d| d.join("man"))),
        ]
        .into_iter()
        .flatten()
        .collect(),
        _ => Vec::new(),
    }
}

/// The folders `uv --directory DIR` and `uv --project DIR` name.
pub(crate) fn uv_directories(args: &[OsString]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if text == "--" {
            break;
        }
        for flag in ["--directory", "--project"] {
            if text == flag {
                out.extend(args.next().map(PathBuf::from));
            } else if let Some(value) = text.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
                out.push(PathBuf::from(value));
            }
        }
    }
    out
}

/// What marks a project's root folder.
pub const PROJECT_MARKERS: &[&str] =
    &["package.json", "pyproject.toml", "setup.py", "setup.cfg", "deno.json", "deno.jsonc", ".git"];

/// Files that are scripts (their project comes with them), by extension.
const SCRIPT_EXTENSIONS: &[&str] = &["js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "py", "pyw"];

/// Whether `file` looks like a script.
pub(crate) fn is_script(file: &Path) -> bool {
    file.extension().and_then(OsStr::to_str).is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e))
}

/// Folders every user writes into, whatever `TMPDIR` says.
const SHARED_FOLDERS: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// Whether `dir` is too wide to grant as a project: the root, HOME or a folder that holds it,
/// a shared temporary directory (the host's, `/tmp`, `/var/tmp`, `/dev/shm`: other users'
/// files) or one that holds it.
pub(crate) fn too_wide(dir: &Path, home: Option<&Path>, shared_temp: Option<&Path>) -> bool {
    dir.parent().is_none()
        || home.is_some_and(|h| h.starts_with(dir))
        || shared_temp.is_some_and(|t| t.starts_with(dir))
        || SHARED_FOLDERS.iter().any(|shared| Path::new(shared).starts_with(dir))
}

/// The root of the project `file` belongs to: the nearest folder above it that holds one of
/// [`PROJECT_MARKERS`], never HOME, `/` or anything too wide (`too_wide`). `exists` says whether a path
/// exists (the caller's I/O).
pub fn package_root(
    file: &Path,
    home: Option<&Path>,
    shared_temp: Option<&Path>,
    exists: &mut dyn FnMut(&Path) -> bool,
) -> Option<PathBuf> {
    for dir in file.ancestors().skip(1) {
        if too_wide(dir, home, shared_temp) {
            return None;
        }
        if PROJECT_MARKERS.iter().any(|m| exists(&dir.join(m))) {
            return Some(dir.to_path_buf());
        }
    }
    None
}

/// The `node_modules` folders node looks in for the packages `file` imports: one in each folder
/// above it, nearest first.
pub(crate) fn node_modules_path(file: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    file.ancestors()
        .skip(1)
        .filter(|dir| dir.file_name().is_none_or(|n| n != "node_modules"))
        .map(|dir| dir.join("node_modules"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_form_comes_from_the_command_and_its_subcommand() {
        let cases = [
            ("/usr/bin/npx", &["-y", "pkg"][..], Form::Npx),
            ("/usr/bin/npm", &["exec", "pkg"], Form::Npx),
            ("/usr/bin/npm", &["start"], Form::Other),
            ("/h/.local/share/pnpm/pnpm", &["dlx", "pkg"], Form::Pnpm),
            ("/h/.bun/bin/bunx", &["pkg"], Form::Bun),
            ("/h/.local/bin/uvx", &["mcp-server-time"], Form::Uv),
            ("/h/.local/bin/uv", &["run", "server.py"], Form::Uv),
            ("/usr/bin/pipx", &["run", "pkg"], Form::Pipx),
            ("/h/.deno/bin/deno", &["run", "-A", "main.ts"], Form::Deno),
            ("/usr/bin/node", &["dist/index.js"], Form::Node),
            ("/usr/bin/python3.12", &["server.py"], Form::Python),
            ("/usr/bin/python", &["-m", "srv"], Form::Python),
            ("/usr/bin/pythonista", &[], Form::Other),
            ("/opt/srv/bin/server", &[], Form::Other),
        ];
        for (program, list, form) in cases {
            assert_eq!(Form::of(Path::new(program), &args(list)), form, "{program} {list:?}");
        }
    }

    #[test]
    fn caches_follow_home_and_the_variables_that_move_them() {
        let home = Path::new("/h");
        let none = Env { vars: &[], home: Some(home) };
        let paths = |v: Vec<PathBuf>| v.into_iter().map(|p| p.to_string_lossy().into_owned()).collect::<Vec<_>>();
        assert_eq!(paths(caches(Form::Npx, &none)), ["/h/.npm", "/h/.cache/node-gyp"]);
        assert_eq!(paths(caches(Form::Uv, &none)), ["/h/.cache/uv", "/h/.local/share/uv"]);
        assert_eq!(
            paths(caches(Form::Pipx, &none)),
            [
                "/h/.local/share/pipx",
                "/h/.cache/pipx",
                "/h/.local/state/pipx",
                "/h/.cache/pip",
                "/h/.cache/uv",
                "/h/.local/share/uv"
            ]
        );
        assert_eq!(paths(caches(Form::Bun, &none)), ["/h/.bun/install/cache"]);
        assert_eq!(paths(caches(Form::Deno, &none)), ["/h/.cache/deno"]);
        assert!(caches(Form::Node, &none).is_empty() && caches(Form::Other, &none).is_empty());
        assert_eq!(paths(needed_folders(Form::Pipx, &none)), ["/h/.local/bin", "/h/.local/share/man"]);
        assert!(needed_folders(Form::Npx, &none).is_empty());
        let vars = [
            (OsString::from("XDG_CACHE_HOME"), OsString::from("/c")),
            (OsString::from("npm_config_cache"), OsString::from("/n")),
            (OsString::from("UV_CACHE_DIR"), OsString::from("relative/ignored")),
        ];
        let moved = Env { vars: &vars, home: Some(home) };
        assert_eq!(paths(caches(Form::Npx, &moved)), ["/n", "/c/node-gyp"]);
        assert_eq!(paths(caches(Form::Uv, &moved)), ["/c/uv", "/h/.local/share/uv"]);
        // Without HOME, only what a variable names.
        assert_eq!(paths(caches(Form::Uv, &Env { vars: &vars, home: None })), ["/c/uv"]);
    }

    #[test]
    fn a_project_root_is_the_nearest_marked_folder_never_home_root_or_temp() {
        let tree = ["/h/src/app/package.json", "/h/src/.git", "/h/.git", "/srv/py/pyproject.toml", "/tmp/.git"];
        let mut exists = |p: &Path| tree.iter().any(|t| Path::new(t) == p);
        let home = Some(Path::new("/h"));
        let temp = Some(Path::new("/tmp"));
        let mut root = |file: &str| package_root(Path::new(file), home, temp, &mut exists);
        assert_eq!(root("/h/src/app/dist/index.js"), Some(PathBuf::from("/h/src/app")));
        assert_eq!(root("/h/src/lib/x.py"), Some(PathBuf::from("/h/src")));
        assert_eq!(root("/srv/py/pkg/server.py"), Some(PathBuf::from("/srv/py")));
        // A dotfiles repository in HOME does not make HOME a project; nor does a marker in /tmp.
        assert_eq!(root("/h/server.js"), None);
        assert_eq!(root("/h/loose/server.js"), None);
        assert_eq!(root("/tmp/x/server.py"), None);
        assert_eq!(root("/server.js"), None);
    }

    #[test]
    fn node_looks_in_every_node_modules_above_the_script() {
        let found: Vec<PathBuf> = node_modules_path(Path::new("/p/node_modules/x/dist/i.js")).collect();
        let expected = [
            "/p/node_modules/x/dist/node_modules",
            "/p/node_modules/x/node_modules",
            "/p/node_modules",
            "/node_modules",
        ];
        assert_eq!(found, expected.map(PathBuf::from));
        assert!(
            is_script(Path::new("/a/b.mjs")) && is_script(Path::new("s.py")) && !is_script(Path::new("/a/data.json"))
        );
    }
}
