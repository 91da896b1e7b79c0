//! Sealed `requestState` for approval rounds of the 2026-07-28 revision, and the replay cache.
//!
//! The state goes through the client, so it is attacker-controlled input. It is sealed with
//! AES-256-GCM under the gateway's key (a fresh random nonce per seal): a state that was altered
//! does not open. Inside are the caller, the tool, a digest of the arguments, an expiry and a
//! random id; a state presented by another caller, for another tool or other arguments, or
//! after its expiry is refused, and the id is accepted once ([`ReplayCache`]), so an approval
//! cannot be replayed within its lifetime either.
//!
//! Format: `base64url(1 || nonce(12) || ciphertext || tag(16))`, the plaintext the claims as
//! JSON.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::owners::OwnerCounts;

/// Version byte of the sealed format.
const FORMAT: u8 = 1;
/// Bound to every seal, so a ciphertext made for another purpose with the same key never opens.
const AAD: &[u8] = b"mcp-gateway/requestState/1";
/// Longest state accepted, in characters: a real one is a few hundred.
const MAX_STATE_CHARS: usize = 4096;
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// What a sealed approval state says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalClaims {
    /// Who was asked ([`crate::Caller::key`] and the client's name).
    pub caller: String,
    /// The tool, under its downstream name.
    pub tool: String,
    /// SHA-256 of the arguments in canonical form, hex.
    pub arguments: String,
    /// Not accepted after this time (Unix milliseconds).
    pub expires_ms: u64,
    /// Random: the state is accepted once.
    pub id: String,
}

/// Why a state was refused. The text is what the client reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// Not a state this gateway made (not its format).
    #[error("the requestState is not one this gateway issued")]
    Malformed,
    /// It does not open under the gateway's key: altered, or sealed with another key.
    #[error("the requestState was altered or was not issued by this gateway")]
    Altered,
    /// Its lifetime is over.
    #[error("the approval in requestState expired {by_s} s ago; call the tool again to be asked anew")]
    Expired {
        /// How long ago, in seconds.
        by_s: u64,
    },
    /// Issued to another caller.
    #[error("the requestState was issued to another caller")]
    OtherCaller,
    /// Issued for another tool.
    #[error("the requestState was issued for another tool ({0})")]
    OtherTool(String),
    /// Issued for other arguments.
    #[error("the requestState was issued for other arguments; call the tool again to be asked about these")]
    OtherArguments,
    /// Presented before.
    #[error("the requestState was used already (an approval is accepted once); call the tool again to be asked anew")]
    Replayed,
    /// The replay cache could not say.
    #[error("the approval cannot be checked now: {0}")]
    Replay(ReplayError),
    /// The cryptographic library failed (no randomness, say).
    #[error("sealing failed: {0}")]
    Crypto(&'static str),
}

/// Most keys a sealer opens with (the sealing one and those being rotated out).
pub const MAX_SEALING_KEYS: usize = 4;

/// Seals approval states with one key, and opens them with it or with the keys being rotated
/// out ([`StateSealer::with_keys`]), so replicas can change keys without refusing the states
/// in flight.
pub struct StateSealer {
    key: LessSafeKey,
    /// Keys that still open states sealed before a rotation (never used to seal).
    previous: Vec<LessSafeKey>,
}

impl fmt::Debug for StateSealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StateSealer(<key>)")
    }
}

impl StateSealer {
    /// A sealer with a fresh random key (states do not survive a restart, nor open on another
    /// replica; replicas share a key from a file: [`StateSealer::from_key`]).
    pub fn generate() -> Result<Self, SealError> {
        let mut key = [0u8; 32];
        aws_lc_rs::rand::fill(&mut key).map_err(|_| SealError::Crypto("no randomness for the key"))?;
        Self::from_key(&key)
    }

    /// A sealer with this 256-bit key.
    pub fn from_key(key: &[u8; 32]) -> Result<Self, SealError> {
        Self::with_keys(key, &[])
    }

    /// A sealer that seals with `key` and opens with it or any of `previous` (a rotation: every
    /// replica first learns the new key as a previous one, then seals with it, then forgets the
    /// old). At most [`MAX_SEALING_KEYS`] in all.
    pub fn with_keys(key: &[u8; 32], previous: &[[u8; 32]]) -> Result<Self, SealError> {
        if previous.len() >= MAX_SEALING_KEYS {
            return Err(SealError::Crypto("too many sealing keys"));
        }
        let bind = |key: &[u8; 32]| {
            UnboundKey::new(&AES_256_GCM, key)
                .map(LessSafeKey::new)
                .map_err(|_| SealError::Crypto("the key was refused"))
        };
        Ok(Self { key: bind(key)?, previous: previous.iter().map(bind).collect::<Result<_, _>>()? })
    }

