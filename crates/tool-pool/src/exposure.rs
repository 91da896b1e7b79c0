//! The exposure stage, between the pool and the model: which entries the model is sent in full
//! (`Loaded`), which wait behind tool search (`Deferred`), and which are left out (`Hidden`),
//! each with the reason.
//!
//! A function of (pool, options, tools loaded in the session), like assembly: the pool stays an
//! immutable value, and since entries are visited in pool order, which does not depend on the
//! order servers connected in, neither does the result.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::pool::{Pool, PoolEntry};

/// Default largest definition of one tool, in bytes: a tool over it is not exposed at all.
pub const DEFAULT_TOOL_BUDGET: usize = 8 * 1024;
/// Default largest total of the definitions sent to the model, in bytes.
pub const DEFAULT_POOL_BUDGET: usize = 64 * 1024;
/// Bytes per token assumed when a context window is turned into a byte threshold: about four
/// for English text and JSON with the tokenizers of current models.
pub const BYTES_PER_TOKEN: usize = 4;

/// The `auto` threshold for a model with a context window of `tokens`: a tenth of the window,
/// in bytes.
pub fn auto_threshold_for_context(tokens: usize) -> usize {
    tokens / 10 * BYTES_PER_TOKEN
}

/// Whether tools wait behind the search tool until the model loads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// Deferred when the pool's definitions exceed [`ExposureOptions::auto_threshold`].
    #[default]
    Auto,
    /// Always deferred.
    On,
    /// Never deferred; past a budget, hidden instead.
    Off,
}

/// Settings of one server that override the global ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerExposure {
    /// Largest definition of one of its tools, in bytes.
    pub tool_budget: Option<usize>,
    /// Largest total of its loaded definitions, in bytes (there is no other per-server limit).
    pub server_budget: Option<usize>,
    /// Its search mode.
    pub tool_search: Option<SearchMode>,
    /// Its tools are always loaded, never deferred (budgets still apply).
    pub always_load: bool,
}

/// How the exposure stage decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExposureOptions {
    /// Largest definition of one tool, in bytes.
    pub tool_budget: usize,
    /// Largest total of the loaded definitions, built-ins included, in bytes.
    pub pool_budget: usize,
    /// Search mode of servers that do not set their own.
    pub tool_search: SearchMode,
    /// In [`SearchMode::Auto`], tools are deferred when the definitions of the whole pool
    /// (every entry within its tool budget) total more than this many bytes. Set per model by
    /// the caller, typically [`auto_threshold_for_context`].
    pub auto_threshold: usize,
    /// Per-server overrides, by server name as configured.
    pub servers: BTreeMap<String, ServerExposure>,
}

impl Default for ExposureOptions {
    fn default() -> Self {
        Self {
            tool_budget: DEFAULT_TOOL_BUDGET,
            pool_budget: DEFAULT_POOL_BUDGET,
            tool_search: SearchMode::Auto,
            // A tenth of a 200,000-token window.
            auto_threshold: auto_threshold_for_context(200_000),
            servers: BTreeMap::new(),
        }
    }
}

/// What the model gets of a pool entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExposureState {
    /// Its definition is sent with every step.
    Loaded,
    /// Only the search tool can find it; a search that returns it loads it.
    Deferred,
    /// Not sent and not searchable.
    Hidden,
}

impl fmt::Display for ExposureState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Loaded => "loaded",
            Self::Deferred => "deferred",
            Self::Hidden => "hidden",
        })
    }
}

/// Why an entry has its [`ExposureState`]. Sizes and budgets are in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExposureReason {
    /// A host tool: always loaded.
    Builtin,
    /// Its server is marked `always_load`.
    AlwaysLoad,
    /// The model loaded it earlier in the session.
    LoadedInSession,
    /// Tool search is off for its server.
    SearchOff,
    /// Search is `auto` and the pool's definitions fit under the threshold.
    UnderThreshold {
        /// The pool's definitions.
        total: usize,
        /// The threshold.
        threshold: usize,
    },
    /// Tool search is on for its server.
    SearchOn,
    /// Search is `auto` and the pool's definitions exceed the threshold.
    OverThreshold {
        /// The pool's definitions.
        total: usize,
        /// The threshold.
        threshold: usize,
    },
    /// Its definition alone is over the per-tool budget.
    OverToolBudget {
        /// Its definition.
        size: usize,
        /// The budget.
        budget: usize,
    },
    /// Loading it would take its server's loaded definitions over the server's budget.
    OverServerBudget {
        /// Its definition.
        size: usize,
        /// The server's definitions already loaded.
        used: usize,
        /// The budget.
        budget: usize,
    },
    /// Loading it would take the loaded definitions over the pool budget.
    OverPoolBudget {
        /// Its definition.
        size: usize,
        /// The definitions already loaded.
        used: usize,
        /// The budget.
        budget: usize,
    },
}

