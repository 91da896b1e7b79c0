//! OAuth 2.1 for remote MCP servers.
//!
//! [`OAuthAuthorizer`] plugs into the HTTP transport's [`mcp_client::Authorizer`] port: it
//! sends the stored token, refreshes it before it expires, and on a 401 / 403 discovers the
//! authorization server, identifies the client and obtains a token with the configured
//! [`Grant`]. Who takes the user to the authorization URL is the [`UserAgent`] port
//! ([`LoopbackBrowser`] for people, [`FollowRedirects`] for automated approval).
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcp_auth::{Grant, LoopbackBrowser, OAuthAuthorizer, OAuthConfig};
//! use mcp_client::{Client, ClientOptions};
//! use mcp_transport::{HttpConfig, HttpTransport};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "https://mcp.example.com/mcp";
//! let mut oauth = OAuthConfig::new(url::Url::parse(url)?);
//! oauth.store_dir = Some("/home/me/.local/share/my-app/oauth".into());
//! let browser = LoopbackBrowser {
//!     show: Arc::new(|url: &url::Url| eprintln!("log in at {url}")),
//!     open_browser: true,
//!     timeout: std::time::Duration::from_secs(300),
//! };
//! oauth.grant = Grant::AuthorizationCode { user_agent: Some(Arc::new(browser)) };
//! let mut http = HttpConfig::new(url);
//! http.auth = Some(Arc::new(OAuthAuthorizer::new(oauth)?));
//! let client = Client::connect(HttpTransport::new(http)?, ClientOptions::default()).await?;
//! # client.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! The building blocks:
//!
//! - [`www_authenticate`]: parse a `WWW-Authenticate` header value (RFC 9110 challenges) into a
//!   [`BearerChallenge`](www_authenticate::BearerChallenge) (`resource_metadata`, `scope`, `error`, `error_description`).
//! - [`discovery`]: the order of URLs to try for protected resource metadata (RFC 9728) and
//!   authorization server metadata (RFC 8414 / OpenID Connect Discovery), and the 2025-03-26
//!   default endpoints.
//! - [`resource`]: the canonical resource URI of an MCP server (RFC 8707) and the check that a
//!   protected resource metadata document's `resource` identifies the server being reached.
//! - [`pkce`]: PKCE S256 verifiers and challenges (RFC 7636).
//! - [`scope`]: which scopes to request, and bounded step-up on `insufficient_scope`.
//! - [`store`]: a token file per user, keyed by (issuer, resource), written atomically and
//!   readable only by the user.
//!
//! - [`flow`]: the HTTP flows on top of these (reqwest): discovery, dynamic client registration,
//!   the authorization URL, and token requests.
//! - [`grants`]: the machine-to-machine grants: ES256 client assertions (`private_key_jwt`),
//!   client credentials with them, and cross-app access (token exchange for an ID-JAG at the
//!   identity provider, then the JWT bearer grant).
//!
//! - `authorizer`: [`OAuthAuthorizer`]; `user_agent`: the browser port and its adapters;
//!   `clock`: the time port ([`SystemClock`] by default; tests move their own forward).
//!
//! Apart from [`flow`], [`grants`], `authorizer` and `user_agent`, nothing here performs
//! HTTP requests; the other modules return what to ask for, in which order, and check what came
//! back.
//!
//! # Example
//!
//! ```
//! use mcp_auth::{discovery, pkce::Pkce, www_authenticate::BearerChallenge};
//! use url::Url;
//!
//! let header = r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read""#;
//! let challenge = BearerChallenge::from_header(header).unwrap().unwrap();
//! assert_eq!(challenge.scope.as_deref(), Some("files:read"));
//!
//! let server = Url::parse("https://mcp.example.com/public/mcp").unwrap();
//! let hinted = challenge.resource_metadata.as_deref().map(Url::parse).transpose().unwrap();
//! let urls = discovery::protected_resource_metadata_urls(&server, hinted.as_ref()).unwrap();
//! assert_eq!(
//!     urls.iter().map(Url::as_str).collect::<Vec<_>>(),
//!     [
//!         "https://mcp.example.com/.well-known/oauth-protected-resource",
//!         "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
//!     ]
//! );
//!
//! let pkce = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").unwrap();
//! assert_eq!(pkce.challenge(), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
//! ```

mod authorizer;
mod clock;
pub mod discovery;
pub mod flow;
pub mod grants;
pub mod pkce;
pub mod resource;
pub mod scope;
pub mod store;
mod user_agent;
pub mod www_authenticate;

pub use authorizer::{ClientConfig, CrossAppConfig, Grant, LogoutError, OAuthAuthorizer, OAuthConfig};
pub use clock::{Clock, SystemClock};
pub use user_agent::{
    FollowRedirects, LoopbackBrowser, PendingRedirect, Redirected, ShowUrl, UserAgent, UserAgentError, open_in_browser,
};
