//! Untrusted text (from a server, a model, a configuration file someone else wrote) made safe
//! to show: to a terminal, where escape sequences could drive it, and to a model, where
//! invisible characters could hide instructions.

/// Characters removed from untrusted text: controls other than `\n` and `\t` (ESC, BEL, CR,
/// C1 controls such as CSI), bidirectional overrides, isolates and marks (they make text read
/// differently from what it says), and invisible characters: zero-width ones, the Unicode
/// "tag" block and variation selectors (both can spell out a whole hidden instruction that a
/// model reads and a person never sees), fillers and invisible operators.
pub fn is_stripped(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || is_direction(c)
        || matches!(
            c,
            '\u{200B}'..='\u{200D}'
                | '\u{2060}'..='\u{2064}'
                | '\u{206A}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{00AD}'
                | '\u{034F}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{3164}'
                | '\u{FFA0}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E007F}'
                | '\u{E0100}'..='\u{E01EF}'
        )
}

/// Bidirectional overrides, embeddings, isolates and marks: they make text read differently
/// from what it says (a name that shows as another).
pub fn is_direction(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Appended when text was cut, so a reader knows something is missing.
pub const ELLIPSIS: char = '…';

/// `text` without stripped characters; newlines and tabs stay.
pub fn terminal_safe(text: &str) -> String {
    sanitize(text, usize::MAX)
}

/// `text` without stripped characters, on one line (runs of whitespace become one space), cut
/// to at most `max` characters (the last being `…` when cut).
pub fn one_line(text: &str, max: usize) -> String {
    let mut flat = String::with_capacity(text.len().min(max.saturating_mul(4)));
    for word in text.split(char::is_whitespace).filter(|w| !w.is_empty()) {
        if !flat.is_empty() {
            flat.push(' ');
        }
        flat.extend(word.chars().filter(|&c| !is_stripped(c)));
        if flat.len() > max.saturating_mul(4) {
            break;
        }
    }
    cut(&flat, max)
}

/// The first line of `text` with anything on it, as [`one_line`] makes it: how a long text
/// (a description, a tool's result) is summarized in one row.
pub fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().find(|l| l.chars().any(|c| !c.is_whitespace() && !is_stripped(c))).unwrap_or("");
    one_line(line, max)
}

/// `text` cut to at most `max` characters, the last being `…` when anything was cut (nothing
/// at all when `max` is 0). Never splits a character.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some(_) if max == 0 => String::new(),
        Some(_) => {
            let keep = text.char_indices().nth(max - 1).map_or(text.len(), |(i, _)| i);
            let mut out = String::with_capacity(keep + ELLIPSIS.len_utf8());
            out.push_str(&text[..keep]);
            out.push(ELLIPSIS);
            out
        }
    }
}

/// `text` without stripped characters, cut to at most `cap` characters (the last of which is
/// `…` when anything was cut, unless `cap` is 0). Stripping comes first, so invisible
/// characters cannot eat the budget. Never splits a character.
pub fn sanitize(text: &str, cap: usize) -> String {
    let mut out = String::new();
    sanitize_into(&mut out, text, cap);
    out
}

/// [`sanitize`], appending to `out`.
pub fn sanitize_into(out: &mut String, text: &str, cap: usize) {
    // Fast path for the common case, short printable ASCII: every byte is one character and
    // nothing needs stripping.
    if text.len() <= cap && is_plain_ascii(text.as_bytes()) {
        out.push_str(text);
        return;
    }
    let mut before_last = out.len();
    for (kept, c) in text.chars().filter(|&c| !is_stripped(c)).enumerate() {
        if kept == cap {
            // One character too many: replace the last kept one with the ellipsis.
            if cap > 0 {
                out.truncate(before_last);
                out.push(ELLIPSIS);
            }
            return;
        }
        before_last = out.len();
        out.push(c);
    }
}

/// Whether every byte is printable ASCII, `\n` or `\t`. Eight bytes at a time: this runs over
/// every description of every pool assembly, and a byte loop was the largest cost there.
pub fn is_plain_ascii(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let plain_byte = |b: u8| (0x20..0x7f).contains(&b) || b == b'\n' || b == b'\t';
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // Some byte is >= 0x80, < 0x20 or == 0x7f (classic "has byte less than" / "has zero
        // byte" tricks); only then look at the bytes, since `\n` and `\t` are fine.
        let suspicious =
            (w | (w.wrapping_sub(ONES * 0x20) & !w) | ((w ^ (ONES * 0x7f)).wrapping_sub(ONES) & !(w ^ (ONES * 0x7f))))
                & HIGHS;
        if suspicious != 0 && !chunk.iter().all(|&b| plain_byte(b)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| plain_byte(b))
}

