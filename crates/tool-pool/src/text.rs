//! Words out of tool names, descriptions and queries: splitting, stop words and a light English
//! stemmer, for tool search.
//!
//! Everything here is total (any `&str` in, no panic) and allocation-light: words are handed to a
//! callback one at a time in a reused buffer.

use std::borrow::Cow;
use std::hash::BuildHasher;

/// How text is cut into words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Split {
    /// Runs of letters and digits, lowercased: `getWeather_v2` is `getweather`, `v2`. What a
    /// plain full-text engine does.
    Plain,
    /// Also at case changes and between letters and digits: `getWeather_v2` is `get`,
    /// `weather`, `v`, `2`; `HTTPServer` is `http`, `server`.
    Identifiers,
}

/// Runs of letters and digits longer than this many bytes are not split by [`Split::Identifiers`]:
/// they are data (hashes, base64, ids), and their pieces would match tools at random.
const MAX_IDENTIFIER_LEN: usize = 48;

/// Classes of bytes, for the tokenizer's hot loop: one table load instead of several range
/// checks per byte. Bytes of other characters than ASCII have none of these bits.
const ALNUM: u8 = 1;
const UPPER: u8 = 2;
const LOWER: u8 = 4;
const DIGIT: u8 = 8;
const CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        table[b] = if c.is_ascii_uppercase() {
            ALNUM | UPPER
        } else if c.is_ascii_lowercase() {
            ALNUM | LOWER
        } else if c.is_ascii_digit() {
            ALNUM | DIGIT
        } else {
            0
        };
        b += 1;
    }
    table
};

/// The class of `b`.
fn class(b: u8) -> u8 {
    CLASS[usize::from(b)]
}

/// A word of at most 15 bytes packed into two integers: its bytes, little-endian and zero-padded,
/// and its length in the top byte. Hashing and comparing these costs a fraction of what strings
/// cost, and the dictionary looks up every word indexed. (Two `u64`s rather than a `u128`:
/// eight-byte alignment makes the tables' entries smaller.)
pub(crate) type Packed = (u64, u64);

/// `word` packed with its length when it has at most 15 bytes.
pub(crate) fn pack(word: &str) -> Option<Packed> {
    let b = word.as_bytes();
    let len = b.len();
    if len > 15 {
        return None;
    }
    let (low, high) = b.split_at(len.min(8));
    Some((load(low), load(high) | (len as u64) << 56))
}

/// Up to eight bytes, little-endian, zero-padded; with two loads that overlap where the bytes
/// do not fill them (the overlapping bytes are the same, so or-ing them is harmless). Copying a
/// slice of unknown length into an array calls memcpy, which was a visible part of building.
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

/// The eight bytes of `bytes` from `at`, little-endian, zero-padded past the end.
fn chunk(bytes: &[u8], at: usize) -> u64 {
    match bytes.get(at..at + 8) {
        Some(eight) => load(eight),
        None => load(bytes.get(at..).unwrap_or_default()),
    }
}

const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
const ONES: u64 = 0x0101_0101_0101_0101;

/// The high bit of each byte of `x` that is not a lower-case ASCII letter. Eight bytes at a
/// time: a byte at a time was most of the cost of finding words.
fn not_lowercase(x: u64) -> u64 {
    // Without their high bits, bytes cannot carry into each other in these sums.
    let seven = x & !HIGH_BITS;
    let at_least_a = seven + ONES * u64::from(0x80 - b'a');
    let above_z = seven + ONES * u64::from(0x7f - b'z');
    !(at_least_a & !above_z & !x) & HIGH_BITS
}

/// The low `bytes` bytes of `x`.
fn low_bytes(x: u64, bytes: usize) -> u64 {
    x & u64::MAX.checked_shr(64 - 8 * bytes as u32).unwrap_or(0)
}

/// A word as [`words`] hands it over: its bytes (lowercase but for a capital ASCII first letter,
/// which is lowercased only when the text is asked for) and its packed form, lowercase, when it
/// has at most 15 bytes. Most words are found again by their packed form alone, so their text is
/// neither copied nor checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Word<'a> {
    bytes: &'a [u8],
    capital: bool,
    /// The word packed (see [`Packed`]), when it has at most 15 bytes.
    pub(crate) packed: Option<Packed>,
}

