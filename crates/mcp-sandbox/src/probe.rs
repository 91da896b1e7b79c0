//! The facts of one start, read from the filesystem for the pure policy: the program with its
//! links resolved and the interpreter its `#!` line names, the files its command line names,
//! and their projects. Also the directory lister the policy's [`crate::expand`] and
//! [`crate::Sandbox::check`] are given.

use std::ffi::{OsStr, OsString};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::policy::{Context, Entry, normalize};
use crate::start::{self, Form};

/// How many `#!` lines are followed (a script run by a script run by a binary).
const MAX_INTERPRETERS: usize = 3;
/// How much of a program is read for its `#!` line.
const SHEBANG_BYTES: usize = 256;
/// Directory entries for [`list_dir`]; at most this many per directory.
const MAX_ENTRIES: usize = 10_000;

/// The facts of a start of `program` (absolute, as found on the server's PATH) with `args`, in
/// `cwd` (`cwd_configured`: the server's configuration names it), with the private temporary
/// directory `temp` and the server's environment `env`.
pub fn context(
    program: &Path,
    args: &[OsString],
    cwd: &Path,
    cwd_configured: bool,
    temp: &Path,
    env: &[(OsString, OsString)],
) -> Context {
    let var = |name: &str| env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let home = var("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
    let shared_temp = normalize(temp).parent().map(Path::to_path_buf);
    let path_var = var("PATH");
    let mut ctx = Context::new(cwd, temp);
    ctx.home = home.clone();
    ctx.cwd_configured = cwd_configured;
    ctx.args = args.to_vec();
    ctx.env = env.to_vec();

    // The program, resolved, and the interpreters of its `#!` lines.
    let mut next = Some(program.to_path_buf());
    for _ in 0..=MAX_INTERPRETERS {
        let Some(current) = next.take() else { break };
        let resolved = std::fs::canonicalize(&current).ok();
        push_new(&mut ctx.program, normalize(&current));
        if let Some(resolved) = &resolved {
            push_new(&mut ctx.program, resolved.clone());
        }
        next = resolved.as_deref().and_then(read_shebang).and_then(|line| match parse_shebang(&line)? {
            Interpreter::Path(p) => Some(p),
            Interpreter::OnPath(name) => find_program(&name, path_var.as_deref(), cwd).ok(),
        });
    }

    // The files the command line names, and the projects of its scripts.
    let form = Form::of(program, args);
    let mut first_file = true;
    for arg in args {
        if arg.to_string_lossy().starts_with('-') {
            continue;
        }
        let path = cwd.join(arg);
        if !path.is_file() {
            continue;
        }
        let given = normalize(&path);
        let resolved = std::fs::canonicalize(&path).unwrap_or_else(|_| given.clone());
        push_new(&mut ctx.files, given.clone());
        push_new(&mut ctx.files, resolved.clone());
        let script = start::is_script(&resolved) || (first_file && form.runs_a_script());
        first_file = false;
        if !script {
            continue;
        }
        for file in [&given, &resolved] {
            let mut exists = |p: &Path| p.exists();
            let root = start::package_root(file, home.as_deref(), shared_temp.as_deref(), &mut exists);
            // A loose script's folder holds its sibling modules.
            let root = root.or_else(|| {
                file.parent()
                    .filter(|d| !start::too_wide(d, home.as_deref(), shared_temp.as_deref()))
                    .map(Path::to_path_buf)
            });
            if let Some(root) = root {
                push_new(&mut ctx.projects, root);
            }
        }
    }
    // A program inside a project (its virtual environment's, a `dist/` script) reads the project.
    for program in ctx.program.clone() {
        let mut exists = |p: &Path| p.exists();
        if let Some(root) = start::package_root(&program, home.as_deref(), shared_temp.as_deref(), &mut exists) {
            push_new(&mut ctx.projects, root);
        }
    }
    ctx
}

fn push_new(list: &mut Vec<PathBuf>, path: PathBuf) {
    if !list.contains(&path) {
        list.push(path);
    }
}

/// The first line of `file` when it starts with `#!`.
fn read_shebang(file: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // A regular file only, opened without blocking: a pipe put in a program's place (by a
    // server that can write there) would hold the start, deaf to signals, until a writer came.
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return None;
    }
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits()).open(file);
    let opened = opened.ok().filter(|f| f.metadata().is_ok_and(|m| m.is_file()))?;
    let mut head = Vec::with_capacity(SHEBANG_BYTES);
    opened.take(SHEBANG_BYTES as u64).read_to_end(&mut head).ok()?;
    let line = head.strip_prefix(b"#!")?;
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    Some(line[..end].to_vec())
}

/// What a `#!` line runs.
#[derive(Debug, PartialEq, Eq)]
enum Interpreter {
    /// An absolute path.
    Path(PathBuf),
    /// A name `env` looks up on PATH.
    OnPath(String),
}

