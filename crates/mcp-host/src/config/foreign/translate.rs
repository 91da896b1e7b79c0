//! One host's server entry read key by key into ours ([`translate`]): what a key becomes is
//! in the host's key table ([`Key`]); keys we do not use are collected and reported once each,
//! keys whose loss would change what a server may do are errors, and strings are brought into
//! our variable syntax.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Map, Value};

use super::super::ConfigError;
use super::super::keys;
use super::super::raw::{RawServer, json_message};
use super::super::vars::{self, Surroundings};
use super::{Host, Key, entry_key, invalid};

/// Our TOML's string fields that hold variable references (and nothing else does).
const EXPANDED: &[&str] = &["command", "args", "env", "cwd", "env_file", "url", "headers"];

/// Collects unused keys, to report each once.
#[derive(Default)]
pub(super) struct Unused(BTreeMap<String, (BTreeSet<String>, &'static str)>);

impl Unused {
    pub(super) fn add(&mut self, key: &str, server: &str, why: &'static str) {
        self.0.entry(key.to_owned()).or_insert_with(|| (BTreeSet::new(), why)).0.insert(server.to_owned());
    }

    pub(super) fn lines(self, path: &Path, table: &str) -> Vec<String> {
        self.0
            .into_iter()
            .map(|(key, (servers, why))| {
                let servers: Vec<String> = servers.iter().map(|s| format!("{s:?}")).collect();
                let why = if why.is_empty() { String::new() } else { format!(": {why}") };
                format!(
                    "{}: `{key}` of {table} {} is not used by mcp-harness and was ignored{why}",
                    path.display(),
                    servers.join(", ")
                )
            })
            .collect()
    }
}

#[allow(clippy::too_many_arguments, reason = "the reading's parts, each used; a struct for one call site adds nothing")]
/// Reads one entry's keys by `keys`, bringing strings into the internal form; returns our
/// entry as a JSON object for [`RawServer`]'s own checks.
pub(super) fn translate(
    path: &Path,
    host: Host,
    table: &'static str,
    name: &str,
    entry: &Value,
    keys: &[(&str, Key)],
    around: Surroundings<'_>,
    unused: &mut Unused,
) -> Result<Map<String, Value>, ConfigError> {
    let here = |key: &str| Some(format!("{}.{key}", entry_key(table, name)));
    let Value::Object(entry) = entry else {
        return Err(invalid(path, Some(entry_key(table, name)), "expected a table of server settings".into(), None));
    };
    let mut ours = Map::new();
    for (key, value) in entry {
        let Some(&(_, what)) = keys.iter().find(|(k, _)| k == key) else {
            // Our own keys are read in our JSON (`config.json`) as in TOML.
            if host == Host::McpServers && keys::fields::<RawServer>().contains(&key.as_str()) {
                ours.insert(key.clone(), value.clone());
            } else {
                unused.add(key, name, "");
            }
            continue;
        };
        match what {
            Key::Ours(our) => {
                ours.insert(our.to_owned(), value.clone());
            }
            Key::Unused(why) => unused.add(key, name, why),
            Key::Refused(why) => {
                return Err(invalid(path, here(key), format!("not read: {why}"), None));
            }
            Key::Special => special(path, host, key, value, &mut ours, unused, name, &here)?,
        }
    }
    // Strings in the internal form, where references may be.
    let syntax = host.syntax();
    let convert =
        |key: &str, text: &str| vars::to_ours(text, syntax, around).map_err(|m| invalid(path, here(key), m, None));
    for field in EXPANDED {
        match ours.get_mut(*field) {
            Some(Value::String(s)) => *s = convert(field, s)?,
            Some(Value::Array(items)) => {
                for item in items.iter_mut() {
                    if let Value::String(s) = item {
                        *s = convert(field, s)?;
                    }
                }
            }
            Some(Value::Object(map)) => {
                for (k, v) in map.iter_mut() {
                    if let Value::String(s) = v {
                        *s = convert(&format!("{field}.{k}"), s)?;
                    }
                }
            }
            _ => {}
        }
    }
    // Codex's headers from the environment are references, added after the conversion (the
    // conversion would make them literal).
    if let Some(Value::Object(from_env)) = ours.remove("\0env_http_headers") {
        let headers = ours.entry("headers").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(headers) = headers {
            for (header, var) in from_env {
                match var {
                    Value::String(var) if vars::references(&format!("${{{var}}}")).len() == 1 => {
                        headers.insert(header, Value::String(format!("${{{var}}}")));
                    }
                    other => {
                        return Err(invalid(
                            path,
                            here(&format!("env_http_headers.{header}")),
                            format!("must name an environment variable, not {other}"),
                            None,
                        ));
                    }
                }
            }
        }
    }
    Ok(ours)
}

#[allow(clippy::too_many_arguments)]
fn special(
    path: &Path,
    host: Host,
    key: &str,
    value: &Value,
    ours: &mut Map<String, Value>,
    unused: &mut Unused,
    name: &str,
    here: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let bad = |message: String| invalid(path, here(key), message, None);
    match key {
        // VS Code allows numbers, and null for "not this variable": a number is its text, a
        // null is left out (the server gets only the variables it is given).
        "env" => match value {
            Value::Object(map) => {
                let mut env = Map::new();
                for (k, v) in map {
                    match v {
                        Value::Null => {}
                        Value::Number(n) => {
                            env.insert(k.clone(), Value::String(n.to_string()));
                        }
                        other => {
                            env.insert(k.clone(), other.clone());
                        }
                    }
                }
                ours.insert("env".into(), Value::Object(env));
            }
            other => {
                ours.insert("env".into(), other.clone());
            }
        },
        // Cline's and others' `disabled`: a server switched off stays off.
        "disabled" => match value {
            Value::Bool(disabled) => {
                ours.insert("enabled".into(), Value::Bool(!disabled));
            }
            other => return Err(bad(format!("expected true or false, not {other}"))),
        },
        // Claude Code's and VS Code's `oauth: {clientId}`; our JSON's own snake_case keys too.
        "oauth" => {
            let Value::Object(map) = value else { return Err(bad(format!("expected a table, not {value}"))) };
            let mut oauth = Map::new();
            for (k, v) in map {
                match k.as_str() {
                    "clientId" => {
                        oauth.insert("client_id".into(), v.clone());
                    }
                    _ if host == Host::McpServers => {
                        oauth.insert(k.clone(), v.clone());
                    }
                    _ => unused.add(&format!("oauth.{k}"), name, ""),
                }
            }
            ours.insert("oauth".into(), Value::Object(oauth));
        }
        // VS Code's own sandbox: never looser here. Its network is off unless domains are
        // allowed, which mcp-harness cannot express.
        "sandboxEnabled" => match value {
            Value::Bool(true) => {
                ours.insert("sandbox".into(), serde_json::json!({ "network": false }));
            }
            Value::Bool(false) => {}
            other => return Err(bad(format!("expected true or false, not {other}"))),
        },
        "startup_timeout_ms" => match value.as_u64() {
            // Codex: `startup_timeout_sec` wins when both are given.
            Some(ms) if !ours.contains_key("startup_timeout_s") => {
                #[allow(clippy::cast_precision_loss)]
                let seconds = ms as f64 / 1000.0;
                ours.insert("startup_timeout_s".into(), serde_json::json!(seconds));
            }
            Some(_) => {}
            None => return Err(bad(format!("expected a number of milliseconds, not {value}"))),
        },
        "env_http_headers" => {
            ours.insert("\0env_http_headers".into(), value.clone());
        }
        // Codex's approvals: "prompt" asks even where Codex would not, which mcp-harness's
        // `--yes` would skip: refused. Other modes ask less than mcp-harness does: ignoring
        // them is stricter.
        "default_tools_approval_mode" => approval(value, &bad, unused, key, name)?,
        "tools" => {
            let Value::Object(tools) = value else { return Err(bad(format!("expected a table, not {value}"))) };
            for (tool, settings) in tools {
                let mode = settings.get("approval_mode").unwrap_or(&Value::Null);
                approval(mode, &bad, unused, &format!("tools.{tool}.approval_mode"), name)?;
            }
        }
        _ => unused.add(key, name, ""),
    }
    Ok(())
}

fn approval(
    mode: &Value,
    bad: &dyn Fn(String) -> ConfigError,
    unused: &mut Unused,
    key: &str,
    name: &str,
) -> Result<(), ConfigError> {
    match mode.as_str() {
        Some("prompt") => Err(bad(
            "an approval mode of \"prompt\" is not read: it asks before every call, and mcp-harness's `--yes` \
             would not; write a [[policy.rules]] entry with decision = \"confirm\" (or \"deny\") instead"
                .into(),
        )),
        None if mode.is_null() => Ok(()),
        _ => {
            unused.add(key, name, "tools are decided by mcp-harness's [policy], which asks by default");
            Ok(())
        }
    }
}

/// Builds the entry from the translated keys, with [`RawServer`]'s checks; errors name the
/// file's own key.
pub(super) fn entry(
    path: &Path,
    table: &'static str,
    name: &str,
    ours: Map<String, Value>,
    keys: &[(&str, Key)],
) -> Result<RawServer, ConfigError> {
    serde_path_to_error::deserialize(Value::Object(ours)).map_err(|e| {
        let path_text = e.path().to_string();
        // Back to the file's own spelling of the key.
        let (first, rest) = path_text.split_once('.').unwrap_or((path_text.as_str(), ""));
        let theirs = keys.iter().find(|(_, k)| matches!(k, Key::Ours(o) if *o == first)).map_or(first, |(t, _)| t);
        let key = if rest.is_empty() { theirs.to_owned() } else { format!("{theirs}.{rest}") };
        let key = if key == "." { entry_key(table, name) } else { format!("{}.{key}", entry_key(table, name)) };
        invalid(path, Some(key), json_message(e.inner()), None)
    })
}

#[allow(clippy::too_many_arguments, reason = "the reading's parts, each used; a struct for one call site adds nothing")]
pub(super) fn read_entries(
    path: &Path,
    host: Host,
    table: &'static str,
    entries: &Map<String, Value>,
    keys: &[(&str, Key)],
    around: Surroundings<'_>,
    unused: &mut Unused,
    servers: &mut BTreeMap<String, RawServer>,
) -> Result<(), ConfigError> {
    for (name, value) in entries {
        let ours = translate(path, host, table, name, value, keys, around, unused)?;
        servers.insert(name.clone(), entry(path, table, name, ours, keys)?);
    }
    Ok(())
}
