//! Why a configuration cannot be read, used or edited: every message names the file, the key
//! and what was expected.

use std::fmt;
use std::path::PathBuf;

use super::location::{CONFIG_ENV, Origin};

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file does not exist.
    #[error("no configuration file at {}{}", path.display(), origin.not_found_hint())]
    NotFound {
        /// The path looked at.
        path: PathBuf,
        /// Where the path came from (the hint says what to do about it).
        origin: Origin,
    },
    /// The file exists but cannot be read.
    #[error("config error in {}: cannot read it: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's reason (part of the message, not a source: a chain printed whole would
        /// say it twice).
        reason: std::io::Error,
    },
    /// The content is wrong.
    #[error("config error in {}: {}", path.display(), Problem { key: key.as_deref(), message, position: *position })]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key, as the file spells it (`servers.git.args`), when one is at fault.
        key: Option<String>,
        /// What is wrong and what was expected.
        message: String,
        /// Line and column (1-based, in characters), when known.
        position: Option<(usize, usize)>,
    },
    /// The file is inside the workspace.
    #[error(
        "refusing to use the configuration {}: it is inside the current directory {}, which an agent working \
         here can write to, and a configuration decides which commands this host runs. Keep it in your \
         configuration directory ({}), or pass --allow-workspace-config if you trust this directory.",
        path.display(), workspace.display(), default_dir.as_deref().map_or_else(|| "see --help".into(), |d| d.display().to_string())
    )]
    InWorkspace {
        /// The file (or the link to it) an agent could have written.
        path: PathBuf,
        /// The workspace (the current directory).
        workspace: PathBuf,
        /// The user's configuration directory, where it belongs.
        default_dir: Option<PathBuf>,
    },
    /// No configuration directory could be determined.
    #[error("cannot determine your configuration directory (is HOME set?); pass --config PATH or set {CONFIG_ENV}")]
    NoConfigDir,
    /// The current directory cannot be determined, so the workspace check cannot be made.
    #[error("cannot determine the current directory, so a workspace configuration cannot be ruled out: {0}")]
    NoCurrentDir(std::io::Error),
}

struct Problem<'a> {
    key: Option<&'a str>,
    message: &'a str,
    position: Option<(usize, usize)>,
}

impl fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(key) = self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(self.message)?;
        if let Some((line, column)) = self.position {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}

/// Why an edit of the configuration (`mcp add`, `remove`, `enable`, `disable`, `import`) was
/// not made. Nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// Finding or reading the file failed as a configuration would.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The file cannot be read (the reason is the error's source).
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The file cannot be written (the reason is the error's source).
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The file is not ours to rewrite (another host's file, or JSON).
    #[error("{message}")]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// Why, and what to do instead.
        message: String,
    },
    /// The file is not valid TOML (the parser's message is the error's source).
    #[error("{} is not valid TOML", path.display())]
    NotToml {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: toml_edit::TomlError,
    },
    /// The edit would make a valid configuration invalid.
    #[error("the edit was not made, because it would make the configuration invalid: {0}")]
    WouldBreak(ConfigError),
    /// The file (or a link or directory on the way) is inside the workspace.
    #[error(
        "refusing to write the configuration {}: it is inside the current directory {}, which an agent \
         working here can write to, and a configuration decides which commands this host runs. Keep it in \
         your configuration directory, or pass --allow-workspace-config if you trust this directory.",
        path.display(),
        workspace.display()
    )]
    InWorkspace {
        /// The file (or link) an agent could have written.
        path: PathBuf,
        /// The workspace.
        workspace: PathBuf,
    },
    /// A path on the way cannot be resolved (the reason is the error's source).
    #[error("cannot resolve {}", path.display())]
    Resolve {
        /// The path.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A symbolic link on the way cannot be read (the reason is the error's source).
    #[error("cannot read the symlink {}", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// Too many symbolic links.
    #[error("{}: too many levels of symbolic links", path.display())]
    Links {
        /// The path.
        path: PathBuf,
    },
    /// No server of that name in the file.
    #[error("no server named {name:?}")]
    NoServer {
        /// The name.
        name: String,
    },
    /// A key that must be a table is not one.
    #[error("`{key}` is not a table")]
    NotATable {
        /// The key.
        key: String,
    },
}
