//! Rate limits in one process ([`MemoryLimiter`]): a refused call is a tool error naming the
//! rule and when to retry; a denied or unknown tool takes no token. (Across replicas, with
//! Redis: `mcp-gateway-store`'s tests.)

use std::sync::Arc;

use mcp_gateway::{Clock, Gateway, GatewayOptions, LimitRule, Limits, MemoryLimiter};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{TestClock, backend, envelope};

async fn call(gateway: &Gateway, id: u64, name: &str) -> Value {
    let params = json!({"name": name, "arguments": {"text": "hi"}, "_meta": envelope(json!({}))});
    let line = format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    let mut out = Vec::new();
    mcp_gateway::serve_stdio(gateway.clone(), line.as_bytes(), &mut out, Default::default()).await.unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[tokio::test]
async fn a_call_over_its_limit_is_a_tool_error_that_says_when_to_retry() {
    let clock = Arc::new(TestClock::default());
    let rule = LimitRule { calls_per_minute: Some(2), ..LimitRule::default() };
    let limiter = MemoryLimiter::new(Limits::new(&[rule]).unwrap(), 100, Arc::clone(&clock) as Arc<dyn Clock>);
    let options = GatewayOptions {
        clock: Arc::clone(&clock) as Arc<dyn Clock>,
        limiter: Some(Arc::new(limiter)),
        ..GatewayOptions::default()
    };
    let gateway = Gateway::new(Arc::new(backend()), options).unwrap();
    // Unknown and denied tools are answered as unknown before any limit: no token taken.
    for name in ["files__rm", "nope__nope"] {
        assert_eq!(call(&gateway, 1, name).await["error"]["code"], -32602);
    }
    for id in 2..4 {
        let ok = call(&gateway, id, "echo__echo").await;
        assert_eq!(ok["result"]["isError"], Value::Null, "{ok}");
    }
    let refused = call(&gateway, 4, "echo__echo").await;
    assert_eq!(refused["result"]["isError"], true);
    assert_eq!(
        refused["result"]["content"][0]["text"],
        "rate limit reached: 2 calls a minute per caller (rule 1 of [[serve.limits]]); retry after 30 s"
    );
    clock.advance(30_000);
    assert_eq!(call(&gateway, 5, "echo__echo").await["result"]["isError"], Value::Null);
}
