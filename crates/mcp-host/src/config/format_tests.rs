//! Every host's format, read from a realistic file as that host writes it: comments, keys we
//! don't use (one warning naming the file and the key), variables, and a missing variable (an
//! error naming it).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use super::{Config, ConfigError, Context, Input, ServerSettings, Target, parse};
use mcp_transport::StdioConfig;

/// A context with a fixed environment, home and current directory; inputs answered from
/// `answers` (recording what was asked), none of them when `answers` is `None` (no terminal).
fn context<'a>(
    env: &'a [(&'a str, &'a str)],
    answers: Option<&'a [(&'a str, &'a str)]>,
    asked: &'a RefCell<Vec<Input>>,
) -> Context<'a> {
    Context {
        env: Box::new(move |name| env.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())),
        home: Some(PathBuf::from("/home/ada")),
        cwd: Some(PathBuf::from("/work/proj")),
        workspace: None,
        ask: Box::new(move |input: &Input| {
            asked.borrow_mut().push(input.clone());
            match answers {
                Some(answers) => answers
                    .iter()
                    .find(|(id, _)| *id == input.id)
                    .map(|(_, a)| (*a).to_owned())
                    .ok_or_else(|| format!("no answer for {}", input.id)),
                None => Err(format!("needs input {:?}, and there is no terminal to ask on", input.id)),
            }
        }),
        check_only: false,
    }
}

/// Writes `text` as `name` (with its directories) in a fresh directory and reads it.
fn read(name: &str, text: &str, cx: &Context<'_>) -> (tempfile::TempDir, PathBuf, Result<Config, ConfigError>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    let result = parse(&path, text, cx);
    (dir, path, result)
}

fn server<'c>(config: &'c Config, name: &str) -> &'c ServerSettings {
    config.servers.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no server {name}"))
}

fn stdio<'c>(config: &'c Config, name: &str) -> &'c StdioConfig {
    match &server(config, name).target {
        Target::Stdio { config, .. } => config,
        _ => panic!("{name}: expected stdio"),
    }
}

fn remote<'c>(config: &'c Config, name: &str) -> (&'c str, &'c BTreeMap<String, String>) {
    match &server(config, name).target {
        Target::Remote(r) => (&r.url, &r.headers),
        _ => panic!("{name}: expected remote"),
    }
}

/// The one warning about `key`, which must name the file.
fn one_warning<'c>(config: &'c Config, path: &Path, key: &str) -> &'c str {
    let about: Vec<&String> = config.warnings.iter().filter(|w| w.contains(&format!("`{key}`"))).collect();
    assert_eq!(about.len(), 1, "one warning about {key}: {:#?}", config.warnings);
    assert!(about[0].contains(&path.display().to_string()), "{}", about[0]);
    about[0]
}

fn err_text(result: Result<Config, ConfigError>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

const CLAUDE_DESKTOP: &str = r#"{
  // Claude Desktop keeps its own settings beside the servers.
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${PROJECTS:-/home/ada/projects}"],
      "env": { "LOG_LEVEL": "${LOG_LEVEL:-info}" },
      "autoApprove": ["read_file"]
    },
    "github": {
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}" },
      "autoApprove": []
    }
  }
}
"#;

#[test]
fn claude_desktop_file_is_read_as_it_is() {
    let asked = RefCell::new(Vec::new());
    let cx = context(&[("GITHUB_TOKEN", "ghp_x")], None, &asked);
    let (_dir, path, result) = read("claude_desktop_config.json", CLAUDE_DESKTOP, &cx);
    let config = result.unwrap();
    let fs = stdio(&config, "filesystem");
    assert_eq!(fs.command, "npx");
    assert_eq!(fs.args[2], "/home/ada/projects", "the default of an unset variable");
    assert_eq!(fs.env["LOG_LEVEL"], "info");
    assert_eq!(stdio(&config, "github").env["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_x");
    // One warning for the key, naming both servers; nothing about Claude's own settings.
    let warning = one_warning(&config, &path, "autoApprove");
    assert!(warning.contains("\"filesystem\"") && warning.contains("\"github\""), "{warning}");
    assert!(warning.contains("[policy]"), "says what decides instead: {warning}");
    assert_eq!(config.warnings.len(), 1, "{:#?}", config.warnings);

    // A variable without a default that is not set: an error naming it and the key.
    let cx = context(&[], None, &asked);
    let message = err_text(read("claude_desktop_config.json", CLAUDE_DESKTOP, &cx).2);
    assert!(message.contains("`GITHUB_TOKEN` is not set"), "{message}");
    assert!(message.contains("mcpServers.github.env.GITHUB_PERSONAL_ACCESS_TOKEN"), "{message}");
}

const CLAUDE_CODE_PROJECT: &str = r#"{
  "mcpServers": {
    "sentry": {
      "type": "http",
      "url": "https://mcp.sentry.dev/mcp",
      "headers": { "Authorization": "Bearer ${SENTRY_TOKEN}" }
    },
    "legacy": { "type": "sse", "url": "${LEGACY_URL:-https://legacy.example/sse}", "headersHelper": "get-headers.sh" },
    "db": {
      "type": "stdio",
      "command": "${HOME_BIN}/db-mcp",
      "args": ["--dsn", "${DSN:-postgres://localhost/dev}"]
    }
  }
}
"#;