impl<'a> Word<'a> {
    /// `text`, already lowercase, as a word.
    pub(crate) fn new(text: &'a str) -> Self {
        Self { bytes: text.as_bytes(), capital: false, packed: pack(text) }
    }

    /// Calls `f` with the word's text, lowercase.
    pub(crate) fn with_text<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        let mut stack = [0u8; MAX_IDENTIFIER_LEN];
        let bytes = match stack.get_mut(..self.bytes.len()) {
            Some(lower) if self.capital => {
                lower.copy_from_slice(self.bytes);
                lower.make_ascii_lowercase();
                lower
            }
            _ => self.bytes,
        };
        f(std::str::from_utf8(bytes).unwrap_or_default())
    }
}

/// Calls `emit` with each word of `text`, lowercased, in order.
///
/// Runs of ASCII letters and digits (nearly all text) are read in one pass that finds where
/// the run ends, where it splits and whether it has capitals; a run next to other characters
/// is handed to the slower [`split_chars`]. (Two passes, and a lowercased copy per word, were
/// most of the cost of building an index.)
#[inline]
pub(crate) fn words(text: &str, split: Split, mut emit: impl FnMut(Word<'_>)) {
    let bytes = text.as_bytes();
    let mut buf = String::new();
    let identifiers = split == Split::Identifiers;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii() && class(b) == 0 {
            i += 1;
            continue;
        }
        let start = i;
        // Fast path for the common word: a letter, then lower-case letters, then a separator
        // (`weather`, `Weather`). It has no split point under either rule, so it is the word,
        // lowercased; anything else (digits, capitals inside, other characters) takes the
        // general loop below from the same start. (The general loop's per-byte bookkeeping was
        // most of the cost of building an index.) Read eight bytes at a time, the first one
        // lowercased (bit 0x20 lowercases a capital letter); the word's first sixteen bytes
        // are its packed form.
        if class(b) & (UPPER | LOWER) != 0 {
            let first = chunk(bytes, start) | 0x20;
            let mut second = 0;
            let mut end = start + (not_lowercase(first).trailing_zeros() / 8) as usize;
            if end - start == 8 {
                second = chunk(bytes, end);
                end += (not_lowercase(second).trailing_zeros() / 8) as usize;
                while end - start >= 16 && end - start <= MAX_IDENTIFIER_LEN {
                    let more = (not_lowercase(chunk(bytes, end)).trailing_zeros() / 8) as usize;
                    end += more;
                    if more < 8 {
                        break;
                    }
                }
            }
            let ends_word = bytes.get(end).is_none_or(|&n| n.is_ascii() && class(n) == 0);
            let len = end - start;
            if ends_word && len <= MAX_IDENTIFIER_LEN {
                let packed = match len {
                    0..=8 => Some((low_bytes(first, len), (len as u64) << 56)),
                    9..=15 => Some((first, low_bytes(second, len - 8) | (len as u64) << 56)),
                    _ => None,
                };
                let bytes = bytes.get(start..end).unwrap_or_default();
                emit(Word { bytes, capital: class(b) & UPPER != 0, packed });
                i = end;
                continue;
            }
        }
        // Where the run splits (offsets from `start`, increasing), kept while the run is short
        // enough to be split at all.
        let mut cuts = [0u8; MAX_IDENTIFIER_LEN];
        let mut ncuts = 0usize;
        let mut classes = 0u8;
        let (mut before, mut prev) = (0u8, 0u8);
        while let Some(&b) = bytes.get(i) {
            let c = class(b);
            if c == 0 {
                break;
            }
            let j = i - start;
            if identifiers && j <= MAX_IDENTIFIER_LEN {
                // Between a letter and a digit; camelCase (a lower-case letter, then an
                // upper-case one); HTTPServer (the last capital of a run starts the next word,
                // which shows at the lower-case letter after it).
                let at = if prev != 0 && ((prev ^ c) & DIGIT != 0 || (c & UPPER != 0 && prev & LOWER != 0)) {
                    Some(j)
                } else if c & LOWER != 0 && prev & UPPER != 0 && before & UPPER != 0 {
                    Some(j - 1)
                } else {
                    None
                };
                if let (Some(at), Some(slot)) = (at, cuts.get_mut(ncuts)) {
                    *slot = at as u8;
                    ncuts += 1;
                }
            }
            classes |= c;
            (before, prev) = (prev, c);
            i += 1;
        }
        if bytes.get(i).is_some_and(|b| !b.is_ascii()) {
            // A run with other letters or digits than ASCII ones (or none): found and split on
            // characters. Rare, so slower.
            let rest = &text[start..];
            let end = rest.char_indices().find(|&(_, c)| !is_alphanumeric(c)).map_or(rest.len(), |(j, _)| j);
            let run = &rest[..end];
            i = start + end.max(rest.chars().next().map_or(1, char::len_utf8));
            if !run.is_empty() {
                split_chars(run, split, &mut buf, &mut |w: &str| emit(Word::new(w)));
            }
            continue;
        }
        let run = &text[start..i];
        if run.len() > MAX_IDENTIFIER_LEN {
            ncuts = 0;
        }
        // Lowercased once per run, on the stack when it will be split.
        let mut stack = [0u8; MAX_IDENTIFIER_LEN];
        let lower: &str = if classes & UPPER == 0 {
            run
        } else if let Some(lower) = stack.get_mut(..run.len()) {
            lower.iter_mut().zip(run.bytes()).for_each(|(l, b)| *l = b.to_ascii_lowercase());
            std::str::from_utf8(lower).unwrap_or_default()
        } else {
            buf.clear();
            buf.push_str(run);
            buf.make_ascii_lowercase();
            &buf
        };
        let mut from = 0;
        for &cut in &cuts[..ncuts] {
            emit(Word::new(lower.get(from..usize::from(cut)).unwrap_or_default()));
            from = usize::from(cut);
        }
        emit(Word::new(lower.get(from..).unwrap_or_default()));
    }
}

