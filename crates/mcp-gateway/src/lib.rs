//! The governed gateway: the host's pool, policy and call gate, offered to any other MCP host as
//! one MCP server (`mcp-harness serve`), over stdio and Streamable HTTP.
//!
//! # Design
//!
//! The gateway is a front and nothing else. Everything that decides something about a tool
//! lives where it lives for the agent: the pool (`tool_pool`, named with
//! [`tool_pool::Naming::Gateway`]: `{server}__{tool}`), policy, and the one call gate
//! (`agent_loop::CallGate` over an `agent_loop::Binding`). What the gateway needs from the host
//! that owns them is the [`Backend`] **port**:
//!
//! - [`Backend::binding`]: the pool published for a [`Caller`] (a profile may narrow it): an
//!   `agent_loop::Binding`, i.e. the pool snapshot with its revision, the generation of each
//!   upstream's listing, and the policy it was assembled under. `tools/list` is served from it,
//!   never by asking upstreams.
//! - [`Backend::tools`]: the `agent_loop::ToolSource` the gate checks generations against and
//!   calls through (the host's supervised server set); [`Backend::builtins`] and
//!   [`Backend::hooks`]: the handlers of the built-in tools its pools carry (tool search, code
//!   mode) and the hooks around calls, so the gateway's gate is the host's.
//! - [`Backend::content`], [`Backend::read_resource`], [`Backend::get_prompt`],
//!   [`Backend::complete`]: what upstreams offer besides tools, listed by the host, and the
//!   routed requests. The gateway names prompts like tools and gives a URI two upstreams share
//!   a gateway-made one ([`ContentView`]). [`Backend::subscribe`] / [`Backend::unsubscribe`]:
//!   one upstream subscription per resource however many sessions subscribed; its
//!   [`BackendEvent::ResourceUpdated`] goes to those sessions only, under their URIs.
//! - [`Backend::exposure`]: budgets and tool search ([`ExposureSettings`], the agent's
//!   exposure stage) applied per client: what a client is listed within the budgets, and
//!   `search_tools`, whose answers select tools for that client alone.
//! - [`Backend::events`]: the host's changes ([`BackendEvent`]): a pool republished becomes
//!   `notifications/tools/list_changed` for every client that can receive it.
//! - [`Backend::instructions`]: the upstreams' instructions, which the gateway cleans, caps and
//!   marks per server as the agent's system prompt does (`agent_loop::system_prompt`).
//! - [`Backend::mirrored`]: for a transparent gateway, the one upstream's capabilities and
//!   instructions as it declared them, which the gateway offers instead of its own.
//!
//! # Flows
//!
//! **Listing.** `tools/list` reads the caller's binding and pages its entries (denied tools are
//! not in a pool, so they are never listed). A session remembers the binding it listed.
//!
//! **A call.** `tools/call` is checked by `CallGate::admit_with` (with its caller and its
//! client's approver) against the caller's current binding: the name (an unknown or denied
//! name is answered alike, as an unknown tool), the upstream's generation (for a session, also
//! against the generation it listed: a call prepared against an older listing is refused with
//! a clear message and a `list_changed`, never sent on), the arguments against the schema,
//! policy, hooks; then `CallGate::run` sends it. Progress comes back as
//! `notifications/progress` with the client's own token.
//!
//! **Approvals.** `confirm` goes to the gate's `Approver` port, which the gateway implements
//! by asking the downstream person: a session client that declared elicitation
//! (2025-06-18 on) gets an `elicitation/create` form while the call waits; a 2026-07-28 client
//! that declared it gets an `input_required` result whose `requestState` is sealed
//! ([`StateSealer`]: AES-256-GCM, bound to the caller, the tool, a digest of the arguments and a
//! short lifetime) and accepted once ([`ReplayCache`], a port so replicas can share it); a
//! client that cannot be asked gets an error result naming the rule and the configuration line
//! that would allow the call. "Yes for this client" is remembered per session, or per caller
//! and client for stateless clients ([`ApprovalMemory`], a port too); the gate's own
//! "approved for the session" is never used, since one gate serves every client.
//!
//! **Sessions and the stateless revision.** An `initialize` (2025-03-26, 2025-06-18,
//! 2025-11-25) opens a session: over HTTP it gets an unguessable `Mcp-Session-Id`, its
//! notifications go on its GET stream, DELETE ends it. A request whose `params._meta` carries
//! the 2026-07-28 envelope is served on its own: its revision and capabilities come with it,
//! `server/discover` says who the gateway is, `subscriptions/listen` is the long-lived stream of
//! changes, and over HTTP the mirrored headers must agree with the body
//! (`mcp_protocol::check_headers`, 400 otherwise). Request ids are each client's own: every
//! answer goes back on the connection or HTTP exchange its request came on, and the upstreams
//! see the host's own ids.
//!
//! # Fronts
//!
//! [`serve_stdio`]: newline-delimited JSON, one client, lines bounded. [`HttpServer`]:
//! Streamable HTTP at `/mcp` on hyper directly (no middleware stack), JSON answers unless a
//! request needs to send messages first (progress, an approval form: then SSE), `Host` and
//! `Origin` checked against an allow list (403), loopback by default, and a non-loopback
//! address refused at start unless inbound authentication ([`Authenticator`]) is configured.
//!
//! # Inbound: authentication, profiles, audit, probes and drain
//!
//! [`Inbound`] authenticates HTTP requests with static [`BearerTokens`] (kept as digests) and/or
//! a [`JwtAuthenticator`] (an OAuth resource server: JWTs against the issuer's JWKS; its
//! [`ProtectedResource`] metadata is served at [`METADATA_PATH`], and a 401 names it in
//! `WWW-Authenticate`). [`Profiled`] wraps a backend with [`Profile`]s served at `/mcp/NAME`,
//! each narrowing the host's policy. [`GatewayOptions::audit`] takes an [`AuditSink`] such as
//! [`AuditLog`]. The HTTP front answers [`HEALTHZ`] and [`READYZ`] ([`Backend::ready`]), and
//! its [`Lifecycle`] drains on SIGTERM. [`settings`] reads all of these from `[serve]`.
//!
//! ```
//! use std::sync::Arc;
//! use mcp_gateway::{Gateway, GatewayOptions, fake::FakeBackend};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let backend = FakeBackend::builder().tool("files", "read_file").build();
//! let gateway = Gateway::new(Arc::new(backend), GatewayOptions::default()).unwrap();
//! // One stdio client: a request in, its answer out.
//! let input = concat!(
//!     r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"#,
//!     r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
//!     r#""io.modelcontextprotocol/clientCapabilities":{}}}}"#,
//!     "\n",
//! );
//! let mut output = Vec::new();
//! mcp_gateway::serve_stdio(gateway, input.as_bytes(), &mut output, Default::default())
//!     .await
//!     .unwrap();
//! let answer = String::from_utf8(output).unwrap();
//! assert!(answer.contains(r#""name":"files__read_file""#), "{answer}");
//! # }
//! ```

