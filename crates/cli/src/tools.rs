//! `mcp-harness tools`: the assembled tool pool.
//!
//! Servers that failed to connect are diagnostics of kind `server_unavailable`, in the JSON's
//! `diagnostics` and, like the pool's own diagnostics, as warnings on stderr in the table view.

use serde_json::Value;
use tool_pool::{HiddenTool, PoolEntry};

use crate::Outcome;
use crate::config::Config;
use crate::output;
use crate::session::Session;

const DESCRIPTION_WIDTH: usize = 70;

/// `mcp-harness tools`.
pub(crate) async fn tools_command(config: Config, as_json: bool) -> anyhow::Result<Outcome> {
    let session = Session::open(&config).await?;
    let result = render(&session, as_json);
    session.close().await;
    let (out, err) = result?;
    output::stdout(&out)?;
    if !err.is_empty() {
        output::stderr(&err)?;
    }
    Ok(Outcome::Success)
}

fn render(session: &Session, as_json: bool) -> anyhow::Result<(String, String)> {
    let pool = &session.pool;
    if as_json {
        let mut value = serde_json::to_value(pool)?;
        if let Some(Value::Array(diagnostics)) = value.get_mut("diagnostics") {
            diagnostics.extend(session.unavailable_diagnostics());
        }
        let mut text = output::json(&value, true)?;
        text.push('\n');
        return Ok((text, String::new()));
    }
    let mut out = if pool.is_empty() {
        "no tools are available\n".to_owned()
    } else {
        let rows: Vec<Vec<String>> =
            pool.iter().map(|e| vec![e.name().to_owned(), e.decision().to_string(), summary(&e)]).collect();
        output::table(&["NAME", "DECISION", "DESCRIPTION"], &rows)
    };
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
    for (server, reason) in session.unavailable() {
        err.push_str(&format!(
            "warning: server {server:?} is unavailable, its tools are left out: {}\n",
            output::one_line(reason, 300)
        ));
    }
    Ok((out, err))
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
    output::one_line(text.lines().next().unwrap_or(""), DESCRIPTION_WIDTH)
}

/// `tool "crash" of server "fx" (rule 0 (server "fx", tool "crash"))`.
pub(crate) fn hidden_line(h: &HiddenTool) -> String {
    let who = match &h.server {
        Some(server) => format!("tool {:?} of server {server:?}", h.tool),
        None => format!("built-in tool {:?}", h.tool),
    };
    output::one_line(&format!("{who}, denied by {}", h.rule), 300)
}
