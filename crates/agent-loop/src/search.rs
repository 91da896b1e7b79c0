//! Deferred tools and the loop's built-in search tool.
//!
//! When the exposure stage defers tools (see [`tool_pool::expose`]), the model sees the
//! built-ins, the tools of `always_load` servers, the tools it loaded earlier in the session,
//! and one more tool, [`SEARCH_TOOL`], taking `{query, limit}`. Its answer lists the best
//! matching tools (name, server, one-line description), and those tools are loaded: they are in
//! the pool the model is shown from the next step on, under a new pool revision, and stay loaded
//! for the session up to [`DEFAULT_MAX_LOADED`] tools (the least recently found go first). A
//! call to a deferred tool that is not loaded is refused with a result telling the model to
//! search for it first.
//!
//! With [`ToolSearch::Native`] the provider searches instead (Anthropic's API: deferred tools
//! are sent marked `defer_loading` beside the API's own search tool); the loop then neither
//! offers its search tool nor refuses calls to deferred tools, which the provider let the model
//! find.

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tool_pool::{Exposure, ExposureState, MAX_LIMIT, Pool, SearchIndex, SearchResults};

use crate::model::ToolSpec;

/// Name of the loop's search tool. Reserved: a built-in tool of this name is not offered while
/// the search tool is.
pub const SEARCH_TOOL: &str = "search_tools";

/// Default bound of tools the model keeps loaded through search in one session. Each loaded
/// tool's definition is sent with every later step; at 64 tools of 1 KB (a large real tool)
/// that is 64 KB, the default pool budget, past which the exposure stage defers the rest again.
pub const DEFAULT_MAX_LOADED: usize = 64;

/// Who searches deferred tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSearch {
    /// The loop's own search tool ([`SEARCH_TOOL`]), with every provider.
    #[default]
    Client,
    /// The provider's: deferred tools are sent with [`ToolSpec::defer_loading`] set, for a
    /// provider that runs the search itself (the Anthropic adapter adds the API's search tool).
    Native,
}

/// The model's side of the search tool: the query and an optional limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchInput {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
}

/// The search tool's definition as the model sees it (and as a gateway lists it to a
/// downstream client).
pub fn search_spec() -> ToolSpec {
    ToolSpec {
        name: SEARCH_TOOL.to_owned(),
        description: format!(
            "Find more tools. Most tools are not listed until you search for them: describe what you need \
             (for example \"create a calendar event\") and this answers with the best matching tools (name, \
             server, one line each). The tools found can be called from your next step on. The query \
             select:NAME[,NAME] loads tools by exact name. At most {MAX_LIMIT} results."
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, or select:NAME[,NAME]."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "description": "Most results (default 5)."
                }
            },
            "required": ["query"],
            "additionalProperties": false
        }),
        defer_loading: false,
    }
}

/// The session's search state: which tools the model loaded, and the index of the pool the
/// last search ran on. The loop keeps one per agent; a gateway keeps one per downstream client
/// (its selection), so what one client loads is listed for it alone.
#[derive(Debug, Default)]
pub struct SearchState {
    /// Loaded model names, least recently found first.
    loaded: VecDeque<String>,
    /// Whether `loaded` changed since the last step was shown.
    changed: bool,
    /// Counts the changes of `loaded` (as a set).
    loaded_version: u64,
    /// The pool revision of the last step shown.
    pub(crate) shown: u64,
    /// The index, and the revision the pool it was built from was assembled under (loading
    /// tools renumbers the pool without changing it, so the index is reused; a listing or
    /// policy change assembles a new pool, and the index is built again).
    index: Option<(u64, Arc<SearchIndex>)>,
}

impl SearchState {
    /// The loaded names, for [`tool_pool::expose`].
    pub fn loaded(&self) -> BTreeSet<String> {
        self.loaded.iter().cloned().collect()
    }

    /// A number that changes whenever the set of loaded names does.
    pub fn loaded_version(&self) -> u64 {
        self.loaded_version
    }

    /// Whether tools were loaded since the last call, resetting the flag.
    pub(crate) fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// The index of `pool` under `exposure`, built once per assembled pool.
    pub(crate) fn index(&mut self, assembled: u64, pool: &Pool, exposure: &Exposure) -> Arc<SearchIndex> {
        if let Some((built_for, index)) = &self.index
            && *built_for == assembled
        {
            return Arc::clone(index);
        }
        let index = Arc::new(SearchIndex::new(pool, exposure));
        self.index = Some((assembled, Arc::clone(&index)));
        index
    }

    /// Marks `names` loaded (most recent last), dropping the least recently found past `max`.
    fn load(&mut self, names: impl IntoIterator<Item = String>, max: usize) {
        for name in names {
            if let Some(at) = self.loaded.iter().position(|n| *n == name) {
                self.loaded.remove(at);
            } else {
                self.changed = true;
                self.loaded_version += 1;
            }
            self.loaded.push_back(name);
        }
        while self.loaded.len() > max {
            self.loaded.pop_front();
            self.changed = true;
            self.loaded_version += 1;
        }
    }

