//! The canonical resource URI of an MCP server (RFC 8707 §2, MCP 2025-11-25 "Canonical Server
//! URI") and the check that a protected resource metadata document speaks for the server being
//! reached (RFC 9728 §3.3, §7.3).
//!
//! Canonical form: lowercase scheme and host (as [`Url`] parsing already does), default port
//! dropped, no user info, no fragment, the query kept, and the path kept without trailing
//! slashes unless it is just `/`.

use url::Url;

/// A URL that cannot identify a protected resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResourceError {
    /// Only `http` and `https` URLs with a host identify MCP servers.
    #[error("expected an http(s) URL with a host, got {url}")]
    NotHttp {
        /// The refused URL.
        url: String,
    },
}

/// The canonical resource URI of the MCP server at `server_url`, for the RFC 8707 `resource`
/// parameter of authorization and token requests.
///
/// `https://MCP.Example.com:443/mcp/#x` becomes `https://mcp.example.com/mcp`;
/// `https://mcp.example.com` becomes `https://mcp.example.com/`.
pub fn canonical_resource(server_url: &Url) -> Result<String, ResourceError> {
    Ok(canonical_url(server_url)?.as_str().to_owned())
}

fn canonical_url(url: &Url) -> Result<Url, ResourceError> {
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() || url.cannot_be_a_base() {
        return Err(ResourceError::NotHttp { url: url.as_str().to_owned() });
    }
    let mut out = url.clone();
    // Cannot fail for an http(s) URL with a host.
    let _ = out.set_username("");
    let _ = out.set_password(None);
    out.set_fragment(None);
    let trimmed = url.path().trim_end_matches('/');
    let path = if trimmed.is_empty() { "/" } else { trimmed };
    out.set_path(path);
    Ok(out)
}

/// Whether `prm_resource`, the `resource` of a protected resource metadata document, identifies
/// the MCP server at `server_url`. A mismatch means the document must not be used.
///
/// Both are canonicalized; then they must have the same origin (scheme, host and effective
/// port), and the metadata's path must equal the server's path or be a prefix of it ending on a
/// segment boundary (`/api` covers `/api/mcp`, not `/api2`; `/` covers every path). A metadata
/// resource with a query matches only the same path with the same query. A `prm_resource` that
/// is not an absolute http(s) URL, has a fragment (RFC 9728 §2 forbids one) or user info never
/// matches.
pub fn resource_matches(prm_resource: &str, server_url: &Url) -> bool {
    let Ok(prm) = Url::parse(prm_resource) else {
        return false;
    };
    if prm.fragment().is_some() || !prm.username().is_empty() || prm.password().is_some() {
        return false;
    }
    let (Ok(prm), Ok(server)) = (canonical_url(&prm), canonical_url(server_url)) else {
        return false;
    };
    if prm.scheme() != server.scheme()
        || prm.host() != server.host()
        || prm.port_or_known_default() != server.port_or_known_default()
    {
        return false;
    }
    let (p, s) = (prm.path(), server.path());
    if prm.query().is_some() {
        return p == s && prm.query() == server.query();
    }
    p == "/" || p == s || s.strip_prefix(p).is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn canon(s: &str) -> String {
        canonical_resource(&Url::parse(s).unwrap()).unwrap()
    }

    fn matches(prm: &str, server: &str) -> bool {
        resource_matches(prm, &Url::parse(server).unwrap())
    }

    #[test]
    fn canonical_examples() {
        assert_eq!(canon("https://mcp.example.com/mcp"), "https://mcp.example.com/mcp");
        assert_eq!(canon("HTTPS://MCP.Example.COM/mcp"), "https://mcp.example.com/mcp");
        assert_eq!(canon("https://mcp.example.com:443/mcp/"), "https://mcp.example.com/mcp");
        assert_eq!(canon("http://mcp.example.com:80/"), "http://mcp.example.com/");
        assert_eq!(canon("https://mcp.example.com"), "https://mcp.example.com/");
        assert_eq!(canon("https://mcp.example.com:8443/server/mcp#frag"), "https://mcp.example.com:8443/server/mcp");
        assert_eq!(canon("https://u:p@mcp.example.com/mcp"), "https://mcp.example.com/mcp");
        assert_eq!(canon("https://mcp.example.com/Path/MCP//"), "https://mcp.example.com/Path/MCP");
        assert_eq!(canon("https://mcp.example.com/mcp/?a=1"), "https://mcp.example.com/mcp?a=1");
        assert_eq!(canon("http://[::1]:3000/mcp"), "http://[::1]:3000/mcp");
    }

    #[test]
    fn canonical_refuses_non_http() {
        for s in ["mailto:x@example.com", "ws://example.com/mcp", "data:text/plain,hi"] {
            assert!(canonical_resource(&Url::parse(s).unwrap()).is_err(), "{s}");
        }
    }

    #[test]
    fn matching_cases() {
        assert!(matches("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"));
        assert!(matches("https://mcp.example.com/mcp/", "https://mcp.example.com/mcp"));
        assert!(matches("https://mcp.example.com/mcp", "https://mcp.example.com/mcp/"));
        assert!(matches("https://MCP.EXAMPLE.com/mcp", "https://mcp.example.com/mcp"));
        assert!(matches("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"));
        assert!(matches("https://mcp.example.com", "https://mcp.example.com/anything/mcp"));
        assert!(matches("https://mcp.example.com/", "https://mcp.example.com/mcp"));
        assert!(matches("https://mcp.example.com/api", "https://mcp.example.com/api/mcp"));
        assert!(matches("https://mcp.example.com/mcp", "https://mcp.example.com/mcp?session=1"));
    }

    #[test]
    fn refusing_cases() {
        assert!(!matches("https://mcp.example.com/mcp", "https://mcp.example.com/mcp2"));
        assert!(!matches("https://mcp.example.com/mcp2", "https://mcp.example.com/mcp"));
        assert!(!matches("https://mcp.example.com/api/mcp", "https://mcp.example.com/api"));
        assert!(!matches("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp"));
        assert!(!matches("https://mcp.example.com/mcp", "https://mcp.example.com:8443/mcp"));
        assert!(!matches("http://mcp.example.com/mcp", "https://mcp.example.com/mcp"));
        assert!(!matches("https://mcp.example.com/mcp", "http://mcp.example.com/mcp"));
        assert!(!matches("https://evil.example.com/mcp", "https://mcp.example.com/mcp"));
        assert!(!matches("https://example.com/mcp", "https://mcp.example.com/mcp"));
        assert!(!matches("https://mcp.example.com/MCP", "https://mcp.example.com/mcp"));
        assert!(!matches("https://mcp.example.com/mcp#x", "https://mcp.example.com/mcp"));
        assert!(!matches("https://u@mcp.example.com/mcp", "https://mcp.example.com/mcp"));
        assert!(!matches("/mcp", "https://mcp.example.com/mcp"));
        assert!(!matches("", "https://mcp.example.com/mcp"));
        assert!(!matches("not a url", "https://mcp.example.com/mcp"));
        assert!(!matches("ws://mcp.example.com/mcp", "https://mcp.example.com/mcp"));
        assert!(!matches("https://mcp.example.com/mcp?t=a", "https://mcp.example.com/mcp?t=b"));
        assert!(!matches("https://mcp.example.com/mcp?t=a", "https://mcp.example.com/mcp"));
        assert!(!matches("https://mcp.example.com/mcp", "mailto:a@mcp.example.com"));
    }

    #[test]
    fn query_resource_matches_exactly() {
        assert!(matches("https://mcp.example.com/mcp?t=a", "https://mcp.example.com/mcp/?t=a"));
    }
}
