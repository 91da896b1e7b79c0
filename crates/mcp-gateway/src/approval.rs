//! Asking the person at the downstream host about `confirm` calls: the gateway's adapter of
//! the gate's `agent_loop::Approver` port.
//!
//! One `CallGate` serves every client: each call is admitted with `CallGate::admit_with` and
//! an `agent_loop::CallContext` naming its caller and carrying its own approver
//! ([`ClientApprover`]: the gateway's shared [`GatewayApprover`] and this call's
//! [`CallContext`], who is asking and how they can be asked). "Yes for this client" is never
//! handed to the gate (whose memory is per caller and process): it lives in
//! [`ApprovalMemory`], per session, or per caller and client for stateless clients, so
//! replicas can share it. A client asked through `input_required` makes the call
//! `Admission::Deferred`.
//!
//! How a client is asked depends on what it is:
//! - a session client that declared elicitation: an `elicitation/create` form, while the call
//!   waits;
//! - a 2026-07-28 client that declared it: the call ends with `input_required` carrying the form
//!   and a sealed `requestState`, and its retry carries the answer;
//! - anyone else: the call is refused with the rule and the configuration line that would let
//!   it run without asking.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::{ApprovalAnswer, ApprovalRequest, Approver};
use async_trait::async_trait;
use mcp_protocol::{ElicitRequestParams, ProtocolVersion, RetryParts, methods};
use serde_json::{Map, Value, json};

use crate::clock::Clock;
use crate::seal::{ApprovalClaims, ReplayCache, SealError, StateSealer, digest_json, random_hex};
use crate::session::{Outbound, Session, lock};
use crate::store::StoreError;

/// The key of the approval form in an `input_required` result's `inputRequests` (and of its
/// answer in the retry's `inputResponses`).
pub(crate) const INPUT_KEY: &str = "approval";
/// The form's one field.
pub(crate) const FIELD: &str = "decision";
/// Most characters of the arguments shown in the form's message.
const SHOWN_ARGUMENTS: usize = 600;

/// What the person chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Do not run it.
    No,
    /// Run this call.
    Yes,
    /// Run it, and every later call of this tool by this client without asking.
    YesForClient,
}

/// The form asking about `request`, for a client speaking `version` (2025-06-18 has only the
/// `enum` + `enumNames` form of a titled choice; later revisions the `oneOf` one).
pub(crate) fn approval_form(request: &ApprovalRequest, version: ProtocolVersion) -> ElicitRequestParams {
    let arguments = mcp_safety::text::one_line(&request.arguments.to_string(), SHOWN_ARGUMENTS);
    let message = format!("Allow {} with {arguments}? (asked by policy {})", request.name, request.rule);
    let options = [("no", "No"), ("yes", "Yes"), ("always", "Yes for this client")];
    let mut field = Map::new();
    field.insert("type".into(), json!("string"));
    field.insert("title".into(), json!("Decision"));
    if version <= ProtocolVersion::V2025_06_18 {
        field.insert("enum".into(), json!(options.iter().map(|(v, _)| v).collect::<Vec<_>>()));
        field.insert("enumNames".into(), json!(options.iter().map(|(_, t)| t).collect::<Vec<_>>()));
    } else {
        let one_of: Vec<Value> = options.iter().map(|(v, t)| json!({"const": v, "title": t})).collect();
        field.insert("oneOf".into(), Value::Array(one_of));
    }
    field.insert("default".into(), json!("no"));
    let schema = json!({"type": "object", "properties": {FIELD: Value::Object(field)}, "required": [FIELD]});
    ElicitRequestParams {
        mode: (version >= ProtocolVersion::V2025_11_25).then(|| "form".to_owned()),
        message,
        requested_schema: Some(schema),
        url: None,
        elicitation_id: None,
        extra: Map::new(),
    }
}

/// What an elicitation answer (`ElicitResult`) chose: `accept` with `yes` or `always`; anything
/// else (decline, cancel, no, a malformed answer) is no.
pub(crate) fn read_answer(result: &Value) -> Choice {
    if result.get("action").and_then(Value::as_str) != Some("accept") {
        return Choice::No;
    }
    match result.get("content").and_then(|c| c.get(FIELD)).and_then(Value::as_str) {
        Some("yes") => Choice::Yes,
        Some("always") => Choice::YesForClient,
        _ => Choice::No,
    }
}

