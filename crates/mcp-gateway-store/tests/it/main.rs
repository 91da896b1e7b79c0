//! Two gateways sharing one real Redis, as two replicas would: approvals, replayed states,
//! sessions and rate limits seen by both; Redis killed (clear errors) and started again
//! (recovery).
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod redis_server;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_gateway::fake::FakeBackend;
use mcp_gateway::{
    ApprovalMemory, Caller, Gateway, GatewayOptions, LimitError, LimitRule, Limits, Per, RateLimiter, ReplayCache,
    SessionChange, SessionRecord, SessionStore, StoreError, SystemClock,
};
use mcp_gateway_store::{RedisLimiter, RedisOptions, RedisStore, ReplicaConfig, SharedState, StartError};
use mcp_protocol::{ClientContext, Implementation, LoggingLevel, ProtocolVersion};
use redis_server::RedisServer;
use serde_json::{Value, json};

const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn key_file() -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "{KEY}").unwrap();
    std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    file
}

fn options(redis: &RedisServer) -> RedisOptions {
    let mut options = RedisOptions::new(redis.url());
    options.command_timeout = Duration::from_secs(2);
    options.connect_timeout = Duration::from_secs(2);
    options
}

/// One replica: a gateway over the standard fake upstreams, its state shared through `redis`
/// (a connection of its own) as `[serve.replicas]` configures it.
async fn replica(redis: &RedisServer, key: &tempfile::NamedTempFile, limits: &[LimitRule]) -> Gateway {
    let config = ReplicaConfig {
        key_file: Some(key.path().to_owned()),
        store: Some(redis.url()),
        store_timeout_ms: Some(2000),
        ..ReplicaConfig::default()
    };
    let shared = SharedState::open(Some(&config), Limits::new(limits).unwrap(), Arc::new(SystemClock)).await.unwrap();
    let mut options = GatewayOptions::default();
    shared.apply(&mut options);
    Gateway::new(Arc::new(FakeBackend::standard()), options).unwrap()
}

/// One stateless (2026-07-28) request through `gateway`'s stdio front; its answer.
async fn request(gateway: &Gateway, id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "replicated", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    });
    let line = format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    let mut out = Vec::new();
    mcp_gateway::serve_stdio(gateway.clone(), line.as_bytes(), &mut out, Default::default()).await.unwrap();
    serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
}

fn write_call(path: &str) -> Value {
    json!({"name": "files__write_file", "arguments": {"path": path, "text": "hello"}})
}

fn answered(call: &Value, state: &str, decision: &str) -> Value {
    let mut params = call.clone();
    params["requestState"] = json!(state);
    params["inputResponses"] = json!({"approval": {"action": "accept", "content": {"decision": decision}}});
    params
}

fn state_of(answer: &Value) -> String {
    assert_eq!(answer["result"]["resultType"], "input_required", "{answer}");
    answer["result"]["requestState"].as_str().unwrap().to_owned()
}

fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn an_approval_asked_on_one_replica_is_answered_on_the_other_once_and_remembered_by_both() {
    let redis = RedisServer::start();
    let key = key_file();
    let (a, b) = (replica(&redis, &key, &[]).await, replica(&redis, &key, &[]).await);

    let state = state_of(&request(&a, 1, "tools/call", write_call("x.txt")).await);
    let done = request(&b, 2, "tools/call", answered(&write_call("x.txt"), &state, "yes")).await;
    assert_eq!(done["result"]["resultType"], "complete", "B opens A's state: {done}");
    // Replayed on A, where it was issued, after B used it: refused.
    let replayed = request(&a, 3, "tools/call", answered(&write_call("x.txt"), &state, "yes")).await;
    assert!(replayed["error"]["message"].as_str().unwrap().contains("used already"), "{replayed}");

    // "Yes for this client" given on A holds on B.
    let state = state_of(&request(&a, 4, "tools/call", write_call("y.txt")).await);
    let done = request(&a, 5, "tools/call", answered(&write_call("y.txt"), &state, "always")).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let direct = request(&b, 6, "tools/call", write_call("z.txt")).await;
    assert_eq!(direct["result"]["resultType"], "complete", "B remembers A's approval: {direct}");
}

