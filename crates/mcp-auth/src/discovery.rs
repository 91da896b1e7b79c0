//! The order of URLs to try when discovering OAuth metadata. Pure functions over [`Url`]; the
//! caller fetches each URL in turn and stops at the first usable document.
//!
//! - [`protected_resource_metadata_urls`]: RFC 9728 §3.1 and MCP 2025-11-25 "Protected Resource
//!   Metadata Discovery": the `resource_metadata` URL from `WWW-Authenticate` first, then the
//!   path-based well-known URI, then the root one.
//! - [`authorization_server_metadata_urls`]: RFC 8414 §3.1 and OpenID Connect Discovery 1.0 §4,
//!   in the order of MCP 2025-11-25 "Authorization Server Metadata Discovery".
//! - [`DefaultEndpoints::for_server`]: MCP 2025-03-26 fallback endpoints when no authorization
//!   server metadata is found.
//!
//! Every list is deduplicated, keeping the first occurrence.

use url::Url;

/// Well-known suffix of protected resource metadata (RFC 9728).
pub const OAUTH_PROTECTED_RESOURCE: &str = "/.well-known/oauth-protected-resource";
/// Well-known suffix of OAuth authorization server metadata (RFC 8414).
pub const OAUTH_AUTHORIZATION_SERVER: &str = "/.well-known/oauth-authorization-server";
/// Well-known suffix of OpenID Connect provider metadata.
pub const OPENID_CONFIGURATION: &str = "/.well-known/openid-configuration";

/// A URL discovery cannot build well-known locations from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// Only `http` and `https` URLs with a host are supported.
    #[error("expected an http(s) URL with a host, got {url}")]
    NotHttp {
        /// The refused URL.
        url: String,
    },
}

/// `url` reduced to its origin (scheme, host, port) with path `path`: no credentials, query or
/// fragment.
fn at_origin(url: &Url, path: &str) -> Result<Url, DiscoveryError> {
    check_http(url)?;
    let mut out = url.clone();
    // Cannot fail for an http(s) URL with a host.
    let _ = out.set_username("");
    let _ = out.set_password(None);
    out.set_query(None);
    out.set_fragment(None);
    out.set_path(path);
    Ok(out)
}

fn check_http(url: &Url) -> Result<(), DiscoveryError> {
    if matches!(url.scheme(), "http" | "https") && url.has_host() && !url.cannot_be_a_base() {
        Ok(())
    } else {
        Err(DiscoveryError::NotHttp { url: url.as_str().to_owned() })
    }
}

/// The URL's path without trailing slashes; empty for the root.
fn trimmed_path(url: &Url) -> &str {
    url.path().trim_end_matches('/')
}

