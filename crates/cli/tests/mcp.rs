//! End-to-end tests of `mcp-harness mcp ...` on the real binary: adding, listing, showing,
//! enabling, disabling and removing servers, importing them from other hosts' files, and edits
//! that leave the rest of a commented file byte for byte as it was; plus the configuration's
//! messages, completions, the manual page and `help config`.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

struct Env {
    /// Where the configuration and other hosts' files are (never the working directory).
    dir: TempDir,
    /// The working directory (the workspace an agent could write to).
    work: TempDir,
    /// HOME and the XDG directories.
    home: TempDir,
}

fn env() -> Env {
    Env { dir: tempfile::tempdir().unwrap(), work: tempfile::tempdir().unwrap(), home: tempfile::tempdir().unwrap() }
}

impl Env {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The binary, with no configuration of the user's own in sight.
    fn bare(&self) -> Command {
        let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("mcp-harness");
        cmd.current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            .env_remove("CODEX_HOME")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join(".config"))
            .env("XDG_DATA_HOME", self.home.path().join(".local/share"))
            .env("RUST_LOG", "error")
            .timeout(Duration::from_secs(30));
        cmd
    }

    /// The binary with `--config config.toml` in `dir`.
    fn cmd(&self) -> Command {
        let mut cmd = self.bare();
        cmd.arg("--config").arg(self.path("config.toml"));
        cmd
    }

    fn mcp(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        self.cmd().arg("mcp").args(args).assert()
    }

    fn config(&self) -> String {
        std::fs::read_to_string(self.path("config.toml")).unwrap()
    }

    fn list_json(&self) -> Value {
        json_of(&self.mcp(&["list", "--json"]).success().get_output().stdout)
    }
}

fn json_of(output: &[u8]) -> Value {
    serde_json::from_slice(output).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(output)))
}

fn names(list: &Value) -> Vec<String> {
    list["servers"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_owned()).collect()
}

fn stdout_of(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stdout.clone()).unwrap()
}