mod approval;
mod asks;
mod audit;
mod auth;
mod backend;
mod clock;
mod content;
mod exposed;
pub mod fake;
mod gateway;
mod http;
mod limit;
mod observe;
mod owners;
mod profile;
mod seal;
mod session;
pub mod settings;
mod stdio;
mod store;
mod subscriptions;

pub use approval::{ApprovalMemory, MemoryApprovals};
pub use audit::{AuditArguments, AuditLog, AuditOptions, AuditOutcome, AuditRecord, AuditSink, AuditTee};
pub use auth::{
    AuthRequest, Authenticator, BadResource, BearerTokens, Inbound, JwtAuthenticator, JwtError, JwtOptions,
    METADATA_PATH, ProtectedResource, Unauthorized, UnauthorizedKind,
};
pub use backend::{
    Backend, BackendError, BackendEvent, CallAsker, Caller, ContentListing, ExposureSettings, ServerContent, Upstream,
    resource_allowed,
};
pub use clock::{Clock, SystemClock};
pub use content::{ContentView, GATEWAY_SCHEME, gateway_uri};
pub use gateway::{Gateway, GatewayOptions};
pub use http::{
    DrainOptions, DrainReport, HEALTHZ, HttpOptions, HttpServer, Lifecycle, MAX_SESSIONS, MAX_SESSIONS_PER_CALLER,
    METRICS, READYZ, RESERVED_DESCRIPTORS, SESSION_IDLE, ServeError,
};
pub use limit::{
    BucketUse, CallPermit, LimitConfigError, LimitError, LimitKind, LimitRule, Limits, MAX_LIMIT_COUNT,
    MAX_LIMIT_RULES, MemoryLimiter, Per, Plan, RateLimiter, Refusal, SLOT_RETRY, STORE_RETRY, SlotUse, TOKEN_EPSILON,
};
pub use observe::{Answered, MetricsSource, Opened, Received, ServeObserver, ServeWatch, SessionGuard};
pub use profile::{BadProfileName, Profile, Profiled};
pub use seal::{
    ApprovalClaims, MAX_SEALING_KEYS, MemoryReplayCache, ReplayCache, ReplayError, SealError, StateSealer, digest_hex,
};
pub use stdio::{ProcessStdin, ProcessStdout, StdioError, StdioModes, StdioOptions, process_stdio, serve_stdio};
pub use store::{
    MAX_SESSION_ID_CHARS, MAX_SESSION_RECORD_BYTES, MAX_SUBSCRIPTIONS, MAX_URI_BYTES, MemorySessions, SessionChange,
    SessionRecord, SessionStore, StoreError,
};
