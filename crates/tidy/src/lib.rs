//! The project's conventions as checks that plain `cargo test` runs (`tests/tidy`), so nobody
//! needs to remember to run a script to keep them:
//!
//! - [`pure_dependencies`] and [`pure_sources`]: the pure crates ([`PURE_CRATES`]) do no I/O,
//!   neither through a dependency ([`IO_CRATES`]) nor by naming the standard library's files,
//!   sockets, processes, threads, environment or clocks; [`pure_modules`]: nor do the pure
//!   modules of other crates ([`PURE_MODULES`]), which name no I/O crate either.
//! - [`forbidden_dependencies`]: a crate's tree lacks what [`FORBIDDEN_DEPENDENCIES`] keeps out
//!   of it (agent-loop builds without reqwest, hyper, tungstenite and nix).
//! - [`non_exhaustive`]: public error enums, public enums a public trait's methods take or
//!   return (port enums) or hold inside a public struct, and connector configurations are
//!   `#[non_exhaustive]`, so adding a variant or an option is not a breaking change;
//!   [`growing_enums`]: so are the protocol's enums that grow with each revision
//!   ([`GROWING_ENUMS`]).
//! - [`one_path`]: an item is public under one path only, not both through a `pub mod` and a
//!   `pub use` of it.
//!
//! Each check returns [`Violation`]s that name the file and line and say what to do. The checks
//! read sources with `syn` (no compiler, no name resolution); each module's documentation says
//! what that cannot see. `cargo xtask purity` runs the purity checks through these same tests.
//!
//! Test tooling only: never a dependency of another crate.

use std::fmt;
use std::path::{Path, PathBuf};

mod cargo;
mod forbidden;
mod modules;
mod non_exhaustive;
mod one_path;
mod purity;

pub use cargo::{Crate, workspace_crates};
pub use forbidden::{FORBIDDEN_DEPENDENCIES, forbidden_dependencies};
pub use non_exhaustive::{ALLOWED_EXHAUSTIVE, CONNECTOR_PORTS, GROWING_ENUMS, growing_enums, non_exhaustive};
pub use one_path::one_path;
pub use purity::{IO_CRATES, PURE_CRATES, PURE_MODULES, pure_dependencies, pure_modules, pure_sources};

/// Which convention a [`Violation`] breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// A pure crate depends (normally, transitively) on an I/O or runtime crate.
    PureDependency,
    /// A pure crate's source names an I/O part of the standard library.
    PureSource,
    /// A public error or port enum, a connector configuration or a growing protocol enum lacks
    /// `#[non_exhaustive]`.
    NonExhaustive,
    /// A crate depends (normally, transitively) on a crate it must build without.
    ForbiddenDependency,
    /// An item is public under two paths.
    OnePath,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::PureDependency => "purity (dependencies)",
            Rule::PureSource => "purity (source)",
            Rule::NonExhaustive => "non_exhaustive",
            Rule::ForbiddenDependency => "forbidden dependency",
            Rule::OnePath => "one path per item",
        })
    }
}

/// One place that breaks a convention, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    /// The convention.
    pub rule: Rule,
    /// The file, as the check found it (absolute when the crate's paths are).
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// What is wrong and what to do.
    pub message: String,
}

impl Violation {
    /// `file:line: [rule] message`, with `file` relative to `root` when it lies below it.
    pub fn display_relative_to(&self, root: &Path) -> String {
        let file = self.file.strip_prefix(root).unwrap_or(&self.file);
        format!("{}:{}: [{}] {}", file.display(), self.line, self.rule, self.message)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: [{}] {}", self.file.display(), self.line, self.rule, self.message)
    }
}

/// Why a check could not run (as opposed to finding violations).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TidyError {
    /// A file could not be read.
    #[error("could not read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A source file is not valid Rust (as far as `syn` knows).
    #[error("{}:{line}: could not parse: {message}", file.display())]
    Parse {
        /// The file.
        file: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A `mod name;` declaration whose file is not where the compiler would look.
    #[error("{}:{line}: no file for `mod {name};` (looked for {})", file.display(), looked_for.join(", "))]
    ModuleFile {
        /// The file with the declaration.
        file: PathBuf,
        /// 1-based line of the declaration.
        line: usize,
        /// The module's name.
        name: String,
        /// The paths tried.
        looked_for: Vec<String>,
    },
    /// A cargo command failed or printed something this crate does not understand.
    #[error("`{command}`: {message}")]
    Cargo {
        /// The command line.
        command: String,
        /// What went wrong (cargo's stderr when it failed).
        message: String,
    },
}

/// The workspace this crate belongs to (two levels above its manifest).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).unwrap_or(manifest).to_path_buf()
}

/// 1-based line where a span starts (needs proc-macro2's `span-locations`, which this crate
/// enables).
pub(crate) fn line_of(span: proc_macro2::Span) -> usize {
    span.start().line
}
