//! The host (`mcp_host`) as the terminal shows it: its ports (its events on stderr, servers'
//! elicitation asked on the terminal), the configuration read with its warnings shown, a
//! spinner while servers connect, and the runtime's `/mcp` operations rendered.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mcp_client::{ServerConnection, ServerState};
use mcp_host::config::{self, Config, ConfigPath};
use mcp_host::{ActionOutcome, HostEvent, Ports, Runtime, RuntimeOptions, ServerAction};

use crate::output;

/// How long `run` and `chat` wait for the first attempt of every server before the first step
/// at most (each server is bounded by its own startup timeout too; one still connecting after
/// this joins the pool at a later step).
const FIRST_STEP_WAIT: Duration = Duration::from_secs(120);

/// The header of a tool count as `servers` and `/mcp` show it: offered of listed.
pub(crate) const TOOLS_COLUMN: &str = "TOOLS OFFERED/LISTED";

/// The host's ports for this terminal: elicitation asked on it (when there is one and the
/// server may ask), events on stderr.
pub(crate) fn ports() -> Ports {
    let mut ports = Ports::default();
    ports.requests = Some(Arc::new(crate::elicit::requests_for));
    ports.events = Arc::new(show_event);
    ports
}

/// Shows the host's events on stderr (reloads, a kernel without Landlock).
pub(crate) fn show_event(event: &HostEvent) {
    let list = |names: &[String]| names.iter().map(|n| output::one_line(n, 80)).collect::<Vec<_>>().join(", ");
    let text = match event {
        HostEvent::Unconfined => "warning: this kernel has no Landlock, so stdio servers run unconfined \
                                  (`sandbox_required = true` refuses to start them instead)\n"
            .to_owned(),
        HostEvent::Reloaded(published) => {
            let mut report = Vec::new();
            if !published.added.is_empty() {
                report.push(format!("added {}", list(&published.added)));
            }
            if !published.changed.is_empty() {
                report.push(format!("reconnecting {}", list(&published.changed)));
            }
            if !published.removed.is_empty() {
                report.push(format!("removed {}", list(&published.removed)));
            }
            if published.policy_changed {
                report.push("the policy changed (it applies from the next step)".to_owned());
            }
            format!("configuration reloaded: {}\n", report.join("; "))
        }
        HostEvent::NotReady { server, state: ServerState::Pending } => format!(
            "warning: server {}, added to the configuration, is still starting; its tools join a later step\n",
            output::one_line(&format!("{server:?}"), 80)
        ),
        HostEvent::NotReady { server, state } => format!(
            "warning: server {}, added to the configuration, is {}\n",
            output::one_line(&format!("{server:?}"), 80),
            output::one_line(&state.to_string(), 500)
        ),
        HostEvent::ReloadFailed { message } => format!(
            "warning: the configuration was not reloaded ({}); the running one stays\n",
            output::one_line(message, 1000)
        ),
        _ => return,
    };
    let _ = output::stderr(&text);
}

/// Finds, checks and loads the configuration (VS Code inputs asked on the terminal); its
/// warnings go to stderr.
pub(crate) fn load_config(at: &ConfigPath) -> anyhow::Result<Config> {
    let config = config::load_at(at, Some(Box::new(crate::approve::ask_input)))?;
    for warning in &config.warnings {
        output::warn(warning)?;
    }
    Ok(config)
}

/// A spinner on stderr when it is a terminal and there is something to wait for.
fn spinner(waiting: usize) -> Option<ProgressBar> {
    (waiting > 0 && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(ProgressStyle::default_spinner());
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    })
}

/// Connects to every configured server at once (each under its own startup timeout), with a
/// spinner on stderr when it is a terminal that names the servers still connecting.
pub(crate) async fn connect(config: &Config) -> Vec<ServerConnection> {
    let enabled = config.servers.iter().filter(|s| s.enabled).count();
    let spinner = spinner(enabled);
    let connecting: Mutex<BTreeSet<String>> =
        Mutex::new(config.servers.iter().filter(|s| s.enabled).map(|s| s.name.clone()).collect());
    let show = |bar: &ProgressBar| {
        let names = mcp_safety::lock(&connecting).iter().cloned().collect::<Vec<_>>().join(", ");
        let done = enabled - mcp_safety::lock(&connecting).len();
        // The last frame, drawn before the spinner is cleared, names no server.
        let message = if names.is_empty() {
            format!("connected ({done} of {enabled} settled)")
        } else {
            format!("connecting: {names} ({done} of {enabled} settled)…")
        };
        bar.set_message(output::one_line(&message, 200));
    };
    if let Some(bar) = &spinner {
        show(bar);
    }
    let settled = |name: &str| {
        mcp_safety::lock(&connecting).remove(name);
        if let Some(bar) = &spinner {
            show(bar);
        }
    };
    let connections = mcp_host::connect(config, &ports(), &settled).await;
    if let Some(bar) = spinner {
        bar.finish_and_clear();
    }
    connections
}

