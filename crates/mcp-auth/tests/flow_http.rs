//! The HTTP flows against a fake authorization server and protected resource on 127.0.0.1:
//! discovery order and fallbacks, registration, the authorization URL, token requests with each
//! client authentication method, and refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Server;

use base64::Engine as _;
use mcp_auth::flow::{
    self, AUTH_CLIENT_SECRET_BASIC, AUTH_CLIENT_SECRET_POST, AUTH_NONE, ClientRegistration, Discovered, FlowError,
    MAX_BODY_BYTES,
};
use mcp_auth::pkce::{Pkce, s256_challenge};
use mcp_auth::www_authenticate::BearerChallenge;
use serde_json::{Value, json};
use url::Url;

impl Server {
    fn as_metadata(&self, issuer: &str) -> Value {
        json!({
            "issuer": issuer,
            "authorization_endpoint": self.url("/authorize").as_str(),
            "token_endpoint": self.url("/token").as_str(),
            "registration_endpoint": self.url("/register").as_str(),
            "scopes_supported": ["files:read", "files:write"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": true,
            "some_unknown_field": {"x": 1},
        })
    }

    /// Discovery with a root PRM and an RFC 8414 AS metadata at the root.
    async fn discovered(&self) -> Discovered {
        let base = self.base.clone();
        self.json(
            "/.well-known/oauth-protected-resource",
            200,
            &json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}),
        );
        self.json("/.well-known/oauth-authorization-server", 200, &self.as_metadata(&self.base));
        flow::discover(&client(), &self.url("/mcp"), None).await.unwrap()
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

fn token_body() -> Value {
    json!({"access_token": "at-123", "token_type": "bearer", "expires_in": 3600, "refresh_token": "rt-456", "scope": "files:read"})
}

fn public_client() -> ClientRegistration {
    ClientRegistration { client_id: "cid".into(), client_secret: None, token_endpoint_auth_method: AUTH_NONE.into() }
}

#[tokio::test]
async fn discovery_order_root_prm_and_oidc_path_issuer() {
    let s = Server::start().await;
    let issuer = format!("{}/tenant", s.base);
    s.json(
        "/.well-known/oauth-protected-resource",
        200,
        &json!({"resource": s.url("/mcp").as_str(), "authorization_servers": [issuer], "scopes_supported": ["mcp:tools"], "extra": true}),
    );
    s.json("/.well-known/openid-configuration/tenant", 200, &s.as_metadata(&issuer));

    let d = flow::discover(&client(), &s.url("/mcp"), None).await.unwrap();
    assert_eq!(
        s.paths(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-authorization-server/tenant",
            "/.well-known/openid-configuration/tenant",
        ]
    );
    assert_eq!(d.issuer, issuer);
    assert_eq!(d.resource, s.url("/mcp").as_str());
    assert_eq!(d.authorization_endpoint, s.url("/authorize"));
    assert_eq!(d.token_endpoint, s.url("/token"));
    assert_eq!(d.registration_endpoint, Some(s.url("/register")));
    assert_eq!(d.scopes_supported.as_deref(), Some(&["files:read".to_owned(), "files:write".to_owned()][..]));
    assert_eq!(d.resource_scopes_supported.as_deref(), Some(&["mcp:tools".to_owned()][..]));
    assert_eq!(d.token_endpoint_auth_methods_supported.as_ref().unwrap().len(), 2);
    assert_eq!(d.code_challenge_methods_supported.as_deref(), Some(&["S256".to_owned()][..]));
    assert_eq!(d.client_id_metadata_document_supported, Some(true));
    assert!(d.resource_metadata.is_some() && d.authorization_server_metadata.is_some());
}

#[tokio::test]
async fn discovery_tries_challenge_hint_first_and_skips_4xx() {
    let s = Server::start().await;
    s.route("/.well-known/oauth-protected-resource/mcp", 403, "{}");
    s.json("/prm.json", 200, &json!({"resource": s.url("/mcp").as_str(), "authorization_servers": [s.base]}));
    s.json("/.well-known/oauth-authorization-server", 200, &s.as_metadata(&s.base));
    let header = format!(r#"Bearer resource_metadata="{}""#, s.url("/prm.json"));
    let challenge = BearerChallenge::from_header(&header).unwrap().unwrap();
    let d = flow::discover(&client(), &s.url("/mcp"), Some(&challenge)).await.unwrap();
    assert_eq!(s.paths(), ["/prm.json", "/.well-known/oauth-authorization-server"]);
    assert_eq!(d.issuer, s.base);
}

#[tokio::test]
async fn discovery_resource_mismatch_refused() {
    let s = Server::start().await;
    s.json(
        "/.well-known/oauth-protected-resource",
        200,
        &json!({"resource": "https://evil.example.com/mcp", "authorization_servers": [s.base]}),
    );
    s.json("/.well-known/oauth-authorization-server", 200, &s.as_metadata(&s.base));
    let err = flow::discover(&client(), &s.url("/mcp"), None).await.unwrap_err();
    match &err {
        FlowError::ResourceMismatch { resource, server } => {
            assert_eq!(resource, "https://evil.example.com/mcp");
            assert_eq!(server, s.url("/mcp").as_str());
        }
        other => panic!("unexpected {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("evil.example.com") && msg.contains(&s.base), "{msg}");
    assert!(!s.paths().iter().any(|p| p.contains("authorization-server")), "no AS fetch after a mismatch");
}

#[tokio::test]
async fn discovery_issuer_mismatch_refused() {
    let s = Server::start().await;
    s.json(
        "/.well-known/oauth-protected-resource",
        200,
        &json!({"resource": s.url("/mcp").as_str(), "authorization_servers": [s.base]}),
    );
    s.json("/.well-known/oauth-authorization-server", 200, &s.as_metadata("https://other.example.com"));
    let err = flow::discover(&client(), &s.url("/mcp"), None).await.unwrap_err();
    assert!(matches!(err, FlowError::IssuerMismatch { .. }), "{err:?}");
}

#[tokio::test]
async fn discovery_no_as_metadata_is_an_error() {
    let s = Server::start().await;
    s.json(
        "/.well-known/oauth-protected-resource",
        200,
        &json!({"resource": s.url("/mcp").as_str(), "authorization_servers": [s.base]}),
    );
    let err = flow::discover(&client(), &s.url("/mcp"), None).await.unwrap_err();
    assert!(matches!(err, FlowError::NoAuthorizationServerMetadata { .. }), "{err:?}");
}

#[tokio::test]
async fn discovery_legacy_metadata_fallback() {
    let s = Server::start().await;
    s.json("/.well-known/oauth-authorization-server", 200, &s.as_metadata(&s.base));
    let d = flow::discover(&client(), &s.url("/v1/mcp"), None).await.unwrap();
    assert_eq!(
        s.paths(),
        [
            "/.well-known/oauth-protected-resource/v1/mcp",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-authorization-server",
        ]
    );
    assert!(d.resource_metadata.is_none());
    assert!(d.authorization_server_metadata.is_some());
    assert_eq!(d.token_endpoint, s.url("/token"));
    assert_eq!(d.resource, s.url("/v1/mcp").as_str());
}

/// Legacy metadata (fetched from the server's own origin) cannot name another issuer: the
/// server wrote it, and an issuer pin compared with that name would let the server send the
/// client's credentials to any token endpoint.
#[tokio::test]
async fn discovery_legacy_metadata_cannot_claim_another_issuer() {
    let s = Server::start().await;
    s.json("/.well-known/oauth-authorization-server", 200, &s.as_metadata("https://auth.example.com"));
    let d = flow::discover(&client(), &s.url("/v1/mcp"), None).await.unwrap();
    assert_eq!(d.issuer, s.base, "the issuer is the origin the metadata came from");
}

#[tokio::test]
async fn discovery_default_endpoints_when_nothing_found() {
    let s = Server::start().await;
    let d = flow::discover(&client(), &s.url("/v1/mcp"), None).await.unwrap();
    assert_eq!(d.authorization_endpoint, s.url("/authorize"));
    assert_eq!(d.token_endpoint, s.url("/token"));
    assert_eq!(d.registration_endpoint, Some(s.url("/register")));
    assert_eq!(d.issuer, s.base);
    assert!(d.authorization_server_metadata.is_none() && d.code_challenge_methods_supported.is_none());
}

#[tokio::test]
async fn discovery_server_error_stops() {
    let s = Server::start().await;
    s.route("/.well-known/oauth-protected-resource/mcp", 500, "oops");
    let err = flow::discover(&client(), &s.url("/mcp"), None).await.unwrap_err();
    assert!(matches!(err, FlowError::Status { status: 500, .. }), "{err:?}");
}

#[tokio::test]
async fn oversize_metadata_refused() {
    let s = Server::start().await;
    let big = format!(r#"{{"resource":"{}","pad":"{}"}}"#, s.url("/mcp"), "x".repeat(MAX_BODY_BYTES + 1));
    s.route("/.well-known/oauth-protected-resource/mcp", 200, big);
    let err = flow::discover(&client(), &s.url("/mcp"), None).await.unwrap_err();
    assert!(matches!(err, FlowError::BodyTooLarge { limit: MAX_BODY_BYTES, .. }), "{err:?}");
}

#[tokio::test]
async fn register_public_client() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.json("/register", 201, &json!({"client_id": "new-client", "token_endpoint_auth_method": "none", "x": 1}));
    let reg = flow::register(&client(), &d, "http://127.0.0.1:9999/callback", "My Host").await.unwrap();
    assert_eq!(
        reg,
        ClientRegistration {
            client_id: "new-client".into(),
            client_secret: None,
            token_endpoint_auth_method: AUTH_NONE.into()
        }
    );
    let seen = s.last();
    assert_eq!((seen.method.as_str(), seen.path.as_str()), ("POST", "/register"));
    let body: Value = serde_json::from_str(&seen.body).unwrap();
    assert_eq!(
        body,
        json!({
            "redirect_uris": ["http://127.0.0.1:9999/callback"],
            "client_name": "My Host",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        })
    );
}

#[tokio::test]
async fn register_with_secret_defaults_to_basic_and_redacts() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.json("/register", 200, &json!({"client_id": "c", "client_secret": "very-secret"}));
    let reg = flow::register(&client(), &d, "http://localhost/cb", "n").await.unwrap();
    assert_eq!(reg.token_endpoint_auth_method, AUTH_CLIENT_SECRET_BASIC);
    assert_eq!(reg.client_secret.as_ref().map(mcp_safety::Secret::expose), Some("very-secret"));
    assert!(!format!("{reg:?}").contains("very-secret"));
}

#[tokio::test]
async fn register_error_surfaced() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.json("/register", 400, &json!({"error": "invalid_redirect_uri", "error_description": "not allowed"}));
    let err = flow::register(&client(), &d, "http://localhost/cb", "n").await.unwrap_err();
    match err {
        FlowError::OAuth { error, description, .. } => {
            assert_eq!(error, "invalid_redirect_uri");
            assert_eq!(description.as_deref(), Some("not allowed"));
        }
        other => panic!("unexpected {other:?}"),
    }
    let mut d2 = d.clone();
    d2.registration_endpoint = None;
    let err = flow::register(&client(), &d2, "http://localhost/cb", "n").await.unwrap_err();
    assert!(matches!(err, FlowError::NoRegistrationEndpoint));
}

#[tokio::test]
async fn authorization_url_parameters() {
    let s = Server::start().await;
    let mut d = s.discovered().await;
    d.authorization_endpoint = s.url("/authorize?tenant=a");
    let pkce = Pkce::generate();
    let url = flow::authorization_url(
        &d,
        &public_client(),
        "http://127.0.0.1:9999/cb",
        &pkce,
        "st4te",
        Some("files:read files:write"),
        &d.resource,
    )
    .unwrap();
    assert_eq!(url.path(), "/authorize");
    let q: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let get = |k: &str| q.iter().filter(|(n, _)| n == k).map(|(_, v)| v.as_str()).collect::<Vec<_>>();
    assert_eq!(get("tenant"), ["a"]);
    assert_eq!(get("response_type"), ["code"]);
    assert_eq!(get("client_id"), ["cid"]);
    assert_eq!(get("redirect_uri"), ["http://127.0.0.1:9999/cb"]);
    assert_eq!(get("code_challenge"), [pkce.challenge()]);
    assert_eq!(get("code_challenge_method"), ["S256"]);
    assert_eq!(get("state"), ["st4te"]);
    assert_eq!(get("scope"), ["files:read files:write"]);
    assert_eq!(get("resource"), [s.url("/mcp").as_str()]);
    assert!(get("code_verifier").is_empty());
    assert_eq!(q.len(), 9);

    let url = flow::authorization_url(&d, &public_client(), "http://x/cb", &pkce, "s", None, "r").unwrap();
    assert!(!url.query_pairs().any(|(k, _)| k == "scope"));
}

#[tokio::test]
async fn authorization_url_refuses_without_s256() {
    let s = Server::start().await;
    let mut d = s.discovered().await;
    d.code_challenge_methods_supported = Some(vec!["plain".into()]);
    let err =
        flow::authorization_url(&d, &public_client(), "http://x/cb", &Pkce::generate(), "s", None, "r").unwrap_err();
    assert!(matches!(err, FlowError::PkceS256Unsupported { ref supported } if supported == &["plain"]), "{err:?}");
}

#[tokio::test]
async fn exchange_code_sends_verifier_and_resource() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.json("/token", 200, &token_body());
    let pkce = Pkce::generate();
    let tokens = flow::exchange_code(
        &client(),
        &d,
        &public_client(),
        "the-code",
        "http://127.0.0.1:9999/cb",
        &pkce,
        &d.resource,
    )
    .await
    .unwrap();
    let seen = s.last();
    assert_eq!((seen.method.as_str(), seen.path.as_str()), ("POST", "/token"));
    assert_eq!(seen.authorization, None);
    let form = seen.form();
    assert_eq!(form["grant_type"], "authorization_code");
    assert_eq!(form["code"], "the-code");
    assert_eq!(form["redirect_uri"], "http://127.0.0.1:9999/cb");
    assert_eq!(form["client_id"], "cid");
    assert_eq!(form["resource"], s.url("/mcp").as_str());
    // The fake AS's PKCE check: the verifier hashes to the challenge sent in the authorization URL.
    assert_eq!(s256_challenge(&form["code_verifier"]), pkce.challenge());
    assert!(!form.contains_key("client_secret"));

    assert_eq!(tokens.access_token, "at-123");
    assert_eq!(tokens.token_type, "bearer");
    assert_eq!(tokens.expires_in, Some(3600));
    assert_eq!(tokens.refresh_token.as_ref().map(mcp_safety::Secret::expose), Some("rt-456"));
    assert_eq!(tokens.scope.as_deref(), Some("files:read"));
    let dbg = format!("{tokens:?}");
    assert!(!dbg.contains("at-123") && !dbg.contains("rt-456"), "{dbg}");

    let stored = tokens.to_stored(1_000_000);
    assert_eq!(stored.expires_at_ms, Some(4_600_000));
    assert_eq!(stored.access_token, "at-123");
    assert_eq!(stored.refresh_token.as_ref().map(mcp_safety::Secret::expose), Some("rt-456"));
}

#[tokio::test]
async fn client_secret_basic_uses_form_encoded_credentials() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.json("/token", 200, &token_body());
    let reg = ClientRegistration {
        client_id: "my client".into(),
        client_secret: Some("s3cr:t/+".into()),
        token_endpoint_auth_method: AUTH_CLIENT_SECRET_BASIC.into(),
    };
    flow::client_credentials(&client(), &d, &reg, Some("a b"), "https://r.example/").await.unwrap();
    let seen = s.last();
    let auth = seen.authorization.clone().unwrap();
    let decoded = base64::engine::general_purpose::STANDARD.decode(auth.strip_prefix("Basic ").unwrap()).unwrap();
    assert_eq!(String::from_utf8(decoded).unwrap(), "my+client:s3cr%3At%2F%2B");
    let form = seen.form();
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(form["scope"], "a b");
    assert_eq!(form["resource"], "https://r.example/");
    assert!(!form.contains_key("client_id") && !form.contains_key("client_secret"));
}

