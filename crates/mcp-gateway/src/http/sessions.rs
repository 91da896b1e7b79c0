//! The sessions one HTTP front holds: bounded in all and per caller, least recently used let go
//! first, idle ones let go by time.
//!
//! A full table never refuses a new session: a refusal would let whoever filled it (one token
//! holder opening sessions in a loop) keep every other client out until the idle limit. The
//! new session evicts the one idle longest instead, its owner's own first when the owner is at
//! its share, so one caller can only push out its own sessions. An evicted or expired session
//! is unknown from then on (404, and the client initializes again).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::backend::Caller;
use crate::session::{Session, lock};

/// Expired sessions let go by one request's sweep at most: a request never pays for the
/// whole table (the periodic sweep, [`Sessions::sweep`] in batches, catches up).
const SWEEP_ON_ACCESS: usize = 8;
/// The least recently used sessions one eviction looks at for one that is not busy (those it
/// passes over move to the other end, so the next looks at others).
const EVICTION_LOOKS: usize = 64;

/// Whom a session counts against for [`Limits::per_caller`]: the authenticated principal
/// (whichever profile it uses), or without authentication the peer's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Owner {
    Principal(Arc<str>),
    Peer(IpAddr),
}

impl Owner {
    pub(super) fn of(caller: &Caller, peer: IpAddr) -> Self {
        match &caller.principal {
            Some(principal) => Self::Principal(Arc::clone(principal)),
            None => Self::Peer(peer),
        }
    }
}

/// The table's bounds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Sessions in all (at least 1).
    pub(super) max: usize,
    /// Sessions of one [`Owner`] (at least 1).
    pub(super) per_caller: usize,
    /// A session unused this long is let go.
    pub(super) idle_ms: u64,
}

/// What making room let go: `evicted` were in use and are ended for good (their store records
/// too), `expired` had been idle too long.
#[derive(Debug, Default)]
pub(super) struct LetGo {
    pub(super) evicted: Vec<Arc<Session>>,
    pub(super) expired: Vec<Arc<Session>>,
}

struct Entry {
    session: Arc<Session>,
    owner: Owner,
    /// Its place in the orders: larger is more recently used.
    tick: u64,
}

#[derive(Default)]
struct Table {
    map: HashMap<Arc<str>, Entry>,
    /// Every session by its last use, least recent first.
    order: BTreeMap<u64, Arc<str>>,
    /// Each owner's sessions by their last use.
    owners: HashMap<Owner, BTreeMap<u64, Arc<str>>>,
    next_tick: u64,
}

impl Table {
    fn tick(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }

    fn remove(&mut self, id: &str) -> Option<Arc<Session>> {
        let entry = self.map.remove(id)?;
        self.order.remove(&entry.tick);
        if let Some(own) = self.owners.get_mut(&entry.owner) {
            own.remove(&entry.tick);
            if own.is_empty() {
                self.owners.remove(&entry.owner);
            }
        }
        Some(entry.session)
    }

    /// Moves `id` to the most recently used end of both orders.
    fn used(&mut self, id: &Arc<str>) {
        let tick = self.tick();
        let Some(entry) = self.map.get_mut(id) else { return };
        let old = std::mem::replace(&mut entry.tick, tick);
        self.order.remove(&old);
        self.order.insert(tick, Arc::clone(id));
        if let Some(own) = self.owners.get_mut(&entry.owner) {
            own.remove(&old);
            own.insert(tick, Arc::clone(id));
        }
    }

    /// Lets go of up to `most` of the least recently used sessions that are idle at `now_ms`.
    /// The order is by last use, so the first one still fresh ends the sweep; a busy one
    /// ([`Session::busy`]) counts as used now.
    fn sweep(&mut self, now_ms: u64, idle_ms: u64, most: usize, out: &mut Vec<Arc<Session>>) -> usize {
        let mut swept = 0;
        while swept < most {
            let Some(id) = self.order.first_key_value().map(|(_, id)| Arc::clone(id)) else { break };
            let Some(session) = self.map.get(&id).map(|e| Arc::clone(&e.session)) else { break };
            if session.busy() {
                session.touch(now_ms);
                self.used(&id);
                swept += 1;
                continue;
            }
            if !idle(&session, now_ms, idle_ms) {
                break;
            }
            if let Some(session) = self.remove(&id) {
                out.push(session);
            }
            swept += 1;
        }
        swept
    }

    /// Evicts the least recently used session that is not busy among `candidates` (ids, least
    /// recently used first); a busy one is moved to the most recently used end. `false` when
    /// every one of them is busy.
    fn evict_one(&mut self, candidates: Vec<Arc<str>>, gone: &mut LetGo) -> bool {
        for id in candidates {
            let Some(session) = self.map.get(&id).map(|e| Arc::clone(&e.session)) else { continue };
            if session.busy() {
                self.used(&id);
                continue;
            }
            if let Some(evicted) = self.remove(&id) {
                gone.evicted.push(evicted);
                return true;
            }
        }
        false
    }

