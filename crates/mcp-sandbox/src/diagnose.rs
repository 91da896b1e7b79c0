//! Why a confined server failed, read from what it wrote to stderr: a permission error (EACCES,
//! EPERM, "Permission denied", "Operation not permitted") or a module that was not found (node's
//! `ERR_MODULE_NOT_FOUND` and "Cannot find module", Python's `ModuleNotFoundError` and
//! `ImportError`). The [`Hint`] says that the server ran confined and which `read` or `write`
//! entry (with the path from the error, where there is one) or `sandbox = "off"` would let it
//! run. Pure: the text is the server's, and so are the paths in it (cleaned of control
//! characters and bounded; the caller cleans the whole message for a terminal as usual).

use std::path::{Path, PathBuf};

use crate::policy::{Policy, normalize, toml_string};

/// How every hint begins (a [`Hint`] shown, and [`CONFINED_START_FAILED`]): a front end that
/// shortens a failure keeps the hint from here on whole.
pub const HINT_LEAD: &str = "it ran in the sandbox";

/// What a confined server's start failure says when its stderr shows nothing [`diagnose`]
/// recognises.
pub const CONFINED_START_FAILED: &str = "it ran in the sandbox: if it needs files or folders outside what the \
     sandbox allows, a `read` or `write` entry in its sandbox settings, or `sandbox = \"off\"`, would let it run";

/// Longest path or module name taken from the text.
const MAX_NAME: usize = 1024;

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read (and execute).
    Read,
    /// Read, write and create.
    Write,
}

impl Access {
    /// The sandbox setting's key.
    pub fn key(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// The kernel refused access to a file or folder.
    Denied {
        /// Reading or writing, as far as the error says (`None`: it does not).
        access: Option<Access>,
    },
    /// A module or package could not be found (or loaded).
    ModuleNotFound {
        /// Its name, as the error gives it.
        module: Option<String>,
    },
}

/// What a confined server's failure suggests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// What went wrong.
    pub cause: Cause,
    /// The path from the error, when it names one.
    pub path: Option<PathBuf>,
    /// The entry that would let the server run (`read = ["PATH"]`), when one can be named.
    pub entry: Option<(Access, PathBuf)>,
    /// The protected path the error's path lies in: granting it hands the server a secret.
    pub protected: Option<PathBuf>,
}

impl std::fmt::Display for Hint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let off = "`sandbox = \"off\"`";
        let entry = |(access, path): &(Access, PathBuf)| format!("`{} = [{}]`", access.key(), toml_string(path));
        match (&self.cause, &self.entry, &self.protected) {
            (Cause::Denied { .. }, Some(e), Some(protected)) => write!(
                f,
                "it ran in the sandbox, which keeps {} from servers: {} in its sandbox settings grants it, if the \
                 server should have it, or {off}",
                protected.display(),
                entry(e)
            ),
            (Cause::Denied { access }, Some(e), None) => {
                let (doing, or_write) = match access {
                    Some(Access::Write) => ("writing", ""),
                    Some(Access::Read) => ("reading", ""),
                    None => ("using", " (`write`, if it writes there)"),
                };
                let path = self.path.as_deref().unwrap_or(&e.1);
                write!(
                    f,
                    "it ran in the sandbox, which denied it {doing} {}: {}{or_write} in its sandbox settings, or \
                     {off}, would let it run",
                    path.display(),
                    entry(e)
                )
            }
            (Cause::Denied { .. }, None, _) => write!(
                f,
                "it ran in the sandbox, which denied it a file or folder: a `read` or `write` entry in its sandbox \
                 settings for the folder it needs, or {off}, would let it run"
            ),
            (Cause::ModuleNotFound { module }, Some(e), _) => {
                let what = module.as_deref().map_or_else(|| "a module".to_owned(), |m| format!("the module {m}"));
                write!(
                    f,
                    "it ran in the sandbox and could not load {what}: if that lies outside what the sandbox reads, \
                     {} in its sandbox settings, or {off}, would let it run",
                    entry(e)
                )
            }
            (Cause::ModuleNotFound { module }, None, _) => {
                let what = module.as_deref().map_or_else(|| "a module".to_owned(), |m| format!("the module {m}"));
                write!(
                    f,
                    "it ran in the sandbox and could not find {what}: if it is installed outside what the sandbox \
                     reads (a linked package, another environment), a `read` entry in its sandbox settings for its \
                     folder, or {off}, would let it run"
                )
            }
        }
    }
}

