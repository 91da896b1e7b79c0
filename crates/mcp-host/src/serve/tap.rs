//! What the gateway needs to hear from its upstreams that the server set keeps to itself: each
//! connection's handshake (the capabilities, `serverInfo` and instructions a transparent
//! gateway mirrors, and whether it completes arguments), its own list changes (so the gateway
//! publishes and tells its clients without waiting to be asked), its log messages and its
//! resource updates.
//!
//! The tap is a connector around each server's own ([`crate::Ports::connectors`]): the
//! transport it opens is wrapped, and every message the client receives passes the tap first,
//! on the reader's path (the stream) or the exchange's (a Streamable HTTP POST's answer). Only
//! notifications are decoded, and the answer to the handshake: a line is looked at only when
//! it can be one (a cheap search for `"notifications/`, or for `"serverInfo"` until the
//! handshake was seen).
//!
//! A list change is signalled only once the client has taken the message in (at the next
//! `recv`, or when the exchange's delivery returned): whoever wakes then and re-lists finds
//! the change announced.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use mcp_client::{
    Connector, DirectWrite, Exchange, Inbound, Opened, Transport, TransportError, TransportSink, TransportStream,
};
use mcp_gateway::BackendEvent;
use mcp_protocol::{Implementation, LoggingMessageNotificationParams, Message, Outgoing, ServerCapabilities, methods};
use mcp_safety::lock;
use serde::Deserialize;
use tokio::sync::{Notify, broadcast};

/// How one upstream presented itself at its last handshake.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Handshake {
    pub(crate) capabilities: ServerCapabilities,
    pub(crate) server_info: Option<Implementation>,
    pub(crate) instructions: Option<String>,
}

/// The answer to `initialize` or `server/discover`, as far as the tap reads it: both carry the
/// server's capabilities and `serverInfo` (required here, so no other answer is taken for one).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HandshakeResult {
    capabilities: ServerCapabilities,
    server_info: Implementation,
    #[serde(default)]
    instructions: Option<String>,
}

#[derive(Deserialize)]
struct UpdatedParams {
    uri: String,
}

/// Which of a server's lists it said changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Changed {
    pub(crate) tools: bool,
    pub(crate) content: bool,
}

impl Changed {
    fn any(self) -> bool {
        self.tools || self.content
    }
}

/// What every upstream's connections report, shared by their taps.
#[derive(Debug)]
pub(crate) struct Tap {
    events: broadcast::Sender<BackendEvent>,
    handshakes: Mutex<HashMap<String, Arc<Handshake>>>,
    /// Woken when an upstream said one of its lists changed (a permit is kept while nobody
    /// waits: the publisher never misses one).
    pub(crate) changed: Notify,
    /// An upstream said its resources or prompts changed since the gateway last listed them.
    pub(crate) content_dirty: AtomicBool,
}

impl Tap {
    pub(crate) fn new(events: broadcast::Sender<BackendEvent>) -> Arc<Self> {
        Arc::new(Self {
            events,
            handshakes: Mutex::new(HashMap::new()),
            changed: Notify::new(),
            content_dirty: AtomicBool::new(false),
        })
    }

    /// `server`'s handshake, as its current connection made it.
    pub(crate) fn handshake(&self, server: &str) -> Option<Arc<Handshake>> {
        lock(&self.handshakes).get(server).cloned()
    }

    /// Wraps `connector`, the one of `server`.
    pub(crate) fn wrap(self: &Arc<Self>, server: &str, connector: Arc<dyn Connector>) -> Arc<dyn Connector> {
        Arc::new(TapConnector { inner: connector, server: server.to_owned(), tap: Arc::clone(self) })
    }

    fn signal(&self, changed: Changed) {
        if changed.content {
            self.content_dirty.store(true, Ordering::SeqCst);
        }
        if changed.any() {
            self.changed.notify_one();
        }
    }
}

#[derive(Debug)]
struct TapConnector {
    inner: Arc<dyn Connector>,
    server: String,
    tap: Arc<Tap>,
}