#[tokio::test]
async fn client_secret_post_puts_credentials_in_body() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.json("/token", 200, &token_body());
    let reg = ClientRegistration {
        client_id: "cid".into(),
        client_secret: Some("sec".into()),
        token_endpoint_auth_method: AUTH_CLIENT_SECRET_POST.into(),
    };
    flow::client_credentials(&client(), &d, &reg, None, "https://r.example/").await.unwrap();
    let seen = s.last();
    assert_eq!(seen.authorization, None);
    let form = seen.form();
    assert_eq!(form["client_id"], "cid");
    assert_eq!(form["client_secret"], "sec");
    assert!(!form.contains_key("scope"));
}

#[tokio::test]
async fn auth_method_errors() {
    let s = Server::start().await;
    let d = s.discovered().await;
    let mut reg = ClientRegistration {
        client_id: "cid".into(),
        client_secret: None,
        token_endpoint_auth_method: AUTH_CLIENT_SECRET_POST.into(),
    };
    let err = flow::refresh(&client(), &d, &reg, "rt", "r").await.unwrap_err();
    assert!(matches!(err, FlowError::MissingClientSecret { .. }), "{err:?}");
    reg.token_endpoint_auth_method = "private_key_jwt".into();
    let err = flow::refresh(&client(), &d, &reg, "rt", "r").await.unwrap_err();
    assert!(matches!(err, FlowError::UnsupportedAuthMethod { .. }), "{err:?}");
}

