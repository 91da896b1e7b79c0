//! `mcp-harness tools`: the assembled tool pool.
//!
//! Servers that failed to connect are diagnostics of kind `server_unavailable`, in the JSON's
//! `diagnostics` and, like the pool's own diagnostics, as warnings on stderr in the table view.
//! Each tool's exposure (`loaded`, `deferred`, `hidden`) and why is a column of the table and
//! the JSON's `exposure`, as the model would get it with the configured budgets and tool search
//! at the start of a session (the `auto` threshold of a 200,000-token context window).
//!
//! `--search QUERY` ranks what the model could find with tool search instead; `--search -`
//! reads one query per line and prints one JSON line per query, for scripts that evaluate the
//! ranking.

use std::collections::BTreeSet;
use std::io::BufRead as _;

use serde::ser::{Serialize, SerializeMap as _, SerializeSeq as _, Serializer};
use serde_json::{Value, json};
use tool_pool::{Exposure, ExposureState, HiddenTool, PoolEntry, SearchIndex, SearchResults, expose};

use crate::Outcome;
use crate::output;
use crate::session::Session;
use mcp_host::config::Config;

const DESCRIPTION_WIDTH: usize = 70;

/// What `tools` prints.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolsArgs {
    /// Print JSON.
    pub(crate) json: bool,
    /// Rank the searchable tools for this query (`-`: one query per line of stdin).
    pub(crate) search: Option<String>,
    /// Most results per query.
    pub(crate) limit: Option<usize>,
}

/// `mcp-harness tools`.
pub(crate) async fn tools_command(config: Config, args: ToolsArgs) -> anyhow::Result<Outcome> {
    let session = Session::open(&config).await?;
    let exposure = expose(&session.pool, &config.exposure(), &BTreeSet::new());
    if args.json && args.search.is_none() {
        // Written as it is serialized: thousands of tools are never one text in memory. The
        // servers are told to exit first and exit while it is written.
        let unavailable = session.unavailable_diagnostics();
        let written = session
            .close_while(|pool| output::stdout_json(&PoolJson { pool, unavailable, exposure: &exposure }, true))
            .await;
        written?;
        return Ok(Outcome::Success);
    }
    let result = match &args.search {
        Some(query) => search(&session, &exposure, query, &args),
        None => render(&session, &exposure),
    };
    session
        .close_while(|_| -> anyhow::Result<()> {
            let (out, err) = result?;
            output::stdout(&out)?;
            if !err.is_empty() {
                output::stderr(&err)?;
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Success)
}

/// `tools --json`: the pool as it serializes (`revision`, `tools`, `diagnostics`, `hidden`),
/// the unavailable servers after the pool's own diagnostics, then `exposure`.
struct PoolJson<'a> {
    pool: &'a tool_pool::Pool,
    /// [`Session::unavailable_diagnostics`].
    unavailable: Vec<Value>,
    exposure: &'a Exposure,
}

impl Serialize for PoolJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        /// The pool's diagnostics, then one per unavailable server.
        struct Diagnostics<'a>(&'a [tool_pool::Diagnostic], &'a [Value]);
        impl Serialize for Diagnostics<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.0.len() + self.1.len()))?;
                for d in self.0 {
                    seq.serialize_element(d)?;
                }
                for d in self.1 {
                    seq.serialize_element(d)?;
                }
                seq.end()
            }
        }
        /// Every entry of the pool, in order.
        struct Tools<'a>(&'a tool_pool::Pool);
        impl Serialize for Tools<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.0.iter())
            }
        }
        let pool = self.pool;
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("revision", &pool.revision())?;
        map.serialize_entry("tools", &Tools(pool))?;
        map.serialize_entry("diagnostics", &Diagnostics(pool.diagnostics(), &self.unavailable))?;
        map.serialize_entry("hidden", pool.hidden())?;
        map.serialize_entry("exposure", self.exposure)?;
        map.end()
    }
}