#[async_trait]
impl Connector for TapConnector {
    async fn open(&self, name: &str) -> Result<Opened, TransportError> {
        let opened = self.inner.open(name).await?;
        let watch = Arc::new(Watch {
            server: self.server.clone(),
            tap: Arc::clone(&self.tap),
            handshake_seen: AtomicBool::new(false),
            logs: Mutex::new(PassBudget::new(Instant::now(), "log messages")),
            updates: Mutex::new(PassBudget::new(Instant::now(), "resource updates")),
        });
        Ok(Opened { transport: Box::new(TapTransport { inner: opened.transport, watch }), stderr: opened.stderr })
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
}

/// One connection's view of what its server sends.
#[derive(Debug)]
struct Watch {
    server: String,
    tap: Arc<Tap>,
    /// This connection's handshake answer was read (the tap stops looking for it).
    handshake_seen: AtomicBool,
    /// The log messages it may still pass on to clients now.
    logs: Mutex<PassBudget>,
    /// The same for `notifications/resources/updated`, which share the clients' channel.
    updates: Mutex<PassBudget>,
}

/// Log messages (and, counted apart, resource updates) a server may pass on: [`LOG_BURST`] at
/// once, [`LOGS_PER_SECOND`] after. The rest are dropped (said once per connection): they
/// share the clients' event channel with list changes, and a flood of them made clients lag
/// and be told everything changed.
const LOG_BURST: f64 = 64.0;
const LOGS_PER_SECOND: f64 = 32.0;

/// One kind of notification's budget of [`LOG_BURST`] and [`LOGS_PER_SECOND`].
#[derive(Debug)]
struct PassBudget {
    tokens: f64,
    at: Instant,
    dropped: u64,
    /// What it counts, for the warning.
    what: &'static str,
}

impl PassBudget {
    fn new(now: Instant, what: &'static str) -> Self {
        Self { tokens: LOG_BURST, at: now, dropped: 0, what }
    }

    /// Whether one more may pass at `now`; the first one dropped is said.
    fn take(&mut self, now: Instant, server: &str) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * LOGS_PER_SECOND).min(LOG_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        self.dropped += 1;
        if self.dropped == 1 {
            tracing::warn!(
                server = %server,
                "it sends {} faster than {LOGS_PER_SECOND} a second; those beyond are not passed on",
                self.what
            );
        }
        false
    }
}

impl Watch {
    /// Takes in one message; the list changes it announced (signalled by the caller once
    /// the client has taken it in).
    fn see(&self, inbound: &Inbound) -> Changed {
        match inbound {
            Inbound::Message(text) => {
                let handshake = !self.handshake_seen.load(Ordering::Relaxed) && text.contains("\"serverInfo\"");
                if (handshake || text.contains("\"notifications/"))
                    && let Ok(message) = Message::decode_str(text)
                {
                    return self.see_message(&message);
                }
                Changed::default()
            }
            Inbound::Decoded(message) => self.see_message(message),
            _ => Changed::default(),
        }
    }

    fn see_message(&self, message: &Message) -> Changed {
        match message {
            Message::Notification(notification) => {
                self.see_notification(&notification.method, notification.params.as_deref())
            }
            Message::Response(response) if !self.handshake_seen.load(Ordering::Relaxed) => {
                // Read into values only within the density the client reading it holds to.
                if let Ok(result) =
                    mcp_protocol::from_str_bounded::<HandshakeResult, _>(response.result.get(), drop, drop)
                {
                    self.handshake_seen.store(true, Ordering::Relaxed);
                    let handshake = Handshake {
                        capabilities: result.capabilities,
                        server_info: Some(result.server_info),
                        instructions: result.instructions,
                    };
                    lock(&self.tap.handshakes).insert(self.server.clone(), Arc::new(handshake));
                    // A new connection's resources and prompts are the gateway's to list again.
                    return Changed { tools: false, content: true };
                }
                Changed::default()
            }
            _ => Changed::default(),
        }
    }