/// [`words`] of one run of letters and digits, on characters.
fn split_chars(run: &str, split: Split, buf: &mut String, emit: &mut impl FnMut(&str)) {
    buf.clear();
    if split == Split::Plain || run.len() > MAX_IDENTIFIER_LEN {
        run.chars().for_each(|c| push_lowercase(buf, c));
        emit(buf);
        return;
    }
    let mut prev: Option<Case> = None;
    let mut chars = run.chars().peekable();
    while let Some(c) = chars.next() {
        let case = Case::of(c);
        if let Some(p) = prev {
            let boundary = (p.numeric != case.numeric)
                || (p.lower && case.upper)
                || (p.upper && case.upper && chars.peek().is_some_and(|&n| Case::of(n).lower));
            if boundary {
                emit(buf);
                buf.clear();
            }
        }
        push_lowercase(buf, c);
        prev = Some(case);
    }
    emit(buf);
}

/// Whether `c` is a CJK unified ideograph (U+4E00 to U+9FFF): alphabetic, without case, not
/// numeric, its own lowercase (a test checks each one). Text in Chinese or Japanese is mostly
/// these, and looking those properties up in std's tables was most of the cost of indexing it.
fn is_ideograph(c: char) -> bool {
    ('\u{4E00}'..='\u{9FFF}').contains(&c)
}

/// Whether `c` is a letter or a digit, as [`char::is_alphanumeric`].
fn is_alphanumeric(c: char) -> bool {
    is_ideograph(c) || c.is_alphanumeric()
}

/// What splitting on characters looks at.
#[derive(Clone, Copy)]
struct Case {
    numeric: bool,
    lower: bool,
    upper: bool,
}

impl Case {
    fn of(c: char) -> Self {
        if is_ideograph(c) {
            return Self { numeric: false, lower: false, upper: false };
        }
        Self { numeric: c.is_numeric(), lower: c.is_lowercase(), upper: c.is_uppercase() }
    }
}

/// Appends `c` lowercased.
fn push_lowercase(buf: &mut String, c: char) {
    if is_ideograph(c) {
        buf.push(c);
    } else {
        buf.extend(c.to_lowercase());
    }
}

