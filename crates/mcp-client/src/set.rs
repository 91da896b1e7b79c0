//! Servers kept alive: the connection lifecycle of every configured server, and each one's
//! current catalog with its generation.
//!
//! Each server has a keeper task that connects it (under the local or the remote concurrency
//! limit), publishes the live connection, and watches it: a stdio server that exits is
//! restarted (the first time at once, then with backoff, at most [`RestartPolicy::max_restarts`]
//! times in a window), a remote one that drops is reconnected with backoff up to a bound of
//! attempts; then it is `failed` until someone asks again ([`ServerSet::reconnect`]). States are
//! observable ([`ServerSet::states`], [`ServerSet::subscribe`]).
//!
//! The catalog of a connected server is listed whole (every page) before it is used; a server
//! that announced `tools/list_changed` is re-listed at the next [`ServerSet::refresh`] or on
//! demand before a call goes to it, and its **generation** moves only when the listing really
//! differs. Every new connection (a restart, a reconnect) is a new generation, listed afresh.
//! A server that is not connected contributes no tools: no ghost tools.
//!
//! Resources (with their templates) and prompts have a catalog each per server, beside the
//! tools: listed at connect when the server declares the capability, re-listed only when that
//! server announces `resources/list_changed` or `prompts/list_changed` (a tools change does not
//! re-list resources, nor the other way round), within the same [`ListLimits`] as tools. A
//! failed re-listing keeps the previous catalog.
//!
//! [`ServerSet::call`] sends a call only to the generation the caller names: that is the
//! exact connection and listing the caller was shown. A call to a server that is coming back
//! waits for it, up to its startup timeout, and is then refused if its generation moved.

use mcp_safety::lock;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_protocol::{
    CallToolResult, CompleteReference, CompleteResult, GetPromptResult, Prompt, ReadResourceResult, Resource,
    ResourceTemplate, ServerNotification, Tool,
};
use mcp_safety::Backoff;
use serde_json::{Map, Value};
use tokio::sync::broadcast::error::TryRecvError;
use tokio::sync::{Semaphore, broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use crate::client::{ClientError, ListLimits, Progress};
use crate::servers::{ConnectOptions, ServerConnection, ServerSpec, ServerState, connect};
use crate::transport::ProcessExit;

/// One connected server's current tools and the generation of that listing.
#[derive(Debug, Clone)]
pub struct ServerListing {
    /// The server's configured name.
    pub name: String,
    /// Its tools.
    pub tools: Arc<[Tool]>,
    /// Changes whenever the listing changes, and with every new connection.
    pub generation: u64,
}

/// One server's resources and resource templates, as last listed.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ResourceCatalog {
    /// Its resources.
    pub resources: Arc<[Resource]>,
    /// Its resource templates.
    pub templates: Arc<[ResourceTemplate]>,
}

/// A list kept per connection beside the tools (resources, prompts): listed when first needed
/// and again after the server announced a change of it. The async lock makes callers that
/// arrive during a listing wait for it instead of seeing nothing.
struct Cached<T> {
    value: tokio::sync::Mutex<Option<T>>,
    /// Not listed yet, or a change was announced since.
    changed: AtomicBool,
}

impl<T: Clone> Cached<T> {
    fn new() -> Self {
        Self { value: tokio::sync::Mutex::new(None), changed: AtomicBool::new(true) }
    }

    /// The current list, listed (again) first when it is missing or announced changed. A
    /// re-listing that fails keeps the previous list and says why in `last_error`; with no
    /// previous list the failure is the answer (and the next ask tries again).
    async fn get(
        &self,
        server: &str,
        what: &str,
        last_error: &Mutex<Option<String>>,
        list: impl AsyncFnOnce() -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let mut value = self.value.lock().await;
        if self.changed.swap(false, Ordering::SeqCst) || value.is_none() {
            match list().await {
                Ok(fresh) => *value = Some(fresh),
                Err(e) if value.is_some() => {
                    let why = format!("re-listing its {what} after a change failed; the previous list stays: {e}");
                    tracing::warn!(server = %server, "{why}");
                    *lock(last_error) = Some(why);
                }
                Err(e) => {
                    self.changed.store(true, Ordering::SeqCst);
                    return Err(e);
                }
            }
        }
        match &*value {
            Some(current) => Ok(current.clone()),
            None => Err(ClientError::ConnectionClosed {
                reason: format!("the {what} of server {server:?} were never listed"),
            }),
        }
    }
}