#[test]
fn add_list_get_disable_enable_remove_end_to_end() {
    let env = env();
    let config = env.path("config.toml");
    // A stdio server: the file is created, private.
    env.mcp(&[
        "add",
        "git",
        "--env",
        "GIT_PAGER=cat",
        "--env",
        "GITHUB_TOKEN=ghp_secret",
        "--cwd",
        "/srv/repo",
        "--",
        "uvx",
        "mcp-server-git",
        "--repository",
        ".",
    ])
    .success()
    .stdout(predicate::str::contains("added stdio server \"git\""));
    assert_eq!(std::fs::metadata(&config).unwrap().permissions().mode() & 0o777, 0o600);
    // A remote one.
    env.mcp(&[
        "add",
        "docs",
        "https://docs.example/mcp",
        "--header",
        "X-Team=core",
        "--bearer-token-env-var",
        "DOCS_TOKEN",
    ])
    .success()
    .stdout(predicate::str::contains("added http server \"docs\""));
    env.mcp(&["add", "legacy", "https://legacy.example/sse", "--transport", "sse"]).success();
    // From JSON in any host's shape.
    env.mcp(&[
        "add-json",
        "time",
        r#"{"type": "stdio", "command": "uvx", "args": ["mcp-server-time"], "autoApprove": ["now"]}"#,
    ])
    .success()
    .stderr(predicate::str::contains("`autoApprove`"));

    let text = env.config();
    assert!(
        text.contains("[servers.git]") && text.contains("[servers.docs]") && text.contains("[servers.time]"),
        "{text}"
    );
    assert!(text.contains("bearer_token_env_var = \"DOCS_TOKEN\""), "{text}");
    assert!(text.contains("type = \"sse\""), "{text}");

    // The table and the JSON.
    let table = stdout_of(&env.mcp(&["list"]).success());
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAME") && lines[0].contains("TRANSPORT") && lines[0].contains("ENABLED"), "{table}");
    let row = |name: &str| lines.iter().find(|l| l.starts_with(name)).unwrap().split_whitespace().collect::<Vec<_>>();
    assert_eq!(&row("docs")[..4], ["docs", "http", "yes", "https://docs.example/mcp"]);
    assert_eq!(&row("git")[..4], ["git", "stdio", "yes", "uvx"]);
    assert_eq!(&row("legacy")[..3], ["legacy", "sse", "yes"]);
    let list = env.list_json();
    assert_eq!(names(&list), ["docs", "git", "legacy", "time"]);
    assert_eq!(list["format"], "mcp-harness TOML");

    // One server; a secret-looking literal is hidden, the reference of a header is shown.
    let git = json_of(&env.mcp(&["get", "git", "--json"]).success().get_output().stdout);
    assert_eq!(git["command"], "uvx");
    assert_eq!(git["args"], serde_json::json!(["mcp-server-git", "--repository", "."]));
    assert_eq!(git["env"]["GIT_PAGER"], "cat");
    assert_eq!(git["env"]["GITHUB_TOKEN"], "<hidden>");
    assert_eq!(git["cwd"], "/srv/repo");
    let shown = stdout_of(&env.mcp(&["get", "git"]).success());
    assert!(shown.contains("command: uvx") && !shown.contains("ghp_secret"), "{shown}");

    // Disable and enable.
    env.mcp(&["disable", "git"]).success().stdout("server \"git\" disabled\n");
    assert_eq!(env.list_json()["servers"][1]["enabled"], false);
    env.mcp(&["disable", "git"]).success().stdout("server \"git\" was already disabled\n");
    env.mcp(&["enable", "git"]).success().stdout("server \"git\" enabled\n");
    assert_eq!(env.list_json()["servers"][1]["enabled"], true);

    // Remove, and the mistakes.
    env.mcp(&["remove", "legacy"]).success().stdout(predicate::str::contains("removed server \"legacy\""));
    assert_eq!(names(&env.list_json()), ["docs", "git", "time"]);
    env.mcp(&["remove", "legacy"]).code(2).stderr(predicate::str::contains("no server named \"legacy\""));
    env.mcp(&["get", "nope"]).code(2).stderr(predicate::str::contains("configured: docs, git, time"));
    env.mcp(&["add", "git", "--", "other"]).code(2).stderr(predicate::str::contains("already configured"));
    env.mcp(&["add", "bad", "https://x.example/mcp", "--env", "A=b"])
        .code(2)
        .stderr(predicate::str::contains("--env and --cwd apply to stdio servers"));
    env.mcp(&["add", "bad", "--header", "A=b", "--", "cmd"])
        .code(2)
        .stderr(predicate::str::contains("apply to remote servers"));
    env.mcp(&["add-json", "bad", "[1]"]).code(2).stderr(predicate::str::contains("must be a JSON object"));
    // What was refused left the file as it was.
    assert!(!env.config().contains("[servers.bad]"));
}

const COMMENTED: &str = r#"# My servers. Keep this comment.

[servers.git]   # the repository server
command = "uvx"
args = [ "mcp-server-git",   "--repository", "." ]   # odd spacing stays
enabled = true   # flip me

# Documentation, remote.
[servers.docs]
url = "https://docs.example/mcp"

[policy]
default = "confirm"

[[policy.rules]]
server = "git"
tool   = "git_status"
decision = "allow"
"#;

#[test]
fn edits_leave_the_rest_of_a_commented_file_byte_for_byte() {
    let env = env();
    let config = env.write("config.toml", COMMENTED);
    // Held open, the original's inode cannot be reused by a later file.
    let _original = std::fs::File::open(&config).unwrap();
    let inode = std::fs::metadata(&config).unwrap().ino();

    // Only the value changes; its comment and spacing stay.
    env.mcp(&["disable", "git"]).success();
    assert_eq!(env.config(), COMMENTED.replace("enabled = true   # flip me", "enabled = false   # flip me"));
    env.mcp(&["enable", "git"]).success();
    assert_eq!(env.config(), COMMENTED);

    // A new server is appended; everything before it is as it was.
    env.mcp(&["add", "time", "--", "uvx", "mcp-server-time"]).success();
    let docs = "url = \"https://docs.example/mcp\"\n";
    let added = "\n[servers.time]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\"]\n";
    assert_eq!(env.config(), COMMENTED.replace(docs, &format!("{docs}{added}")), "after the other servers");

    // Removing it gives the file back.
    env.mcp(&["remove", "time"]).success();
    assert_eq!(env.config(), COMMENTED);

    // Removing one in the middle takes out its table only.
    env.mcp(&["remove", "docs"]).success();
    assert_eq!(
        env.config(),
        COMMENTED.replace("# Documentation, remote.\n[servers.docs]\nurl = \"https://docs.example/mcp\"\n\n", "")
    );

    // Written by rename (a new file in place, never half a file), with no temporary left.
    assert_ne!(std::fs::metadata(&config).unwrap().ino(), inode, "replaced by a rename");
    let leftovers: Vec<_> = std::fs::read_dir(env.dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, [std::ffi::OsString::from("config.toml")]);
}

