//! Finding the binaries that tests spawn but no test target depends on (the fixture server, the
//! sandbox launcher), and building them when they are missing or older than their sources.
//!
//! Cargo builds a package's own binaries before its integration tests, but not another
//! package's: plain `cargo test` would otherwise run against whatever `target/` held, or fail
//! because nothing was there. Under cargo (`CARGO` is set for every test it runs), the first
//! test of a process that needs a binary builds them all with [`build_command`]; a lock file
//! beside the binaries makes test processes that start together build once and the rest wait.
//! Without cargo (a test executable run by hand), a missing or stale binary is one line that
//! says the command.
//!
//! A binary is stale when a source file that cargo recorded for it (the `<binary>.d` file
//! beside it: every file of the workspace's crates it was built from) is newer than it. A
//! record naming files of another checkout, or none, cannot be judged: under cargo it is
//! rebuilt (cargo decides), without cargo it is used as is.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::SystemTime;

/// A binary of the workspace that tests spawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Binary {
    /// The binary's name (without `.exe`).
    pub(crate) name: &'static str,
    /// The environment variable that points at a binary to use instead (never checked).
    pub(crate) variable: &'static str,
}

/// `mcp-fixture-server` of `mcp-fixtures`.
pub(crate) const SERVER: Binary = Binary { name: "mcp-fixture-server", variable: "MCP_FIXTURE_SERVER" };
/// `mcp-fixture-conformance` of `mcp-fixtures`.
pub(crate) const CONFORMANCE: Binary = Binary { name: "mcp-fixture-conformance", variable: "MCP_FIXTURE_CONFORMANCE" };
/// `mcp-sandbox-launch` of `mcp-sandbox`.
pub(crate) const LAUNCHER: Binary = Binary { name: "mcp-sandbox-launch", variable: "MCP_SANDBOX_LAUNCHER" };

/// The packages whose binaries tests spawn; one build makes them all.
const PACKAGES: &[&str] = &["mcp-fixtures", "mcp-sandbox"];

/// The cargo arguments that build every binary tests spawn, for a profile directory's name
/// (`debug` is the default `dev` profile, anything else is the profile of that name).
fn build_args(profile_dir: &str) -> Vec<String> {
    let mut args = vec!["build".to_owned()];
    for package in PACKAGES {
        args.extend(["-p".to_owned(), (*package).to_owned()]);
    }
    args.push("--bins".to_owned());
    if profile_dir != "debug" {
        args.extend(["--profile".to_owned(), profile_dir.to_owned()]);
    }
    args
}

/// The command that builds the binaries tests spawn, as a person types it, for the profile the
/// running test was built with: `cargo build -p mcp-fixtures -p mcp-sandbox --bins`.
pub fn build_command() -> String {
    let profile = profile_dir().ok().and_then(|dir| dir.file_name().map(|n| n.to_string_lossy().into_owned()));
    format!("cargo {}", build_args(profile.as_deref().unwrap_or("debug")).join(" "))
}

/// Where `binary` is: at its environment variable when that is set, else beside the running
/// test executable (built first when it is missing or stale, under cargo).
pub(crate) fn locate(binary: Binary) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(binary.variable) {
        return Ok(PathBuf::from(path));
    }
    let profile = profile_dir()?;
    let candidates = candidates(&profile, binary.name);
    let found = find(&candidates, &workspace_root());
    if let Found::Fresh(path) = found {
        return Ok(path);
    }
    let Some(cargo) = std::env::var_os("CARGO") else {
        return match found {
            Found::Unknown(path) => Ok(path),
            other => Err(other.problem(binary, &build_command())),
        };
    };
    let built = BUILT.get_or_init(|| build(&cargo, &profile));
    match built {
        Ok(paths) => {
            paths.get(binary.name).cloned().or_else(|| candidates.iter().find(|p| p.is_file()).cloned()).ok_or_else(
                || {
                    format!(
                        "{} was not among what `{}` built; set {} to a {0} to use",
                        binary.name,
                        build_command(),
                        binary.variable
                    )
                },
            )
        }
        Err(e) => Err(e.clone()),
    }
}

/// What the one build of this process made: each binary's path, or why it failed.
static BUILT: OnceLock<Result<HashMap<String, PathBuf>, String>> = OnceLock::new();

/// The directory of the running test's profile: test executables live in
/// `target/<profile>/deps/`, examples in `target/<profile>/examples/`.
fn profile_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the test executable: {e}"))?;
    let dir = exe.parent().ok_or_else(|| format!("{} has no parent directory", exe.display()))?;
    Ok(match dir.file_name().and_then(|n| n.to_str()) {
        Some("deps" | "examples") => dir.parent().unwrap_or(dir).to_path_buf(),
        _ => dir.to_path_buf(),
    })
}

/// Where `name` may be, in the order looked at.
fn candidates(profile: &Path, name: &str) -> Vec<PathBuf> {
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    vec![profile.join(&file), profile.join("deps").join(&file)]
}