/// How stdio servers that exit are restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed within `window` before the server is `failed`. Default 3.
    pub max_restarts: u32,
    /// The window. Default 60 s.
    pub window: Duration,
    /// Delays between restarts after the first, which is immediate. Default 500 ms doubling to 10 s.
    pub backoff: Backoff,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            max_restarts: 3,
            window: Duration::from_secs(60),
            backoff: Backoff {
                initial_delay: Duration::from_millis(500),
                max_delay: Duration::from_secs(10),
                max_attempts: u32::MAX,
            },
        }
    }
}

/// Settings of a [`ServerSet`].
#[derive(Debug, Clone)]
pub struct SetOptions {
    /// Client identity, capabilities, handler and listing limits of every connection.
    pub connect: ConnectOptions,
    /// Restarting stdio servers.
    pub restarts: RestartPolicy,
    /// Reconnecting remote servers: exponential, jittered, at most `max_attempts` failures in a
    /// row. Default 1 s doubling to 30 s, 5 attempts.
    pub reconnect: Backoff,
    /// Stdio servers starting at once (process spawning is CPU-bound). Default 8.
    pub local_concurrency: usize,
    /// Remote servers connecting at once (network-bound). Default 32.
    pub remote_concurrency: usize,
}

impl Default for SetOptions {
    fn default() -> Self {
        Self {
            connect: ConnectOptions::default(),
            restarts: RestartPolicy::default(),
            reconnect: Backoff {
                initial_delay: Duration::from_secs(1),
                max_delay: Duration::from_secs(30),
                max_attempts: 5,
            },
            local_concurrency: 8,
            remote_concurrency: 32,
        }
    }
}

/// What happened to a server, for whoever watches ([`ServerSet::subscribe`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerEvent {
    /// The server.
    pub server: String,
    /// Its new state.
    pub state: ServerState,
    /// The generation of the listing published with it: a new connection's (`Connected`), or
    /// a re-listing's.
    pub generation: Option<u64>,
    /// A re-listing after the server announced a change published `generation`; its state did
    /// not change (`state` is the one it is in).
    pub relisted: bool,
}

/// Why a call through the set was not answered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetCallError {
    /// No server of that name.
    #[error("no server named {server:?}")]
    UnknownServer {
        /// The name.
        server: String,
    },
    /// The server is not connected (and did not come back in time).
    #[error("server {server:?} is {state}")]
    Unavailable {
        /// The server.
        server: String,
        /// Where it stands.
        state: ServerState,
    },
    /// The server's tools (or its connection) changed since the caller's generation; nothing
    /// was sent.
    #[error(
        "the tools of server {server:?} changed (it was restarted or re-listed) since they were shown; the call was not sent"
    )]
    Stale {
        /// The server.
        server: String,
    },
    /// The call failed on the connection.
    #[error("server {server:?}: {error}")]
    Call {
        /// The server.
        server: String,
        /// What failed.
        error: ClientError,
    },
}

/// A request to a server's keeper.
enum Control {
    Reconnect,
    Enable,
    Disable,
    Replace(Box<ServerSpec>),
}

/// A published connection: its client and its current listing.
struct Live {
    connection: ServerConnection,
    listing: Mutex<(Arc<[Tool]>, u64)>,
    /// The server's notifications, read whenever a generation is asked for: a change the
    /// client has received is known at once. (A task reading them in the background could
    /// lag behind a call that the change should refuse: about one run in 150 under load.)
    notifications: Mutex<Option<broadcast::Receiver<ServerNotification>>>,
    changed: AtomicBool,
    /// Its resources and templates (re-listed on `resources/list_changed` only).
    resources: Cached<ResourceCatalog>,
    /// Its prompts (re-listed on `prompts/list_changed` only).
    prompts: Cached<Arc<[Prompt]>>,
}

impl Live {
    /// Takes in what the server announced since the last look.
    fn catch_up(&self) {
        let mut notifications = lock(&self.notifications);
        let Some(receiver) = notifications.as_mut() else { return };
        loop {
            match receiver.try_recv() {
                // Lagging lost some notifications: one of them may have been a change.
                Ok(ServerNotification::ToolsListChanged) => self.changed.store(true, Ordering::SeqCst),
                Ok(ServerNotification::ResourcesListChanged) => self.resources.changed.store(true, Ordering::SeqCst),
                Ok(ServerNotification::PromptsListChanged) => self.prompts.changed.store(true, Ordering::SeqCst),
                Err(TryRecvError::Lagged(_)) => {
                    for changed in [&self.changed, &self.resources.changed, &self.prompts.changed] {
                        changed.store(true, Ordering::SeqCst);
                    }
                }
                Ok(_) => {}
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }
}

struct Slot {
    name: String,
    spec: Mutex<ServerSpec>,
    state: watch::Sender<ServerState>,
    live: Mutex<Option<Arc<Live>>>,
    /// The last generation handed out: it never goes back, across connections.
    generation: AtomicU64,
    control: mpsc::UnboundedSender<Control>,
    keeper: Mutex<Option<JoinHandle<()>>>,
    /// Why its last re-listing failed (cleared by the next that works).
    last_error: Mutex<Option<String>>,
    /// How its process ended last, while it is not connected again.
    exit: Mutex<Option<ProcessExit>>,
}

struct Shared {
    options: SetOptions,
    local: Semaphore,
    remote: Semaphore,
    events: broadcast::Sender<ServerEvent>,
    restarts: AtomicU64,
}

/// Servers kept alive and watched for tool changes.
pub struct ServerSet {
    slots: Mutex<BTreeMap<String, Arc<Slot>>>,
    shared: Arc<Shared>,
    limits: ListLimits,
}

impl fmt::Debug for ServerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(lock(&self.slots).keys()).finish()
    }
}

