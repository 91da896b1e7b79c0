//! One client session of a session revision (2025-03-26 .. 2025-11-25), as the gateway keeps
//! it: the protocol side (`mcp_protocol::ServerSession`: revision, declared capabilities, the
//! requests the gateway sent the client), the binding it last listed, where its notifications
//! go, and its requests in flight (so `notifications/cancelled` can stop one).
//!
//! Everything here is per client: request ids, the gateway's own requests to the client and
//! their answers never cross sessions.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::Binding;
use mcp_protocol::{
    ClientCapabilities, ErrorObject, Implementation, InitializeRequestParams, LoggingLevel, ProtocolVersion, RequestId,
    RootsCapability, ServerSession,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::backend::Caller;
use crate::exposed::Selection;

/// Most resource subscriptions one session holds.
pub(crate) const MAX_SUBSCRIPTIONS: usize = 1024;

/// Who waits for the client's answer to a request the gateway sent it.
type Waiter = oneshot::Sender<Result<Box<RawValue>, ErrorObject>>;

pub(crate) use mcp_safety::lock;

/// Where messages for one request's client go before the request's answer: the stdout writer
/// (stdio), or the request's own HTTP response, which becomes an SSE stream when the first
/// message comes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outbound(Option<mpsc::Sender<String>>);

impl Outbound {
    pub(crate) fn new(tx: mpsc::Sender<String>) -> Self {
        Self(Some(tx))
    }

    /// Nowhere: the request cannot carry messages (a plain JSON answer).
    pub(crate) fn none() -> Self {
        Self(None)
    }

    /// Sends `line`, waiting for room; `false` when nobody reads any more (or nowhere to send).
    pub(crate) async fn send(&self, line: String) -> bool {
        match &self.0 {
            Some(tx) => tx.send(line).await.is_ok(),
            None => false,
        }
    }

    /// Sends `line` if there is room now (progress, logs: losing one is better than stalling
    /// the call).
    pub(crate) fn offer(&self, line: String) -> bool {
        match &self.0 {
            Some(tx) => tx.try_send(line).is_ok(),
            None => false,
        }
    }

    /// Whether a message offered now would be taken.
    pub(crate) fn has_room(&self) -> bool {
        self.0.as_ref().is_some_and(|tx| tx.capacity() > 0)
    }

    /// The channel behind it, if any.
    pub(crate) fn sender(&self) -> Option<mpsc::Sender<String>> {
        self.0.clone()
    }

    /// Whether messages can go anywhere.
    pub(crate) fn is_open(&self) -> bool {
        self.0.as_ref().is_some_and(|tx| !tx.is_closed())
    }
}

/// Why a question to the client got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AskError {
    /// The request cannot carry a question (its answer is plain JSON, or nobody reads).
    #[error("there is no channel to ask the client on")]
    NoChannel,
    /// The client did not answer in time.
    #[error("the client did not answer within {0:?}")]
    Timeout(Duration),
    /// The client answered with an error.
    #[error("the client answered with an error: {0}")]
    Refused(String),
    /// The session ended first.
    #[error("the session ended")]
    Closed,
    /// The protocol refused to send it (before the handshake finished, say).
    #[error("{0}")]
    Protocol(String),
}

/// One session.
#[derive(Debug)]
pub(crate) struct Session {
    /// The `Mcp-Session-Id` (HTTP), `None` on stdio.
    pub(crate) id: Option<Arc<str>>,
    /// Who opened it.
    pub(crate) caller: Caller,
    protocol: Mutex<ServerSession<Waiter>>,
    listed: Mutex<Option<Arc<Binding>>>,
    /// A session continued from a shared store that has not listed here yet: the digest of
    /// each server's tools in the listing another replica served it ([`listing_digests`]).
    listed_elsewhere: Mutex<Option<Arc<BTreeMap<String, String>>>>,
    stream: Mutex<Option<mpsc::Sender<String>>>,
    in_flight: Mutex<HashMap<RequestId, oneshot::Sender<()>>>,
    /// Its resource subscriptions: (server, upstream URI) -> the URI the client subscribed to.
    subscriptions: Mutex<HashMap<(String, String), String>>,
    last_used_ms: AtomicU64,
    /// `clientInfo.name` from `initialize` (self-reported: for approval scopes and logs).
    client_name: String,
    /// The tools it selected through `search_tools` (see `exposed`).
    selection: Arc<Selection>,
    /// The observer's guard of it, dropped with it (its duration).
    _observed: Option<crate::observe::SessionGuard>,
}

