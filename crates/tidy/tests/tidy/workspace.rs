//! The rules against this workspace. A failure lists every violation as `file:line: [rule]
//! message`; fix the source (or, for a deliberate exception, the allowlist the message names).
//! `cargo xtask purity` runs the tests whose names start with `workspace::purity`.

use tidy::{
    Crate, FORBIDDEN_DEPENDENCIES, GROWING_ENUMS, PURE_CRATES, PURE_MODULES, Violation, forbidden_dependencies,
    growing_enums, non_exhaustive, one_path, pure_dependencies, pure_modules, pure_sources, workspace_crates,
    workspace_root,
};

fn crates() -> Vec<Crate> {
    workspace_crates(&workspace_root()).unwrap()
}

fn pure_crates() -> Vec<Crate> {
    let all = crates();
    PURE_CRATES.iter().map(|name| named(&all, name)).collect()
}

fn named(all: &[Crate], name: &str) -> Crate {
    all.iter().find(|c| c.name == name).cloned().unwrap_or_else(|| panic!("crate {name} is not in the workspace"))
}

fn assert_none(what: &str, found: &[Violation]) {
    let root = workspace_root();
    let list: String = found.iter().map(|v| format!("\n  {}", v.display_relative_to(&root))).collect();
    assert!(found.is_empty(), "{} {what}:{list}", found.len());
}

#[test]
fn purity_dependencies() {
    let mut found = Vec::new();
    for krate in pure_crates() {
        found.extend(pure_dependencies(&krate).unwrap());
    }
    assert_none("I/O dependencies of pure crates", &found);
}

#[test]
fn purity_sources() {
    let mut found = Vec::new();
    for krate in pure_crates() {
        assert!(krate.lib.is_some(), "pure crate {} has no library", krate.name);
        found.extend(pure_sources(&krate).unwrap());
    }
    assert_none("I/O names in pure crates", &found);
}

#[test]
fn purity_modules() {
    let all = crates();
    let mut found = Vec::new();
    for (name, modules) in PURE_MODULES {
        found.extend(pure_modules(&named(&all, name), modules).unwrap());
    }
    assert_none("I/O in pure modules", &found);
}

#[test]
fn forbidden_dependencies_are_absent() {
    let all = crates();
    let mut found = Vec::new();
    for (name, forbidden, why) in FORBIDDEN_DEPENDENCIES {
        found.extend(forbidden_dependencies(&named(&all, name), forbidden, why).unwrap());
    }
    assert_none("forbidden dependencies", &found);
}

#[test]
fn non_exhaustive_enums() {
    let mut found = Vec::new();
    for krate in crates() {
        found.extend(non_exhaustive(&krate).unwrap());
        found.extend(growing_enums(&krate, GROWING_ENUMS).unwrap());
    }
    for (name, _, _) in GROWING_ENUMS {
        named(&crates(), name);
    }
    assert_none("exhaustive public error, port or growing enums and connector configurations", &found);
}

#[test]
fn one_path_per_item() {
    let mut found = Vec::new();
    for krate in crates() {
        found.extend(one_path(&krate).unwrap());
    }
    assert_none("items public under two paths", &found);
}
