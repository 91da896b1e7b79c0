//! Each fixture under `crates/tidy/fixtures/` breaks one rule (or none: `clean`). Every line
//! that should be reported carries a marker comment (`// expect: RULE`, `# expect: RULE` in a
//! manifest); a fixture passes when all the checks it is held to together report exactly the
//! marked lines, each once. A fixture is held to every check, as a pure crate, unless
//! [`subject`] says otherwise (the checks driven by a list: pure modules, forbidden
//! dependencies, growing enums).

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use tidy::{
    Crate, FORBIDDEN_DEPENDENCIES, Rule, Violation, forbidden_dependencies, growing_enums, non_exhaustive, one_path,
    pure_dependencies, pure_modules, pure_sources,
};

/// What a fixture is held to.
struct Subject {
    /// A pure crate: its dependencies and all its sources.
    pure_crate: bool,
    /// Its pure modules, as `PURE_MODULES` would list them.
    pure_modules: &'static [&'static str],
    /// Its growing enums, as `GROWING_ENUMS` would list them.
    growing: &'static [(&'static str, &'static str, &'static str)],
    /// What its tree must not contain, and why.
    forbidden: Option<(&'static [&'static str], &'static str)>,
}

fn subject(name: &str) -> Subject {
    let pure = Subject { pure_crate: true, pure_modules: &[], growing: &[], forbidden: None };
    match name {
        // Held to agent-loop's own list, so the fixture checks the list the workspace uses.
        "forbidden-deps" => {
            let (_, forbidden, why) = FORBIDDEN_DEPENDENCIES.iter().find(|(c, _, _)| *c == "agent-loop").unwrap();
            Subject { pure_crate: false, forbidden: Some((forbidden, why)), ..pure }
        }
        "pure-modules" => Subject { pure_crate: false, pure_modules: &["parse", "wire", "missing"], ..pure },
        "growing-enums" => Subject {
            growing: &[
                ("growing-enums", "Revision", "every revision is a variant"),
                ("growing-enums", "Method", "a revision adds methods"),
                ("growing-enums", "Gone", "listed, not there"),
                ("another-crate", "Color", "another crate's entry"),
            ],
            ..pure
        },
        _ => pure,
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

fn rule_of(marker: &str) -> Rule {
    match marker {
        "purity-dependency" => Rule::PureDependency,
        "purity-source" => Rule::PureSource,
        "non-exhaustive" => Rule::NonExhaustive,
        "forbidden-dependency" => Rule::ForbiddenDependency,
        "one-path" => Rule::OnePath,
        other => panic!("unknown marker {other:?}"),
    }
}

/// The marked lines of every file of the fixture: (rule, file relative to the fixture, line).
fn expected(dir: &Path) -> Vec<(Rule, String, usize)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(Rule, String, usize)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                if let Some((_, marker)) = line.split_once("expect: ") {
                    let relative = path.strip_prefix(root).unwrap().display().to_string();
                    out.push((rule_of(marker.trim()), relative, n + 1));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Every check the fixture crate `name` in directory `dir` is held to.
fn all_checks(name: &str, dir: &Path) -> Vec<Violation> {
    let krate = Crate::in_dir(name, dir);
    let subject = subject(name);
    let mut found = Vec::new();
    if subject.pure_crate {
        found.extend(pure_dependencies(&krate).unwrap());
        found.extend(pure_sources(&krate).unwrap());
    }
    found.extend(pure_modules(&krate, subject.pure_modules).unwrap());
    if let Some((forbidden, why)) = subject.forbidden {
        found.extend(forbidden_dependencies(&krate, forbidden, why).unwrap());
    }
    found.extend(non_exhaustive(&krate).unwrap());
    found.extend(growing_enums(&krate, subject.growing).unwrap());
    found.extend(one_path(&krate).unwrap());
    found
}

fn located(dir: &Path, found: &[Violation]) -> Vec<(Rule, String, usize)> {
    let mut out: Vec<_> =
        found.iter().map(|v| (v.rule, v.file.strip_prefix(dir).unwrap().display().to_string(), v.line)).collect();
    out.sort();
    out
}

fn report(found: &[Violation]) -> String {
    found.iter().map(|v| format!("\n  {v}")).collect()
}

/// Runs every check on a fixture and compares with its markers; returns what was found.
fn check_fixture(name: &str) -> Vec<Violation> {
    let dir = fixture(name);
    let found = all_checks(name, &dir);
    assert_eq!(located(&dir, &found), expected(&dir), "found:{}", report(&found));
    found
}

#[test]
fn clean_crate_passes_every_rule() {
    assert!(check_fixture("clean").is_empty());
}

#[test]
fn io_crates_among_normal_dependencies_are_found() {
    let found = check_fixture("impure-deps");
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    assert!(messages.iter().any(|m| m.contains("`mio`") && m.contains("impure-deps -> middle -> mio")), "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("`tokio`") && m.contains("dev-dependency")), "{messages:?}");
}

#[test]
fn io_names_in_sources_are_found() {
    let found = check_fixture("impure-source");
    let alias = found.iter().find(|v| v.message.contains("`io::stdout`")).expect("the aliased call");
    assert!(alias.message.contains("that is `std::io::stdout`"), "{}", alias.message);
    assert!(found.iter().all(|v| v.message.contains("a pure crate does no I/O")));
}

#[test]
fn exhaustive_error_and_port_enums_are_found() {
    let found = check_fixture("exhaustive");
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    assert!(messages.iter().any(|m| m.starts_with("`crate::LoadError` is an error enum")), "{messages:?}");
    assert!(messages.iter().any(|m| m.starts_with("`crate::port::Mode` is a port enum")), "{messages:?}");
}

#[test]
fn items_public_under_two_paths_are_found() {
    let found = check_fixture("two-paths");
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.starts_with("`crate::shapes::Square` is also public as `crate::Box4`")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("`pub use crate::shapes::*` makes `Circle`, `Square`, `Triangle`, `Named`")),
        "{messages:?}"
    );
}

#[test]
fn enums_that_reach_a_port_inside_a_struct_are_found() {
    let found = check_fixture("port-fields");
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    assert!(
        messages.iter().any(
            |m| m.starts_with("`crate::Role` is a port enum (it reaches a public trait's method inside `Message`)")
        ),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("`crate::Kind` is a port enum (it reaches a public trait's method inside `Block`)")),
        "{messages:?}"
    );
}

#[test]
fn connector_configurations_are_found() {
    let found = check_fixture("connector-config");
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    assert_eq!(messages.len(), 1);
    assert!(
        messages[0]
            .starts_with("`crate::TcpConfig` is a connector's configuration (the crate implements `Connector` for it)"),
        "{messages:?}"
    );
    assert!(messages[0].contains("keep a `new` or `Default`"), "{messages:?}");
}

#[test]
fn listed_growing_enums_are_found_and_the_list_kept_true() {
    let found = check_fixture("growing-enums");
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("`crate::Revision` grows with the protocol (every revision is a variant)")),
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m.contains("no enum `Gone`")), "{messages:?}");
}

#[test]
fn forbidden_dependencies_are_found_however_they_come() {
    let found = check_fixture("forbidden-deps");
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    assert!(messages.iter().any(|m| m.contains("`hyper` (forbidden-deps -> hyper)")), "{messages:?}");
    assert!(
        messages.iter().any(|m| m.contains("`tungstenite` (forbidden-deps -> middle-net -> tungstenite)")),
        "{messages:?}"
    );
    assert!(messages.iter().all(|m| m.contains("the loop builds without an HTTP client")), "{messages:?}");
}

#[test]
fn io_in_listed_pure_modules_is_found() {
    let found = check_fixture("pure-modules");
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.contains("`reqwest::get`") && m.contains("an I/O or runtime crate")),
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m.contains("no module `missing`")), "{messages:?}");
    assert!(messages.iter().filter(|m| m.starts_with("names")).all(|m| m.contains("a pure module does no I/O")));
}