/// The interpreter of a `#!` line (without the `#!`): `/usr/bin/python3 -u`, or
/// `/usr/bin/env node`, `/usr/bin/env -S node --flag`.
fn parse_shebang(line: &[u8]) -> Option<Interpreter> {
    let text = std::str::from_utf8(line).ok()?.trim();
    let mut words = text.split_ascii_whitespace();
    let first = words.next()?;
    if !first.starts_with('/') {
        return None;
    }
    if Path::new(first).file_name() != Some(OsStr::new("env")) {
        return Some(Interpreter::Path(PathBuf::from(first)));
    }
    // `env [-S] [-i] [NAME=VALUE...] PROGRAM`.
    let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
    Some(if name.starts_with('/') {
        Interpreter::Path(PathBuf::from(name))
    } else {
        Interpreter::OnPath(name.to_owned())
    })
}

/// Finds `command` as a child process started with `path` as its PATH and in `cwd` will: on
/// PATH (the first executable file) unless it names a path, relative to `cwd`.
pub fn find_program(command: &str, path: Option<&OsStr>, cwd: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    // ENOENT (2 on every Unix): "No such file or directory", as the spawn itself would say.
    let not_found = || std::io::Error::from_raw_os_error(2);
    if command.contains('/') {
        let p = cwd.join(command);
        return if p.exists() { Ok(p) } else { Err(not_found()) };
    }
    path.into_iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| cwd.join(dir).join(command))
        .find(|p| executable(p))
        .ok_or_else(not_found)
}

/// The entries of `dir` for [`crate::expand`] and [`crate::Sandbox::check`]: directories,
/// files, devices and symbolic links (sockets and the like are left out); empty when it cannot
/// be read; at most 10,000 (`MAX_ENTRIES`).
pub fn list_dir(dir: &Path) -> Vec<Entry> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .take(MAX_ENTRIES)
        .filter_map(|e| {
            use std::os::unix::fs::FileTypeExt as _;
            let file_type = e.file_type().ok()?;
            let symlink = file_type.is_symlink();
            (symlink || file_type.is_dir() || file_type.is_file() || file_type.is_char_device())
                .then(|| Entry { name: e.file_name(), symlink })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn shebang_lines_name_their_interpreter() {
        let parse = |s: &str| parse_shebang(s.as_bytes());
        assert_eq!(parse("/usr/bin/python3 -u"), Some(Interpreter::Path(PathBuf::from("/usr/bin/python3"))));
        assert_eq!(parse(" /usr/bin/env node"), Some(Interpreter::OnPath("node".into())));
        assert_eq!(parse("/usr/bin/env -S node --no-warnings"), Some(Interpreter::OnPath("node".into())));
        assert_eq!(
            parse("/usr/bin/env -i A=1 /opt/py/bin/python"),
            Some(Interpreter::Path("/opt/py/bin/python".into()))
        );
        assert_eq!(parse("relative/python"), None);
        assert_eq!(parse("/usr/bin/env"), None);
        assert_eq!(parse_shebang(b"\xff\xfe"), None);
    }

    #[test]
    fn a_script_brings_its_project_and_a_virtual_environment_its_interpreter() {
        let root = std::env::temp_dir().join(format!("mcp-sandbox-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let project = root.join("proj");
        let loose = root.join("loose");
        std::fs::create_dir_all(project.join("dist")).unwrap();
        std::fs::create_dir_all(&loose).unwrap();
        std::fs::write(project.join("package.json"), "{}").unwrap();
        std::fs::write(project.join("dist/index.js"), "").unwrap();
        std::fs::write(loose.join("server.py"), "import helper").unwrap();
        // A program whose `#!` line runs another: both are read.
        let tool = root.join("tool");
        std::fs::write(&tool, "#!/bin/sh\necho\n").unwrap();
        let temp = root.join("private");
        let env = [(OsString::from("HOME"), OsString::from("/nonexistent-home"))];

        let ctx = context(Path::new("/usr/bin/node"), &["dist/index.js".into()], &project, false, &temp, &env);
        assert!(ctx.files.contains(&project.join("dist/index.js")), "{:?}", ctx.files);
        assert!(ctx.projects.contains(&project), "{:?}", ctx.projects);
        assert_eq!(ctx.home, Some(PathBuf::from("/nonexistent-home")));

        let ctx = context(Path::new("/usr/bin/python3"), &[loose.join("server.py").into()], &root, true, &temp, &env);
        assert!(ctx.projects.contains(&loose), "a loose script's folder: {:?}", ctx.projects);
        assert!(ctx.cwd_configured);

        let ctx = context(&tool, &[], &root, false, &temp, &env);
        assert!(ctx.program.iter().any(|p| p.ends_with("sh")), "{:?}", ctx.program);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A pipe in a program's place is not opened (that would wait for a writer, forever).
    #[test]
    fn a_pipe_where_a_program_was_is_passed_over_without_waiting() {
        use std::os::unix::fs::OpenOptionsExt as _;
        let root = std::env::temp_dir().join(format!("mcp-sandbox-probe-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let fifo = root.join("server");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let probed = fifo.clone();
        std::thread::spawn(move || tx.send(read_shebang(&probed)));
        let read = rx.recv_timeout(std::time::Duration::from_secs(5));
        // Unblock a stuck reader before asserting, so a failure does not hang the test binary.
        let nonblocking = nix::fcntl::OFlag::O_NONBLOCK.bits();
        let _ = std::fs::OpenOptions::new().write(true).custom_flags(nonblocking).open(&fifo);
        assert_eq!(read, Ok(None), "the probe waited on a pipe");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