/// Lowercase letters and digits of `text` only: `Get-Weather` and `get_weather` are both
/// `getweather`. Used to compare a query with names regardless of separators and case.
pub(crate) fn compact(text: &str) -> String {
    text.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// Longest text whose [`compact`] form [`compact_hash`] makes on the stack (model names have at
/// most 64 characters).
const STACK_COMPACT: usize = 64;

/// The hash by `hasher` of the bytes of `text`'s [`compact`] form: what an index keys names by
/// to compare them with queries.
pub(crate) fn compact_hash(hasher: &impl BuildHasher, text: &str) -> u64 {
    if text.len() <= STACK_COMPACT && text.is_ascii() {
        // Every byte written and kept only when it is a letter or a digit (a lowercase letter or
        // digit already has bit 0x20, which lowercases a capital): building a `String` by
        // filtering characters was a visible cost when indexing.
        let mut stack = [0u8; STACK_COMPACT];
        let mut kept = 0;
        for &b in text.as_bytes() {
            if let Some(slot) = stack.get_mut(kept) {
                *slot = b | 0x20;
            }
            kept += usize::from(class(b) != 0);
        }
        return hasher.hash_one(stack.get(..kept).unwrap_or_default());
    }
    hasher.hash_one(compact(text).as_bytes())
}

/// English function words that say nothing about what a tool does. Sorted, for binary search.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being",
    "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "during", "each", "either", "etc",
    "for", "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "itself", "just", "let", "may", "me", "might", "mine", "more", "most", "must", "my",
    "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over",
    "own", "please", "same", "shall", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs",
    "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "us",
    "very", "via", "was", "we", "were", "what", "when", "where", "whether", "which", "while", "who", "whom", "whose",
    "why", "will", "with", "within", "would", "you", "your", "yours", "yourself",
];

/// [`STOP_WORDS`] as integers, sorted: each one's bytes, little-endian and zero-padded (none has
/// more than eight). Looking a word up with integer comparisons rather than string ones: every
/// new word of an index is looked up.
const STOP_KEYS: [u64; STOP_WORDS.len()] = {
    let mut keys = [0u64; STOP_WORDS.len()];
    let mut i = 0;
    while i < keys.len() {
        let word = STOP_WORDS[i].as_bytes();
        assert!(word.len() <= 8, "stop words have at most eight bytes");
        let mut j = 0;
        while j < word.len() {
            keys[i] |= (word[j] as u64) << (8 * j);
            j += 1;
        }
        // Insertion sort, the only kind a constant can have.
        let mut k = i;
        while k > 0 && keys[k - 1] > keys[k] {
            (keys[k - 1], keys[k]) = (keys[k], keys[k - 1]);
            k -= 1;
        }
        i += 1;
    }
    keys
};

/// Whether `word` (lowercase) is a stop word.
pub(crate) fn is_stop_word(word: &str) -> bool {
    let bytes = word.as_bytes();
    // Zero padding stands for no byte only where the word has no zero bytes.
    bytes.len() <= 8 && !bytes.contains(&0) && STOP_KEYS.binary_search(&load(bytes)).is_ok()
}

/// A light English stemmer for lowercase ASCII words; other words are returned as they are.
///
/// Conflates the inflections that separate a query from a tool's text (`files`/`file`,
/// `creating`/`created`/`creates`/`create`/`creation`, `queries`/`query`,
/// `calculator`/`calculate`) and little else: aggressive stemmers merge unrelated words
/// (`general`/`generate`), which costs more in the small vocabulary of tool names than it gains.
/// The same word always gives the same stem, which is all an index needs.
pub(crate) fn stem(word: &str) -> Cow<'_, str> {
    let len = word.len();
    if len <= 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return Cow::Borrowed(word);
    }
    let mut w = word;
    // Plurals and the third person: queries -> queri, matches -> match, files -> file.
    let es = w.strip_suffix("es").is_some_and(|s| ends_with_any(s, &["ss", "sh", "ch", "x", "z"]));
    if (w.ends_with("ies") && w.len() > 4) || es {
        w = &w[..w.len() - 2];
    } else if w.ends_with('s') && !ends_with_any(w, &["ss", "us", "is"]) {
        w = &w[..w.len() - 1];
    }
    // Past tense and gerund, when enough of a word with a vowel is left (not `string`, `need`).
    if w.ends_with("ied") && w.len() > 4 {
        w = &w[..w.len() - 2];
    } else if !w.ends_with("eed") {
        for suffix in ["ing", "ed"] {
            if let Some(s) = w.strip_suffix(suffix).filter(|s| s.len() >= 3 && has_vowel(s)) {
                w = undouble(s);
                break;
            }
        }
    }
    // musical -> music, payment -> pay; not where too little would be left (final, comment).
    for suffix in ["ment", "al"] {
        if w.strip_suffix(suffix).is_some_and(|s| s.len() >= 4) {
            w = &w[..w.len() - suffix.len()];
            break;
        }
    }
    // creation, creator -> creat, like create.
    for suffix in ["ation", "ator"] {
        if w.strip_suffix(suffix).is_some_and(|s| s.len() >= 3) {
            // Keep the `at`.
            w = &w[..w.len() - suffix.len() + 2];
            break;
        }
    }
    // A final silent `e`: create -> creat, like creating.
    if w.len() > 3 && w.ends_with('e') && !w.ends_with("ee") {
        w = &w[..w.len() - 1];
    }
    // A final `y` after a consonant: query -> queri, like queries.
    let b = w.as_bytes();
    if let [.., c, b'y'] = b
        && b.len() > 3
        && !is_vowel(*c)
    {
        return Cow::Owned(format!("{}i", &w[..w.len() - 1]));
    }
    Cow::Borrowed(w)
}