#[test]
fn claude_code_project_file_reads_every_transport_and_variable() {
    let asked = RefCell::new(Vec::new());
    let env = [("SENTRY_TOKEN", "sntrys_1"), ("HOME_BIN", "/opt/bin")];
    let cx = context(&env, None, &asked);
    let (_dir, path, result) = read(".mcp.json", CLAUDE_CODE_PROJECT, &cx);
    let config = result.unwrap();
    let (url, headers) = remote(&config, "sentry");
    assert_eq!(url, "https://mcp.sentry.dev/mcp");
    assert_eq!(headers["Authorization"], "Bearer sntrys_1");
    assert_eq!(remote(&config, "legacy").0, "https://legacy.example/sse");
    assert_eq!(
        server(&config, "legacy").remote_target().unwrap().options.http_mode,
        mcp_transport::HttpMode::LegacySse
    );
    let db = stdio(&config, "db");
    assert_eq!(db.command, "/opt/bin/db-mcp");
    assert_eq!(db.args, ["--dsn", "postgres://localhost/dev"]);
    assert!(one_warning(&config, &path, "headersHelper").contains("\"legacy\""));

    let cx = context(&[("HOME_BIN", "/opt/bin")], None, &asked);
    let message = err_text(read(".mcp.json", CLAUDE_CODE_PROJECT, &cx).2);
    assert!(
        message.contains("`SENTRY_TOKEN` is not set") && message.contains("mcpServers.sentry.headers"),
        "{message}"
    );
}

#[test]
fn claude_code_user_file_adds_the_current_projects_servers() {
    let text = r#"{
      "numStartups": 12,
      "mcpServers": { "time": { "command": "uvx", "args": ["mcp-server-time"] } },
      "projects": {
        "/work/proj": { "mcpServers": { "notes": { "command": "notes-mcp", "alwaysAllow": ["read"] } }, "allowedTools": [] },
        "/elsewhere": { "mcpServers": { "other": { "command": "other-mcp" } } }
      }
    }"#;
    let asked = RefCell::new(Vec::new());
    let cx = context(&[], None, &asked);
    let (_dir, path, result) = read(".claude.json", text, &cx);
    let config = result.unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["notes", "time"], "the current directory's project only");
    one_warning(&config, &path, "alwaysAllow");
}

const CURSOR: &str = r#"{
  // Cursor: ${env:NAME} and the editor's own variables.
  "mcpServers": {
    "linear": {
      "url": "https://mcp.linear.app/sse",
      "headers": { "Authorization": "Bearer ${env:LINEAR_KEY}" }
    },
    "local": {
      "command": "${userHome}/.local/bin/local-mcp",
      "args": ["--root", "${workspaceFolder}", "--name", "${workspaceFolderBasename}"],
      "env": { "KEY": "${env:LOCAL_KEY}" },
      "envFile": "${workspaceFolder}/.env.mcp",
      "disabled": false,
      "timeout": 30
    }
  },
}
"#;

#[test]
fn cursor_file_resolves_editor_variables_and_env_references() {
    let asked = RefCell::new(Vec::new());
    let env = [("LINEAR_KEY", "lin_1"), ("LOCAL_KEY", "k")];
    let cx = context(&env, None, &asked);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proj/.cursor/mcp.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(dir.path().join("proj/.env.mcp"), "# comment\nexport FROM_FILE='yes'\nKEY=from-file\n").unwrap();
    let config = parse(&path, CURSOR, &cx).unwrap();
    assert_eq!(remote(&config, "linear").1["Authorization"], "Bearer lin_1");
    let local = stdio(&config, "local");
    let folder = dir.path().join("proj");
    assert_eq!(local.command, "/home/ada/.local/bin/local-mcp");
    assert_eq!(local.args, ["--root", &folder.display().to_string(), "--name", "proj"]);
    assert_eq!(local.env["KEY"], "k", "`env` wins over the env file");
    assert_eq!(local.env["FROM_FILE"], "yes");
    one_warning(&config, &path, "timeout");

    let cx = context(&[("LOCAL_KEY", "k")], None, &asked);
    let message = err_text(parse(&path, CURSOR, &cx));
    assert!(message.contains("`LINEAR_KEY` is not set"), "{message}");

    // An env file inside the workspace is refused like a configuration there.
    let mut cx = context(&env, None, &asked);
    cx.workspace = Some(folder.clone());
    let message = err_text(parse(&path, CURSOR, &cx));
    assert!(message.contains("mcpServers.local.env_file") && message.contains("an agent working here"), "{message}");
}

