//! The protocol revision each configured server answered, remembered between runs, so a server
//! of the handshake era is not probed with `server/discover` before `initialize` at every start.
//!
//! The file is `<data dir>/eras.json`, beside the OAuth tokens: private (0600), written
//! atomically and only when an answer changed, at most [`MAX_ENTRIES`] entries and read only up
//! to [`MAX_FILE_BYTES`]. An entry is keyed by a SHA-256 of everything in the server's
//! configuration that could change its answer (its entry as written, the command line,
//! environment and directory or the URL and headers it resolved to), so an edited server is
//! probed again; entries older than [`MAX_AGE`] are not used. A remembered answer is never
//! trusted blindly: it only picks what is tried first ([`Era::remembering`]), a server that
//! answers otherwise still connects, and what it answered replaces what was remembered.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcp_client::{Era, ServerSpec, ServerState};
use mcp_protocol::ProtocolVersion;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{Config, ServerSettings, Target};

/// The file's name in the data directory.
const FILE_NAME: &str = "eras.json";
/// At most this many servers are remembered; the oldest answers go first.
pub(crate) const MAX_ENTRIES: usize = 256;
/// A larger file is not read (and is replaced at the next save).
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024;
/// An answer older than this is probed again, so a server that learned 2026-07-28 while still
/// answering `initialize` is found within a week.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    /// By key: the revision the server answered and when, in seconds since the epoch.
    servers: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    protocol: String,
    at: u64,
}

/// What was remembered, and what this run learned.
#[derive(Debug, Default)]
pub(crate) struct EraMemory {
    /// `None`: no data directory (nothing is remembered).
    path: Option<PathBuf>,
    file: File,
    changed: bool,
    /// Each server's key as `recall` computed it (by name), so `learn` hashes no server twice.
    keys: BTreeMap<String, String>,
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl EraMemory {
    /// Reads the user's file; a missing, oversized or unreadable one remembers nothing.
    pub(crate) fn load() -> Self {
        let path = crate::auth::data_dir().ok().map(|d| d.join(FILE_NAME));
        let file = path.as_deref().and_then(read).unwrap_or_default();
        Self { path, file, changed: false, keys: BTreeMap::new() }
    }

    /// Sets the era of `spec` (of `server`) when the server's answer is remembered (and
    /// recent).
    pub(crate) fn recall(&mut self, spec: &mut ServerSpec, server: &ServerSettings) {
        let oldest = now().saturating_sub(MAX_AGE.as_secs());
        let key = self.keys.entry(server.name.clone()).or_insert_with(|| key(server));
        let remembered = self.file.servers.get(key.as_str()).filter(|e| e.at >= oldest);
        if let Some(version) = remembered.and_then(|e| ProtocolVersion::parse(&e.protocol)) {
            spec.era = Some(Era::remembering(version));
        }
    }

    /// Remembers what each connected server (by name, with its state) answered.
    pub(crate) fn learn<'a>(&mut self, states: impl IntoIterator<Item = (&'a str, &'a ServerState)>, config: &Config) {
        let at = now();
        for (name, state) in states {
            let ServerState::Connected { protocol, .. } = state else { continue };
            let Some(server) = config.server(name) else { continue };
            let key = self.keys.remove(name).unwrap_or_else(|| key(server));
            let entry = Entry { protocol: protocol.as_str().to_owned(), at };
            // The same answer, still in use: no write (most starts write nothing), and its time
            // stays, so the server is probed again once it is older than `MAX_AGE`.
            let fresh =
                self.file.servers.get(&key).is_some_and(|old| {
                    old.protocol == entry.protocol && old.at.saturating_add(MAX_AGE.as_secs()) >= at
                });
            if !fresh {
                self.file.servers.insert(key, entry);
                self.changed = true;
            }
        }
        while self.file.servers.len() > MAX_ENTRIES {
            let oldest = self.file.servers.iter().min_by_key(|(_, e)| e.at).map(|(k, _)| k.clone());
            let Some(oldest) = oldest else { break };
            self.file.servers.remove(&oldest);
        }
    }

    /// Writes the file if this run learned something; a failure is only logged (the next run
    /// probes again).
    pub(crate) fn save(&self) {
        let Some(path) = self.path.as_deref().filter(|_| self.changed) else { return };
        let written = serde_json::to_vec(&self.file)
            .map_err(std::io::Error::from)
            .and_then(|bytes| private_files::write(path, &bytes));
        if let Err(e) = written {
            tracing::debug!("not remembering the servers' protocol eras: {e}");
        }
    }
}

fn read(path: &std::path::Path) -> Option<File> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text).ok()?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return None;
    }
    serde_json::from_str(&text).ok()
}

/// The key of a server's answer: a SHA-256 (hex) of its name, its entry as written with the
/// defaults that apply to it, and what that resolved to (variables expanded). Values such as
/// tokens in headers or the environment only ever enter the hash.
fn key(server: &ServerSettings) -> String {
    let mut hash = Sha256::new();
    let mut part = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    part(server.name.as_bytes());
    part(server.fingerprint.as_bytes());
    match &server.target {
        Target::Stdio { config: stdio, .. } => {
            part(b"stdio");
            part(stdio.command.as_bytes());
            for arg in &stdio.args {
                part(arg.as_bytes());
            }
            for (name, value) in &stdio.env {
                part(name.as_bytes());
                part(value.as_bytes());
            }
            part(stdio.cwd.as_ref().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default().as_bytes());
        }
        Target::Remote(remote) => {
            part(b"remote");
            part(remote.url.as_bytes());
            for (name, value) in &remote.headers {
                part(name.as_bytes());
                part(value.as_bytes());
            }
        }
    }
    let mut hex = String::with_capacity(64);
    for b in hash.finalize() {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}