    /// Seals `claims`.
    pub fn seal(&self, claims: &ApprovalClaims) -> Result<String, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).map_err(|_| SealError::Crypto("no randomness for the nonce"))?;
        let mut data = serde_json::to_vec(claims).map_err(|_| SealError::Crypto("the claims did not encode"))?;
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(AAD), &mut data)
            .map_err(|_| SealError::Crypto("sealing failed"))?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + data.len());
        out.push(FORMAT);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&data);
        Ok(B64.encode(out))
    }

    /// Opens `state` and checks its expiry at `now_ms` (the caller, tool and arguments are the
    /// caller's to compare: [`ApprovalClaims::check`]).
    pub fn open(&self, state: &str, now_ms: u64) -> Result<ApprovalClaims, SealError> {
        if state.len() > MAX_STATE_CHARS {
            return Err(SealError::Malformed);
        }
        let bytes = B64.decode(state).map_err(|_| SealError::Malformed)?;
        let (format, rest) = bytes.split_first().ok_or(SealError::Malformed)?;
        if *format != FORMAT || rest.len() < NONCE_LEN + AES_256_GCM.tag_len() {
            return Err(SealError::Malformed);
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| SealError::Malformed)?;
        let mut buffer = Vec::new();
        let plain = std::iter::once(&self.key)
            .chain(&self.previous)
            .find_map(|key| {
                // A failed open may have scribbled on the buffer: each key gets a fresh copy.
                buffer.clear();
                buffer.extend_from_slice(sealed);
                let nonce = Nonce::assume_unique_for_key(nonce);
                key.open_in_place(nonce, Aad::from(AAD), &mut buffer).ok().map(|plain| plain.len())
            })
            .ok_or(SealError::Altered)?;
        let plain = &buffer[..plain];
        // It opened, so this gateway wrote it: a parse failure means another version of it.
        let claims: ApprovalClaims = serde_json::from_slice(plain).map_err(|_| SealError::Malformed)?;
        if now_ms > claims.expires_ms {
            return Err(SealError::Expired { by_s: (now_ms - claims.expires_ms).div_ceil(1000) });
        }
        Ok(claims)
    }
}

impl ApprovalClaims {
    /// Checks that the state was issued for this caller, tool and arguments.
    pub fn check(&self, caller: &str, tool: &str, arguments: &Value) -> Result<(), SealError> {
        if aws_lc_rs::constant_time::verify_slices_are_equal(self.caller.as_bytes(), caller.as_bytes()).is_err() {
            return Err(SealError::OtherCaller);
        }
        if self.tool != tool {
            return Err(SealError::OtherTool(mcp_safety::text::one_line(&self.tool, 80)));
        }
        if self.arguments != digest_json(arguments) {
            return Err(SealError::OtherArguments);
        }
        Ok(())
    }
}

/// SHA-256 of `value` in canonical form (object keys sorted at every level, no whitespace),
/// hex: the same arguments (or tools) sent again in another key order digest alike.
pub(crate) fn digest_json(value: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(&mut canonical, value);
    digest_hex(canonical.as_bytes())
}

/// SHA-256 of `data`, lower-case hex: the one digest the gateway names things by (argument
/// digests here; a shared store's keys, so a session id or a caller never appears in them).
pub fn digest_hex(data: &[u8]) -> String {
    hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, data).as_ref())
}

fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(out, v);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// `n` random bytes as hex (session ids, state ids).
pub(crate) fn random_hex(n: usize) -> Result<String, SealError> {
    let mut bytes = vec![0u8; n];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| SealError::Crypto("no randomness"))?;
    Ok(hex(&bytes))
}

/// Why the replay cache could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// Too many approvals were used within their lifetime (the in-memory cache is bounded and
    /// never forgets one before it expires, which would let it be replayed).
    #[error("too many approvals were used within their lifetime ({capacity}); try again shortly")]
    Full {
        /// The bound.
        capacity: usize,
    },
    /// This principal used too many approvals within their lifetime (each has a share of the
    /// in-memory cache, so one cannot fill it for everyone).
    #[error("this caller used too many approvals within their lifetime ({share}); try again when some have expired")]
    OwnerFull {
        /// The share.
        share: usize,
    },
    /// The shared store could not be reached (a replica's Redis, say).
    #[error("the replay store is unavailable: {0}")]
    Unavailable(String),
    /// The shared store failed.
    #[error("{0}")]
    Store(crate::store::StoreError),
}

