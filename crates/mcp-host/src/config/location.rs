//! Where the configuration is, and the workspace rule: the file lives in the user's
//! configuration directory, never in the workspace an agent can write to. A configuration names
//! the commands the host runs, so one an agent could edit is a way to run anything; so is an
//! env file it names. Reading ([`ConfigPath::checked`]) and writing ([`ConfigPath::edit_target`])
//! both refuse a file an agent working in the current directory could have written, unless the
//! user allowed it (`--allow-workspace-config`).

use std::path::{Path, PathBuf};

use super::error::{ConfigError, EditError};

/// Overrides the default configuration path (as `--config` does).
pub const CONFIG_ENV: &str = "MCP_HARNESS_CONFIG";

/// Longest configuration (or env file) read: a configuration is a few kilobytes.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// Longest chain of symlinks followed (the kernel's own limit is 40).
const MAX_LINKS: usize = 40;

/// Where the path of the configuration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Origin {
    /// `--config PATH`.
    Flag,
    /// The environment variable [`CONFIG_ENV`].
    Env,
    /// The default location in the user's configuration directory.
    #[default]
    Default,
}

impl Origin {
    pub(crate) fn not_found_hint(self) -> String {
        match self {
            Self::Flag => " (the path given with --config); check the path, or leave --config out to use your \
                           configuration directory"
                .to_owned(),
            Self::Env => format!(" (the path in {CONFIG_ENV}); check the path, or unset {CONFIG_ENV}"),
            Self::Default => " (the default location); create it with `mcp-harness mcp add` or `mcp-harness mcp \
                              import`, write it by hand (`mcp-harness help config` lists every key), or pass \
                              --config PATH"
                .to_owned(),
        }
    }
}

/// Where the configuration is: `--config` or its variable, else the default location.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ConfigPath {
    /// The path given, if one was.
    pub path: Option<PathBuf>,
    /// Where it came from.
    pub origin: Origin,
    /// `--allow-workspace-config`: the workspace rule is lifted.
    pub allow_workspace: bool,
}

impl ConfigPath {
    /// The configuration at `path` (given by `origin`), under the workspace rule unless
    /// `allow_workspace`.
    pub fn new(path: Option<PathBuf>, origin: Origin, allow_workspace: bool) -> Self {
        Self { path, origin, allow_workspace }
    }

    /// The path to read, checked against the workspace rule.
    pub fn checked(&self) -> Result<PathBuf, ConfigError> {
        let path = match &self.path {
            Some(p) => p.clone(),
            None => default_path()?,
        };
        if self.allow_workspace {
            return Ok(path);
        }
        let cwd = std::env::current_dir().map_err(ConfigError::NoCurrentDir)?;
        check_outside_workspace(&path, &cwd, self.origin)
    }

    /// The TOML file edits go to: the path given if one was, else `config.toml` in the
    /// configuration directory; never a JSON file nor one inside the workspace. A symlinked
    /// configuration (dotfiles kept elsewhere) is edited where it points, and stays a link;
    /// both places must be outside the workspace.
    pub fn edit_target(&self) -> Result<PathBuf, EditError> {
        let path = match &self.path {
            Some(path) => path.clone(),
            None => {
                let dir = default_dir().ok_or(ConfigError::NoConfigDir)?;
                let (toml, json) = (dir.join("config.toml"), dir.join("config.json"));
                if !toml.exists() && json.exists() {
                    return Err(EditError::NotOurs {
                        message: format!(
                            "your configuration is {}, which mcp-harness never rewrites; `mcp-harness mcp import \
                             --from claude-desktop {}` copies its servers into config.toml, which is then read instead",
                            json.display(),
                            json.display()
                        ),
                        path: json,
                    });
                }
                toml
            }
        };
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            return Err(EditError::NotOurs {
                message: format!(
                    "{} is JSON, which mcp-harness never rewrites; edits go to an mcp-harness TOML configuration \
                     (`--config other.toml`, or leave --config out for your configuration directory)",
                    path.display()
                ),
                path,
            });
        }
        let target = follow_links(&path)?;
        check_regular(&target)?;
        if !self.allow_workspace {
            let cwd = std::env::current_dir().map_err(ConfigError::NoCurrentDir)?;
            check_target(&path, &cwd)?;
            check_target(&target, &cwd)?;
        }
        Ok(target)
    }
}

/// The user's configuration directory for this program, if there is one.
pub fn default_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "mcp-harness").map(|d| d.config_dir().to_path_buf())
}

/// `config.toml` in the configuration directory, or `config.json` when only that exists.
pub fn default_path() -> Result<PathBuf, ConfigError> {
    let dir = default_dir().ok_or(ConfigError::NoConfigDir)?;
    let toml = dir.join("config.toml");
    let json = dir.join("config.json");
    Ok(if !toml.exists() && json.exists() { json } else { toml })
}

