//! Protocol revisions and the negotiation rule.

use mcp_protocol::{ProtocolVersion as V, negotiate};

#[test]
fn revisions_parse_print_and_order() {
    for v in V::ALL {
        assert_eq!(V::parse(v.as_str()), Some(v));
        assert_eq!(v.to_string(), v.as_str());
    }
    assert!(V::ALL.windows(2).all(|w| w[0] < w[1] && w[0].as_str() < w[1].as_str()), "ALL is oldest first");
    assert_eq!(V::LATEST, *V::ALL.last().unwrap());
    assert_eq!(V::parse("2026-07-28"), Some(V::STATELESS));
    assert!(V::STATELESS.is_stateless() && !V::LATEST.is_stateless() && !V::ALL.contains(&V::STATELESS));
    for bad in ["", "2025-06-18 ", "2025-6-18", "2026-7-28", "latest"] {
        assert_eq!(V::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn the_offered_revision_or_an_older_supported_one_is_accepted() {
    for offered in V::ALL {
        for answered in V::ALL.into_iter().filter(|v| *v <= offered) {
            assert_eq!(negotiate(offered, &V::ALL, answered.as_str()), Ok(answered), "offered {offered}");
        }
    }
}

fn assert_refused(offered: V, supported: &[V], answered: &str) {
    let e = negotiate(offered, supported, answered).unwrap_err();
    assert_eq!((e.offered, e.answered.as_str(), e.supported.as_slice()), (offered, answered, supported));
    let message = e.to_string();
    assert!(message.contains(offered.as_str()), "{message}");
    assert!(message.contains(answered), "{message}");
}

#[test]
fn unknown_newer_or_unsupported_revisions_are_refused_naming_both() {
    // Unknown.
    for answered in ["2099-01-01", "2026-07-28", "1.0", "garbage"] {
        assert_refused(V::LATEST, &V::ALL, answered);
    }
    let e = negotiate(V::LATEST, &V::ALL, "").unwrap_err();
    assert!(e.to_string().contains("\"\""), "{e}");
    // Newer than offered.
    for offered in V::ALL {
        for answered in V::ALL.into_iter().filter(|v| *v > offered) {
            assert_refused(offered, &V::ALL, answered.as_str());
        }
    }
    // Known and older, but not supported.
    assert_refused(V::LATEST, &[V::V2025_11_25, V::V2025_06_18], "2024-11-05");
    assert_refused(V::V2025_06_18, &[V::V2025_06_18], "2025-03-26");
    assert_refused(V::V2025_06_18, &[], "2025-06-18");
}

/// The version an initialize result names is read alone, whatever else the result holds.
#[test]
fn the_answered_version_is_read_alone() {
    let dense = format!("[{}0]", "[[0]],".repeat(1 << 20));
    let result = format!(r#"{{"capabilities":{{}},"x":{dense},"protocolVersion":"2025-06-18"}}"#);
    assert_eq!(mcp_protocol::answered_version(&result).as_deref(), Some("2025-06-18"));
    assert_eq!(mcp_protocol::answered_version(r#"{"protocolVersion":7}"#), None);
    assert_eq!(mcp_protocol::answered_version("{}"), None);
}
