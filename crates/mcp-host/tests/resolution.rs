//! Resolution: the same servers written in every supported format (ours, our JSON, Claude
//! Desktop, Claude Code, Cursor, VS Code, Codex) become the same specs, whole values compared.

// Helpers outside #[test] functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use mcp_host::config::{self, Config, Context, Target};
use mcp_host::{Ports, client_spec};

const OURS: &str = r#"
[servers.files]
command = "npx"
args = ["-y", "server-filesystem", "/srv/data"]
env = { LOG_LEVEL = "${LOG_LEVEL}" }

[servers.docs]
url = "https://docs.example/mcp"
headers = { X-Client = "harness" }
"#;

const MCP_SERVERS: &str = r#"{
  "mcpServers": {
    "files": {"command": "npx", "args": ["-y", "server-filesystem", "/srv/data"], "env": {"LOG_LEVEL": "${LOG_LEVEL}"}},
    "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"X-Client": "harness"}}
  }
}"#;

const CURSOR: &str = r#"{
  "mcpServers": {
    "files": {"command": "npx", "args": ["-y", "server-filesystem", "/srv/data"], "env": {"LOG_LEVEL": "${env:LOG_LEVEL}"}},
    "docs": {"url": "https://docs.example/mcp", "headers": {"X-Client": "harness"}}
  }
}"#;

const VSCODE: &str = r#"{
  // VS Code allows comments and trailing commas.
  "servers": {
    "files": {"type": "stdio", "command": "npx", "args": ["-y", "server-filesystem", "/srv/data"], "env": {"LOG_LEVEL": "${env:LOG_LEVEL}"}},
    "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"X-Client": "harness"}},
  }
}"#;

const CODEX: &str = r#"
[mcp_servers.files]
command = "npx"
args = ["-y", "server-filesystem", "/srv/data"]
env_vars = ["LOG_LEVEL"]

[mcp_servers.docs]
url = "https://docs.example/mcp"
http_headers = { X-Client = "harness" }
"#;

/// Every format, as (its file name under a fresh directory, its text).
const FORMATS: &[(&str, &str)] = &[
    ("config.toml", OURS),
    ("config.json", MCP_SERVERS),
    ("claude_desktop_config.json", MCP_SERVERS),
    (".mcp.json", MCP_SERVERS),
    (".cursor/mcp.json", CURSOR),
    (".vscode/mcp.json", VSCODE),
    ("codex/config.toml", CODEX),
];

fn read(dir: &Path, name: &str, text: &str) -> (PathBuf, Config) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    let mut context = Context::process();
    context.env = Box::new(|name| (name == "LOG_LEVEL").then(|| "info".to_owned()));
    let config = config::parse(&path, text, &context).unwrap_or_else(|e| panic!("{name}: {e}"));
    (path, config)
}

/// Every spec of `config` as it prints, the configuration's own path (which the sandbox keeps
/// from its servers) written as `<file>`.
fn specs(config: &Config, file: &Path) -> Vec<String> {
    let ports = Ports::default();
    config
        .servers
        .iter()
        .map(|server| {
            format!("{:#?}", client_spec(config, server, &ports)).replace(&file.display().to_string(), "<file>")
        })
        .collect()
}

#[test]
fn every_format_resolves_to_the_same_specs() {
    let dir = tempfile::tempdir().unwrap();
    let (ours_path, ours) = read(dir.path(), FORMATS[0].0, FORMATS[0].1);
    let expected = specs(&ours, &ours_path);
    assert_eq!(expected.len(), 2);
    for (name, text) in &FORMATS[1..] {
        let (path, config) = read(dir.path(), name, text);
        assert_eq!(config.warnings, Vec::<String>::new(), "{name}");
        assert_eq!(specs(&config, &path), expected, "{name} resolves as our TOML does");
    }
    // What they all resolve to, value by value.
    let docs = ours.server("docs").unwrap();
    let Target::Remote(remote) = &docs.target else { panic!("docs is remote") };
    assert_eq!(remote.url, "https://docs.example/mcp");
    assert_eq!(remote.headers.get("X-Client").map(String::as_str), Some("harness"));
    assert!(remote.oauth.is_some(), "an http server without credentials uses OAuth");
    assert!(expected[0].contains("authorizer: true"), "{}", expected[0]);
    let files = ours.server("files").unwrap();
    let Target::Stdio { config: stdio, sandbox } = &files.target else { panic!("files is stdio") };
    assert_eq!((stdio.command.as_str(), stdio.args.len()), ("npx", 3));
    assert_eq!(stdio.env.get("LOG_LEVEL").map(String::as_str), Some("info"), "the variable expanded");
    assert_eq!(sandbox, &config::SandboxSetting::default(), "standard by default");
    assert!(expected[1].contains(r#""server-filesystem""#), "{}", expected[1]);
}

/// A server built in code resolves like the same server read from a file.
#[test]
fn a_configuration_built_in_code_resolves_like_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let (path, file) = read(dir.path(), "config.toml", OURS);
    let mut servers = file.servers.clone();
    for server in &mut servers {
        server.fingerprint.clear();
    }
    let mut built = Config::new(servers, file.policy.clone());
    built.file = Some(path.clone());
    assert_eq!(specs(&built, &path), specs(&file, &path));
    assert!(built.servers.iter().all(|s| !s.fingerprint.is_empty()), "fingerprints are made");
}