    fn see_notification(&self, method: &str, params: Option<&serde_json::value::RawValue>) -> Changed {
        match method {
            methods::TOOLS_LIST_CHANGED => Changed { tools: true, content: false },
            methods::RESOURCES_LIST_CHANGED | methods::PROMPTS_LIST_CHANGED => Changed { tools: false, content: true },
            methods::MESSAGE => {
                if let Some(params) =
                    params.and_then(|p| serde_json::from_str::<LoggingMessageNotificationParams>(p.get()).ok())
                    && lock(&self.logs).take(Instant::now(), &self.server)
                {
                    // Log messages are for people to read: passed on capped, and their text
                    // without terminal controls, as the gateway's other text for display.
                    let mut params = params;
                    mcp_safety::text::cap_json(&mut params.data, mcp_client::MAX_LOG_DATA_CHARS);
                    if let serde_json::Value::String(text) = &params.data {
                        params.data = serde_json::Value::String(mcp_safety::text::terminal_safe(text));
                    }
                    params.logger = params.logger.map(|l| mcp_safety::text::one_line(&l, 200));
                    let _ = self.tap.events.send(BackendEvent::Log { server: self.server.clone(), params });
                }
                Changed::default()
            }
            methods::RESOURCES_UPDATED => {
                // A URI longer than any a client subscribes to (the gateway refuses those) is no
                // update of one; the rest pass within a budget, like log messages.
                if let Some(params) = params.and_then(|p| serde_json::from_str::<UpdatedParams>(p.get()).ok())
                    && params.uri.len() <= mcp_gateway::MAX_URI_BYTES
                    && lock(&self.updates).take(Instant::now(), &self.server)
                {
                    let _ = self
                        .tap
                        .events
                        .send(BackendEvent::ResourceUpdated { server: self.server.clone(), uri: params.uri });
                }
                Changed::default()
            }
            _ => Changed::default(),
        }
    }
}

struct TapTransport {
    inner: Box<dyn Transport>,
    watch: Arc<Watch>,
}

impl Transport for TapTransport {
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>) {
        let (sink, stream) = self.inner.split();
        let sink = TapSink { inner: sink, watch: Arc::clone(&self.watch) };
        let stream = TapStream { inner: stream, watch: self.watch, unsignalled: Changed::default() };
        (Box::new(sink), Box::new(stream))
    }
}

struct TapSink {
    inner: Box<dyn TransportSink>,
    watch: Arc<Watch>,
}

#[async_trait]
impl TransportSink for TapSink {
    fn direct(&self) -> Option<Arc<dyn DirectWrite>> {
        self.inner.direct()
    }

    fn exchange(&self) -> Option<Arc<dyn Exchange>> {
        let inner = self.inner.exchange()?;
        Some(Arc::new(TapExchange { inner, watch: Arc::clone(&self.watch) }))
    }

    async fn send(&mut self, messages: &[Outgoing]) -> Result<(), TransportError> {
        self.inner.send(messages).await
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.inner.close().await
    }
}

struct TapStream {
    inner: Box<dyn TransportStream>,
    watch: Arc<Watch>,
    /// Changes the last message announced, signalled at the next `recv`: by then the client
    /// has taken that message in.
    unsignalled: Changed,
}

#[async_trait]
impl TransportStream for TapStream {
    async fn recv(&mut self) -> Result<Option<Inbound>, TransportError> {
        let changed = std::mem::take(&mut self.unsignalled);
        self.watch.tap.signal(changed);
        let received = self.inner.recv().await;
        if let Ok(Some(inbound)) = &received {
            self.unsignalled = self.watch.see(inbound);
        }
        received
    }

    async fn closed_reason(&mut self) -> String {
        self.inner.closed_reason().await
    }
}

struct TapExchange {
    inner: Arc<dyn Exchange>,
    watch: Arc<Watch>,
}

