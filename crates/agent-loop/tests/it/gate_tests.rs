//! The call gate on its own, as the gateway and code mode use it: bindings under either
//! naming, callers, deferrals, decisions reported to hooks, built-ins that call through it.

use std::sync::{Arc, Mutex};

use agent_loop::{
    Admission, Agent, AgentConfig, ApprovalAnswer, Binding, CallContext, CallDecision, CallGate, CallInfo, CallRequest,
    Catalog, Departure, DepartureState, GateDecision, HookVerdict, Hooks, NoHooks, Refusal,
};
use policy::{Decision, Policy, PolicyConfig, RuleConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tool_pool::Naming;

use crate::fake::{Counting, Events, FakeSource, Recording, results, text_schema, tool};

pub(crate) fn policy(default: Decision, rules: &[(&str, &str, Decision)]) -> Policy {
    Policy::new(PolicyConfig {
        default,
        rules: rules.iter().map(|(s, t, d)| RuleConfig::new(*s, *t, *d)).collect(),
        ..Default::default()
    })
    .unwrap()
}

/// A binding of `source` under `policy`, its tools named by `naming`.
pub(crate) async fn bind(source: &FakeSource, policy: Policy, naming: Naming) -> Arc<Binding> {
    let options = tool_pool::Options { naming, ..Default::default() };
    Catalog::new(Arc::new([]), policy, options).bind(source).await.unwrap()
}

pub(crate) fn request<'a>(id: &'a str, name: &'a str, arguments: &'a Value) -> CallRequest<'a> {
    CallRequest { id, name, arguments }
}

