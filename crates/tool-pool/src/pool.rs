//! The assembled pool: an immutable snapshot of what the model may call, and why.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use mcp_protocol::Tool;
use policy::{Decision, DecisionSource, Verdict};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::assemble::{BuiltinTool, ServerTools};
use crate::name::Naming;

/// Where a pool entry comes from, borrowed from the assembly input the pool shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Origin<'a> {
    /// A tool the host implements.
    Builtin(&'a BuiltinTool),
    /// A tool of an MCP server.
    Mcp {
        /// The server's name, as configured.
        server: &'a str,
        /// The tool as the server listed it; calls go out under its raw `name`.
        tool: &'a Tool,
    },
}

impl Origin<'_> {
    /// The server, or `None` for a built-in.
    pub fn server(&self) -> Option<&str> {
        match self {
            Self::Builtin(_) => None,
            Self::Mcp { server, .. } => Some(server),
        }
    }

    /// The tool's raw name.
    pub fn tool(&self) -> &str {
        match self {
            Self::Builtin(b) => &b.name,
            Self::Mcp { tool, .. } => &tool.name,
        }
    }
}

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin(b) => write!(f, "built-in tool {:?}", b.name),
            Self::Mcp { server, tool } => write!(f, "tool {:?} of server {server:?}", tool.name),
        }
    }
}

/// One entry's data inside a [`Pool`]; what it points at lives in the pool's shared inputs.
///
/// Indices rather than per-entry `Arc`s or clones: a pool of ten thousand tools is assembled
/// often (on every `list_changed`), and per-entry reference counting or copying showed up as a
/// large part of its cost.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub(crate) name: Arc<str>,
    /// Index into `Pool::servers`, `None` for a built-in.
    pub(crate) server: Option<usize>,
    /// Index into that server's tools, or into `Pool::builtins`.
    pub(crate) index: usize,
    /// Byte range of the description in `Pool::descriptions`.
    pub(crate) description: (usize, usize),
    pub(crate) verdict: Verdict,
}

/// One tool the model may call: a view into a [`Pool`].
///
/// Serializes as `{name, server, tool, decision, rule, description, input_schema}`, `server`
/// being `null` for built-ins and `rule` the decision's source as text.
#[derive(Clone, Copy)]
pub struct PoolEntry<'a> {
    pool: &'a Pool,
    slot: &'a Slot,
}

impl<'a> PoolEntry<'a> {
    /// Model-visible name, matching `^[A-Za-z0-9_-]{1,64}$` (under [`Naming::Transparent`],
    /// an MCP tool's own name, whatever it is).
    pub fn name(&self) -> &'a str {
        &self.slot.name
    }

    /// The model-visible name as the pool holds it, to share rather than copy.
    pub(crate) fn shared_name(&self) -> &'a Arc<str> {
        &self.slot.name
    }

    /// Where calls go, with the full tool as listed (annotations, output schema, ...).
    pub fn origin(&self) -> Origin<'a> {
        // In bounds: the indices were taken from these very (immutable) inputs at assembly.
        match self.slot.server {
            None => Origin::Builtin(&self.pool.builtins[self.slot.index]),
            Some(s) => {
                let st = &self.pool.servers[s];
                Origin::Mcp { server: &st.server, tool: &st.tools[self.slot.index] }
            }
        }
    }

    /// The server, or `None` for a built-in.
    pub fn server(&self) -> Option<&'a str> {
        self.slot.server.map(|s| &*self.pool.servers[s].server)
    }

    /// The raw tool name, under which calls go out.
    pub fn tool(&self) -> &'a str {
        match self.origin() {
            Origin::Builtin(b) => &b.name,
            Origin::Mcp { tool, .. } => &tool.name,
        }
    }

    /// Description as shown to the model (sanitized, capped and marked for MCP tools).
    pub fn description(&self) -> &'a str {
        let (start, end) = self.slot.description;
        &self.pool.descriptions[start..end]
    }

    /// The pool's description arena and this entry's byte range in it, to share rather than
    /// copy.
    pub(crate) fn shared_description(&self) -> (&'a Arc<String>, (usize, usize)) {
        (&self.pool.descriptions, self.slot.description)
    }

    /// The input schema, an object schema.
    pub fn input_schema(&self) -> &'a Value {
        match self.origin() {
            Origin::Builtin(b) => &b.input_schema,
            Origin::Mcp { tool, .. } => &tool.input_schema,
        }
    }

    /// The policy's verdict (never deny: denied tools are not in the pool).
    pub fn verdict(&self) -> &'a Verdict {
        &self.slot.verdict
    }

    /// Shorthand for `self.verdict().decision`.
    pub fn decision(&self) -> Decision {
        self.slot.verdict.decision
    }
}

