//! The OAuth protected mode of the HTTP fixture, driven by hand with reqwest (no redirects
//! followed): the 401 challenge, both metadata documents, registration, authorization with
//! PKCE, the token grants, refresh rotation, expiry, refusals and garbage.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use mcp_fixtures::http::{HttpOptions, RunningServer, start};
use mcp_fixtures::oauth::{OAuthEvent, OAuthOptions};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk-a-long-enough-verifier";
const REDIRECT: &str = "http://127.0.0.1:4567/callback";

fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

async fn server(oauth: OAuthOptions) -> (RunningServer, String) {
    let options = HttpOptions { json: true, oauth: Some(oauth), ..HttpOptions::default() };
    let server = start(options, 0).await.unwrap();
    let base = format!("http://{}", server.addr);
    (server, base)
}

fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

/// POST /token; `basic` is (client id, secret) for `client_secret_basic`.
async fn token(base: &str, pairs: &[(&str, &str)], basic: Option<(&str, &str)>) -> (u16, Value) {
    let mut req = http()
        .post(format!("{base}/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(pairs));
    if let Some((id, secret)) = basic {
        req = req.header("authorization", format!("Basic {}", STANDARD.encode(format!("{id}:{secret}"))));
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn register(base: &str, body: Value) -> (u16, Value) {
    let resp = http().post(format!("{base}/register")).json(&body).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// GET /authorize with `pairs`; the status and the query of `Location`, if any.
async fn authorize(base: &str, pairs: &[(&str, &str)]) -> (u16, HashMap<String, String>) {
    let resp = http().get(format!("{base}/authorize?{}", form(pairs))).send().await.unwrap();
    let status = resp.status().as_u16();
    let params = resp
        .headers()
        .get("location")
        .map(|l| {
            let url = url::Url::parse(l.to_str().unwrap()).unwrap();
            url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
        })
        .unwrap_or_default();
    (status, params)
}

fn code_request<'a>(client_id: &'a str, challenge: &'a str, resource: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", "xyz"),
        ("scope", "mcp:read"),
        ("resource", resource),
    ]
}

/// POST /mcp `initialize`; the status, the `WWW-Authenticate` header and the body.
async fn initialize(url: &str, bearer: Option<&str>) -> (u16, Option<String>, Value) {
    let mut req = http().post(url).header("accept", "application/json, text/event-stream").json(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}),
    );
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let www = resp.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned());
    (status, www, resp.json().await.unwrap_or(Value::Null))
}

/// A registered public client, a code, and the token response for it.
async fn public_client_tokens(base: &str) -> (String, Value) {
    let (status, reg) = register(
        base,
        json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
               "grant_types": ["authorization_code", "refresh_token"]}),
    )
    .await;
    assert_eq!(status, 201, "{reg}");
    let client_id = reg["client_id"].as_str().unwrap().to_owned();
    let c = challenge(VERIFIER);
    let resource = format!("{base}/mcp");
    let (status, q) = authorize(base, &code_request(&client_id, &c, &resource)).await;
    assert_eq!(status, 302);
    let code = q["code"].clone();
    let (status, tokens) = token(
        base,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
            ("client_id", &client_id),
            ("resource", &resource),
        ],
        None,
    )
    .await;
    assert_eq!(status, 200, "{tokens}");
    (client_id, tokens)
}