#[tokio::test]
async fn a_rate_limit_holds_across_replicas_and_says_when_to_retry() {
    let redis = RedisServer::start();
    let key = key_file();
    let limit = LimitRule { tool: "echo__*".into(), calls_per_minute: Some(3), ..LimitRule::default() };
    let (a, b) = (replica(&redis, &key, std::slice::from_ref(&limit)).await, replica(&redis, &key, &[limit]).await);
    let echo = json!({"name": "echo__echo", "arguments": {"text": "hi"}});
    for (i, gw) in [&a, &b, &a].into_iter().enumerate() {
        let ok = request(gw, i as u64, "tools/call", echo.clone()).await;
        assert_ne!(ok["result"]["isError"], true, "call {i}: {ok}");
    }
    let refused = request(&b, 9, "tools/call", echo.clone()).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = text_of(&refused);
    assert!(text.starts_with("rate limit reached: 3 calls a minute of echo__* per caller (rule 1"), "{text}");
    let secs: u64 = text.rsplit("retry after ").next().unwrap().trim_end_matches(" s").parse().unwrap();
    assert!((1..=20).contains(&secs), "a token refills in 20 s: {text}");
    // Other tools are not limited by it.
    let read = request(&a, 10, "tools/call", json!({"name": "files__read_file", "arguments": {}})).await;
    assert_ne!(read["result"]["isError"], true, "{read}");
}