/// Why nobody could be asked, and the configuration that would allow the call without asking.
pub(crate) fn cannot_ask(request: &ApprovalRequest, why: &str) -> String {
    let server = request.server.as_deref().unwrap_or(policy::BUILTIN_SERVER);
    format!(
        "{why}; to let it run without asking, add to the gateway's configuration:\n[[policy.rules]]\nserver = {}\ntool = {}\ndecision = \"allow\"",
        toml_string(&literal_pattern(server)),
        toml_string(&literal_pattern(&request.tool)),
    )
}

/// A pattern matching `name`: policy patterns give `*` and `?` meaning, so those characters are
/// matched by `?` (any one character).
fn literal_pattern(name: &str) -> String {
    name.chars().map(|c| if matches!(c, '*' | '?') { '?' } else { c }).collect()
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || mcp_safety::text::is_stripped(c) => {
                out.push_str(&format!("\\u{:04X}", u32::from(c)))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Remembers "yes for this client": a **port**, so replicas can share it (a shared store keeps
/// it beside the session, `mcp-gateway-store`).
///
/// A store that cannot answer says so ([`StoreError`]): the call is then refused with that
/// error, never run as if approved, and never asked about as if nothing were remembered.
#[async_trait]
pub trait ApprovalMemory: fmt::Debug + Send + Sync {
    /// Whether `key` (a tool and the rule that asks) was approved for good in `scope`.
    async fn approved(&self, scope: &str, key: &str) -> Result<bool, StoreError>;
    /// Remembers it; a memory that is full may forget (the person is then asked again).
    async fn remember(&self, scope: &str, key: &str) -> Result<(), StoreError>;
    /// Forgets a scope (its session ended). Best effort: what a shared store could not forget
    /// now goes when its lifetime ends.
    async fn forget(&self, scope: &str);
}

/// The in-memory [`ApprovalMemory`], bounded: when full, the scope used least recently is
/// forgotten whole (its person is asked again), so a full memory never stops remembering for
/// everyone (a stateless client's scope is never forgotten otherwise).
#[derive(Debug)]
pub struct MemoryApprovals {
    capacity: usize,
    remembered: Mutex<Remembered>,
}

#[derive(Debug, Default)]
struct Remembered {
    /// Each scope's approvals and when it was last used.
    scopes: HashMap<String, (HashSet<String>, u64)>,
    /// The scopes by when they were last used.
    by_use: BTreeMap<u64, String>,
    /// Approvals held in all.
    total: usize,
    /// Counts uses.
    tick: u64,
}

impl Remembered {
    /// Marks `scope` used now.
    fn touch(&mut self, scope: &str) {
        self.tick += 1;
        let tick = self.tick;
        if let Some((_, used)) = self.scopes.get_mut(scope) {
            self.by_use.remove(used);
            *used = tick;
            self.by_use.insert(tick, scope.to_owned());
        }
    }

    fn forget(&mut self, scope: &str) {
        if let Some((keys, used)) = self.scopes.remove(scope) {
            self.by_use.remove(&used);
            self.total -= keys.len();
        }
    }
}

impl MemoryApprovals {
    /// At most `capacity` remembered approvals in all.
    pub fn new(capacity: usize) -> Self {
        Self { capacity, remembered: Mutex::new(Remembered::default()) }
    }
}

impl Default for MemoryApprovals {
    fn default() -> Self {
        Self::new(100_000)
    }
}

#[async_trait]
impl ApprovalMemory for MemoryApprovals {
    async fn approved(&self, scope: &str, key: &str) -> Result<bool, StoreError> {
        let mut remembered = lock(&self.remembered);
        let approved = remembered.scopes.get(scope).is_some_and(|(keys, _)| keys.contains(key));
        if approved {
            remembered.touch(scope);
        }
        Ok(approved)
    }

    async fn remember(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        let mut remembered = lock(&self.remembered);
        // Used now, before anything is forgotten to make room: never the scope being added to.
        remembered.touch(scope);
        if remembered.scopes.get(scope).is_some_and(|(keys, _)| keys.contains(key)) {
            return Ok(());
        }
        while remembered.total >= self.capacity {
            let Some((_, oldest)) = remembered.by_use.pop_first() else { break };
            if let Some((keys, _)) = remembered.scopes.remove(&oldest) {
                remembered.total -= keys.len();
            }
        }
        if remembered.total >= self.capacity {
            return Ok(());
        }
        if !remembered.scopes.contains_key(scope) {
            remembered.tick += 1;
            let tick = remembered.tick;
            remembered.scopes.insert(scope.to_owned(), (HashSet::new(), tick));
            remembered.by_use.insert(tick, scope.to_owned());
        }
        if let Some((keys, _)) = remembered.scopes.get_mut(scope)
            && keys.insert(key.to_owned())
        {
            remembered.total += 1;
        }
        Ok(())
    }

    async fn forget(&self, scope: &str) {
        lock(&self.remembered).forget(scope);
    }
}

/// How the client of one call can be asked.
#[derive(Debug)]
pub(crate) enum Way {
    /// A session client that declared elicitation: a form on the request's channel.
    Elicit {
        /// Its session.
        session: Arc<Session>,
        /// Where the form goes (the request's SSE stream, stdout).
        out: Outbound,
    },
    /// A 2026-07-28 client that declared elicitation: `input_required`, or the answer its
    /// retry carries.
    Retry {
        /// What the retry carries (nothing on the first attempt).
        parts: RetryParts,
    },
    /// Nobody: why.
    Nobody(String),
}

/// What the approver concluded beyond its answer, for the gateway to act on.
#[derive(Debug, Default)]
pub(crate) enum Outcome {
    /// Nothing beyond the answer.
    #[default]
    Answered,
    /// The client must be asked through `input_required`: the form and the sealed state.
    Deferred {
        /// The form.
        form: Box<ElicitRequestParams>,
        /// The sealed `requestState`.
        state: String,
    },
    /// The retry's `requestState` was refused.
    StateRefused(SealError),
}

/// Who asks, and how they can be asked, for one call: put beside the call for the approver.
#[derive(Debug)]
pub(crate) struct CallContext {
    /// How the client can be asked.
    pub(crate) way: Way,
    /// The caller's text in sealed states ([`crate::Caller::key`] and the client's name).
    pub(crate) caller: String,
    /// Whose share of the replay cache the call's approvals take: the authenticated principal
    /// ([`crate::Caller::principal_key`]), never the client's self-chosen name; `None` without one.
    pub(crate) owner: Option<String>,
    /// The approval-memory scope.
    pub(crate) scope: String,
    /// The revision the client speaks (the form's shape).
    pub(crate) version: ProtocolVersion,
    /// What the approver concluded.
    pub(crate) outcome: Mutex<Outcome>,
}

/// The approver of one call: the gateway's, asking that call's client.
#[derive(Debug)]
pub(crate) struct ClientApprover {
    pub(crate) shared: Arc<GatewayApprover>,
    pub(crate) ctx: Arc<CallContext>,
}

/// The gateway's approver: what every call's [`ClientApprover`] shares. As the gate's own
/// approver (a call admitted without its client's context) it asks nobody.
#[derive(Debug)]
pub(crate) struct GatewayApprover {
    pub(crate) sealer: Arc<StateSealer>,
    pub(crate) replay: Arc<dyn ReplayCache>,
    pub(crate) memory: Arc<dyn ApprovalMemory>,
    pub(crate) clock: Arc<dyn Clock>,
    /// How long a sealed state is accepted.
    pub(crate) state_ttl: Duration,
    /// How long a form waits for its answer.
    pub(crate) wait: Duration,
}

impl GatewayApprover {
    async fn choose(&self, ctx: &CallContext, request: &ApprovalRequest) -> Result<Choice, ApprovalAnswer> {
        match &ctx.way {
            Way::Nobody(why) => Err(ApprovalAnswer::Unanswered(cannot_ask(request, why))),
            Way::Elicit { session, out } => {
                let form = approval_form(request, ctx.version);
                match session.ask(out, methods::ELICITATION_CREATE, &form, self.wait).await {
                    // An answer too dense to read is a no, like one that does not parse.
                    Ok(raw) => Ok(mcp_protocol::from_str_bounded(raw.get(), drop, drop)
                        .map_or(Choice::No, |v: Value| read_answer(&v))),
                    Err(e) => Err(ApprovalAnswer::Unanswered(format!("the client could not be asked: {e}"))),
                }
            }
            Way::Retry { parts } => {
                if let Some(state) = &parts.request_state {
                    if let Err(refused) = self.verify(state, ctx, request).await {
                        let why = refused.to_string();
                        *lock(&ctx.outcome) = Outcome::StateRefused(refused);
                        return Err(ApprovalAnswer::Unanswered(why));
                    }
                    if let Some(answer) = parts.input_responses.as_ref().and_then(|r| r.get(INPUT_KEY)) {
                        return Ok(read_answer(answer));
                    }
                }
                // First attempt, or a retry without the answer: ask (again).
                match self.defer(ctx, request) {
                    Ok(outcome) => {
                        *lock(&ctx.outcome) = outcome;
                        Err(ApprovalAnswer::Deferred("the client is asked first, through input_required".to_owned()))
                    }
                    Err(e) => Err(ApprovalAnswer::Unanswered(format!("the client could not be asked: {e}"))),
                }
            }
        }
    }

    async fn verify(&self, state: &str, ctx: &CallContext, request: &ApprovalRequest) -> Result<(), SealError> {
        let now = self.clock.unix_ms();
        let claims = self.sealer.open(state, now)?;
        claims.check(&ctx.caller, &request.name, &request.arguments)?;
        match self.replay.first_use(ctx.owner.as_deref(), &claims.id, claims.expires_ms, now).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(SealError::Replayed),
            Err(e) => Err(SealError::Replay(e)),
        }
    }

    fn defer(&self, ctx: &CallContext, request: &ApprovalRequest) -> Result<Outcome, SealError> {
        let ttl = u64::try_from(self.state_ttl.as_millis()).unwrap_or(u64::MAX);
        let claims = ApprovalClaims {
            caller: ctx.caller.clone(),
            tool: request.name.clone(),
            arguments: digest_json(&request.arguments),
            expires_ms: self.clock.unix_ms().saturating_add(ttl),
            id: random_hex(16)?,
        };
        let state = self.sealer.seal(&claims)?;
        Ok(Outcome::Deferred { form: Box::new(approval_form(request, ctx.version)), state })
    }
}

#[async_trait]
impl Approver for GatewayApprover {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Unanswered("the gateway does not know who is asking".to_owned())
    }
}

#[async_trait]
impl Approver for ClientApprover {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let (shared, ctx) = (&self.shared, &self.ctx);
        let key = format!("{}\n{}", request.name, request.rule);
        match shared.memory.approved(&ctx.scope, &key).await {
            Ok(true) => return ApprovalAnswer::Yes,
            Ok(false) => {}
            Err(e) => {
                return ApprovalAnswer::Unanswered(format!(
                    "the approvals remembered for this client cannot be read: {e}"
                ));
            }
        }
        match shared.choose(ctx, request).await {
            Ok(Choice::Yes) => ApprovalAnswer::Yes,
            Ok(Choice::YesForClient) => {
                // The person approved this call; not remembering it only means asking again.
                if let Err(e) = shared.memory.remember(&ctx.scope, &key).await {
                    tracing::warn!(error = %e, "\"yes for this client\" could not be remembered");
                }
                ApprovalAnswer::Yes
            }
            Ok(Choice::No) => ApprovalAnswer::No,
            Err(answer) => answer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest::new(
            "files__write_file",
            Some("files".into()),
            "write_file",
            json!({"path": "a.txt", "text": "\u{1b}[2Jhi"}),
            "default",
        )
    }

    #[test]
    fn the_form_fits_each_revision() {
        let old = serde_json::to_value(approval_form(&request(), ProtocolVersion::V2025_06_18)).unwrap();
        assert_eq!(
            old,
            json!({"message": "Allow files__write_file with {\"path\":\"a.txt\",\"text\":\"\\u001b[2Jhi\"}? (asked by policy default)",
                "requestedSchema": {"type": "object", "required": ["decision"], "properties": {"decision": {
                    "type": "string", "title": "Decision", "enum": ["no", "yes", "always"],
                    "enumNames": ["No", "Yes", "Yes for this client"], "default": "no"}}}})
        );
        let new = serde_json::to_value(approval_form(&request(), ProtocolVersion::V2026_07_28)).unwrap();
        assert_eq!(new["mode"], "form");
        assert_eq!(
            new["requestedSchema"]["properties"]["decision"]["oneOf"][2],
            json!({"const": "always", "title": "Yes for this client"})
        );
    }

    #[test]
    fn answers() {
        assert_eq!(read_answer(&json!({"action": "accept", "content": {"decision": "yes"}})), Choice::Yes);
        assert_eq!(read_answer(&json!({"action": "accept", "content": {"decision": "always"}})), Choice::YesForClient);
        assert_eq!(read_answer(&json!({"action": "accept", "content": {"decision": "no"}})), Choice::No);
        assert_eq!(read_answer(&json!({"action": "accept", "content": {"decision": 1}})), Choice::No);
        assert_eq!(read_answer(&json!({"action": "decline", "content": {"decision": "yes"}})), Choice::No);
        assert_eq!(read_answer(&json!("yes")), Choice::No);
    }

    #[test]
    fn the_refusal_names_the_configuration_that_would_allow_it() {
        let mut request = request();
        request.tool = "wr\"ite*".into();
        assert_eq!(
            cannot_ask(&request, "this client cannot be asked"),
            "this client cannot be asked; to let it run without asking, add to the gateway's configuration:\n\
             [[policy.rules]]\nserver = \"files\"\ntool = \"wr\\\"ite?\"\ndecision = \"allow\""
        );
    }

    #[tokio::test]
    async fn memory_is_per_scope_and_bounded() {
        let memory = MemoryApprovals::new(1);
        memory.remember("s1", "k").await.unwrap();
        assert_eq!(memory.approved("s1", "k").await, Ok(true));
        assert_eq!(memory.approved("s2", "k").await, Ok(false));
        memory.remember("s1", "k").await.unwrap();
        assert_eq!(lock(&memory.remembered).total, 1, "the same approval again is counted once");
        memory.forget("s1").await;
        assert_eq!(memory.approved("s1", "k").await, Ok(false));
        memory.remember("s2", "k").await.unwrap();
        assert_eq!(memory.approved("s2", "k").await, Ok(true));
    }

    /// Full, the memory forgets the scope used least recently (it stopped remembering anything
    /// for anyone, and a stateless client's scope is never forgotten otherwise).
    #[tokio::test]
    async fn a_full_memory_forgets_the_scope_used_least_recently() {
        let memory = MemoryApprovals::new(3);
        for scope in ["a", "b", "c"] {
            memory.remember(scope, "k").await.unwrap();
        }
        assert_eq!(memory.approved("a", "k").await, Ok(true)); // "b" is now the least recent
        memory.remember("d", "k").await.unwrap();
        assert_eq!(memory.approved("b", "k").await, Ok(false), "forgotten");
        for scope in ["a", "c", "d"] {
            assert_eq!(memory.approved(scope, "k").await, Ok(true), "{scope}");
        }
        // The scope being added to is used now: what it holds is never what makes room.
        memory.remember("a", "k2").await.unwrap();
        assert_eq!(memory.approved("a", "k").await, Ok(true), "a's first approval stays");
        assert_eq!(memory.approved("a", "k2").await, Ok(true));
        // Many new scopes (a caller naming a new client each time): it keeps remembering.
        for n in 0..100 {
            memory.remember(&format!("client:p\n{n}"), "k").await.unwrap();
        }
        assert_eq!(memory.approved("client:p\n99", "k").await, Ok(true));
        let remembered = lock(&memory.remembered);
        assert_eq!((remembered.total, remembered.scopes.len(), remembered.by_use.len()), (3, 3, 3));
    }
}
