//! The living runtime of `run` and `chat`: every configured server kept alive by
//! `mcp_client::ServerSet` (restarts, reconnects, states), the configuration file watched and
//! reloaded before the next model step, and the `/mcp` commands of `chat`.
//!
//! A change to the file (editors often rename a new file over the old one: that is a change
//! too) marks the runtime dirty. Before the next step one publisher (never two at once) reads the
//! file again: servers whose entry is unchanged keep their connections, changed ones are
//! reconnected with the new settings, removed ones are closed, new ones connect, and a changed
//! policy applies to the next pool. A file that no longer parses keeps the running configuration
//! and says why, once per distinct error. A publication cancelled halfway leaves the runtime
//! dirty, so the next step tries again.

use mcp_safety::lock;
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::{BoundCall, Listing, ToolSource};
use anyhow::bail;
use async_trait::async_trait;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mcp_client::{ConnectOptions, RestartPolicy, ServerSet, ServerState, SetOptions};
use mcp_protocol::CallToolResult;
use policy::Policy;
use serde_json::{Map, Value};

use crate::config::Config;
use crate::output;

/// How long `run` and `chat` wait for the first attempt of every server before the first step
/// at most (each server is bounded by its own startup timeout too; one still connecting after
/// this joins the pool at a later step).
const FIRST_STEP_WAIT: Duration = Duration::from_secs(120);

/// Where the configuration comes from, to read it again.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    /// The file (none for the demo, whose configuration is built in).
    pub(crate) path: Option<PathBuf>,
    /// `--allow-workspace-config`.
    pub(crate) allow_workspace: bool,
}

/// The running servers and the configuration they were started from.
pub(crate) struct Runtime {
    servers: ServerSet,
    config: Mutex<Config>,
    policy: Mutex<(u64, Arc<Policy>)>,
    policy_version: AtomicU64,
    source: Source,
    dirty: Arc<AtomicBool>,
    publishing: tokio::sync::Mutex<()>,
    last_error: Mutex<Option<String>>,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("servers", &self.servers).finish_non_exhaustive()
    }
}

/// Sets the dirty flag back unless disarmed: a reload dropped halfway is tried again.
struct StillDirty<'a>(Option<&'a AtomicBool>);

impl StillDirty<'_> {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for StillDirty<'_> {
    fn drop(&mut self) {
        if let Some(dirty) = self.0 {
            dirty.store(true, Ordering::SeqCst);
        }
    }
}

fn set_options(config: &Config) -> SetOptions {
    let defaults = SetOptions::default();
    SetOptions {
        connect: ConnectOptions::default(),
        restarts: RestartPolicy {
            max_restarts: config.runtime.restart_limit,
            window: config.runtime.restart_window,
            ..defaults.restarts
        },
        local_concurrency: config.runtime.local_concurrency,
        remote_concurrency: config.runtime.remote_concurrency,
        ..defaults
    }
}

impl Runtime {
    /// Starts every server, waits for their first attempts (a spinner names the ones still
    /// connecting), and watches the configuration file.
    pub(crate) async fn start(config: Config, source: Source) -> anyhow::Result<Self> {
        let servers = ServerSet::start(crate::session::client_specs(&config), set_options(&config));
        let dirty = Arc::new(AtomicBool::new(false));
        let watcher = source.path.as_ref().and_then(|path| watch(path, Arc::clone(&dirty)));
        let policy = Mutex::new((0, Arc::new(config.policy.clone())));
        let runtime = Self {
            servers,
            config: Mutex::new(config),
            policy,
            policy_version: AtomicU64::new(0),
            source,
            dirty,
            publishing: tokio::sync::Mutex::new(()),
            last_error: Mutex::new(None),
            _watcher: watcher,
        };
        runtime.wait_first_attempts().await;
        runtime.remember_eras();
        Ok(runtime)
    }

    /// Remembers what the servers connected so far answered (`eras.rs`), as `servers` and
    /// `tools` do, so the next start opens each one the way it answered.
    fn remember_eras(&self) {
        let states = self.servers.states();
        let config = lock(&self.config);
        let mut eras = crate::eras::EraMemory::load();
        eras.learn(states.iter().map(|(name, state)| (name.as_str(), state)), &config);
        eras.save();
    }

    /// The servers.
    pub(crate) fn servers(&self) -> &ServerSet {
        &self.servers
    }