#[test]
fn edits_are_never_written_into_the_workspace_nor_into_json() {
    let env = env();
    // A configuration inside the working directory: refused, not created.
    let inside = env.work.path().join("config.toml");
    env.bare().arg("--config").arg(&inside).args(["mcp", "add", "x", "--", "cmd"]).assert().code(2).stderr(
        predicate::str::contains("refusing to write the configuration").and(predicate::str::contains("an agent")),
    );
    assert!(!inside.exists());
    // Not through a symlink from outside either.
    let link = env.path("link.toml");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    env.bare().arg("--config").arg(&link).args(["mcp", "add", "x", "--", "cmd"]).assert().code(2);
    assert!(!inside.exists());
    // A link to a file outside is edited where it points, and stays a link.
    let real = env.write("dotfiles/mcp.toml", "# kept in my dotfiles\n");
    let linked = env.path("linked.toml");
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    env.bare().arg("--config").arg(&linked).args(["mcp", "add", "x", "--", "cmd"]).assert().success();
    assert!(std::fs::symlink_metadata(&linked).unwrap().file_type().is_symlink());
    let text = std::fs::read_to_string(&real).unwrap();
    assert!(text.starts_with("# kept in my dotfiles\n") && text.contains("[servers.x]\ncommand = \"cmd\"\n"), "{text}");
    // Another host's file is never rewritten.
    let json = env.write("claude_desktop_config.json", r#"{"mcpServers": {}}"#);
    env.bare()
        .arg("--config")
        .arg(&json)
        .args(["mcp", "add", "x", "--", "cmd"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("never rewrites"));
    assert_eq!(std::fs::read_to_string(&json).unwrap(), r#"{"mcpServers": {}}"#);
}

/// A file with CRLF line endings and a byte order mark keeps both, and a file shared with
/// another account (0640) keeps its mode: "byte for byte" holds for them too.
#[test]
fn edits_keep_line_endings_byte_order_mark_and_mode() {
    let env = env();
    let crlf = format!("\u{feff}{}", COMMENTED.replace('\n', "\r\n"));
    let config = env.write("config.toml", &crlf);
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o640)).unwrap();
    env.mcp(&["disable", "git"]).success();
    let expected = crlf.replace("enabled = true   # flip me", "enabled = false   # flip me");
    assert_eq!(env.config(), expected);
    assert_eq!(std::fs::metadata(&config).unwrap().permissions().mode() & 0o777, 0o640);
    env.mcp(&["enable", "git"]).success();
    assert_eq!(env.config(), crlf);
    // A new file is private.
    env.bare()
        .arg("--config")
        .arg(env.path("new/config.toml"))
        .args(["mcp", "add", "x", "--", "cmd"])
        .assert()
        .success();
    assert_eq!(std::fs::metadata(env.path("new/config.toml")).unwrap().permissions().mode() & 0o777, 0o600);
}

/// Edits made at the same moment are made one after the other: none is lost (each read the
/// file, then renamed its own version over it, and only the last survived).
#[test]
fn edits_made_at_once_all_land() {
    let env = env();
    env.write("config.toml", COMMENTED);
    let children: Vec<_> = (0..10)
        .map(|i| {
            let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin!("mcp-harness"));
            cmd.current_dir(env.work.path())
                .env("HOME", env.home.path())
                .env("XDG_CONFIG_HOME", env.home.path().join(".config"))
                .arg("--config")
                .arg(env.path("config.toml"))
                .args(["mcp", "add", &format!("s{i}"), "--", "echo", &i.to_string()])
                .stdout(std::process::Stdio::null());
            cmd.spawn().unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let names = names(&env.list_json());
    for i in 0..10 {
        assert!(names.contains(&format!("s{i}")), "s{i} was lost: {names:?}");
    }
}

/// A configuration that is a pipe, a device or a directory (`ln -s /dev/null config.toml` turns
/// one off) is refused at once: never read (a pipe would hold the command, deaf to Ctrl-C,
/// until something wrote to it) and never replaced by an edit (which renamed a file over
/// `/dev/null`). A pipe stands in for the device here.
#[test]
fn a_pipe_device_or_directory_is_neither_read_nor_replaced() {
    let env = env();
    let fifo = env.path("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let link = env.path("config.toml");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    for args in [&["mcp", "add", "x", "--", "cmd"][..], &["mcp", "list"], &["tools"]] {
        let started = std::time::Instant::now();
        env.cmd().args(args).assert().code(2).stderr(predicate::str::contains("not a regular file"));
        assert!(started.elapsed() < Duration::from_secs(10), "{args:?} waited on the pipe");
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "the pipe is still a pipe");
    let dir = env.path("dir.toml");
    std::fs::create_dir(&dir).unwrap();
    env.bare()
        .arg("--config")
        .arg(&dir)
        .args(["mcp", "add", "x", "--", "cmd"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("it is a directory; a configuration is a file"));
    env.bare()
        .arg("--config")
        .arg(&dir)
        .arg("servers")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("it is a directory").and(predicate::str::contains("Is a directory").not()));
}

#[test]
fn the_default_configuration_is_trusted_when_run_from_the_home_directory() {
    let env = env();
    // The first `mcp add`, from the home directory, before the configuration directory exists.
    let mut cmd = env.bare();
    cmd.current_dir(env.home.path()).args(["mcp", "add", "first", "--", "uvx", "x"]).assert().success();
    let created = env.home.path().join(".config/mcp-harness/config.toml");
    assert!(std::fs::read_to_string(&created).unwrap().contains("[servers.first]"));
    std::fs::remove_dir_all(env.home.path().join(".config")).unwrap();

    let dir = env.home.path().join(".config/mcp-harness");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), "[servers.time]\ncommand = \"uvx\"\n").unwrap();
    // From HOME, the configuration directory is inside the current directory, and trusted.
    let mut cmd = env.bare();
    cmd.current_dir(env.home.path()).args(["mcp", "list"]).assert().success().stdout(predicate::str::contains("time"));
    let mut cmd = env.bare();
    cmd.current_dir(env.home.path()).args(["mcp", "add", "git", "--", "uvx", "mcp-server-git"]).assert().success();
    assert!(std::fs::read_to_string(dir.join("config.toml")).unwrap().contains("[servers.git]"));
    // A configuration elsewhere in the home directory is not.
    std::fs::write(env.home.path().join("other.toml"), "").unwrap();
    let mut cmd = env.bare();
    cmd.current_dir(env.home.path())
        .args(["--config", "other.toml", "mcp", "list"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("refusing to use the configuration"));
}

#[test]
fn a_missing_configuration_says_which_path_was_tried_and_why() {
    let env = env();
    let missing = env.path("nope.toml");
    env.bare().arg("--config").arg(&missing).arg("servers").assert().code(2).stderr(
        predicate::str::contains(format!("no configuration file at {}", missing.display()))
            .and(predicate::str::contains("the path given with --config")),
    );
    env.bare()
        .env("MCP_HARNESS_CONFIG", &missing)
        .arg("servers")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the path in MCP_HARNESS_CONFIG"));
    env.bare().arg("servers").assert().code(2).stderr(
        predicate::str::contains("(the default location)").and(predicate::str::contains("mcp-harness mcp add")),
    );
}

const CLAUDE_DESKTOP: &str = r#"{
  "globalShortcut": "",
  "mcpServers": {
    "filesystem": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/Desktop"], "autoApprove": [] },
    "sentry": { "type": "http", "url": "https://mcp.sentry.dev/mcp", "headers": { "Authorization": "Bearer ${SENTRY_TOKEN}" } }
  }
}
"#;

