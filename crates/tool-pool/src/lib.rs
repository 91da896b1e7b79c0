//! Tool-pool assembly. Pure: no I/O.
//!
//! [`assemble`] turns the host's built-in tools and each MCP server's `tools/list` into a
//! [`Pool`]: an immutable, numbered snapshot of what the model may call, under which name, with
//! which description and schema, and with the [`policy`] decision for each.
//!
//! - **Names.** MCP tools are offered as `mcp__{server}__{tool}`, every character outside
//!   `[A-Za-z0-9_-]` replaced by `_` and the whole at most 64 characters (longer names keep
//!   their first 55 characters plus `_` and 8 hex digits of a SHA-256 of the raw origin; see
//!   [`model_name`]); the gateway's form, [`Naming::Gateway`], is the same without `mcp__`
//!   ([`Options::naming`]). The server's part never contains `__` nor ends in `_`
//!   ([`server_segment`]), so no tool can take a name in another server's namespace. Names are
//!   never parsed back: [`Pool::get`] maps them to their [`Origin`], and calls go out under the
//!   raw tool name.
//! - **Collisions.** Built-ins keep their names. Two MCP tools with one model name: the one
//!   whose (server, raw tool name) sorts first keeps it, so connection order does not matter.
//!   The loser is left out with a [`Diagnostic`] naming both.
//! - **Validation.** Empty or duplicate names and input schemas that are not object schemas are
//!   left out with a diagnostic. [`Options::strict`] turns any diagnostic into a [`StrictError`].
//! - **Descriptions** are untrusted: stripped of control, bidirectional-override and zero-width
//!   characters, capped at [`Options::description_cap`] characters, and prefixed with their
//!   source, `[from MCP server "docs"] ` (the cap applies before the mark, which is never cut).
//! - **Policy.** Tools the policy denies are not in the pool at all ([`Pool::hidden`] lists
//!   them for the user). Server annotations are passed to the policy, which ignores them.
//!
//! Between the pool and the model, [`expose`] decides per entry whether its definition is sent
//! every step ([`ExposureState::Loaded`]), waits behind tool search (`Deferred`) or is left out
//! (`Hidden`), from per-tool and pool budgets in bytes ([`definition_size`]), per-server
//! overrides, `always_load` servers, the search mode ([`SearchMode`]) and the tools the model
//! loaded earlier in the session. [`SearchIndex`] ranks what may be searched (never denied or
//! hidden tools): BM25F over the name's words, the server's name, the description and the
//! parameters, with stemming and stop words, exact and near-exact name matches first, and
//! `select:NAME[,NAME]`.
//!
//! # Example
//!
//! ```
//! use mcp_protocol::Tool;
//! use policy::{Decision, Policy, PolicyConfig, RuleConfig};
//! use serde_json::json;
//! use std::sync::Arc;
//! use tool_pool::{BuiltinTool, DiagnosticKind, Options, ServerTools, assemble};
//!
//! let builtins: Arc<[BuiltinTool]> = Arc::new([BuiltinTool {
//!     name: "read_file".into(),
//!     description: "Read a file.".into(),
//!     input_schema: json!({"type": "object"}),
//! }]);
//! let docs = vec![Tool::new("search", json!({"type": "object"}))];
//! let db = vec![
//!     Tool::new("query/table", json!({"type": "object"})),
//!     Tool::new("drop", json!({"type": "object"})),
//!     Tool::new("broken", json!({"type": "string"})),
//! ];
//! let policy = Policy::new(PolicyConfig {
//!     default: Decision::Confirm,
//!     rules: vec![RuleConfig::new("db", "drop", Decision::Deny)],
//!     ..PolicyConfig::default()
//! })?;
//! let servers = [ServerTools::new("docs", docs), ServerTools::new("db", db)];
//! let pool = assemble(&builtins, &servers, &policy, &Options::default(), 7)?;
//!
//! assert_eq!(pool.revision(), 7);
//! let names: Vec<&str> = pool.iter().map(|e| e.name()).collect();
//! assert_eq!(names, ["read_file", "mcp__db__query_table", "mcp__docs__search"]);
//!
//! let entry = pool.get("mcp__db__query_table").unwrap();
//! assert_eq!((entry.server(), entry.tool()), (Some("db"), "query/table"));
//! assert_eq!(entry.description(), r#"[from MCP server "db"]"#);
//! assert_eq!(entry.verdict().source.to_string(), "default");
//!
//! assert_eq!(pool.hidden()[0].tool, "drop");
//! assert_eq!(pool.diagnostics()[0].kind, DiagnosticKind::InvalidInputSchema);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod arguments;
mod assemble;
mod description;
mod dictionary;
mod exposure;
mod name;
mod pool;
mod search;
mod text;

pub use arguments::{
    ArgumentChecker, ArgumentProblem, ArgumentProblemKind, CheckError, CompiledSchema, MAX_CACHED, MAX_PROBLEMS,
    check_arguments,
};
pub use assemble::{BuiltinTool, Options, ServerTools, StrictError, assemble};
pub use description::{DEFAULT_DESCRIPTION_CAP, mark};
pub use exposure::{
    BYTES_PER_TOKEN, DEFAULT_POOL_BUDGET, DEFAULT_TOOL_BUDGET, Exposure, ExposureDiagnostic, ExposureOptions,
    ExposureReason, ExposureState, SearchMode, ServerExposure, ToolExposure, auto_threshold_for_context,
    definition_size, expose,
};
pub use name::{MAX_NAME_LEN, MCP_PREFIX, Naming, is_valid_model_name, model_name, normalize, server_segment};
pub use pool::{Diagnostic, DiagnosticKind, HiddenTool, Iter, Origin, Pool, PoolEntry};
pub use search::{
    DEFAULT_LIMIT, MAX_FIELD_CHARS, MAX_LIMIT, MAX_PARAMETERS, MAX_QUERY_CHARS, MAX_QUERY_TERMS, ONE_LINE_CHARS,
    SELECT_PREFIX, SearchHit, SearchIndex, SearchQuery, SearchResults,
};
