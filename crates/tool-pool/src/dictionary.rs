//! The word dictionary of a search index: words to term ids, fast, since every word of every
//! indexed tool goes through it.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use crate::search::Ranking;
use crate::text::{Packed, Word};

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
    /// Words of at most 15 bytes (nearly all), by their packed form (see [`Packed`]).
    short: Map<Packed, u32>,
    long: Map<Box<str>, u32>,
    pub(crate) stems: Map<Box<str>, u32>,
}

/// Entries of the cache in front of [`Dictionary::intern`]: 96 KiB.
pub(crate) const RECENT: usize = 4096;

impl Dictionary {
    /// An empty dictionary with room for about `words` distinct words (growing the maps by
    /// rehashing was a visible part of building).
    pub(crate) fn with_capacity(words: usize) -> Self {
        Self {
            short: Map::with_capacity_and_hasher(words, Hasher::default()),
            long: Map::default(),
            stems: Map::with_capacity_and_hasher(words, Hasher::default()),
        }
    }

    /// The term id of `word`, added if new; [`STOP`] for a stop word. `recent` is a small
    /// direct-mapped cache in front of the maps: word frequencies are skewed, and it hits for
    /// most words while staying in the processor's nearest cache.
    pub(crate) fn intern(&mut self, ranking: &Ranking, word: Word<'_>, recent: &mut [(Packed, u32); RECENT]) -> u32 {
        let slot = word.packed.map(|(a, b)| {
            let mixed = (a ^ b.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (mixed >> (64 - RECENT.trailing_zeros())) as usize
        });
        if let (Some(key), Some(slot)) = (word.packed, slot)
            && let Some((k, id)) = recent.get(slot)
            && *k == key
        {
            return *id;
        }
        let id = self.intern_slow(ranking, word);
        if let (Some(key), Some(slot)) = (word.packed, slot)
            && let Some(entry) = recent.get_mut(slot)
        {
            *entry = (key, id);
        }
        id
    }

    fn intern_slow(&mut self, ranking: &Ranking, word: Word<'_>) -> u32 {
        if let Some(key) = word.packed
            && let Some(&id) = self.short.get(&key)
        {
            return id;
        }
        word.with_text(|text| {
            if let Some(&id) = self.long.get(text) {
                return id;
            }
            let id = match ranking.term(text) {
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
            match word.packed {
                Some(key) => self.short.insert(key, id),
                None => self.long.insert(text.into(), id),
            };
            id
        })
    }

    /// What `word` of a query is: a term, a stop word or unknown.
    pub(crate) fn lookup(&self, ranking: &Ranking, word: Word<'_>) -> Lookup {
        word.with_text(|text| {
            let cached = match word.packed {
                Some(key) => self.short.get(&key),
                None => self.long.get(text),
            };
            match cached {
                Some(&STOP) => Lookup::Stop,
                Some(&id) => Lookup::Term(id),
                None => match ranking.term(text) {
                    None => Lookup::Stop,
                    Some(term) => self.stems.get(&*term).map_or(Lookup::Unknown, |&id| Lookup::Term(id)),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::pack;

    #[test]
    fn words_get_one_id_per_stem_whatever_their_length_or_the_cache() {
        let ranking = Ranking::tuned();
        let mut d = Dictionary::default();
        let mut recent = [((0, 0), STOP); RECENT];
        let intern = |d: &mut Dictionary, w: &str, recent: &mut _| d.intern(&ranking, Word::new(w), recent);
        let files = intern(&mut d, "files", &mut recent);
        assert_eq!(intern(&mut d, "file", &mut recent), files);
        assert_eq!(intern(&mut d, "files", &mut [((0, 0), STOP); RECENT]), files);
        assert_eq!(intern(&mut d, "the", &mut recent), STOP);
        // 15 bytes are packed, 16 are not; both are found again.
        for word in ["abcdefghijklmno", "abcdefghijklmnop", "ünïcödé"] {
            let id = intern(&mut d, word, &mut recent);
            assert_ne!(id, files);
            assert_eq!(d.lookup(&ranking, Word::new(word)), Lookup::Term(id));
        }
        assert_eq!(d.lookup(&ranking, Word::new("filed")), Lookup::Term(files));
        assert_eq!(d.lookup(&ranking, Word::new("nowhere")), Lookup::Unknown);
        assert_eq!(d.lookup(&ranking, Word::new("of")), Lookup::Stop);
        assert_eq!(pack(""), Some((0, 0)));
        assert_eq!(pack(&"x".repeat(16)), None);
    }
}