const VSCODE: &str = r#"{
  "inputs": [{ "type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true }],
  "servers": {
    "perplexity": { "type": "stdio", "command": "npx", "args": ["-y", "server-perplexity-ask"], "env": { "PERPLEXITY_API_KEY": "${input:perplexity-key}" } }
  }
}
"#;

const CODEX: &str = r#"model = "o3"

[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "${literal}"]
startup_timeout_ms = 2500
enabled_tools = ["search"]
"#;

#[test]
fn import_then_list_then_remove_round_trip() {
    let env = env();
    let claude = env.write("Claude/claude_desktop_config.json", CLAUDE_DESKTOP);

    // What it would add, then added.
    let out = env.mcp(&["import", "--from", "claude-desktop", claude.to_str().unwrap()]).success();
    let text = stdout_of(&out);
    assert!(text.contains("(Claude Desktop JSON)"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("filesystem") && l.contains(" add ")), "{text}");
    assert!(text.contains("added 2, replaced 0"), "{text}");
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert_eq!(stderr.matches("`autoApprove`").count(), 1, "one warning: {stderr}");
    assert!(stderr.contains(&claude.display().to_string()), "names the file: {stderr}");

    // References are written as references, never their values.
    let config = env.config();
    assert!(config.contains("\"${HOME}/Desktop\"") && config.contains("Bearer ${SENTRY_TOKEN}"), "{config}");
    assert_eq!(names(&env.list_json()), ["filesystem", "sentry"]);

    // Again: nothing changes.
    let before = env.config();
    let text = stdout_of(&env.mcp(&["import", "--from", "claude-desktop", claude.to_str().unwrap()]).success());
    assert!(text.lines().any(|l| l.starts_with("sentry") && l.contains("unchanged")), "{text}");
    assert_eq!(env.config(), before);

    // A changed server is replaced only when asked (no terminal here: kept), or with --yes.
    let changed =
        env.write("Claude/claude_desktop_config.json", &CLAUDE_DESKTOP.replace("mcp.sentry.dev", "sentry.example"));
    env.mcp(&["import", "--from", "claude-desktop", changed.to_str().unwrap()])
        .success()
        .stderr(predicate::str::contains("kept your own \"sentry\""));
    assert!(env.config().contains("mcp.sentry.dev"));
    env.mcp(&["import", "--from", "claude-desktop", "--yes", changed.to_str().unwrap()])
        .success()
        .stdout(predicate::str::contains("added 0, replaced 1"));
    assert!(env.config().contains("sentry.example"));

    // VS Code: an input becomes a variable to set, named in a note.
    let vscode = env.write("Code/User/mcp.json", VSCODE);
    env.mcp(&["import", "--from", "vscode", vscode.to_str().unwrap()])
        .success()
        .stderr(predicate::str::contains("PERPLEXITY_KEY"));
    assert!(env.config().contains("PERPLEXITY_API_KEY = \"${PERPLEXITY_KEY}\""), "{}", env.config());

    // Codex: its literal text is escaped; its keys become ours.
    let codex = env.write("codex/config.toml", CODEX);
    env.mcp(&["import", "--from", "codex", codex.to_str().unwrap()]).success();
    let docs = json_of(&env.mcp(&["get", "docs", "--json"]).success().get_output().stdout);
    assert_eq!(docs["args"], serde_json::json!(["--port", "$${literal}"]));
    assert_eq!(docs["startup_timeout_s"], 2.5);
    assert_eq!(docs["enabled_tools"], serde_json::json!(["search"]));

    // And back out.
    assert_eq!(names(&env.list_json()), ["docs", "filesystem", "perplexity", "sentry"]);
    for name in ["docs", "filesystem", "perplexity", "sentry"] {
        env.mcp(&["remove", name]).success();
    }
    assert_eq!(names(&env.list_json()), Vec::<String>::new());
    env.mcp(&["list"]).success().stdout(predicate::str::contains("no servers are configured"));
}

#[test]
fn import_reads_each_host_from_its_usual_place() {
    let env = env();
    let home = env.home.path();
    let at = |rel: &str, text: &str| {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    at(".config/Claude/claude_desktop_config.json", r#"{"mcpServers": {"from-desktop": {"command": "a"}}}"#);
    at(".claude.json", r#"{"mcpServers": {"from-code": {"command": "b"}}}"#);
    at(".cursor/mcp.json", r#"{"mcpServers": {"from-cursor": {"url": "https://c.example/mcp"}}}"#);
    at(".config/Code/User/mcp.json", r#"{"servers": {"from-vscode": {"command": "d"}}}"#);
    at(".codex/config.toml", "[mcp_servers.from-codex]\ncommand = \"e\"\n");
    for from in ["claude-desktop", "claude-code", "cursor", "vscode", "codex"] {
        env.mcp(&["import", "--from", from]).success().stdout(predicate::str::contains("added 1"));
    }
    assert_eq!(names(&env.list_json()), ["from-code", "from-codex", "from-cursor", "from-desktop", "from-vscode"]);
    // Not there: the message says where it looked and how to pass a path.
    std::fs::remove_file(home.join(".codex/config.toml")).unwrap();
    env.mcp(&["import", "--from", "codex"])
        .code(2)
        .stderr(predicate::str::contains(".codex/config.toml").and(predicate::str::contains("--from codex PATH")));
}

#[test]
fn listings_of_other_hosts_files_warn_once_and_variables_are_checked_when_used() {
    let env = env();
    let claude = env.write("claude_desktop_config.json", CLAUDE_DESKTOP);
    // Listing shows the file as written: no variable needs to be set.
    let out = env
        .bare()
        .arg("--config")
        .arg(&claude)
        .args(["mcp", "list", "--json"])
        .env_remove("SENTRY_TOKEN")
        .assert()
        .success();
    let list = json_of(&out.get_output().stdout);
    assert_eq!(list["format"], "Claude Desktop JSON");
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("warning: ")
            && stderr.contains("`autoApprove`")
            && stderr.contains("claude_desktop_config.json"),
        "{stderr}"
    );
    // Using it needs the variable, and says which.
    env.bare().arg("--config").arg(&claude).env_remove("SENTRY_TOKEN").arg("servers").assert().code(2).stderr(
        predicate::str::contains("mcpServers.sentry.headers.Authorization")
            .and(predicate::str::contains("`SENTRY_TOKEN` is not set")),
    );
    // VS Code inputs need a terminal.
    let vscode = env.write("mcp.json", VSCODE);
    env.bare()
        .arg("--config")
        .arg(&vscode)
        .arg("servers")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("\"perplexity-key\"").and(predicate::str::contains("no terminal to ask on")));
}

#[test]
fn help_completions_and_the_manual_come_from_the_same_definitions() {
    let env = env();
    let help = stdout_of(&env.bare().arg("--help").assert().success());
    assert!(help.contains("EXIT CODES") && help.contains("help config"), "{help}");
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout_of(&env.bare().args(["completions", shell]).assert().success());
        assert!(
            script.contains("mcp-harness") && script.contains("import") && script.contains("add-json"),
            "{shell}: {script}"
        );
    }
    let man = stdout_of(&env.bare().arg("man").assert().success());
    assert!(man.starts_with(".ie") || man.contains(".TH mcp-harness"), "{}", &man[..man.len().min(200)]);
    assert!(man.contains("EXIT CODES"), "the manual has the exit codes");
    let reference = stdout_of(&env.bare().args(["help", "config"]).assert().success());
    assert_eq!(
        reference,
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md")).unwrap()
    );
    let add = stdout_of(&env.bare().args(["help", "mcp", "add"]).assert().success());
    assert!(add.contains("--bearer-token-env-var"), "{add}");
    env.bare().args(["help", "nope"]).assert().code(2).stderr(predicate::str::contains("no command"));
}

/// A source given by a relative path: its servers' relative `cwd` and `envFile` are taken
/// from its folder and written absolute (kept relative to a relative folder, they were read
/// from the configuration's folder, and the configuration no longer loaded).
#[test]
fn an_import_from_a_relative_path_writes_absolute_paths() {
    let env = env();
    // Run from a project folder holding the source (neither the workspace nor the configuration's).
    let project = env.home.path().join("proj");
    let folder = project.join(".cursor");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("mcp.json"),
        r#"{"mcpServers": {"srv": {"command": "true", "cwd": "tools/srv", "envFile": ".env"}}}"#,
    )
    .unwrap();
    std::fs::write(folder.join(".env"), "A=1\n").unwrap();
    env.cmd().current_dir(&project).args(["mcp", "import", "--from", "cursor", ".cursor/mcp.json"]).assert().success();
    let srv = json_of(&env.mcp(&["get", "srv", "--json"]).success().get_output().stdout);
    for (key, rel) in [("env_file", ".env"), ("cwd", "tools/srv")] {
        let written = PathBuf::from(srv[key].as_str().unwrap_or_else(|| panic!("{key}: {srv}")));
        assert_eq!(written, folder.join(rel), "{key}: {srv}");
    }
    env.cmd().arg("servers").assert().success();
}