    async fn wait_first_attempts(&self) {
        let pending = || -> Vec<String> {
            self.servers
                .states()
                .into_iter()
                .filter(|(_, s)| matches!(s, ServerState::Pending))
                .map(|(n, _)| n)
                .collect()
        };
        let total = self.servers.states().iter().filter(|(_, s)| !matches!(s, ServerState::Disabled)).count();
        let spinner = (total > 0 && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(ProgressStyle::default_spinner());
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        let mut events = self.servers.subscribe();
        let waiting = async {
            loop {
                let names = pending();
                if names.is_empty() {
                    return;
                }
                if let Some(bar) = &spinner {
                    let done = total.saturating_sub(names.len());
                    bar.set_message(output::one_line(
                        &format!("connecting: {} ({done} of {total} settled)…", names.join(", ")),
                        200,
                    ));
                }
                if events.recv().await.is_err() && pending().len() == names.len() {
                    // Events lost: poll briefly instead.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        // A signal ends the wait too: the caller sees it and closes the servers.
        let _ = crate::signals::interruptible(tokio::time::timeout(FIRST_STEP_WAIT, waiting)).await;
        if let Some(bar) = spinner {
            bar.finish_and_clear();
        }
    }

    /// Refuses to start when a server marked `required` did not connect, naming every one.
    pub(crate) fn check_required(&self) -> anyhow::Result<()> {
        let config = lock(&self.config);
        let required: BTreeSet<&str> = config.servers.iter().filter(|s| s.required).map(|s| s.name.as_str()).collect();
        let failed: Vec<String> = self
            .servers
            .states()
            .into_iter()
            .filter(|(name, state)| required.contains(name.as_str()) && !matches!(state, ServerState::Connected { .. }))
            .map(|(name, state)| {
                format!("  {}: {}", output::one_line(&name, 80), output::one_line(&state.to_string(), 300))
            })
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        bail!(
            "required server(s) did not connect, so nothing was started:\n{}\n(see `mcp-harness servers`; a server \
             is required when its configuration says `required = true`)",
            failed.join("\n")
        )
    }

    /// Reads the configuration again when it changed on disk (see the module docs).
    pub(crate) async fn reload_if_changed(&self) {
        if !self.dirty.load(Ordering::SeqCst) {
            return;
        }
        let _publisher = self.publishing.lock().await;
        if !self.dirty.swap(false, Ordering::SeqCst) {
            return;
        }
        let still_dirty = StillDirty(Some(&self.dirty));
        let Some(path) = self.source.path.clone() else {
            still_dirty.disarm();
            return;
        };
        let loaded = crate::session::reload_config(&path, self.source.allow_workspace);
        match loaded {
            Ok(new) => {
                let report = self.publish(new).await;
                *lock(&self.last_error) = None;
                if !report.is_empty() {
                    let _ = output::stderr(&format!("configuration reloaded: {}\n", report.join("; ")));
                }
            }
            Err(e) => {
                let message = output::one_line(&format!("{e:#}"), 1000);
                let mut last = lock(&self.last_error);
                if last.as_deref() != Some(message.as_str()) {
                    let _ = output::stderr(&format!(
                        "warning: the configuration was not reloaded ({message}); the running one stays\n"
                    ));
                    *last = Some(message);
                }
            }
        }
        still_dirty.disarm();
    }

    /// Moves the servers and the policy to `new`; returns what changed, for the user.
    async fn publish(&self, new: Config) -> Vec<String> {
        let specs = crate::session::client_specs(&new);
        let (added, changed, removed, policy_changed) = {
            let old = lock(&self.config);
            let names = |c: &Config| c.servers.iter().map(|s| s.name.clone()).collect::<BTreeSet<_>>();
            let (before, after) = (names(&old), names(&new));
            let added: Vec<String> = after.difference(&before).cloned().collect();
            let removed: Vec<String> = before.difference(&after).cloned().collect();
            let changed: Vec<String> = after
                .intersection(&before)
                .filter(|n| old.fingerprints.get(*n) != new.fingerprints.get(*n))
                .cloned()
                .collect();
            (added, changed, removed, old.policy_fingerprint != new.policy_fingerprint)
        };
        for name in &removed {
            self.servers.remove(name).await;
        }
        for spec in specs {
            if added.contains(&spec.name) {
                self.servers.add(spec);
            } else if changed.contains(&spec.name) {
                self.servers.replace(spec);
            }
        }
        if policy_changed {
            let version = self.policy_version.fetch_add(1, Ordering::SeqCst) + 1;
            *lock(&self.policy) = (version, Arc::new(new.policy.clone()));
        }
        *lock(&self.config) = new;
        let mut report = Vec::new();
        let list = |names: &[String]| names.iter().map(|n| output::one_line(n, 80)).collect::<Vec<_>>().join(", ");
        if !added.is_empty() {
            report.push(format!("added {}", list(&added)));
        }
        if !changed.is_empty() {
            report.push(format!("reconnecting {}", list(&changed)));
        }
        if !removed.is_empty() {
            report.push(format!("removed {}", list(&removed)));
        }
        if policy_changed {
            report.push("the policy changed (it applies from the next step)".to_owned());
        }
        report
    }

    /// `/mcp` in `chat`: every server's state, tool count and last error (after a reload, when
    /// the configuration changed).
    pub(crate) async fn describe(&self) -> String {
        self.reload_if_changed().await;
        let listings = self.servers.refresh().await;
        // What the next step would offer of each listing, as `servers` counts it.
        let policy = Arc::clone(&lock(&self.policy).1);
        let pool =
            crate::session::pool_of(listings.iter().map(|l| (l.name.as_str(), Arc::clone(&l.tools))), &policy).ok();
        let rows: Vec<Vec<String>> = self
            .servers
            .states()
            .into_iter()
            .map(|(name, state)| {
                let tools = listings.iter().find(|l| l.name == name).map_or_else(
                    || "-".to_owned(),
                    |l| match &pool {
                        Some(pool) => format!("{}/{}", crate::session::offered(pool, &name), l.tools.len()),
                        None => format!("?/{}", l.tools.len()),
                    },
                );
                let detail = match &state {
                    ServerState::Failed { reason, .. } => output::one_line(reason, 200),
                    ServerState::Reconnecting { .. } => output::one_line(&state.to_string(), 200),
                    _ => self.servers.last_error(&name).map(|e| output::one_line(&e, 200)).unwrap_or_default(),
                };
                vec![output::one_line(&name, 60), state.label().to_owned(), tools, detail]
            })
            .collect();
        if rows.is_empty() {
            return "no servers are configured\n".to_owned();
        }
        output::table(&["SERVER", "STATE", crate::session::TOOLS_COLUMN, "LAST ERROR"], &rows)
    }

    /// Closes every server.
    pub(crate) async fn close(self) {
        self.servers.close().await;
    }
}

/// Watches the configuration's directory (a file renamed over the old one is a change too).
fn watch(path: &std::path::Path, dirty: Arc<AtomicBool>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let name = path.file_name()?.to_owned();
    let handler = move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && event.paths.iter().any(|p| p.file_name() == Some(name.as_os_str()))
        {
            dirty.store(true, Ordering::SeqCst);
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("cannot watch the configuration for changes: {e}");
            return None;
        }
    };
    if let Err(e) = watcher.watch(dir, notify::RecursiveMode::NonRecursive) {
        tracing::warn!("cannot watch {} for changes: {e}", dir.display());
        return None;
    }
    Some(watcher)
}

#[async_trait]
impl ToolSource for Runtime {
    async fn refresh(&self) -> Listing {
        self.reload_if_changed().await;
        let mut listing = ToolSource::refresh(&self.servers).await;
        let (version, policy) = lock(&self.policy).clone();
        listing.policy = Some((version, policy));
        listing
    }

    fn generation(&self, server: &str) -> Option<u64> {
        ToolSource::generation(&self.servers, server)
    }

    async fn settled_generation(&self, server: &str) -> Option<u64> {
        ToolSource::settled_generation(&self.servers, server).await
    }

    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, String> {
        ToolSource::call(&self.servers, server, tool, arguments).await
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, String> {
        ToolSource::call_bound(&self.servers, call).await
    }

    async fn resource_servers(&self) -> Vec<String> {
        ToolSource::resource_servers(&self.servers).await
    }

    async fn resources(
        &self,
        server: &str,
    ) -> Result<(Vec<mcp_protocol::Resource>, Vec<mcp_protocol::ResourceTemplate>), String> {
        ToolSource::resources(&self.servers, server).await
    }

    async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        max_bytes: usize,
    ) -> Result<mcp_protocol::ReadResourceResult, String> {
        ToolSource::read_resource(&self.servers, server, uri, max_bytes).await
    }

    fn instructions(&self) -> Vec<(String, String)> {
        ToolSource::instructions(&self.servers)
    }
}
