//! Inbound authentication, profiles, the audit log and the drain, against the HTTP front on
//! loopback: static tokens, JWTs checked against a JWKS served by the test, protected resource
//! metadata, a profile whose overlay denies a tool, `/readyz` while draining.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use mcp_gateway::fake::FakeBackend;
use mcp_gateway::{
    AuditArguments, AuditLog, AuditOptions, Authenticator, Backend, BackendEvent, BearerTokens, Caller, DrainOptions,
    Gateway, GatewayOptions, HttpOptions, HttpServer, Inbound, JwtAuthenticator, JwtOptions, Lifecycle, Profile,
    Profiled, ServerContent, SystemClock,
};
use policy::{Decision, PolicyConfig, RuleConfig};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

use crate::issuer::{ISSUER, Issuer, Stall, jwks_of, p256, serve_jwks, serve_jwks_stalling, sign, sign_as};
use crate::{Answer, envelope};

const RESOURCE: &str = "https://gw.example.com/mcp";

/// A gateway over `backend`, on loopback, with `auth` and an audit sink.
struct Front {
    addr: SocketAddr,
    life: Lifecycle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Front {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn front(
    backend: Arc<dyn Backend>,
    auth: Option<Arc<dyn Authenticator>>,
    audit: Option<Arc<dyn mcp_gateway::AuditSink>>,
) -> Front {
    let gateway = Gateway::new(backend, GatewayOptions { audit, ..GatewayOptions::default() }).unwrap();
    let server = HttpServer::bind(gateway, HttpOptions { auth, ..HttpOptions::default() }).await.unwrap();
    let addr = server.local_addr();
    let life = server.lifecycle();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    Front { addr, life, stop: Some(stop) }
}

/// One request to `path` on a fresh connection, read whole.
async fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let mut request = hyper::Request::builder().method(method).uri(path).header("host", addr.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = sender.send_request(request.body(Full::new(Bytes::from(body.to_owned()))).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer { status, headers, body: String::from_utf8(bytes.to_vec()).unwrap() }
}

/// A stateless (2026-07-28) request to `path`, with a bearer token when given.
async fn stateless(addr: SocketAddr, path: &str, token: Option<&str>, method: &str, mut params: Value) -> Answer {
    params["_meta"] = envelope(json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let name = params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str).map(str::to_owned);
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", crate::STATELESS),
        ("mcp-method", method),
    ];
    if let Some(name) = &name {
        headers.push(("mcp-name", name.as_str()));
    }
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    request(addr, "POST", path, &headers, &body.to_string()).await
}

async fn list(addr: SocketAddr, path: &str, token: Option<&str>) -> Answer {
    stateless(addr, path, token, "tools/list", json!({})).await
}

fn names(answer: &Answer) -> Vec<String> {
    let list = answer.json();
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn challenge(answer: &Answer) -> String {
    answer.headers.get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

#[tokio::test]
async fn static_tokens_missing_wrong_and_good() {
    let tokens = BearerTokens::new().digest(&BearerTokens::digest_of("let-me-in"), "alice").unwrap();
    let front = front(Arc::new(FakeBackend::standard()), Some(Arc::new(Inbound::new(Some(tokens), None))), None).await;

    let missing = list(front.addr, "/mcp", None).await;
    assert_eq!((missing.status, challenge(&missing).as_str()), (401, "Bearer"), "{missing:?}");
    let wrong = list(front.addr, "/mcp", Some("let-me-out")).await;
    assert_eq!(wrong.status, 401);
    let said = challenge(&wrong);
    assert!(said.starts_with("Bearer ") && said.contains("error=\"invalid_token\""), "{said}");
    assert!(!wrong.body.contains("let-me-out"), "the token is never echoed: {}", wrong.body);
    let malformed = request(front.addr, "POST", "/mcp", &[("authorization", "Bearer a b")], "{}").await;
    assert_eq!(malformed.status, 400);

    let good = list(front.addr, "/mcp", Some("let-me-in")).await;
    assert_eq!(good.status, 200, "{good:?}");
    assert!(names(&good).contains(&"files__read_file".to_owned()));
    // Probes need no token; the metadata of a server that is no OAuth resource is not there.
    assert_eq!(request(front.addr, "GET", "/healthz", &[], "").await.status, 200);
    let metadata = request(front.addr, "GET", "/.well-known/oauth-protected-resource/mcp", &[], "").await;
    assert_eq!(metadata.status, 404);
}

impl Issuer {
    fn authenticator(&self) -> JwtAuthenticator {
        let options = JwtOptions::new(ISSUER, self.jwks_url.parse().unwrap(), RESOURCE);
        JwtAuthenticator::new(options, Arc::new(SystemClock)).unwrap()
    }
}

#[tokio::test]
async fn jwts_are_checked_against_the_issuers_keys() {
    let issuer = Issuer::start().await;
    let _ = &issuer.key;
    let jwt = issuer.authenticator();
    let front = front(Arc::new(FakeBackend::standard()), Some(Arc::new(Inbound::new(None, Some(jwt)))), None).await;
    let metadata_url = "https://gw.example.com/.well-known/oauth-protected-resource/mcp";

    let missing = list(front.addr, "/mcp", None).await;
    assert_eq!(missing.status, 401);
    assert_eq!(challenge(&missing), format!("Bearer resource_metadata=\"{metadata_url}\""));

    let good = list(front.addr, "/mcp", Some(&issuer.token(RESOURCE, 300))).await;
    assert_eq!(good.status, 200, "{good:?}");
    assert!(names(&good).contains(&"echo__echo".to_owned()));

    let long = format!("{}@example.com", "c".repeat(240));
    for subject in ["Carol  Smith", "\u{645}\u{200c}\u{645}", "carol\u{fe0f}", long.as_str()] {
        let as_written = list(front.addr, "/mcp", Some(&issuer.token_for(subject, RESOURCE, 300))).await;
        assert_eq!(as_written.status, 200, "{subject:?}: {as_written:?}");
    }
    let refused = [
        ("a subject with spaces at its end", issuer.token_for("carol ", RESOURCE, 300), "not a usable name"),
        ("a control character", issuer.token_for("carol\nadmin", RESOURCE, 300), "not a usable name"),
        ("a direction character", issuer.token_for("\u{202e}lorac", RESOURCE, 300), "not a usable name"),
        ("an overlong subject", issuer.token_for(&"c".repeat(1025), RESOURCE, 300), "not a usable name"),
        ("expired", issuer.token(RESOURCE, -3600), "expired"),
        ("wrong audience", issuer.token("https://other.example.com/mcp", 300), "not for this resource"),
        ("wrongly signed", sign(&p256().1, RESOURCE, 300), "signature"),
        ("not a JWT", "abc.def.ghi".to_owned(), "not a JWT"),
    ];
    for (what, token, reason) in refused {
        let answer = list(front.addr, "/mcp", Some(&token)).await;
        assert_eq!(answer.status, 401, "{what}: {answer:?}");
        let said = challenge(&answer);
        assert!(said.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{what}: {said}");
        assert!(said.contains("error=\"invalid_token\"") && said.contains(reason), "{what}: {said}");
    }

    let metadata = request(front.addr, "GET", "/.well-known/oauth-protected-resource/mcp", &[], "").await;
    assert_eq!(metadata.status, 200, "{metadata:?}");
    let document: Value = serde_json::from_str(&metadata.body).unwrap();
    assert_eq!(document["resource"], RESOURCE);
    assert_eq!(document["authorization_servers"], json!([ISSUER]));
}

#[tokio::test]
async fn rotated_keys_are_fetched_again_at_most_once_per_interval() {
    let (old, old_pkcs8) = p256();
    let (new, new_pkcs8) = p256();
    let document = Arc::new(std::sync::Mutex::new(jwks_of(&old, "old")));
    let jwks_url = serve_jwks(Arc::clone(&document)).await;
    let mut options = JwtOptions::new(ISSUER, jwks_url.parse().unwrap(), RESOURCE);
    options.jwks_min_interval = Duration::from_secs(2);
    let jwt = Arc::new(JwtAuthenticator::new(options, Arc::new(SystemClock)).unwrap());
    let front = front(Arc::new(FakeBackend::standard()), Some(Arc::clone(&jwt) as Arc<dyn Authenticator>), None).await;
    // Signed beforehand: the twenty requests below fit in one interval on a loaded machine.
    let made_up: Vec<String> = (0..20).map(|n| sign_as(&new_pkcs8, &format!("made-up-{n}"), RESOURCE, 300)).collect();

    assert_eq!(list(front.addr, "/mcp", Some(&sign_as(&old_pkcs8, "old", RESOURCE, 300))).await.status, 200);
    assert_eq!(jwt.jwks_fetches(), 1, "fetched when first needed");
    // The issuer rotates. Tokens naming keys the set lacks fetch it again, but not more than
    // once per interval, however many arrive.
    *document.lock().unwrap() = jwks_of(&new, "new");
    for token in &made_up {
        assert_eq!(list(front.addr, "/mcp", Some(token)).await.status, 401);
    }
    assert!(jwt.jwks_fetches() <= 2, "{} fetches", jwt.jwks_fetches());
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let rotated = list(front.addr, "/mcp", Some(&sign_as(&new_pkcs8, "new", RESOURCE, 300))).await;
    assert_eq!(rotated.status, 200, "{rotated:?}");
    let retired = list(front.addr, "/mcp", Some(&sign_as(&old_pkcs8, "old", RESOURCE, 300))).await;
    assert_eq!(retired.status, 401, "the old key is gone from the set");
    assert!(jwt.jwks_fetches() <= 4, "{} fetches", jwt.jwks_fetches());

    // An issuer that cannot be reached: tokens cannot be checked now (503, no challenge).
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone = format!("http://{}/jwks.json", closed.local_addr().unwrap());
    drop(closed);
    let unreachable =
        JwtAuthenticator::new(JwtOptions::new(ISSUER, gone.parse().unwrap(), RESOURCE), Arc::new(SystemClock));
    let down = front_with(unreachable.unwrap()).await;
    let answer = list(down.addr, "/mcp", Some(&sign_as(&new_pkcs8, "new", RESOURCE, 300))).await;
    assert_eq!(answer.status, 503, "{answer:?}");
    assert!(answer.body.contains("could not be fetched"), "{answer:?}");
}

/// A front whose key set from `jwks_url` is old after `max_age` (fetched again at most every
/// 100 ms, each fetch within `fetch_timeout`).
async fn ageing_keys_front(
    jwks_url: &str,
    max_age: Duration,
    fetch_timeout: Duration,
) -> (Arc<JwtAuthenticator>, Front) {
    let mut options = JwtOptions::new(ISSUER, jwks_url.parse().unwrap(), RESOURCE);
    options.jwks_max_age = max_age;
    options.jwks_min_interval = Duration::from_millis(100);
    options.fetch_timeout = fetch_timeout;
    let jwt = Arc::new(JwtAuthenticator::new(options, Arc::new(SystemClock)).unwrap());
    let front = front(Arc::new(FakeBackend::standard()), Some(Arc::clone(&jwt) as Arc<dyn Authenticator>), None).await;
    (jwt, front)
}

/// An old key set is fetched again behind the requests: a slow issuer delays none of them, and
/// the set it then sends is used.
#[tokio::test]
async fn an_old_key_set_is_fetched_again_without_holding_requests() {
    let (old, old_pkcs8) = p256();
    let (new, new_pkcs8) = p256();
    let document = Arc::new(std::sync::Mutex::new(jwks_of(&old, "old")));
    let stall = Arc::new(Stall::default());
    let jwks_url = serve_jwks_stalling(Arc::clone(&document), Arc::clone(&stall)).await;
    // Old after 2 s: what follows the stall takes much less (the set it brings is new).
    let (jwt, front) = ageing_keys_front(&jwks_url, Duration::from_secs(2), Duration::from_secs(60)).await;
    let old_token = sign_as(&old_pkcs8, "old", RESOURCE, 300);
    assert_eq!(list(front.addr, "/mcp", Some(&old_token)).await.status, 200);
    assert_eq!(jwt.jwks_fetches(), 1);

    // The set grows old and the issuer slows down (its next answer waits for the test).
    stall.stall.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    for _ in 0..5 {
        let answer = tokio::time::timeout(Duration::from_secs(10), list(front.addr, "/mcp", Some(&old_token))).await;
        assert_eq!(answer.expect("a request waited for the issuer").status, 200);
    }
    assert_eq!(jwt.jwks_fetches(), 2, "one fetch behind the requests, however many came");

    // The issuer answers, with a rotated set: it is in use without a fetch of its own.
    *document.lock().unwrap() = jwks_of(&new, "new");
    stall.stall.store(false, Ordering::Relaxed);
    // A request that comes before the set is in waits for the fetch under way, and uses it.
    let new_token = sign_as(&new_pkcs8, "new", RESOURCE, 300);
    assert_eq!(list(front.addr, "/mcp", Some(&new_token)).await.status, 200, "the set fetched behind is used");
    assert_eq!(jwt.jwks_fetches(), 2);
}

/// A client that goes away while its request waits for the first fetch of the keys leaves the
/// fetch to end: the next request uses what it brought, not an empty set it may not fetch again
/// for the minimum interval.
#[tokio::test]
async fn a_fetch_whose_client_went_away_ends_for_the_next_request() {
    let (key, pkcs8) = p256();
    let document = Arc::new(std::sync::Mutex::new(jwks_of(&key, "k")));
    let stall = Arc::new(Stall::default());
    stall.stall.store(true, Ordering::Relaxed);
    let jwks_url = serve_jwks_stalling(Arc::clone(&document), Arc::clone(&stall)).await;
    let jwt = Arc::new(
        JwtAuthenticator::new(JwtOptions::new(ISSUER, jwks_url.parse().unwrap(), RESOURCE), Arc::new(SystemClock))
            .unwrap(),
    );
    let front = front(Arc::new(FakeBackend::standard()), Some(Arc::clone(&jwt) as Arc<dyn Authenticator>), None).await;
    let token = sign_as(&pkcs8, "k", RESOURCE, 300);
    let gone = tokio::time::timeout(Duration::from_millis(300), list(front.addr, "/mcp", Some(&token))).await;
    assert!(gone.is_err(), "answered while the issuer stalled: {gone:?}");
    // Time for the front to see the connection closed and drop the request.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stall.stall.store(false, Ordering::Relaxed);
    let answer = tokio::time::timeout(Duration::from_secs(20), list(front.addr, "/mcp", Some(&token))).await;
    assert_eq!(answer.expect("an answer").status, 200);
    assert_eq!(jwt.jwks_fetches(), 1);
}

/// `/metrics` names every server and tool: a token tied to a profile cannot read it, one that
/// is not can (on the front and on an address of its own).
#[tokio::test]
async fn metrics_are_not_read_with_a_token_tied_to_a_profile() {
    for metrics_addr in [None, Some(SocketAddr::from(([127, 0, 0, 1], 0)))] {
        let tokens = BearerTokens::new().token("ops-token", "ops").token("docs-token", "reader").in_profile("docs");
        let docs = Profile::new("docs").unwrap().servers(["echo"]);
        let options = tool_pool::Options { naming: tool_pool::Naming::Gateway, ..tool_pool::Options::default() };
        let backend = Profiled::new(Arc::new(FakeBackend::standard()), [docs], options);
        let gateway = Gateway::new(Arc::new(backend), GatewayOptions::default()).unwrap();
        let options = HttpOptions {
            auth: Some(Arc::new(Inbound::new(Some(tokens), None))),
            metrics: Some(Arc::new(crate::observe::FixedMetrics)),
            metrics_addr,
            ..HttpOptions::default()
        };
        let server = HttpServer::bind(gateway, options).await.unwrap();
        let addr = server.metrics_addr().unwrap_or(server.local_addr());
        let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        let scrape = |token: &'static str| async move {
            request(addr, "GET", "/metrics", &[("authorization", &format!("Bearer {token}"))], "").await
        };
        let ops = scrape("ops-token").await;
        assert_eq!(ops.status, 200, "{ops:?}");
        let reader = scrape("docs-token").await;
        assert_eq!(reader.status, 403, "{reader:?}");
        assert!(reader.json()["error"]["message"].as_str().unwrap().contains("tied to profile \"docs\""), "{reader:?}");
        assert_eq!(request(addr, "GET", "/metrics", &[], "").await.status, 401);
    }
}

/// A key set older than its age and one fetch's time is not used without fetching: a key the
/// issuer revoked while the gateway sat idle is refused at once.
#[tokio::test]
async fn a_key_revoked_while_the_gateway_sat_idle_is_refused() {
    let (old, old_pkcs8) = p256();
    let (new, _) = p256();
    let document = Arc::new(std::sync::Mutex::new(jwks_of(&old, "old")));
    let jwks_url = serve_jwks(Arc::clone(&document)).await;
    let (jwt, front) = ageing_keys_front(&jwks_url, Duration::from_millis(200), Duration::from_secs(1)).await;
    let old_token = sign_as(&old_pkcs8, "old", RESOURCE, 300);
    assert_eq!(list(front.addr, "/mcp", Some(&old_token)).await.status, 200);
    *document.lock().unwrap() = jwks_of(&new, "new");
    // Past its age and one fetch's time.
    tokio::time::sleep(Duration::from_millis(1400)).await;
    let answer = list(front.addr, "/mcp", Some(&old_token)).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert_eq!(jwt.jwks_fetches(), 2);
}

/// Nor does a key pass on a set that old when the issuer cannot be read: the gateway cannot
/// tell whether it was revoked, so it says it cannot check tokens now (503), and takes them
/// again once the issuer answers.
#[tokio::test]
async fn a_set_too_old_to_trust_is_not_used_while_the_issuer_fails() {
    let (key, pkcs8) = p256();
    let document = Arc::new(std::sync::Mutex::new(jwks_of(&key, "k")));
    let jwks_url = serve_jwks(Arc::clone(&document)).await;
    let (jwt, front) = ageing_keys_front(&jwks_url, Duration::from_millis(200), Duration::from_secs(1)).await;
    let token = sign_as(&pkcs8, "k", RESOURCE, 300);
    assert_eq!(list(front.addr, "/mcp", Some(&token)).await.status, 200);
    let good = std::mem::replace(&mut *document.lock().unwrap(), "not a key set".to_owned());
    // Past its age and one fetch's time.
    tokio::time::sleep(Duration::from_millis(1400)).await;
    let answer = list(front.addr, "/mcp", Some(&token)).await;
    assert_eq!(answer.status, 503, "{answer:?}");
    assert!(answer.body.contains("could not be fetched"), "{answer:?}");
    // Nor is the old set used by the next request (which fetches nothing within the 100 ms
    // interval, or fails once more on a machine slow enough to pass it).
    let again = list(front.addr, "/mcp", Some(&token)).await;
    assert_eq!(again.status, 503, "{again:?}");
    assert!(again.body.contains("could not be fetched"), "{again:?}");
    let fetched = jwt.jwks_fetches();
    assert!((2..=3).contains(&fetched), "{fetched} fetches");
    // Fetched again at most every 100 ms: once the issuer answers, tokens pass.
    *document.lock().unwrap() = good;
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(list(front.addr, "/mcp", Some(&token)).await.status, 200);
    assert_eq!(jwt.jwks_fetches(), fetched + 1);
}

/// A minimum interval longer than the age is cut to the age: the set is fetched again in time,
/// and a healthy issuer's tokens are never refused for want of a fetch.
#[tokio::test]
async fn a_minimum_interval_longer_than_the_age_never_refuses_a_healthy_issuer() {
    let (key, pkcs8) = p256();
    let document = Arc::new(std::sync::Mutex::new(jwks_of(&key, "k")));
    let jwks_url = serve_jwks(Arc::clone(&document)).await;
    let mut options = JwtOptions::new(ISSUER, jwks_url.parse().unwrap(), RESOURCE);
    options.jwks_max_age = Duration::from_millis(200);
    options.jwks_min_interval = Duration::from_secs(3600);
    options.fetch_timeout = Duration::from_secs(1);
    let jwt = Arc::new(JwtAuthenticator::new(options, Arc::new(SystemClock)).unwrap());
    let front = front(Arc::new(FakeBackend::standard()), Some(Arc::clone(&jwt) as Arc<dyn Authenticator>), None).await;
    let token = sign_as(&pkcs8, "k", RESOURCE, 300);
    assert_eq!(list(front.addr, "/mcp", Some(&token)).await.status, 200);
    // Past its age and one fetch's time: this request waits for a fetch, which is allowed.
    tokio::time::sleep(Duration::from_millis(1400)).await;
    let answer = list(front.addr, "/mcp", Some(&token)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(jwt.jwks_fetches(), 2);
}

async fn front_with(jwt: JwtAuthenticator) -> Front {
    front(Arc::new(FakeBackend::standard()), Some(Arc::new(jwt)), None).await
}

/// The standard upstreams, with a profile `ro` whose overlay denies every `echo` tool and
/// admits `alice` only.
fn profiled() -> Profiled<FakeBackend> {
    let overlay = PolicyConfig {
        default: Decision::Allow,
        rules: vec![RuleConfig::new("echo", "*", Decision::Deny)],
        ..PolicyConfig::default()
    };
    let ro = Profile::new("ro").unwrap().callers(["alice"]).overlay(policy::Policy::new(overlay).unwrap());
    let options = tool_pool::Options { naming: tool_pool::Naming::Gateway, ..tool_pool::Options::default() };
    Profiled::new(Arc::new(FakeBackend::standard()), [ro], options)
}

#[tokio::test]
async fn a_profile_narrows_a_tool_to_deny_and_admits_its_callers_only() {
    let tokens = BearerTokens::new().token("alice-token", "alice").token("bob-token", "bob");
    let dir = tempfile::tempdir().unwrap();
    let audit_path = dir.path().join("audit.jsonl");
    let audit = AuditLog::open(&audit_path, AuditOptions::new(1 << 20, 1, AuditArguments::Digest)).unwrap();
    let front =
        front(Arc::new(profiled()), Some(Arc::new(Inbound::new(Some(tokens), None))), Some(Arc::new(audit))).await;

    let everything = names(&list(front.addr, "/mcp", Some("alice-token")).await);
    assert!(everything.contains(&"echo__echo".to_owned()), "{everything:?}");
    let narrowed = names(&list(front.addr, "/mcp/ro", Some("alice-token")).await);
    assert!(narrowed.contains(&"files__read_file".to_owned()), "{narrowed:?}");
    assert!(narrowed.iter().all(|n| !n.starts_with("echo__")), "the overlay denies echo: {narrowed:?}");

    let call = json!({"name": "echo__echo", "arguments": {"secret": "hunter2"}});
    let in_profile = stateless(front.addr, "/mcp/ro", Some("alice-token"), "tools/call", call.clone()).await;
    assert_eq!(in_profile.json()["error"]["message"], "Unknown tool: echo__echo", "{in_profile:?}");
    let outside = stateless(front.addr, "/mcp", Some("alice-token"), "tools/call", call).await;
    assert_eq!(outside.json()["result"]["isError"], Value::Null, "{outside:?}");

    let bob = list(front.addr, "/mcp/ro", Some("bob-token")).await;
    assert_eq!(bob.status, 403, "bob is not one of ro's callers: {bob:?}");
    assert_eq!(list(front.addr, "/mcp/nope", Some("alice-token")).await.status, 404);

    // One audit line per decided call: who, which tool, the decision and the rule; arguments
    // as a digest only.
    let text = std::fs::read_to_string(&audit_path).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let denied = &lines[0];
    assert_eq!((denied["caller"].as_str(), denied["profile"].as_str()), (Some("alice"), Some("ro")));
    assert_eq!((denied["tool"].as_str(), denied["decision"].as_str()), (Some("echo__echo"), Some("refused")));
    let rule = denied["rule"].as_str().unwrap_or_default();
    assert!(rule.contains("of profile \"ro\""), "{rule}");
    assert_eq!(denied["outcome"], "error");
    let allowed = &lines[1];
    assert_eq!((allowed["decision"].as_str(), allowed["outcome"].as_str()), (Some("allowed"), Some("ok")));
    assert_eq!(allowed["profile"], Value::Null);
    assert_eq!(allowed["arguments_sha256"], denied["arguments_sha256"]);
    assert_eq!(allowed["arguments_sha256"].as_str().map(str::len), Some(64));
}

#[tokio::test]
async fn readyz_turns_false_first_then_new_requests_are_refused_and_calls_in_flight_finish() {
    let front = front(Arc::new(FakeBackend::standard()), None, None).await;
    let ready = request(front.addr, "GET", "/readyz", &[], "").await;
    assert_eq!((ready.status, ready.body.as_str()), (200, "ready"));

    let slow = json!({"name": "echo__slow", "arguments": {"ms": 1500}});
    let addr = front.addr;
    let in_flight = tokio::spawn(async move { stateless(addr, "/mcp", None, "tools/call", slow).await });
    while front.life.in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let life = front.life.clone();
    let drained = tokio::spawn(async move {
        life.drain(DrainOptions::new(Duration::from_millis(600), Duration::from_secs(20))).await
    });
    while !front.life.is_draining() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let readyz = request(front.addr, "GET", "/readyz", &[], "").await;
    assert_eq!((readyz.status, readyz.body.as_str()), (503, "not ready: draining"));
    assert_eq!(request(front.addr, "GET", "/healthz", &[], "").await.status, 200, "still alive");
    assert_eq!(list(front.addr, "/mcp", None).await.status, 200, "still served during the delay");

    while !front.life.is_refusing() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let refused = list(front.addr, "/mcp", None).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));

    let answer = in_flight.await.unwrap();
    assert_eq!(answer.status, 200);
    assert!(crate::text_of(&answer.json()["result"]).contains("\"slow\""), "{answer:?}");
    let report = drained.await.unwrap();
    assert_eq!((report.in_flight, report.cut_off), (1, 0));
}

#[tokio::test]
async fn a_call_that_cannot_finish_in_the_drain_gets_an_error() {
    let front = front(Arc::new(FakeBackend::standard()), None, None).await;
    let slow = json!({"name": "echo__slow", "arguments": {"ms": 30000}});
    let addr = front.addr;
    let in_flight = tokio::spawn(async move { stateless(addr, "/mcp", None, "tools/call", slow).await });
    while front.life.in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = front.life.drain(DrainOptions::new(Duration::ZERO, Duration::from_millis(200))).await;
    assert_eq!((report.in_flight, report.cut_off), (1, 1));
    let answer = tokio::time::timeout(Duration::from_secs(5), in_flight).await.unwrap().unwrap();
    let error = &answer.json()["error"];
    assert!(
        error["message"].as_str().unwrap_or_default().contains("shut down before this call finished"),
        "{answer:?}"
    );
}

#[tokio::test]
async fn a_profile_hides_what_its_overlay_denies_of_resources_and_its_tied_tokens_stay_in_it() {
    let content = |uris: &[&str]| ServerContent {
        resources: uris.iter().map(|uri| serde_json::from_value(json!({"uri": uri, "name": uri})).unwrap()).collect(),
        ..ServerContent::default()
    };
    let backend = FakeBackend::builder()
        .tool("docs", "search")
        .content("docs", content(&["file:///public/a", "file:///secret/key"]))
        .content("other", content(&["file:///other"]))
        .build();
    let overlay = PolicyConfig {
        default: Decision::Allow,
        resources: vec![policy::ResourceRuleConfig::new("*", "file:///secret/*", Decision::Deny)],
        ..PolicyConfig::default()
    };
    let docs = Profile::new("docs").unwrap().servers(["docs"]).overlay(policy::Policy::new(overlay).unwrap());
    let all = Profile::new("all").unwrap();
    let options = tool_pool::Options { naming: tool_pool::Naming::Gateway, ..tool_pool::Options::default() };
    let tokens = BearerTokens::new().token("docs-token", "reader").in_profile("docs");
    let front = front(
        Arc::new(Profiled::new(Arc::new(backend), [docs, all], options)),
        Some(Arc::new(Inbound::new(Some(tokens), None))),
        None,
    )
    .await;

    // The token is tied to `docs`: at /mcp it is served as `docs`, and no other profile opens.
    let uris = |answer: &Answer| -> Vec<String> {
        let list = answer.json();
        list["result"]["resources"]
            .as_array()
            .unwrap_or_else(|| panic!("{list}"))
            .iter()
            .map(|r| r["uri"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    for path in ["/mcp", "/mcp/docs"] {
        let listed = stateless(front.addr, path, Some("docs-token"), "resources/list", json!({})).await;
        assert_eq!(uris(&listed), ["file:///public/a"], "{path}: the other server and the denied resource are hidden");
    }
    assert_eq!(list(front.addr, "/mcp/all", Some("docs-token")).await.status, 403);
    let secret =
        stateless(front.addr, "/mcp", Some("docs-token"), "resources/read", json!({"uri": "file:///secret/key"})).await;
    assert_eq!(secret.status, 200, "{secret:?}");
    // A denied resource is answered as one that does not exist.
    assert_eq!(secret.json()["error"]["code"], -32002, "{secret:?}");
    let public =
        stateless(front.addr, "/mcp", Some("docs-token"), "resources/read", json!({"uri": "file:///public/a"})).await;
    assert_eq!(public.json()["result"]["contents"][0]["text"], "docs says file:///public/a", "{public:?}");
}

#[tokio::test]
async fn a_profile_subscribes_only_to_what_it_offers_and_always_lets_go() {
    let content = |uris: &[&str]| ServerContent {
        resources: uris.iter().map(|uri| serde_json::from_value(json!({"uri": uri, "name": uri})).unwrap()).collect(),
        ..ServerContent::default()
    };
    let backend = Arc::new(
        FakeBackend::builder()
            .tool("docs", "search")
            .content("docs", content(&["file:///public/a", "file:///secret/key"]))
            .content("other", content(&["file:///other"]))
            .build(),
    );
    let overlay = PolicyConfig {
        default: Decision::Allow,
        resources: vec![policy::ResourceRuleConfig::new("*", "file:///secret/*", Decision::Deny)],
        ..PolicyConfig::default()
    };
    let docs = Profile::new("docs").unwrap().servers(["docs"]).overlay(policy::Policy::new(overlay).unwrap());
    let options = tool_pool::Options { naming: tool_pool::Naming::Gateway, ..tool_pool::Options::default() };
    let profiled = Profiled::new(Arc::clone(&backend), [docs], options);
    let caller = Caller { principal: Some("reader".into()), profile: Some("docs".into()) };

    profiled.subscribe(&caller, "docs", "file:///public/a").await.unwrap();
    let denied = profiled.subscribe(&caller, "docs", "file:///secret/key").await.unwrap_err();
    assert!(denied.to_string().contains("has no resource"), "{denied}");
    assert!(profiled.subscribe(&caller, "other", "file:///other").await.is_err(), "a server the profile hides");
    profiled.unsubscribe(&caller, "docs", "file:///public/a").await.unwrap();
    let changes: Vec<_> = backend.subscription_changes().into_iter().map(|c| (c.uri, c.subscribed)).collect();
    assert_eq!(changes, [("file:///public/a".to_owned(), true), ("file:///public/a".to_owned(), false)]);
    assert!(profiled.mirrored(&caller).is_none(), "the fake mirrors nothing");
}

/// An upstream's log messages (which may quote another caller's call) reach only the sessions
/// whose profile offers that upstream (every session had them); a profile's overlay `confirm`
/// on a resource is refused like the host's own (it was read at once); a subscription another
/// client holds lets a session in only on its own right.
#[tokio::test]
async fn a_profile_hears_only_its_servers_and_its_overlay_holds_for_resources() {
    let content = |uris: &[&str]| ServerContent {
        resources: uris.iter().map(|uri| serde_json::from_value(json!({"uri": uri, "name": uri})).unwrap()).collect(),
        ..ServerContent::default()
    };
    let backend = Arc::new(
        FakeBackend::builder()
            .tool("docs", "search")
            .tool("other", "secret")
            .content("docs", content(&["file:///public/a", "file:///ask/b", "file:///secret/key"]))
            .build(),
    );
    let overlay = PolicyConfig {
        default: Decision::Allow,
        resources: vec![
            policy::ResourceRuleConfig::new("*", "file:///ask/*", Decision::Confirm),
            policy::ResourceRuleConfig::new("*", "file:///secret/*", Decision::Deny),
        ],
        ..PolicyConfig::default()
    };
    let docs = Profile::new("docs").unwrap().servers(["docs"]).overlay(policy::Policy::new(overlay).unwrap());
    let options = tool_pool::Options { naming: tool_pool::Naming::Gateway, ..tool_pool::Options::default() };
    let profiled = Arc::new(Profiled::new(Arc::clone(&backend), [docs], options));
    let reader = Caller { principal: Some("reader".into()), profile: Some("docs".into()) };
    assert!(profiled.offers(&reader, "docs") && !profiled.offers(&reader, "other"));
    assert!(profiled.offers(&Caller::principal("admin"), "other"), "a caller of no profile is offered all");
    let asked = profiled.read_resource(&reader, "docs", "file:///ask/b", 1 << 20).await.unwrap_err();
    assert!(asked.to_string().contains("needs confirmation"), "{asked}");
    assert!(profiled.may_subscribe(&reader, "docs", "file:///ask/b").await.is_err());
    assert!(profiled.may_subscribe(&reader, "docs", "file:///secret/key").await.is_err());
    profiled.may_subscribe(&reader, "docs", "file:///public/a").await.unwrap();

    let tokens = BearerTokens::new().token("docs-token", "reader").in_profile("docs");
    let front = front(profiled, Some(Arc::new(Inbound::new(Some(tokens), None))), None).await;
    let v = "2025-11-25";
    let auth = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", "Bearer docs-token"),
        ("mcp-protocol-version", v),
    ];
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let opened = request(front.addr, "POST", "/mcp", &auth, &init.to_string()).await;
    let session = opened.session().unwrap_or_else(|| panic!("{opened:?}"));
    let with_session = [&auth[..], &[("mcp-session-id", session.as_str())]].concat();
    for body in [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}}),
    ] {
        let answer = request(front.addr, "POST", "/mcp", &with_session, &body.to_string()).await;
        assert!(answer.status < 300, "{answer:?}");
    }
    let stream_headers = [
        ("accept", "text/event-stream"),
        ("authorization", "Bearer docs-token"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", v),
    ];
    let mut stream = crate::send(front.addr, "GET", &stream_headers, "").await.into_body();
    let log = |server: &str, data: &str| BackendEvent::Log {
        server: server.to_owned(),
        params: serde_json::from_value(json!({"level": "error", "logger": server, "data": data})).unwrap(),
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    backend.emit(log("other", "alice queried customer 4711"));
    backend.emit(log("docs", "docs is fine"));
    let heard = crate::http::next_event(&mut stream).await;
    assert_eq!(heard["params"]["data"], "docs is fine", "{heard}");
}