#[tokio::test]
async fn the_whole_authorization_code_flow_by_hand() {
    let (server, base) = server(OAuthOptions::new()).await;
    let resource = format!("{base}/mcp");
    let prm_url = format!("{base}/.well-known/oauth-protected-resource/mcp");

    // 1. /mcp without a token: 401 pointing at the protected resource metadata.
    let (status, www, _) = initialize(&server.url(), None).await;
    assert_eq!(status, 401);
    assert_eq!(www.unwrap(), format!("Bearer error=\"invalid_token\", resource_metadata=\"{prm_url}\""));

    // 2. Protected resource metadata.
    let prm: Value = http().get(&prm_url).send().await.unwrap().json().await.unwrap();
    assert_eq!(prm["resource"], json!(resource));
    assert_eq!(prm["authorization_servers"], json!([base]));
    assert_eq!(prm["scopes_supported"], json!(["mcp:read", "mcp:write"]));

    // 3. Authorization server metadata.
    let meta: Value = http()
        .get(format!("{base}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["issuer"], json!(base));
    assert_eq!(meta["authorization_endpoint"], json!(format!("{base}/authorize")));
    assert_eq!(meta["token_endpoint"], json!(format!("{base}/token")));
    assert_eq!(meta["registration_endpoint"], json!(format!("{base}/register")));
    assert_eq!(meta["response_types_supported"], json!(["code"]));
    assert_eq!(meta["grant_types_supported"], json!(["authorization_code", "refresh_token", "client_credentials"]));
    assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(meta["token_endpoint_auth_methods_supported"], json!(["none", "client_secret_basic"]));
    let openid = http().get(format!("{base}/.well-known/openid-configuration")).send().await.unwrap();
    assert_eq!(openid.status().as_u16(), 404);

    // 4. Registration of a public client.
    let (status, reg) = register(
        &base,
        json!({"redirect_uris": [REDIRECT], "client_name": "test", "token_endpoint_auth_method": "none",
               "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]}),
    )
    .await;
    assert_eq!(status, 201, "{reg}");
    assert_eq!(reg["redirect_uris"], json!([REDIRECT]));
    assert_eq!(reg["client_name"], json!("test"));
    assert!(reg.get("client_secret").is_none());
    let client_id = reg["client_id"].as_str().unwrap().to_owned();

    // 5. Authorization: 302 back with a code and the state.
    let c = challenge(VERIFIER);
    let (status, q) = authorize(&base, &code_request(&client_id, &c, &resource)).await;
    assert_eq!(status, 302);
    assert_eq!(q["state"], "xyz");
    assert_eq!(q["iss"], base);
    let code = q["code"].clone();

    // 6. Token: a wrong verifier fails, the right one works, the code works only once.
    let redeem = |verifier: &'static str| {
        let (base, code, client_id, resource) = (base.clone(), code.clone(), client_id.clone(), resource.clone());
        async move {
            token(
                &base,
                &[
                    ("grant_type", "authorization_code"),
                    ("code", &code),
                    ("redirect_uri", REDIRECT),
                    ("code_verifier", verifier),
                    ("client_id", &client_id),
                    ("resource", &resource),
                ],
                None,
            )
            .await
        }
    };
    let (status, e) = redeem("the-wrong-verifier-the-wrong-verifier-the-wrong-verifier").await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");
    let (status, tokens) = redeem(VERIFIER).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 3600);
    assert_eq!(tokens["scope"], "mcp:read");
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    let (status, e) = redeem(VERIFIER).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");

    // 7. /mcp with the token.
    let (status, _, body) = initialize(&server.url(), Some(&access)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["serverInfo"]["name"], "mcp-fixture-http");
    let (status, _, _) = initialize(&server.url(), Some("access-1-made-up")).await;
    assert_eq!(status, 401);

    // 8. Refresh rotates: a new pair, the old refresh token is dead.
    let (status, fresh) =
        token(&base, &[("grant_type", "refresh_token"), ("refresh_token", &refresh), ("client_id", &client_id)], None)
            .await;
    assert_eq!(status, 200, "{fresh}");
    let access2 = fresh["access_token"].as_str().unwrap();
    let refresh2 = fresh["refresh_token"].as_str().unwrap();
    assert_ne!(access2, access);
    assert_ne!(refresh2, refresh);
    assert_eq!(fresh["scope"], "mcp:read");
    let (status, e) =
        token(&base, &[("grant_type", "refresh_token"), ("refresh_token", &refresh), ("client_id", &client_id)], None)
            .await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");
    let (status, _, _) = initialize(&server.url(), Some(access2)).await;
    assert_eq!(status, 200);

    let some = |s: &str| Some(s.to_owned());
    let token_event = |grant_type: &str, resource: Option<String>, ok| OAuthEvent::Token {
        grant_type: grant_type.to_owned(),
        client_id: some(&client_id),
        resource,
        ok,
    };
    let refused = |path: &str, reason: &str| OAuthEvent::Refused { path: path.to_owned(), reason: reason.to_owned() };
    assert_eq!(
        server.oauth_log(),
        vec![
            refused("/mcp", "no bearer token"),
            OAuthEvent::Registered { client_id: client_id.clone() },
            OAuthEvent::Authorized { client_id: client_id.clone(), scope: some("mcp:read"), resource: some(&resource) },
            token_event("authorization_code", some(&resource), false),
            refused("/token", "invalid_grant: PKCE verification failed"),
            token_event("authorization_code", some(&resource), true),
            token_event("authorization_code", some(&resource), false),
            refused("/token", "invalid_grant: unknown or already used code"),
            refused("/mcp", "unknown token"),
            token_event("refresh_token", some(&resource), true),
            token_event("refresh_token", None, false),
            refused("/token", "invalid_grant: unknown or already used refresh token"),
        ]
    );
    // The OAuth endpoints are not MCP requests.
    assert!(server.seen().iter().all(|s| s.http_method == "POST"));
}

#[tokio::test]
async fn an_expired_token_gives_401_and_a_refresh_gives_a_new_one() {
    let (server, base) = server(OAuthOptions::new()).await;
    let (client_id, tokens) = public_client_tokens(&base).await;
    assert_eq!(tokens["expires_in"], 3600);
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(initialize(&server.url(), Some(access)).await.0, 200);
    server.expire_access_tokens();
    let (status, www, body) = initialize(&server.url(), Some(access)).await;
    assert_eq!(status, 401);
    assert!(www.unwrap().starts_with("Bearer error=\"invalid_token\""));
    assert_eq!(body["error_description"], "expired token");
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let (status, fresh) =
        token(&base, &[("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", &client_id)], None)
            .await;
    assert_eq!(status, 200, "{fresh}");
    assert_eq!(initialize(&server.url(), fresh["access_token"].as_str()).await.0, 200);
    assert!(server.oauth_log().contains(&OAuthEvent::Refused { path: "/mcp".into(), reason: "expired token".into() }));
    // What changed hands, in order.
    let secrets = server.oauth_secrets();
    assert_eq!(secrets.access_tokens, [access, fresh["access_token"].as_str().unwrap()]);
    assert_eq!(secrets.refresh_tokens, [refresh, fresh["refresh_token"].as_str().unwrap()]);
    assert_eq!(secrets.codes.len(), 1);
    assert_eq!(secrets.code_verifiers, [VERIFIER]);
    assert!(secrets.client_secrets.is_empty(), "a public client has no secret");
}

/// `expires_in_s` is the lifetime `/mcp` enforces: a token issued for 0 s is refused at once.
#[tokio::test]
async fn a_token_is_refused_once_its_lifetime_has_passed() {
    let (server, base) = server(OAuthOptions { expires_in_s: 0, ..OAuthOptions::new() }).await;
    let (_, tokens) = public_client_tokens(&base).await;
    assert_eq!(tokens["expires_in"], 0);
    let (status, _, body) = initialize(&server.url(), tokens["access_token"].as_str()).await;
    assert_eq!((status, body["error_description"].as_str()), (401, Some("expired token")));
}

#[tokio::test]
async fn client_credentials_with_the_pre_registered_client() {
    let options = OAuthOptions { pre_registered: Some(("svc".into(), "s3cret".into())), ..OAuthOptions::new() };
    let (server, base) = server(options).await;
    let (status, tokens) = token(&base, &[("grant_type", "client_credentials")], Some(("svc", "s3cret"))).await;
    assert_eq!(status, 200, "{tokens}");
    assert!(tokens.get("refresh_token").is_none());
    assert_eq!(tokens["scope"], "mcp:read mcp:write");
    assert_eq!(initialize(&server.url(), tokens["access_token"].as_str()).await.0, 200);

    let (status, e) = token(&base, &[("grant_type", "client_credentials")], Some(("svc", "wrong"))).await;
    assert_eq!((status, e["error"].as_str()), (401, Some("invalid_client")), "{e}");
    // client_secret_post is not among the default methods.
    let (status, e) =
        token(&base, &[("grant_type", "client_credentials"), ("client_id", "svc"), ("client_secret", "s3cret")], None)
            .await;
    assert_eq!((status, e["error"].as_str()), (401, Some("invalid_client")), "{e}");
    let (status, e) = token(&base, &[("grant_type", "client_credentials"), ("client_id", "svc")], None).await;
    assert_eq!((status, e["error"].as_str()), (401, Some("invalid_client")), "{e}");
    let (status, e) = token(&base, &[("grant_type", "client_credentials")], Some(("svc", "s3cret"))).await;
    assert_eq!(status, 200, "{e}");
    let (status, e) = token(&base, &[("grant_type", "password")], Some(("svc", "s3cret"))).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("unsupported_grant_type")), "{e}");

    // The pre-registered client may redirect to any loopback port.
    let c = challenge(VERIFIER);
    let (status, q) = authorize(
        &base,
        &[
            ("response_type", "code"),
            ("client_id", "svc"),
            ("redirect_uri", "http://127.0.0.1:9/cb"),
            ("code_challenge", &c),
            ("code_challenge_method", "S256"),
        ],
    )
    .await;
    assert_eq!(status, 302);
    let (status, tokens) = token(
        &base,
        &[
            ("grant_type", "authorization_code"),
            ("code", &q["code"]),
            ("redirect_uri", "http://127.0.0.1:9/cb"),
            ("code_verifier", VERIFIER),
        ],
        Some(("svc", "s3cret")),
    )
    .await;
    assert_eq!(status, 200, "{tokens}");
    assert!(tokens["refresh_token"].is_string());
}