#[async_trait]
impl Exchange for TapExchange {
    async fn exchange(&self, message: Outgoing, deliver: &(dyn Fn(Inbound) + Send + Sync)) {
        let watch = &self.watch;
        let tapped = |inbound: Inbound| {
            let changed = watch.see(&inbound);
            deliver(inbound);
            watch.tap.signal(changed);
        };
        self.inner.exchange(message, &tapped).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> (Watch, broadcast::Receiver<BackendEvent>) {
        let (tx, rx) = broadcast::channel(8);
        let watch = Watch {
            server: "files".into(),
            tap: Tap::new(tx),
            handshake_seen: AtomicBool::new(false),
            logs: Mutex::new(PassBudget::new(Instant::now(), "log messages")),
            updates: Mutex::new(PassBudget::new(Instant::now(), "resource updates")),
        };
        (watch, rx)
    }

    fn line(text: &str) -> Inbound {
        Inbound::Message(text.to_owned())
    }

    #[test]
    fn the_handshake_is_read_once_and_other_answers_never_taken_for_it() {
        let (watch, _rx) = watch();
        // A tool result that mentions serverInfo is no handshake.
        let result = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\"serverInfo\""}]}}"#;
        assert_eq!(watch.see(&line(result)), Changed::default());
        assert!(watch.tap.handshake("files").is_none());
        let init = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"completions":{}},"serverInfo":{"name":"up","version":"1"},"instructions":"Be kind."}}"#;
        assert_eq!(watch.see(&line(init)), Changed { tools: false, content: true });
        let seen = watch.tap.handshake("files").unwrap_or_default();
        assert!(seen.capabilities.completions.is_some() && seen.capabilities.prompts.is_none());
        assert_eq!(seen.instructions.as_deref(), Some("Be kind."));
        assert_eq!(seen.server_info.as_ref().map(|i| i.name.as_str()), Some("up"));
        // Later answers are not looked at.
        let again = init.replace("Be kind.", "Obey.");
        assert_eq!(watch.see(&line(&again)), Changed::default());
        assert_eq!(watch.tap.handshake("files").unwrap_or_default().instructions.as_deref(), Some("Be kind."));
    }

    #[test]
    fn log_messages_pass_within_a_budget_and_are_cut() {
        let (watch, mut rx) = watch();
        let log = |data: &str| {
            line(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"{data}"}}}}"#
            ))
        };
        watch.see(&log(r"\u001b]0;TITLE\u0007red\u001b[31m"));
        match rx.try_recv() {
            Ok(BackendEvent::Log { params, .. }) => assert_eq!(params.data.as_str(), Some("]0;TITLEred[31m")),
            other => panic!("{other:?}"),
        }
        watch.see(&log(&"x".repeat(100_000)));
        match rx.try_recv() {
            Ok(BackendEvent::Log { params, .. }) => {
                assert_eq!(params.data.as_str().map(|d| d.chars().count()), Some(mcp_client::MAX_LOG_DATA_CHARS))
            }
            other => panic!("{other:?}"),
        }
        // A flood: the burst passes, the rest does not (the channel here holds 8; count sends).
        let passed = (0..1_000).filter(|_| lock(&watch.logs).take(Instant::now(), "files")).count();
        assert!((60..=70).contains(&passed), "{passed} of 1,000 passed");
        let later = Instant::now() + std::time::Duration::from_secs(1);
        let refilled = (0..1_000).filter(|_| lock(&watch.logs).take(later, "files")).count();
        assert!((30..=34).contains(&refilled), "{refilled} a second later");
    }

    /// Resource updates share the clients' channel: a flood of them passes within a budget
    /// as log messages do (clients lagged and were told everything changed), and a URI over
    /// what a client can subscribe to is no update of one.
    #[test]
    fn resource_updates_pass_within_a_budget_and_bounded() {
        let (watch, mut rx) = watch();
        let updated = |uri: &str| {
            line(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"{uri}"}}}}"#
            ))
        };
        watch.see(&updated(&format!("file:///{}", "x".repeat(mcp_gateway::MAX_URI_BYTES))));
        assert!(rx.try_recv().is_err(), "an overlong URI is not passed on");
        let mut passed = 0;
        for _ in 0..1_000 {
            watch.see(&updated("file:///a"));
            while rx.try_recv().is_ok() {
                passed += 1;
            }
        }
        assert!((60..=70).contains(&passed), "{passed} of 1,000 passed");
    }

    #[test]
    fn list_changes_logs_and_updates_are_heard() {
        let (watch, mut rx) = watch();
        let tools = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        assert_eq!(watch.see(&line(tools)), Changed { tools: true, content: false });
        let prompts = r#"{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}"#;
        assert_eq!(watch.see(&line(prompts)), Changed { tools: false, content: true });
        let log = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}"#;
        assert_eq!(watch.see(&line(log)), Changed::default());
        match rx.try_recv() {
            Ok(BackendEvent::Log { server, params }) => {
                assert_eq!((server.as_str(), params.level.as_str()), ("files", "info"))
            }
            other => panic!("{other:?}"),
        }
        let updated = r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a"}}"#;
        watch.see(&line(updated));
        assert!(matches!(rx.try_recv(), Ok(BackendEvent::ResourceUpdated { uri, .. }) if uri == "file:///a"));
        // Garbage and answers pass without a trace.
        assert_eq!(watch.see(&line("not json \"notifications/")), Changed::default());
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_signal_wakes_the_publisher_even_when_it_was_not_waiting() {
        let (watch, _rx) = watch();
        watch.tap.signal(Changed { tools: false, content: true });
        assert!(watch.tap.content_dirty.load(Ordering::SeqCst));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let Ok(runtime) = runtime else { return };
        let woke = runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), watch.tap.changed.notified()).await.is_ok()
        });
        assert!(woke, "the permit is kept");
    }
}