    /// Adds a session, making room as `limits` say. Busy sessions are never evicted: when all
    /// that could be are busy, the table holds one more than its limit (each busy session
    /// holds a connection, and connections are bounded).
    fn insert(&mut self, id: Arc<str>, session: Arc<Session>, owner: Owner, limits: Limits, gone: &mut LetGo) {
        let per_caller = limits.per_caller.max(1);
        while self.owners.get(&owner).is_some_and(|own| own.len() >= per_caller) {
            let candidates: Vec<Arc<str>> = self
                .owners
                .get(&owner)
                .map(|own| own.values().take(EVICTION_LOOKS).cloned().collect())
                .unwrap_or_default();
            if !self.evict_one(candidates, gone) {
                break;
            }
        }
        while self.map.len() >= limits.max.max(1) {
            let candidates: Vec<Arc<str>> = self.order.values().take(EVICTION_LOOKS).cloned().collect();
            if !self.evict_one(candidates, gone) {
                break;
            }
        }
        let tick = self.tick();
        self.order.insert(tick, Arc::clone(&id));
        self.owners.entry(owner.clone()).or_default().insert(tick, Arc::clone(&id));
        self.map.insert(id, Entry { session, owner, tick });
    }
}

fn idle(session: &Session, now_ms: u64, idle_ms: u64) -> bool {
    now_ms.saturating_sub(session.last_used_ms()) >= idle_ms
}

/// The sessions of one front.
#[derive(Default)]
pub(super) struct Sessions {
    table: Mutex<Table>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("len", &lock(&self.table).map.len()).finish()
    }
}

impl Sessions {
    /// The session `id`, marked used at `now_ms`; `None` when unknown, or idle too long (then
    /// let go, as are a few other idle ones, returned in `expired`).
    pub(super) fn get(
        &self,
        id: &str,
        now_ms: u64,
        idle_ms: u64,
        expired: &mut Vec<Arc<Session>>,
    ) -> Option<Arc<Session>> {
        let mut table = lock(&self.table);
        table.sweep(now_ms, idle_ms, SWEEP_ON_ACCESS, expired);
        let (key, session) = table.map.get_key_value(id).map(|(k, e)| (Arc::clone(k), Arc::clone(&e.session)))?;
        if idle(&session, now_ms, idle_ms) && !session.busy() {
            table.remove(&key);
            expired.push(session);
            return None;
        }
        session.touch(now_ms);
        table.used(&key);
        Some(session)
    }

    /// Adds `session` (one with an id) for `owner`, making room as [`Limits`] say; what was
    /// let go is returned, to be ended outside the table's lock. `None` (nothing changed) when
    /// it has no id or the id is held already.
    pub(super) fn insert(&self, session: Arc<Session>, owner: Owner, limits: Limits, now_ms: u64) -> Option<LetGo> {
        let id = session.id.clone()?;
        let mut table = lock(&self.table);
        if table.map.contains_key(&id) {
            return None;
        }
        let mut gone = LetGo::default();
        table.sweep(now_ms, limits.idle_ms, SWEEP_ON_ACCESS, &mut gone.expired);
        table.insert(id, session, owner, limits, &mut gone);
        Some(gone)
    }

    /// Adds a session restored from the store, or gives the one a concurrent request added
    /// first (then nothing was let go).
    pub(super) fn adopt(
        &self,
        session: Arc<Session>,
        owner: Owner,
        limits: Limits,
        now_ms: u64,
    ) -> Option<(Arc<Session>, LetGo)> {
        let id = session.id.clone()?;
        let mut table = lock(&self.table);
        if let Some(existing) = table.map.get(&id) {
            return Some((Arc::clone(&existing.session), LetGo::default()));
        }
        let mut gone = LetGo::default();
        table.sweep(now_ms, limits.idle_ms, SWEEP_ON_ACCESS, &mut gone.expired);
        table.insert(id, Arc::clone(&session), owner, limits, &mut gone);
        Some((session, gone))
    }

