//! What a JSON text will cost once read into values, estimated from its text alone, so that a
//! peer cannot make one message of a few megabytes take gigabytes.
//!
//! A message is capped in bytes by its transport (16 MiB by default), but read into
//! `serde_json::Value`s its cost depends on how densely values are packed: measured here, a
//! 16 MiB message of typical objects peaked at 348 MiB, while `[0,0,...]` took 576 MiB and
//! `[[0]],[[0]],...` 1.8 GiB. The estimate counts, outside strings, values (a comma or an
//! opening bracket each starts one) at [`VALUE_COST`] bytes, containers at [`CONTAINER_COST`]
//! more, strings (keys included) at [`STRING_COST`] more and object members (a colon each) at
//! [`MEMBER_COST`] more, plus the text's own length. Against serde_json's measured peak it is
//! at or above for arrays, strings and objects of up to ~30 members, and up to ~1.2x under for
//! objects of hundreds of short keys (their index tables); flattened types, which buffer a
//! copy, can take ~1.5x. A text whose estimate passes [`MAX_DECODED_COST`] is refused before
//! anything is built from it. Large answers that are mostly text (a long result, a blob, a
//! schema with descriptions, tool lists) pass up to the size limit; arrays of bare numbers
//! pass up to about 8 MiB, objects of a few short numeric members up to about 10 MiB.

/// Bytes one JSON value is counted as taking once read: a 72-byte `Value`, twice for the
/// spare capacity of the vector or map holding it.
pub const VALUE_COST: u64 = 144;

/// Bytes one array or object is counted as taking in addition, for the storage behind it.
pub const CONTAINER_COST: u64 = 256;

/// Bytes one string or key is counted as taking in addition to its characters (the smallest
/// heap block).
pub const STRING_COST: u64 = 32;

/// Bytes one object member is counted as taking in addition to its value and key: a map entry
/// is larger than a `Value`, and the map keeps an index beside it.
pub const MEMBER_COST: u64 = 80;

/// The most one message may be estimated to take once read: 576 MiB. A 16 MiB message of
/// typical objects is estimated at about 530 MiB and passes.
pub const MAX_DECODED_COST: u64 = 576 << 20;

/// A text packed with more values than the host reads from one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "it packs {values} JSON values ({containers} arrays or objects, {strings} strings) into {bytes} bytes, \
     about {} MiB once read; the most read from one message is {} MiB",
    cost.div_ceil(1 << 20),
    MAX_DECODED_COST >> 20
)]
#[non_exhaustive]
pub struct TooDense {
    /// The text's length in bytes.
    pub bytes: usize,
    /// Values counted.
    pub values: u64,
    /// Arrays and objects among them.
    pub containers: u64,
    /// Strings and keys.
    pub strings: u64,
    /// Object members.
    pub members: u64,
    /// The estimate, in bytes.
    pub cost: u64,
}

/// The estimated cost of reading `text` into values, in bytes (see the module docs).
pub fn decoded_cost(text: &str) -> u64 {
    let counted = count(text.as_bytes());
    cost_of(text, counted)
}

/// `Err` when reading `text` into values is estimated to take more than [`MAX_DECODED_COST`].
/// One pass over the bytes, no allocation; `text` need not be valid JSON.
pub fn check_density(text: &str) -> Result<(), TooDense> {
    // Fewer bytes than could ever reach the limit need no count. The most one byte can add is
    // an opening bracket's (a value and a container), plus the first value's.
    let most = (text.len() as u64).saturating_mul(VALUE_COST + CONTAINER_COST + 1).saturating_add(VALUE_COST);
    if most <= MAX_DECODED_COST {
        return Ok(());
    }
    let counted = count(text.as_bytes());
    let cost = cost_of(text, counted);
    if cost > MAX_DECODED_COST {
        let Counted { values, containers, strings, members } = counted;
        return Err(TooDense { bytes: text.len(), values, containers, strings, members, cost });
    }
    Ok(())
}

