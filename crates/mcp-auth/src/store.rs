//! A per-user token store: one JSON file in a directory the caller chooses (the CLI passes the
//! user's data directory), mapping (issuer, resource) to tokens.
//!
//! The file is replaced atomically (a temporary file in the same directory, flushed, then
//! renamed over it). On Unix the file is created with mode `0600` and the directory is set to
//! `0700`. Tokens never appear in `Debug` output.
//!
//! Format (`version` 1):
//!
//! ```json
//! {"version":1,"entries":[{"issuer":"https://auth.example.com","resource":"https://mcp.example.com/mcp",
//!   "tokens":{"access_token":"…","refresh_token":"…","expires_at_ms":1767225600250,
//!             "expires_at_unix":1767225600,"scope":"files:read"}}]}
//! ```
//!
//! Expiry is `expires_at_ms` (milliseconds since the Unix epoch). Files written before it
//! existed have only `expires_at_unix` (whole seconds), which is read when `expires_at_ms` is
//! absent; it is still written, rounded down, so an older reader sees the expiry too (a little
//! early, never late).

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use mcp_safety::Secret;
use serde::{Deserialize, Serialize};

/// Name of the token file inside the store directory.
pub const FILE_NAME: &str = "oauth-tokens.json";
const VERSION: u32 = 1;

/// Tokens for one (issuer, resource). The tokens are [`Secret`]s: `Debug` never shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "TokensOnDisk", into = "TokensOnDisk")]
pub struct StoredTokens {
    /// The access token.
    pub access_token: Secret,
    /// The refresh token, if one was issued.
    pub refresh_token: Option<Secret>,
    /// Expiry in milliseconds since the Unix epoch, if known.
    pub expires_at_ms: Option<u64>,
    /// The granted scope, space-delimited, if known.
    pub scope: Option<String>,
    /// The client the tokens were issued to (needed to refresh them), if it was registered
    /// dynamically or is otherwise not in the configuration.
    pub client: Option<crate::flow::ClientRegistration>,
    /// Scopes the server asked for (a step-up) that these tokens lack, space-delimited: the
    /// next login requests them too.
    pub wanted_scope: Option<String>,
}

impl StoredTokens {
    /// Whether the access token is expired at `now_ms` (milliseconds since the Unix epoch), or
    /// will be within `skew_ms`. Unknown expiry counts as not expired.
    pub fn is_expired(&self, now_ms: u64, skew_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|exp| now_ms.saturating_add(skew_ms) >= exp)
    }
}

/// [`StoredTokens`] as the file has them: both forms of the expiry (see the module docs).
#[derive(Serialize, Deserialize)]
struct TokensOnDisk {
    access_token: Secret,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at_unix: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client: Option<crate::flow::ClientRegistration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wanted_scope: Option<String>,
}

impl From<TokensOnDisk> for StoredTokens {
    fn from(t: TokensOnDisk) -> Self {
        Self {
            access_token: t.access_token,
            refresh_token: t.refresh_token,
            expires_at_ms: t.expires_at_ms.or_else(|| t.expires_at_unix.map(|s| s.saturating_mul(1000))),
            scope: t.scope,
            client: t.client,
            wanted_scope: t.wanted_scope,
        }
    }
}

impl From<StoredTokens> for TokensOnDisk {
    fn from(t: StoredTokens) -> Self {
        Self {
            access_token: t.access_token,
            refresh_token: t.refresh_token,
            expires_at_ms: t.expires_at_ms,
            expires_at_unix: t.expires_at_ms.map(|ms| ms / 1000),
            scope: t.scope,
            client: t.client,
            wanted_scope: t.wanted_scope,
        }
    }
}

/// A token store that could not be read or written. Messages name the file, never a token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O error on `path`.
    #[error("token store {}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file exists but is not a valid token store.
    #[error("token store {} is corrupt: {source}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: serde_json::Error,
    },
    /// The file was written by a newer version.
    #[error("token store {} has unsupported version {version}", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        version: u32,
    },
}

#[derive(Serialize, Deserialize)]
struct FileFormat {
    version: u32,
    entries: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    issuer: String,
    resource: String,
    tokens: StoredTokens,
}

/// The tokens of one user, loaded from and saved to `<dir>/oauth-tokens.json`.
///
/// Keys are compared as exact strings: pass the issuer as the authorization server metadata
/// states it and the resource as [`crate::resource::canonical_resource`] returns it. `dir` should
/// be dedicated to the application (e.g. `<data dir>/mcp-harness`): [`save`](Self::save) sets it
/// to mode `0700`. Saves are atomic but not merged: of two processes saving at once, the last
/// one wins.
///
/// `Debug` shows the path and the (issuer, resource) keys only.
#[derive(Clone)]
pub struct TokenStore {
    dir: PathBuf,
    entries: BTreeMap<(String, String), StoredTokens>,
}

impl fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenStore").field("path", &self.path()).field("keys", &self.entries.keys()).finish()
    }
}