impl Session {
    pub(crate) fn new(id: Option<Arc<str>>, caller: Caller, protocol: ServerSession<Waiter>, now_ms: u64) -> Self {
        let client_name =
            protocol.client().client_info.as_ref().map(|i| client_name(&i.name).to_owned()).unwrap_or_default();
        Self {
            client_name,
            id,
            caller,
            protocol: Mutex::new(protocol),
            listed: Mutex::new(None),
            listed_elsewhere: Mutex::new(None),
            stream: Mutex::new(None),
            in_flight: Mutex::new(HashMap::new()),
            subscriptions: Mutex::new(HashMap::new()),
            last_used_ms: AtomicU64::new(now_ms),
            selection: Arc::default(),
            _observed: None,
        }
    }

    /// With the observer's guard, kept as long as the session.
    pub(crate) fn observed(mut self, guard: Option<crate::observe::SessionGuard>) -> Self {
        self._observed = guard;
        self
    }

    /// The tools it selected through `search_tools`.
    pub(crate) fn selection(&self) -> &Arc<Selection> {
        &self.selection
    }

    /// The approval-memory scope of this session.
    pub(crate) fn scope(&self) -> String {
        match &self.id {
            Some(id) => format!("session:{id}"),
            None => format!("stdio:{}", self.caller.key()),
        }
    }

    pub(crate) fn client_name(&self) -> &str {
        &self.client_name
    }

    pub(crate) fn protocol_version(&self) -> ProtocolVersion {
        lock(&self.protocol).protocol_version()
    }

    pub(crate) fn can_elicit_form(&self) -> bool {
        lock(&self.protocol).client().can_elicit_form()
    }

    pub(crate) fn can_sample(&self) -> bool {
        lock(&self.protocol).client().can_sample()
    }

    /// The client as it declared itself, with its log level (what a session store keeps).
    pub(crate) fn client_context(&self) -> mcp_protocol::ClientContext {
        lock(&self.protocol).client().clone()
    }

    pub(crate) fn log_level(&self) -> Option<LoggingLevel> {
        lock(&self.protocol).client().log_level
    }

    pub(crate) fn set_log_level(&self, level: LoggingLevel) {
        lock(&self.protocol).set_log_level(level);
    }

    pub(crate) fn initialized(&self) {
        lock(&self.protocol).initialized();
    }