/// Reads a confined server's stderr (or the launcher's failure) for a permission or
/// module-not-found error, and says what would let it run under `policy`. `None` when the text
/// shows neither, or when the path it names is one the policy already allows (then the sandbox
/// is not the cause). `home` keeps a suggested folder from being HOME or one that holds it.
pub fn diagnose(text: &str, policy: &Policy, home: Option<&Path>) -> Option<Hint> {
    let lines: Vec<&str> = text.lines().collect();
    let mut denied: Option<(Option<Access>, Option<PathBuf>, bool)> = None;
    let mut module: Option<(Option<String>, Option<PathBuf>)> = None;
    for line in &lines {
        if is_denial(line) {
            let (access, path, listing) = denial(line, &lines);
            // The last denial that names a path wins; one without a path only when none does.
            if path.is_some() || denied.as_ref().is_none_or(|d| d.1.is_none()) {
                denied = Some((access, path, listing));
            }
        } else if let Some(found) = missing_module(line) {
            module = Some(found);
        }
    }
    if let Some((access, path, listing)) = denied {
        return denial_hint(access, path, listing, policy, home);
    }
    let (name, path) = module?;
    let cause = Cause::ModuleNotFound { module: name };
    let Some(path) = path else { return Some(Hint { cause, path: None, entry: None, protected: None }) };
    if policy.allows(&path, false) {
        return None;
    }
    let folder = path.parent().filter(|d| !holds_home(d, home)).unwrap_or(&path).to_path_buf();
    let protected = policy.protected.iter().find(|p| path.starts_with(p)).cloned();
    Some(Hint { cause, entry: Some((Access::Read, folder)), path: Some(path), protected })
}

fn denial_hint(
    access: Option<Access>,
    path: Option<PathBuf>,
    listing: bool,
    policy: &Policy,
    home: Option<&Path>,
) -> Option<Hint> {
    let cause = Cause::Denied { access };
    let Some(path) = path else { return Some(Hint { cause, path: None, entry: None, protected: None }) };
    let write = access == Some(Access::Write);
    if policy.allows(&path, write) {
        return None;
    }
    if let Some(protected) = policy.protected.iter().find(|p| path.starts_with(p)).cloned() {
        let access = if write { Access::Write } else { Access::Read };
        return Some(Hint { cause, entry: Some((access, path.clone())), path: Some(path), protected: Some(protected) });
    }
    // The folder it was working in: the path itself when it listed it, else the one holding it
    // (never HOME or a folder holding it).
    let folder = if listing { path.clone() } else { path.parent().map_or_else(|| path.clone(), Path::to_path_buf) };
    let folder = if holds_home(&folder, home) || folder.parent().is_none() { path.clone() } else { folder };
    let access = if write { Access::Write } else { Access::Read };
    Some(Hint { cause, entry: Some((access, folder)), path: Some(path), protected: None })
}

fn holds_home(dir: &Path, home: Option<&Path>) -> bool {
    home.is_some_and(|h| h.starts_with(dir))
}

fn is_denial(line: &str) -> bool {
    ["EACCES", "EPERM", "Permission denied", "permission denied", "Operation not permitted", "operation not permitted"]
        .iter()
        .any(|m| line.contains(m))
}

/// Syscalls and verbs (whole words) that write.
const WRITES: &[&str] = &[
    "mkdir", "mkdtemp", "create", "write", "rename", "unlink", "rmdir", "remove", "delete", "symlink", "link",
    "copyfile", "chmod", "chown", "utime", "utimes", "truncate", "lock", "save", "persist",
];
/// ... and that read.
const READS: &[&str] = &[
    "scandir", "opendir", "readdir", "read", "stat", "lstat", "access", "realpath", "readlink", "exec", "execve",
    "spawn", "load", "open",
];
/// Those that list a folder (the path is the folder).
const LISTS: &[&str] = &["scandir", "opendir", "readdir"];