const VSCODE: &str = r#"{
  // VS Code: servers, inputs asked when a server starts.
  "inputs": [
    { "type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true },
    { "type": "promptString", "id": "region", "description": "Region", "default": "eu" }
  ],
  "servers": {
    "perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": { "PERPLEXITY_API_KEY": "${input:perplexity-key}", "REGION": "${input:region}", "PORT": 8080, "UNSET": null },
      "dev": { "watch": "src/**/*.ts" }
    },
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/",
      "headers": { "X-Key": "${input:perplexity-key}", "X-User": "${env:USER_NAME}" },
      "gallery": true
    }
  },
}
"#;

#[test]
fn vscode_inputs_are_asked_once_each_and_hidden_when_passwords() {
    let asked = RefCell::new(Vec::new());
    let answers = [("perplexity-key", "pplx-1"), ("region", "us")];
    let cx = context(&[("USER_NAME", "ada")], Some(&answers), &asked);
    let (_dir, path, result) = read(".vscode/mcp.json", VSCODE, &cx);
    let config = result.unwrap();
    let env = &stdio(&config, "perplexity").env;
    assert_eq!(env["PERPLEXITY_API_KEY"], "pplx-1");
    assert_eq!(env["REGION"], "us");
    assert_eq!(env["PORT"], "8080", "numbers are their text");
    assert!(!env.contains_key("UNSET"), "null leaves the variable out");
    let headers = remote(&config, "github").1;
    assert_eq!((headers["X-Key"].as_str(), headers["X-User"].as_str()), ("pplx-1", "ada"));
    // Asked once each, however many servers use it; the key as a password.
    let asked = asked.borrow();
    let ids: Vec<&str> = asked.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let key = asked.iter().find(|i| i.id == "perplexity-key").unwrap();
    assert!(key.password && key.description == "Perplexity API Key");
    let region = asked.iter().find(|i| i.id == "region").unwrap();
    assert!(!region.password && region.default.as_deref() == Some("eu"));
    one_warning(&config, &path, "dev");
    one_warning(&config, &path, "gallery");
}

#[test]
fn vscode_inputs_without_a_terminal_are_an_error_naming_the_input() {
    let asked = RefCell::new(Vec::new());
    let cx = context(&[("USER_NAME", "ada")], None, &asked);
    let message = err_text(read(".vscode/mcp.json", VSCODE, &cx).2);
    assert!(message.contains("perplexity-key") && message.contains("no terminal"), "{message}");
}

const CODEX: &str = r#"# Codex's config.toml: its own settings, then the servers.
model = "gpt-5-codex"
approval_policy = "on-request"

[mcp_servers.docs]
command = "docs-mcp"
args = ["--root", "${NOT_A_REFERENCE}"]   # Codex expands nothing
env = { "LOG" = "debug" }
env_vars = ["DOCS_TOKEN", "NOT_SET_ANYWHERE"]
cwd = "/srv/docs"
startup_timeout_ms = 2500
tool_timeout_sec = 45
enabled_tools = ["search", "open"]
required = true

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
bearer_token_env_var = "FIGMA_TOKEN"
http_headers = { "X-Figma-Region" = "us-east-1" }
env_http_headers = { "X-Api-Key" = "FIGMA_KEY" }
startup_timeout_sec = 20
disabled_tools = ["delete_file"]
supports_parallel_tool_calls = true

[mcp_servers.off]
command = "off-mcp"
enabled = false
"#;