/// An access token no header can carry is refused when issued, not stored (every later
/// command then failed instead of asking for a new login).
#[tokio::test]
async fn an_access_token_no_header_can_carry_is_refused() {
    let s = Server::start().await;
    let d = s.discovered().await;
    for token in ["bad\u{1}token", "", "line\nbreak", " padded "] {
        s.json("/token", 200, &json!({"access_token": token, "token_type": "Bearer"}));
        let err = flow::refresh(&client(), &d, &public_client(), "rt", &d.resource).await.unwrap_err();
        assert!(matches!(err, FlowError::UnusableToken { .. }), "{token:?}: {err:?}");
    }
}

#[tokio::test]
async fn refresh_sends_refresh_token_and_resource() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.json("/token", 200, &json!({"access_token": "at-2", "token_type": "Bearer", "expires_in": "60"}));
    let tokens = flow::refresh(&client(), &d, &public_client(), "rt-old", &d.resource).await.unwrap();
    let form = s.last().form();
    assert_eq!(form["grant_type"], "refresh_token");
    assert_eq!(form["refresh_token"], "rt-old");
    assert_eq!(form["resource"], s.url("/mcp").as_str());
    assert_eq!(form["client_id"], "cid");
    assert_eq!(tokens.access_token, "at-2");
    assert_eq!(tokens.expires_in, Some(60));
    assert_eq!(tokens.refresh_token, None);
}