/// A denied tool is found under the name the pool would have given it, whatever the naming:
/// under the gateway's `{server}__{tool}` it is reported as denied, with its rule, not as
/// unknown.
#[tokio::test]
async fn a_denied_tool_is_named_as_its_pool_names_tools() {
    let source = FakeSource::with(&[("fs", vec![tool("read", text_schema()), tool("rm", text_schema())])]);
    let deny = || policy(Decision::Allow, &[("fs", "rm", Decision::Deny)]);
    let gate = CallGate::default();
    let args = json!({"text": "/"});
    for (naming, name) in [(Naming::Agent, "mcp__fs__rm"), (Naming::Gateway, "fs__rm"), (Naming::Transparent, "rm")] {
        let binding = bind(&source, deny(), naming).await;
        match gate.admit(&binding, source.as_ref(), request("1", name, &args)).await {
            Admission::Refused(Refusal::Denied { name: denied, who, .. }) => {
                assert_eq!((denied.as_str(), who.as_str()), (name, r#"tool "rm" of server "fs""#));
            }
            other => panic!("{naming:?}: {other:?}"),
        }
    }
    assert!(source.calls.lock().unwrap().is_empty());
}

/// A `confirm` call asked by a caller goes to the approver of its context (not the gate's),
/// which is told who asks and, for a script's call, which script.
#[tokio::test]
async fn the_approver_of_the_call_is_asked_and_told_who_asks() {
    let source = FakeSource::with(&[("fs", vec![tool("write", text_schema())])]);
    let binding = bind(&source, policy(Decision::Confirm, &[]), Naming::Gateway).await;
    let gates_own = Counting::new(ApprovalAnswer::No);
    let gate = CallGate::new(gates_own.clone(), Arc::new(NoHooks));
    let callers = Counting::new(ApprovalAnswer::Yes);
    let context = CallContext::new().with_caller("session-1").with_parent("call_7").with_approver(callers.clone());
    let args = json!({"text": "a"});
    let admission = gate.admit_with(&binding, source.as_ref(), request("1", "fs__write", &args), &context).await;
    assert!(matches!(admission, Admission::Run { decision: CallDecision::Approved, .. }), "{admission:?}");
    assert_eq!(gates_own.count(), 0, "the gate's own approver is not asked");
    let asked = callers.asked.lock().unwrap()[0].clone();
    assert_eq!((asked.caller.as_deref(), asked.script.as_deref()), (Some("session-1"), Some("call_7")));
    assert_eq!(asked.asked_by().as_deref(), Some(r#"script "call_7""#));
    assert_eq!((asked.name.as_str(), asked.server.as_deref(), asked.tool.as_str()), ("fs__write", Some("fs"), "write"));

    // Without a context: the gate's approver, the default caller.
    let admission = gate.admit(&binding, source.as_ref(), request("2", "fs__write", &args)).await;
    assert!(matches!(admission, Admission::Refused(Refusal::NotApproved { .. })), "{admission:?}");
    let asked = gates_own.asked.lock().unwrap()[0].clone();
    assert_eq!((asked.caller.as_deref(), asked.script.as_deref(), asked.asked_by()), (None, None, None));
}

/// "Yes for this session" is the caller's alone: another caller (and the default one) is
/// still asked, and a caller forgotten is asked again.
#[tokio::test]
async fn approvals_for_the_session_are_kept_per_caller() {
    let source = FakeSource::with(&[("fs", vec![tool("write", text_schema())])]);
    let binding = bind(&source, policy(Decision::Confirm, &[]), Naming::Agent).await;
    let approver = Counting::new(ApprovalAnswer::YesForSession);
    let gate = CallGate::new(approver.clone(), Arc::new(NoHooks));
    let args = json!({"text": "a"});
    let admit = |caller: Option<&str>| {
        let context = caller.map_or_else(CallContext::new, |c| CallContext::new().with_caller(c));
        let gate = &gate;
        let (binding, source, args) = (&binding, source.clone(), &args);
        async move {
            let admission =
                gate.admit_with(binding, source.as_ref(), request("1", "mcp__fs__write", args), &context).await;
            assert!(matches!(admission, Admission::Run { decision: CallDecision::Approved, .. }), "{admission:?}");
        }
    };
    admit(Some("a")).await;
    admit(Some("a")).await;
    assert_eq!(approver.count(), 1, "caller a approved it for its session");
    admit(Some("b")).await;
    assert_eq!(approver.count(), 2, "caller b is asked for itself");
    admit(None).await;
    admit(None).await;
    assert_eq!(approver.count(), 3, "the default caller is asked once, for itself");
    gate.forget_caller("a");
    admit(Some("a")).await;
    assert_eq!(approver.count(), 4, "a forgotten caller is asked again");
    admit(Some("b")).await;
    assert_eq!(approver.count(), 4, "b's approval stays");
}

/// An approver that asks out of band defers the call: nothing runs, nothing is remembered,
/// and the agent loop's model reads that the call waits for approval.
#[tokio::test]
async fn a_deferred_approval_runs_nothing_and_says_so() {
    let source = FakeSource::with(&[("fs", vec![tool("write", text_schema())])]);
    let binding = bind(&source, policy(Decision::Confirm, &[]), Naming::Gateway).await;
    let deferring = Counting::new(ApprovalAnswer::Deferred("the client is asked first".into()));
    let gate = CallGate::new(deferring.clone(), Arc::new(NoHooks));
    let args = json!({"text": "a"});
    for _ in 0..2 {
        let admission = gate.admit(&binding, source.as_ref(), request("1", "fs__write", &args)).await;
        match &admission {
            Admission::Deferred { name, reason } => {
                assert_eq!((name.as_str(), reason.as_str()), ("fs__write", "the client is asked first"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(admission.decision(), CallDecision::Deferred);
        assert_eq!(
            admission.not_run_text().unwrap(),
            "the call to fs__write was not run: it waits for approval (the client is asked first)"
        );
    }
    assert_eq!(deferring.count(), 2, "a deferral is not an approval for the session");

    let model = Recording::new(json!({"turns": [
        {"tool_calls": [{"name": "mcp__fs__write", "input": {"text": "a"}}]}, {"text": "ok"}]}));
    let agent = Agent::new(model, source.clone(), policy(Decision::Confirm, &[]), AgentConfig::default())
        .with_approver(deferring);
    let events = Events::default();
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "go", &events).await.unwrap();
    assert_eq!(events.of("tool_call")[0]["decision"], "deferred");
    let results = results(&conversation);
    assert!(results[0].1 && results[0].0.contains("waits for approval (the client is asked first)"), "{results:?}");
    assert!(source.calls.lock().unwrap().is_empty());
}

/// Records every decision the hooks hear: the name, the decision, the rule, and whether a
/// refusal came with it; blocks calls to `blocked`, and panics when told about `explode`.
#[derive(Default)]
struct Audit(Mutex<Vec<Heard>>);

/// What [`Audit`] keeps of one decision: the call's name, the decision, the rule, whether a
/// refusal came with it.
type Heard = (String, Value, Option<String>, bool);

#[async_trait::async_trait]
impl Hooks for Audit {
    fn decided(&self, call: &CallInfo, decision: &GateDecision<'_>) {
        if call.name.ends_with("explode") {
            panic!("the audit log is full");
        }
        let kind = serde_json::to_value(&decision.decision).unwrap();
        let entry = (call.name.clone(), kind, decision.rule.map(str::to_owned), decision.refusal.is_some());
        self.0.lock().unwrap().push(entry);
    }

    async fn before_tool(&self, call: &CallInfo) -> HookVerdict {
        if call.name.ends_with("blocked") { HookVerdict::Block("not today".into()) } else { HookVerdict::Continue }
    }
}

/// Every decision reaches the hooks once, with the rule that made it: refusals of every kind
/// (unknown, denied, bad arguments, stale, not approved, blocked, deferred), calls let
/// through, and a call refused at the last moment because its server changed.
#[tokio::test]
async fn hooks_hear_every_decision_with_its_rule() {
    let tools = || ["read", "rm", "write", "later", "blocked", "explode"].map(|t| tool(t, text_schema())).to_vec();
    let source = FakeSource::with(&[("fs", tools()), ("db", vec![tool("query", text_schema())])]);
    let rules = [
        ("fs", "rm", Decision::Deny),
        ("fs", "write", Decision::Confirm),
        ("fs", "later", Decision::Confirm),
        ("fs", "read", Decision::Allow),
        ("fs", "blocked", Decision::Allow),
        ("fs", "explode", Decision::Allow),
        ("db", "*", Decision::Allow),
    ];
    let binding = bind(&source, policy(Decision::Allow, &rules), Naming::Gateway).await;
    let audit = Arc::new(Audit::default());
    let gate = CallGate::new(Counting::new(ApprovalAnswer::No), audit.clone());
    let good = json!({"text": "x"});
    let bad = json!({"text": 5});
    let deferring: Arc<dyn agent_loop::Approver> = Counting::new(ApprovalAnswer::Deferred("asked later".into()));
    let later = CallContext::new().with_approver(deferring);
    let admit = async |name: &str, args: &Value, context: &CallContext| {
        gate.admit_with(&binding, source.as_ref(), request("1", name, args), context).await
    };
    let none = CallContext::new();
    assert!(matches!(admit("fs__read", &good, &none).await, Admission::Run { .. }));
    assert!(matches!(admit("fs__nope", &good, &none).await, Admission::Refused(Refusal::UnknownTool { .. })));
    assert!(matches!(admit("fs__rm", &good, &none).await, Admission::Refused(Refusal::Denied { .. })));
    assert!(matches!(admit("fs__read", &bad, &none).await, Admission::Refused(Refusal::BadArguments { .. })));
    assert!(matches!(admit("fs__write", &good, &none).await, Admission::Refused(Refusal::NotApproved { .. })));
    assert!(matches!(admit("fs__later", &good, &later).await, Admission::Deferred { .. }));
    assert!(matches!(admit("fs__blocked", &good, &none).await, Admission::Refused(Refusal::Blocked { .. })));
    // A hook that fails blocks the call it was told about; the turn goes on.
    match admit("fs__explode", &good, &none).await {
        Admission::Refused(Refusal::Blocked { why, .. }) => assert!(why.contains("the audit log is full"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Admitted, then the server changes before it runs.
    let Admission::Run { job, .. } = admit("db__query", &good, &none).await else { panic!("not admitted") };
    source.change("db", vec![tool("query", text_schema()), tool("more", text_schema())]);
    assert!(matches!(gate.run(source.as_ref(), job, None).await, agent_loop::Ran::Refused(Refusal::Stale { .. })));
    // And stale at admission.
    assert!(matches!(admit("db__query", &good, &none).await, Admission::Refused(Refusal::Stale { .. })));

    // Rules are named by their place in the configuration, then what they match.
    let rule = |n: usize, server: &str, tool: &str| Some(format!("rule {n} (server {server:?}, tool {tool:?})"));
    let seen = audit.0.lock().unwrap().clone();
    let expected = vec![
        ("fs__read".to_owned(), json!("allowed"), rule(3, "fs", "read"), false),
        ("fs__nope".to_owned(), json!("rejected"), None, true),
        ("fs__rm".to_owned(), json!("refused"), rule(0, "fs", "rm"), true),
        ("fs__read".to_owned(), json!("rejected"), None, true),
        ("fs__write".to_owned(), json!("refused"), rule(1, "fs", "write"), true),
        ("fs__later".to_owned(), json!("deferred"), rule(2, "fs", "later"), false),
        ("fs__blocked".to_owned(), json!("blocked"), rule(4, "fs", "blocked"), true),
        ("db__query".to_owned(), json!("allowed"), rule(6, "db", "*"), false),
        ("db__query".to_owned(), json!("rejected"), None, true),
        ("db__query".to_owned(), json!("rejected"), None, true),
    ];
    assert_eq!(seen, expected);
    assert!(source.calls.lock().unwrap().is_empty(), "nothing reached a server");
}

/// A source that says why server `gone` left (disabled), and knows `never` (failed at start).
struct Telling(Arc<FakeSource>);

#[async_trait::async_trait]
impl agent_loop::ToolSource for Telling {
    async fn refresh(&self) -> agent_loop::Listing {
        self.0.refresh().await
    }

    fn generation(&self, server: &str) -> Option<u64> {
        self.0.generation(server)
    }

    async fn call_bound(
        &self,
        call: agent_loop::BoundCall,
    ) -> Result<mcp_protocol::CallToolResult, agent_loop::SourceError> {
        self.0.call_bound(call).await
    }

    fn departure(&self, server: &str) -> Option<Departure> {
        match server {
            "gone" => Some(Departure::new(DepartureState::Disabled)),
            "never" => Some(
                Departure::new(DepartureState::Failed)
                    .with_exit(Some(mcp_client::ProcessExit::Status(3)))
                    .with_detail(Some("it said \u{1b}[31mbye".into())),
            ),
            _ => None,
        }
    }
}

/// A server that left the pool: its tools (under every naming, the same catalog binding
/// again) are refused with the server and why, whatever source; a tool of another server of
/// the same raw name is never suggested; a name nobody had stays unknown, with suggestions.
#[tokio::test]
async fn a_tool_whose_server_left_names_the_server_and_why_and_no_other_servers_tool() {
    let args = json!({"text": "x"});
    let gate = CallGate::default();
    for (naming, echo, other) in [
        (Naming::Agent, "mcp__gone__echo", "mcp__gone__other"),
        (Naming::Gateway, "gone__echo", "gone__other"),
        (Naming::Transparent, "echo", "other"),
    ] {
        let fake = FakeSource::with(&[
            ("gone", vec![tool("echo", text_schema())]),
            ("here", vec![tool("ech0", text_schema())]),
        ]);
        let source = Telling(Arc::clone(&fake));
        let options = tool_pool::Options { naming, ..Default::default() };
        let catalog = Catalog::new(Arc::new([]), policy(Decision::Allow, &[]), options);
        catalog.bind(&source).await.unwrap();
        fake.servers.lock().unwrap().remove("gone");
        let binding = catalog.bind(&source).await.unwrap();
        // Still remembered after another change elsewhere.
        fake.change("here", vec![tool("ech0", text_schema()), tool("more", text_schema())]);
        let binding_after = catalog.bind(&source).await.unwrap();
        assert_ne!(binding.pool().revision(), binding_after.pool().revision());
        for binding in [&binding, &binding_after] {
            let refusal = match gate.admit(binding, &source, request("1", echo, &args)).await {
                Admission::Refused(refusal) => refusal,
                other => panic!("{naming:?}: {other:?}"),
            };
            assert_eq!(
                refusal.to_string(),
                format!(
                    "{echo} cannot be called now: its server \"gone\" is disabled; it is not coming back unless the \
                     user enables it; nothing was called"
                ),
                "{naming:?}"
            );
        }
        // A name the server never had: by its namespace where names have one.
        let refusal = gate.admit(&binding, &source, request("1", other, &args)).await;
        match (naming, refusal) {
            (Naming::Transparent, Admission::Refused(Refusal::UnknownTool { .. })) => {}
            (_, Admission::Refused(Refusal::ServerGone { server, .. })) => assert_eq!(server, "gone"),
            (_, other) => panic!("{naming:?}: {other:?}"),
        }
    }
    // A server no binding had, which the source knows failed: found by its namespace, its
    // account cleaned (no escape character reaches the model or a terminal).
    let fake = FakeSource::with(&[("here", vec![tool("echo", text_schema())])]);
    let source = Telling(fake);
    let catalog = Catalog::new(Arc::new([]), policy(Decision::Allow, &[]), tool_pool::Options::default());
    let binding = catalog.bind(&source).await.unwrap();
    let Admission::Refused(refusal) = gate.admit(&binding, &source, request("1", "mcp__never__echo", &args)).await
    else {
        panic!("admitted");
    };
    assert_eq!(
        refusal.to_string(),
        "mcp__never__echo cannot be called now: its server \"never\" exited with status 3 and failed to restart (it \
         said [31mbye); it is not coming back unless the user reconnects it; nothing was called"
    );
    // The source that does not tell: the server left, and no other server's tool is offered.
    let fake = FakeSource::with(&[("f", vec![tool("echo", text_schema())]), ("h", vec![tool("echo", text_schema())])]);
    let catalog = Catalog::new(Arc::new([]), policy(Decision::Allow, &[]), tool_pool::Options::default());
    catalog.bind(fake.as_ref()).await.unwrap();
    fake.servers.lock().unwrap().remove("f");
    let binding = catalog.bind(fake.as_ref()).await.unwrap();
    let Admission::Refused(refusal) = gate.admit(&binding, fake.as_ref(), request("1", "mcp__f__echo", &args)).await
    else {
        panic!("admitted");
    };
    assert_eq!(
        refusal.to_string(),
        "mcp__f__echo cannot be called now: its server \"f\" is not connected now (its host did not say why); \
         nothing was called"
    );
    // A name no server had keeps its suggestions.
    let Admission::Refused(refusal) = gate.admit(&binding, fake.as_ref(), request("1", "mcp__h__ecko", &args)).await
    else {
        panic!("admitted");
    };
    assert!(refusal.to_string().contains("did you mean mcp__h__echo?"), "{refusal}");
}