/// The workspace this crate was built in (its sources are judged against the binaries).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).unwrap_or(manifest).to_path_buf()
}

/// What [`find`] saw of a binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// There and no older than any of its sources.
    Fresh(PathBuf),
    /// There, but `source` was changed after it was built.
    Stale { binary: PathBuf, source: PathBuf },
    /// There, without a record of its sources in this workspace.
    Unknown(PathBuf),
    /// Not at any of these places.
    Missing(Vec<PathBuf>),
}

impl Found {
    /// One line: what is wrong and the command that mends it.
    fn problem(&self, binary: Binary, command: &str) -> String {
        let what = match self {
            Found::Stale { binary: path, source } => {
                format!("{} is older than its source {}", path.display(), source.display())
            }
            Found::Missing(looked) => format!(
                "{} was not found (looked at {})",
                binary.name,
                looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
            Found::Fresh(path) | Found::Unknown(path) => format!("{} could not be used", path.display()),
        };
        format!(
            "{what}; build it with `{command}` (plain `cargo test` does this itself) or set {} to a {} to use",
            binary.variable, binary.name
        )
    }
}

/// The first of `candidates` that exists, judged against its sources under `root`.
pub(crate) fn find(candidates: &[PathBuf], root: &Path) -> Found {
    let Some(binary) = candidates.iter().find(|p| p.is_file()) else { return Found::Missing(candidates.to_vec()) };
    let Ok(built) = std::fs::metadata(binary).and_then(|m| m.modified()) else {
        return Found::Unknown(binary.clone());
    };
    let record = binary.with_extension("d");
    let Ok(text) = std::fs::read_to_string(&record) else { return Found::Unknown(binary.clone()) };
    let sources = dep_info_sources(&text);
    if sources.is_empty() || sources.iter().any(|s| !s.starts_with(root)) {
        return Found::Unknown(binary.clone());
    }
    for source in sources {
        // A source that is gone was renamed or deleted since: the binary is stale too.
        let changed = std::fs::metadata(&source).and_then(|m| m.modified()).unwrap_or(SystemTime::now());
        if changed > built {
            return Found::Stale { binary: binary.clone(), source };
        }
    }
    Found::Fresh(binary.clone())
}

/// The files a cargo dep-info file (`target: a.rs b\ c.rs`, one rule) names.
pub(crate) fn dep_info_sources(text: &str) -> Vec<PathBuf> {
    let Some((_, deps)) = text.lines().next().unwrap_or_default().split_once(": ") else { return Vec::new() };
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = deps.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.extend(chars.next()),
            c if c.is_whitespace() => {
                if !current.is_empty() {
                    out.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(PathBuf::from(current));
    }
    out
}

/// Builds every binary tests spawn, once per lock: each binary's path as cargo reports it.
fn build(cargo: &OsString, profile: &Path) -> Result<HashMap<String, PathBuf>, String> {
    let profile_name = profile.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let command = build_command();
    // Test processes that start together build once; the others wait here, and their own
    // build then finds nothing to do.
    let lock_path = profile.join(".mcp-fixtures-build.lock");
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path);
    // Without the file (a read-only target directory) cargo's own lock still orders builds.
    // The lock is released when `lock` is dropped, after the build.
    if let Ok(file) = &lock {
        file.lock().map_err(|e| format!("{}: {e}", lock_path.display()))?;
    }
    let root = workspace_root();
    let mut cmd = Command::new(cargo);
    cmd.args(build_args(&profile_name)).arg("--message-format=json-render-diagnostics");
    if root.is_dir() {
        cmd.current_dir(&root);
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run `{command}` to build the test binaries: {e}"))?;
    if !out.status.success() {
        // Once per process, into the output of the first test that asked.
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        return Err(format!(
            "building the test binaries failed ({}; cargo's output is in the first test that needed them): \
             run `{command}` to see why",
            out.status
        ));
    }
    Ok(executables(&String::from_utf8_lossy(&out.stdout)))
}

/// Each binary's path in cargo's JSON messages (`compiler-artifact` with an `executable`).
pub(crate) fn executables(messages: &str) -> HashMap<String, PathBuf> {
    let mut out = HashMap::new();
    for line in messages.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let name = message.pointer("/target/name").and_then(|n| n.as_str());
        let executable = message.get("executable").and_then(|e| e.as_str());
        if let (Some("compiler-artifact"), Some(name), Some(executable)) =
            (message.get("reason").and_then(|r| r.as_str()), name, executable)
        {
            out.insert(name.to_owned(), PathBuf::from(executable));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::fs::File;
    use std::time::Duration;

    use super::*;

    #[test]
    fn dep_info_names_every_file_and_unescapes_spaces() {
        let text = "/w/target/debug/mcp-sandbox-launch: /w/crates/a.rs /w/crates/my\\ b.rs\n\n";
        assert_eq!(dep_info_sources(text), [PathBuf::from("/w/crates/a.rs"), PathBuf::from("/w/crates/my b.rs")]);
        assert!(dep_info_sources("nothing here").is_empty());
    }

    fn set_mtime(path: &Path, time: SystemTime) {
        File::options().write(true).open(path).unwrap().set_modified(time).unwrap();
    }

    /// A workspace with one source and a binary built from it, the source `age` older.
    fn built(age: Duration) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("src").join("main.rs");
        std::fs::create_dir_all(source.parent().unwrap()).unwrap();
        std::fs::write(&source, "fn main() {}").unwrap();
        let binary = dir.path().join("target").join("fx");
        std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
        std::fs::write(&binary, "").unwrap();
        std::fs::write(binary.with_extension("d"), format!("{}: {}\n", binary.display(), source.display())).unwrap();
        let now = SystemTime::now();
        set_mtime(&binary, now);
        set_mtime(&source, now - age);
        (dir, binary, source)
    }

    #[test]
    fn a_binary_newer_than_its_sources_is_fresh_and_one_older_is_stale() {
        let (dir, binary, source) = built(Duration::from_secs(60));
        assert_eq!(find(std::slice::from_ref(&binary), dir.path()), Found::Fresh(binary.clone()));

        set_mtime(&source, SystemTime::now() + Duration::from_secs(60));
        let found = find(std::slice::from_ref(&binary), dir.path());
        assert_eq!(found, Found::Stale { binary: binary.clone(), source: source.clone() });
        let line = found.problem(SERVER, "cargo build -p mcp-fixtures -p mcp-sandbox --bins");
        assert_eq!(
            line,
            format!(
                "{} is older than its source {}; build it with `cargo build -p mcp-fixtures -p mcp-sandbox --bins` \
                 (plain `cargo test` does this itself) or set MCP_FIXTURE_SERVER to a mcp-fixture-server to use",
                binary.display(),
                source.display()
            )
        );
        assert!(!line.contains('\n'));

        // A source that went away since the build: stale as well.
        std::fs::remove_file(&source).unwrap();
        assert!(matches!(find(std::slice::from_ref(&binary), dir.path()), Found::Stale { .. }));
    }

    #[test]
    fn a_binary_without_a_record_here_cannot_be_judged() {
        let (dir, binary, _) = built(Duration::from_secs(60));
        // Built in another checkout (a copied target directory): its record names other files.
        let elsewhere = tempfile::tempdir().unwrap();
        assert_eq!(find(std::slice::from_ref(&binary), elsewhere.path()), Found::Unknown(binary.clone()));
        std::fs::remove_file(binary.with_extension("d")).unwrap();
        assert_eq!(find(std::slice::from_ref(&binary), dir.path()), Found::Unknown(binary.clone()));
    }

    #[test]
    fn a_missing_binary_says_where_it_was_looked_for() {
        let dir = tempfile::tempdir().unwrap();
        let looked = candidates(dir.path(), "mcp-fixture-server");
        let found = find(&looked, dir.path());
        assert_eq!(found, Found::Missing(looked.clone()));
        let line = found.problem(SERVER, "cargo build -p mcp-fixtures -p mcp-sandbox --bins");
        assert!(line.starts_with(&format!("mcp-fixture-server was not found (looked at {}, ", looked[0].display())));
        assert!(line.contains("`cargo build -p mcp-fixtures -p mcp-sandbox --bins`"), "{line}");
    }

    #[test]
    fn the_build_command_follows_the_profile() {
        assert_eq!(build_args("debug").join(" "), "build -p mcp-fixtures -p mcp-sandbox --bins");
        assert_eq!(build_args("release").join(" "), "build -p mcp-fixtures -p mcp-sandbox --bins --profile release");
    }

    #[test]
    fn executables_are_read_from_cargos_messages() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"mcp-sandbox","kind":["lib"]},"executable":null}
{"reason":"compiler-artifact","target":{"name":"mcp-fixture-server","kind":["bin"]},"executable":"/t/debug/mcp-fixture-server","fresh":true}
not json
{"reason":"build-finished","success":true}"#;
        let found = executables(messages);
        assert_eq!(found.len(), 1);
        assert_eq!(found["mcp-fixture-server"], PathBuf::from("/t/debug/mcp-fixture-server"));
    }

    #[test]
    fn under_cargo_the_binaries_this_test_uses_are_found_fresh() {
        // The test of the whole: whatever `target/` held, what is returned is up to date.
        for binary in [SERVER, LAUNCHER] {
            if std::env::var_os(binary.variable).is_some() {
                continue;
            }
            let path = locate(binary).unwrap_or_else(|e| panic!("{e}"));
            let found = find(std::slice::from_ref(&path), &workspace_root());
            assert!(matches!(found, Found::Fresh(_) | Found::Unknown(_)), "{found:?}");
        }
    }
}