impl Slot {
    fn set_state(&self, shared: &Shared, state: ServerState) {
        self.set_state_published(shared, state, None);
    }

    /// [`Slot::set_state`], telling the generation just published with it.
    fn set_state_published(&self, shared: &Shared, state: ServerState, generation: Option<u64>) {
        self.state.send_replace(state.clone());
        let _ = shared.events.send(ServerEvent { server: self.name.clone(), state, generation, relisted: false });
    }

    fn live(&self) -> Option<Arc<Live>> {
        lock(&self.live).clone()
    }

    /// Publishes a connection as the next generation.
    fn publish(&self, mut connection: ServerConnection) -> Arc<Live> {
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let (subscribed, stale) = connection.take_notifications();
        let notifications = connection.client().map(|client| {
            // 2026-07-28 servers announce list changes only on a subscriptions/listen stream
            // (a no-op for older servers).
            if let Err(e) = client.listen_for_changes() {
                tracing::warn!(server = %self.name, "cannot listen for tool changes: {e}");
            }
            subscribed.unwrap_or_else(|| client.subscribe())
        });
        let listing = Mutex::new((Arc::clone(connection.tools()), generation));
        let live = Arc::new(Live {
            connection,
            listing,
            notifications: Mutex::new(notifications),
            changed: AtomicBool::new(stale),
            resources: Cached::new(),
            prompts: Cached::new(),
        });
        *lock(&self.live) = Some(Arc::clone(&live));
        *lock(&self.exit) = None;
        live
    }

    /// Takes the published connection away (its tools leave the next snapshot).
    fn unpublish(&self) -> Option<Arc<Live>> {
        lock(&self.live).take()
    }
}

impl ServerSet {
    /// Starts and keeps every server: each connects in the background (its state `pending`
    /// until its first attempt ends). Must run inside a Tokio runtime.
    pub fn start(specs: Vec<ServerSpec>, options: SetOptions) -> Self {
        let limits = options.connect.list_limits;
        let shared = Arc::new(Shared {
            local: Semaphore::new(options.local_concurrency.clamp(1, Semaphore::MAX_PERMITS)),
            remote: Semaphore::new(options.remote_concurrency.clamp(1, Semaphore::MAX_PERMITS)),
            events: broadcast::channel(256).0,
            restarts: AtomicU64::new(0),
            options,
        });
        let set = Self { slots: Mutex::new(BTreeMap::new()), shared, limits };
        for spec in specs {
            set.add(spec);
        }
        set
    }

    /// Watches connections made elsewhere (by [`crate::connect_all`]): no keeper; a server that
    /// dies stays failed.
    pub fn new(connections: Vec<ServerConnection>) -> Self {
        let set = Self::start(Vec::new(), SetOptions::default());
        for connection in connections {
            let (control, _) = mpsc::unbounded_channel();
            let state = connection.state().clone();
            let slot = Arc::new(Slot {
                name: connection.name().to_owned(),
                spec: Mutex::new(ServerSpec::new(connection.name(), Arc::new(NoConnector))),
                state: watch::Sender::new(state),
                live: Mutex::new(None),
                generation: AtomicU64::new(0),
                control,
                keeper: Mutex::new(None),
                last_error: Mutex::new(None),
                exit: Mutex::new(None),
            });
            if connection.is_connected() {
                slot.publish(connection);
            }
            lock(&set.slots).insert(slot.name.clone(), slot);
        }
        set
    }

