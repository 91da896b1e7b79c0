//! Files that hold what is the user's alone (OAuth tokens, transcripts, saved tool results,
//! remembered protocol eras, the configuration with its headers and environment): one writer
//! for every crate, so none of them drifts in atomicity or modes.
//!
//! - Directories this crate creates are 0700 on Unix, whatever the umask.
//! - An existing directory keeps its mode ([`create_dir`]): it may be the user's own choice
//!   (`MCP_HARNESS_DATA_DIR`, `~/.config`), and the files in it are private anyway. A store
//!   that owns its directory and keeps secrets in it (the OAuth token store) tightens it with
//!   [`tighten_dir`], a decision made by that caller, not by every write.
//! - Files are written whole ([`write()`]): a temporary file 0600 beside the target, synced, then
//!   renamed over it, so a reader never sees half a file and the result is 0600 even when the
//!   file existed with a wider mode. A symlink at `path` is replaced, not followed: a caller that
//!   means the link's target resolves it first.
//! - Files appended to ([`open_append`]) are created 0600.
//!
//! ```
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("data").join("state.json");
//! private_files::write(&path, b"{}")?;
//! assert_eq!(std::fs::read(&path)?, b"{}");
//! #[cfg(unix)]
//! {
//!     use std::os::unix::fs::PermissionsExt as _;
//!     assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
//!     assert_eq!(std::fs::metadata(path.parent().unwrap())?.permissions().mode() & 0o777, 0o700);
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Creates `dir` and any missing parents, each new one 0700. An existing directory keeps its
/// mode (see the crate's documentation).
pub fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates `dir` like [`create_dir`], then makes it 0700 even if it existed with a wider mode:
/// for a directory that only its owner's secrets live in.
pub fn tighten_dir(dir: &Path) -> io::Result<()> {
    create_dir(dir)?;
    #[cfg(unix)]
    fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    Ok(())
}

/// Opens `path` for reading if it is a regular file, without waiting should it be (or have
/// become, since a caller looked) a pipe: a pipe held a reader until a writer came, deaf to
/// Ctrl-C. Anything but a regular file is an `InvalidInput` error "not a regular file".
pub fn open_regular(path: &Path) -> io::Result<fs::File> {
    let not_regular = || io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
    if !fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let mut open = fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NONBLOCK);
    let file = open.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// The mode of a file others may read or write (`Some(0o644)`, say), or `None` when it is its
/// owner's alone (and always on systems without Unix modes): for a secret the user provides
/// (a key, a token), which is refused when exposed, as ssh refuses a private key.
pub fn exposed_mode(meta: &fs::Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = meta.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Replaces `path` with `bytes` atomically: a temporary file (0600) in the same directory,
/// written and synced, then renamed over `path`. Missing directories are created 0700. On
/// failure the temporary file is removed and `path` is as it was.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    create_dir(dir)?;
    let temp = dir.join(temp_name(path));
    let written = (|| {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    // Make the rename durable; best effort (not every file system can sync a directory).
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Creates `path` 0600 (and its directories 0700) for writing, failing with `AlreadyExists`
/// if it is there: for a file that must never replace another.
pub fn create_new(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_dir(dir)?;
    }
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Opens `path` for appending, creating it 0600 (and its directories 0700) if needed.
pub fn open_append(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_dir(dir)?;
    }
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// `.NAME.PID.N.NANOS.tmp`: unique among this process's writes (a counter) and unlikely to
/// meet another process's (its id, the time).
fn temp_name(path: &Path) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!(".{name}.{}.{n}.{nanos}.tmp", std::process::id())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// A pipe is refused without waiting for a writer; a regular file opens.
    #[cfg(unix)]
    #[test]
    fn only_a_regular_file_is_opened_and_a_pipe_does_not_wait() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join("pipe");
        nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(open_regular(&pipe).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(open_regular(dir.path()).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let file = dir.path().join("file");
        write(&file, b"x").unwrap();
        assert!(open_regular(&file).is_ok());
    }

    /// A file is exposed when its group or others have any permission.
    #[cfg(unix)]
    #[test]
    fn exposed_modes_are_those_others_have_any_part_in() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        write(&path, b"x").unwrap();
        for (mode, exposed) in [(0o600, None), (0o400, None), (0o640, Some(0o640)), (0o444, Some(0o444))] {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(exposed_mode(&fs::metadata(&path).unwrap()), exposed, "{mode:o}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn new_directories_and_files_are_private_and_existing_directories_keep_their_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().unwrap();
        let open = root.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
        let path = open.join("a/b/file");
        write(&path, b"one").unwrap();
        assert_eq!((mode(&path), mode(&open.join("a/b")), mode(&open.join("a"))), (0o600, 0o700, 0o700));
        assert_eq!(mode(&open), 0o755, "an existing directory keeps its mode");
        // Written again over a file someone made readable: private again, whole.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        write(&path, b"two").unwrap();
        assert_eq!((mode(&path), fs::read(&path).unwrap()), (0o600, b"two".to_vec()));
        tighten_dir(&open).unwrap();
        assert_eq!(mode(&open), 0o700);
        let log = open_append(&root.path().join("logs/x.jsonl")).unwrap();
        drop(log);
        assert_eq!(mode(&root.path().join("logs/x.jsonl")), 0o600);
        assert_eq!(mode(&root.path().join("logs")), 0o700);
    }

    #[test]
    fn a_failed_write_leaves_the_file_and_no_temporary_file() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("kept");
        write(&path, b"old").unwrap();
        // A directory where the file's temporary would be renamed to: the rename fails.
        let blocked = root.path().join("dir");
        fs::create_dir(&blocked).unwrap();
        fs::write(blocked.join("inside"), b"x").unwrap();
        assert!(write(&blocked, b"new").is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
        let left: Vec<_> = fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_is_replaced_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("target");
        fs::write(&target, b"target").unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write(&link, b"new").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"target");
        assert!(!fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    }
}
