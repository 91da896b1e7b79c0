use std::collections::BTreeSet;

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

fn ctx(home: &str, cwd: &str) -> Context {
    let mut ctx = Context::new(cwd, "/tmp/mcp-sandbox-1");
    ctx.home = Some(PathBuf::from(home));
    ctx.cwd_configured = true;
    ctx.program = vec![PathBuf::from("/usr/bin/node")];
    ctx.files = vec![PathBuf::from("/srv/app/server.js"), PathBuf::from("/home/u/.ssh/id_ed25519")];
    ctx
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
    let required: Vec<&Path> =
        policy.grants.iter().filter(|g| g.presence == Presence::Required).map(|g| g.path.as_path()).collect();
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
    assert!(policy.grants.iter().filter(|g| g.path.starts_with("/data")).all(|g| g.presence == Presence::Required));
    assert!(!policy.network);
    assert_eq!(policy.limits, sandbox.limits);
    assert!(policy.protected.contains(&PathBuf::from("/srv/host-data")));
}

#[test]
fn nothing_may_write_over_home() {
    for cwd in ["/home/u", "/home", "/", "/home/u/../u"] {
        let err = Sandbox::standard().policy(&ctx("/home/u", cwd)).unwrap_err();
        assert!(matches!(err, SandboxError::WorkingDir { problem: CwdProblem::HoldsHome { .. }, .. }), "{cwd}: {err}");
        assert!(err.to_string().contains("`cwd`") && err.to_string().contains("home directory"), "{err}");
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
    assert!(!policy.grants.iter().any(|g| g.path.starts_with("/home/u")));
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
        let sandbox = Sandbox { read: read.clone(), write: write.clone(), protect, ..Sandbox::standard() };
        // A write entry that holds HOME or a protected path (not itself listed in `write`) is
        // refused, when the configuration is read and at the start alike; the rest resolves.
        let protected = sandbox.protected_paths(Some(Path::new("/h")));
        let refused = write.iter().map(|w| normalize(w)).any(|w| {
            w == Path::new("/h") || protected.iter().any(|p| p.starts_with(&w) && *p != w && !write.iter().any(|l| normalize(l) == *p))
        });
        let checked = sandbox.check(Some(Path::new("/h")), &mut |_| Vec::new());
        prop_assert_eq!(checked.is_err(), refused, "{:?}", checked);
        let resolved = sandbox.policy(&ctx("/h", "/srv"));
        prop_assert_eq!(resolved.is_err(), refused);
        let Ok(policy) = resolved else { return Ok(()) };
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

#[test]
fn a_write_grant_holding_a_protected_folder_is_refused_naming_both_and_what_to_write_instead() {
    let sandbox = Sandbox {
        write: vec![PathBuf::from("/srv/x")],
        protect: vec![PathBuf::from("/srv/x/cfg/mcp-harness.toml")],
        ..Sandbox::standard()
    };
    let tree: Vec<(&str, Vec<Entry>)> = vec![
        ("/srv/x", vec![entry("data", false), entry("cfg", false), entry("logs", false)]),
        ("/srv/x/cfg", vec![entry("mcp-harness.toml", false), entry("other.toml", false)]),
    ];
    let mut list =
        |dir: &Path| tree.iter().find(|(d, _)| Path::new(d) == dir).map(|(_, e)| e.clone()).unwrap_or_default();
    let err = sandbox.check(Some(Path::new("/home/u")), &mut list).unwrap_err();
    let SandboxError::HoldsProtected { grant, protected, instead } = &err else { panic!("{err:?}") };
    assert_eq!((grant.as_path(), protected.as_path()), (Path::new("/srv/x"), Path::new("/srv/x/cfg/mcp-harness.toml")));
    assert_eq!(instead, &["/srv/x/cfg/other.toml", "/srv/x/data", "/srv/x/logs"].map(PathBuf::from));
    let text = err.to_string();
    assert!(text.contains("/srv/x:") && text.contains("/srv/x/cfg/mcp-harness.toml"), "{text}");
    assert!(text.contains(r#"`write = ["/srv/x/cfg/other.toml", "/srv/x/data", "/srv/x/logs"]`"#), "{text}");
    // Refused at the start too (without a listing: what to do in words), so nothing shrinks.
    let err = sandbox.policy(&ctx("/home/u", "/home/u/project")).unwrap_err().to_string();
    assert!(err.contains("list the folders inside /srv/x that the server needs"), "{err}");
    // HOME's own secrets count: `~/.config` holds `~/.config/gcloud`.
    let sandbox = Sandbox { write: vec![PathBuf::from("/home/u/.config")], ..Sandbox::standard() };
    let err = sandbox.check(Some(Path::new("/home/u")), &mut |_| Vec::new()).unwrap_err();
    assert!(matches!(err, SandboxError::HoldsProtected { .. }), "{err}");
    // Listing the protected path in `write` as well grants it whole: nothing to cut out.
    let sandbox = Sandbox {
        write: vec![PathBuf::from("/srv/x"), PathBuf::from("/srv/x/cfg/mcp-harness.toml")],
        protect: vec![PathBuf::from("/srv/x/cfg/mcp-harness.toml")],
        ..Sandbox::standard()
    };
    assert_eq!(sandbox.check(Some(Path::new("/home/u")), &mut list), Ok(()));
    assert!(
        sandbox.policy(&ctx("/home/u", "/home/u/project")).unwrap().protected.iter().all(|p| !p.starts_with("/srv"))
    );
    // A read grant may hold one: it is cut out (reading HOME without its secrets).
    let sandbox = Sandbox { read: vec![PathBuf::from("/home/u")], ..Sandbox::standard() };
    assert_eq!(sandbox.check(Some(Path::new("/home/u")), &mut list), Ok(()));
}

#[test]
fn a_working_directory_that_cannot_be_granted_gives_way_to_a_private_one_unless_configured() {
    let private = |home: &str, cwd: &str| {
        let mut c = ctx(home, cwd);
        c.cwd_configured = false;
        let start = Sandbox { protect: vec![PathBuf::from("/srv/x/cfg")], ..Sandbox::standard() }.resolve(&c).unwrap();
        (start.working_dir, start.cwd, start.policy)
    };
    type Expected = fn(&CwdProblem) -> bool;
    let cases: [(&str, Expected); 9] = [
        ("/home/u", |p| matches!(p, CwdProblem::HoldsHome { is_home: true, .. })),
        ("/home", |p| matches!(p, CwdProblem::HoldsHome { is_home: false, .. })),
        ("/", |p| matches!(p, CwdProblem::HoldsHome { .. })),
        ("/etc", |p| matches!(p, CwdProblem::HoldsSystem(_))),
        ("/usr/share/doc", |p| matches!(p, CwdProblem::InsideSystem(_))),
        ("/tmp", |p| matches!(p, CwdProblem::SharedTemp(_))),
        ("/home/u/.ssh", |p| matches!(p, CwdProblem::InsideProtected(_))),
        ("/srv/x", |p| matches!(p, CwdProblem::HoldsProtected(_))),
        ("/home/u/.config", |p| matches!(p, CwdProblem::HoldsProtected(_))),
    ];
    for (cwd, expected) in cases {
        let (working_dir, start_in, policy) = private("/home/u", cwd);
        let WorkingDir::Private { requested, problem } = &working_dir else { panic!("{cwd}: {working_dir:?}") };
        assert!(expected(problem) && requested == Path::new(cwd), "{cwd}: {problem:?}");
        assert_eq!(start_in, Path::new("/tmp/mcp-sandbox-1/work"), "{cwd}");
        assert!(!policy.allows(&Path::new(cwd).join("x"), true), "{cwd} is not writable");
        let shown = working_dir.to_string();
        assert!(shown.starts_with("private") && shown.contains(&format!("because {cwd} ")), "{shown}");
    }
    let (working_dir, _, _) = private("/home/u", "/home/u");
    assert!(working_dir.to_string().contains("is your home directory"), "{working_dir}");
    // An ordinary folder is granted as it is.
    let (working_dir, start_in, policy) = private("/home/u", "/home/u/project");
    assert_eq!(working_dir, WorkingDir::Granted(PathBuf::from("/home/u/project")));
    assert_eq!(start_in, Path::new("/home/u/project"));
    assert!(policy.allows(Path::new("/home/u/project/x"), true));
    // Configured, the same directories are refused, saying why and what to do; inside a
    // system directory is the user's choice.
    for cwd in ["/home/u", "/etc", "/tmp", "/srv/x"] {
        let err = Sandbox { protect: vec![PathBuf::from("/srv/x/cfg")], ..Sandbox::standard() }
            .resolve(&ctx("/home/u", cwd))
            .unwrap_err();
        assert!(matches!(err, SandboxError::WorkingDir { .. }) && err.to_string().contains("`cwd`"), "{cwd}: {err}");
    }
    let err = Sandbox::standard().resolve(&ctx("/home/u", "/home/u/.ssh")).unwrap_err().to_string();
    assert!(err.contains("list it in `write`"), "{err}");
    assert!(Sandbox::standard().resolve(&ctx("/home/u", "/opt/srv/state")).is_ok());
    assert!(Sandbox::standard().resolve(&ctx("/home/u", "/usr/local/srv")).is_ok());
    // Listed in `write`, a protected working directory is granted.
    let sandbox = Sandbox { write: vec![PathBuf::from("/home/u/.ssh")], ..Sandbox::standard() };
    assert!(sandbox.resolve(&ctx("/home/u", "/home/u/.ssh")).is_ok());
}

#[test]
fn each_start_form_reads_what_it_runs_and_writes_the_caches_it_needs_made_when_missing() {
    let start = |program: &str, args: &[&str], projects: &[&str]| {
        let mut c = ctx("/home/u", "/home/u/project");
        c.program = vec![PathBuf::from(program)];
        c.args = args.iter().map(std::ffi::OsString::from).collect();
        c.files = args.iter().filter(|a| a.starts_with('/')).map(PathBuf::from).collect();
        c.projects = projects.iter().map(PathBuf::from).collect();
        c.env = vec![("PATH".into(), "/home/u/.cargo/bin:/home/u/.local/bin:/opt/tools/bin:/usr/bin".into())];
        Sandbox::standard().policy(&c).unwrap()
    };
    let created = |policy: &Policy| -> Vec<String> {
        policy
            .grants
            .iter()
            .filter(|g| g.presence == Presence::Create && g.write)
            .map(|g| g.path.to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(created(&start("/usr/bin/npx", &["-y", "pkg"], &[])), ["/home/u/.cache/node-gyp", "/home/u/.npm"]);
    assert_eq!(
        created(&start("/usr/bin/uvx", &["mcp-server-time"], &[])),
        ["/home/u/.cache/uv", "/home/u/.local/share/uv"]
    );
    let pipx = start("/home/u/.local/bin/pipx", &["run", "pkg"], &[]);
    assert_eq!(created(&pipx).len(), 6);
    // pipx makes its bin folder at every start: made if missing, but never writable (it is on
    // the user's PATH).
    let bin = Grant { path: PathBuf::from("/home/u/.local/bin"), write: false, presence: Presence::Create };
    assert!(pipx.grants.contains(&bin) && !pipx.allows(Path::new("/home/u/.local/bin/x"), true));
    assert_eq!(created(&start("/home/u/.bun/bin/bunx", &["pkg"], &[])), ["/home/u/.bun/install/cache"]);
    assert_eq!(created(&start("/home/u/.local/share/pnpm/pnpm", &["dlx", "pkg"], &[])).len(), 3);
    assert_eq!(created(&start("/home/u/.deno/bin/deno", &["run", "x.ts"], &[])), ["/home/u/.cache/deno"]);
    assert!(created(&start("/usr/bin/node", &["/srv/app/dist/index.js"], &[])).is_empty());

    // node SCRIPT: the project and every node_modules above the script.
    let policy = start("/usr/bin/node", &["/srv/app/dist/index.js"], &["/srv/app"]);
    assert!(policy.allows(Path::new("/srv/app/node_modules/@modelcontextprotocol/sdk/package.json"), false));
    assert!(policy.allows(Path::new("/srv/node_modules/x/index.js"), false));
    assert!(!policy.allows(Path::new("/srv/app/dist/index.js"), true), "read only");
    // A project that is HOME (a dotfiles repository) or holds it is not granted.
    let policy = start("/usr/bin/python3", &["/home/u/server.py"], &["/home/u", "/"]);
    assert!(!policy.grants.iter().any(|g| g.path == Path::new("/home/u") || g.path == Path::new("/")));
    // Tools: the PATH's installations; HOME's shared folders only as far as their `bin`.
    let policy = start("/home/u/.cargo/bin/my-server", &[], &[]);
    let g = granted(&policy);
    for read in ["/home/u/.cargo/bin", "/home/u/go/bin", "/home/u/.local/bin", "/opt/tools"] {
        assert!(g.contains(&(read.to_owned(), false)), "{read}: {g:?}");
    }
    assert!(!g.iter().any(|(p, _)| p == "/home/u/.cargo" || p == "/home/u/.local"), "{g:?}");
    assert!(policy.protected.contains(&PathBuf::from("/home/u/.cargo/credentials")));
}

#[test]
fn uv_with_a_directory_and_a_homebrew_program_work_without_entries() {
    let mut c = ctx("/home/u", "/home/u");
    c.cwd_configured = false;
    c.program = vec![PathBuf::from("/home/u/.local/bin/uv")];
    // The MCP quickstart's form: `uv --directory /ABSOLUTE/PATH run weather.py`; uv keeps the
    // project's environment in it.
    for args in
        [&["--directory", "/home/u/weather", "run", "weather.py"][..], &["run", "--project=/home/u/weather", "x"]]
    {
        c.args = args.iter().map(std::ffi::OsString::from).collect();
        let policy = Sandbox::standard().policy(&c).unwrap();
        assert!(policy.allows(Path::new("/home/u/weather/.venv/bin/python"), true), "{args:?}");
    }
    // Never a directory the sandbox cannot grant.
    c.args = ["--directory", "/home/u", "run", "x.py"].iter().map(std::ffi::OsString::from).collect();
    assert!(!Sandbox::standard().policy(&c).unwrap().allows(Path::new("/home/u/.bashrc"), true));

    let mut c = ctx("/home/u", "/home/u/project");
    c.program = vec![PathBuf::from("/home/linuxbrew/.linuxbrew/bin/node")];
    let policy = Sandbox::standard().policy(&c).unwrap();
    assert!(policy.allows(Path::new("/home/linuxbrew/.linuxbrew/opt/icu4c/lib/libicu.so"), false));
}

/// A grant a link leads into a protected path, or over one (the home), is left out; one
/// written inside a protected path (listed by the user), and links elsewhere, stand.
#[test]
fn a_grant_led_by_a_link_onto_protected_ground_is_left_out() {
    let protected = [
        PathBuf::from("/home/u/.ssh"),
        PathBuf::from("/home/u/dotfiles/ssh"),
        PathBuf::from("/home/u/.local/share/mcp-harness"),
    ];
    let led =
        |written: &str, resolved: &str| redirected_onto_protected(Path::new(written), Path::new(resolved), &protected);
    // Planted by a server in its own folders.
    assert!(led("/home/u/proj/data.json", "/home/u/.ssh/id_rsa"));
    assert!(led("/home/u/proj/sub", "/home/u/.ssh"));
    assert!(led("/home/u/proj/sub", "/home/u"), "the home holds protected paths");
    assert!(led("/home/u/proj/node_modules", "/home/u/.local/share/mcp-harness"));
    // Not led anywhere, or led somewhere harmless.
    assert!(!led("/home/u/proj", "/home/u/proj"));
    assert!(!led("/lib/x", "/usr/lib/x"));
    assert!(!led("/home/u/proj/node_modules", "/home/u/.local/share/pnpm/store"));
    // The user listed a path inside a protected one, whose folder is itself a link.
    assert!(!led("/home/u/.ssh/config", "/home/u/dotfiles/ssh/config"));
}

/// A program (or a PATH folder) in the shared temporary folder brings itself, not the whole
/// folder every user writes into; one in a folder of its own there brings that folder.
#[test]
fn a_program_in_the_shared_temp_folder_does_not_open_it() {
    let mut c = ctx("/home/u", "/home/u/project");
    c.program = vec![PathBuf::from("/tmp/server"), PathBuf::from("/tmp/venv/bin/python")];
    c.env.push((OsString::from("PATH"), OsString::from("/tmp:/var/tmp:/dev/shm:/usr/bin")));
    let policy = Sandbox::standard().policy(&c).unwrap();
    let g = granted(&policy);
    assert!(!g.iter().any(|(p, _)| p == "/tmp" || p == "/var/tmp" || p == "/dev/shm"), "{g:?}");
    assert!(g.contains(&("/tmp/server".to_owned(), false)), "{g:?}");
    assert!(g.contains(&("/tmp/venv".to_owned(), false)), "{g:?}");
    assert!(!policy.allows(Path::new("/tmp/other-users-file"), false));
}
