//! The living runtime of a long-running front end (`run`, `chat`, a gateway): every configured
//! server kept alive by `mcp_client::ServerSet` (restarts, reconnects, states), the
//! configuration file watched and reloaded before the next use, and the `/mcp`-style
//! operations, which return data for the front end to show.
//!
//! A change to the file (editors often rename a new file over the old one: that is a change
//! too; a file written in place is changed once its writer closes it) marks the runtime dirty. Before the next listing one publisher (never two at once) reads
//! the file again: servers whose settings are unchanged (equal fingerprints) keep their
//! connections, changed ones are reconnected with the new settings, removed ones are closed, new
//! ones connect, and a changed policy applies to the next pool, all in one publication; the
//! listing after it waits for the local servers it added to start (up to their startup timeout,
//! at most [`RuntimeOptions::added_wait`]), so the next step offers them. A file
//! that no longer parses keeps the running configuration and says why
//! ([`HostEvent::ReloadFailed`]), once per distinct error. A publication cancelled halfway
//! leaves the runtime dirty, so the next listing tries again.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_client::{ConnectOptions, RestartPolicy, ServerSet, ServerState, SetOptions};
use mcp_safety::lock;
use policy::Policy;

use crate::config::{self, Config, ConfigPath, Origin, Target};
use crate::eras::EraMemory;
use crate::{HostEvent, Ports};

mod source;
mod status;

pub use status::{ActionOutcome, RequiredError, ServerAction, ServerStatus, ToolCounts};

/// What a runtime needs beyond its configuration.
#[derive(Clone)]
#[non_exhaustive]
pub struct RuntimeOptions {
    /// The host's ports (requests of servers, events).
    pub ports: Ports,
    /// Where to read the configuration again when its file changes (`path` set); `None` (or
    /// no path): never reloaded.
    pub reload: Option<ConfigPath>,
    /// How long the listing after a reload waits, at most, for the local servers the reload
    /// added to make their first attempt (each is bounded by its own startup timeout too), as
    /// a front end waits for every server before its first step. One still starting then
    /// joins a later listing ([`HostEvent::NotReady`]).
    pub added_wait: Duration,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self { ports: Ports::default(), reload: None, added_wait: DEFAULT_ADDED_WAIT }
    }
}

/// The default of [`RuntimeOptions::added_wait`].
pub const DEFAULT_ADDED_WAIT: Duration = Duration::from_secs(120);

impl std::fmt::Debug for RuntimeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeOptions")
            .field("reload", &self.reload)
            .field("added_wait", &self.added_wait)
            .finish_non_exhaustive()
    }
}

/// What one publication changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Published {
    /// Servers that joined.
    pub added: Vec<String>,
    /// Servers reconnected with new settings.
    pub changed: Vec<String>,
    /// Servers closed.
    pub removed: Vec<String>,
    /// Whether the policy changed (it applies from the next listing).
    pub policy_changed: bool,
}

/// What a [`Runtime::reload_if_changed`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reload {
    /// The file had not changed (or the runtime watches none): nothing was read.
    Clean,
    /// The file was read and published (possibly changing nothing).
    Published(Published),
    /// The file was read and cannot be used; the running configuration stays.
    Kept {
        /// Why.
        error: String,
    },
}

impl Published {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty() && !self.policy_changed
    }
}