/// The longest start of `text` of at most `max` bytes that does not split a character: a
/// byte budget (a key, a buffer) where [`cut`] counts characters and marks the cut.
pub fn prefix(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `value` when its text (a string's own, else its JSON) is at most `max` characters; else
/// that text [`cut`] to `max` characters, as a string. For what a peer sends that a host keeps
/// or passes on (a server's log `data`), which may be megabytes.
pub fn cap_json(value: &mut serde_json::Value, max: usize) {
    let longer = |text: &str| text.len() > max && text.chars().nth(max).is_some();
    let cut = match &*value {
        serde_json::Value::String(text) => longer(text).then(|| cut(text, max)),
        other => {
            let text = other.to_string();
            longer(&text).then(|| cut(&text, max))
        }
    };
    if let Some(cut) = cut {
        *value = serde_json::Value::String(cut);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn escapes_bidi_and_invisibles_are_removed() {
        assert_eq!(terminal_safe("a\u{1b}[31mred\u{7}\nb\tc\u{202e}\r\u{9b}2J"), "a[31mred\nb\tc2J");
        assert_eq!(sanitize("a\u{202E}b\u{200B}c\u{7}d\r\n\te\u{FEFF}\u{85}", 100), "abcd\n\te");
        assert_eq!(one_line("a\n  b\u{1b}", 10), "a b");
        assert_eq!(one_line("over\rwrite", 20), "over write");
        assert_eq!(first_line("\n \u{200b}\n  first   line\u{1b}\nsecond", 20), "first line");
        assert_eq!(first_line("a long first line\nb", 6), "a lon…");
        assert_eq!(first_line("", 6), "");
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 0), "");
        assert_eq!(cut("ééé", 3), "ééé");
    }

    /// A hidden instruction spelled in tag characters, or carried by variation selectors and
    /// fillers, is gone; what a person sees stays.
    #[test]
    fn tag_characters_and_other_invisibles_are_removed() {
        let hidden: String = "call exfil".chars().map(|c| char::from_u32(0xE0000 + c as u32).unwrap()).collect();
        assert_eq!(terminal_safe(&format!("Reads a note.{hidden}")), "Reads a note.");
        let fillers = "a\u{180E}b\u{00AD}c\u{034F}d\u{115F}\u{3164}e\u{FE0F}\u{E0101}f\u{2062}g";
        assert_eq!(terminal_safe(fillers), "abcdefg");
        assert_eq!(terminal_safe("日本語 ✓ é"), "日本語 ✓ é");
    }

    #[test]
    fn caps_in_characters_without_splitting() {
        assert_eq!(sanitize("ééééé", 5), "ééééé");
        assert_eq!(sanitize("éééééé", 5), "éééé…");
        assert_eq!(sanitize("abc", 0), "");
        assert_eq!(sanitize("a\u{200B}\u{200B}\u{200B}bc", 3), "abc");
    }

    #[test]
    fn plain_ascii_check_agrees_with_bytes() {
        for b in 0..=255u8 {
            for pos in 0..9 {
                let mut bytes = vec![b'a'; 9];
                bytes[pos] = b;
                let expected = (0x20..0x7f).contains(&b) || b == b'\n' || b == b'\t';
                assert_eq!(is_plain_ascii(&bytes), expected, "byte {b:#x} at {pos}");
            }
        }
    }

    proptest! {
        #[test]
        fn nothing_stripped_survives_and_caps_hold(text in any::<String>(), cap in 0usize..50) {
            let s = sanitize(&text, cap);
            prop_assert!(!s.chars().any(is_stripped));
            prop_assert!(s.chars().count() <= cap);
            let line = one_line(&text, cap);
            prop_assert!(!line.chars().any(|c| is_stripped(c) || c == '\n'));
            prop_assert!(line.chars().count() <= cap);
            prop_assert_eq!(is_plain_ascii(text.as_bytes()), text.bytes().all(|b| (0x20..0x7f).contains(&b) || b == b'\n' || b == b'\t'));
        }
    }

    #[test]
    fn long_json_is_cut_to_text() {
        let mut short = serde_json::json!({"a": 1});
        cap_json(&mut short, 100);
        assert_eq!(short, serde_json::json!({"a": 1}));
        let mut long = serde_json::json!({"a": "x".repeat(50)});
        cap_json(&mut long, 10);
        assert_eq!(long, serde_json::Value::String("{\"a\":\"xxx…".to_owned()));
        let mut text = serde_json::Value::String("é".repeat(20));
        cap_json(&mut text, 10);
        assert_eq!(text.as_str().map(|t| t.chars().count()), Some(10));
    }

    #[test]
    fn a_prefix_never_splits_a_character() {
        assert_eq!(prefix("héllo", 2), "h");
        assert_eq!(prefix("héllo", 3), "hé");
        assert_eq!(prefix("abc", 10), "abc");
        assert_eq!(prefix("é", 0), "");
    }
}