    /// Adds a server (replacing one of the same name) and starts keeping it.
    pub fn add(&self, spec: ServerSpec) {
        let (control, requests) = mpsc::unbounded_channel();
        let initial = if spec.enabled { ServerState::Pending } else { ServerState::Disabled };
        let slot = Arc::new(Slot {
            name: spec.name.clone(),
            spec: Mutex::new(spec),
            state: watch::Sender::new(initial),
            live: Mutex::new(None),
            generation: AtomicU64::new(0),
            control,
            keeper: Mutex::new(None),
            last_error: Mutex::new(None),
            exit: Mutex::new(None),
        });
        let keeper = tokio::spawn(keep(Arc::clone(&slot), Arc::clone(&self.shared), requests));
        *lock(&slot.keeper) = Some(keeper);
        let previous = lock(&self.slots).insert(slot.name.clone(), slot);
        if let Some(previous) = previous {
            tokio::spawn(close_slot(previous));
        }
    }

    /// Stops keeping a server and closes it (its process reaped).
    pub async fn remove(&self, name: &str) -> bool {
        match self.take_out(name) {
            Some(closing) => {
                closing.await;
                true
            }
            None => false,
        }
    }

    /// Stops keeping a server at once (it is gone from the set when this returns), and gives
    /// back what closes it: for a caller that must change several things together before it
    /// waits. Dropped unpolled, the server is left to the runtime to end; spawn it to be sure.
    pub fn take_out(&self, name: &str) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        let slot = lock(&self.slots).remove(name)?;
        Some(close_slot(slot))
    }

    /// Replaces a server's configuration: it is reconnected with the new one.
    pub fn replace(&self, spec: ServerSpec) -> bool {
        self.send(&spec.name.clone(), Control::Replace(Box::new(spec)))
    }

    /// Reconnects a server now, forgetting its restart history (after a failure, a login, or
    /// on request).
    pub fn reconnect(&self, name: &str) -> bool {
        self.send(name, Control::Reconnect)
    }

    /// Enables or disables a server for this session (a disabled one is closed).
    pub fn set_enabled(&self, name: &str, enabled: bool) -> bool {
        self.send(name, if enabled { Control::Enable } else { Control::Disable })
    }

    fn send(&self, name: &str, control: Control) -> bool {
        self.find(name).is_some_and(|slot| slot.control.send(control).is_ok())
    }

    fn find(&self, name: &str) -> Option<Arc<Slot>> {
        lock(&self.slots).get(name).cloned()
    }

    /// Every server's name and state, by name.
    pub fn states(&self) -> Vec<(String, ServerState)> {
        lock(&self.slots).values().map(|s| (s.name.clone(), s.state.borrow().clone())).collect()
    }

    /// A server's state.
    pub fn state(&self, name: &str) -> Option<ServerState> {
        self.find(name).map(|s| s.state.borrow().clone())
    }

    /// Why the server's last re-listing failed, while its previous listing stays in force.
    pub fn last_error(&self, name: &str) -> Option<String> {
        lock(&self.find(name)?.last_error).clone()
    }

    /// How `name`'s process ended last, while it is not connected again (a stdio server that
    /// exited, or was killed, and has not come back): typed, beside the reason in its state.
    pub fn last_exit(&self, name: &str) -> Option<ProcessExit> {
        *lock(&self.find(name)?.exit)
    }

    /// State changes as they happen (a subscriber that falls behind loses the oldest).
    pub fn subscribe(&self) -> broadcast::Receiver<ServerEvent> {
        self.shared.events.subscribe()
    }

    /// How many restarts and reconnects were made so far.
    pub fn restarts(&self) -> u64 {
        self.shared.restarts.load(Ordering::SeqCst)
    }

    /// Waits until every server has finished its first attempt (or `timeout` passed).
    pub async fn settled(&self, timeout: Duration) {
        let slots: Vec<Arc<Slot>> = lock(&self.slots).values().cloned().collect();
        let all = async {
            for slot in slots {
                let mut state = slot.state.subscribe();
                let _ = state.wait_for(|s| !matches!(s, ServerState::Pending)).await;
            }
        };
        let _ = tokio::time::timeout(timeout, all).await;
    }

    /// Every connected server's current listing, after re-listing the servers that announced
    /// a change. A failed re-listing keeps the previous one (with a warning).
    pub async fn refresh(&self) -> Vec<ServerListing> {
        let slots: Vec<Arc<Slot>> = lock(&self.slots).values().cloned().collect();
        let mut listings = Vec::with_capacity(slots.len());
        for slot in slots {
            let Some(live) = slot.live() else { continue };
            self.relist_if_changed(&slot, &live).await;
            let (tools, generation) = lock(&live.listing).clone();
            listings.push(ServerListing { name: slot.name.clone(), tools, generation });
        }
        listings
    }

    /// Re-lists a server that announced a change, all pages first: the generation moves only
    /// when the listing really differs, and a listing that fails keeps the old one.
    async fn relist_if_changed(&self, slot: &Slot, live: &Live) {
        let Some(client) = live.connection.client() else { return };
        live.catch_up();
        if !live.changed.swap(false, Ordering::SeqCst) {
            return;
        }
        match client.list_all_tools(self.limits).await {
            Ok(tools) => {
                *lock(&slot.last_error) = None;
                let published = {
                    let mut current = lock(&live.listing);
                    (*current.0 != *tools).then(|| {
                        let generation = slot.generation.fetch_add(1, Ordering::SeqCst) + 1;
                        *current = (Arc::from(tools), generation);
                        generation
                    })
                };
                if let Some(generation) = published {
                    let state = slot.state.borrow().clone();
                    let event =
                        ServerEvent { server: slot.name.clone(), state, generation: Some(generation), relisted: true };
                    let _ = self.shared.events.send(event);
                }
            }
            Err(e) => {
                let why = format!("re-listing its tools after a change failed; the previous list stays: {e}");
                tracing::warn!(server = %slot.name, "{why}");
                *lock(&slot.last_error) = Some(why);
            }
        }
    }

    /// The generation of `server`'s listing now; `u64::MAX` when a change was announced and
    /// not listed yet. `None` when it is not connected or unknown.
    pub fn generation(&self, server: &str) -> Option<u64> {
        let live = self.find(server)?.live()?;
        live.catch_up();
        if live.changed.load(Ordering::SeqCst) {
            return Some(u64::MAX);
        }
        Some(lock(&live.listing).1)
    }

    /// The generation once the server is settled: a server coming back is waited for (up to
    /// its startup timeout) and one that announced a change is re-listed now.
    pub async fn settled_generation(&self, server: &str) -> Option<u64> {
        let slot = self.find(server)?;
        let live = wait_live(&slot).await?;
        self.relist_if_changed(&slot, &live).await;
        Some(lock(&live.listing).1)
    }

    /// Calls tool `tool` (its raw name) of `server` under its tool timeout, on the connection
    /// of `generation` when given (refused, unsent, when the server's generation moved).
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        generation: Option<u64>,
        progress: Option<mpsc::Sender<Progress>>,
    ) -> Result<CallToolResult, SetCallError> {
        let slot = self.find(server).ok_or_else(|| SetCallError::UnknownServer { server: server.to_owned() })?;
        let Some(live) = wait_live(&slot).await else {
            let state = slot.state.borrow().clone();
            return Err(SetCallError::Unavailable { server: server.to_owned(), state });
        };
        if let Some(expected) = generation {
            self.relist_if_changed(&slot, &live).await;
            if lock(&live.listing).1 != expected {
                return Err(SetCallError::Stale { server: server.to_owned() });
            }
        }
        live.connection
            .call_tool_with_progress(tool, arguments, progress)
            .await
            .map_err(|error| SetCallError::Call { server: server.to_owned(), error })
    }

    /// The `instructions` of every connected server that sent some (its initialize or
    /// discover result), by server name; raw server text.
    pub fn instructions(&self) -> Vec<(String, String)> {
        let slots: Vec<Arc<Slot>> = lock(&self.slots).values().cloned().collect();
        slots
            .iter()
            .filter_map(|slot| {
                let live = slot.live()?;
                let text = live.connection.client()?.server_info()?.instructions?;
                Some((slot.name.clone(), text))
            })
            .collect()
    }

    /// The names of the servers connected now, by name.
    pub fn connected(&self) -> Vec<String> {
        lock(&self.slots).values().filter(|s| s.live().is_some()).map(|s| s.name.clone()).collect()
    }

    /// `server`'s resource catalog: resources and templates, within the set's listing limits
    /// (none when it does not declare `resources`), re-listed first when it announced a change.
    pub async fn resource_catalog(&self, server: &str) -> Result<ResourceCatalog, SetCallError> {
        let (slot, live) = self.live_of(server).await?;
        live.catch_up();
        list_resources(&slot, &live, self.limits)
            .await
            .map_err(|error| SetCallError::Call { server: server.to_owned(), error })
    }

    /// Every resource and resource template of `server`, from its catalog (see
    /// [`ServerSet::resource_catalog`]).
    pub async fn resources(&self, server: &str) -> Result<(Vec<Resource>, Vec<ResourceTemplate>), SetCallError> {
        let catalog = self.resource_catalog(server).await?;
        Ok((catalog.resources.to_vec(), catalog.templates.to_vec()))
    }

    /// `server`'s prompts from its catalog, within the set's listing limits (none when it does
    /// not declare `prompts`), re-listed first when it announced a change.
    pub async fn prompts(&self, server: &str) -> Result<Vec<Prompt>, SetCallError> {
        let (slot, live) = self.live_of(server).await?;
        live.catch_up();
        let prompts = list_prompts(&slot, &live, self.limits)
            .await
            .map_err(|error| SetCallError::Call { server: server.to_owned(), error })?;
        Ok(prompts.to_vec())
    }

    /// `prompts/get` of prompt `name` of `server` with its arguments.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<GetPromptResult, SetCallError> {
        self.on_client(server, async |client| client.get_prompt(name, arguments).await).await
    }

    /// The slot and live connection of `server`, waiting for one coming back as a call does.
    async fn live_of(&self, server: &str) -> Result<(Arc<Slot>, Arc<Live>), SetCallError> {
        let slot = self.find(server).ok_or_else(|| SetCallError::UnknownServer { server: server.to_owned() })?;
        match wait_live(&slot).await {
            Some(live) => Ok((slot, live)),
            None => {
                let state = slot.state.borrow().clone();
                Err(SetCallError::Unavailable { server: server.to_owned(), state })
            }
        }
    }

    /// `resources/read` of `uri` on `server`; an answer over `max_bytes` is refused (see
    /// [`Client::read_resource`](crate::Client::read_resource)).
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        max_bytes: usize,
    ) -> Result<ReadResourceResult, SetCallError> {
        self.on_client(server, async |client| client.read_resource(uri, max_bytes).await).await
    }

    /// `completion/complete` on `server` (see [`Client::complete`](crate::Client::complete)).
    pub async fn complete(
        &self,
        server: &str,
        reference: CompleteReference,
        argument: &str,
        value: &str,
        context: Option<Map<String, Value>>,
    ) -> Result<CompleteResult, SetCallError> {
        self.on_client(server, async |client| client.complete(reference, argument, value, context).await).await
    }

    /// A request the set has no method of its own for (`resources/subscribe`, ...) on
    /// `server`'s live client, waiting for a server that is coming back as a call does; its
    /// result decoded.
    pub async fn request<P, R>(&self, server: &str, method: &str, params: Option<&P>) -> Result<R, SetCallError>
    where
        P: serde::Serialize + ?Sized + Sync,
        R: serde::de::DeserializeOwned,
    {
        self.on_client(server, async |client| client.request(method, params, crate::RequestOptions::default()).await)
            .await
    }

    /// Runs `ask` on `server`'s live client, waiting for a server that is coming back as a
    /// call does.
    async fn on_client<T>(
        &self,
        server: &str,
        ask: impl AsyncFnOnce(&crate::Client) -> Result<T, ClientError>,
    ) -> Result<T, SetCallError> {
        let slot = self.find(server).ok_or_else(|| SetCallError::UnknownServer { server: server.to_owned() })?;
        let live = wait_live(&slot).await;
        let Some(client) = live.as_ref().and_then(|l| l.connection.client()) else {
            let state = slot.state.borrow().clone();
            return Err(SetCallError::Unavailable { server: server.to_owned(), state });
        };
        ask(client).await.map_err(|error| SetCallError::Call { server: server.to_owned(), error })
    }

    /// Closes every server and waits until all are closed and reaped.
    pub async fn close(self) {
        let slots: Vec<Arc<Slot>> = std::mem::take(&mut *lock(&self.slots)).into_values().collect();
        let mut set = tokio::task::JoinSet::new();
        for slot in slots {
            set.spawn(close_slot(slot));
        }
        while set.join_next().await.is_some() {}
    }
}