#[tokio::test]
async fn confidential_registration_and_client_secret_post() {
    let options = OAuthOptions {
        auth_methods: vec!["client_secret_post".into()],
        challenge_scope: Some("mcp:read".into()),
        refresh_tokens: false,
        ..OAuthOptions::new()
    };
    let (server, base) = server(options).await;
    let (status, www, _) = initialize(&server.url(), None).await;
    assert_eq!(status, 401);
    assert!(www.unwrap().ends_with(", scope=\"mcp:read\""));
    // `none` is not offered.
    let (status, e) = register(&base, json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_client_metadata")), "{e}");
    let (status, reg) =
        register(&base, json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_post"})).await;
    assert_eq!(status, 201, "{reg}");
    let id = reg["client_id"].as_str().unwrap();
    let secret = reg["client_secret"].as_str().unwrap();
    let c = challenge(VERIFIER);
    let resource = format!("{base}/mcp");
    let (_, q) = authorize(&base, &code_request(id, &c, &resource)).await;
    let mut pairs = vec![
        ("grant_type", "authorization_code"),
        ("code", q["code"].as_str()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", VERIFIER),
        ("client_id", id),
    ];
    let (status, e) = token(&base, &pairs, None).await;
    assert_eq!((status, e["error"].as_str()), (401, Some("invalid_client")), "{e}");
    pairs.push(("client_secret", secret));
    let (status, tokens) = token(&base, &pairs, None).await;
    assert_eq!(status, 200, "{tokens}");
    assert!(tokens.get("refresh_token").is_none());
    let secrets = server.oauth_secrets();
    assert_eq!(secrets.client_secrets, [secret]);
    assert!(secrets.refresh_tokens.is_empty());
    assert_eq!(secrets.all().count(), 4, "a secret, a code, a verifier, an access token: {secrets:?}");
}

#[tokio::test]
async fn authorization_refusals_and_denial() {
    let (server, base) = server(OAuthOptions::new()).await;
    let (_, reg) = register(&base, json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})).await;
    let id = reg["client_id"].as_str().unwrap();
    let c = challenge(VERIFIER);
    let resource = format!("{base}/mcp");
    let with = |name: &'static str, value: &'static str| {
        let mut pairs = code_request(id, &c, &resource);
        pairs.retain(|(k, _)| *k != name);
        if !value.is_empty() {
            pairs.push((name, value));
        }
        pairs
    };
    // Not redirected: unknown client, unregistered redirect URI.
    assert_eq!(authorize(&base, &with("client_id", "nobody")).await.0, 400);
    assert_eq!(authorize(&base, &with("redirect_uri", "http://127.0.0.1:4567/elsewhere")).await.0, 400);
    assert_eq!(authorize(&base, &with("redirect_uri", "https://evil.example/callback")).await.0, 400);
    // Another loopback port for a registered loopback redirect URI is fine (RFC 8252 §7.3).
    let (status, q) = authorize(&base, &with("redirect_uri", "http://127.0.0.1:5678/callback")).await;
    assert_eq!((status, q.contains_key("code")), (302, true));
    // Redirected with an error.
    for (pairs, error) in [
        (with("code_challenge_method", "plain"), "invalid_request"),
        (with("code_challenge", ""), "invalid_request"),
        (with("response_type", "token"), "unsupported_response_type"),
        (with("scope", "admin"), "invalid_scope"),
        (with("resource", "http://127.0.0.1:1/other"), "invalid_target"),
    ] {
        let (status, q) = authorize(&base, &pairs).await;
        assert_eq!((status, q.get("error").map(String::as_str)), (302, Some(error)), "{pairs:?}");
        assert_eq!(q["state"], "xyz");
    }
    drop(server);

    let (server, base) = server_denying().await;
    let (_, reg) = register(&base, json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})).await;
    let id = reg["client_id"].as_str().unwrap();
    let resource = format!("{base}/mcp");
    let (status, q) = authorize(&base, &code_request(id, &c, &resource)).await;
    assert_eq!(status, 302);
    assert_eq!(q["error"], "access_denied");
    assert_eq!(q["state"], "xyz");
    assert!(!q.contains_key("code"));
    assert!(!server.oauth_log().iter().any(|e| matches!(e, OAuthEvent::Authorized { .. })));
}

