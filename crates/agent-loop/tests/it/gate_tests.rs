//! The call gate on its own, as the gateway and code mode use it: bindings under either
//! naming, callers, deferrals, decisions reported to hooks, built-ins that call through it.

use std::sync::Arc;

use agent_loop::{
    Admission, Agent, AgentConfig, ApprovalAnswer, Binding, CallContext, CallDecision, CallGate, CallRequest, Catalog,
    NoHooks, Refusal,
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
