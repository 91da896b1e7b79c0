//! Resource subscriptions across the gateway: `resources/subscribe` and `resources/unsubscribe`
//! of many sessions become one upstream subscription per (server, resource), and each
//! `notifications/resources/updated` an upstream sends goes to the sessions that subscribed,
//! under the URI each subscribed to (a gateway-made one for a URI two upstreams share).
//!
//! A session keeps its own subscriptions ([`Session::subscribe`]); the registry here keeps who
//! holds each upstream one. An upstream subscription is ended when its last holder
//! unsubscribes; one whose holders' sessions ended is ended by a sweep of the whole registry,
//! started at the next subscription change after a session that held some ended, and once
//! every [`SWEEP_EVERY`] changes (a sweep on every change made each one cost as much as every
//! subscription held: 46 ms with 30,000). Until then it costs an upstream subscription whose
//! updates reach nobody. Upstreams are asked in their server's turn, never under the lock of
//! the whole registry: a hung upstream holds up subscriptions to itself only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use mcp_protocol::{ErrorObject, error_codes, methods};

use crate::backend::{Backend, BackendEvent, Caller};
use crate::gateway::{backend_error, event_line};
use crate::session::{MAX_SUBSCRIPTIONS, Session};

/// One upstream subscription: who made it, and the sessions that hold it.
struct Held {
    caller: Caller,
    sessions: Vec<Weak<Session>>,
}

impl Held {
    /// Forgets the sessions that ended or let go of `uri` of `server`; whether any is left.
    fn still_held(&mut self, server: &str, uri: &str) -> bool {
        self.sessions.retain(|weak| weak.upgrade().is_some_and(|s| s.subscription(server, uri).is_some()));
        !self.sessions.is_empty()
    }
}

/// How many subscription changes go by between two sweeps of the whole registry.
const SWEEP_EVERY: usize = 64;

/// The upstream subscriptions the gateway holds, by (server, upstream URI). Cloning shares them.
#[derive(Default, Clone)]
pub(crate) struct Subscriptions {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// Who holds what: a plain lock, never held while an upstream is asked.
    registry: std::sync::Mutex<Registry>,
    /// One turn per server, held while its upstream is asked: one server's changes are made
    /// one at a time (an upstream is never subscribed twice, nor left subscribed by a
    /// subscribe and an unsubscribe that crossed), and an upstream that does not answer holds
    /// up only changes to its own subscriptions.
    turns: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// How many sessions that held subscriptions have ended, in this process: a registry sweeps
/// when this moved since its last sweep.
static ENDED_HOLDERS: AtomicU64 = AtomicU64::new(0);

/// Tells the registries that a session that held subscriptions ended.
pub(crate) fn holder_ended() {
    ENDED_HOLDERS.fetch_add(1, Ordering::Relaxed);
}

#[derive(Default)]
struct Registry {
    held: HashMap<(String, String), Held>,
    /// Changes since the last sweep.
    changes: usize,
    /// [`ENDED_HOLDERS`] at the last sweep.
    ended: u64,
}

impl Registry {
    /// Counts a change; whether it is time to sweep (a holder ended, or [`SWEEP_EVERY`]
    /// changes went by).
    fn changed(&mut self) -> bool {
        self.changes += 1;
        let ended = ENDED_HOLDERS.load(Ordering::Relaxed);
        let due = self.changes >= SWEEP_EVERY || ended != self.ended;
        if due {
            (self.changes, self.ended) = (0, ended);
        }
        due
    }