async fn server_denying() -> (RunningServer, String) {
    server(OAuthOptions { deny: true, ..OAuthOptions::new() }).await
}

#[tokio::test]
async fn garbage_is_refused_and_the_server_goes_on() {
    let (server, base) = server(OAuthOptions::new()).await;
    let c = http();
    for body in [&b"\xff\xfe not json"[..], b"[]", b"{\"redirect_uris\": 7}", b"{\"redirect_uris\": [\"not a url\"]}"] {
        let r = c.post(format!("{base}/register")).body(body.to_vec()).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 400);
    }
    // A body over 64 KiB is ignored (read as empty).
    let huge = format!("grant_type=client_credentials&pad={}", "x".repeat(70 * 1024));
    let (status, e) = {
        let r = c.post(format!("{base}/token")).body(huge).send().await.unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    };
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_request")), "{e}");
    for body in ["%%%=&&==", "grant_type=authorization_code&grant_type=refresh_token", "grant_type=client_credentials"]
    {
        let r = c.post(format!("{base}/token")).body(body).send().await.unwrap();
        assert!(matches!(r.status().as_u16(), 400 | 401), "{body}");
    }
    let r = c.post(format!("{base}/token")).header("authorization", "Basic !!!").body("grant_type=client_credentials");
    assert_eq!(r.send().await.unwrap().status().as_u16(), 401);
    for query in ["", "?%zz", "?client_id=%ff%fe", "?client_id=a&client_id=b"] {
        assert_eq!(c.get(format!("{base}/authorize{query}")).send().await.unwrap().status().as_u16(), 400, "{query}");
    }
    assert_eq!(c.get(format!("{base}/token")).send().await.unwrap().status().as_u16(), 405);
    for bearer in ["Bearer", "Bearer ", "bearer \u{7f}", "Basic abc"] {
        let r = c.post(server.url()).header("authorization", bearer).body("{}").send().await;
        if let Ok(r) = r {
            assert_eq!(r.status().as_u16(), 401, "{bearer:?}");
        }
    }
    // Still serving.
    let meta = c.get(format!("{base}/.well-known/oauth-authorization-server")).send().await.unwrap();
    assert_eq!(meta.status().as_u16(), 200);
    let (_, tokens) = public_client_tokens(&base).await;
    assert_eq!(initialize(&server.url(), tokens["access_token"].as_str()).await.0, 200);
}