    pub(crate) fn touch(&self, now_ms: u64) {
        self.last_used_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Whether it is in use now: a request of it running (a call may take longer than the
    /// idle limit) or its notification stream open. A busy session is neither expired nor
    /// evicted: ending it would cut its client off mid-call.
    pub(crate) fn busy(&self) -> bool {
        !lock(&self.in_flight).is_empty() || self.has_stream()
    }

    pub(crate) fn last_used_ms(&self) -> u64 {
        self.last_used_ms.load(Ordering::Relaxed)
    }

    /// Records the binding a listing was served from (what another replica served it is
    /// forgotten: this listing is the newer).
    pub(crate) fn listed(&self, binding: &Arc<Binding>) {
        *lock(&self.listed) = Some(Arc::clone(binding));
        *lock(&self.listed_elsewhere) = None;
    }

    /// Continues the listing another replica served (server to [`server_digest`]), until this
    /// session lists here.
    pub(crate) fn listed_elsewhere_as(&self, digests: BTreeMap<String, String>) {
        if lock(&self.listed).is_none() {
            *lock(&self.listed_elsewhere) = Some(Arc::new(digests));
        }
    }

    /// What another replica listed for this session, while it has not listed here.
    pub(crate) fn listed_elsewhere(&self) -> Option<Arc<BTreeMap<String, String>>> {
        lock(&self.listed_elsewhere).clone()
    }

    /// The binding it last listed.
    pub(crate) fn last_listing(&self) -> Option<Arc<Binding>> {
        lock(&self.listed).clone()
    }

    /// Where notifications not tied to a request go (the GET stream, stdout); replaces the
    /// previous one.
    pub(crate) fn set_stream(&self, tx: mpsc::Sender<String>) {
        *lock(&self.stream) = Some(tx);
    }

    /// Whether a notification stream is open.
    pub(crate) fn has_stream(&self) -> bool {
        lock(&self.stream).as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Sends a notification on the session's stream if one is open and has room.
    pub(crate) fn notify(&self, line: String) -> bool {
        let stream = lock(&self.stream);
        stream.as_ref().is_some_and(|tx| tx.try_send(line).is_ok())
    }

    /// Asks the client (`elicitation/create`) on `out` and waits up to `wait` for its answer.
    pub(crate) async fn ask<T: Serialize + ?Sized>(
        &self,
        out: &Outbound,
        method: &str,
        params: &T,
        wait: Duration,
    ) -> Result<Box<RawValue>, AskError> {
        if !out.is_open() {
            return Err(AskError::NoChannel);
        }
        let (tx, rx) = oneshot::channel();
        let (id, line) = lock(&self.protocol)
            .start_request(method, Some(params), tx)
            .map_err(|e| AskError::Protocol(e.to_string()))?;
        // However this ends (answered, timed out, or the call dropped because its client went
        // away), the question is no longer pending: nothing of it stays in the session.
        let _pending = Pending { session: self, id };
        if !out.send(line).await {
            return Err(AskError::NoChannel);
        }
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => Err(AskError::Refused(mcp_safety::text::one_line(&error.message, 200))),
            Ok(Err(_)) => Err(AskError::Closed),
            Err(_) => Err(AskError::Timeout(wait)),
        }
    }

    /// The client's answer to request `id` of the gateway; `false` when none such is pending.
    pub(crate) fn answer(&self, id: &RequestId, outcome: Result<Box<RawValue>, ErrorObject>) -> bool {
        match lock(&self.protocol).complete(id) {
            Some(waiter) => waiter.send(outcome).is_ok(),
            None => false,
        }
    }

    /// Registers request `id` as in flight; the receiver fires when the client cancels it.
    /// `None` when a request with this id is in flight already.
    pub(crate) fn start(&self, id: &RequestId) -> Option<oneshot::Receiver<()>> {
        let mut in_flight = lock(&self.in_flight);
        if in_flight.contains_key(id) {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        in_flight.insert(id.clone(), tx);
        Some(rx)
    }

    /// Request `id` was answered.
    pub(crate) fn finish(&self, id: &RequestId) {
        lock(&self.in_flight).remove(id);
    }

    /// The client cancelled request `id`.
    pub(crate) fn cancel(&self, id: &RequestId) {
        if let Some(tx) = lock(&self.in_flight).remove(id) {
            let _ = tx.send(());
        }
    }

    /// The URI this session subscribed to for `uri` of `server`, if it did.
    pub(crate) fn subscription(&self, server: &str, uri: &str) -> Option<String> {
        lock(&self.subscriptions).get(&(server.to_owned(), uri.to_owned())).cloned()
    }

    /// (server, upstream URI) of the subscription this session made to `outward`, if any.
    pub(crate) fn subscribed_to(&self, outward: &str) -> Option<(String, String)> {
        lock(&self.subscriptions).iter().find(|(_, o)| o.as_str() == outward).map(|(key, _)| key.clone())
    }

    /// Records a subscription; `false` when the session holds [`MAX_SUBSCRIPTIONS`] already.
    pub(crate) fn subscribe(&self, server: &str, uri: &str, outward: &str) -> bool {
        let mut subscriptions = lock(&self.subscriptions);
        let key = (server.to_owned(), uri.to_owned());
        if subscriptions.len() >= MAX_SUBSCRIPTIONS && !subscriptions.contains_key(&key) {
            return false;
        }
        subscriptions.insert(key, outward.to_owned());
        true
    }

    /// Forgets a subscription; whether there was one.
    pub(crate) fn unsubscribe(&self, server: &str, uri: &str) -> bool {
        lock(&self.subscriptions).remove(&(server.to_owned(), uri.to_owned())).is_some()
    }

    /// Ends the session: the gateway's questions to it fail, its requests in flight stop, its
    /// stream closes, its subscriptions end.
    pub(crate) fn close(&self) {
        let mut subscriptions = lock(&self.subscriptions);
        if !subscriptions.is_empty() {
            subscriptions.clear();
            crate::subscriptions::holder_ended();
        }
        drop(subscriptions);
        let waiters = lock(&self.protocol).close();
        drop(waiters);
        for (_, tx) in lock(&self.in_flight).drain() {
            let _ = tx.send(());
        }
        *lock(&self.stream) = None;
    }
}

/// A question to the client that is pending in a session until this is dropped.
struct Pending<'a> {
    session: &'a Session,
    id: RequestId,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        // An answered one is gone already: this then finds nothing.
        lock(&self.session.protocol).complete(&self.id);
    }
}

/// The most of a client's self-reported strings (`clientInfo`'s name, version and title) kept:
/// the name keys approval scopes and audit lines; a real one is a few dozen bytes.
pub(crate) const MAX_CLIENT_INFO_BYTES: usize = 256;
/// A declared sub-capability (`sampling`, `elicitation`, `roots`) is kept as sent up to this
/// size; a larger one keeps only its members' names (the modes it declares), at most
/// [`MAX_CAPABILITY_MEMBERS`] of them.
const MAX_CAPABILITY_BYTES: usize = 1024;
const MAX_CAPABILITY_MEMBERS: usize = 16;

/// `name` cut to at most [`MAX_CLIENT_INFO_BYTES`] (at a character boundary).
pub(crate) fn client_name(name: &str) -> &str {
    mcp_safety::text::prefix(name, MAX_CLIENT_INFO_BYTES)
}

/// What a session keeps of `initialize`'s parameters: `clientInfo`'s strings capped, the
/// capabilities the gateway acts on (large ones reduced to the modes they name), and nothing a
/// client adds beside them (`experimental`, unknown members). A session lives for an hour
/// idle; what a client sends is up to the body limit, so without this a few hundred sessions
/// could hold gigabytes.
pub(crate) fn kept_initialize(params: &InitializeRequestParams) -> InitializeRequestParams {
    let text = |s: &str| client_name(s).to_owned();
    let info = &params.client_info;
    let mut client_info = Implementation::new(text(&info.name), text(&info.version));
    client_info.title = info.title.as_deref().map(text);
    let declared = &params.capabilities;
    let roots = declared.roots.as_ref().map(|r| RootsCapability { list_changed: r.list_changed, ..Default::default() });
    let capabilities = ClientCapabilities {
        roots,
        sampling: declared.sampling.as_ref().map(small_capability),
        elicitation: declared.elicitation.as_ref().map(small_capability),
        ..Default::default()
    };
    InitializeRequestParams {
        protocol_version: text(&params.protocol_version),
        capabilities,
        client_info,
        extra: Default::default(),
    }
}

/// A declared capability as sent when it is small, else an object of its members' names.
fn small_capability(value: &Value) -> Value {
    if serde_json::to_vec(value).is_ok_and(|bytes| bytes.len() <= MAX_CAPABILITY_BYTES) {
        return value.clone();
    }
    let members = value.as_object().into_iter().flatten();
    let names = members
        .filter(|(name, _)| name.len() <= 64)
        .take(MAX_CAPABILITY_MEMBERS)
        .map(|(name, _)| (name.clone(), Value::Object(Map::new())));
    Value::Object(names.collect())
}

/// The digest of `server`'s tools in `binding` (each as the server listed it, with the
/// description clients are shown): what a shared store keeps of a listing. Generations are a
/// replica's own counters; this is comparable across replicas, and across an upstream's
/// restart that brought back the same tools.
pub(crate) fn server_digest(binding: &Binding, server: &str) -> String {
    let tools: Vec<serde_json::Value> = binding
        .pool()
        .iter()
        .filter_map(|entry| match entry.origin() {
            tool_pool::Origin::Mcp { server: s, tool } if s == server => {
                Some(serde_json::json!([entry.name(), entry.description(), tool]))
            }
            _ => None,
        })
        .collect();
    crate::seal::digest_json(&serde_json::Value::Array(tools))
}

/// [`server_digest`] of every server of `binding`.
pub(crate) fn listing_digests(binding: &Binding) -> BTreeMap<String, String> {
    binding.servers().map(|server| (server.to_owned(), server_digest(binding, server))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_protocol::{ClientContext, ProtocolVersion};
    use serde_json::json;

    fn session() -> Session {
        let client = ClientContext { protocol_version: Some(ProtocolVersion::V2025_06_18), ..Default::default() };
        Session::new(None, Caller::local(), ServerSession::restore(client, true), 0)
    }

    #[tokio::test]
    async fn a_question_whose_call_went_away_is_no_longer_pending() {
        let session = session();
        let (tx, mut rx) = mpsc::channel(4);
        let out = Outbound::new(tx);
        let form = json!({});
        {
            let ask = session.ask(&out, "elicitation/create", &form, Duration::from_secs(600));
            tokio::pin!(ask);
            tokio::select! {
                _ = &mut ask => panic!("nobody answered"),
                line = rx.recv() => assert!(line.unwrap_or_default().contains("elicitation/create")),
            }
            assert_eq!(lock(&session.protocol).pending_count(), 1, "asked and waiting");
        }
        assert_eq!(lock(&session.protocol).pending_count(), 0, "the call (and its question) went away");

        // Answered or timed out: nothing left either.
        let asked = session.ask(&out, "elicitation/create", &json!({}), Duration::from_millis(10)).await;
        assert!(matches!(asked, Err(AskError::Timeout(_))), "{asked:?}");
        assert_eq!(lock(&session.protocol).pending_count(), 0);
    }

    #[test]
    fn a_session_keeps_a_bounded_part_of_what_initialize_sent() {
        let huge = "é".repeat(3 << 20);
        let params: InitializeRequestParams = serde_json::from_value(json!({
            "protocolVersion": "2025-06-18",
            "clientInfo": {"name": huge, "version": "1.0", "title": "T", "icons": [{"src": huge}]},
            "capabilities": {
                "experimental": {"blob": huge},
                "elicitation": {"form": {}, "url": {"padding": huge}},
                "sampling": {},
                "roots": {"listChanged": true, "padding": huge},
                "unknown": huge,
            },
            "padding": huge,
        }))
        .unwrap();
        let kept = kept_initialize(&params);
        let size = serde_json::to_vec(&kept).unwrap().len();
        assert!(size < 2 * 1024, "{size} bytes kept");
        assert_eq!(kept.client_info.name.len(), MAX_CLIENT_INFO_BYTES, "cut at a character boundary");
        assert!(kept.client_info.name.chars().all(|c| c == 'é'));
        assert_eq!((kept.client_info.version.as_str(), kept.client_info.title.as_deref()), ("1.0", Some("T")));
        assert_eq!(kept.capabilities.elicitation, Some(json!({"form": {}, "url": {}})), "the modes it named");
        assert_eq!(kept.capabilities.sampling, Some(json!({})));
        assert_eq!(kept.capabilities.roots.as_ref().and_then(|r| r.list_changed), Some(true));
        assert!(kept.capabilities.experimental.is_none() && kept.capabilities.extra.is_empty());

        // What the gateway reads of them is unchanged.
        let context = |p: &InitializeRequestParams| {
            let config = mcp_protocol::ServerConfig::new(Implementation::new("gw", "1"), Default::default());
            let (session, _) = ServerSession::<()>::initialize(&config, p).unwrap();
            (session.client().can_elicit_form(), session.client().can_sample(), session.protocol_version())
        };
        assert_eq!(context(&kept), context(&params));
        assert_eq!(client_name(&huge).len(), MAX_CLIENT_INFO_BYTES);
        assert_eq!(client_name("claude-code"), "claude-code");
    }
}
