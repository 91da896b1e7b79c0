//! Files that hold a conversation (transcripts, saved tool results) are the user's alone:
//! directories are created 0700 and files 0600 on Unix, whatever the umask, as the token store
//! does for tokens.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Creates `dir` and any missing parents, each new one readable by its owner only (0700). An
/// existing directory keeps its mode (it may be the user's own choice, such as
/// `MCP_HARNESS_DATA_DIR`).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Opens `path` for appending, creating it (and its directory) private: 0600 in 0700.
pub(crate) fn open_private_append(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Writes `bytes` to `path` (replacing what was there), private: 0600 in 0700, also when the
/// file existed with a wider mode.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    file.write_all(bytes)
}
