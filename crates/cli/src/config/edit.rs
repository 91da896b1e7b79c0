//! Edits of our own TOML configuration (`mcp add`, `remove`, `enable`, `disable`, `import`),
//! format-preserving: only the edited server's table changes, and comments, order and
//! formatting elsewhere stay byte for byte (`toml_edit`). The file is written atomically (a
//! temporary file beside it, then a rename) and never inside the workspace, the same rule as
//! for reading it. Other hosts' files, and our JSON, are never rewritten.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table};

use super::{Context, Host, RawOAuth, RawSandbox, RawServer, foreign, in_workspace, parse_with, resolve_existing_part};

/// The configuration file being edited.
pub(crate) struct Editor {
    path: PathBuf,
    doc: DocumentMut,
    before: String,
    /// The file was a valid configuration before the edit: the edit must keep it one.
    valid_before: bool,
}

/// `path` as it will be written, refused when an agent working in `workspace` could have
/// written it (the file, or a symlink or directory on the way).
pub(crate) fn check_target(path: &Path, workspace: &Path) -> anyhow::Result<()> {
    let workspace = workspace.canonicalize().context("cannot resolve the current directory")?;
    // The directories resolved, the file itself as named (a link is judged where it is, and
    // where it points).
    let as_given = match (path.parent().filter(|p| !p.as_os_str().is_empty()), path.file_name()) {
        (Some(dir), Some(name)) => resolve_existing_part(dir)?.join(name),
        (None, Some(name)) => resolve_existing_part(Path::new("."))?.join(name),
        _ => resolve_existing_part(path)?,
    };
    // A dangling link has no target yet: its target is checked by the caller (`follow_links`).
    let resolved = resolve_existing_part(path).unwrap_or_else(|_| as_given.clone());
    if let Some(shown) = in_workspace(&as_given, &resolved, &workspace) {
        bail!(
            "refusing to write the configuration {}: it is inside the current directory {}, which an agent \
             working here can write to, and a configuration decides which commands this host runs. Keep it in \
             your configuration directory, or pass --allow-workspace-config if you trust this directory.",
            shown.display(),
            workspace.display()
        );
    }
    Ok(())
}

/// Longest chain of symlinks followed (the kernel's own limit is 40).
const MAX_LINKS: usize = 40;

/// The file `path` names once its symlinks are followed, whether it exists or not (a link to a
/// file not created yet leads to where it will be).
pub(crate) fn follow_links(path: &Path) -> anyhow::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&current)
                    .with_context(|| format!("cannot read the symlink {}", current.display()))?;
                current = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(current),
        }
    }
    bail!("{}: too many levels of symbolic links", path.display())
}

impl Editor {
    /// Opens our TOML configuration at `path` (an empty one when the file does not exist yet).
    pub(crate) fn open(path: &Path) -> anyhow::Result<Self> {
        let before = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let host = foreign::read(path, &before, foreign::ReadContext::default()).map(|raw| raw.host);
        match host {
            Ok(Host::Ours) | Err(_) => {}
            Ok(other) => bail!(
                "{} is a {} file, which mcp-harness never rewrites; edits go to an mcp-harness TOML \
                 configuration (`--config other.toml`, or leave --config out for your configuration directory), \
                 and `mcp-harness mcp import` copies servers from it",
                path.display(),
                other.label()
            ),
        }
        let doc: DocumentMut = before.parse().with_context(|| format!("{} is not valid TOML", path.display()))?;
        let valid_before = parse_with(path, &before, &Context::check_only()).is_ok();
        Ok(Self { path: path.to_path_buf(), doc, before, valid_before })
    }

