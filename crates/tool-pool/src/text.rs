//! Words out of tool names, descriptions and queries: splitting, stop words and a light English
//! stemmer, for tool search.
//!
//! Everything here is total (any `&str` in, no panic) and allocation-light: words are handed to a
//! callback one at a time in a reused buffer.

use std::borrow::Cow;

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

/// Calls `emit` with each word of `text`, lowercased, in order.
pub(crate) fn words(text: &str, split: Split, mut emit: impl FnMut(&str)) {
    let mut word = String::new();
    for run in text.split(|c: char| !c.is_alphanumeric()).filter(|r| !r.is_empty()) {
        if split == Split::Plain || run.len() > MAX_IDENTIFIER_LEN {
            push_lower(&mut word, run);
            flush(&mut word, &mut emit);
            continue;
        }
        let mut prev: Option<char> = None;
        let mut chars = run.chars().peekable();
        while let Some(c) = chars.next() {
            if let Some(p) = prev {
                let boundary = (p.is_numeric() != c.is_numeric())
                    // camelCase: a lower-case letter then an upper-case one.
                    || (p.is_lowercase() && c.is_uppercase())
                    // HTTPServer: the last capital of a run starts the next word.
                    || (p.is_uppercase() && c.is_uppercase() && chars.peek().is_some_and(|n| n.is_lowercase()));
                if boundary {
                    flush(&mut word, &mut emit);
                }
            }
            push_lower(&mut word, c.encode_utf8(&mut [0; 4]));
            prev = Some(c);
        }
        flush(&mut word, &mut emit);
    }
}

fn push_lower(out: &mut String, text: &str) {
    if text.is_ascii() {
        out.extend(text.bytes().map(|b| char::from(b.to_ascii_lowercase())));
    } else {
        out.extend(text.chars().flat_map(char::to_lowercase));
    }
}

fn flush(word: &mut String, emit: &mut impl FnMut(&str)) {
    if !word.is_empty() {
        emit(word);
        word.clear();
    }
}

/// Lowercase letters and digits of `text` only: `Get-Weather` and `get_weather` are both
/// `getweather`. Used to compare a query with names regardless of separators and case.
pub(crate) fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars().filter(|c| c.is_alphanumeric()) {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
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

/// Whether `word` (lowercase) is a stop word.
pub(crate) fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
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
        words(text, how, |w| out.push(w.to_owned()));
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

    #[test]
    fn plain_split_keeps_identifiers_whole() {
        assert_eq!(split("getWeather_v2 (Paris)", Split::Plain), ["getweather", "v2", "paris"]);
    }

    #[test]
    fn stop_words_are_sorted_and_found() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
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