/// The access, path and whether it listed a folder, for a denial on `line` (npm reports the
/// path and syscall on lines of their own, `npm error path ...`).
fn denial(line: &str, lines: &[&str]) -> (Option<Access>, Option<PathBuf>, bool) {
    let npm = |key: &str| {
        lines.iter().find_map(|l| {
            let rest = l.strip_prefix("npm error ").or_else(|| l.strip_prefix("npm ERR! "))?;
            rest.strip_prefix(key).map(|v| v.trim().to_owned())
        })
    };
    let mut path = quoted_path(line).or_else(|| bare_path(line));
    // The verb comes before the path ("open '/x'", "failed to create directory `/x`").
    let before = line.find(|c| OPENING.contains(&c) || c == '/').map_or(line, |end| &line[..end]);
    let mut words: Vec<String> = before
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    if line.contains("EACCES") || line.contains("EPERM") {
        if let Some(p) = npm("path ").and_then(|p| clean_path(&p)) {
            path = path.or(Some(p));
        }
        if let Some(syscall) = npm("syscall ") {
            words.push(syscall.to_ascii_lowercase());
        }
    }
    let has = |verbs: &[&str]| words.iter().any(|w| verbs.contains(&w.as_str()));
    let access = if has(WRITES) {
        Some(Access::Write)
    } else if has(READS) {
        Some(Access::Read)
    } else {
        None
    };
    (access, path, has(LISTS))
}

/// A module error on `line`: the module's name and the path it names (an absolute module path,
/// or the file Python found it in).
fn missing_module(line: &str) -> Option<(Option<String>, Option<PathBuf>)> {
    if let Some(rest) = line.split("No module named ").nth(1) {
        return Some((quoted(rest).map(str::to_owned).and_then(clean_name), None));
    }
    if line.contains("ImportError") {
        // `ImportError: cannot import name 'x' from 'y' (/path/y/__init__.py)`.
        let path = line.rsplit_once('(').and_then(|(_, p)| p.strip_suffix(')')).and_then(clean_path);
        let name = line.split(" from ").nth(1).and_then(quoted).map(str::to_owned).and_then(clean_name);
        return Some((name, path));
    }
    let rest = line.split("Cannot find module ").nth(1).or_else(|| line.split("Cannot find package ").nth(1))?;
    let name = quoted(rest).map(str::to_owned);
    if let Some(path) = name.as_deref().and_then(clean_path) {
        return Some((name, Some(path)));
    }
    Some((name.and_then(clean_name), None))
}

/// Opening quotes: ASCII ones, and the typographic ones GNU tools print under a UTF-8 locale
/// (`mkdir: cannot create directory ‘/x’`).
const OPENING: [char; 5] = ['\'', '"', '`', '\u{2018}', '\u{201c}'];

/// The first quoted text on the line: where it starts, the text, and the rest after its closing
/// quote. A backtick closes with a backtick or, in older GNU messages (`` `/x' ``), an apostrophe.
fn next_quoted(text: &str) -> Option<(&str, &str)> {
    let start = text.find(OPENING)?;
    let quote = text[start..].chars().next()?;
    let after = &text[start + quote.len_utf8()..];
    let end = match quote {
        '\u{2018}' => after.find('\u{2019}'),
        '\u{201c}' => after.find('\u{201d}'),
        '`' => after.find(['`', '\'']),
        q => after.find(q),
    }?;
    let close = after[end..].chars().next()?;
    Some((&after[..end], &after[end + close.len_utf8()..]))
}

/// The text between the first pair of quotes.
fn quoted(text: &str) -> Option<&str> {
    next_quoted(text).map(|(inside, _)| inside)
}

/// The first quoted absolute path on the line.
fn quoted_path(line: &str) -> Option<PathBuf> {
    let mut rest = line;
    while let Some((inside, after)) = next_quoted(rest) {
        if let Some(path) = clean_path(inside) {
            return Some(path);
        }
        rest = after;
    }
    None
}

/// The first unquoted word that is an absolute path (`bash: /x/y: Permission denied`).
fn bare_path(line: &str) -> Option<PathBuf> {
    line.split_whitespace()
        .map(|w| w.trim_end_matches([':', ',', ';', '.', ')']).trim_start_matches('('))
        .find_map(clean_path)
}