impl TokenStore {
    /// Loads the store of directory `dir`. A missing file (or directory) is an empty store.
    pub fn load(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        let path = dir.join(FILE_NAME);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self { dir, entries: BTreeMap::new() }),
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let file: FileFormat = match serde_json::from_slice(&bytes) {
            Ok(f) => f,
            Err(source) => return Err(StoreError::Corrupt { path, source }),
        };
        if file.version != VERSION {
            return Err(StoreError::UnsupportedVersion { path, version: file.version });
        }
        let entries = file.entries.into_iter().map(|e| ((e.issuer, e.resource), e.tokens)).collect();
        Ok(Self { dir, entries })
    }

    /// The token file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The tokens for (`issuer`, `resource`).
    pub fn get(&self, issuer: &str, resource: &str) -> Option<&StoredTokens> {
        self.entries.get(&(issuer.to_owned(), resource.to_owned()))
    }

    /// Sets the tokens for (`issuer`, `resource`), returning the previous ones. Call
    /// [`save`](Self::save) to persist.
    pub fn insert(&mut self, issuer: &str, resource: &str, tokens: StoredTokens) -> Option<StoredTokens> {
        self.entries.insert((issuer.to_owned(), resource.to_owned()), tokens)
    }

    /// The (issuer, tokens) stored for `resource` under any issuer: the first in issuer order.
    /// A server's tokens are found before its authorization server is known.
    pub fn find_resource(&self, resource: &str) -> Option<(&str, &StoredTokens)> {
        self.entries.iter().find(|((_, r), _)| r == resource).map(|((i, _), t)| (i.as_str(), t))
    }

    /// Removes the tokens for (`issuer`, `resource`), returning them.
    pub fn remove(&mut self, issuer: &str, resource: &str) -> Option<StoredTokens> {
        self.entries.remove(&(issuer.to_owned(), resource.to_owned()))
    }

    /// Removes every entry for `resource` (whatever the issuer), returning how many there were.
    pub fn remove_resource(&mut self, resource: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|(_, r), _| r != resource);
        before - self.entries.len()
    }

    /// The (issuer, resource) keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.keys().map(|(i, r)| (i.as_str(), r.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes the store atomically, creating the directory if needed.
    pub fn save(&self) -> Result<(), StoreError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        // The store owns its directory and keeps secrets in it: tightened even if it existed wider.
        private_files::tighten_dir(&self.dir).map_err(io_err(&self.dir))?;
        let file = FileFormat {
            version: VERSION,
            entries: self
                .entries
                .iter()
                .map(|((issuer, resource), tokens)| Entry {
                    issuer: issuer.clone(),
                    resource: resource.clone(),
                    tokens: tokens.clone(),
                })
                .collect(),
        };
        let mut bytes =
            serde_json::to_vec_pretty(&file).map_err(|e| StoreError::Io { path: self.path(), source: e.into() })?;
        bytes.push(b'\n');
        private_files::write(&self.path(), &bytes).map_err(io_err(&self.path()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn tokens(access: &str) -> StoredTokens {
        StoredTokens {
            access_token: access.into(),
            refresh_token: Some(format!("{access}-refresh").into()),
            expires_at_ms: Some(1_767_225_600_250),
            scope: Some("files:read".into()),
            client: None,
            wanted_scope: None,
        }
    }

    #[test]
    fn missing_file_and_dir_are_empty() {
        let tmp = tempfile::tempdir().unwrap();
        let store = TokenStore::load(tmp.path().join("not/there")).unwrap();
        assert!(store.is_empty());
        assert_eq!(store.path(), tmp.path().join("not/there").join(FILE_NAME));
    }

    #[test]
    fn round_trip_per_issuer_and_resource() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data/mcp-harness");
        let mut store = TokenStore::load(&dir).unwrap();
        store.insert("https://auth.a", "https://mcp.x/mcp", tokens("A"));
        store.insert("https://auth.b", "https://mcp.x/mcp", tokens("B"));
        store.insert(
            "https://auth.a",
            "https://mcp.y/",
            StoredTokens {
                access_token: "C".into(),
                refresh_token: None,
                expires_at_ms: None,
                scope: None,
                client: None,
                wanted_scope: None,
            },
        );
        store.save().unwrap();

        let mut loaded = TokenStore::load(&dir).unwrap();
        assert_eq!(loaded.len(), 3);
        assert_eq!(loaded.get("https://auth.a", "https://mcp.x/mcp"), Some(&tokens("A")));
        assert_eq!(loaded.get("https://auth.b", "https://mcp.x/mcp"), Some(&tokens("B")));
        assert_eq!(loaded.get("https://auth.a", "https://mcp.y/").unwrap().refresh_token, None);
        assert_eq!(loaded.get("https://auth.b", "https://mcp.y/"), None);

        assert_eq!(loaded.remove_resource("https://mcp.x/mcp"), 2);
        assert_eq!(loaded.remove("https://auth.a", "https://mcp.y/").unwrap().access_token, "C");
        loaded.save().unwrap();
        assert!(TokenStore::load(&dir).unwrap().is_empty());
        // Only the token file remains: no temporary files left behind.
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [FILE_NAME]);
    }

    #[test]
    fn overwrite_replaces() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = TokenStore::load(tmp.path()).unwrap();
        store.insert("i", "r", tokens("old"));
        store.save().unwrap();
        assert_eq!(store.insert("i", "r", tokens("new")), Some(tokens("old")));
        store.save().unwrap();
        assert_eq!(TokenStore::load(tmp.path()).unwrap().get("i", "r"), Some(&tokens("new")));
    }

    #[test]
    fn corrupt_file_names_path() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(FILE_NAME);
        fs::write(&path, b"{not json").unwrap();
        let err = TokenStore::load(tmp.path()).unwrap_err();
        assert!(matches!(&err, StoreError::Corrupt { path: p, .. } if *p == path), "{err:?}");
        assert!(err.to_string().contains(&path.display().to_string()));

        fs::write(&path, br#"{"version":1,"entries":[{"issuer":"i"}]}"#).unwrap();
        assert!(matches!(TokenStore::load(tmp.path()), Err(StoreError::Corrupt { .. })));

        fs::write(&path, br#"{"version":2,"entries":[]}"#).unwrap();
        assert!(matches!(TokenStore::load(tmp.path()), Err(StoreError::UnsupportedVersion { version: 2, .. })));
    }

    #[test]
    fn debug_redacts_tokens() {
        let t = tokens("secret-access");
        let d = format!("{t:?}");
        assert!(!d.contains("secret-access"), "{d}");
        assert!(d.contains("files:read") && d.contains("Secret(<redacted>)"), "{d}");
        let tmp = tempfile::tempdir().unwrap();
        let mut store = TokenStore::load(tmp.path()).unwrap();
        store.insert("https://issuer", "https://res", t);
        let d = format!("{store:?}");
        assert!(!d.contains("secret-access") && d.contains("https://issuer"), "{d}");
    }

    #[test]
    fn expiry_to_the_millisecond() {
        let t = tokens("a");
        assert!(!t.is_expired(1_767_225_000_000, 60_000));
        assert!(t.is_expired(1_767_225_550_000, 60_000));
        assert!(!t.is_expired(1_767_225_600_249, 0), "a quarter second left");
        assert!(t.is_expired(1_767_225_600_250, 0));
        assert!(!StoredTokens { expires_at_ms: None, ..t.clone() }.is_expired(u64::MAX, u64::MAX));
        assert!(t.is_expired(u64::MAX, u64::MAX));
    }

    #[test]
    fn expiry_is_stored_in_milliseconds_and_whole_seconds_are_still_read() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = TokenStore::load(tmp.path()).unwrap();
        store.insert("i", "r", tokens("a"));
        store.save().unwrap();
        let text = fs::read_to_string(store.path()).unwrap();
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        let written = &file["entries"][0]["tokens"];
        assert_eq!(written["expires_at_ms"], 1_767_225_600_250_u64, "{text}");
        // For readers that know only whole seconds: rounded down, so never later than the truth.
        assert_eq!(written["expires_at_unix"], 1_767_225_600_u64, "{text}");
        assert_eq!(TokenStore::load(tmp.path()).unwrap().get("i", "r"), Some(&tokens("a")));

        // A file from before milliseconds.
        fs::write(
            store.path(),
            br#"{"version":1,"entries":[{"issuer":"i","resource":"r","tokens":{"access_token":"old","expires_at_unix":1767225600}}]}"#,
        )
        .unwrap();
        let old = TokenStore::load(tmp.path()).unwrap();
        assert_eq!(old.get("i", "r").unwrap().expires_at_ms, Some(1_767_225_600_000));
        // Both present: the precise one wins.
        fs::write(
            store.path(),
            br#"{"version":1,"entries":[{"issuer":"i","resource":"r","tokens":{"access_token":"new","expires_at_unix":1,"expires_at_ms":1500}}]}"#,
        )
        .unwrap();
        assert_eq!(TokenStore::load(tmp.path()).unwrap().get("i", "r").unwrap().expires_at_ms, Some(1500));
    }

    #[cfg(unix)]
    #[test]
    fn permissions_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let mut store = TokenStore::load(&dir).unwrap();
        store.insert("i", "r", tokens("a"));
        store.save().unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&store.path()), 0o600);
        // A fresh nested directory too.
        let nested = tmp.path().join("a/b");
        let mut store = TokenStore::load(&nested).unwrap();
        store.insert("i", "r", tokens("a"));
        store.save().unwrap();
        assert_eq!(mode(&nested), 0o700);
        assert_eq!(mode(&store.path()), 0o600);
    }

    #[cfg(unix)]
    #[test]
    fn unreadable_file_is_io_error_with_path() {
        let tmp = tempfile::tempdir().unwrap();
        // A directory where the file should be: reading it fails with something other than NotFound.
        fs::create_dir(tmp.path().join(FILE_NAME)).unwrap();
        let err = TokenStore::load(tmp.path()).unwrap_err();
        assert!(matches!(&err, StoreError::Io { path, .. } if *path == tmp.path().join(FILE_NAME)), "{err:?}");
    }
}
