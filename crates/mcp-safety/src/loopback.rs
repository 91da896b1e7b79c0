//! Whether a host never leaves this machine.

use std::net::{IpAddr, Ipv6Addr};

/// Whether `host` (a URL's host: a name, an IPv4 address, or an IPv6 address with or without
/// brackets) is this machine: `localhost`, `127.0.0.0/8`, `::1`, or an IPv4-mapped loopback.
///
/// Plain `http`, and secrets over it, are accepted only for such hosts. Names under
/// `.localhost` are not accepted: RFC 6761 lets resolvers send them to loopback, but not every
/// resolver does, and a name that reaches DNS could reach anyone.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if host.eq_ignore_ascii_case("localhost") || host.eq_ignore_ascii_case("localhost.") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(IpAddr::V6(ip)) => ip.is_loopback() || mapped_loopback(ip),
        Err(_) => false,
    }
}

fn mapped_loopback(ip: Ipv6Addr) -> bool {
    ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in ["localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "example.com",
            "localhost.evil.com",
            "app.localhost",
            "10.0.0.1",
            "0.0.0.0",
            "::",
            "[::2]",
            "127.0.0.1.nip.io",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
