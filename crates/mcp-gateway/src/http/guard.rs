//! Who may reach the HTTP front at all: the bind rule (a non-loopback address only with
//! inbound authentication) and the `Host` / `Origin` allow lists that refuse DNS rebinding.
//!
//! A browser tricked into sending requests to a loopback server (evil.example resolving to
//! 127.0.0.1) still says `Host: evil.example` and `Origin: http://evil.example`: both are
//! checked against what the gateway serves as, and refused with 403.

use std::net::SocketAddr;

/// Host names a loopback-bound gateway answers to by default (any port).
pub(crate) const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The `Host` and `Origin` rules of one front.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostGuard {
    /// Allowed `Host` values (`name` for any port, `name:port` for one); `None`: any.
    hosts: Option<Vec<String>>,
    /// Allowed `Origin` values (`scheme://name[:port]`); `None`: origins whose host is an
    /// allowed host (or, when any host is allowed, the request's own host).
    origins: Option<Vec<String>>,
}

impl HostGuard {
    /// The rules for a front bound to `addr`: configured lists, else the loopback names for a
    /// loopback address and any host (behind authentication) otherwise.
    pub(crate) fn new(addr: &SocketAddr, hosts: &[String], origins: &[String]) -> Self {
        let hosts = if !hosts.is_empty() {
            Some(hosts.iter().map(|h| h.trim().to_ascii_lowercase()).collect())
        } else if addr.ip().is_loopback() {
            Some(LOOPBACK_NAMES.iter().map(|h| (*h).to_owned()).collect())
        } else {
            None
        };
        let origins = (!origins.is_empty())
            .then(|| origins.iter().map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase()).collect());
        Self { hosts, origins }
    }

    /// Checks a request's `Host` and `Origin` headers (`None` when absent); `Err` says why
    /// (for a 403).
    pub(crate) fn check(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), String> {
        if let Some(allowed) = &self.hosts {
            let Some(host) = host else { return Err("the request has no Host header".to_owned()) };
            if !host_allowed(allowed, host) {
                return Err(format!("Host {:?} is not one this gateway serves as", shown(host)));
            }
        }
        let Some(origin) = origin else { return Ok(()) };
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        let ok = match &self.origins {
            Some(allowed) => allowed.contains(&origin),
            None => match origin_host(&origin) {
                Some(origin_host) => match &self.hosts {
                    Some(allowed) => host_allowed(allowed, origin_host),
                    // Any host: only the request's own origin.
                    None => host.is_some_and(|h| name_of(h.trim()).eq_ignore_ascii_case(name_of(origin_host))),
                },
                None => false,
            },
        };
        if ok { Ok(()) } else { Err(format!("Origin {:?} is not allowed", shown(&origin))) }
    }
}

fn shown(text: &str) -> String {
    mcp_safety::text::one_line(text, 100)
}

/// Whether `host` (`name[:port]`) matches an allowed entry (`name`: any port; `name:port`),
/// ignoring case (allowed entries are lower case). No allocation: this runs on every request.
fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim();
    let name = name_of(host);
    allowed.iter().any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(name))
}

/// The name part of `name[:port]` (`[::1]` keeps its brackets).
fn name_of(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The `name[:port]` of an origin `scheme://name[:port]` (`None` for `null` or a malformed one).
fn origin_host(origin: &str) -> Option<&str> {
    let (scheme, rest) = origin.split_once("://")?;
    if !matches!(scheme, "http" | "https") || rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> HostGuard {
        HostGuard::new(&"127.0.0.1:8080".parse().unwrap_or_else(|_| unreachable!()), &[], &[])
    }

    #[test]
    fn loopback_names_only_by_default() {
        let guard = loopback();
        for ok in ["127.0.0.1:8080", "localhost", "LOCALHOST:1", "[::1]:8080", "127.0.0.1"] {
            assert_eq!(guard.check(Some(ok), None), Ok(()), "{ok}");
        }
        for bad in ["evil.example.com", "evil.example.com:8080", "127.0.0.1.evil.com", "localhost.evil:80", "[::2]:1"] {
            assert!(guard.check(Some(bad), None).is_err(), "{bad}");
        }
        assert!(guard.check(None, None).is_err());
        assert_eq!(guard.check(Some("127.0.0.1:8080"), Some("http://127.0.0.1:8080")), Ok(()));
        assert_eq!(guard.check(Some("localhost:8080"), Some("https://localhost")), Ok(()));
        for bad in ["http://evil.example.com", "null", "file://", "http://localhost@evil.com", "ftp://localhost"] {
            assert!(guard.check(Some("127.0.0.1:8080"), Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn configured_lists_and_any_host_behind_authentication() {
        let addr = "0.0.0.0:443".parse().unwrap_or_else(|_| unreachable!());
        let guard = HostGuard::new(&addr, &[], &[]);
        assert_eq!(guard.check(Some("gw.example.com"), None), Ok(()));
        assert_eq!(guard.check(Some("gw.example.com"), Some("https://gw.example.com")), Ok(()));
        assert!(guard.check(Some("gw.example.com"), Some("https://evil.example")).is_err());
        let guard = HostGuard::new(&addr, &["gw.example.com:443".into()], &["https://app.example.com/".into()]);
        assert_eq!(guard.check(Some("gw.example.com:443"), Some("https://app.example.com")), Ok(()));
        assert!(guard.check(Some("gw.example.com:8443"), None).is_err());
        assert!(guard.check(Some("gw.example.com:443"), Some("https://gw.example.com")).is_err());
    }
}