/// The resource catalog of a connection, listed first when it is missing or changed.
async fn list_resources(slot: &Slot, live: &Live, limits: ListLimits) -> Result<ResourceCatalog, ClientError> {
    let Some(client) = live.connection.client() else {
        return Ok(ResourceCatalog::default());
    };
    live.resources
        .get(&slot.name, "resources", &slot.last_error, async || {
            let resources = client.list_all_resources(limits).await?;
            let templates = client.list_all_resource_templates(limits).await?;
            Ok(ResourceCatalog { resources: resources.into(), templates: templates.into() })
        })
        .await
}

/// The prompt catalog of a connection, listed first when it is missing or changed.
async fn list_prompts(slot: &Slot, live: &Live, limits: ListLimits) -> Result<Arc<[Prompt]>, ClientError> {
    let Some(client) = live.connection.client() else {
        return Ok(Arc::from(Vec::new()));
    };
    live.prompts
        .get(&slot.name, "prompts", &slot.last_error, async || Ok(client.list_all_prompts(limits).await?.into()))
        .await
}

/// Lists a new connection's resources and prompts (only what it declared: the others are
/// empty, unasked) within its startup timeout, so the catalogs are there when first wanted. It
/// runs beside the connection, which is `connected` (its tools usable) meanwhile: a slow
/// resource listing does not hold the tools back, and whoever asks for a catalog while it is
/// being listed waits for that listing. A failure here is not the connection's: the catalog
/// is listed again when it is asked for.
async fn list_catalogs(slot: &Slot, live: &Live, limits: ListLimits, timeout: Duration) {
    let both = async {
        if let Err(e) = list_resources(slot, live, limits).await {
            tracing::warn!(server = %slot.name, "listing its resources failed; they are listed again when asked for: {e}");
        }
        if let Err(e) = list_prompts(slot, live, limits).await {
            tracing::warn!(server = %slot.name, "listing its prompts failed; they are listed again when asked for: {e}");
        }
    };
    if tokio::time::timeout(timeout, both).await.is_err() {
        tracing::warn!(server = %slot.name, "listing its resources and prompts took over {timeout:?}; they are listed when asked for");
    }
}

