//! Assembly of a [`Pool`] from built-ins, server listings and a policy.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use mcp_protocol::Tool;
use policy::{Decision, Policy, ServerClaims};
use serde_json::Value;
use thiserror::Error;

use crate::description::{self, DEFAULT_DESCRIPTION_CAP};
use crate::name::{Naming, is_valid_model_name};
use crate::pool::{Diagnostic, DiagnosticKind, HiddenTool, Origin, Pool, Slot};

/// A tool the host implements. Its name and description are trusted and used as given.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltinTool {
    /// Model-visible name; must match `^[A-Za-z0-9_-]{1,64}$`.
    pub name: String,
    /// Description shown to the model, unmarked.
    pub description: String,
    /// Input schema; must be an object schema.
    pub input_schema: Value,
}

/// One server's listing.
///
/// Shared, not copied: the pool keeps these `Arc`s and hands out the listed tools (schemas,
/// annotations, output schemas) by reference, so assembly costs no deep clone.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTools {
    /// The server's name, as configured.
    pub server: Arc<str>,
    /// Its tools, in the order it listed them.
    pub tools: Arc<[Tool]>,
}

impl ServerTools {
    /// A listing from its parts.
    pub fn new(server: impl Into<Arc<str>>, tools: impl Into<Arc<[Tool]>>) -> Self {
        Self { server: server.into(), tools: tools.into() }
    }
}

/// Assembly options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Longest MCP tool description in characters, not counting the source mark.
    pub description_cap: usize,
    /// Turn every diagnostic into an error.
    pub strict: bool,
    /// How MCP tools are named: `mcp__{server}__{tool}` for the agent's model (the default),
    /// `{server}__{tool}` for the gateway's clients.
    pub naming: Naming,
}

impl Default for Options {
    fn default() -> Self {
        Self { description_cap: DEFAULT_DESCRIPTION_CAP, strict: false, naming: Naming::Agent }
    }
}

/// In strict mode: the pool had problems.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("tool pool has {} problem(s): {}", .diagnostics.len(), Joined(.diagnostics))]
pub struct StrictError {
    /// Every problem found, in pool order.
    pub diagnostics: Vec<Diagnostic>,
}

struct Joined<'a>(&'a [Diagnostic]);

impl fmt::Display for Joined<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&d.message)?;
        }
        Ok(())
    }
}

/// Which of two claimants of one name keeps it: a built-in always, else the smaller
/// (server, raw tool), which does not depend on the order servers connected in.
fn beats(a: &Origin<'_>, b: &Origin<'_>) -> bool {
    match (a, b) {
        (Origin::Builtin(_), _) => true,
        (Origin::Mcp { .. }, Origin::Builtin(_)) => false,
        (Origin::Mcp { server: s1, tool: t1 }, Origin::Mcp { server: s2, tool: t2 }) => {
            (*s1, t1.name.as_str()) < (*s2, t2.name.as_str())
        }
    }
}

fn diag(server: Option<&str>, tool: Option<&str>, kind: DiagnosticKind, message: String) -> Diagnostic {
    Diagnostic { server: server.map(str::to_owned), tool: tool.map(str::to_owned), kind, message }
}

