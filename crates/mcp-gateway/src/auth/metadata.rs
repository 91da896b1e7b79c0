//! The gateway as an OAuth protected resource (RFC 9728): its resource URI, the profiles'
//! resource URIs under it, and the metadata document served for each.

use serde_json::{Value, json};
use url::Url;

/// Where protected resource metadata lives; a resource's own document is at this path followed
/// by the resource's path (RFC 9728 §3.1).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The resource the gateway's OAuth resource server guards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    /// The canonical resource URI of the gateway's endpoint (`https://gw.example.com/mcp`).
    resource: String,
    /// Its path (`/mcp`; `""` for the origin's root).
    path: String,
    /// Scheme, host and port (`https://gw.example.com`).
    origin: String,
    authorization_servers: Vec<String>,
    scopes: Vec<String>,
}

/// A resource URI that cannot be the gateway's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the resource URI {0:?} is not an http(s) URL of the gateway's endpoint without query or fragment \
     (like https://gw.example.com/mcp)"
)]
pub struct BadResource(pub String);

impl ProtectedResource {
    /// The resource at `resource` (made canonical: lower-case host, no default port, no trailing
    /// slash), whose tokens `authorization_servers` issue, needing `scopes`.
    pub fn new(resource: &str, authorization_servers: Vec<String>, scopes: Vec<String>) -> Result<Self, BadResource> {
        let bad = || BadResource(resource.to_owned());
        let url = Url::parse(resource).map_err(|_| bad())?;
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad());
        }
        let canonical = mcp_auth::resource::canonical_resource(&url).map_err(|_| bad())?;
        let url = Url::parse(&canonical).map_err(|_| bad())?;
        let path = url.path().trim_end_matches('/').to_owned();
        let origin = url.origin().ascii_serialization();
        Ok(Self { resource: format!("{origin}{path}"), path, origin, authorization_servers, scopes })
    }

    /// The resource URI of the gateway's endpoint, or of profile `profile`'s (`…/mcp/NAME`).
    pub fn resource(&self, profile: Option<&str>) -> String {
        match profile {
            Some(name) => format!("{}/{name}", self.resource),
            None => self.resource.clone(),
        }
    }

    /// The URL of the metadata document of [`resource`](Self::resource)`(profile)`.
    pub fn metadata_url(&self, profile: Option<&str>) -> String {
        match profile {
            Some(name) => format!("{}{METADATA_PATH}{}/{name}", self.origin, self.path),
            None => format!("{}{METADATA_PATH}{}", self.origin, self.path),
        }
    }

    /// The scopes every token needs.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// The metadata document of [`resource`](Self::resource)`(profile)`.
    pub fn document(&self, profile: Option<&str>) -> Value {
        let mut document = json!({
            "resource": self.resource(profile),
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-harness gateway",
        });
        if !self.scopes.is_empty() {
            document["scopes_supported"] = json!(self.scopes);
        }
        document
    }

    /// Which resource a request for metadata at `METADATA_PATH{rest}` asks about: `Some(None)`
    /// for the gateway's endpoint (the bare path, its resource path, or `local` — the path the
    /// front serves at, which a proxy may map), `Some(Some(name))` for a profile's, `None` for
    /// anything else.
    pub(crate) fn metadata_target<'a>(&self, rest: &'a str, local: &str) -> Option<Option<&'a str>> {
        if rest.is_empty() || rest == "/" {
            return Some(None);
        }
        for base in [self.path.as_str(), local.trim_end_matches('/')] {
            let Some(after) = rest.strip_prefix(base) else { continue };
            if after.is_empty() {
                return Some(None);
            }
            if let Some(name) = after.strip_prefix('/')
                && !name.is_empty()
                && !name.contains('/')
            {
                return Some(Some(name));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_uris_and_metadata_urls() {
        let r = ProtectedResource::new("https://GW.example.com:443/mcp/", vec!["https://idp".into()], vec![]).unwrap();
        assert_eq!(r.resource(None), "https://gw.example.com/mcp");
        assert_eq!(r.resource(Some("ci")), "https://gw.example.com/mcp/ci");
        assert_eq!(r.metadata_url(None), "https://gw.example.com/.well-known/oauth-protected-resource/mcp");
        assert_eq!(r.metadata_url(Some("ci")), "https://gw.example.com/.well-known/oauth-protected-resource/mcp/ci");
        let doc = r.document(Some("ci"));
        assert_eq!(doc["resource"], "https://gw.example.com/mcp/ci");
        assert_eq!(doc["authorization_servers"], json!(["https://idp"]));
        assert!(doc.get("scopes_supported").is_none());
        assert_eq!(r.metadata_target("", "/mcp"), Some(None));
        assert_eq!(r.metadata_target("/mcp", "/mcp"), Some(None));
        assert_eq!(r.metadata_target("/mcp/ci", "/mcp"), Some(Some("ci")));
        assert_eq!(r.metadata_target("/mcp/ci/x", "/mcp"), None);
        assert_eq!(r.metadata_target("/other", "/mcp"), None);
        let behind_proxy = ProtectedResource::new("https://example.com/tools/mcp", vec![], vec!["mcp".into()]).unwrap();
        assert_eq!(behind_proxy.metadata_target("/tools/mcp", "/mcp"), Some(None));
        assert_eq!(behind_proxy.metadata_target("/mcp/ops", "/mcp"), Some(Some("ops")));
        assert_eq!(behind_proxy.document(None)["scopes_supported"], json!(["mcp"]));
        for bad in ["ftp://x/mcp", "https://x/mcp?a=1", "https://x/mcp#f", "not a url", "/mcp"] {
            assert!(ProtectedResource::new(bad, vec![], vec![]).is_err(), "{bad}");
        }
        let root = ProtectedResource::new("http://127.0.0.1:8080", vec![], vec![]).unwrap();
        assert_eq!(root.metadata_url(None), "http://127.0.0.1:8080/.well-known/oauth-protected-resource");
    }
}