/// An absolute path without control characters, of a sensible length, normalized.
fn clean_path(text: &str) -> Option<PathBuf> {
    (text.starts_with('/') && text.len() <= MAX_NAME && !text.chars().any(char::is_control) && text != "/")
        .then(|| normalize(Path::new(text)))
}

fn clean_name(name: String) -> Option<String> {
    (!name.is_empty() && name.len() <= MAX_NAME && !name.chars().any(char::is_control)).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Grant, Limits, Presence};
    use pretty_assertions::assert_eq;

    fn policy() -> Policy {
        let grant = |p: &str, write: bool| Grant { path: PathBuf::from(p), write, presence: Presence::IfExists };
        Policy {
            grants: vec![grant("/usr", false), grant("/h/project", true), grant("/data/ref", false)],
            protected: vec![PathBuf::from("/h/.aws")],
            network: true,
            limits: Limits::default(),
        }
    }

    fn hint(text: &str) -> Option<Hint> {
        diagnose(text, &policy(), Some(Path::new("/h")))
    }

    fn entry(h: &Hint) -> Option<(Access, &str)> {
        h.entry.as_ref().map(|(a, p)| (*a, p.to_str().unwrap()))
    }

    #[test]
    fn npm_failing_to_make_its_cache_asks_for_write_on_the_folder() {
        let text = "npm error code EACCES\nnpm error syscall mkdir\nnpm error path /h/.npm/_cacache\n\
                    npm error errno -13\nnpm error Your cache folder contains root-owned files";
        let h = hint(text).unwrap();
        assert_eq!(h.cause, Cause::Denied { access: Some(Access::Write) });
        assert_eq!(entry(&h), Some((Access::Write, "/h/.npm")));
        let shown = h.to_string();
        assert!(shown.contains("`write = [\"/h/.npm\"]`") && shown.contains("`sandbox = \"off\"`"), "{shown}");
        assert!(shown.contains("ran in the sandbox") && shown.contains("/h/.npm/_cacache"), "{shown}");
    }

    #[test]
    fn node_python_shell_and_rust_permission_errors_name_their_path() {
        let cases = [
            ("Error: EACCES: permission denied, open '/srv/data/x.json'", Some(Access::Read), "/srv/data"),
            ("Error: EPERM: operation not permitted, mkdir '/srv/out/new'", Some(Access::Write), "/srv/out"),
            ("Error: EACCES: permission denied, scandir '/srv/docs'", Some(Access::Read), "/srv/docs"),
            ("PermissionError: [Errno 13] Permission denied: '/srv/db/notes.sqlite'", None, "/srv/db"),
            ("bash: /opt/tool/run.sh: Permission denied", None, "/opt/tool"),
            (
                "error: failed to create directory `/srv/uv-cache`: Permission denied (os error 13)",
                Some(Access::Write),
                "/srv",
            ),
            // A file in HOME: the file itself, never HOME.
            ("PermissionError: [Errno 13] Permission denied: '/h/notes.md'", None, "/h/notes.md"),
            // GNU tools quote typographically under a UTF-8 locale, and `so' in older releases.
            (
                "mkdir: cannot create directory \u{2018}/srv/out/new\u{2019}: Permission denied",
                Some(Access::Write),
                "/srv/out",
            ),
            ("cp: cannot create regular file `/srv/out/x': Permission denied", Some(Access::Write), "/srv/out"),
            ("sort: open failed: \u{201c}/srv/data/x\u{201d}: Permission denied", Some(Access::Read), "/srv/data"),
        ];
        for (text, access, folder) in cases {
            let h = hint(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(h.cause, Cause::Denied { access }, "{text}");
            let expected = if access == Some(Access::Write) { Access::Write } else { Access::Read };
            assert_eq!(entry(&h), Some((expected, folder)), "{text}");
        }
    }

    #[test]
    fn a_path_the_policy_allows_is_not_the_sandboxs_doing_and_a_secret_is_named_as_such() {
        assert_eq!(hint("Error: EACCES: permission denied, open '/h/project/locked'"), None);
        assert_eq!(hint("Error: EACCES: permission denied, open '/data/ref/x'"), None);
        // Writing where it may only read is.
        let h = hint("Error: EACCES: permission denied, unlink '/data/ref/x'").unwrap();
        assert_eq!(entry(&h), Some((Access::Write, "/data/ref")));
        let h = hint("PermissionError: [Errno 13] Permission denied: '/h/.aws/credentials'").unwrap();
        assert_eq!(h.protected, Some(PathBuf::from("/h/.aws")));
        assert_eq!(entry(&h), Some((Access::Read, "/h/.aws/credentials")));
        assert!(h.to_string().contains("keeps /h/.aws from servers"), "{h}");
    }

    #[test]
    fn missing_modules_are_recognised_with_and_without_a_path() {
        let text = "node:internal/modules/esm/resolve:873\nError [ERR_MODULE_NOT_FOUND]: Cannot find package \
                    '@modelcontextprotocol/sdk' imported from /srv/app/dist/index.js\n    at packageResolve";
        let h = hint(text).unwrap();
        assert_eq!(h.cause, Cause::ModuleNotFound { module: Some("@modelcontextprotocol/sdk".into()) });
        assert_eq!(h.entry, None);
        assert!(h.to_string().contains("@modelcontextprotocol/sdk") && h.to_string().contains("`read` entry"), "{h}");

        let h = hint("Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/srv/lib/util.js' imported from /srv/app/a.js")
            .unwrap();
        assert_eq!(entry(&h), Some((Access::Read, "/srv/lib")));
        assert!(h.to_string().contains("`read = [\"/srv/lib\"]`"), "{h}");

        let h = hint("Error: Cannot find module 'express'\nRequire stack:\n- /srv/app/index.js").unwrap();
        assert_eq!(h.cause, Cause::ModuleNotFound { module: Some("express".into()) });

        let h = hint(
            "Traceback (most recent call last):\n  File \"/srv/py/server.py\", line 1, in <module>\n    \
                      import helper\nModuleNotFoundError: No module named 'helper'",
        )
        .unwrap();
        assert_eq!(h.cause, Cause::ModuleNotFound { module: Some("helper".into()) });

        let h = hint("ImportError: cannot import name 'x' from 'pkg' (/opt/venv/lib/pkg/__init__.py)").unwrap();
        assert_eq!(entry(&h), Some((Access::Read, "/opt/venv/lib/pkg")));
        // A module under a granted path is simply missing.
        assert_eq!(hint("Error: Cannot find module '/usr/lib/node_modules/x/index.js'"), None);
    }

    #[test]
    fn other_failures_and_hostile_text_give_no_or_a_clean_hint() {
        assert_eq!(hint("TypeError: undefined is not a function\n    at main (/srv/app/index.js:3:1)"), None);
        assert_eq!(hint(""), None);
        let h = hint("Error: EACCES: permission denied, open '/srv/\u{1b}[2Jx'").unwrap();
        assert_eq!(h.path, None, "a path with control characters is not taken");
        let long = format!("Error: EACCES: permission denied, open '/{}'", "a".repeat(5000));
        assert_eq!(hint(&long).unwrap().path, None);
        // A quote inside the path is escaped in the suggested entry.
        let h = hint("Error: EACCES: permission denied, scandir '/srv/a\"b'").unwrap();
        assert!(h.to_string().contains(r#"`read = ["/srv/a\"b"]`"#), "{h}");
    }

    #[test]
    fn every_hint_begins_with_its_lead() {
        let texts = [
            "Error: EACCES: permission denied, open '/h/.aws/credentials'",
            "Error: EACCES: permission denied, open '/srv/data/x.json'",
            "PermissionError: [Errno 13] Permission denied: '/srv/db/x'",
            "Error: EACCES: permission denied",
            "Error: Cannot find module '/srv/lib/util.js'",
            "ModuleNotFoundError: No module named 'helper'",
        ];
        for text in texts {
            let shown = hint(text).unwrap_or_else(|| panic!("{text}")).to_string();
            assert!(shown.starts_with(HINT_LEAD), "{shown}");
        }
        assert!(CONFINED_START_FAILED.starts_with(HINT_LEAD));
    }
}
