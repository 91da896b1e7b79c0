//! A server's entry as written, for people: how it is reached, what runs, whether it is
//! enabled, its settings with secret-looking values hidden (`mcp list`, `mcp get`), and its
//! preparation for `mcp import`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::raw::RawServer;
use super::vars;

impl RawServer {
    /// How the server is reached, for listings: `stdio`, `http`, `sse` or `ws`.
    pub fn transport(&self) -> &'static str {
        match (&self.command, self.url.as_deref(), self.kind.as_deref()) {
            (Some(_), _, _) => "stdio",
            (None, Some(url), _) if url.starts_with("ws://") || url.starts_with("wss://") => "ws",
            (None, _, Some("sse")) => "sse",
            _ => "http",
        }
    }

    /// One line saying what runs or is reached.
    pub fn target(&self) -> String {
        match (&self.command, &self.url) {
            (Some(command), _) => std::iter::once(command.as_str())
                .chain(self.args.iter().flatten().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(url)) => url.clone(),
            (None, None) => String::new(),
        }
    }

    /// Whether the server is enabled.
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// The server as `mcp get --json` and `mcp list --json` show it: the configuration as
    /// written (references not expanded), with secret-looking literal values hidden.
    pub fn describe(&self, name: &str) -> Value {
        let raw = self;
        let map = |m: &Option<BTreeMap<String, String>>| {
            m.as_ref().map(|m| {
                m.iter().map(|(k, v)| (k.clone(), Value::String(shown(k, v)))).collect::<serde_json::Map<_, _>>()
            })
        };
        let mut value = json!({
            "name": name,
            "transport": raw.transport(),
            "enabled": raw.enabled(),
            "command": raw.command,
            "args": raw.args,
            "env": map(&raw.env),
            "env_vars": raw.env_vars,
            "env_file": raw.env_file,
            "cwd": raw.cwd,
            "url": raw.url,
            "headers": map(&raw.headers),
            "bearer_token_env_var": raw.bearer_token_env_var,
            "required": raw.required.unwrap_or(false),
            "startup_timeout_s": raw.startup_timeout_s.as_ref().map(|s| s.0.as_secs_f64()),
            "tool_timeout_s": raw.tool_timeout_s.as_ref().map(|s| s.0.as_secs_f64()),
            "max_tool_time_s": raw.max_tool_time_s.as_ref().map(|s| s.0.as_secs_f64()),
            "enabled_tools": raw.enabled_tools,
            "disabled_tools": raw.disabled_tools,
        });
        if let Value::Object(object) = &mut value {
            object.retain(|_, v| !v.is_null());
        }
        value
    }

    /// The server (read from a file in `source_dir`) made ready for our TOML: VS Code inputs
    /// become environment variables (returned: (input id, variable)), and relative paths
    /// become absolute (they were relative to the other host's file).
    pub fn prepare_import(&mut self, source_dir: &Path) -> Vec<(String, String)> {
        let raw = self;
        let mut inputs = Vec::new();
        let mut convert = |text: &mut String| {
            for id in vars::inputs(text) {
                let var = vars::input_variable(&id);
                if !inputs.iter().any(|(i, _)| *i == id) {
                    inputs.push((id, var));
                }
            }
            *text = vars::inputs_to_variables(text);
        };
        raw.command.iter_mut().for_each(&mut convert);
        raw.args.iter_mut().flatten().for_each(&mut convert);
        raw.env.iter_mut().flat_map(|m| m.values_mut()).for_each(&mut convert);
        raw.url.iter_mut().for_each(&mut convert);
        raw.headers.iter_mut().flat_map(|m| m.values_mut()).for_each(&mut convert);
        raw.env_file.iter_mut().for_each(&mut convert);
        if let Some(cwd) = &mut raw.cwd {
            let mut text = cwd.to_string_lossy().into_owned();
            convert(&mut text);
            *cwd = PathBuf::from(text);
            if cwd.is_relative() && !cwd.starts_with("$") {
                *cwd = source_dir.join(&*cwd);
            }
        }
        if let Some(file) = &mut raw.env_file
            && Path::new(file.as_str()).is_relative()
            && !file.starts_with('$')
            && !file.starts_with("~/")
        {
            *file = source_dir.join(&*file).to_string_lossy().into_owned();
        }
        inputs
    }
}

/// Names of environment variables and headers whose values are usually secrets.
fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL", "COOKIE", "SESSION", "PAT"]
        .iter()
        .any(|w| upper.contains(w))
}

/// A value as `mcp get` shows it: references as written, secret-looking literals hidden.
fn shown(name: &str, value: &str) -> String {
    // What is left once the references are taken out (`Bearer ${TOKEN}` leaves `Bearer`).
    let literal = vars::expand(value, &|_| Some(String::new()), Some(&|_| Ok(String::new())))
        .unwrap_or_else(|_| value.to_owned());
    let literal = literal.trim();
    if secret_name(name) && !literal.is_empty() && literal != "Bearer" {
        "<hidden>".to_owned()
    } else {
        value.to_owned()
    }
}
