use std::collections::BTreeSet;

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

fn ctx(home: &str, cwd: &str) -> Context {
    Context {
        home: Some(PathBuf::from(home)),
        cwd: PathBuf::from(cwd),
        temp: PathBuf::from("/tmp/mcp-sandbox-1"),
        program: vec![PathBuf::from("/usr/bin/node")],
        files: vec![PathBuf::from("/srv/app/server.js"), PathBuf::from("/home/u/.ssh/id_ed25519")],
    }
}

fn granted(policy: &Policy) -> BTreeSet<(String, bool)> {
    policy.grants.iter().map(|g| (g.path.to_string_lossy().into_owned(), g.write)).collect()
}

#[test]
fn standard_reads_the_system_and_caches_writes_its_own_places_and_protects_the_secrets() {
    let policy = Sandbox::standard().policy(&ctx("/home/u", "/home/u/project")).unwrap();
    let g = granted(&policy);
    for read in ["/usr", "/etc", "/proc", "/home/u/.nvm", "/home/u/.pyenv", "/home/u/.gitconfig"] {
        assert!(g.contains(&(read.to_owned(), false)), "{read} readable");
    }
    for write in ["/home/u/project", "/tmp/mcp-sandbox-1", "/home/u/.npm", "/home/u/.cache/uv", "/dev/null"] {
        assert!(g.contains(&(write.to_owned(), true)), "{write} writable");
    }
    assert!(!g.iter().any(|(p, _)| p == "/home/u" || p == "/" || p == "/home" || p == "/tmp"), "{g:?}");
    // A file the command line names is readable, unless it is protected.
    assert!(g.contains(&("/srv/app/server.js".to_owned(), false)));
    assert!(!g.iter().any(|(p, _)| p.contains(".ssh")), "{g:?}");
    for secret in [".ssh", ".gnupg", ".aws", ".config/gcloud", ".config/mcp-harness", ".local/share/mcp-harness"] {
        assert!(policy.protected.contains(&PathBuf::from("/home/u").join(secret)), "{secret} protected");
    }
    assert!(policy.network);
    assert_eq!(policy.limits, Limits::default());
    // Only the user's own paths must exist; standard's are skipped when absent.
    let required: Vec<&Path> = policy.grants.iter().filter(|g| g.required).map(|g| g.path.as_path()).collect();
    assert_eq!(required, [Path::new("/home/u/project"), Path::new("/tmp/mcp-sandbox-1")]);
}

#[test]
fn extensions_add_paths_network_limits_and_host_secrets() {
    let sandbox = Sandbox {
        read: vec![PathBuf::from("/data/ref")],
        write: vec![PathBuf::from("/data/out/")],
        network: false,
        limits: Limits { memory_mib: Some(512), processes: Some(64), open_files: None, cpu_seconds: Some(60) },
        protect: vec![PathBuf::from("/srv/host-data")],
    };
    let policy = sandbox.policy(&ctx("/home/u", "/home/u/project")).unwrap();
    let g = granted(&policy);
    assert!(g.contains(&("/data/ref".to_owned(), false)) && g.contains(&("/data/out".to_owned(), true)));
    assert!(policy.grants.iter().filter(|g| g.path.starts_with("/data")).all(|g| g.required));
    assert!(!policy.network);
    assert_eq!(policy.limits, sandbox.limits);
    assert!(policy.protected.contains(&PathBuf::from("/srv/host-data")));
}

#[test]
fn nothing_may_write_over_home() {
    for cwd in ["/home/u", "/home", "/", "/home/u/../u"] {
        let err = Sandbox::standard().policy(&ctx("/home/u", cwd)).unwrap_err();
        assert!(matches!(err, SandboxError::WritesHome { .. }), "{cwd}: {err}");
        assert!(err.to_string().contains("`cwd`"), "{err}");
    }
    let sandbox = Sandbox { write: vec![PathBuf::from("/home")], ..Sandbox::standard() };
    let err = sandbox.policy(&ctx("/home/u", "/srv")).unwrap_err().to_string();
    assert!(err.contains("/home") && err.contains("narrower"), "{err}");
    // Reading HOME is allowed: the secrets are cut out of it.
    let sandbox = Sandbox { read: vec![PathBuf::from("/home/u")], ..Sandbox::standard() };
    assert!(sandbox.policy(&ctx("/home/u", "/srv")).is_ok());
}

#[test]
fn paths_must_be_absolute() {
    let sandbox = Sandbox { read: vec![PathBuf::from("relative/dir")], ..Sandbox::standard() };
    assert_eq!(sandbox.policy(&ctx("/home/u", "/srv")), Err(SandboxError::NotAbsolute(PathBuf::from("relative/dir"))));
}