/// The live connection of a slot, waiting (up to the startup timeout) for one that is on its
/// way.
async fn wait_live(slot: &Slot) -> Option<Arc<Live>> {
    if let Some(live) = slot.live() {
        return Some(live);
    }
    let timeout = lock(&slot.spec).startup_timeout;
    let mut state = slot.state.subscribe();
    let wait = async {
        loop {
            // A connection that just ended still shows `connected` until its keeper decides.
            let connected_without_live = {
                let current = state.borrow_and_update();
                if !current.is_transient() && !matches!(*current, ServerState::Connected { .. }) {
                    return;
                }
                matches!(*current, ServerState::Connected { .. })
            };
            if connected_without_live && slot.live().is_some() {
                return;
            }
            if state.changed().await.is_err() {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(timeout, wait).await;
    slot.live()
}

/// Stops a slot's keeper and closes its connection.
async fn close_slot(slot: Arc<Slot>) {
    let keeper = lock(&slot.keeper).take();
    if let Some(keeper) = keeper {
        keeper.abort();
        let _ = keeper.await;
    }
    if let Some(live) = slot.unpublish() {
        close_live(live).await;
    }
}

/// Closes a connection gracefully once no call holds it any more (a call in flight keeps it
/// alive until it returns; then the last holder's drop kills the process group).
async fn close_live(live: Arc<Live>) {
    match Arc::try_unwrap(live) {
        Ok(live) => {
            live.connection.close().await;
        }
        Err(shared) => {
            if let Some(client) = shared.connection.client() {
                let _ = client.close().await;
            }
        }
    }
}

/// A placeholder for servers the set did not start (they are never reconnected).
#[derive(Debug)]
struct NoConnector;

#[async_trait::async_trait]
impl crate::servers::Connector for NoConnector {
    async fn open(&self, name: &str) -> Result<crate::servers::Opened, crate::transport::TransportError> {
        Err(crate::transport::TransportError::Config(format!("server {name:?} was connected outside the set")))
    }
}

/// What the keeper does after a connection ended or an attempt failed.
enum After {
    Retry(Duration),
    GiveUp(String),
}

/// The connection lifecycle of one server.
async fn keep(slot: Arc<Slot>, shared: Arc<Shared>, mut requests: mpsc::UnboundedReceiver<Control>) {
    let mut restarts: VecDeque<Instant> = VecDeque::new();
    let mut failures: u32 = 0;
    // Connections of a remote server lost within the restart window of being made, in a row.
    let mut quick_drops: u32 = 0;
    loop {
        let spec = lock(&slot.spec).clone();
        if !spec.enabled {
            slot.set_state(&shared, ServerState::Disabled);
            match requests.recv().await {
                Some(control) => {
                    apply(&slot, control, &mut restarts, &mut failures, &mut quick_drops);
                    continue;
                }
                None => return,
            }
        }
        let local = spec.connector.is_local();
        let connection = {
            let semaphore = if local { &shared.local } else { &shared.remote };
            let Ok(_permit) = semaphore.acquire().await else { return };
            connect(spec.clone(), &shared.options.connect).await
        };
        let reason = match connection.state().clone() {
            ServerState::Connected { .. } => {
                failures = 0;
                let connected_at = Instant::now();
                let live = slot.publish(connection);
                let catalogs = {
                    let (slot, live) = (Arc::clone(&slot), Arc::clone(&live));
                    let limits = shared.options.connect.list_limits;
                    tokio::spawn(async move { list_catalogs(&slot, &live, limits, spec.startup_timeout).await })
                };
                let generation = lock(&live.listing).1;
                slot.set_state_published(&shared, live.connection.state().clone(), Some(generation));
                let ended = match live.connection.client() {
                    Some(client) => {
                        tokio::select! {
                            reason = client.closed() => {
                                *lock(&slot.exit) = client.exit();
                                Ok(reason)
                            }
                            control = requests.recv() => Err(control),
                        }
                    }
                    None => Ok("the connection has no client".to_owned()),
                };
                // Its hold on the connection goes before the connection is closed.
                catalogs.abort();
                let _ = catalogs.await;
                slot.unpublish();
                match ended {
                    Ok(reason) => {
                        drop(live);
                        // A connection lost soon after it was made counts as another in a
                        // row, so a server that accepts and drops at once is given up on, not
                        // reconnected (and relisted) forever; one that lasted starts afresh.
                        if connected_at.elapsed() < shared.options.restarts.window {
                            quick_drops = quick_drops.saturating_add(1);
                        } else {
                            quick_drops = 0;
                        }
                        format!("the connection was lost: {reason}")
                    }
                    Err(control) => {
                        close_live(live).await;
                        match control {
                            Some(control) => {
                                apply(&slot, control, &mut restarts, &mut failures, &mut quick_drops);
                                continue;
                            }
                            None => return,
                        }
                    }
                }
            }
            ServerState::Failed { needs_auth: true, .. } => {
                slot.set_state(&shared, connection.state().clone());
                match requests.recv().await {
                    Some(control) => {
                        apply(&slot, control, &mut restarts, &mut failures, &mut quick_drops);
                        continue;
                    }
                    None => return,
                }
            }
            ServerState::Failed { reason, .. } => reason,
            other => {
                slot.set_state(&shared, other);
                match requests.recv().await {
                    Some(control) => {
                        apply(&slot, control, &mut restarts, &mut failures, &mut quick_drops);
                        continue;
                    }
                    None => return,
                }
            }
        };
        let after = if local {
            let policy = shared.options.restarts;
            let now = Instant::now();
            while restarts.front().is_some_and(|t| now.duration_since(*t) > policy.window) {
                restarts.pop_front();
            }
            if u32::try_from(restarts.len()).unwrap_or(u32::MAX) < policy.max_restarts {
                let previous = u32::try_from(restarts.len()).unwrap_or(u32::MAX);
                restarts.push_back(now);
                // The first restart is immediate: a crash is often a one-off.
                let delay = if previous == 0 { Duration::ZERO } else { policy.backoff.delay(previous - 1, jitter()) };
                After::Retry(delay)
            } else {
                After::GiveUp(format!(
                    "{reason} (restarted {} times within {}s; not restarting again until asked)",
                    policy.max_restarts,
                    policy.window.as_secs()
                ))
            }
        } else {
            let backoff = shared.options.reconnect;
            failures += 1;
            if !backoff.allows(failures) {
                After::GiveUp(format!("{reason} ({failures} attempts in a row failed; not reconnecting until asked)"))
            } else if !backoff.allows(quick_drops) {
                After::GiveUp(format!(
                    "{reason} ({quick_drops} connections in a row were lost within {}s of being made; not \
                     reconnecting until asked)",
                    shared.options.restarts.window.as_secs()
                ))
            } else {
                After::Retry(backoff.delay(failures.max(quick_drops) - 1, jitter()))
            }
        };
        match after {
            After::Retry(delay) => {
                let attempt = if local { u32::try_from(restarts.len()).unwrap_or(u32::MAX) } else { failures };
                slot.set_state(&shared, ServerState::Reconnecting { attempt, retry_in: delay, reason });
                shared.restarts.fetch_add(1, Ordering::SeqCst);
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    control = requests.recv() => match control {
                        Some(control) => apply(&slot, control, &mut restarts, &mut failures, &mut quick_drops),
                        None => return,
                    },
                }
            }
            After::GiveUp(reason) => {
                slot.set_state(&shared, ServerState::Failed { reason, elapsed: Duration::ZERO, needs_auth: false });
                match requests.recv().await {
                    Some(control) => apply(&slot, control, &mut restarts, &mut failures, &mut quick_drops),
                    None => return,
                }
            }
        }
    }
}

/// A control request between attempts: every one of them starts afresh.
fn apply(slot: &Slot, control: Control, restarts: &mut VecDeque<Instant>, failures: &mut u32, quick_drops: &mut u32) {
    restarts.clear();
    *failures = 0;
    *quick_drops = 0;
    let mut spec = lock(&slot.spec);
    match control {
        Control::Reconnect => {}
        Control::Enable => spec.enabled = true,
        Control::Disable => spec.enabled = false,
        Control::Replace(new) => *spec = *new,
    }
}

/// A jitter factor for backoff delays, so servers that fell together do not return together.
fn jitter() -> f64 {
    rand::random()
}