#[tokio::test]
async fn oauth_error_body_surfaced() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.json("/token", 400, &json!({"error": "invalid_grant", "error_description": "code expired"}));
    let err = flow::exchange_code(&client(), &d, &public_client(), "c", "http://x/cb", &Pkce::generate(), "r")
        .await
        .unwrap_err();
    let msg = err.to_string();
    match err {
        FlowError::OAuth { error, description, .. } => {
            assert_eq!(error, "invalid_grant");
            assert_eq!(description.as_deref(), Some("code expired"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(msg.contains("invalid_grant") && msg.contains("code expired"), "{msg}");

    s.route("/token", 502, "<html>bad gateway</html>");
    let err = flow::refresh(&client(), &d, &public_client(), "rt", "r").await.unwrap_err();
    assert!(matches!(err, FlowError::Status { status: 502, .. }), "{err:?}");
}

#[tokio::test]
async fn non_bearer_token_type_refused() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.json("/token", 200, &json!({"access_token": "at-secret", "token_type": "DPoP"}));
    let err = flow::refresh(&client(), &d, &public_client(), "rt", "r").await.unwrap_err();
    assert!(matches!(err, FlowError::NotBearer { ref token_type } if token_type == "DPoP"), "{err:?}");
    assert!(!format!("{err:?} {err}").contains("at-secret"));

    s.json("/token", 200, &json!({"access_token": "at"}));
    let err = flow::refresh(&client(), &d, &public_client(), "rt", "r").await.unwrap_err();
    assert!(matches!(err, FlowError::NotBearer { .. }), "{err:?}");
}

#[tokio::test]
async fn malformed_and_oversize_token_bodies_refused() {
    let s = Server::start().await;
    let d = s.discovered().await;
    s.route("/token", 200, "not json");
    let err = flow::refresh(&client(), &d, &public_client(), "rt", "r").await.unwrap_err();
    assert!(matches!(err, FlowError::InvalidJson { .. }), "{err:?}");

    let big = format!(r#"{{"access_token":"{}","token_type":"Bearer"}}"#, "a".repeat(MAX_BODY_BYTES));
    s.route("/token", 200, big);
    let err = flow::refresh(&client(), &d, &public_client(), "rt", "r").await.unwrap_err();
    assert!(matches!(err, FlowError::BodyTooLarge { .. }), "{err:?}");
}

#[tokio::test]
async fn oversize_chunked_body_without_length_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    let Ok(n) = sock.read(&mut buf).await else { return };
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![b' '; 64 * 1024];
                // 2 MiB of whitespace in 64 KiB chunks, no Content-Length.
                for _ in 0..32 {
                    let mut c = format!("{:x}\r\n", chunk.len()).into_bytes();
                    c.extend_from_slice(&chunk);
                    c.extend_from_slice(b"\r\n");
                    if sock.write_all(&c).await.is_err() {
                        return;
                    }
                }
                let _ = sock.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    let server = Url::parse(&format!("{base}/mcp")).unwrap();
    let err = flow::discover(&client(), &server, None).await.unwrap_err();
    assert!(matches!(err, FlowError::BodyTooLarge { limit: MAX_BODY_BYTES, .. }), "{err:?}");
}