/// Why `schema` is not an acceptable input schema: it must be a JSON object whose `type`, if
/// present, is exactly `"object"` (model APIs accept nothing else at the top level).
fn schema_problem(schema: &Value) -> Option<String> {
    match schema {
        // Schemas have a handful of top-level keys: a scan beats hashing.
        Value::Object(map) => match map.iter().find_map(|(k, v)| (k == "type").then_some(v)) {
            None => None,
            Some(Value::String(t)) if t == "object" => None,
            Some(Value::String(t)) => Some(format!("input schema has type {t:?}, not \"object\"")),
            Some(t) => Some(format!("input schema's type is {}, not \"object\"", json_kind(t))),
        },
        Value::Null => Some("input schema is missing".to_owned()),
        // The kind, not the value: a server could send megabytes.
        other => Some(format!("input schema is {}, not a JSON object", json_kind(other))),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Assembles the pool of revision `revision`.
///
/// Built-ins come first in the order given, then servers sorted by name, each server's tools
/// in its listing order. Denied tools are left out (see [`Pool::hidden`]); invalid ones and
/// collision losers are left out with a [`Diagnostic`]. In strict mode any diagnostic is a
/// [`StrictError`] instead; otherwise this never fails.
pub fn assemble(
    builtins: &Arc<[BuiltinTool]>,
    servers: &[ServerTools],
    policy: &Policy,
    options: &Options,
    revision: u64,
) -> Result<Pool, StrictError> {
    let total: usize = builtins.len() + servers.iter().map(|s| s.tools.len()).sum::<usize>();
    let mut diagnostics = Vec::new();
    let mut hidden = Vec::new();
    // Entries are written straight into the pool's layout (no intermediate list: at ten
    // thousand tools, touching fresh memory twice showed in the benchmark); collision losers,
    // which are rare, are taken out afterwards.
    let mut slots: Vec<Slot> = Vec::with_capacity(total);
    let mut descriptions = String::new();

    let mut builtin_names = HashSet::with_capacity(builtins.len());
    for (index, b) in builtins.iter().enumerate() {
        let name = b.name.as_str();
        let problem = |kind, message| diag(None, Some(name), kind, message);
        if !is_valid_model_name(name) {
            diagnostics.push(problem(
                DiagnosticKind::InvalidBuiltinName,
                format!("built-in tool {name:?}: name does not match ^[A-Za-z0-9_-]{{1,64}}$"),
            ));
            continue;
        }
        if !builtin_names.insert(name) {
            diagnostics.push(problem(
                DiagnosticKind::DuplicateToolName,
                format!("built-in tool {name:?} is defined twice; the first one is kept"),
            ));
            continue;
        }
        let verdict = policy.decide(None, name, &ServerClaims::default());
        if verdict.decision == Decision::Deny {
            hidden.push(HiddenTool { server: None, tool: name.to_owned(), rule: verdict.source });
            continue;
        }
        if let Some(why) = schema_problem(&b.input_schema) {
            diagnostics.push(problem(DiagnosticKind::InvalidInputSchema, format!("built-in tool {name:?}: {why}")));
            continue;
        }
        let start = descriptions.len();
        descriptions.push_str(&b.description);
        slots.push(Slot { name: name.into(), server: None, index, description: (start, descriptions.len()), verdict });
    }

    // Sorting makes the pool independent of connection order; a stable sort keeps the first
    // listing of a duplicated server name.
    let mut order: Vec<&ServerTools> = servers.iter().collect();
    order.sort_by(|a, b| a.server.cmp(&b.server));
    let mut kept: Vec<&ServerTools> = Vec::with_capacity(servers.len());
    let mut previous: Option<&str> = None;
    let mut buf = String::new();
    for st in order {
        let server = &*st.server;
        if previous == Some(server) {
            diagnostics.push(diag(
                Some(server),
                None,
                DiagnosticKind::DuplicateServer,
                format!("server {server:?} is listed twice; its second listing is left out"),
            ));
            continue;
        }
        previous = Some(server);
        if server.is_empty() {
            diagnostics.push(diag(
                Some(server),
                None,
                DiagnosticKind::EmptyServerName,
                format!("a server has an empty name; its {} tool(s) are left out", st.tools.len()),
            ));
            continue;
        }
        let server_index = kept.len();
        kept.push(st);
        let rules = policy.for_server(Some(server));
        let mut seen = HashSet::with_capacity(st.tools.len());
        for (index, tool) in st.tools.iter().enumerate() {
            let raw = tool.name.as_str();
            let problem = |kind, message| diag(Some(server), Some(raw), kind, message);
            if raw.is_empty() {
                diagnostics.push(problem(
                    DiagnosticKind::EmptyToolName,
                    format!("server {server:?} lists a tool with an empty name"),
                ));
                continue;
            }
            if !seen.insert(raw) {
                diagnostics.push(problem(
                    DiagnosticKind::DuplicateToolName,
                    format!("server {server:?} lists tool {raw:?} twice; the first one is kept"),
                ));
                continue;
            }
            let annotations = tool.annotations.as_ref();
            let claims = ServerClaims {
                read_only_hint: annotations.and_then(|a| a.read_only_hint),
                destructive_hint: annotations.and_then(|a| a.destructive_hint),
                idempotent_hint: annotations.and_then(|a| a.idempotent_hint),
                open_world_hint: annotations.and_then(|a| a.open_world_hint),
                description: tool.description.as_deref(),
            };
            let verdict = rules.decide(raw, &claims);
            if verdict.decision == Decision::Deny {
                hidden.push(HiddenTool { server: Some(server.to_owned()), tool: raw.to_owned(), rule: verdict.source });
                continue;
            }
            if let Some(why) = schema_problem(&tool.input_schema) {
                diagnostics.push(problem(
                    DiagnosticKind::InvalidInputSchema,
                    format!("tool {raw:?} of server {server:?}: {why}"),
                ));
                continue;
            }
            // Both names are non-empty here, so this always writes a name.
            if !options.naming.name_into(&mut buf, server, raw) {
                continue;
            }
            let start = descriptions.len();
            description::mark_into(&mut descriptions, server, tool.description.as_deref(), options.description_cap);
            slots.push(Slot {
                name: Arc::from(buf.as_str()),
                server: Some(server_index),
                index,
                description: (start, descriptions.len()),
                verdict,
            });
        }
    }

    // Grant each name to the claimant that beats all others. The map from name to its current
    // holder becomes the pool's index once losers are taken out.
    let origin_of = |slot: &Slot| match slot.server {
        None => Origin::Builtin(&builtins[slot.index]),
        Some(s) => Origin::Mcp { server: &kept[s].server, tool: &kept[s].tools[slot.index] },
    };
    let mut by_name: HashMap<Arc<str>, usize> = HashMap::with_capacity(slots.len());
    let mut losers: Vec<usize> = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        match by_name.entry(Arc::clone(&slot.name)) {
            Entry::Vacant(v) => {
                v.insert(i);
            }
            Entry::Occupied(mut o) => {
                let holder = *o.get();
                if beats(&origin_of(slot), &origin_of(&slots[holder])) {
                    o.insert(i);
                    losers.push(holder);
                } else {
                    losers.push(i);
                }
            }
        }
    }
    if !losers.is_empty() {
        // Report in pool order, each loser naming the final holder.
        losers.sort_unstable();
        for &i in &losers {
            let (slot, holder) = (&slots[i], by_name[&slots[i].name]);
            let (loser, won) = (origin_of(slot), origin_of(&slots[holder]));
            diagnostics.push(diag(
                loser.server(),
                Some(loser.tool()),
                DiagnosticKind::NameCollision,
                format!("{loser} would be named {:?} like {won}, which keeps the name", slot.name),
            ));
        }
        // Their descriptions stay in the arena, unreferenced: cheaper than rebuilding it.
        let mut lost = vec![false; slots.len()];
        losers.iter().for_each(|&i| lost[i] = true);
        let mut position = Vec::with_capacity(slots.len());
        let mut next = 0;
        for &l in &lost {
            position.push(next);
            next += usize::from(!l);
        }
        let mut i = 0;
        slots.retain(|_| {
            i += 1;
            !lost[i - 1]
        });
        by_name.values_mut().for_each(|v| *v = position[*v]);
    }

    if options.strict && !diagnostics.is_empty() {
        return Err(StrictError { diagnostics });
    }
    Ok(Pool {
        revision,
        builtins: Arc::clone(builtins),
        servers: kept.into_iter().cloned().collect(),
        slots,
        descriptions: Arc::new(descriptions),
        diagnostics,
        hidden,
        by_name,
        naming: options.naming,
    })
}