/// Starts the living runtime of `run` and `chat`: every server started, the first attempts
/// waited for (a spinner names the ones still connecting; a signal ends the wait), what they
/// answered remembered, and the file at `reload` watched.
pub(crate) async fn start_runtime(config: Config, reload: Option<ConfigPath>) -> Runtime {
    let mut options = RuntimeOptions::default();
    options.ports = ports();
    options.reload = reload;
    // The servers an edit adds are waited for as those of the first step are.
    options.added_wait = FIRST_STEP_WAIT;
    let runtime = Runtime::start(config, options);
    let total = runtime.servers().states().iter().filter(|(_, s)| !matches!(s, ServerState::Disabled)).count();
    let spinner = spinner(total);
    let progress = |names: &[String], done: usize, total: usize| {
        if let Some(bar) = &spinner {
            bar.set_message(output::one_line(
                &format!("connecting: {} ({done} of {total} settled)…", names.join(", ")),
                200,
            ));
        }
    };
    // A signal ends the wait too: the caller sees it and closes the servers.
    let _ = crate::signals::interruptible(runtime.wait_first_attempts(FIRST_STEP_WAIT, &progress)).await;
    if let Some(bar) = spinner {
        bar.finish_and_clear();
    }
    runtime.remember_eras();
    runtime
}

/// Refuses to start when a server marked `required` did not connect, naming every one.
pub(crate) fn check_required(runtime: &Runtime) -> anyhow::Result<()> {
    let Err(e) = runtime.check_required() else { return Ok(()) };
    let failed: Vec<String> = e
        .failed
        .iter()
        .map(|(name, state)| format!("  {}: {}", output::one_line(name, 80), output::one_line(&state.to_string(), 300)))
        .collect();
    anyhow::bail!(
        "required server(s) did not connect, so nothing was started:\n{}\n(see `mcp-harness servers`; a server \
         is required when its configuration says `required = true`)",
        failed.join("\n")
    )
}

/// `/mcp` in `chat`: every server's state, tool count and last error (after a reload, when the
/// configuration changed).
pub(crate) async fn describe(runtime: &Runtime) -> String {
    let rows: Vec<Vec<String>> = runtime
        .status()
        .await
        .into_iter()
        .map(|status| {
            let tools = status.tools.map_or_else(
                || "-".to_owned(),
                |t| match t.offered {
                    Some(offered) => format!("{offered}/{}", t.listed),
                    None => format!("?/{}", t.listed),
                },
            );
            let detail = match &status.state {
                ServerState::Failed { reason, .. } => mcp_host::sandbox::failure_line(reason, 200),
                ServerState::Reconnecting { .. } => output::one_line(&status.state.to_string(), 200),
                _ => status.last_error.as_deref().map(|e| output::one_line(e, 200)).unwrap_or_default(),
            };
            vec![output::one_line(&status.name, 60), status.state.label().to_owned(), tools, detail]
        })
        .collect();
    if rows.is_empty() {
        return "no servers are configured\n".to_owned();
    }
    output::table(&["SERVER", "STATE", TOOLS_COLUMN, "LAST ERROR"], &rows)
}

/// `/mcp`, `/mcp reconnect NAME`, `/mcp enable NAME`, `/mcp disable NAME` in `chat`: what the
/// user sees, one piece of text.
pub(crate) async fn mcp_command(runtime: &Runtime, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let action = match words.as_slice() {
        ["/mcp"] => return describe(runtime).await,
        ["/mcp", "reconnect", name] => (ServerAction::Reconnect, *name),
        ["/mcp", "enable", name] => (ServerAction::Enable, *name),
        ["/mcp", "disable", name] => (ServerAction::Disable, *name),
        _ => return "usage: /mcp | /mcp reconnect NAME | /mcp enable NAME | /mcp disable NAME\n".to_owned(),
    };
    let (action, name) = action;
    let shown = output::one_line(name, 80);
    match (action, runtime.act(name, action)) {
        (_, ActionOutcome::NotKept) => format!("server {shown} is not kept by this session; nothing was done\n"),
        (_, ActionOutcome::DisabledInFile) => format!(
            "server {shown} is disabled in the configuration file; enable it there (`mcp-harness mcp enable {shown}`), \
             and this session picks the change up\n"
        ),
        (ServerAction::Disable, ActionOutcome::Done) => format!("server {shown} is disabled for this session\n"),
        (_, ActionOutcome::Done) => format!("server {shown} is connecting; `/mcp` shows how it went\n"),
        _ => {
            let names: Vec<String> =
                runtime.servers().states().into_iter().map(|(n, _)| output::one_line(&n, 80)).collect();
            format!("no server named {shown}; servers: {}\n", names.join(", "))
        }
    }
}