    /// The file edited.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn servers(&self) -> Option<&Table> {
        self.doc.get("servers").and_then(Item::as_table)
    }

    fn servers_mut(&mut self) -> anyhow::Result<&mut Table> {
        let item = self.doc.entry("servers").or_insert_with(|| {
            let mut table = Table::new();
            // `[servers.NAME]` headers only, no empty `[servers]`.
            table.set_implicit(true);
            Item::Table(table)
        });
        item.as_table_mut().context("`servers` is not a table")
    }

    /// Whether server `name` is configured.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.servers().is_some_and(|s| s.contains_key(name))
    }

    /// Server `name`'s settings as values (for telling an unchanged import from a change,
    /// however the table is written).
    pub(crate) fn rendered(&self, name: &str) -> Option<toml::Value> {
        semantic(self.servers()?.get(name)?)
    }

    /// Adds server `name`, or replaces it where it is (its comments above it kept).
    pub(crate) fn put(&mut self, name: &str, mut table: Table) -> anyhow::Result<()> {
        // In a file of comments only (a header written before any server), toml_edit keeps them
        // as the document's trailing text, after every table: they become this table's prefix
        // so that they stay on top.
        let no_tables = self.doc.as_table().iter().all(|(_, item)| !item.is_table() && !item.is_array_of_tables());
        if no_tables {
            let trailing = self.doc.trailing().as_str().unwrap_or_default().to_owned();
            if !trailing.trim().is_empty() {
                let separator = if trailing.ends_with("\n\n") { "" } else { "\n" };
                table.decor_mut().set_prefix(format!("{trailing}{separator}"));
                self.doc.set_trailing("");
            }
        }
        let servers = self.servers_mut()?;
        if let Some(old) = servers.get(name).and_then(Item::as_table) {
            if let Some(position) = old.position() {
                table.set_position(Some(position));
            }
            *table.decor_mut() = old.decor().clone();
        }
        servers.insert(name, Item::Table(table));
        Ok(())
    }

    /// Removes server `name`; false when there was none.
    pub(crate) fn remove(&mut self, name: &str) -> anyhow::Result<bool> {
        Ok(self.servers_mut()?.remove(name).is_some())
    }

    /// Sets `enabled` of server `name`; false when it already was so.
    pub(crate) fn set_enabled(&mut self, name: &str, enabled: bool) -> anyhow::Result<bool> {
        let servers = self.servers_mut()?;
        let Some(item) = servers.get_mut(name) else { bail!("no server named {name:?}") };
        let current = item.get("enabled").and_then(Item::as_bool).unwrap_or(true);
        if current == enabled {
            return Ok(false);
        }
        match item {
            Item::Table(table) => match table.get_mut("enabled").and_then(Item::as_value_mut) {
                // The value alone, its comments and spacing kept.
                Some(value) => {
                    let decor = value.decor().clone();
                    *value = enabled.into();
                    *value.decor_mut() = decor;
                }
                None => {
                    table.insert("enabled", toml_edit::value(enabled));
                }
            },
            Item::Value(toml_edit::Value::InlineTable(table)) => {
                table.insert("enabled", enabled.into());
            }
            _ => bail!("servers.{name} is not a table"),
        }
        Ok(true)
    }

    /// The new text, checked: it must still be a configuration (if it was one) and must not
    /// hold a server that fails its checks.
    pub(crate) fn text(&self) -> anyhow::Result<String> {
        let text = self.doc.to_string();
        if self.valid_before
            && let Err(e) = parse_with(&self.path, &text, &Context::check_only())
        {
            bail!("the edit was not made, because it would make the configuration invalid: {e}");
        }
        Ok(text)
    }

    /// Writes the edit (nothing when the text did not change); true when it wrote.
    pub(crate) fn save(self) -> anyhow::Result<bool> {
        let text = self.text()?;
        if text == self.before && self.path.exists() {
            return Ok(false);
        }
        write_atomically(&self.path, &text)?;
        Ok(true)
    }
}

/// A new table as [`Editor::rendered`] shows one.
pub(crate) fn rendered_table(table: &Table) -> Option<toml::Value> {
    semantic(&Item::Table(table.clone()))
}

/// The item's values, whatever its formatting.
fn semantic(item: &Item) -> Option<toml::Value> {
    let mut doc = DocumentMut::new();
    let mut item = item.clone();
    if let Item::Table(t) = &mut item {
        t.decor_mut().clear();
        t.set_position(Some(0));
    }
    doc.insert("s", item);
    toml::from_str::<toml::Table>(&doc.to_string()).ok()?.remove("s")
}