#[tokio::test]
async fn concurrent_calls_are_counted_across_replicas_and_freed_when_they_end() {
    let redis = RedisServer::start();
    let limits = Limits::new(&[LimitRule { concurrent: Some(1), per: Per::All, ..LimitRule::default() }]).unwrap();
    let lease = Duration::from_secs(60);
    let a = RedisLimiter::new(RedisStore::connect(&options(&redis)).await.unwrap(), limits.clone(), lease);
    let b = RedisLimiter::new(RedisStore::connect(&options(&redis)).await.unwrap(), limits, lease);
    let alice = Caller::principal("alice");
    let running = a.admit(&alice, "echo__slow").await.unwrap();
    match b.admit(&Caller::principal("bob"), "echo__echo").await {
        Err(LimitError::Refused(r)) => assert_eq!(r.limit, "1 call at once for everyone"),
        other => panic!("the slot is taken on the other replica: {other:?}"),
    }
    drop(running);
    // The slot is freed in the background.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match b.admit(&alice, "echo__echo").await {
            Ok(_) => break,
            Err(e) => assert!(Instant::now() < deadline, "the slot was not freed: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn replicas_admitting_at_once_never_both_take_the_last_token() {
    let redis = RedisServer::start();
    let limits = Limits::new(&[LimitRule { calls_per_minute: Some(10), ..LimitRule::default() }]).unwrap();
    let lease = Duration::from_secs(60);
    let a = RedisLimiter::new(RedisStore::connect(&options(&redis)).await.unwrap(), limits.clone(), lease);
    let b = RedisLimiter::new(RedisStore::connect(&options(&redis)).await.unwrap(), limits, lease);
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..40 {
        let limiter = if i % 2 == 0 { a.clone() } else { b.clone() };
        calls.spawn(async move { limiter.admit(&Caller::principal("alice"), "echo__echo").await.is_ok() });
    }
    let admitted = calls.join_all().await.into_iter().filter(|ok| *ok).count();
    assert_eq!(admitted, 10, "a burst of 10, however the 40 calls interleave");
}

fn record() -> SessionRecord {
    let client = ClientContext {
        protocol_version: Some(ProtocolVersion::V2025_06_18),
        client_info: Some(Implementation::new("probe", "1")),
        ..ClientContext::default()
    };
    SessionRecord::new(&Caller::principal("alice"), &client)
}

#[tokio::test]
async fn a_session_opened_on_one_replica_goes_on_on_the_other_and_concurrent_changes_all_land() {
    let redis = RedisServer::start();
    let mut short = options(&redis);
    // Long enough that no step below outlasts it on a loaded machine.
    short.session_ttl = Duration::from_secs(2);
    let a = RedisStore::connect(&short).await.unwrap();
    let b = RedisStore::connect(&short).await.unwrap();
    assert_eq!(SessionStore::create(&a, "s1", &record()).await, Ok(true));
    assert_eq!(SessionStore::create(&b, "s1", &record()).await, Ok(false), "an id is never taken over");
    assert_eq!(b.update("s1", &SessionChange::Ready).await, Ok(true));
    assert_eq!(b.update("s1", &SessionChange::LogLevel(LoggingLevel::Warning)).await, Ok(true));
    // Both replicas subscribe at once: no change undoes another.
    let subscribe = |store: RedisStore, from: usize| async move {
        for i in from..from + 20 {
            assert_eq!(store.update("s1", &SessionChange::Subscribe(format!("file:///{i}"))).await, Ok(true));
        }
    };
    tokio::join!(subscribe(a.clone(), 0), subscribe(b.clone(), 100));
    let loaded = a.load("s1").await.unwrap().unwrap();
    assert!(loaded.ready);
    assert_eq!(loaded.log_level, Some(LoggingLevel::Warning));
    assert_eq!(loaded.subscriptions.len(), 40);
    assert_eq!(loaded.client_context().unwrap().protocol_version, Some(ProtocolVersion::V2025_06_18));

    // Kept while used, gone after its idle lifetime, and never brought back by a change.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(b.touch("s1").await, Ok(true));
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(a.update("s1", &SessionChange::Ready).await, Ok(false));
    assert_eq!(a.load("s1").await, Ok(None));

    // Bounded: a session's subscriptions.
    assert_eq!(SessionStore::create(&a, "s3", &record()).await, Ok(true));
    for i in 0..mcp_gateway::MAX_SUBSCRIPTIONS {
        a.update("s3", &SessionChange::Subscribe(format!("file:///{i}"))).await.unwrap();
    }
    let more = b.update("s3", &SessionChange::Subscribe("file:///more".into())).await;
    assert!(matches!(more, Err(StoreError::Full { .. })), "{more:?}");
    assert_eq!(b.update("s3", &SessionChange::Subscribe("file:///7".into())).await, Ok(true), "already in");

    assert_eq!(SessionStore::create(&a, "s2", &record()).await, Ok(true));
    b.remove("s2").await.unwrap();
    assert_eq!(a.load("s2").await, Ok(None), "DELETE on one replica ends it on all");
}

#[tokio::test]
async fn with_redis_down_what_needs_it_fails_clearly_and_it_recovers_when_redis_returns() {
    let mut redis = RedisServer::start();
    let key = key_file();
    let limit = LimitRule { calls_per_minute: Some(1000), ..LimitRule::default() };
    let gw = replica(&redis, &key, &[limit]).await;
    let store = RedisStore::connect(&options(&redis)).await.unwrap();
    let echo = json!({"name": "echo__echo", "arguments": {"text": "hi"}});
    assert_ne!(request(&gw, 1, "tools/call", echo.clone()).await["result"]["isError"], true);
    let state = state_of(&request(&gw, 2, "tools/call", write_call("a.txt")).await);

    redis.kill();
    let down = request(&gw, 3, "tools/call", echo.clone()).await;
    assert_eq!(down["result"]["isError"], true, "never admitted uncounted: {down}");
    let text = text_of(&down);
    assert!(
        text.starts_with("the call's rate limits cannot be checked now: the gateway's shared state store"),
        "{text}"
    );
    assert!(!text.contains("127.0.0.1"), "the store's address is not the client's business: {text}");
    let start = Instant::now();
    let err = store.load("s").await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_) | StoreError::Timeout(_)), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(5), "within the command timeout: {:?}", start.elapsed());
    assert!(store.approved("scope", "k").await.is_err());
    assert!(store.first_use(None, "id", u64::MAX, 0).await.is_err(), "a replay check is never assumed to pass");
    assert!(store.ping().await.is_err());

    redis.restart();
    // The connection comes back by itself: the next requests succeed.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = request(&gw, 4, "tools/call", echo.clone()).await;
        if answer["result"]["isError"] != true {
            break;
        }
        assert!(Instant::now() < deadline, "no recovery within 10 s: {answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    store.ping().await.unwrap();
    assert_eq!(store.first_use(None, "id", u64::MAX, 0).await, Ok(true));
    assert_eq!(store.first_use(None, "id", u64::MAX, 0).await, Ok(false));
    // The approval asked before the outage is answered after it (Redis lost nothing it needed:
    // the state is sealed, not stored).
    let done = request(&gw, 5, "tools/call", answered(&write_call("a.txt"), &state, "yes")).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
}

