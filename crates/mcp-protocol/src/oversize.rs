//! The id of a response too large to read whole, from its first and last bytes, so that a
//! transport can fail the request it answers at once instead of leaving it to its timeout.
//!
//! The top-level members are read from both ends: forwards from the start until a value runs
//! past the head (that is the large member, and its key is known), backwards from the closing
//! brace until one runs past the tail. Serializers put `id` before the result (serde, Python)
//! or after it (the TypeScript SDK); either way it is among the members read.

use crate::jsonrpc::RequestId;

/// The `id` of the response whose text starts with `head` and ends with `tail` (any amounts,
/// bounded by the caller), or `None` when that cannot be told for sure: the large member is
/// not `result` or `error`, a `method` is among the members (a request or notification of the
/// server's, whose ids are its own), or the id is in neither end.
pub fn oversize_response_id(head: &[u8], tail: &[u8]) -> Option<RequestId> {
    let (mut members, large) = forward_members(head);
    let large = large?;
    if !matches!(large.as_str(), "result" | "error") {
        return None;
    }
    members.extend(backward_members(tail));
    if members.iter().any(|(key, _)| key == "method") {
        return None;
    }
    let (_, id) = members.iter().find(|(key, _)| key == "id")?;
    serde_json::from_slice::<RequestId>(id).ok()
}

type Member<'a> = (String, &'a [u8]);

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|&c| is_space(c)) {
        i += 1;
    }
    i
}

fn skip_space_back(b: &[u8], mut end: usize) -> usize {
    while end > 0 && is_space(b[end - 1]) {
        end -= 1;
    }
    end
}

fn key_of(quoted: &[u8]) -> String {
    serde_json::from_slice(quoted).unwrap_or_default()
}

/// The end (exclusive) of the string starting at `i`, if it ends within `b`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

fn is_scalar_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')
}

/// The end (exclusive) of the value starting at `i`, if it ends within `b`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let end = (i..b.len()).find(|&j| !is_scalar_byte(b[j]))?;
            (end > i).then_some(end)
        }
    }
}

/// The members read from the start, and the key of the one whose value runs past `b`.
fn forward_members(b: &[u8]) -> (Vec<Member<'_>>, Option<String>) {
    let mut members = Vec::new();
    let mut i = skip_space(b, 0);
    if b.get(i) != Some(&b'{') {
        return (members, None);
    }
    i += 1;
    loop {
        i = skip_space(b, i);
        let Some(key_end) = string_end(b, i) else { return (members, None) };
        let key = key_of(&b[i..key_end]);
        i = skip_space(b, key_end);
        if b.get(i) != Some(&b':') {
            return (members, None);
        }
        i = skip_space(b, i + 1);
        if i >= b.len() {
            return (members, Some(key));
        }
        let Some(end) = value_end(b, i) else { return (members, Some(key)) };
        members.push((key, &b[i..end]));
        i = skip_space(b, end);
        match b.get(i) {
            Some(b',') => i += 1,
            _ => return (members, None),
        }
    }
}

/// Whether the quote at `q` is escaped (an odd run of backslashes before it). `None` when the
/// run reaches the start of `b`, where more backslashes may have been cut off.
fn escaped(b: &[u8], q: usize) -> Option<bool> {
    let run = b[..q].iter().rev().take_while(|&&c| c == b'\\').count();
    if run == q && run > 0 {
        return None;
    }
    Some(run % 2 == 1)
}

/// The start of the string ending (exclusive) at `end`, if it starts within `b`.
fn string_start_back(b: &[u8], end: usize) -> Option<usize> {
    if end < 2 || b[end - 1] != b'"' {
        return None;
    }
    let mut q = end - 1;
    while q > 0 {
        q -= 1;
        if b[q] == b'"' && !escaped(b, q)? {
            return Some(q);
        }
    }
    None
}