fn ends_with_any(s: &str, suffixes: &[&str]) -> bool {
    suffixes.iter().any(|x| s.ends_with(x))
}

fn is_vowel(c: u8) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u')
}

fn has_vowel(s: &str) -> bool {
    s.bytes().any(|c| is_vowel(c) || c == b'y')
}

/// `stopp` -> `stop`, `gett` -> `get`; `ll`, `ss`, `zz` and doubled vowels stay (`install`).
fn undouble(s: &str) -> &str {
    match s.as_bytes() {
        [.., x, y] if x == y && !is_vowel(*x) && !matches!(x, b'l' | b's' | b'z') => &s[..s.len() - 1],
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str, how: Split) -> Vec<String> {
        let mut out = Vec::new();
        words(text, how, |w| {
            let text = w.with_text(str::to_owned);
            assert_eq!(w.packed, pack(&text), "{text}");
            out.push(text);
        });
        out
    }

    #[test]
    fn identifiers_split_at_every_convention() {
        let s = |t| split(t, Split::Identifiers);
        assert_eq!(s("get_current_weather"), ["get", "current", "weather"]);
        assert_eq!(s("getCurrentWeather"), ["get", "current", "weather"]);
        assert_eq!(s("HTTPServer.list-items"), ["http", "server", "list", "items"]);
        assert_eq!(s("utf8ToBase64"), ["utf", "8", "to", "base", "64"]);
        assert_eq!(s("ChaDri.change_drink"), ["cha", "dri", "change", "drink"]);
        assert_eq!(s("  Ünïcode Straße 服务 "), ["ünïcode", "straße", "服务"]);
        assert_eq!(s(""), Vec::<String>::new());
        assert_eq!(s("İ"), ["i\u{307}"]);
    }

    /// What [`words`] must equal: runs of alphanumeric characters, each lowercased and, for
    /// identifiers of at most [`MAX_IDENTIFIER_LEN`] bytes, split on characters, with std's
    /// character properties only.
    fn by_characters(text: &str, how: Split) -> Vec<String> {
        let mut out = Vec::new();
        for run in text.split(|c: char| !c.is_alphanumeric()).filter(|r| !r.is_empty()) {
            let mut buf = String::new();
            if how == Split::Plain || run.len() > MAX_IDENTIFIER_LEN {
                out.push(run.chars().flat_map(char::to_lowercase).collect());
                continue;
            }
            let mut prev: Option<char> = None;
            let mut chars = run.chars().peekable();
            while let Some(c) = chars.next() {
                if let Some(p) = prev {
                    let boundary = (p.is_numeric() != c.is_numeric())
                        || (p.is_lowercase() && c.is_uppercase())
                        || (p.is_uppercase() && c.is_uppercase() && chars.peek().is_some_and(|n| n.is_lowercase()));
                    if boundary {
                        out.push(std::mem::take(&mut buf));
                    }
                }
                buf.extend(c.to_lowercase());
                prev = Some(c);
            }
            out.push(buf);
        }
        out
    }

    #[test]
    fn ideographs_have_the_properties_their_fast_path_assumes() {
        for c in '\u{4E00}'..='\u{9FFF}' {
            assert!(c.is_alphanumeric() && !c.is_numeric() && !c.is_lowercase() && !c.is_uppercase(), "{c:?}");
            assert!(c.to_lowercase().eq([c]), "{c:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_byte_tokenizer_equals_the_character_one(
            text in r"([a-z]{1,6}|[A-Z]{1,4}|[0-9]{1,3}|[ _.\-]|é|É|日|一|鿿|〇|，|Ǆ|[a-zA-Z]{40,60}){0,24}"
        ) {
            for how in [Split::Identifiers, Split::Plain] {
                proptest::prop_assert_eq!(split(&text, how), by_characters(&text, how));
            }
        }
    }

    #[test]
    fn data_runs_are_not_split() {
        let blob = "iVBORw0KGgoAAAANSUhEUgAAAgAAAAIACAYAAAD0eNT6AAAABHNCSVQ";
        assert_eq!(split(&format!("see {blob}!"), Split::Identifiers), ["see", &blob.to_lowercase()]);
    }

    #[test]
    fn mixed_scripts_and_odd_characters() {
        let s = |t| split(t, Split::Identifiers);
        assert_eq!(s("caféCrème—x\u{202E}y"), ["café", "crème", "x", "y"]);
        assert_eq!(s("a\u{0}b\u{FEFF}c"), ["a", "b", "c"]);
        assert_eq!(s("—"), Vec::<String>::new());
        assert_eq!(compact("Get-Weather_v2 日本"), "getweatherv2日本");
        let hasher = std::hash::RandomState::new();
        for name in ["Get-Weather_v2", "get_weather_V2", "x".repeat(STACK_COMPACT).as_str(), "日本", ""] {
            assert_eq!(compact_hash(&hasher, name), hasher.hash_one(compact(name).as_bytes()), "{name}");
        }
        assert_ne!(compact_hash(&hasher, "get_weather"), compact_hash(&hasher, "get_weathers"));
    }

    #[test]
    fn plain_split_keeps_identifiers_whole() {
        assert_eq!(split("getWeather_v2 (Paris)", Split::Plain), ["getweather", "v2", "paris"]);
    }

    #[test]
    fn stop_words_are_sorted_and_found() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        // Every stop word and its near misses are what the list says.
        for word in STOP_WORDS {
            for w in
                [word.to_string(), format!("{word}s"), format!("{word}\0"), format!("\0{word}"), word[1..].to_owned()]
            {
                assert_eq!(is_stop_word(&w), STOP_WORDS.contains(&w.as_str()), "{w:?}");
            }
        }
        assert!(!is_stop_word("yourselfs") && !is_stop_word(""));
        assert!(is_stop_word("the") && is_stop_word("please") && !is_stop_word("weather"));
    }

    #[test]
    fn stems_conflate_inflections() {
        let same = |words: &[&str]| {
            let stems: Vec<Cow<'_, str>> = words.iter().map(|w| stem(w)).collect();
            assert!(stems.windows(2).all(|s| s[0] == s[1]), "{words:?} -> {stems:?}");
        };
        same(&["file", "files"]);
        same(&["create", "creates", "created", "creating", "creation"]);
        same(&["query", "queries"]);
        same(&["delete", "deleted", "deleting", "deletes"]);
        same(&["list", "lists", "listed", "listing"]);
        same(&["stop", "stopped", "stopping"]);
        same(&["search", "searches", "searching"]);
        same(&["copy", "copied"]);
        same(&["update", "updates", "updated"]);
        same(&["validate", "validation"]);
        same(&["box", "boxes"]);
        same(&["calculate", "calculation", "calculator", "calculating"]);
        same(&["city", "cities"]);
        same(&["match", "matches"]);
        same(&["install", "installed", "installing"]);
        // Left alone: short words, words that end in s without being plurals, non-ASCII.
        for w in ["bus", "gas", "status", "analysis", "class", "process", "install", "ünïcodes", "it", "string", "need"]
        {
            assert_eq!(stem(w), w);
        }
    }

    #[test]
    fn stems_never_panic_on_short_or_odd_words() {
        for w in ["", "s", "es", "ies", "ied", "ing", "ed", "eing", "aed", "ation", "xation", "sssss", "zzing"] {
            let _ = stem(w);
        }
    }
}