#[tokio::test]
async fn replicas_refuse_to_start_without_a_key_file_or_a_reachable_store() {
    let clock = Arc::new(SystemClock);
    let no_key = ReplicaConfig { store: Some("redis://127.0.0.1:1".into()), ..ReplicaConfig::default() };
    let err = SharedState::open(Some(&no_key), Limits::default(), clock.clone()).await.unwrap_err();
    assert!(matches!(err, StartError::NoKeyFile), "{err}");
    assert!(err.to_string().contains("needs `key_file`"), "{err}");

    let key = key_file();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let unreachable = ReplicaConfig {
        key_file: Some(key.path().to_owned()),
        store: Some(format!("redis://:secret@127.0.0.1:{port}")),
        store_timeout_ms: Some(2000),
        ..ReplicaConfig::default()
    };
    assert!(!format!("{unreachable:?}").contains("secret"), "nor in Debug");
    let err = SharedState::open(Some(&unreachable), Limits::default(), clock.clone()).await.unwrap_err();
    assert!(matches!(err, StartError::Store(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("Redis did not answer at start"), "{text}");
    assert!(!text.contains("secret"), "a password in the URL is never shown: {text}");

    // Without a store the key file is still required, and then each replica keeps its own.
    let local = ReplicaConfig { key_file: Some(key.path().to_owned()), ..ReplicaConfig::default() };
    let shared = SharedState::open(Some(&local), Limits::default(), clock.clone()).await.unwrap();
    assert!(shared.sealer.is_some() && shared.store.is_none());
    assert!(SharedState::open(None, Limits::default(), clock).await.unwrap().sealer.is_none());
}

#[tokio::test]
async fn a_wrong_password_is_named_at_start_and_never_shown() {
    let redis = RedisServer::start_with(&["--requirepass", "right-one"]);
    let mut options = options(&redis);
    options.url = format!("redis://:wrong-one@127.0.0.1:{}", redis.port);
    let err = RedisStore::connect(&options).await.unwrap_err().to_string();
    assert!(err.contains("authentication failed"), "{err}");
    assert!(!err.contains("wrong-one") && !format!("{options:?}").contains("wrong-one"), "{err}");
    options.url = format!("redis://:right-one@127.0.0.1:{}", redis.port);
    RedisStore::connect(&options).await.unwrap().ping().await.unwrap();
}

#[tokio::test]
async fn a_redis_that_hangs_is_a_timeout_within_the_limit_and_recovers_when_it_answers_again() {
    let redis = RedisServer::start();
    let mut quick = options(&redis);
    quick.command_timeout = Duration::from_millis(300);
    let store = RedisStore::connect(&quick).await.unwrap();
    assert_eq!(SessionStore::create(&store, "s", &record()).await, Ok(true));
    redis.freeze(true);
    let start = Instant::now();
    assert_eq!(store.load("s").await, Err(StoreError::Timeout(Duration::from_millis(300))));
    let err = store.remember("scope", "k").await.unwrap_err();
    assert!(err.to_string().contains("did not answer within 300 ms"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(3), "two commands, each cut at 300 ms: {:?}", start.elapsed());
    redis.freeze(false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.load("s").await.map(|r| r.is_some()) != Ok(true) {
        assert!(Instant::now() < deadline, "no recovery within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
