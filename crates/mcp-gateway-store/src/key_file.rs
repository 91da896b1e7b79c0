//! The sealing key file replicas share.
//!
//! Text, one key a line: 64 hex digits (256 bits). The first key seals; the others (at most
//! three) only open, so a key can be rotated without refusing the approval states in flight:
//! add the new key as a second line everywhere, then move it first, then drop the old one.
//! Blank lines and lines starting with `#` are skipped. Make one with
//! `umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > gateway.key`.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use mcp_gateway::{MAX_SEALING_KEYS, SealError, StateSealer};

/// Largest key file read.
const MAX_KEY_FILE_BYTES: u64 = 4096;

/// Why the key file was refused. Never shows a key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// It could not be read.
    #[error("the sealing key file {} cannot be read: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Others can read it.
    #[error(
        "the sealing key file {} can be read by other users (mode {mode:o}); make it private: chmod 600 {}",
        path.display(), path.display()
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A line is not a key.
    #[error(
        "the sealing key file {} line {line} is not a key: write 64 hex digits (256 random bits), e.g. from `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'`",
        path.display()
    )]
    NotAKey {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
    },
    /// No key in it.
    #[error("the sealing key file {} holds no key", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// Too many keys, or too large.
    #[error("the sealing key file {} holds more than {MAX_SEALING_KEYS} keys or is larger than {MAX_KEY_FILE_BYTES} bytes", path.display())]
    TooMany {
        /// The file.
        path: PathBuf,
    },
    /// The cryptographic library refused the key.
    #[error("the sealing key from {} cannot be used: {error}", path.display())]
    Sealer {
        /// The file.
        path: PathBuf,
        /// Why.
        error: SealError,
    },
}

/// Reads the key file at `path` into a sealer (see the module's docs for the format). A file
/// that other users can read is refused.
pub fn load_sealer(path: &Path) -> Result<StateSealer, KeyFileError> {
    let read = |error| KeyFileError::Read { path: path.to_owned(), error };
    // Opened as it is, a pipe included: `--key-file <(vault read ...)` keeps the key off disk.
    let file = std::fs::File::open(path).map_err(read)?;
    let meta = file.metadata().map_err(read)?;
    if let Some(mode) = private_files::exposed_mode(&meta) {
        return Err(KeyFileError::Exposed { path: path.to_owned(), mode });
    }
    if meta.len() > MAX_KEY_FILE_BYTES {
        return Err(KeyFileError::TooMany { path: path.to_owned() });
    }
    let mut text = String::new();
    file.take(MAX_KEY_FILE_BYTES).read_to_string(&mut text).map_err(read)?;
    let mut keys = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = parse_key(line).ok_or_else(|| KeyFileError::NotAKey { path: path.to_owned(), line: i + 1 })?;
        keys.push(key);
    }
    let Some((first, previous)) = keys.split_first() else {
        return Err(KeyFileError::Empty { path: path.to_owned() });
    };
    if keys.len() > MAX_SEALING_KEYS {
        return Err(KeyFileError::TooMany { path: path.to_owned() });
    }
    StateSealer::with_keys(first, previous).map_err(|error| KeyFileError::Sealer { path: path.to_owned(), error })
}

fn parse_key(hex: &str) -> Option<[u8; 32]> {
    let digits = hex.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
        let high = char::from(pair[0]).to_digit(16)?;
        let low = char::from(pair[1]).to_digit(16)?;
        *byte = u8::try_from(high * 16 + low).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn key_file(text: &str, mode: u32) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        file
    }

    const A: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const B: &str = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn a_rotated_key_still_opens_what_it_sealed_and_an_unknown_key_does_not() {
        let claims = mcp_gateway::ApprovalClaims {
            caller: "p:alice\nclient".into(),
            tool: "files__write_file".into(),
            arguments: "digest".into(),
            expires_ms: 2_000,
            id: "id".into(),
        };
        let old = load_sealer(key_file(A, 0o600).path()).unwrap();
        let state = old.seal(&claims).unwrap();
        let rotating = load_sealer(key_file(&format!("{B}\n{A}\n"), 0o600).path()).unwrap();
        assert_eq!(rotating.open(&state, 1_000).unwrap(), claims);
        let fresh = rotating.seal(&claims).unwrap();
        assert!(old.open(&fresh, 1_000).is_err(), "the new key seals");
        let other = load_sealer(key_file(B, 0o600).path()).unwrap();
        assert_eq!(other.open(&state, 1_000), Err(SealError::Altered));
    }

    #[test]
    fn a_private_file_of_keys_is_read_and_anything_else_refused_with_a_reason() {
        assert!(load_sealer(key_file(&format!("# rotated 2026-12\n{A}\n\n{B}\n"), 0o600).path()).is_ok());
        let exposed = load_sealer(key_file(A, 0o644).path()).unwrap_err();
        assert!(exposed.to_string().contains("chmod 600"), "{exposed}");
        let short = load_sealer(key_file(&A[..62], 0o600).path()).unwrap_err();
        assert!(matches!(short, KeyFileError::NotAKey { line: 1, .. }), "{short}");
        assert!(!short.to_string().contains(&A[..62]), "a key is never shown");
        assert!(matches!(load_sealer(key_file("# none\n", 0o600).path()), Err(KeyFileError::Empty { .. })));
        let five = [A; 5].join("\n");
        assert!(matches!(load_sealer(key_file(&five, 0o600).path()), Err(KeyFileError::TooMany { .. })));
        assert!(matches!(load_sealer(Path::new("/nonexistent/key")), Err(KeyFileError::Read { .. })));
    }

    /// A key from a pipe (`--key-file <(vault read ...)`, which bash makes 0600) is read.
    #[cfg(unix)]
    #[test]
    fn a_key_from_a_pipe_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join("key");
        assert!(std::process::Command::new("mkfifo").args(["-m", "600"]).arg(&pipe).status().unwrap().success());
        let writer = {
            let pipe = pipe.clone();
            std::thread::spawn(move || std::fs::write(pipe, format!("{A}\n")))
        };
        assert!(load_sealer(&pipe).is_ok());
        writer.join().unwrap().unwrap();
    }
}