/// Reads `text` into `T` unless it is too dense to read: the one place a peer's JSON is
/// checked (see [`check_density`]) before anything is built from it. Each caller turns the two
/// failures into its own error: `dense` when the text was refused unread, `malformed` when it
/// is not JSON of `T`'s shape.
///
/// ```
/// use mcp_protocol::from_str_bounded;
///
/// #[derive(Debug, PartialEq)]
/// enum Bad { Dense, Malformed }
///
/// let read = |text: &str| from_str_bounded::<Vec<u8>, _>(text, |_| Bad::Dense, |_| Bad::Malformed);
/// assert_eq!(read("[1, 2]"), Ok(vec![1, 2]));
/// assert_eq!(read("{"), Err(Bad::Malformed));
/// assert_eq!(read(&"[[0]],".repeat(3 << 20)), Err(Bad::Dense));
/// ```
pub fn from_str_bounded<T: serde::de::DeserializeOwned, E>(
    text: &str,
    dense: impl FnOnce(TooDense) -> E,
    malformed: impl FnOnce(serde_json::Error) -> E,
) -> Result<T, E> {
    check_density(text).map_err(dense)?;
    serde_json::from_str(text).map_err(malformed)
}

/// What [`count`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counted {
    values: u64,
    containers: u64,
    strings: u64,
    members: u64,
}

fn cost_of(text: &str, c: Counted) -> u64 {
    c.values
        .saturating_mul(VALUE_COST)
        .saturating_add(c.containers.saturating_mul(CONTAINER_COST))
        .saturating_add(c.strings.saturating_mul(STRING_COST))
        .saturating_add(c.members.saturating_mul(MEMBER_COST))
        .saturating_add(text.len() as u64)
}

/// One value to start with, one more per comma or opening bracket outside strings; one string
/// per opening quote; one member per colon.
fn count(bytes: &[u8]) -> Counted {
    let (mut values, mut containers, mut strings, mut members) = (1u64, 0u64, 0u64, 0u64);
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                strings += 1;
            }
            b',' => values += 1,
            b':' => members += 1,
            b'[' | b'{' => {
                values += 1;
                containers += 1;
            }
            _ => {}
        }
    }
    Counted { values, containers, strings, members }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repeated(unit: &str, bytes: usize) -> String {
        let mut s = String::from("[");
        while s.len() + unit.len() < bytes {
            s.push_str(unit);
        }
        s.push_str("0]");
        s
    }

    #[test]
    fn values_and_containers_are_counted_outside_strings_only() {
        let counted = count(br#"{"a":[1,2,{"b":"x,[{:"}],"c":"\",{:"}"#);
        assert_eq!(counted, Counted { values: 7, containers: 3, strings: 5, members: 3 });
        assert_eq!(count(b"0"), Counted { values: 1, containers: 0, strings: 0, members: 0 });
    }

    #[test]
    fn dense_messages_are_refused_and_typical_ones_pass() {
        const MIB: usize = 1 << 20;
        // The measured shapes of the module docs, at the default 16 MiB message limit.
        let typical = repeated(r#"{"name":"tool_name_x","v":123},"#, 16 * MIB);
        assert_eq!(check_density(&typical), Ok(()), "{}", decoded_cost(&typical) >> 20);
        let schema =
            repeated(r#"{"type":"object","properties":{"path":{"type":"string","description":"x"}}},"#, 16 * MIB);
        assert_eq!(check_density(&schema), Ok(()));
        // Many members of one object (about 350 MiB read: under the limit, and passed).
        let members = format!("{{{}\"z\":0}}", r#""k0123":0,"#.repeat(16 * MIB / 10 - 1));
        assert_eq!(check_density(&members), Ok(()));
        let text = format!(r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#, "[0],".repeat(4 * MIB));
        assert_eq!(check_density(&text), Ok(()));
        // Objects of many one-letter keys (~670 MiB at their peak in review).
        let keys: Vec<String> = ('a'..='z').chain('A'..='C').map(|k| format!(r#""{k}":0"#)).collect();
        let many_keys = format!("{{{}}},", keys.join(","));
        for unit in ["0,", "[],", "{},", r#"{"":0},"#, "[[0]],", r#""a","#, many_keys.as_str()] {
            let dense = repeated(unit, 16 * MIB);
            let refused = check_density(&dense).unwrap_err();
            assert!(refused.cost > MAX_DECODED_COST && refused.bytes == dense.len(), "{unit}");
            let said = refused.to_string();
            assert!(said.contains("JSON values") && said.contains("576 MiB"), "{said}");
        }
        // Small texts are not counted at all, however dense.
        assert_eq!(check_density(&repeated("[[0]],", 4096)), Ok(()));
    }
}