/// Refuses a configuration inside `workspace`, returning the resolved path to read.
///
/// Both the path as given (its directories resolved, not its last component) and its final
/// target count: a symlink inside the workspace is refused wherever it points, since an agent
/// could point it anywhere, and a link from outside into the workspace is refused too.
///
/// The user's configuration directory is trusted wherever the command runs (from the home
/// directory or `/`, the workspace contains it): a file in it is refused only when it resolves
/// into the workspace outside that directory.
pub fn check_outside_workspace(path: &Path, workspace: &Path, origin: Origin) -> Result<PathBuf, ConfigError> {
    let not_readable = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => ConfigError::NotFound { path: path.to_path_buf(), origin },
        _ => ConfigError::Read { path: path.to_path_buf(), reason: source },
    };
    let resolved = path.canonicalize().map_err(not_readable)?;
    let workspace = workspace.canonicalize().map_err(ConfigError::NoCurrentDir)?;
    let as_given = match (path.parent().filter(|p| !p.as_os_str().is_empty()), path.file_name()) {
        (Some(dir), Some(name)) => dir.canonicalize().map_err(not_readable)?.join(name),
        (None, Some(name)) => std::env::current_dir()
            .map_err(ConfigError::NoCurrentDir)?
            .canonicalize()
            .map_err(ConfigError::NoCurrentDir)?
            .join(name),
        _ => resolved.clone(),
    };
    if let Some(shown) = in_workspace(&as_given, &resolved, &workspace) {
        return Err(ConfigError::InWorkspace { path: shown, workspace, default_dir: default_dir() });
    }
    Ok(resolved)
}

/// Which of `as_given` and `resolved` (canonical paths of one file) an agent working in
/// `workspace` (canonical) could have written, if either: inside the workspace and not inside
/// the user's own configuration directory.
fn in_workspace(as_given: &Path, resolved: &Path, workspace: &Path) -> Option<PathBuf> {
    // Resolved even before it exists: the first `mcp add` creates it.
    let trusted = default_dir().and_then(|d| resolve_existing_part(&d).ok());
    let exposed = |p: &Path| p.starts_with(workspace) && !trusted.as_deref().is_some_and(|t| p.starts_with(t));
    if exposed(as_given) {
        Some(as_given.to_path_buf())
    } else if exposed(resolved) {
        Some(resolved.to_path_buf())
    } else {
        None
    }
}

/// `path` with its longest existing ancestor resolved (symlinks, `..`) and the rest as written:
/// where a file that may not exist yet would be.
fn resolve_existing_part(path: &Path) -> std::io::Result<PathBuf> {
    let absolute = std::path::absolute(path)?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(existing).is_err() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else { break };
        rest.push(name.to_owned());
        existing = parent;
    }
    let mut resolved = existing.canonicalize()?;
    resolved.extend(rest.iter().rev());
    Ok(resolved)
}

/// `path` as it will be written, refused when an agent working in `workspace` could have
/// written it (the file, or a symlink or directory on the way).
fn check_target(path: &Path, workspace: &Path) -> Result<(), EditError> {
    let resolve =
        |p: &Path| resolve_existing_part(p).map_err(|source| EditError::Resolve { path: p.to_path_buf(), source });
    let workspace =
        workspace.canonicalize().map_err(|source| EditError::Resolve { path: workspace.to_path_buf(), source })?;
    // The directories resolved, the file itself as named (a link is judged where it is, and
    // where it points).
    let as_given = match (path.parent().filter(|p| !p.as_os_str().is_empty()), path.file_name()) {
        (Some(dir), Some(name)) => resolve(dir)?.join(name),
        (None, Some(name)) => resolve(Path::new("."))?.join(name),
        _ => resolve(path)?,
    };
    // A dangling link has no target yet: its target is checked by the caller (`follow_links`).
    let resolved = resolve_existing_part(path).unwrap_or_else(|_| as_given.clone());
    if let Some(shown) = in_workspace(&as_given, &resolved, &workspace) {
        return Err(EditError::InWorkspace { path: shown, workspace });
    }
    Ok(())
}

/// The file `path` names once its symlinks are followed, whether it exists or not (a link to a
/// file not created yet leads to where it will be).
fn follow_links(path: &Path) -> Result<PathBuf, EditError> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&current)
                    .map_err(|source| EditError::Symlink { path: current.clone(), source })?;
                current = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(EditError::Links { path: path.to_path_buf() })
}

/// Refuses a path that exists and is not a regular file once its links are followed: a
/// directory, a device (`/dev/null`, linked to turn a configuration off), a pipe or a socket.
/// Reading a pipe would wait for a writer with no signal heard, and an edit would put a file
/// in place of the device.
pub(crate) fn check_regular(path: &Path) -> Result<(), ConfigError> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => {
            let kind = if meta.is_dir() { "a directory" } else { "not a regular file (a device, pipe or socket)" };
            Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                key: None,
                message: format!("it is {kind}; a configuration is a file"),
                position: None,
            })
        }
        _ => Ok(()),
    }
}

/// The text of the file at `path`, bounded; `None` when there is none.
pub(crate) fn read_text_if_any(path: &Path) -> Result<Option<String>, ConfigError> {
    match read_text(path, Origin::Flag) {
        Ok(text) => Ok(Some(text)),
        Err(ConfigError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The text of the file at `path`, bounded.
pub(crate) fn read_text(path: &Path, origin: Origin) -> Result<String, ConfigError> {
    use std::io::Read as _;
    let failed = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => ConfigError::NotFound { path: path.to_path_buf(), origin },
        _ => ConfigError::Read { path: path.to_path_buf(), reason: source },
    };
    let mut text = String::new();
    private_files::open_regular(path)
        .map_err(|e| match e.kind() {
            // Said as a configuration's own error (a directory, a device), unless it changed since.
            std::io::ErrorKind::InvalidInput => check_regular(path).err().unwrap_or_else(|| failed(e)),
            _ => failed(e),
        })?
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(failed)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            key: None,
            message: format!("larger than {} MiB; this is not a configuration file", MAX_FILE_BYTES >> 20),
            position: None,
        });
    }
    Ok(text)
}