#[test]
fn the_program_brings_its_installation_but_never_home() {
    let cases = [
        ("/root/.pyenv/versions/3.11.7/bin/python3.11", "/root/.pyenv/versions/3.11.7"),
        ("/opt/tool/bin/tool", "/opt/tool"),
        ("/work/target/debug/server", "/work/target/debug"),
        ("/root/bin/tool", "/root/bin"),
        ("/tool", "/tool"),
    ];
    for (program, expected) in cases {
        let mut c = ctx("/root", "/srv");
        c.program = vec![PathBuf::from(program)];
        let policy = Sandbox::standard().policy(&c).unwrap();
        assert!(granted(&policy).contains(&(expected.to_owned(), false)), "{program} -> {expected}");
        assert!(!policy.grants.iter().any(|g| g.path == Path::new("/root") || g.path == Path::new("/")));
    }
}

#[test]
fn without_home_only_the_named_secrets_are_protected() {
    let mut c = ctx("/home/u", "/srv");
    c.home = None;
    c.files.clear();
    let sandbox = Sandbox { protect: vec![PathBuf::from("/etc/host/secret")], ..Sandbox::standard() };
    let policy = sandbox.policy(&c).unwrap();
    assert_eq!(policy.protected, [PathBuf::from("/etc/host/secret")]);
    assert!(!policy.grants.iter().any(|g| g.path.starts_with("/home")));
}

#[test]
fn expansion_grants_the_siblings_of_a_protected_path_and_skips_links() {
    let tree: Vec<(&str, Vec<Entry>)> = vec![
        ("/h", vec![entry("a", false), entry(".ssh", false), entry("link", true), entry(".config", false)]),
        ("/h/.config", vec![entry("app", false), entry("mcp-harness", false)]),
    ];
    let mut list =
        |dir: &Path| tree.iter().find(|(d, _)| Path::new(d) == dir).map(|(_, e)| e.clone()).unwrap_or_default();
    let protected = [PathBuf::from("/h/.ssh"), PathBuf::from("/h/.config/mcp-harness")];
    let mut out = expand(Path::new("/h"), &protected, &mut list);
    out.sort();
    assert_eq!(out, [PathBuf::from("/h/.config/app"), PathBuf::from("/h/a")]);
    // A grant with nothing protected inside is itself; a grant of a protected path is itself too
    // (the policy only keeps those the user listed).
    assert_eq!(expand(Path::new("/h/a"), &protected, &mut list), [PathBuf::from("/h/a")]);
    assert_eq!(expand(Path::new("/h/.ssh"), &protected, &mut list), [PathBuf::from("/h/.ssh")]);
}

fn entry(name: &str, symlink: bool) -> Entry {
    Entry { name: name.into(), symlink }
}

/// Names for random trees: some protected in HOME (`/h`), some not.
const NAMES: &[&str] = &["a", "b", ".ssh", ".aws", ".config", "gcloud", "mcp-harness", ".local", "share", "x"];

fn tree_path() -> impl Strategy<Value = PathBuf> {
    proptest::collection::vec(proptest::sample::select(NAMES), 0..5).prop_map(|names| {
        let mut p = PathBuf::from("/h");
        p.extend(names);
        p
    })
}

proptest! {
    /// Whatever read and write lists are given, no rule the applier makes covers a protected
    /// path or lies inside one, unless the user listed that very path or a path inside it.
    #[test]
    fn secrets_are_never_granted_unless_listed(
        files in proptest::collection::vec(tree_path(), 0..40),
        links in proptest::collection::btree_set(tree_path(), 0..5),
        read in proptest::collection::vec(tree_path(), 0..4),
        write in proptest::collection::vec(tree_path(), 0..4),
        protect in proptest::collection::vec(tree_path(), 0..2),
    ) {
        // The write lists never hold HOME (refused): keep what the policy accepts.
        let write: Vec<PathBuf> = write.into_iter().filter(|p| p != Path::new("/h")).collect();
        let sandbox = Sandbox { read: read.clone(), write: write.clone(), protect, ..Sandbox::standard() };
        let policy = sandbox.policy(&ctx("/h", "/srv")).unwrap();
        let mut tree: BTreeSet<PathBuf> = files.into_iter().collect();
        for f in tree.clone() {
            tree.extend(f.ancestors().map(Path::to_path_buf));
        }
        let mut list = |dir: &Path| -> Vec<Entry> {
            tree.iter()
                .filter(|p| p.parent() == Some(dir))
                .map(|p| Entry { name: p.file_name().unwrap_or_default().to_owned(), symlink: links.contains(p) })
                .collect()
        };
        let explicit: Vec<PathBuf> = read.iter().chain(&write).map(|p| normalize(p)).collect();
        for grant in &policy.grants {
            for rule in expand(&grant.path, &policy.protected, &mut list) {
                for secret in &policy.protected {
                    prop_assert!(
                        !(secret.starts_with(&rule) && secret != &rule),
                        "rule {} (from {}) holds {}", rule.display(), grant.path.display(), secret.display()
                    );
                    if rule.starts_with(secret) {
                        prop_assert!(
                            explicit.iter().any(|e| rule.starts_with(e) && e.starts_with(secret)),
                            "rule {} (from {}) is inside {}, which was not listed", rule.display(), grant.path.display(), secret.display()
                        );
                    }
                }
                prop_assert!(!links.contains(&rule) || rule == grant.path, "a link was expanded into {}", rule.display());
            }
        }
    }
}