/// The running servers and the configuration they were started from.
pub struct Runtime {
    servers: ServerSet,
    config: Mutex<Config>,
    policy: Mutex<(u64, Arc<Policy>)>,
    policy_version: AtomicU64,
    options: RuntimeOptions,
    dirty: Arc<AtomicBool>,
    /// Woken with `dirty` by the watcher ([`Runtime::file_changed`]).
    file_changed: Arc<tokio::sync::Notify>,
    publishing: tokio::sync::Mutex<()>,
    last_error: Mutex<Option<String>>,
    /// Local servers a publication added that the next listing waits for.
    added: Mutex<BTreeSet<String>>,
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
    let mut connect = ConnectOptions::default();
    connect.client.observer = crate::telemetry::observer(config);
    SetOptions {
        connect,
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
    /// Starts every server (without waiting for them: see [`Runtime::wait_first_attempts`])
    /// and watches the configuration file when `options.reload` names one. Needs a tokio
    /// runtime.
    pub fn start(config: Config, options: RuntimeOptions) -> Self {
        let servers = ServerSet::start(crate::resolve::client_specs(&config, &options.ports), set_options(&config));
        if let Some(counting) = crate::telemetry::count_events(&config, &servers) {
            tokio::spawn(counting);
        }
        let dirty = Arc::new(AtomicBool::new(false));
        let watched = options.reload.as_ref().and_then(|at| at.path.as_deref());
        let file_changed = Arc::new(tokio::sync::Notify::new());
        let watcher = watched.and_then(|path| watch(path, Arc::clone(&dirty), Arc::clone(&file_changed)));
        let policy = Mutex::new((0, Arc::new(config.policy.clone())));
        Self {
            servers,
            config: Mutex::new(config),
            policy,
            policy_version: AtomicU64::new(0),
            options,
            dirty,
            file_changed,
            publishing: tokio::sync::Mutex::new(()),
            last_error: Mutex::new(None),
            added: Mutex::new(BTreeSet::new()),
            _watcher: watcher,
        }
    }

    /// Waits until every server has made its first attempt (connected, failed, disabled), at
    /// most `limit` (each server is bounded by its own startup timeout too; one still
    /// connecting after this joins later). `progress` hears the servers still pending, how
    /// many settled and of how many, whenever that changes.
    pub async fn wait_first_attempts(&self, limit: Duration, progress: &(dyn Fn(&[String], usize, usize) + Sync)) {
        self.wait_pending(&|_| true, limit, progress).await;
    }

    /// [`Runtime::wait_first_attempts`] for the servers `among` picks.
    async fn wait_pending(
        &self,
        among: &(dyn Fn(&str) -> bool + Sync),
        limit: Duration,
        progress: &(dyn Fn(&[String], usize, usize) + Sync),
    ) {
        let pending = || -> Vec<String> {
            self.servers
                .states()
                .into_iter()
                .filter(|(n, s)| matches!(s, ServerState::Pending) && among(n))
                .map(|(n, _)| n)
                .collect()
        };
        let total =
            self.servers.states().iter().filter(|(n, s)| !matches!(s, ServerState::Disabled) && among(n)).count();
        let mut events = self.servers.subscribe();
        let waiting = async {
            loop {
                let names = pending();
                if names.is_empty() {
                    return;
                }
                progress(&names, total.saturating_sub(names.len()), total);
                if events.recv().await.is_err() && pending().len() == names.len() {
                    // Events lost: poll briefly instead.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        let _ = tokio::time::timeout(limit, waiting).await;
    }

    /// Remembers what the servers connected so far answered (`eras`), so the next start opens
    /// each one the way it answered.
    pub fn remember_eras(&self) {
        let states = self.servers.states();
        let config = lock(&self.config);
        let mut eras = EraMemory::load();
        eras.learn(states.iter().map(|(name, state)| (name.as_str(), state)), &config);
        eras.save();
    }

    /// The servers.
    pub fn servers(&self) -> &ServerSet {
        &self.servers
    }

    /// The configuration now running.
    pub fn config(&self) -> Config {
        lock(&self.config).clone()
    }

    /// The policy now published, with its version (it moves with every publication that
    /// changed it).
    pub fn policy(&self) -> (u64, Arc<Policy>) {
        lock(&self.policy).clone()
    }

    /// Refuses when a server marked `required` did not connect, naming every one.
    pub fn check_required(&self) -> Result<(), RequiredError> {
        let config = lock(&self.config);
        let required: BTreeSet<&str> = config.servers.iter().filter(|s| s.required).map(|s| s.name.as_str()).collect();
        let failed: Vec<(String, ServerState)> = self
            .servers
            .states()
            .into_iter()
            .filter(|(name, state)| required.contains(name.as_str()) && !matches!(state, ServerState::Connected { .. }))
            .collect();
        if failed.is_empty() { Ok(()) } else { Err(RequiredError { failed }) }
    }

    /// Reads the configuration again when its file changed (see the module docs), and
    /// publishes it.
    pub async fn reload_if_changed(&self) -> Reload {
        if !self.dirty.load(Ordering::SeqCst) {
            return Reload::Clean;
        }
        let _publisher = self.publishing.lock().await;
        if !self.dirty.swap(false, Ordering::SeqCst) {
            return Reload::Clean;
        }
        let still_dirty = StillDirty(Some(&self.dirty));
        let Some(path) = self.options.reload.as_ref().and_then(|at| at.path.clone()) else {
            still_dirty.disarm();
            return Reload::Clean;
        };
        let allow_workspace = self.options.reload.as_ref().is_some_and(|at| at.allow_workspace);
        // Nothing is asked while the runtime goes on (the conversation owns the terminal), and
        // the file's warnings were shown when it started.
        let loaded = config::load_at(&ConfigPath::new(Some(path), Origin::Flag, allow_workspace), None);
        let outcome = match loaded {
            Ok(new) => {
                let published = self.publish_locked(new).await;
                *lock(&self.last_error) = None;
                if !published.is_empty() {
                    (self.options.ports.events)(&HostEvent::Reloaded(published.clone()));
                }
                Reload::Published(published)
            }
            Err(e) => {
                let message = e.to_string();
                let mut last = lock(&self.last_error);
                if last.as_deref() != Some(message.as_str()) {
                    (self.options.ports.events)(&HostEvent::ReloadFailed { message: message.clone() });
                    *last = Some(message.clone());
                }
                Reload::Kept { error: message }
            }
        };
        still_dirty.disarm();
        outcome
    }

    /// Waits until the watcher sees the configuration file change (at once when it changed
    /// since the last wait): a front end that publishes without being asked (the gateway, which
    /// tells its clients) calls [`Runtime::reload_if_changed`] then. Never returns for a runtime
    /// that watches no file.
    pub async fn file_changed(&self) {
        self.file_changed.notified().await;
    }

    /// Waits for the local servers that publications added since the last listing to make
    /// their first attempt (at most [`RuntimeOptions::added_wait`]), so the listing after an
    /// edit offers a server the edit added, as the first step offers those configured at the
    /// start; one that did not connect is told ([`HostEvent::NotReady`]). Remote servers join
    /// when they connect. A wait dropped halfway is made by the next listing.
    pub(crate) async fn wait_for_added(&self) {
        let added = lock(&self.added).clone();
        if added.is_empty() {
            return;
        }
        self.wait_pending(&|name| added.contains(name), self.options.added_wait, &|_, _, _| {}).await;
        lock(&self.added).retain(|name| !added.contains(name));
        for server in added {
            match self.servers.state(&server) {
                Some(ServerState::Connected { .. } | ServerState::Disabled) | None => {}
                Some(state) => (self.options.ports.events)(&HostEvent::NotReady { server, state }),
            }
        }
    }

    /// Moves the servers and the policy to `new` at once (one publisher at a time); what
    /// changed.
    pub async fn publish(&self, new: Config) -> Published {
        let _publisher = self.publishing.lock().await;
        self.publish_locked(new).await
    }

    async fn publish_locked(&self, new: Config) -> Published {
        let specs = crate::resolve::client_specs(&new, &self.options.ports);
        let published = {
            let old = lock(&self.config);
            let names = |c: &Config| c.servers.iter().map(|s| s.name.clone()).collect::<BTreeSet<_>>();
            let (before, after) = (names(&old), names(&new));
            let fingerprint = |c: &Config, n: &str| c.server(n).map(|s| s.fingerprint.clone());
            Published {
                added: after.difference(&before).cloned().collect(),
                removed: before.difference(&after).cloned().collect(),
                changed: after
                    .intersection(&before)
                    .filter(|n| fingerprint(&old, n) != fingerprint(&new, n))
                    .cloned()
                    .collect(),
                policy_changed: old.policy_fingerprint != new.policy_fingerprint,
            }
        };
        // Every change is made before anything is awaited: a reload cut short (its client gone)
        // must not leave the set and the configuration of two generations. The closes run on
        // their own and are waited for last.
        let closing: Vec<_> =
            published.removed.iter().filter_map(|name| self.servers.take_out(name)).map(tokio::spawn).collect();
        let local =
            |name: &str| new.server(name).is_some_and(|s| s.enabled && matches!(s.target, Target::Stdio { .. }));
        {
            let mut added = lock(&self.added);
            added.retain(|name| !published.removed.contains(name));
            added.extend(published.added.iter().filter(|name| local(name)).cloned());
        }
        for spec in specs {
            if published.added.contains(&spec.name) {
                self.servers.add(spec);
            } else if published.changed.contains(&spec.name) {
                self.servers.replace(spec);
            }
        }
        if published.policy_changed {
            let version = self.policy_version.fetch_add(1, Ordering::SeqCst) + 1;
            *lock(&self.policy) = (version, Arc::new(new.policy.clone()));
        }
        *lock(&self.config) = new;
        for closed in closing {
            let _ = closed.await;
        }
        published
    }

    /// Closes every server.
    pub async fn close(self) {
        self.servers.close().await;
    }
}

/// Whether an event on the configuration file may have changed what it holds. Reading it is
/// not: inotify reports every open, read and close, the reload's own read included, and a
/// runtime that took those for edits re-read its file forever (another process reading it, a
/// second `serve` on the same file or `cat`, started the loop: one CPU busy, calls slowed 30x).
///
/// Nor is a write still under way, where the watcher says when a writer closed the file
/// (inotify, on Linux): a file truncated and written in parts (`open('w')` then writes) read
/// between two parts parsed as a smaller configuration (a `[policy]` table not yet written: a
/// denied tool listed and callable, every server of a file read empty closed and restarted). The
/// writer's close, a rename over the file and its removal are changes.
fn changes_content(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, ModifyKind};
    match kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        notify::EventKind::Access(_) => false,
        notify::EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) | notify::EventKind::Create(_) => {
            !WATCHER_TELLS_CLOSE
        }
        _ => true,
    }
}

/// Whether the platform's watcher reports a writer closing the file (inotify does).
const WATCHER_TELLS_CLOSE: bool = cfg!(target_os = "linux");

/// Watches the configuration's directory (a file renamed over the old one is a change too).
fn watch(path: &Path, dirty: Arc<AtomicBool>, changed: Arc<tokio::sync::Notify>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name()?.to_owned();
    let handler = move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && changes_content(&event.kind)
            && event.paths.iter().any(|p| p.file_name() == Some(name.as_os_str()))
        {
            dirty.store(true, Ordering::SeqCst);
            changed.notify_one();
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
