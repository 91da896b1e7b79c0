//! A confined server's private temporary directory.
//!
//! Made `0700` in the system's temporary directory as `mcp-sandbox-{host pid}-{random}`, locked
//! (`flock`) by the host while it exists, and removed with the transport. A host that is
//! killed (SIGKILL, the OOM killer) cannot remove it, and what a server keeps there (caches,
//! downloads) would stay in `/tmp` for good. So the first directory a host makes, it also
//! removes those of hosts that have ended: named like ours, ours (same owner), not a symbolic
//! link, no process with the PID in the name, and unlocked. The lock is what keeps a live
//! host's directory in another PID namespace (a container sharing `/tmp`) from being taken
//! for a dead one's; the PID check keeps those of hosts older than the lock.

use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

const PREFIX: &str = "mcp-sandbox-";
/// At most this many stale directories are removed by one host, so that a start after a long
/// run of killed hosts is not held up (the next host goes on).
const MAX_SWEPT: usize = 64;
/// At most this many entries of the temporary directory are looked at by one host.
const MAX_SCANNED: usize = 65_536;

/// The server's private temporary directory, locked while it exists and removed on drop.
#[derive(Debug)]
pub(crate) struct TempDir {
    path: PathBuf,
    /// Held until the directory is removed: another host's sweep leaves a locked one alone.
    _lock: File,
}

impl TempDir {
    /// Makes one in the system's temporary directory; the first one of this process also
    /// starts removing, in the background, those killed hosts left (see the module's
    /// documentation).
    pub(crate) fn create() -> std::io::Result<Self> {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        let base = std::env::temp_dir();
        let made = Self::create_in(&base)?;
        SWEPT.call_once(|| {
            // Only our own: owned as the directory just made is.
            let Ok(owner) = std::fs::metadata(made.path()).map(|m| m.uid()) else { return };
            // On a thread of its own: removing what a server kept must not hold up this start.
            let sweeper = std::thread::Builder::new().name("mcp-temp-sweep".into()).spawn(move || {
                let removed = sweep(&base, owner, MAX_SWEPT);
                if removed > 0 {
                    tracing::info!("removed {removed} private temporary directories left by hosts that were killed");
                }
            });
            if let Err(e) = sweeper {
                tracing::debug!("no sweep of stale temporary directories: {e}");
            }
        });
        Ok(made)
    }

