//! Edits of our own TOML configuration (`mcp add`, `remove`, `enable`, `disable`, `import`),
//! format-preserving: only the edited server's table changes, and comments, order and
//! formatting elsewhere stay byte for byte (`toml_edit`; CRLF line endings and a byte order
//! mark are kept too). The file is written atomically (`private_files::write`), created 0600
//! since a configuration holds headers and environment values (an existing file keeps its
//! mode), never inside the workspace, the same rule as for reading it
//! ([`ConfigPath::edit_target`](super::ConfigPath::edit_target)). Edits are made one at a time:
//! an editor holds a lock on the file's directory from reading to writing, so two `mcp add`s
//! at once both land. Other hosts' files, and our JSON, are never rewritten.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml_edit::{Array, DocumentMut, InlineTable, Item, Table};

use super::error::EditError;
use super::foreign::{self, Host};
use super::raw::{RawOAuth, RawSandbox, RawServer};
use super::validate::parse_with;
use super::{ConfigPath, Context};

/// The configuration file being edited.
#[derive(Debug)]
pub struct Editor {
    path: PathBuf,
    doc: DocumentMut,
    before: String,
    /// The file was a valid configuration before the edit: the edit must keep it one.
    valid_before: bool,
    /// How the file ends its lines and begins, kept by the edit.
    layout: Layout,
    /// The file's mode before the edit (none when it did not exist).
    mode: Option<u32>,
    /// The lock on the file's directory (`flock`), held until the editor is dropped.
    _lock: std::fs::File,
}

/// How a file ends its lines and whether it begins with a byte order mark: `toml_edit` writes
/// neither back.
#[derive(Debug, Clone, Copy, Default)]
struct Layout {
    crlf: bool,
    bom: bool,
}

impl Layout {
    fn of(text: &str) -> Self {
        let crlf = text.find('\n').is_some_and(|at| text[..at].ends_with('\r'));
        Self { crlf, bom: text.starts_with('\u{feff}') }
    }

    fn apply(self, text: String) -> String {
        let mut text = if self.crlf { text.replace("\r\n", "\n").replace('\n', "\r\n") } else { text };
        if self.bom && !text.starts_with('\u{feff}') {
            text.insert(0, '\u{feff}');
        }
        text
    }
}

/// Locks `path`'s directory (created 0700 if missing) for one edit at a time.
fn lock_directory(path: &Path) -> Result<std::fs::File, EditError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let failed = |source| EditError::Write { path: path.to_path_buf(), source };
    private_files::create_dir(dir).map_err(failed)?;
    let handle = std::fs::File::open(dir).map_err(failed)?;
    handle.lock().map_err(failed)?;
    Ok(handle)
}

/// What the file already has under a name, beside a server to be put there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Existing {
    /// No server of that name.
    Absent,
    /// One with the same settings, however the table is written.
    Same,
    /// One with other settings.
    Different,
}

impl Editor {
    /// Opens the file edits go to at `at` ([`ConfigPath::edit_target`]).
    pub fn for_config(at: &ConfigPath) -> Result<Self, EditError> {
        Self::open(&at.edit_target()?)
    }