#[test]
fn codex_file_maps_every_key() {
    let asked = RefCell::new(Vec::new());
    let env = [("DOCS_TOKEN", "d0c"), ("FIGMA_KEY", "fk")];
    let cx = context(&env, None, &asked);
    let (_dir, path, result) = read("config.toml", CODEX, &cx);
    let config = result.unwrap();
    let docs = server(&config, "docs");
    let Target::Stdio { config: stdio, .. } = &docs.target else { panic!("stdio") };
    assert_eq!(stdio.args, ["--root", "${NOT_A_REFERENCE}"], "literal");
    assert_eq!(stdio.env.get("DOCS_TOKEN").map(String::as_str), Some("d0c"), "env_vars passed on when set");
    assert!(!stdio.env.contains_key("NOT_SET_ANYWHERE"));
    assert_eq!(stdio.cwd.as_deref(), Some(Path::new("/srv/docs")));
    assert_eq!(docs.startup_timeout, std::time::Duration::from_millis(2500));
    assert_eq!(docs.tool_timeout, std::time::Duration::from_secs(45));
    assert!(docs.required);
    let (url, headers) = remote(&config, "figma");
    assert_eq!(url, "https://mcp.figma.com/mcp");
    assert_eq!(headers["X-Figma-Region"], "us-east-1");
    assert_eq!(headers["X-Api-Key"], "fk", "env_http_headers read from the environment");
    assert_eq!(
        server(&config, "figma").remote_target().unwrap().options.bearer_token_env.as_deref(),
        Some("FIGMA_TOKEN")
    );
    assert!(!server(&config, "off").enabled);
    // The tool filters are policy: a tool not enabled is denied.
    let claims = policy::ServerClaims::default();
    assert_eq!(config.policy.decide(Some("docs"), "delete", &claims).decision, policy::Decision::Deny);
    assert_ne!(config.policy.decide(Some("docs"), "search", &claims).decision, policy::Decision::Deny);
    assert_eq!(config.policy.decide(Some("figma"), "delete_file", &claims).decision, policy::Decision::Deny);
    one_warning(&config, &path, "supports_parallel_tool_calls");
    assert!(!config.warnings.iter().any(|w| w.contains("model")), "Codex's own settings are its own");

    let cx = context(&[("DOCS_TOKEN", "d0c")], None, &asked);
    let message = err_text(read("config.toml", CODEX, &cx).2);
    assert!(message.contains("`FIGMA_KEY` is not set") && message.contains("mcp_servers.figma.headers"), "{message}");
}

#[test]
fn codex_keys_that_change_a_servers_safety_are_errors() {
    let asked = RefCell::new(Vec::new());
    let cx = context(&[], None, &asked);
    for (key, line, expected) in [
        ("bearer_token", "bearer_token = \"sk-live\"", "bearer_token_env_var"),
        ("default_tools_approval_mode", "default_tools_approval_mode = \"prompt\"", "policy.rules"),
    ] {
        let text = format!("[mcp_servers.x]\nurl = \"https://x.example/mcp\"\n{line}\n");
        let message = err_text(read("config.toml", &text, &cx).2);
        assert!(message.contains(&format!("mcp_servers.x.{key}")) && message.contains(expected), "{message}");
    }
}

const OURS: &str = r#"# mcp-harness: our own TOML, with variables and tool filters.
[servers.git]
command = "uvx"
args = ["mcp-server-git", "--repository", "${REPO:-/home/ada/src}"]
env = { GIT_PAGER = "cat", TOKEN = "${GIT_TOKEN}", LITERAL = "$${NOT_EXPANDED}" }
disabled_tools = ["git_push"]

[servers.docs]
url = "https://${DOCS_HOST}/mcp"
headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
enabled_tools = ["search"]

[servers.later]
command = "${NOT_SET_BUT_DISABLED}"
enabled = false
"#;

#[test]
fn our_toml_expands_variables_and_applies_tool_filters() {
    let asked = RefCell::new(Vec::new());
    let env = [("GIT_TOKEN", "g"), ("DOCS_HOST", "docs.example"), ("DOCS_TOKEN", "d")];
    let cx = context(&env, None, &asked);
    let (_dir, _path, result) = read("config.toml", OURS, &cx);
    let config = result.unwrap();
    let git = stdio(&config, "git");
    assert_eq!(git.args[2], "/home/ada/src");
    assert_eq!(git.env["TOKEN"], "g");
    assert_eq!(git.env["LITERAL"], "${NOT_EXPANDED}");
    assert_eq!(
        remote(&config, "docs"),
        ("https://docs.example/mcp", &BTreeMap::from([("Authorization".into(), "Bearer d".into())]))
    );
    assert!(config.warnings.is_empty(), "{:#?}", config.warnings);
    let claims = policy::ServerClaims::default();
    assert_eq!(config.policy.decide(Some("git"), "git_push", &claims).decision, policy::Decision::Deny);
    assert_eq!(config.policy.decide(Some("docs"), "fetch", &claims).decision, policy::Decision::Deny);
    assert_ne!(config.policy.decide(Some("docs"), "search", &claims).decision, policy::Decision::Deny);

    let cx = context(&[("GIT_TOKEN", "g"), ("DOCS_HOST", "d")], None, &asked);
    let message = err_text(read("config.toml", OURS, &cx).2);
    assert!(
        message.contains("`DOCS_TOKEN` is not set") && message.contains("servers.docs.headers.Authorization"),
        "{message}"
    );
    // Our TOML stays strict: an unknown key is an error, not a warning.
    let message = err_text(read("config.toml", "[servers.x]\ncommand = \"x\"\nautoApprove = []\n", &cx).2);
    assert!(message.contains("autoApprove"), "{message}");
}