    /// Takes out the upstream subscription `key` names when no live session holds it.
    fn release_if_unheld(&mut self, key: &(String, String)) -> Option<Held> {
        let holders = self.held.get_mut(key)?;
        if holders.still_held(&key.0, &key.1) { None } else { self.held.remove(key) }
    }
}

impl Shared {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The turn of `server`'s subscription changes.
    fn turn(&self, server: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(turns.entry(server.to_owned()).or_default())
    }
}

impl Subscriptions {
    /// Subscribes `session` to `uri` of `server` (its upstream URI), which the client calls
    /// `outward`; the upstream is asked only when no session held it yet.
    pub(crate) async fn subscribe(
        &self,
        backend: &Arc<dyn Backend>,
        session: &Arc<Session>,
        server: &str,
        uri: &str,
        outward: &str,
    ) -> Result<(), ErrorObject> {
        self.count_change(backend);
        let turn = self.shared.turn(server);
        let _turn = turn.lock().await;
        if session.subscription(server, uri).is_some() {
            return Ok(());
        }
        if !session.subscribe(server, uri, outward) {
            return Err(ErrorObject::new(
                error_codes::INVALID_REQUEST,
                format!(
                    "Invalid Request: a session holds at most {MAX_SUBSCRIPTIONS} subscriptions; unsubscribe first"
                ),
            ));
        }
        let key = (server.to_owned(), uri.to_owned());
        if self.shared.registry().held.contains_key(&key) {
            // Held for another session: this one is let in on its own right (its profile, the
            // policy now), as the upstream's subscribe would have checked.
            if let Err(e) = backend.may_subscribe(&session.caller, server, uri).await {
                session.unsubscribe(server, uri);
                return Err(backend_error(&e));
            }
            if let Some(holders) = self.shared.registry().held.get_mut(&key) {
                holders.sessions.push(Arc::downgrade(session));
                return Ok(());
            }
        }
        match backend.subscribe(&session.caller, server, uri).await {
            Ok(()) => {
                let holders = Held { caller: session.caller.clone(), sessions: vec![Arc::downgrade(session)] };
                self.shared.registry().held.insert(key, holders);
                Ok(())
            }
            Err(e) => {
                session.unsubscribe(server, uri);
                Err(backend_error(&e))
            }
        }
    }

    /// Ends `session`'s subscription to `uri` of `server`, and the upstream's when it was the
    /// last holder. Unsubscribing what was not subscribed is not an error.
    pub(crate) async fn unsubscribe(&self, backend: &Arc<dyn Backend>, session: &Session, server: &str, uri: &str) {
        {
            let turn = self.shared.turn(server);
            let _turn = turn.lock().await;
            session.unsubscribe(server, uri);
            let key = (server.to_owned(), uri.to_owned());
            let released = self.shared.registry().release_if_unheld(&key);
            if let Some(holders) = released {
                let _ = backend.unsubscribe(&holders.caller, server, uri).await;
            }
        }
        self.count_change(backend);
    }

    /// Counts a change, and when a sweep is due starts one in the background (it asks
    /// upstreams, which the request that made the change should not wait for).
    fn count_change(&self, backend: &Arc<dyn Backend>) {
        if self.shared.registry().changed() {
            tokio::spawn(release_unheld(Arc::clone(&self.shared), Arc::clone(backend)));
        }
    }
}

/// Ends every upstream subscription no live session holds any more, each in its server's
/// turn (and checked again there: a session may have taken it up meanwhile). The upstream's
/// refusal to unsubscribe changes nothing here: its updates would reach no session anyway.
async fn release_unheld(shared: Arc<Shared>, backend: Arc<dyn Backend>) {
    let unheld: Vec<(String, String)> = shared
        .registry()
        .held
        .iter_mut()
        .filter_map(|((server, uri), holders)| {
            (!holders.still_held(server, uri)).then(|| (server.clone(), uri.clone()))
        })
        .collect();
    for key in unheld {
        let turn = shared.turn(&key.0);
        let _turn = turn.lock().await;
        let released = shared.registry().release_if_unheld(&key);
        if let Some(holders) = released {
            let _ = backend.unsubscribe(&holders.caller, &key.0, &key.1).await;
        }
    }
}

/// The line a backend event becomes for `session`: its resource updates (only those it
/// subscribed to, under its own URI), and what [`event_line`] makes of the rest. An upstream's
/// log messages and updates reach only a session it is offered to (its profile's servers:
/// they may quote another caller's call).
pub(crate) fn session_event_line(event: &BackendEvent, session: &Session, backend: &dyn Backend) -> Option<String> {
    if let BackendEvent::Log { server, .. } | BackendEvent::ResourceUpdated { server, .. } = event
        && !backend.offers(&session.caller, server)
    {
        return None;
    }
    match event {
        BackendEvent::ResourceUpdated { server, uri } => {
            let outward = session.subscription(server, uri)?;
            mcp_protocol::encode_notification(methods::RESOURCES_UPDATED, Some(&serde_json::json!({"uri": outward})))
                .ok()
        }
        _ => event_line(event, session.log_level()),
    }
}
