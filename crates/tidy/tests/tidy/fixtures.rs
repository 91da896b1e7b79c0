//! Each fixture under `crates/tidy/fixtures/` breaks one rule (or none: `clean`). Every line
//! that should be reported carries a marker comment (`// expect: RULE`, `# expect: RULE` in a
//! manifest); a fixture passes when all four checks together report exactly the marked lines,
//! each once.

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use tidy::{Crate, Rule, Violation, non_exhaustive, one_path, pure_dependencies, pure_sources};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

fn rule_of(marker: &str) -> Rule {
    match marker {
        "purity-dependency" => Rule::PureDependency,
        "purity-source" => Rule::PureSource,
        "non-exhaustive" => Rule::NonExhaustive,
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

/// Every check on the fixture crate `name` in directory `dir`.
fn all_checks(name: &str, dir: &Path) -> Vec<Violation> {
    let krate = Crate::in_dir(name, dir);
    let mut found = pure_dependencies(&krate).unwrap();
    found.extend(pure_sources(&krate).unwrap());
    found.extend(non_exhaustive(&krate).unwrap());
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