/// Remembers which sealed states were used, until they expire. A **port**: one process keeps
/// them in memory ([`MemoryReplayCache`]); replicas share them in a store, so an approval used
/// on one cannot be used again on another.
#[async_trait]
pub trait ReplayCache: fmt::Debug + Send + Sync {
    /// Marks `id` used until `expires_ms`: `Ok(true)` the first time, `Ok(false)` if it was
    /// used before. Never forgets an id before its expiry. `owner` names the authenticated
    /// principal whose approval it was ([`crate::Caller::principal_key`]; `None` for a caller
    /// with none), so a bounded cache can share its room fairly.
    async fn first_use(&self, owner: Option<&str>, id: &str, expires_ms: u64, now_ms: u64)
    -> Result<bool, ReplayError>;
}

/// The in-memory [`ReplayCache`], bounded in all and per principal, so one authenticated
/// caller answering approvals as fast as it can fills only its own share (it takes ten to
/// fill the whole). Callers with no principal (a gateway without authentication) cannot be
/// told apart, so they share the whole.
#[derive(Debug)]
pub struct MemoryReplayCache {
    capacity: usize,
    per_owner: usize,
    state: Mutex<ReplayState>,
}

#[derive(Debug)]
struct ReplayState {
    /// Each used id: its expiry and owner.
    used: HashMap<String, (u64, Option<Arc<str>>)>,
    /// How many of `used` each owner has.
    counts: OwnerCounts,
    /// No id in `used` expires before this: a sweep before then would find nothing, and it
    /// holds the lock over every id.
    next_expiry: u64,
}

impl Default for ReplayState {
    fn default() -> Self {
        Self { used: HashMap::new(), counts: OwnerCounts::default(), next_expiry: u64::MAX }
    }
}

impl ReplayState {
    /// Forgets the ids expired by `now_ms`.
    fn sweep(&mut self, now_ms: u64) {
        if now_ms <= self.next_expiry {
            return;
        }
        let counts = &mut self.counts;
        let mut next = u64::MAX;
        self.used.retain(|_, (expiry, owner)| {
            let keep = *expiry >= now_ms;
            if keep {
                next = next.min(*expiry);
            } else if let Some(owner) = owner {
                counts.remove(owner);
            }
            keep
        });
        self.next_expiry = next;
    }

    fn count(&self, owner: Option<&str>) -> usize {
        owner.map_or(0, |o| self.counts.get(o))
    }
}

impl MemoryReplayCache {
    /// A cache of at most `capacity` used ids, a tenth of them (at least one) per principal.
    pub fn new(capacity: usize) -> Self {
        Self::with_share(capacity, (capacity / 10).max(1))
    }

    /// A cache of at most `capacity` used ids, at most `per_owner` of one principal's.
    pub fn with_share(capacity: usize, per_owner: usize) -> Self {
        Self { capacity, per_owner: per_owner.min(capacity), state: Mutex::new(ReplayState::default()) }
    }
}

impl Default for MemoryReplayCache {
    /// 100,000 used ids, 10,000 per principal.
    fn default() -> Self {
        Self::new(100_000)
    }
}

#[async_trait]
impl ReplayCache for MemoryReplayCache {
    async fn first_use(
        &self,
        owner: Option<&str>,
        id: &str,
        expires_ms: u64,
        now_ms: u64,
    ) -> Result<bool, ReplayError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.used.contains_key(id) {
            return Ok(false);
        }
        let full = |state: &ReplayState| state.used.len() >= self.capacity || state.count(owner) >= self.per_owner;
        if full(&state) {
            state.sweep(now_ms);
            if state.count(owner) >= self.per_owner {
                return Err(ReplayError::OwnerFull { share: self.per_owner });
            }
            if state.used.len() >= self.capacity {
                return Err(ReplayError::Full { capacity: self.capacity });
            }
        }
        let owner = owner.map(|owner| state.counts.add(owner));
        state.next_expiry = state.next_expiry.min(expires_ms);
        state.used.insert(id.to_owned(), (expires_ms, owner));
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claims(expires_ms: u64) -> ApprovalClaims {
        ApprovalClaims {
            caller: "local\nclient".into(),
            tool: "files__write_file".into(),
            arguments: digest_json(&json!({"path": "a", "text": "b"})),
            expires_ms,
            id: "00ff".into(),
        }
    }

