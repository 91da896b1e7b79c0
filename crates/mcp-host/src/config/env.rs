//! What a server's entry resolves to from its surroundings: variable references expanded
//! (`vars`), VS Code inputs asked through the caller's port, and the variables of `env_file`
//! and `env_vars` added to its environment. An env file inside the workspace is refused like a
//! configuration there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::location::{Origin, check_outside_workspace, read_text};
use super::raw::RawServer;
use super::{ConfigError, Context, vars};

impl RawServer {
    /// Expands the references of the fields that may hold them, then adds `env_file`'s and
    /// `env_vars`' variables to `env` (what `env` says wins). Errors are (field, message).
    pub(crate) fn resolve(
        &mut self,
        context: &Context<'_>,
        input: Option<&vars::AskInput<'_>>,
        base: &Path,
    ) -> Result<(), (String, String)> {
        let placeholder = |_: &str| Some("x".to_owned());
        let env: &dyn Fn(&str) -> Option<String> = if context.check_only { &placeholder } else { &*context.env };
        let checked_input = |_: &str| Ok("x".to_owned());
        let input = if context.check_only && input.is_some() { Some(&checked_input as _) } else { input };
        let expand = |field: &str, text: &mut String| {
            *text = vars::expand(text, env, input).map_err(|m| (field.to_owned(), m))?;
            Ok::<(), (String, String)>(())
        };
        if let Some(command) = &mut self.command {
            expand("command", command)?;
        }
        for arg in self.args.iter_mut().flatten() {
            expand("args", arg)?;
        }
        for (k, v) in self.env.iter_mut().flatten() {
            expand(&format!("env.{k}"), v)?;
        }
        if let Some(cwd) = &mut self.cwd {
            let mut text = cwd.to_string_lossy().into_owned();
            expand("cwd", &mut text)?;
            *cwd = PathBuf::from(text);
        }
        if let Some(url) = &mut self.url {
            expand("url", url)?;
        }
        for (k, v) in self.headers.iter_mut().flatten() {
            expand(&format!("headers.{k}"), v)?;
        }
        if let Some(file) = &mut self.env_file {
            expand("env_file", file)?;
        }
        if context.check_only {
            return Ok(());
        }
        if let (Some(file), Some(_)) = (&self.env_file, &self.command) {
            let path = match file.strip_prefix("~/") {
                Some(rest) => context.home.as_ref().map_or_else(|| PathBuf::from(file), |h| h.join(rest)),
                None => base.join(file),
            };
            let vars = env_file(&path, context.workspace.as_deref()).map_err(|m| ("env_file".to_owned(), m))?;
            let env = self.env.get_or_insert_with(BTreeMap::new);
            for (k, v) in vars {
                env.entry(k).or_insert(v);
            }
        }
        if let (Some(names), Some(_)) = (&self.env_vars, &self.command) {
            for name in names {
                if let Some(value) = (context.env)(name) {
                    self.env.get_or_insert_with(BTreeMap::new).entry(name.clone()).or_insert(value);
                }
            }
        }
        Ok(())
    }
}

/// The variables of an env file: `NAME=value` lines, `export ` allowed, `#` comments, values
/// optionally in single or double quotes. A file inside `workspace` is refused like a
/// configuration there: an agent could choose what the server's environment holds.
fn env_file(path: &Path, workspace: Option<&Path>) -> Result<BTreeMap<String, String>, String> {
    let message = |e: ConfigError| match e {
        ConfigError::InWorkspace { path: shown, .. } => format!(
            "{} is inside the current directory, which an agent working here can write to; keep it \
             elsewhere, or pass --allow-workspace-config if you trust this directory",
            shown.display()
        ),
        ConfigError::NotFound { .. } => format!("{} does not exist", path.display()),
        other => other.to_string(),
    };
    if let Some(workspace) = workspace {
        // The configuration's own rule: an agent could choose what the server's environment holds.
        check_outside_workspace(path, workspace, Origin::Flag).map_err(message)?;
    }
    let text = read_text(path, Origin::Flag).map_err(message)?;
    let mut vars = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((name, value)) = line.split_once('=') else {
            return Err(format!("{} line {}: expected NAME=value", path.display(), n + 1));
        };
        let value = value.trim();
        let value = match (value.chars().next(), value.chars().last()) {
            (Some(q @ ('"' | '\'')), Some(end)) if value.len() >= 2 && end == q => &value[1..value.len() - 1],
            _ => value.split(" #").next().unwrap_or(value).trim_end(),
        };
        vars.insert(name.trim().to_owned(), value.to_owned());
    }
    Ok(vars)
}