impl fmt::Display for ExposureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Builtin => f.write_str("built-in"),
            Self::AlwaysLoad => f.write_str("its server is always loaded"),
            Self::LoadedInSession => f.write_str("loaded earlier in this session"),
            Self::SearchOff => f.write_str("tool search is off"),
            Self::UnderThreshold { total, threshold } => {
                write!(f, "all definitions ({total} bytes) fit under the tool search threshold ({threshold} bytes)")
            }
            Self::SearchOn => f.write_str("tool search is on"),
            Self::OverThreshold { total, threshold } => {
                write!(f, "all definitions ({total} bytes) exceed the tool search threshold ({threshold} bytes)")
            }
            Self::OverToolBudget { size, budget } => {
                write!(f, "its definition ({size} bytes) is over the per-tool budget ({budget} bytes)")
            }
            Self::OverServerBudget { size, used, budget } => write!(
                f,
                "its definition ({size} bytes) does not fit in its server's budget ({used} of {budget} bytes used)"
            ),
            Self::OverPoolBudget { size, used, budget } => {
                write!(
                    f,
                    "its definition ({size} bytes) does not fit in the pool budget ({used} of {budget} bytes used)"
                )
            }
        }
    }
}

/// One pool entry's exposure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolExposure {
    /// The entry's model name.
    pub name: Arc<str>,
    /// Size of its definition as sent to the model ([`definition_size`]).
    pub size: usize,
    /// What the model gets of it.
    pub state: ExposureState,
    /// Why.
    pub reason: ExposureReason,
}

/// A tool pushed out by a budget: hidden, or deferred where it would otherwise be loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExposureDiagnostic {
    /// Its server.
    pub server: String,
    /// Its raw name.
    pub tool: String,
    /// Its model name.
    pub name: Arc<str>,
    /// Its definition, in bytes.
    pub size: usize,
    /// What happened to it ([`ExposureState::Hidden`] or [`ExposureState::Deferred`]).
    pub state: ExposureState,
    /// The budget that pushed it out.
    pub reason: ExposureReason,
    /// A sentence for humans naming the tool, its size and the budget.
    pub message: String,
}

impl fmt::Display for ExposureDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The exposure of every entry of one pool, in pool order.
///
/// Serializes as `{revision, tools: [{name, size, state, reason}], diagnostics}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Exposure {
    revision: u64,
    tools: Vec<ToolExposure>,
    diagnostics: Vec<ExposureDiagnostic>,
    #[serde(skip)]
    by_name: HashMap<Arc<str>, usize>,
}

impl Exposure {
    /// The revision of the pool this was computed for.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The exposure of the entry the model knows as `name`.
    pub fn get(&self, name: &str) -> Option<&ToolExposure> {
        self.tools.get(*self.by_name.get(name)?)
    }

    /// The state of the entry named `name`, `None` when the pool has no such entry.
    pub fn state(&self, name: &str) -> Option<ExposureState> {
        self.get(name).map(|t| t.state)
    }

    /// Every entry's exposure, in pool order.
    pub fn iter(&self) -> std::slice::Iter<'_, ToolExposure> {
        self.tools.iter()
    }

    /// Tools pushed out by a budget, in pool order.
    pub fn diagnostics(&self) -> &[ExposureDiagnostic] {
        &self.diagnostics
    }

    /// Whether some tool is deferred, so the model needs the search tool.
    pub fn search_active(&self) -> bool {
        self.tools.iter().any(|t| t.state == ExposureState::Deferred)
    }

    /// Total size of the loaded definitions, in bytes: what every step sends.
    pub fn loaded_bytes(&self) -> usize {
        self.tools.iter().filter(|t| t.state == ExposureState::Loaded).map(|t| t.size).sum()
    }
}

/// Size in bytes of an entry's definition as sent to the model: its name, its description as
/// shown (sanitized and marked) and its input schema as compact JSON.
pub fn definition_size(entry: &PoolEntry<'_>) -> usize {
    let mut counter = ByteCounter(0);
    // Writing into a counter cannot fail, and a `Value` always serializes.
    let _ = serde_json::to_writer(&mut counter, entry.input_schema());
    entry.name().len() + entry.description().len() + counter.0
}

/// Counts bytes written; sizing a schema this way allocates nothing.
struct ByteCounter(usize);

impl io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Candidates for loading, in the order budgets are granted: always-loaded servers' tools,
/// then tools loaded in the session, then the rest; pool order within each.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Priority {
    AlwaysLoad,
    Session,
    Direct,
}

