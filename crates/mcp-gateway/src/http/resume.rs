//! Resumable call streams (the 2025-11-25 transport's "resumability and redelivery", SSE
//! polling): a session's call that has not answered within `resume_after`, or sends a message
//! first, is answered as SSE from a log of its own. The log outlives the connection: the work
//! goes on when the client goes away, and `GET` with `Last-Event-ID: {stream}:{n}` replays what
//! came after event `n`, then goes on live.
//!
//! - The stream opens with a priming event (`id: {stream}:0`, empty data, `retry:`), so a client
//!   has an id to resume from before anything else is said.
//! - A call nobody reads for the grace is dropped (its upstream call cancelled as when a client
//!   goes away); a finished call's log stays for the grace, for a late resumption.
//! - Everything is bounded: [`MAX_EVENTS`] and [`MAX_BYTES`] per log (the oldest events go
//!   first; the newest is always kept), [`MAX_STREAMS`] per session (the oldest finished log
//!   makes room; with none finished, the call is answered as before, without resumption).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::body::{Work, sse_event_with_id};
use super::life::InFlight;
use crate::seal::random_hex;
use crate::session::lock;

/// Most events one call's log keeps.
pub(crate) const MAX_EVENTS: usize = 512;
/// Most bytes of events one call's log keeps (beyond its newest event).
pub(crate) const MAX_BYTES: usize = 256 * 1024;
/// Most resumable streams one session has at once.
pub(crate) const MAX_STREAMS: usize = 64;
/// The `retry:` of priming events: how long a client waits before it resumes.
const RETRY_MS: u64 = 1000;

/// Every session's resumable streams: by session id, then stream id.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<Arc<str>, Streams>>,
}

/// One session's streams, by id.
type Streams = HashMap<Arc<str>, Arc<CallLog>>;

