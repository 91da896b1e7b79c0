//! The pieces used together, in the order a client meets them: a 401 challenge, protected
//! resource metadata discovery and check, authorization server discovery, scopes, PKCE, and the
//! token store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcp_auth::discovery::{self, DefaultEndpoints};
use mcp_auth::pkce::{self, Pkce};
use mcp_auth::resource::{canonical_resource, resource_matches};
use mcp_auth::scope::{Scopes, StepUp, choose_scopes};
use mcp_auth::store::{StoredTokens, TokenStore};
use mcp_auth::www_authenticate::{self, BearerChallenge};
use url::Url;

#[test]
fn from_401_to_stored_tokens() {
    let server = Url::parse("https://MCP.example.com/public/mcp/").unwrap();
    let header = r#"Basic realm="legacy", Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp", scope="files:read""#;
    let challenge = BearerChallenge::from_header(header).unwrap().unwrap();

    let hinted = Url::parse(challenge.resource_metadata.as_deref().unwrap()).unwrap();
    let prm_urls = discovery::protected_resource_metadata_urls(&server, Some(&hinted)).unwrap();
    assert_eq!(prm_urls.len(), 2, "the header URL equals the path-based one");

    // The PRM document says: resource, authorization_servers, scopes_supported.
    assert!(resource_matches("https://mcp.example.com/public/mcp", &server));
    assert!(!resource_matches("https://mcp.example.com/public/mcp2", &server));
    let resource = canonical_resource(&server).unwrap();
    assert_eq!(resource, "https://mcp.example.com/public/mcp");

    let issuer = Url::parse("https://auth.example.com/tenant1").unwrap();
    let as_urls = discovery::authorization_server_metadata_urls(&issuer).unwrap();
    assert_eq!(as_urls[0].as_str(), "https://auth.example.com/.well-known/oauth-authorization-server/tenant1");
    assert!(DefaultEndpoints::for_server(&server).is_ok());

    let prm_scopes = ["files:read".to_owned(), "files:write".to_owned()];
    let as_scopes = ["openid".to_owned(), "offline_access".to_owned()];
    let scopes = choose_scopes(challenge.scope.as_deref(), Some(&prm_scopes[..]), Some(&as_scopes[..]), true);
    assert_eq!(scopes.to_param().as_deref(), Some("files:read offline_access"));

    let pkce = Pkce::generate();
    pkce::validate_verifier(pkce.verifier()).unwrap();

    // 403 insufficient_scope: step up once.
    let forbidden = r#"Bearer error="insufficient_scope", scope="files:read files:write""#;
    let c = BearerChallenge::from_header(forbidden).unwrap().unwrap();
    assert!(c.is_insufficient_scope());
    let mut step = StepUp::default();
    let next = step.next(&scopes, &Scopes::parse(c.scope.as_deref().unwrap())).unwrap();
    assert_eq!(next.to_param().as_deref(), Some("files:read offline_access files:write"));

    let dir = tempfile::tempdir().unwrap();
    let mut store = TokenStore::load(dir.path()).unwrap();
    let tokens = StoredTokens {
        access_token: "at".into(),
        refresh_token: Some("rt".into()),
        expires_at_ms: Some(2_000_000_000_000),
        scope: next.to_param(),
        client: None,
        wanted_scope: None,
    };
    store.insert(issuer.as_str(), &resource, tokens.clone());
    store.save().unwrap();
    assert_eq!(TokenStore::load(dir.path()).unwrap().get(issuer.as_str(), &resource), Some(&tokens));
}

#[test]
fn garbage_header_is_an_error_not_a_panic() {
    assert!(matches!(
        BearerChallenge::from_header("Bearer \"unterminated"),
        Err(www_authenticate::ChallengeError::ExpectedParam { .. })
    ));
}
