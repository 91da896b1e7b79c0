//! Secret redaction of structured values: what a log line, an audit record or a span may carry
//! of a tool's arguments or result. A key whose name looks like a secret's (`token`,
//! `api_key`, `password`, `authorization`, ...) keeps its place with its value replaced by
//! [`HIDDEN`]; a string that is a credential by its form (`Bearer ...`, `Basic ...`) is hidden
//! wherever it is. The one home of that rule: configuration display (`mcp get`), logs and
//! telemetry use these functions.

use serde_json::{Map, Value};

/// What a hidden value is replaced by.
pub const HIDDEN: &str = "<hidden>";

/// The words that make a name a secret's, lower case, matched as whole words of the name.
const SECRET_WORDS: [&str; 17] = [
    "token",
    "tokens",
    "key",
    "apikey",
    "secret",
    "secrets",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "cookie",
    "session",
    "pat",
];

/// Endings that make a word a secret's even when run together with another (`ACCESSTOKEN`,
/// `dbpassword`); `key` is not one (`monkey`, `hotkey`).
const SECRET_ENDINGS: [&str; 6] = ["token", "secret", "password", "passwd", "apikey", "credential"];

/// Whether a variable, header or field name usually holds a secret (`GITHUB_TOKEN`, `apiKey`,
/// `Authorization`, `client_secret`, `password`, `ACCESSTOKEN`). The name is cut into words
/// (`_`, `-`, `.`, spaces and camelCase) and a word must be one of the secret words, or end with
/// a strong one (`token`, `secret`, `password`, ...): `path`, `author` and `keyword` are not
/// secrets.
pub fn is_secret_name(name: &str) -> bool {
    let mut word = String::new();
    let mut prev_lower = false;
    let mut found = false;
    let mut flush = |word: &mut String| {
        if !word.is_empty() {
            found |= SECRET_WORDS.contains(&word.as_str()) || SECRET_ENDINGS.iter().any(|e| word.ends_with(e));
            word.clear();
        }
    };
    for c in name.chars() {
        if !c.is_alphanumeric() {
            flush(&mut word);
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            flush(&mut word);
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    flush(&mut word);
    found
}

/// Whether a string value is a credential by its form (an HTTP authorization value).
pub fn is_credential_value(value: &str) -> bool {
    let v = value.trim_start();
    ["bearer ", "basic ", "token "].iter().any(|p| v.len() > p.len() && v[..p.len()].eq_ignore_ascii_case(p))
}

/// `value` with every secret hidden (see the module's rule), nested objects and arrays
/// included, to `depth` 64 (deeper levels are hidden whole).
pub fn redact_json(value: &Value) -> Value {
    redact_at(value, 0)
}

fn redact_at(value: &Value, depth: usize) -> Value {
    if depth >= 64 {
        return Value::String(HIDDEN.to_owned());
    }
    match value {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                let v = if is_secret_name(k) && !v.is_null() {
                    Value::String(HIDDEN.to_owned())
                } else {
                    redact_at(v, depth + 1)
                };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| redact_at(v, depth + 1)).collect()),
        Value::String(s) if is_credential_value(s) => Value::String(HIDDEN.to_owned()),
        other => other.clone(),
    }
}

/// `url` as messages and logs show it: its user info and query, where credentials ride
/// (`https://user:pass@host/`, `?api_key=...`), hidden, and its fragment left out. The
/// configuration's own URL may hold a secret (`${VAR}` expansion invites it); errors that name
/// the server reach the terminal, the model and the transcript.
pub fn url(url: &str) -> String {
    let url = url.split('#').next().unwrap_or_default();
    let (base, query) = match url.split_once('?') {
        Some((base, _)) => (base, true),
        None => (url, false),
    };
    let mut shown = String::with_capacity(base.len() + HIDDEN.len() * 2 + 2);
    // Without a scheme (`user:pass@host:4318`, written by mistake) the authority comes first.
    let rest = match base.split_once("://") {
        Some((scheme, rest)) => {
            shown.push_str(scheme);
            shown.push_str("://");
            rest
        }
        None => base,
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if let Some((_, host)) = authority.rsplit_once('@') {
        shown.push_str(HIDDEN);
        shown.push('@');
        shown.push_str(host);
    } else {
        shown.push_str(authority);
    }
    shown.push_str(path);
    if query {
        shown.push('?');
        shown.push_str(HIDDEN);
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_names() {
        for name in [
            "GITHUB_TOKEN",
            "apiKey",
            "Authorization",
            "client_secret",
            "password",
            "X-Session",
            "cookie",
            "x-api-key",
            "accessToken",
            "OPENAI_API_KEY",
            "ACCESSTOKEN",
            "dbpassword",
            "GH_PAT",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["path", "PATH", "query", "limit", "name", "url", "author", "keyword", "monkey", "tokenizer"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn hides_secret_keys_and_credentials_at_any_depth_keeping_the_shape() {
        let v = json!({
            "path": "/tmp/x",
            "api_key": "sk-123",
            "nested": {"headers": {"Authorization": "Bearer abc", "accept": "json"}, "list": ["Bearer xyz", "plain"]},
            "token": null,
            "count": 3
        });
        let r = redact_json(&v);
        assert_eq!(
            r,
            json!({
                "path": "/tmp/x",
                "api_key": HIDDEN,
                "nested": {"headers": {"Authorization": HIDDEN, "accept": "json"}, "list": [HIDDEN, "plain"]},
                "token": null,
                "count": 3
            })
        );
        assert!(!r.to_string().contains("sk-123") && !r.to_string().contains("abc") && !r.to_string().contains("xyz"));
    }

    #[test]
    fn deep_values_are_bounded() {
        let mut v = json!("Bearer deep");
        for _ in 0..200 {
            v = json!([v]);
        }
        let r = redact_json(&v);
        assert!(!r.to_string().contains("deep"));
    }

    #[test]
    fn a_url_is_shown_without_its_user_info_and_query() {
        assert_eq!(url("https://api.example.com/mcp"), "https://api.example.com/mcp");
        assert_eq!(url("https://api.example.com/mcp?api_key=s3cret&x=1"), "https://api.example.com/mcp?<hidden>");
        assert_eq!(
            url("https://me:s3cret@api.example.com:8443/v1/mcp"),
            "https://<hidden>@api.example.com:8443/v1/mcp"
        );
        assert_eq!(url("wss://tok@h/ws?t=s3cret#frag"), "wss://<hidden>@h/ws?<hidden>");
        assert_eq!(url("http://h/a@b"), "http://h/a@b", "an @ in the path is no user info");
        assert_eq!(url("not a url?s3cret"), "not a url?<hidden>");
        assert_eq!(url(""), "");
        assert_eq!(url("me:s3cret@h:4318/v1"), "<hidden>@h:4318/v1", "no scheme: user info still hidden");
    }
}