/// Why a `Last-Event-ID` cannot be resumed: the status and what to say.
pub(crate) type Refused = (StatusCode, &'static str);

impl Registry {
    /// A new log for a call of `session`, opening with a priming event if `priming`; `None`
    /// when the session has [`MAX_STREAMS`] logs of running calls already (or there is no
    /// randomness for an id).
    pub(crate) fn open(&self, session: &Arc<str>, priming: bool) -> Option<Arc<CallLog>> {
        // An unguessable id: a session restored elsewhere never resumes another call's stream.
        let id: Arc<str> = Arc::from(random_hex(8).ok()?);
        let mut sessions = lock(&self.sessions);
        let streams = sessions.entry(Arc::clone(session)).or_default();
        if streams.len() >= MAX_STREAMS {
            let oldest = streams
                .iter()
                .filter_map(|(id, log)| log.finished_at().map(|at| (at, Arc::clone(id))))
                .min_by_key(|(at, _)| *at)
                .map(|(_, id)| id)?;
            streams.remove(&oldest);
        }
        let log = CallLog::new(Arc::clone(&id), priming);
        streams.insert(id, Arc::clone(&log));
        Some(log)
    }

    /// A reader of the stream `last_event_id` names, from the event after it.
    pub(crate) fn resume(&self, session: &str, last_event_id: &str) -> Result<Reader, Refused> {
        const MALFORMED: Refused =
            (StatusCode::BAD_REQUEST, "Last-Event-ID is not an event id of this gateway ({stream}:{n})");
        let (stream, n) = last_event_id.trim().rsplit_once(':').ok_or(MALFORMED)?;
        let n: u64 = n.parse().map_err(|_| MALFORMED)?;
        let log = lock(&self.sessions).get(session).and_then(|streams| streams.get(stream)).cloned().ok_or((
            StatusCode::GONE,
            "that stream is gone (finished and expired, dropped, or never this session's); its call cannot be resumed",
        ))?;
        let from = n.checked_add(1).ok_or(MALFORMED)?;
        let (first, next) = log.span();
        if from > next {
            return Err((StatusCode::BAD_REQUEST, "Last-Event-ID names an event this stream has not sent"));
        }
        if from < first {
            return Err((StatusCode::GONE, "the events after that id are no longer kept; the call cannot be resumed"));
        }
        Ok(Reader::new(log, from))
    }

    /// Forgets `stream` of `session`.
    fn remove(&self, session: &str, stream: &str) {
        let mut sessions = lock(&self.sessions);
        if let Some(streams) = sessions.get_mut(session) {
            streams.remove(stream);
            if streams.is_empty() {
                sessions.remove(session);
            }
        }
    }
}

/// One call's events, kept so a reader can resume anywhere still kept.
#[derive(Debug)]
pub(crate) struct CallLog {
    id: Arc<str>,
    state: Mutex<LogState>,
    /// Bumped at every change; readers wait on it.
    changed: watch::Sender<u64>,
    /// Readers attached now.
    readers: watch::Sender<usize>,
    /// A reader read to the end of the finished stream.
    delivered: watch::Sender<bool>,
}

#[derive(Debug)]
struct LogState {
    /// Events `first..next`.
    events: VecDeque<Bytes>,
    first: u64,
    next: u64,
    bytes: usize,
    end: End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Open,
    /// Complete: readers end after the last event.
    Finished(Instant),
    /// Given up (nobody read it): readers end now.
    Dropped,
}

/// What a reader finds at its position.
enum Read {
    Event(Bytes),
    Wait,
    End,
    /// Its events are no longer kept, or the call was dropped.
    Lost,
}

impl CallLog {
    /// A log whose first event is the priming one (`{id}:0`) if `priming`; without, it starts
    /// at event 1 all the same.
    fn new(id: Arc<str>, priming: bool) -> Arc<Self> {
        let mut state = LogState { bytes: 0, events: VecDeque::new(), first: 1, next: 1, end: End::Open };
        if priming {
            let event = Bytes::from(format!("id: {id}:0\nretry: {RETRY_MS}\ndata: \n\n"));
            state.bytes = event.len();
            state.events.push_back(event);
            state.first = 0;
        }
        Arc::new(Self {
            id,
            state: Mutex::new(state),
            changed: watch::Sender::new(0),
            readers: watch::Sender::new(0),
            delivered: watch::Sender::new(false),
        })
    }

    /// Appends the message `line`; the oldest events go beyond the bounds.
    fn push(&self, line: &str) {
        let mut state = lock(&self.state);
        let event = sse_event_with_id(&self.id, state.next, line);
        state.bytes += event.len();
        state.events.push_back(event);
        state.next += 1;
        while state.events.len() > 1 && (state.events.len() > MAX_EVENTS || state.bytes > MAX_BYTES) {
            if let Some(old) = state.events.pop_front() {
                state.bytes -= old.len();
                state.first += 1;
            }
        }
        drop(state);
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn end(&self, end: End) {
        lock(&self.state).end = end;
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn finished_at(&self) -> Option<Instant> {
        match lock(&self.state).end {
            End::Finished(at) => Some(at),
            _ => None,
        }
    }

    /// The ids kept: `first..next`.
    fn span(&self) -> (u64, u64) {
        let state = lock(&self.state);
        (state.first, state.next)
    }

    fn read(&self, n: u64) -> Read {
        let state = lock(&self.state);
        if state.end == End::Dropped || n < state.first {
            return Read::Lost;
        }
        if n < state.next {
            let at = usize::try_from(n - state.first).unwrap_or(usize::MAX);
            return state.events.get(at).cloned().map_or(Read::Lost, Read::Event);
        }
        match state.end {
            End::Open => Read::Wait,
            _ => Read::End,
        }
    }
}

/// An SSE body reading one call's log from an event on; attached (keeping the call alive) while
/// it lives.
pub(crate) struct Reader {
    log: Arc<CallLog>,
    next: u64,
    changed: watch::Receiver<u64>,
    wait: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Reader {
    /// A reader of `log` from its first event on (the priming event, if it has one).
    pub(crate) fn from_start(log: Arc<CallLog>) -> Self {
        let from = log.span().0;
        Self::new(log, from)
    }

    /// A reader of `log` from event `from` on.
    fn new(log: Arc<CallLog>, from: u64) -> Self {
        log.readers.send_modify(|n| *n += 1);
        let changed = log.changed.subscribe();
        Self { log, next: from, changed, wait: None }
    }

    /// The next event; `None` at the end (or when its events are lost: the client's resumption
    /// then says so).
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            // Marked seen before reading: a change after the read wakes the wait below.
            self.changed.borrow_and_update();
            match self.log.read(self.next) {
                Read::Event(event) => {
                    self.next += 1;
                    return Poll::Ready(Some(event));
                }
                Read::End => {
                    self.log.delivered.send_replace(true);
                    return Poll::Ready(None);
                }
                Read::Lost => return Poll::Ready(None),
                Read::Wait => {
                    let mut changed = self.changed.clone();
                    self.wait = Some(Box::pin(async move {
                        // An error: the log is gone, which it is not while this reader holds it.
                        let _ = changed.changed().await;
                    }));
                }
            }
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.log.readers.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// What a resumable call needs beyond its work: where its log is kept, and for how long.
pub(crate) struct Drive {
    pub(crate) registry: Arc<Registry>,
    pub(crate) session: Arc<str>,
    pub(crate) log: Arc<CallLog>,
    pub(crate) grace: Duration,
    /// Holds a drain until the answer is read (or the grace passed).
    pub(crate) hold: InFlight,
}

/// Runs a call whose answer is a resumable stream: its messages (`first`, then `messages`) and
/// its answer go to the log. Dropped when nobody read it for the grace.
pub(crate) async fn drive(drive: Drive, mut work: Work, mut messages: mpsc::Receiver<String>, first: Option<String>) {
    let Drive { registry, session, log, grace, hold } = drive;
    if let Some(first) = first {
        log.push(&first);
    }
    let mut readers = log.readers.subscribe();
    let unattended = async {
        loop {
            // An error: the log is gone, which it is not while this task holds it.
            let _ = readers.wait_for(|n| *n == 0).await;
            if tokio::time::timeout(grace, readers.wait_for(|n| *n > 0)).await.is_err() {
                return;
            }
        }
    };
    tokio::pin!(unattended);
    let answer = loop {
        tokio::select! {
            biased;
            Some(message) = messages.recv() => log.push(&message),
            line = &mut work => break Some(line),
            () = &mut unattended => break None,
        }
    };
    let Some(line) = answer else {
        // Nobody is there to read the answer: the call is given up, as when a client goes away.
        drop(work);
        log.end(End::Dropped);
        registry.remove(&session, &log.id);
        tracing::debug!(stream = %log.id, "a resumable call nobody read for {grace:?} was dropped");
        return;
    };
    while let Ok(message) = messages.try_recv() {
        log.push(&message);
    }
    // Empty: cancelled by the client, who expects no answer.
    if !line.is_empty() {
        log.push(&line);
    }
    let finished = Instant::now();
    log.end(End::Finished(finished));
    let mut delivered = log.delivered.subscribe();
    let _ = tokio::time::timeout(grace, delivered.wait_for(|d| *d)).await;
    drop(hold);
    tokio::time::sleep_until(finished + grace).await;
    registry.remove(&session, &log.id);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(reader: &mut Reader) -> Vec<Bytes> {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut out = Vec::new();
        while let Poll::Ready(Some(event)) = reader.poll_next(&mut cx) {
            out.push(event);
        }
        out
    }

    #[test]
    fn a_log_primes_then_numbers_its_events_and_stays_bounded() {
        let log = CallLog::new(Arc::from("s"), true);
        let mut reader = Reader::from_start(Arc::clone(&log));
        log.push("{\"a\":1}");
        let events = drain(&mut reader);
        assert_eq!(events[0], Bytes::from("id: s:0\nretry: 1000\ndata: \n\n"));
        assert_eq!(events[1], Bytes::from("id: s:1\nevent: message\ndata: {\"a\":1}\n\n"));
        for _ in 0..2 * MAX_EVENTS {
            log.push("{}");
        }
        let (first, next) = log.span();
        assert_eq!(next - first, MAX_EVENTS as u64);
        let big = "x".repeat(MAX_BYTES);
        log.push(&big);
        log.push(&big);
        let (first, next) = log.span();
        assert_eq!(next - first, 1, "only the newest of two events beyond the byte bound is kept");
        // The reader fell behind what is kept: its stream ends.
        assert!(drain(&mut reader).is_empty());
        assert!(matches!(log.read(0), Read::Lost));
    }

    #[test]
    fn without_priming_a_log_starts_at_its_first_message() {
        let log = CallLog::new(Arc::from("s"), false);
        let mut reader = Reader::from_start(Arc::clone(&log));
        log.push("{}");
        log.end(End::Finished(Instant::now()));
        assert_eq!(drain(&mut reader), [Bytes::from("id: s:1\nevent: message\ndata: {}\n\n")]);
    }

    #[test]
    fn resumption_checks_the_id_against_the_log() {
        let registry = Registry::default();
        let session: Arc<str> = Arc::from("sess");
        let log = registry.open(&session, true).unwrap_or_else(|| unreachable!());
        log.push("{}");
        let id = &log.id;
        for bad in ["nonsense", "x:y", &format!("{id}:-1"), &format!("{id}:18446744073709551615")] {
            assert_eq!(registry.resume(&session, bad).err().map(|e| e.0), Some(StatusCode::BAD_REQUEST), "{bad}");
        }
        assert_eq!(registry.resume(&session, &format!("{id}:2")).err().map(|e| e.0), Some(StatusCode::BAD_REQUEST));
        assert_eq!(registry.resume(&session, "other:0").err().map(|e| e.0), Some(StatusCode::GONE));
        assert_eq!(registry.resume("another", &format!("{id}:0")).err().map(|e| e.0), Some(StatusCode::GONE));
        let mut reader = registry.resume(&session, &format!("{id}:0")).unwrap_or_else(|_| unreachable!());
        assert_eq!(drain(&mut reader).len(), 1);
        assert!(registry.resume(&session, &format!("{id}:1")).is_ok(), "resuming at the end waits for more");
    }

    #[test]
    fn a_session_has_a_bounded_number_of_streams() {
        let registry = Registry::default();
        let session: Arc<str> = Arc::from("sess");
        let logs: Vec<_> = (0..MAX_STREAMS).filter_map(|_| registry.open(&session, true)).collect();
        assert_eq!(logs.len(), MAX_STREAMS);
        assert!(registry.open(&session, true).is_none(), "all running: no room");
        logs[3].end(End::Finished(Instant::now()));
        assert!(registry.open(&session, true).is_some(), "a finished one makes room");
        assert_eq!(registry.resume(&session, &format!("{}:0", logs[3].id)).err().map(|e| e.0), Some(StatusCode::GONE));
    }
}