fn render(session: &Session, exposure: &Exposure) -> anyhow::Result<(String, String)> {
    let pool = &session.pool;
    let mut out = if pool.is_empty() {
        "no tools are available\n".to_owned()
    } else {
        let rows: Vec<Vec<String>> = pool
            .iter()
            .map(|e| {
                let state = exposure.state(e.name()).map_or_else(|| "-".to_owned(), |s| s.to_string());
                vec![e.name().to_owned(), e.decision().to_string(), state, summary(&e)]
            })
            .collect();
        output::table(&["NAME", "DECISION", "EXPOSURE", "DESCRIPTION"], &rows)
    };
    // Why tools are not loaded: one line per reason that is not a budget (those are warnings).
    let mut reasons: Vec<(ExposureState, String, usize)> = Vec::new();
    for t in exposure.iter().filter(|t| t.state != ExposureState::Loaded) {
        if exposure.diagnostics().iter().any(|d| d.name == t.name) {
            continue;
        }
        let reason = t.reason.to_string();
        match reasons.iter_mut().find(|(s, r, _)| *s == t.state && *r == reason) {
            Some((_, _, n)) => *n += 1,
            None => reasons.push((t.state, reason, 1)),
        }
    }
    if !reasons.is_empty() {
        out.push('\n');
    }
    for (state, reason, n) in reasons {
        let tools = if n == 1 { "tool" } else { "tools" };
        out.push_str(&format!("{n} {tools} {state}: {reason}\n"));
    }
    if exposure.search_active() {
        out.push_str("deferred tools wait behind tool search; `tools --search QUERY` shows what a search finds\n");
    }
    if !pool.hidden().is_empty() {
        out.push_str(&format!("\nhidden by policy ({}):\n", pool.hidden().len()));
        for h in pool.hidden() {
            out.push_str(&format!("  {}\n", hidden_line(h)));
        }
    }
    let mut err = String::new();
    for d in pool.diagnostics() {
        err.push_str(&format!("warning: {}\n", output::one_line(&d.message, 500)));
    }
    for d in exposure.diagnostics() {
        err.push_str(&format!("warning: {}\n", output::one_line(&d.message, 500)));
    }
    for (server, reason) in session.unavailable() {
        err.push_str(&format!(
            "warning: server {server:?} is unavailable, its tools are left out: {}\n",
            mcp_host::sandbox::failure_line(reason, 300)
        ));
    }
    Ok((out, err))
}

/// `tools --search`: the ranked tools for one query, or (`-`) one JSON line per line of stdin.
fn search(session: &Session, exposure: &Exposure, query: &str, args: &ToolsArgs) -> anyhow::Result<(String, String)> {
    let index = SearchIndex::new(&session.pool, exposure);
    let mut err = String::new();
    for (server, reason) in session.unavailable() {
        err.push_str(&format!(
            "warning: server {server:?} is unavailable, its tools are left out: {}\n",
            mcp_host::sandbox::failure_line(reason, 300)
        ));
    }
    if query == "-" {
        // Each answer is written as soon as it is known, so a script may send a query and
        // wait for its line.
        for line in std::io::stdin().lock().lines() {
            let line = line?;
            let results = index.search(&line, args.limit);
            let hits: Vec<Value> =
                results.hits.iter().map(|h| json!({"name": h.name, "score": score(h.score)})).collect();
            let mut value = json!({"query": line, "results": hits});
            if !results.unknown.is_empty() {
                value["unknown"] = json!(results.unknown);
            }
            output::stdout(&format!("{}\n", output::json(&value, false)?))?;
        }
        return Ok((String::new(), err));
    }
    let results = index.search(query, args.limit);
    if args.json {
        let mut text = output::json(&search_json(query, &results), true)?;
        text.push('\n');
        return Ok((text, err));
    }
    let mut out = if results.hits.is_empty() {
        format!("no tools match (searched {} tools)\n", index.len())
    } else {
        let rows: Vec<Vec<String>> = results
            .hits
            .iter()
            .enumerate()
            .map(|(i, h)| {
                vec![
                    (i + 1).to_string(),
                    h.name.to_string(),
                    format!("{:.2}", h.score),
                    output::one_line(h.server.as_deref().unwrap_or("-"), 40),
                    output::one_line(&h.description, DESCRIPTION_WIDTH),
                ]
            })
            .collect();
        output::table(&["RANK", "NAME", "SCORE", "SERVER", "DESCRIPTION"], &rows)
    };
    if !results.unknown.is_empty() {
        out.push_str(&format!("not found: {}\n", output::one_line(&results.unknown.join(", "), 300)));
    }
    Ok((out, err))
}

/// A score for JSON: four decimals (an `f32` widened as it is prints noise digits).
fn score(score: f32) -> f64 {
    (f64::from(score) * 1e4).round() / 1e4
}

/// One query's results as JSON: `{"query", "results": [{"name", "score", "server", "description"}]}`.
fn search_json(query: &str, results: &SearchResults) -> Value {
    let hits: Vec<Value> = results
        .hits
        .iter()
        .map(|h| json!({"name": h.name, "score": score(h.score), "server": h.server, "description": h.description}))
        .collect();
    let mut value = json!({"query": query, "results": hits});
    if !results.unknown.is_empty() {
        value["unknown"] = json!(results.unknown);
    }
    value
}

/// The description's first line without the source mark (the name already says the server).
fn summary(entry: &PoolEntry<'_>) -> String {
    let description = entry.description();
    let text = match entry.server() {
        Some(server) => {
            let mark = tool_pool::mark(server, None, 0);
            description.strip_prefix(mark.as_str()).unwrap_or(description).trim_start()
        }
        None => description,
    };
    output::first_line(text, DESCRIPTION_WIDTH)
}

/// `tool "crash" of server "fx" (rule 0 (server "fx", tool "crash"))`.
pub(crate) fn hidden_line(h: &HiddenTool) -> String {
    let who = match &h.server {
        Some(server) => format!("tool {:?} of server {server:?}", h.tool),
        None => format!("built-in tool {:?}", h.tool),
    };
    output::one_line(&format!("{who}, denied by {}", h.rule), 300)
}
