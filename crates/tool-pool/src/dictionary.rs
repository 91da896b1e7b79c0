//! The word dictionary of a search index: words to term ids, fast, since every word of every
//! indexed tool goes through it.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use crate::search::Ranking;

/// The maps of an index hash a word per word of every tool's text, which made SipHash the
/// largest cost of building. foldhash is several times faster; its seed comes from std's
/// `RandomState` (the OS's randomness), so a server cannot aim at collisions in advance.
#[derive(Debug, Clone)]
pub(crate) struct Hasher(foldhash::fast::FixedState);

impl Default for Hasher {
    fn default() -> Self {
        Self(foldhash::fast::FixedState::with_seed(RandomState::new().hash_one(0x5eed_u64)))
    }
}

impl BuildHasher for Hasher {
    type Hasher = foldhash::fast::FoldHasher<'static>;

    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

pub(crate) type Map<K, V> = HashMap<K, V, Hasher>;

/// What a word of a query is to the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A stop word.
    Stop,
    /// A word no tool has.
    Unknown,
    /// A term tools have.
    Term(u32),
}

/// The id of the stop-word pseudo-term in [`Dictionary::words`].
pub(crate) const STOP: u32 = u32::MAX;

/// Words to term ids. Each distinct word is analyzed (stop word? stem?) once: a cache from the
/// word as written, in front of the map from stems.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dictionary {
    /// Words of at most 15 bytes (nearly all), packed into one integer: hashing and comparing
    /// them costs a fraction of what strings cost, and this lookup runs for every word indexed.
    short: Map<(u64, u64), u32>,
    long: Map<Box<str>, u32>,
    pub(crate) stems: Map<Box<str>, u32>,
}

/// Entries of the cache in front of [`Dictionary::intern`]: 24 KiB.
pub(crate) const RECENT: usize = 4096;

/// `word` packed with its length when it has at most 15 bytes (two `u64`s rather than a `u128`:
/// eight-byte alignment makes the table's entries smaller).
fn pack(word: &str) -> Option<(u64, u64)> {
    let b = word.as_bytes();
    let len = b.len();
    if len > 15 {
        return None;
    }
    // Eight-byte loads where the word has them, else byte by byte: copying a slice of unknown
    // length into an array calls memcpy, which was a visible part of building.
    let (low, high) = b.split_at(len.min(8));
    let low = load(low);
    let high = load(high) | (len as u64) << 56;
    Some((low, high))
}

/// Up to eight bytes, little-endian, zero-padded; with two loads that overlap where the bytes
/// do not fill them (the overlapping bytes are the same, so or-ing them is harmless).
fn load(b: &[u8]) -> u64 {
    let len = b.len();
    let at = |i: usize| u64::from(b.get(i).copied().unwrap_or(0));
    let four = |i: usize| b.get(i..i + 4).and_then(|s| <[u8; 4]>::try_from(s).ok()).map_or(0, u32::from_le_bytes);
    match len {
        8.. => b.first_chunk::<8>().map_or(0, |e| u64::from_le_bytes(*e)),
        4..=7 => u64::from(four(0)) | u64::from(four(len - 4)) << ((len - 4) * 8),
        1..=3 => at(0) | at(len / 2) << (len / 2 * 8) | at(len - 1) << ((len - 1) * 8),
        0 => 0,
    }
}

impl Dictionary {
    fn cached(&self, word: &str) -> Option<u32> {
        match pack(word) {
            Some(key) => self.short.get(&key).copied(),
            None => self.long.get(word).copied(),
        }
    }

    /// The term id of `word`, added if new; [`STOP`] for a stop word. `recent` is a small
    /// direct-mapped cache in front of the maps: word frequencies are skewed, and it hits for
    /// most words while staying in the processor's nearest cache.
    pub(crate) fn intern(&mut self, ranking: &Ranking, word: &str, recent: &mut [((u64, u64), u32); RECENT]) -> u32 {
        let packed = pack(word);
        let slot = packed.map(|(a, b)| {
            let mixed = (a ^ b.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (mixed >> (64 - RECENT.trailing_zeros())) as usize
        });
        if let (Some(key), Some(slot)) = (packed, slot)
            && let Some((k, id)) = recent.get(slot)
            && *k == key
        {
            return *id;
        }
        let id = self.intern_slow(ranking, word);
        if let (Some(key), Some(slot)) = (packed, slot)
            && let Some(entry) = recent.get_mut(slot)
        {
            *entry = (key, id);
        }
        id
    }

    fn intern_slow(&mut self, ranking: &Ranking, word: &str) -> u32 {
        if let Some(id) = self.cached(word) {
            return id;
        }
        let id = match ranking.term(word) {
            None => STOP,
            Some(term) => match self.stems.get(&*term) {
                Some(&id) => id,
                None => {
                    let id = u32::try_from(self.stems.len()).unwrap_or(STOP - 1).min(STOP - 1);
                    self.stems.insert(term.into(), id);
                    id
                }
            },
        };
        match pack(word) {
            Some(key) => self.short.insert(key, id),
            None => self.long.insert(word.into(), id),
        };
        id
    }

    pub(crate) fn lookup(&self, ranking: &Ranking, word: &str) -> Lookup {
        match self.cached(word) {
            Some(STOP) => Lookup::Stop,
            Some(id) => Lookup::Term(id),
            None => match ranking.term(word) {
                None => Lookup::Stop,
                Some(term) => self.stems.get(&*term).map_or(Lookup::Unknown, |&id| Lookup::Term(id)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_get_one_id_per_stem_whatever_their_length_or_the_cache() {
        let ranking = Ranking::tuned();
        let mut d = Dictionary::default();
        let mut recent = [((0, 0), STOP); RECENT];
        let files = d.intern(&ranking, "files", &mut recent);
        assert_eq!(d.intern(&ranking, "file", &mut recent), files);
        assert_eq!(d.intern(&ranking, "files", &mut [((0, 0), STOP); RECENT]), files);
        assert_eq!(d.intern(&ranking, "the", &mut recent), STOP);
        // 15 bytes are packed, 16 are not; both are found again.
        for word in ["abcdefghijklmno", "abcdefghijklmnop", "ünïcödé"] {
            let id = d.intern(&ranking, word, &mut recent);
            assert_ne!(id, files);
            assert_eq!(d.lookup(&ranking, word), Lookup::Term(id));
        }
        assert_eq!(d.lookup(&ranking, "filed"), Lookup::Term(files));
        assert_eq!(d.lookup(&ranking, "nowhere"), Lookup::Unknown);
        assert_eq!(d.lookup(&ranking, "of"), Lookup::Stop);
        assert_eq!(pack(""), Some((0, 0)));
        assert_eq!(pack(&"x".repeat(16)), None);
    }
}
