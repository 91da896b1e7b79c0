//! The call gate on its own, as the gateway and code mode use it: bindings under either
//! naming, callers, deferrals, decisions reported to hooks, built-ins that call through it.

use std::sync::Arc;

use agent_loop::{Admission, Binding, CallGate, CallRequest, Catalog, Refusal};
use policy::{Decision, Policy, PolicyConfig, RuleConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tool_pool::Naming;

use crate::fake::{FakeSource, text_schema, tool};

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
