//! Resource subscriptions across the gateway: `resources/subscribe` and `resources/unsubscribe`
//! of many sessions become one upstream subscription per (server, resource), and each
//! `notifications/resources/updated` an upstream sends goes to the sessions that subscribed,
//! under the URI each subscribed to (a gateway-made one for a URI two upstreams share).
//!
//! A session keeps its own subscriptions ([`Session::subscribe`]); the registry here keeps who
//! holds each upstream one. An upstream subscription is ended when its last holder
//! unsubscribes; one whose holders' sessions ended is ended by a sweep of the whole registry,
//! made at the next subscription change after a session that held some ended, and once every
//! [`SWEEP_EVERY`] changes (a sweep on every change made each one cost as much as every
//! subscription held: 46 ms with 30,000). Until then it costs an upstream subscription whose
//! updates reach nobody.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use mcp_protocol::{ErrorObject, error_codes, methods};
use tokio::sync::Mutex;

use crate::backend::{Backend, BackendEvent, Caller};
use crate::gateway::{backend_error, event_line};
use crate::session::{MAX_SUBSCRIPTIONS, Session};

/// One upstream subscription: who made it, and the sessions that hold it.
struct Held {
    caller: Caller,
    sessions: Vec<Weak<Session>>,
}

/// How many subscription changes go by between two sweeps of the whole registry.
const SWEEP_EVERY: usize = 64;

/// The upstream subscriptions the gateway holds, by (server, upstream URI).
#[derive(Default)]
pub(crate) struct Subscriptions {
    /// Async: a change waits for the upstream's answer, and changes are made one at a time so
    /// an upstream is never subscribed twice nor left subscribed by a race.
    held: Mutex<Registry>,
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
    /// Counts a change, and sweeps when a holder ended or [`SWEEP_EVERY`] changes went by.
    async fn changed(&mut self, backend: &dyn Backend) {
        self.changes += 1;
        let ended = ENDED_HOLDERS.load(Ordering::Relaxed);
        if self.changes >= SWEEP_EVERY || ended != self.ended {
            (self.changes, self.ended) = (0, ended);
            release_unheld(&mut self.held, backend).await;
        }
    }
}

impl Subscriptions {
    /// Subscribes `session` to `uri` of `server` (its upstream URI), which the client calls
    /// `outward`; the upstream is asked only when no session held it yet.
    pub(crate) async fn subscribe(
        &self,
        backend: &dyn Backend,
        session: &Arc<Session>,
        server: &str,
        uri: &str,
        outward: &str,
    ) -> Result<(), ErrorObject> {
        let mut registry = self.held.lock().await;
        registry.changed(backend).await;
        let held = &mut registry.held;
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
        if let Some(holders) = held.get_mut(&key) {
            holders.sessions.push(Arc::downgrade(session));
            return Ok(());
        }
        match backend.subscribe(&session.caller, server, uri).await {
            Ok(()) => {
                let holders = Held { caller: session.caller.clone(), sessions: vec![Arc::downgrade(session)] };
                held.insert(key, holders);
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
    pub(crate) async fn unsubscribe(&self, backend: &dyn Backend, session: &Session, server: &str, uri: &str) {
        let mut registry = self.held.lock().await;
        session.unsubscribe(server, uri);
        let key = (server.to_owned(), uri.to_owned());
        if let Some(holders) = registry.held.get_mut(&key) {
            holders.sessions.retain(|weak| weak.upgrade().is_some_and(|s| s.subscription(server, uri).is_some()));
            if holders.sessions.is_empty()
                && let Some(holders) = registry.held.remove(&key)
            {
                let _ = backend.unsubscribe(&holders.caller, server, uri).await;
            }
        }
        registry.changed(backend).await;
    }
}

/// Ends every upstream subscription no live session holds any more. The upstream's refusal to
/// unsubscribe changes nothing here: its updates would reach no session anyway.
async fn release_unheld(held: &mut HashMap<(String, String), Held>, backend: &dyn Backend) {
    let mut released = Vec::new();
    held.retain(|(server, uri), holders| {
        holders.sessions.retain(|weak| weak.upgrade().is_some_and(|s| s.subscription(server, uri).is_some()));
        let keep = !holders.sessions.is_empty();
        if !keep {
            released.push((holders.caller.clone(), server.clone(), uri.clone()));
        }
        keep
    });
    for (caller, server, uri) in released {
        let _ = backend.unsubscribe(&caller, &server, &uri).await;
    }
}

/// The line a backend event becomes for `session`: its resource updates (only those it
/// subscribed to, under its own URI), and what [`event_line`] makes of the rest.
pub(crate) fn session_event_line(event: &BackendEvent, session: &Session) -> Option<String> {
    match event {
        BackendEvent::ResourceUpdated { server, uri } => {
            let outward = session.subscription(server, uri)?;
            mcp_protocol::encode_notification(methods::RESOURCES_UPDATED, Some(&serde_json::json!({"uri": outward})))
                .ok()
        }
        _ => event_line(event, session.log_level()),
    }
}