    /// Runs one call of the search tool against `index` (built from the pool `exposure` is
    /// of): the text the model reads, and whether it failed. Found tools that are deferred are
    /// loaded, at most `max` kept; already loaded ones stay so.
    pub fn run(&mut self, index: &SearchIndex, exposure: &Exposure, input: &Value, max: usize) -> (String, bool) {
        let input: SearchInput = match serde_json::from_value(input.clone()) {
            Ok(input) => input,
            Err(e) => {
                let problem = mcp_safety::text::one_line(&e.to_string(), 200);
                return (
                    format!(
                        "Error: the arguments for {SEARCH_TOOL} are not valid ({problem}); send {{\"query\": \"what \
                         you need\"}} and optionally \"limit\": 1 to {MAX_LIMIT}"
                    ),
                    true,
                );
            }
        };
        let results = findable(index.search(&input.query, input.limit), exposure);
        let text = describe(&results, exposure, FOUND_FOR_MODEL);
        let found = results.hits.iter().filter(|h| exposure.state(&h.name) == Some(ExposureState::Deferred));
        self.load(found.map(|h| h.name.to_string()), max);
        (text, false)
    }
}

/// A step's tool search as a built-in that reaches tools itself sees it (code mode's
/// `tools.search`): which tools wait behind search, and a search over them. Offered only in a
/// step where the loop's own search tool is (some tool deferred, the client side searching).
///
/// It finds what the model's search tool would: tools the exposure loads or defers, never a
/// hidden one, never a denied one (not in the pool). Finding loads nothing for the model.
#[derive(Debug, Clone)]
pub struct StepSearch {
    exposure: Arc<Exposure>,
    index: Arc<SearchIndex>,
}

impl StepSearch {
    /// The search over what `exposure` shows of a pool, with `index` built from that pool (a
    /// gateway's client's exposure, or the loop's step's).
    pub fn new(exposure: Arc<Exposure>, index: Arc<SearchIndex>) -> Self {
        Self { exposure, index }
    }

    pub(crate) fn index(&self) -> &SearchIndex {
        &self.index
    }

    /// The step's exposure of every pool entry.
    pub fn exposure(&self) -> &Exposure {
        &self.exposure
    }

    /// Whether `name` waits behind search in this step (the model cannot call it before a
    /// search finds it).
    pub fn is_deferred(&self, name: &str) -> bool {
        self.exposure.state(name) == Some(ExposureState::Deferred)
    }

    /// The best matches of `query` (as the search tool takes it: words, or `select:NAME[,NAME]`),
    /// at most `limit` (default [`tool_pool::DEFAULT_LIMIT`], at most [`MAX_LIMIT`]).
    pub fn find(&self, query: &str, limit: Option<usize>) -> SearchResults {
        findable(self.index.search(query, limit), &self.exposure)
    }

    /// The text the model's search tool would answer with `results`, for a transcript (its
    /// first line saying the tools found are the script's: nothing is loaded for the model).
    pub fn describe(&self, results: &SearchResults) -> String {
        describe(results, &self.exposure, FOUND_FOR_SCRIPT)
    }
}

/// `results` less the tools `exposure` hides: the index is built once per pool, and budgets
/// can still hide a tool in this step (loaded tools take their share first); a hidden tool is
/// never offered.
fn findable(mut results: SearchResults, exposure: &Exposure) -> SearchResults {
    results.hits.retain(|h| matches!(exposure.state(&h.name), Some(ExposureState::Loaded | ExposureState::Deferred)));
    results
}

/// The first line of the model's search tool's answer when it found tools.
const FOUND_FOR_MODEL: &str = "Tools found (callable from your next step on):";
/// The first line of a script's search's answer (code mode's `tools.search`).
const FOUND_FOR_SCRIPT: &str = "Tools found (callable in this script; not loaded for the model):";

/// The search tool's answer: `found` (when some tool was), one line per tool, then names a
/// `select:` did not find.
fn describe(results: &SearchResults, exposure: &Exposure, found: &str) -> String {
    let mut text = String::new();
    if results.hits.is_empty() && results.unknown.is_empty() {
        text.push_str("No tools match. Try other words, or fewer.");
        return text;
    }
    if !results.hits.is_empty() {
        text.push_str(found);
        text.push('\n');
    }
    for hit in &results.hits {
        let server = hit.server.as_deref().unwrap_or("built-in");
        let already = match exposure.state(&hit.name) {
            Some(ExposureState::Loaded) => " (already loaded)",
            _ => "",
        };
        // Descriptions come sanitized from the pool; the server's name is the user's config.
        let _ = writeln!(
            text,
            "- {} (server {}){already}: {}",
            hit.name,
            mcp_safety::text::one_line(server, 64),
            hit.description
        );
    }
    if !results.unknown.is_empty() {
        let _ = writeln!(text, "Not found (no tool you may use has these exact names): {}", results.unknown.join(", "));
    }
    text.truncate(text.trim_end().len());
    text
}