    fn create_in(base: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt as _;
        let mut last = None;
        for _ in 0..8 {
            let path = base.join(format!("{PREFIX}{}-{:016x}", std::process::id(), rand::random::<u64>()));
            if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&path) {
                last = Some(e);
                continue;
            }
            match lock(&path) {
                Ok(lock) => return Ok(Self { path, _lock: lock }),
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&path);
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no temporary directory name was free")))
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    /// Removed while still locked (the lock goes with the field after this).
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Opens and locks `dir`, and checks that the locked directory is still the one at `dir` (a
/// sweep in another PID namespace may have removed it between its making and the lock).
fn lock(dir: &Path) -> std::io::Result<File> {
    let file = File::open(dir)?;
    match file.lock() {
        Ok(()) => {}
        // A filesystem without locks: the directory goes unlocked (the PID in its name still
        // keeps a sweep in this PID namespace from taking it), rather than no server starting.
        Err(e)
            if matches!(e.kind(), std::io::ErrorKind::Unsupported) || e.raw_os_error() == Some(nix::libc::ENOLCK) =>
        {
            tracing::debug!("the temporary directory cannot be locked here ({e}); it goes unlocked");
        }
        Err(e) => return Err(e),
    }
    let (held, named) = (file.metadata()?, std::fs::symlink_metadata(dir)?);
    if (held.dev(), held.ino()) != (named.dev(), named.ino()) {
        return Err(std::io::Error::other("the temporary directory was replaced while it was being locked"));
    }
    Ok(file)
}

/// Removes up to `max` directories owned by `owner` in `base` that hosts which have ended
/// left behind; returns how many.
fn sweep(base: &Path, owner: u32, max: usize) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else { return 0 };
    let mut removed = 0;
    for entry in entries.take(MAX_SCANNED).flatten() {
        if removed == max {
            break;
        }
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(stale_pid) else { continue };
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if !meta.is_dir() || meta.uid() != owner || process_exists(pid) {
            continue;
        }
        let Ok(file) = File::open(&path) else { continue };
        if file.try_lock().is_err() {
            continue; // in use: a live host in another PID namespace
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The host PID in a private temporary directory's name, `mcp-sandbox-{pid}-{16 hex digits}`.
fn stale_pid(name: &str) -> Option<u32> {
    let (pid, random) = name.strip_prefix(PREFIX)?.split_once('-')?;
    let digits = |s: &str, hex: bool| {
        !s.is_empty() && s.bytes().all(|b| if hex { b.is_ascii_hexdigit() } else { b.is_ascii_digit() })
    };
    (digits(pid, false) && random.len() == 16 && digits(random, true)).then(|| pid.parse().ok()).flatten()
}

/// Whether a process with this PID exists here (one we may not signal exists too).
fn process_exists(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else { return true };
    if raw <= 0 {
        return true;
    }
    !matches!(nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None), Err(nix::errno::Errno::ESRCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PID no process has: one that just exited and was reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_exists(pid), "{pid} was taken again at once");
        pid
    }

    fn owner(base: &tempfile::TempDir) -> u32 {
        std::fs::metadata(base.path()).unwrap().uid()
    }

    fn named(base: &Path, pid: u32, random: u64) -> PathBuf {
        base.join(format!("{PREFIX}{pid}-{random:016x}"))
    }

    #[test]
    fn names_are_read_strictly() {
        assert_eq!(stale_pid("mcp-sandbox-123-00000000deadbeef"), Some(123));
        for name in [
            "mcp-sandbox-preview",
            "mcp-sandbox-test-1-ab",
            "mcp-sandbox-123-deadbeef",
            "mcp-sandbox--00000000deadbeef",
            "mcp-sandbox-12x-00000000deadbeef",
            "mcp-sandbox-123-00000000deadbeeg",
            "mcp-sandbox-99999999999-00000000deadbeef",
            "other-123-00000000deadbeef",
        ] {
            assert_eq!(stale_pid(name), None, "{name}");
        }
    }

    #[test]
    fn a_directory_is_locked_while_it_exists_and_removed_with_it() {
        let base = tempfile::tempdir().unwrap();
        let made = TempDir::create_in(base.path()).unwrap();
        let path = made.path().to_owned();
        std::fs::write(path.join("cache"), "kept by the server").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o700);
        let other = File::open(&path).unwrap();
        assert!(other.try_lock().is_err(), "held by the host");
        drop(made);
        assert!(!path.exists());
    }

    #[test]
    fn a_sweep_removes_only_what_ended_hosts_left() {
        let base = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        // Left by a killed host: removed with what the server kept there.
        let stale = named(base.path(), dead, 1);
        std::fs::create_dir_all(stale.join("private-cwd/deep")).unwrap();
        std::fs::write(stale.join("private-cwd/deep/file"), "x").unwrap();
        // A live host's (this process), unlocked as an older host's would be: kept.
        let live = named(base.path(), std::process::id(), 2);
        std::fs::create_dir(&live).unwrap();
        // A dead PID here but locked: a live host in another PID namespace: kept.
        let locked = named(base.path(), dead, 3);
        std::fs::create_dir(&locked).unwrap();
        let held = File::open(&locked).unwrap();
        held.lock().unwrap();
        // Named like one but a file, a symbolic link to a directory, or another name: kept.
        let file = named(base.path(), dead, 4);
        std::fs::write(&file, "not a directory").unwrap();
        let target = base.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("inside"), "x").unwrap();
        let link = named(base.path(), dead, 5);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let preview = base.path().join("mcp-sandbox-preview");
        std::fs::create_dir(&preview).unwrap();

        assert_eq!(sweep(base.path(), owner(&base), MAX_SWEPT), 1);
        assert!(!stale.exists());
        for kept in [&live, &locked, &file, &link, &preview, &target.join("inside")] {
            assert!(std::fs::symlink_metadata(kept).is_ok(), "{} kept", kept.display());
        }
        drop(held);
        assert_eq!(sweep(base.path(), owner(&base), MAX_SWEPT), 1, "unlocked, it is a dead host's");
        assert!(!locked.exists());
    }

    #[test]
    fn a_sweep_removes_at_most_its_share() {
        let base = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        for random in 0..3 {
            std::fs::create_dir(named(base.path(), dead, random)).unwrap();
        }
        assert_eq!(sweep(base.path(), owner(&base), 2), 2);
        assert_eq!(sweep(base.path(), owner(&base), 2), 1);
        assert_eq!(sweep(base.path(), owner(&base), 2), 0);
    }
}