/// Removes later duplicates, keeping the order of first occurrences.
pub fn dedup_keep_order(urls: Vec<Url>) -> Vec<Url> {
    let mut out: Vec<Url> = Vec::with_capacity(urls.len());
    for u in urls {
        if !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

/// Where to look for the protected resource metadata of the MCP server at `server_url`, in order:
///
/// 1. `resource_metadata`, the URL from the `WWW-Authenticate` header, if any;
/// 2. `https://host/.well-known/oauth-protected-resource/<path>` when the server URL's path
///    (trailing slashes removed) is not empty; the server URL's query, if any, is kept (RFC 9728
///    §3.1 inserts the suffix between host and path/query);
/// 3. `https://host/.well-known/oauth-protected-resource`.
///
/// The header URL is taken as given (RFC 9728 §5.1 lets it point anywhere); whether the document
/// found there is acceptable is decided by [`crate::resource::resource_matches`].
pub fn protected_resource_metadata_urls(
    server_url: &Url,
    resource_metadata: Option<&Url>,
) -> Result<Vec<Url>, DiscoveryError> {
    let mut urls = Vec::with_capacity(3);
    if let Some(u) = resource_metadata {
        urls.push(u.clone());
    }
    let path = trimmed_path(server_url);
    if !path.is_empty() {
        let mut u = at_origin(server_url, &format!("{OAUTH_PROTECTED_RESOURCE}{path}"))?;
        u.set_query(server_url.query());
        urls.push(u);
    }
    urls.push(at_origin(server_url, OAUTH_PROTECTED_RESOURCE)?);
    Ok(dedup_keep_order(urls))
}

/// Where to look for the metadata of the authorization server `issuer`, in order.
///
/// With a path component (`https://auth.example.com/tenant1`):
/// 1. `https://auth.example.com/.well-known/oauth-authorization-server/tenant1`
/// 2. `https://auth.example.com/.well-known/openid-configuration/tenant1`
/// 3. `https://auth.example.com/tenant1/.well-known/openid-configuration`
///
/// Without (`https://auth.example.com`):
/// 1. `https://auth.example.com/.well-known/oauth-authorization-server`
/// 2. `https://auth.example.com/.well-known/openid-configuration`
///
/// Trailing slashes of the issuer's path are removed; its query and fragment are ignored (an
/// issuer has neither, RFC 8414 §2).
pub fn authorization_server_metadata_urls(issuer: &Url) -> Result<Vec<Url>, DiscoveryError> {
    let path = trimmed_path(issuer);
    let urls = if path.is_empty() {
        vec![at_origin(issuer, OAUTH_AUTHORIZATION_SERVER)?, at_origin(issuer, OPENID_CONFIGURATION)?]
    } else {
        vec![
            at_origin(issuer, &format!("{OAUTH_AUTHORIZATION_SERVER}{path}"))?,
            at_origin(issuer, &format!("{OPENID_CONFIGURATION}{path}"))?,
            at_origin(issuer, &format!("{path}{OPENID_CONFIGURATION}"))?,
        ]
    };
    Ok(dedup_keep_order(urls))
}

/// MCP 2025-03-26 default endpoints, used when a server offers no authorization server
/// metadata: `/authorize`, `/token` and `/register` on the MCP server's origin (its path is
/// discarded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultEndpoints {
    /// `<origin>/authorize`.
    pub authorization_endpoint: Url,
    /// `<origin>/token`.
    pub token_endpoint: Url,
    /// `<origin>/register`.
    pub registration_endpoint: Url,
}

impl DefaultEndpoints {
    /// The default endpoints for the MCP server at `server_url`.
    pub fn for_server(server_url: &Url) -> Result<Self, DiscoveryError> {
        Ok(Self {
            authorization_endpoint: at_origin(server_url, "/authorize")?,
            token_endpoint: at_origin(server_url, "/token")?,
            registration_endpoint: at_origin(server_url, "/register")?,
        })
    }

    /// The 2025-03-26 metadata fallback, for the MCP server at `server_url`: the authorization
    /// base URL is the server URL with its path discarded, so the only metadata URL to try is
    /// `<origin>/.well-known/oauth-authorization-server`.
    pub fn legacy_metadata_url(server_url: &Url) -> Result<Url, DiscoveryError> {
        at_origin(server_url, OAUTH_AUTHORIZATION_SERVER)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn strs(v: &[Url]) -> Vec<&str> {
        v.iter().map(Url::as_str).collect()
    }

    #[test]
    fn prm_spec_example_without_header() {
        let urls = protected_resource_metadata_urls(&u("https://example.com/public/mcp"), None).unwrap();
        assert_eq!(
            strs(&urls),
            [
                "https://example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://example.com/.well-known/oauth-protected-resource",
            ]
        );
    }

    #[test]
    fn prm_header_first_then_dedup() {
        let hint = u("https://example.com/.well-known/oauth-protected-resource/public/mcp");
        let urls = protected_resource_metadata_urls(&u("https://example.com/public/mcp"), Some(&hint)).unwrap();
        assert_eq!(
            strs(&urls),
            [
                "https://example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://example.com/.well-known/oauth-protected-resource",
            ]
        );
        let hint = u("https://meta.example.net/prm.json");
        let urls = protected_resource_metadata_urls(&u("https://example.com/mcp"), Some(&hint)).unwrap();
        assert_eq!(
            strs(&urls),
            [
                "https://meta.example.net/prm.json",
                "https://example.com/.well-known/oauth-protected-resource/mcp",
                "https://example.com/.well-known/oauth-protected-resource",
            ]
        );
    }

    #[test]
    fn prm_root_path_and_trailing_slash_and_port() {
        for s in ["https://example.com", "https://example.com/", "https://example.com//"] {
            let urls = protected_resource_metadata_urls(&u(s), None).unwrap();
            assert_eq!(strs(&urls), ["https://example.com/.well-known/oauth-protected-resource"], "{s}");
        }
        let urls = protected_resource_metadata_urls(&u("http://user:pw@LOCALHOST:8080/mcp/#frag"), None).unwrap();
        assert_eq!(
            strs(&urls),
            [
                "http://localhost:8080/.well-known/oauth-protected-resource/mcp",
                "http://localhost:8080/.well-known/oauth-protected-resource",
            ]
        );
    }

    #[test]
    fn prm_keeps_query_on_path_based_only() {
        let urls = protected_resource_metadata_urls(&u("https://example.com/mcp?tenant=a"), None).unwrap();
        assert_eq!(
            strs(&urls),
            [
                "https://example.com/.well-known/oauth-protected-resource/mcp?tenant=a",
                "https://example.com/.well-known/oauth-protected-resource",
            ]
        );
    }

    #[test]
    fn as_with_path_spec_example() {
        let urls = authorization_server_metadata_urls(&u("https://auth.example.com/tenant1")).unwrap();
        assert_eq!(
            strs(&urls),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        let urls = authorization_server_metadata_urls(&u("https://auth.example.com/a/b/")).unwrap();
        assert_eq!(urls[0].as_str(), "https://auth.example.com/.well-known/oauth-authorization-server/a/b");
        assert_eq!(urls[2].as_str(), "https://auth.example.com/a/b/.well-known/openid-configuration");
    }

    #[test]
    fn as_without_path() {
        for s in ["https://auth.example.com", "https://auth.example.com/"] {
            let urls = authorization_server_metadata_urls(&u(s)).unwrap();
            assert_eq!(
                strs(&urls),
                [
                    "https://auth.example.com/.well-known/oauth-authorization-server",
                    "https://auth.example.com/.well-known/openid-configuration",
                ]
            );
        }
    }

    #[test]
    fn default_endpoints_on_origin() {
        let server = u("https://api.example.com:8443/v1/mcp?x=1");
        let d = DefaultEndpoints::for_server(&server).unwrap();
        assert_eq!(d.authorization_endpoint.as_str(), "https://api.example.com:8443/authorize");
        assert_eq!(d.token_endpoint.as_str(), "https://api.example.com:8443/token");
        assert_eq!(d.registration_endpoint.as_str(), "https://api.example.com:8443/register");
        assert_eq!(
            DefaultEndpoints::legacy_metadata_url(&server).unwrap().as_str(),
            "https://api.example.com:8443/.well-known/oauth-authorization-server"
        );
    }

    #[test]
    fn refuses_non_http() {
        for s in ["mailto:a@example.com", "file:///tmp/x", "ws://example.com/mcp"] {
            assert!(matches!(protected_resource_metadata_urls(&u(s), None), Err(DiscoveryError::NotHttp { .. })));
            assert!(authorization_server_metadata_urls(&u(s)).is_err());
            assert!(DefaultEndpoints::for_server(&u(s)).is_err());
        }
    }

    #[test]
    fn dedup_keeps_first() {
        let v = vec![u("https://a/"), u("https://b/"), u("https://a/"), u("https://c/"), u("https://b/")];
        assert_eq!(strs(&dedup_keep_order(v)), ["https://a/", "https://b/", "https://c/"]);
    }
}