/// The exposure of every entry of `pool`.
///
/// `loaded` holds the model names the model loaded earlier in the session (through the search
/// tool); names the pool no longer has are ignored. Built-ins are always loaded and count
/// against the pool budget first. A tool over its per-tool budget is hidden. The others are
/// deferred when their server's search mode says so, unless their server is `always_load` or
/// they are in `loaded`; the rest are loaded (always-loaded servers first, then tools loaded in
/// the session, then the others, each in pool order) while the pool and server budgets allow,
/// and past a budget deferred, or hidden when search is off for their server.
pub fn expose(pool: &Pool, options: &ExposureOptions, loaded: &BTreeSet<String>) -> Exposure {
    let none = ServerExposure::default();
    let settings = |entry: &PoolEntry<'_>| entry.server().and_then(|s| options.servers.get(s)).unwrap_or(&none);
    let mut tools: Vec<ToolExposure> = Vec::with_capacity(pool.len());
    let mut diagnostics = Vec::new();

    // Sizes, the per-tool budget, and the total the `auto` threshold is compared with.
    let mut total = 0usize;
    for entry in pool {
        let size = definition_size(&entry);
        let (state, reason) = if entry.server().is_none() {
            (ExposureState::Loaded, ExposureReason::Builtin)
        } else {
            let budget = settings(&entry).tool_budget.unwrap_or(options.tool_budget);
            if size > budget {
                (ExposureState::Hidden, ExposureReason::OverToolBudget { size, budget })
            } else {
                // Provisional: decided below.
                (ExposureState::Loaded, ExposureReason::SearchOff)
            }
        };
        if state != ExposureState::Hidden {
            total = total.saturating_add(size);
        }
        tools.push(ToolExposure { name: Arc::clone(entry.shared_name()), size, state, reason });
    }
    let over_threshold = total > options.auto_threshold;
    let threshold = options.auto_threshold;

    // Search modes, and the candidates for loading.
    let mut candidates: Vec<(Priority, usize)> = Vec::new();
    let mut used = 0usize;
    for (i, entry) in pool.iter().enumerate() {
        let t = &mut tools[i];
        if t.reason == ExposureReason::Builtin {
            used = used.saturating_add(t.size);
            continue;
        }
        if t.state == ExposureState::Hidden {
            continue;
        }
        let s = settings(&entry);
        let (defers, reason) = match s.tool_search.unwrap_or(options.tool_search) {
            SearchMode::Off => (false, ExposureReason::SearchOff),
            SearchMode::On => (true, ExposureReason::SearchOn),
            SearchMode::Auto if over_threshold => (true, ExposureReason::OverThreshold { total, threshold }),
            SearchMode::Auto => (false, ExposureReason::UnderThreshold { total, threshold }),
        };
        let priority = if s.always_load {
            t.reason = ExposureReason::AlwaysLoad;
            Priority::AlwaysLoad
        } else if defers && loaded.contains(entry.name()) {
            t.reason = ExposureReason::LoadedInSession;
            Priority::Session
        } else if defers {
            t.state = ExposureState::Deferred;
            t.reason = reason;
            continue;
        } else {
            t.reason = reason;
            Priority::Direct
        };
        candidates.push((priority, i));
    }

    // Budgets, granted in priority order.
    candidates.sort_unstable();
    let mut server_used: HashMap<&str, usize> = HashMap::new();
    let entries: Vec<PoolEntry<'_>> = pool.iter().collect();
    for (_, i) in candidates {
        let entry = &entries[i];
        let server = entry.server().unwrap_or_default();
        let s = settings(entry);
        let t = &mut tools[i];
        let size = t.size;
        let on_server = server_used.get(server).copied().unwrap_or(0);
        let reason = match s.server_budget {
            Some(budget) if on_server.saturating_add(size) > budget => {
                Some(ExposureReason::OverServerBudget { size, used: on_server, budget })
            }
            _ if used.saturating_add(size) > options.pool_budget => {
                Some(ExposureReason::OverPoolBudget { size, used, budget: options.pool_budget })
            }
            _ => None,
        };
        let Some(reason) = reason else {
            used += size;
            server_used.insert(server, on_server + size);
            continue;
        };
        let searchable = s.tool_search.unwrap_or(options.tool_search) != SearchMode::Off;
        t.state = if searchable { ExposureState::Deferred } else { ExposureState::Hidden };
        t.reason = reason;
    }

    for (entry, t) in entries.iter().zip(&tools) {
        let pushed_out = matches!(
            t.reason,
            ExposureReason::OverToolBudget { .. }
                | ExposureReason::OverServerBudget { .. }
                | ExposureReason::OverPoolBudget { .. }
        );
        if pushed_out {
            let (server, tool) = (entry.server().unwrap_or_default(), entry.tool());
            let outcome = match t.state {
                ExposureState::Hidden => "not shown to the model",
                _ => "deferred to tool search",
            };
            diagnostics.push(ExposureDiagnostic {
                server: server.to_owned(),
                tool: tool.to_owned(),
                name: Arc::clone(&t.name),
                size: t.size,
                state: t.state,
                reason: t.reason,
                message: format!("tool {tool:?} of server {server:?} ({}): {}; {outcome}", t.name, t.reason),
            });
        }
    }

    let by_name = tools.iter().enumerate().map(|(i, t)| (Arc::clone(&t.name), i)).collect();
    Exposure { revision: pool.revision(), tools, diagnostics, by_name }
}