    #[test]
    fn a_sealed_state_opens_once_and_only_unaltered() {
        let sealer = StateSealer::generate().unwrap();
        let state = sealer.seal(&claims(10_000)).unwrap();
        assert_ne!(sealer.seal(&claims(10_000)).unwrap(), state, "a fresh nonce each time");
        let opened = sealer.open(&state, 9_000).unwrap();
        assert_eq!(opened, claims(10_000));
        assert_eq!(opened.check("local\nclient", "files__write_file", &json!({"text": "b", "path": "a"})), Ok(()));
        assert_eq!(
            opened.check("p:eve\nclient", "files__write_file", &json!({"path": "a", "text": "b"})),
            Err(SealError::OtherCaller)
        );
        assert!(matches!(opened.check("local\nclient", "files__rm", &json!({})), Err(SealError::OtherTool(_))));
        assert_eq!(
            opened.check("local\nclient", "files__write_file", &json!({"path": "b", "text": "b"})),
            Err(SealError::OtherArguments)
        );

        assert_eq!(sealer.open(&state, 12_001), Err(SealError::Expired { by_s: 3 }));
        // Any flipped bit, anywhere, and it does not open.
        let mut bytes = B64.decode(&state).unwrap();
        for i in 1..bytes.len() {
            bytes[i] ^= 0x01;
            assert_eq!(sealer.open(&B64.encode(&bytes), 0), Err(SealError::Altered), "byte {i}");
            bytes[i] ^= 0x01;
        }
        assert_eq!(StateSealer::generate().unwrap().open(&state, 0), Err(SealError::Altered), "another key");
        for junk in ["", "not base64!", "AQ", &"A".repeat(5000)] {
            assert_eq!(sealer.open(junk, 0), Err(SealError::Malformed), "{junk:?}");
        }
    }

    #[tokio::test]
    async fn the_replay_cache_accepts_an_id_once_and_stays_bounded() {
        let cache = MemoryReplayCache::with_share(2, 2);
        assert_eq!(cache.first_use(Some("o"), "a", 100, 0).await, Ok(true));
        assert_eq!(cache.first_use(Some("o"), "a", 100, 0).await, Ok(false));
        assert_eq!(cache.first_use(Some("o"), "b", 50, 0).await, Ok(true));
        assert_eq!(cache.first_use(Some("p"), "c", 100, 10).await, Err(ReplayError::Full { capacity: 2 }));
        // Once "b" expired it makes room; "a" is still remembered.
        assert_eq!(cache.first_use(Some("p"), "c", 100, 60).await, Ok(true));
        assert_eq!(cache.first_use(Some("o"), "a", 100, 60).await, Ok(false));
    }

    #[tokio::test]
    async fn one_owner_fills_only_its_share_of_the_replay_cache() {
        let cache = MemoryReplayCache::new(30);
        for i in 0..3 {
            assert_eq!(cache.first_use(Some("p:greedy"), &format!("g{i}"), 100, 0).await, Ok(true));
        }
        assert_eq!(cache.first_use(Some("p:greedy"), "g3", 100, 0).await, Err(ReplayError::OwnerFull { share: 3 }));
        // Everyone else still has room, and a used id is still used whoever shows it.
        assert_eq!(cache.first_use(Some("p:other"), "o0", 100, 0).await, Ok(true));
        assert_eq!(cache.first_use(None, "l0", 100, 0).await, Ok(true));
        assert_eq!(cache.first_use(Some("p:other"), "g0", 100, 0).await, Ok(false));
        // The greedy owner's share frees itself as its ids expire.
        assert_eq!(cache.first_use(Some("p:greedy"), "g3", 200, 101).await, Ok(true));
        assert_eq!(cache.first_use(Some("p:greedy"), "g4", 200, 101).await, Ok(true));
        assert_eq!(cache.first_use(Some("p:greedy"), "g0", 200, 101).await, Ok(true), "expired and forgotten");
        assert_eq!(cache.first_use(Some("p:greedy"), "g5", 200, 101).await, Err(ReplayError::OwnerFull { share: 3 }));
    }

    #[tokio::test]
    async fn callers_with_no_principal_share_the_whole_replay_cache() {
        let cache = MemoryReplayCache::new(10);
        for i in 0..10 {
            assert_eq!(cache.first_use(None, &format!("l{i}"), 100, 0).await, Ok(true), "{i}");
        }
        assert_eq!(cache.first_use(None, "l10", 100, 0).await, Err(ReplayError::Full { capacity: 10 }));
        assert_eq!(cache.first_use(None, "l10", 100, 101).await, Ok(true), "room once they expired");
    }

    #[test]
    fn canonical_arguments() {
        assert_eq!(
            digest_json(&json!({"b": [1, {"y": 2, "x": 1}], "a": "é"})),
            digest_json(&json!({"a": "é", "b": [1, {"x": 1, "y": 2}]}))
        );
        assert_ne!(digest_json(&json!({"a": 1})), digest_json(&json!({"a": "1"})));
        assert_eq!(hex(&[0x00, 0xab]), "00ab");
    }
}
