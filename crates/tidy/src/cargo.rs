//! What the checks ask cargo: the workspace's crates (`cargo metadata`) and a crate's normal
//! dependency tree (`cargo tree`). Both run `--offline`: a test must not reach the network, and
//! a built workspace has everything they need.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::TidyError;

/// A crate of the workspace, as the checks need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crate {
    /// The package name (`tool-pool`).
    pub name: String,
    /// Its `Cargo.toml`.
    pub manifest: PathBuf,
    /// Its library's root file (`src/lib.rs`), if it has a library.
    pub lib: Option<PathBuf>,
}

impl Crate {
    /// A crate in `dir` with its library at `dir/src/lib.rs` (the fixtures' layout).
    pub fn in_dir(name: &str, dir: &Path) -> Self {
        Crate { name: name.to_owned(), manifest: dir.join("Cargo.toml"), lib: Some(dir.join("src").join("lib.rs")) }
    }
}

fn cargo() -> Command {
    // `cargo test` sets CARGO for the test binaries it runs.
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs a cargo command and returns its stdout.
fn run(mut cmd: Command) -> Result<String, TidyError> {
    let command = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| TidyError::Cargo { command: command.clone(), message: e.to_string() })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(TidyError::Cargo { command, message: format!("{}: {}", out.status, stderr.trim()) });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The members of the workspace at `root`, sorted by name.
pub fn workspace_crates(root: &Path) -> Result<Vec<Crate>, TidyError> {
    let mut cmd = cargo();
    cmd.args(["metadata", "--no-deps", "--format-version", "1", "--offline", "--manifest-path"])
        .arg(root.join("Cargo.toml"));
    let command = format!("{cmd:?}");
    let text = run(cmd)?;
    let bad = |message: &str| TidyError::Cargo { command: command.clone(), message: message.to_owned() };
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    let packages = json["packages"].as_array().ok_or_else(|| bad("no `packages` array"))?;
    let mut crates = Vec::new();
    for package in packages {
        let name = package["name"].as_str().ok_or_else(|| bad("a package without a name"))?;
        let manifest = package["manifest_path"].as_str().ok_or_else(|| bad("a package without a manifest"))?;
        let lib = package["targets"].as_array().into_iter().flatten().find_map(|target| {
            let kinds = target["kind"].as_array()?;
            let is_lib = kinds.iter().any(|k| matches!(k.as_str(), Some("lib" | "rlib" | "proc-macro")));
            if is_lib { target["src_path"].as_str().map(PathBuf::from) } else { None }
        });
        crates.push(Crate { name: name.to_owned(), manifest: PathBuf::from(manifest), lib });
    }
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(crates)
}

/// One line of `cargo tree`: a package and its depth below the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeLine {
    pub(crate) depth: usize,
    pub(crate) name: String,
}

/// The normal (not dev, not build) dependency tree of `package` for the host platform, in
/// `cargo tree` order (a package seen before is listed again but not expanded).
pub(crate) fn normal_tree(manifest: &Path, package: &str) -> Result<Vec<TreeLine>, TidyError> {
    let mut cmd = cargo();
    cmd.args(["tree", "--offline", "-e", "normal", "--prefix", "depth", "--format", "{p}", "--manifest-path"])
        .arg(manifest)
        .args(["-p", package]);
    let command = format!("{cmd:?}");
    let text = run(cmd)?;
    let lines = parse_tree(&text);
    if lines.first().is_none_or(|l| l.name != package) {
        return Err(TidyError::Cargo { command, message: format!("the tree does not start with {package}") });
    }
    Ok(lines)
}

/// Parses `cargo tree --prefix depth --format {p}` output: `2serde v1.0.0 (*)`.
pub(crate) fn parse_tree(text: &str) -> Vec<TreeLine> {
    text.lines()
        .filter_map(|line| {
            let digits = line.bytes().take_while(u8::is_ascii_digit).count();
            let depth = line[..digits].parse().ok()?;
            let name = line[digits..].split_whitespace().next()?;
            Some(TreeLine { depth, name: name.to_owned() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_lines_keep_depth_and_name() {
        let text = "0tool-pool v0.1.0 (/w/crates/tool-pool)\n1jsonschema v0.61.2\n2serde v1.0.229 (*)\n\
                    3serde_derive v1.0.229 (proc-macro)\nwarning: something\n";
        let lines = parse_tree(text);
        let got: Vec<(usize, &str)> = lines.iter().map(|l| (l.depth, l.name.as_str())).collect();
        assert_eq!(got, [(0, "tool-pool"), (1, "jsonschema"), (2, "serde"), (3, "serde_derive")]);
    }
}