    pub(super) fn remove(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.table).remove(id)
    }

    /// Lets go of up to `most` idle sessions (least recently used first) into `expired`;
    /// how many it let go or found busy.
    pub(super) fn sweep(&self, now_ms: u64, idle_ms: u64, most: usize, expired: &mut Vec<Arc<Session>>) -> usize {
        lock(&self.table).sweep(now_ms, idle_ms, most, expired)
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        lock(&self.table).map.contains_key(id)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.table).map.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn session(id: &str, principal: &str, now_ms: u64) -> Arc<Session> {
        let client = mcp_protocol::ClientContext::default();
        let protocol = mcp_protocol::ServerSession::restore(client, true);
        Arc::new(Session::new(Some(Arc::from(id)), Caller::principal(principal), protocol, now_ms))
    }

    fn owner(principal: &str) -> Owner {
        Owner::Principal(Arc::from(principal))
    }

    const LIMITS: Limits = Limits { max: 3, per_caller: 2, idle_ms: 1000 };

    fn ids(sessions: &[Arc<Session>]) -> Vec<&str> {
        sessions.iter().filter_map(|s| s.id.as_deref()).collect()
    }

    #[test]
    fn a_full_table_lets_the_least_recently_used_go() {
        let sessions = Sessions::default();
        for (n, id) in ["a", "b", "c"].into_iter().enumerate() {
            let gone = sessions.insert(session(id, id, 0), owner(id), LIMITS, n as u64).unwrap();
            assert!(gone.evicted.is_empty() && gone.expired.is_empty());
        }
        // `a` is used again: `b` is now the one idle longest.
        assert!(sessions.get("a", 10, LIMITS.idle_ms, &mut Vec::new()).is_some());
        let gone = sessions.insert(session("d", "d", 11), owner("d"), LIMITS, 11).unwrap();
        assert_eq!(ids(&gone.evicted), ["b"]);
        assert!(sessions.get("b", 12, LIMITS.idle_ms, &mut Vec::new()).is_none());
        for id in ["a", "c", "d"] {
            assert!(sessions.get(id, 12, LIMITS.idle_ms, &mut Vec::new()).is_some(), "{id}");
        }
        assert_eq!(sessions.len(), 3);
    }

    #[test]
    fn a_busy_session_is_neither_expired_nor_evicted() {
        let sessions = Sessions::default();
        let busy = session("busy", "alice", 0);
        let _call = busy.start(&mcp_protocol::RequestId::Number(1)).unwrap();
        sessions.insert(Arc::clone(&busy), owner("alice"), LIMITS, 0).unwrap();
        sessions.insert(session("idle", "alice", 1), owner("alice"), LIMITS, 1).unwrap();
        // At its share, Alice's new session pushes out her idle one, not the busy (older) one.
        let gone = sessions.insert(session("new", "alice", 2), owner("alice"), LIMITS, 2).unwrap();
        assert_eq!(ids(&gone.evicted), ["idle"]);
        // Long past the idle limit, a sweep and a request leave the busy one alone.
        let mut expired = Vec::new();
        sessions.sweep(10_000, LIMITS.idle_ms, 10, &mut expired);
        assert_eq!(ids(&expired), ["new"]);
        assert!(sessions.get("busy", 20_000, LIMITS.idle_ms, &mut Vec::new()).is_some());
        // Every session of the caller busy: one more is let in beyond the share.
        let other = session("second", "alice", 20_001);
        let _other_call = other.start(&mcp_protocol::RequestId::Number(1)).unwrap();
        sessions.insert(other, owner("alice"), LIMITS, 20_001).unwrap();
        let gone = sessions.insert(session("third", "alice", 20_002), owner("alice"), LIMITS, 20_002).unwrap();
        assert!(gone.evicted.is_empty(), "{:?}", ids(&gone.evicted));
        assert_eq!(sessions.len(), 3);
    }

    #[test]
    fn a_caller_at_its_share_lets_its_own_go() {
        let sessions = Sessions::default();
        sessions.insert(session("other", "bob", 0), owner("bob"), LIMITS, 0).unwrap();
        sessions.insert(session("m1", "mallory", 1), owner("mallory"), LIMITS, 1).unwrap();
        sessions.insert(session("m2", "mallory", 2), owner("mallory"), LIMITS, 2).unwrap();
        // Bob's is the least recently used of all, yet Mallory's third pushes out her first.
        let gone = sessions.insert(session("m3", "mallory", 3), owner("mallory"), LIMITS, 3).unwrap();
        assert_eq!(ids(&gone.evicted), ["m1"]);
        assert!(sessions.get("other", 4, LIMITS.idle_ms, &mut Vec::new()).is_some());
        assert!(sessions.get("m1", 4, LIMITS.idle_ms, &mut Vec::new()).is_none());
    }

    #[test]
    fn idle_sessions_expire_on_access_and_by_sweeps_in_bounded_batches() {
        let sessions = Sessions::default();
        let limits = Limits { max: 100, per_caller: 100, idle_ms: 1000 };
        for n in 0..20u64 {
            let id = format!("s{n}");
            sessions.insert(session(&id, "alice", n), owner("alice"), limits, n).unwrap();
        }
        let mut expired = Vec::new();
        // Before the limit nothing goes.
        assert!(sessions.get("s0", 999, limits.idle_ms, &mut expired).is_some());
        assert!(expired.is_empty());
        // `s0` was used at 999; the others are idle at 1019.
        assert_eq!(sessions.sweep(1019, limits.idle_ms, 5, &mut expired), 5);
        assert_eq!(ids(&expired), ["s1", "s2", "s3", "s4", "s5"]);
        expired.clear();
        // The session asked for is let go when idle, with at most a batch of others.
        assert!(sessions.get("s19", 1019, limits.idle_ms, &mut expired).is_none());
        assert_eq!(expired.len(), SWEEP_ON_ACCESS + 1);
        assert_eq!(sessions.sweep(1019, limits.idle_ms, 100, &mut Vec::new()), 20 - 6 - SWEEP_ON_ACCESS - 1);
        assert_eq!(sessions.len(), 1, "only s0, used later, is left");
    }
}