    /// Opens our TOML configuration at `path` (an empty one when the file does not exist yet).
    pub fn open(path: &Path) -> Result<Self, EditError> {
        super::location::check_regular(path)?;
        let lock = lock_directory(path)?;
        // Bounded, and never a device or a pipe (whose place a save would take).
        let before = super::location::read_text_if_any(path)?.unwrap_or_default();
        let mode = std::fs::metadata(path).ok().map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()));
        let host = foreign::read(path, &before, foreign::ReadContext::default()).map(|raw| raw.host);
        match host {
            Ok(Host::Ours) | Err(_) => {}
            Ok(other) => {
                return Err(EditError::NotOurs {
                    path: path.to_path_buf(),
                    message: format!(
                        "{} is a {} file, which mcp-harness never rewrites; edits go to an mcp-harness TOML \
                         configuration (`--config other.toml`, or leave --config out for your configuration \
                         directory), and `mcp-harness mcp import` copies servers from it",
                        path.display(),
                        other.label()
                    ),
                });
            }
        }
        let doc: DocumentMut =
            before.parse().map_err(|source| EditError::NotToml { path: path.to_path_buf(), source })?;
        let valid_before = parse_with(path, &before, &Context::check_only()).is_ok();
        let layout = Layout::of(&before);
        Ok(Self { path: path.to_path_buf(), doc, before, valid_before, layout, mode, _lock: lock })
    }

    /// The file edited.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn servers(&self) -> Option<&Table> {
        self.doc.get("servers").and_then(Item::as_table)
    }

    fn servers_mut(&mut self) -> Result<&mut Table, EditError> {
        let item = self.doc.entry("servers").or_insert_with(|| {
            let mut table = Table::new();
            // `[servers.NAME]` headers only, no empty `[servers]`.
            table.set_implicit(true);
            Item::Table(table)
        });
        item.as_table_mut().ok_or_else(|| EditError::NotATable { key: "servers".to_owned() })
    }

    /// Whether server `name` is configured.
    pub fn contains(&self, name: &str) -> bool {
        self.servers().is_some_and(|s| s.contains_key(name))
    }

    /// What the file has under `name`, beside `server` (compared as values, however either
    /// table is written).
    pub fn existing(&self, name: &str, server: &RawServer) -> Existing {
        match self.servers().and_then(|s| s.get(name)).map(semantic) {
            None => Existing::Absent,
            Some(old) if old.is_some() && old == semantic(&Item::Table(server_table(server))) => Existing::Same,
            Some(_) => Existing::Different,
        }
    }

    /// Adds server `name`, or replaces it where it is (its comments above it kept).
    pub fn put(&mut self, name: &str, server: &RawServer) -> Result<(), EditError> {
        let mut table = server_table(server);
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
    pub fn remove(&mut self, name: &str) -> Result<bool, EditError> {
        Ok(self.servers_mut()?.remove(name).is_some())
    }

    /// Sets `enabled` of server `name`; false when it already was so.
    pub fn set_enabled(&mut self, name: &str, enabled: bool) -> Result<bool, EditError> {
        let servers = self.servers_mut()?;
        let Some(item) = servers.get_mut(name) else { return Err(EditError::NoServer { name: name.to_owned() }) };
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
            _ => return Err(EditError::NotATable { key: format!("servers.{name}") }),
        }
        Ok(true)
    }

    /// The new text, checked: it must still be a configuration (if it was one) and must not
    /// hold a server that fails its checks.
    pub fn text(&self) -> Result<String, EditError> {
        let text = self.layout.apply(self.doc.to_string());
        if self.valid_before
            && let Err(e) = parse_with(&self.path, &text, &Context::check_only())
        {
            return Err(EditError::WouldBreak(e));
        }
        Ok(text)
    }

    /// Writes the edit (nothing when the text did not change); true when it wrote.
    pub fn save(self) -> Result<bool, EditError> {
        let text = self.text()?;
        if text == self.before && self.path.exists() {
            return Ok(false);
        }
        super::location::check_regular(&self.path)?;
        let failed = |source| EditError::Write { path: self.path.clone(), source };
        private_files::write(&self.path, text.as_bytes()).map_err(failed)?;
        // Written 0600; a file that had another mode (a configuration shared with a service's
        // account) keeps it.
        if let Some(mode) = self.mode.map(|m| m & 0o7777).filter(|m| *m != 0o600) {
            let permissions = std::os::unix::fs::PermissionsExt::from_mode(mode);
            std::fs::set_permissions(&self.path, permissions).map_err(failed)?;
        }
        Ok(true)
    }
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
    if let Some(mode) = &raw.code_mode {
        put("code_mode", mode.as_str().into());
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