/// Writes `text` to `path` through a temporary file in the same directory and a rename, so a
/// reader never sees half a file. A new file is private (0600, in a 0700 directory it creates).
pub(crate) fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0o600);
        options.mode(mode);
    }
    let written = (|| {
        let mut file = options.open(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(())
}

fn strings(items: &[String]) -> Array {
    items.iter().map(String::as_str).collect()
}

fn string_table(map: &BTreeMap<String, String>) -> InlineTable {
    map.iter().map(|(k, v)| (k.as_str(), toml_edit::Value::from(v.as_str()))).collect()
}

fn seconds(d: Duration) -> toml_edit::Value {
    if d.subsec_nanos() == 0 {
        i64::try_from(d.as_secs()).map_or_else(|_| d.as_secs_f64().into(), Into::into)
    } else {
        d.as_secs_f64().into()
    }
}

/// Server `raw` as a `[servers.NAME]` table, keys in a fixed order.
pub(crate) fn server_table(raw: &RawServer) -> Table {
    let mut t = Table::new();
    let mut put = |key: &str, value: toml_edit::Value| {
        t.insert(key, Item::Value(value));
    };
    if let Some(kind) = &raw.kind {
        put("type", kind.as_str().into());
    }
    if let Some(command) = &raw.command {
        put("command", command.as_str().into());
    }
    if let Some(args) = &raw.args {
        put("args", strings(args).into());
    }
    if let Some(env) = &raw.env {
        put("env", string_table(env).into());
    }
    if let Some(names) = &raw.env_vars {
        put("env_vars", strings(names).into());
    }
    if let Some(file) = &raw.env_file {
        put("env_file", file.as_str().into());
    }
    if let Some(cwd) = &raw.cwd {
        put("cwd", cwd.to_string_lossy().as_ref().into());
    }
    if let Some(url) = &raw.url {
        put("url", url.as_str().into());
    }
    if let Some(headers) = &raw.headers {
        put("headers", string_table(headers).into());
    }
    if let Some(var) = &raw.bearer_token_env_var {
        put("bearer_token_env_var", var.as_str().into());
    }
    if let Some(enabled) = raw.enabled {
        put("enabled", enabled.into());
    }
    if let Some(required) = raw.required {
        put("required", required.into());
    }
    if let Some(s) = &raw.startup_timeout_s {
        put("startup_timeout_s", seconds(s.0));
    }
    if let Some(s) = &raw.tool_timeout_s {
        put("tool_timeout_s", seconds(s.0));
    }
    if let Some(s) = &raw.max_tool_time_s {
        put("max_tool_time_s", seconds(s.0));
    }
    if let Some(tools) = &raw.enabled_tools {
        put("enabled_tools", strings(tools).into());
    }
    if let Some(tools) = &raw.disabled_tools {
        put("disabled_tools", strings(tools).into());
    }
    if let Some(instructions) = raw.instructions {
        put("instructions", instructions.into());
    }
    if let Some(elicitation) = raw.elicitation {
        put("elicitation", elicitation.into());
    }
    if let Some(sandbox) = &raw.sandbox {
        put("sandbox", sandbox_value(sandbox));
    }
    if let Some(required) = raw.sandbox_required {
        put("sandbox_required", required.into());
    }
    if let Some(oauth) = &raw.oauth {
        put("oauth", oauth_value(oauth).into());
    }
    if let Some(mode) = &raw.tool_search {
        put("tool_search", mode.as_str().into());
    }
    if let Some(always) = raw.always_load {
        put("always_load", always.into());
    }
    let bytes = |n: usize| toml_edit::Value::from(i64::try_from(n).unwrap_or(i64::MAX));
    if let Some(budget) = raw.tool_budget {
        put("tool_budget", bytes(budget));
    }
    if let Some(budget) = raw.server_budget {
        put("server_budget", bytes(budget));
    }
    t
}

fn sandbox_value(sandbox: &RawSandbox) -> toml_edit::Value {
    let table = match sandbox {
        RawSandbox::Standard => return "standard".into(),
        RawSandbox::Off => return "off".into(),
        RawSandbox::Table(table) => table,
    };
    let mut out = InlineTable::new();
    for (key, paths) in [("read", &table.read), ("write", &table.write)] {
        if let Some(paths) = paths {
            out.insert(key, strings(paths).into());
        }
    }
    if let Some(network) = table.network {
        out.insert("network", network.into());
    }
    for (key, limit) in [
        ("memory_mib", table.memory_mib),
        ("processes", table.processes),
        ("open_files", table.open_files),
        ("cpu_seconds", table.cpu_seconds),
    ] {
        if let Some(limit) = limit.and_then(|l| i64::try_from(l).ok()) {
            out.insert(key, limit.into());
        }
    }
    out.into()
}

fn oauth_value(oauth: &RawOAuth) -> InlineTable {
    let mut out = InlineTable::new();
    if let Some(enabled) = oauth.enabled {
        out.insert("enabled", enabled.into());
    }
    for (key, value) in [
        ("client_id", &oauth.client_id),
        ("client_secret_env_var", &oauth.client_secret_env_var),
        ("client_metadata_url", &oauth.client_metadata_url),
        ("grant", &oauth.grant),
        ("issuer", &oauth.issuer),
    ] {
        if let Some(value) = value {
            out.insert(key, value.as_str().into());
        }
    }
    if let Some(file) = &oauth.private_key_file {
        out.insert("private_key_file", file.to_string_lossy().as_ref().into());
    }
    out
}

/// Server `raw` (read from a file in `source_dir`) made ready for our TOML: VS Code inputs
/// become environment variables (returned: (input id, variable)), and relative paths become
/// absolute (they were relative to the other host's file).
pub(crate) fn for_import(raw: &mut RawServer, source_dir: &Path) -> Vec<(String, String)> {
    let mut inputs = Vec::new();
    let mut convert = |text: &mut String| {
        for id in super::vars::inputs(text) {
            let var = super::vars::input_variable(&id);
            if !inputs.iter().any(|(i, _)| *i == id) {
                inputs.push((id, var));
            }
        }
        *text = super::vars::inputs_to_variables(text);
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
    let literal = super::vars::expand(value, &|_| Some(String::new()), Some(&|_| Ok(String::new())))
        .unwrap_or_else(|_| value.to_owned());
    let literal = literal.trim();
    if secret_name(name) && !literal.is_empty() && literal != "Bearer" {
        "<hidden>".to_owned()
    } else {
        value.to_owned()
    }
}

/// How a server is reached, for listings: `stdio`, `http`, `sse` or `ws`.
pub(crate) fn transport(raw: &RawServer) -> &'static str {
    match (&raw.command, raw.url.as_deref(), raw.kind.as_deref()) {
        (Some(_), _, _) => "stdio",
        (None, Some(url), _) if url.starts_with("ws://") || url.starts_with("wss://") => "ws",
        (None, _, Some("sse")) => "sse",
        _ => "http",
    }
}

/// One line saying what runs or is reached.
pub(crate) fn target(raw: &RawServer) -> String {
    match (&raw.command, &raw.url) {
        (Some(command), _) => std::iter::once(command.as_str())
            .chain(raw.args.iter().flatten().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        (None, Some(url)) => url.clone(),
        (None, None) => String::new(),
    }
}

/// Server `raw` as `mcp get --json` and `mcp list --json` show it: the configuration as
/// written (references not expanded), with secret-looking literal values hidden.
pub(crate) fn describe(name: &str, raw: &RawServer) -> Value {
    let map = |m: &Option<BTreeMap<String, String>>| {
        m.as_ref()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), Value::String(shown(k, v)))).collect::<serde_json::Map<_, _>>())
    };
    let mut value = json!({
        "name": name,
        "transport": transport(raw),
        "enabled": raw.enabled.unwrap_or(true),
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

/// Whether server `raw` is enabled.
pub(crate) fn enabled(raw: &RawServer) -> bool {
    raw.enabled.unwrap_or(true)
}
