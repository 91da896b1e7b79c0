//! The command line with a real third-party server, as a new user meets it: a fresh HOME (no
//! `~/.npm`, no caches), the command run from that home directory, and an `npx` server under
//! the default `standard` sandbox with no entry for it. `servers` connects it (in a private
//! working directory, since HOME cannot be granted), `call` gets its answer, and a key planted
//! in HOME stays unreadable: a probe that node loads into every process of the server
//! (`NODE_OPTIONS=--require`) tries to read it and writes what happened to a folder of its own
//! (the probe's two folders are the test's only entries).
//!
//! This downloads from npm (that is the point: a fresh user has no cache), so it is an interop
//! test, run by `cargo xtask test` (feature `interop`).

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// The server, at the version the transport's start-form tests pin.
const PACKAGE: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// How long a command may take: the first `npx` of a fresh user downloads.
const LIMIT: Duration = Duration::from_secs(300);

const PROBE: &str = r#"const fs = require("fs");
let seen;
try { fs.readFileSync(process.env.MCP_TEST_SECRET); seen = "READ"; } catch (e) { seen = String(e.code); }
fs.writeFileSync(require("path").join(process.env.MCP_TEST_PROBE_OUT, "probe-" + process.pid), seen);
"#;

/// `mcp-harness --config CONFIG ARGS` run from `home`, with HOME and the XDG folders there.
fn harness(home: &Path, config: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    assert_cmd::cargo::cargo_bin_cmd!("mcp-harness")
        .current_dir(home)
        .env_remove("MCP_HARNESS_CONFIG")
        .env_remove("MCP_HARNESS_DATA_DIR")
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("RUST_LOG", "error")
        .env("NO_COLOR", "1")
        .arg("--config")
        .arg(config)
        .args(args)
        .timeout(LIMIT)
        .assert()
}

#[test]
fn an_npx_server_from_a_fresh_home_connects_confined_and_answers_and_the_home_key_stays_unreadable() {
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("home");
    let secret = home.join(".ssh/id_ed25519");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "-----BEGIN OPENSSH PRIVATE KEY----- planted").unwrap();
    let probes = base.path().join("probes");
    let out = base.path().join("probe-out");
    std::fs::create_dir_all(&probes).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(probes.join("probe.cjs"), PROBE).unwrap();

    let mut env = vec![
        ("NODE_OPTIONS".to_owned(), format!("--require={}", probes.join("probe.cjs").display())),
        ("MCP_TEST_SECRET".to_owned(), secret.display().to_string()),
        ("MCP_TEST_PROBE_OUT".to_owned(), out.display().to_string()),
    ];
    env.extend(
        mcp_fixtures::REGISTRY_VARIABLES
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| ((*name).to_owned(), v))),
    );
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", Value::from(v.as_str()))).collect();
    let config = home.join(".config/mcp-harness/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "[servers.everything]\ncommand = \"npx\"\nargs = [\"-y\", {package}, \"stdio\"]\nstartup_timeout_s = 240\n\
             env = {{ {env} }}\nsandbox = {{ read = [{probes}], write = [{out}] }}\n\
             [policy]\ndefault = \"allow\"\n",
            package = Value::from(PACKAGE),
            env = env.join(", "),
            probes = Value::from(probes.display().to_string()),
            out = Value::from(out.display().to_string()),
        ),
    )
    .unwrap();

    let listed = harness(&home, &config, &["servers", "--json"]).success().get_output().stdout.clone();
    let listed: Value = serde_json::from_slice(&listed).unwrap();
    let server = &listed["servers"][0];
    assert_eq!(server["state"], "connected", "{listed}");
    assert_eq!(server["sandbox"], "confined", "{listed}");
    assert_eq!(server["working_dir"]["private"], true, "run from HOME, it works in a folder of its own: {listed}");

    let called = harness(&home, &config, &["call", "mcp__everything__echo", "--args", r#"{"message": "hi"}"#])
        .success()
        .get_output()
        .stdout
        .clone();
    let called = String::from_utf8(called).unwrap();
    assert!(called.contains("Echo: hi"), "{called}");

    // The cache a fresh user lacked was made, for the user alone.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(home.join(".npm")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    // The probe ran in the server's processes, and none of them could read the key.
    let reports: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect();
    assert!(!reports.is_empty(), "the probe did not run in the server");
    assert!(reports.iter().all(|r| r == "EACCES"), "the key was readable: {reports:?}");
}