impl fmt::Debug for PoolEntry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolEntry")
            .field("name", &self.name())
            .field("origin", &self.origin())
            .field("description", &self.description())
            .field("verdict", self.verdict())
            .finish()
    }
}

impl PartialEq for PoolEntry<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
            && self.origin() == other.origin()
            && self.description() == other.description()
            && self.verdict() == other.verdict()
    }
}

impl Serialize for PoolEntry<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("PoolEntry", 7)?;
        s.serialize_field("name", self.name())?;
        s.serialize_field("server", &self.server())?;
        s.serialize_field("tool", self.tool())?;
        s.serialize_field("decision", &self.decision())?;
        s.serialize_field("rule", &self.verdict().source)?;
        s.serialize_field("description", self.description())?;
        s.serialize_field("input_schema", self.input_schema())?;
        s.end()
    }
}

/// A tool left out because the policy denies it; the model never sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HiddenTool {
    /// Its server, `None` for a built-in.
    pub server: Option<String>,
    /// Its raw name.
    pub tool: String,
    /// The rule that denied it.
    pub rule: DecisionSource,
}

/// What kind of problem a [`Diagnostic`] reports. Every kind leaves something out of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticKind {
    /// The server name is empty; all its tools are left out.
    EmptyServerName,
    /// The server name was given twice; the second listing is left out.
    DuplicateServer,
    /// The tool name is empty.
    EmptyToolName,
    /// The tool name was listed twice by one server (or twice among built-ins); the second is
    /// left out.
    DuplicateToolName,
    /// A built-in's name is not a valid model name (the host's bug).
    InvalidBuiltinName,
    /// The input schema is not an object schema.
    InvalidInputSchema,
    /// Two tools got the same model name; the other one keeps it.
    NameCollision,
}

/// Something left out of the pool, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The server concerned, if any.
    pub server: Option<String>,
    /// The tool concerned (raw name), if any.
    pub tool: Option<String>,
    /// What went wrong.
    pub kind: DiagnosticKind,
    /// A sentence for humans, naming every origin involved.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The tools offered to the model at one revision. Immutable once assembled; cheap to share
/// (it holds the assembly inputs by `Arc`).
///
/// Serializes as `{revision, tools, diagnostics, hidden}`.
#[derive(Debug, Clone, Default)]
pub struct Pool {
    pub(crate) revision: u64,
    pub(crate) builtins: Arc<[BuiltinTool]>,
    /// The servers entries point into, sorted by name.
    pub(crate) servers: Vec<ServerTools>,
    pub(crate) slots: Vec<Slot>,
    /// Every entry's description, back to back: one allocation instead of one per entry,
    /// shared with the pool's clones and its search index rather than copied.
    pub(crate) descriptions: Arc<String>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) hidden: Vec<HiddenTool>,
    pub(crate) by_name: HashMap<Arc<str>, usize>,
    /// How its MCP tools are named.
    pub(crate) naming: Naming,
}

impl Pool {
    /// The revision given at assembly.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The same entries under another revision number: for a host whose view of the pool
    /// changed without any listing changing (the model loaded tools through search), so that
    /// what the model was shown is numbered apart. Clones the entries' `Arc`s, not the tools.
    pub fn renumbered(&self, revision: u64) -> Pool {
        Pool { revision, ..self.clone() }
    }

    /// The entry the model knows as `name`.
    pub fn get(&self, name: &str) -> Option<PoolEntry<'_>> {
        let slot = self.slots.get(*self.by_name.get(name)?)?;
        Some(PoolEntry { pool: self, slot })
    }

    /// All entries: built-ins first, then servers sorted by name, each in its listing order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { pool: self, slots: self.slots.iter() }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the pool offers nothing.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// What was left out, and why (not counting tools hidden by policy).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Tools the policy denies, left out without a diagnostic.
    pub fn hidden(&self) -> &[HiddenTool] {
        &self.hidden
    }

    /// How the pool names MCP tools: the name a [`HiddenTool`] would have had is
    /// `pool.naming().name(server, tool)`.
    pub fn naming(&self) -> Naming {
        self.naming
    }
}

/// Iterator over a pool's entries, in pool order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    pool: &'a Pool,
    slots: std::slice::Iter<'a, Slot>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = PoolEntry<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        self.slots.next().map(|slot| PoolEntry { pool: self.pool, slot })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.slots.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Pool {
    type Item = PoolEntry<'a>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl Serialize for Pool {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Tools<'a>(&'a Pool);
        impl Serialize for Tools<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.0.iter())
            }
        }
        let mut s = serializer.serialize_struct("Pool", 4)?;
        s.serialize_field("revision", &self.revision)?;
        s.serialize_field("tools", &Tools(self))?;
        s.serialize_field("diagnostics", &self.diagnostics)?;
        s.serialize_field("hidden", &self.hidden)?;
        s.end()
    }
}
