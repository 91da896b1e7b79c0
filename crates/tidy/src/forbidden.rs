//! Crates that must build without some dependencies, whatever path brings them in: agent-loop
//! runs the loop behind ports, so a user can bring their own transport and model provider and
//! build it without an HTTP client, a WebSocket or Unix calls.

use crate::purity::banned_in_tree;
use crate::{Crate, Rule, TidyError, Violation};

/// (crate, the crates its normal dependency tree must not contain, why). The one list of them.
pub const FORBIDDEN_DEPENDENCIES: &[(&str, &[&str], &str)] = &[(
    "agent-loop",
    &["reqwest", "hyper", "hyper-util", "tungstenite", "tokio-tungstenite", "nix"],
    "the loop builds without an HTTP client, a WebSocket or Unix calls: transports and model providers are adapters \
     it is handed through its ports",
)];

/// The crates of `forbidden` in the normal dependency tree of `krate` (host platform), each
/// reported at the line of `krate`'s manifest that declares the dependency it comes through.
pub fn forbidden_dependencies(krate: &Crate, forbidden: &[&str], why: &str) -> Result<Vec<Violation>, TidyError> {
    let found = banned_in_tree(krate, forbidden)?;
    Ok(found
        .into_iter()
        .map(|(name, chain, line)| Violation {
            rule: Rule::ForbiddenDependency,
            file: krate.manifest.clone(),
            line,
            message: format!(
                "{} depends on `{name}` ({chain}), which it must not: {why}; depend on the port crate instead, or make \
                 it a dev-dependency if only tests use it",
                krate.name
            ),
        })
        .collect())
}