/// The start of the value ending (exclusive) at `end`, if it starts within `b`.
fn value_start_back(b: &[u8], end: usize) -> Option<usize> {
    match *b.get(end.checked_sub(1)?)? {
        b'"' => string_start_back(b, end),
        b'}' | b']' => {
            let mut depth = 0usize;
            let mut j = end;
            while j > 0 {
                match b[j - 1] {
                    b'"' => {
                        j = string_start_back(b, j)?;
                        continue;
                    }
                    b'}' | b']' => depth += 1,
                    b'{' | b'[' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j - 1);
                        }
                    }
                    _ => {}
                }
                j -= 1;
            }
            None
        }
        _ => {
            let start = (0..end).rev().find(|&j| !is_scalar_byte(b[j]))? + 1;
            (start < end).then_some(start)
        }
    }
}

/// The members read backwards from the closing brace, until one starts before `b`.
fn backward_members(b: &[u8]) -> Vec<Member<'_>> {
    let mut members = Vec::new();
    let mut j = skip_space_back(b, b.len());
    if j == 0 || b[j - 1] != b'}' {
        return members;
    }
    j -= 1;
    loop {
        let value_end = skip_space_back(b, j);
        let Some(value_start) = value_start_back(b, value_end) else { return members };
        let colon = skip_space_back(b, value_start);
        if colon == 0 || b[colon - 1] != b':' {
            return members;
        }
        let key_end = skip_space_back(b, colon - 1);
        let Some(key_start) = string_start_back(b, key_end) else { return members };
        members.push((key_of(&b[key_start..key_end]), &b[value_start..value_end]));
        let before = skip_space_back(b, key_start);
        match before.checked_sub(1).map(|k| b[k]) {
            Some(b',') => j = before - 1,
            _ => return members,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first and last `n` bytes of `text`.
    fn ends(text: &str, n: usize) -> (&[u8], &[u8]) {
        let b = text.as_bytes();
        (&b[..n.min(b.len())], &b[b.len().saturating_sub(n)..])
    }

    fn big(shape: &str) -> String {
        shape.replace("BIG", &format!(r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#, "x\\\"{}".repeat(5000)))
    }

    #[test]
    fn finds_the_id_before_or_after_the_result() {
        let cases = [
            (r#"{"jsonrpc":"2.0","id":7,"result":BIG}"#, Some(RequestId::Number(7))),
            (r#"{"jsonrpc":"2.0","result":BIG,"id":"abc\"}"}"#, Some(RequestId::String("abc\"}".into()))),
            (r#"  { "result" : BIG , "jsonrpc" : "2.0" , "id" : 12 }  "#, Some(RequestId::Number(12))),
            (r#"{"id":3,"error":{"code":-1,"message":"BIG"}}"#, Some(RequestId::Number(3))),
            (r#"{"jsonrpc":"2.0","error":{"code":-1,"message":"m","data":BIG},"id":4}"#, Some(RequestId::Number(4))),
            // The server's own request: its ids are not ours.
            (r#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":BIG}"#, None),
            (r#"{"jsonrpc":"2.0","params":BIG,"method":"x","id":1}"#, None),
            (r#"{"jsonrpc":"2.0","method":"notifications/message","params":BIG}"#, None),
            // No id at either end, or not an object at all.
            (r#"{"jsonrpc":"2.0","result":BIG,"extra":[1,2,{"a":"}"}]}"#, None),
            (r#"[{"jsonrpc":"2.0","id":1,"result":BIG}]"#, None),
            ("not json at all BIG", None),
        ];
        for (shape, expected) in cases {
            let text = big(shape);
            let (head, tail) = ends(&text, 4096);
            assert_eq!(oversize_response_id(head, tail), expected, "{shape}");
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(head in proptest::collection::vec(proptest::sample::select(b"{}[]\"\\:, ia1".to_vec()), 0..40),
                                       tail in proptest::collection::vec(proptest::sample::select(b"{}[]\"\\:, ia1".to_vec()), 0..40)) {
            let _ = oversize_response_id(&head, &tail);
        }
    }
}
