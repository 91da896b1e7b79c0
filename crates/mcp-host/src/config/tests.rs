use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_client::{DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT};
use mcp_sandbox::{Limits, Sandbox};
use mcp_transport::{HttpMode, RemoteOptions, StdioConfig};
use policy::PolicyConfig;
use pretty_assertions::assert_eq;

use super::foreign::{self, Host};
use super::keys;
use super::raw::{
    RawOAuth, RawRuntime, RawSandboxDefaults, RawSandboxTable, RawServe, RawServer, RawToml, line_column,
};
use super::*;

/// The configuration reference, every key of every table.
const CONFIGURATION: &str = include_str!("../../../../docs/configuration.md");

fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    super::parse(path, text, &Context::process())
}

fn remote<'c>(config: &'c Config, name: &str) -> &'c RemoteTarget {
    config.server(name).and_then(ServerSettings::remote_target).unwrap_or_else(|| panic!("{name}: expected remote"))
}

fn oauth<'c>(config: &'c Config, name: &str) -> &'c OAuthSettings {
    remote(config, name).oauth.as_ref().unwrap_or_else(|| panic!("{name}: expected OAuth"))
}

fn sandbox_of<'c>(config: &'c Config, name: &str) -> &'c SandboxSetting {
    config.server(name).and_then(ServerSettings::sandbox).unwrap_or_else(|| panic!("{name}: expected stdio"))
}

fn toml_err(text: &str) -> String {
    parse(Path::new("/x/config.toml"), text).unwrap_err().to_string()
}

fn json_err(text: &str) -> String {
    parse(Path::new("/x/claude.json"), text).unwrap_err().to_string()
}

fn stdio(spec: &ServerSettings) -> &StdioConfig {
    match &spec.target {
        Target::Stdio { config, .. } => config,
        _ => panic!("expected stdio"),
    }
}

#[test]
fn parses_a_full_toml_configuration() {
    let config = parse(
        Path::new("/home/u/.config/mcp-harness/config.toml"),
        r#"
        [servers.git]
        command = "uvx"
        args = ["mcp-server-git", "--repository", "."]
        env = { GIT_PAGER = "cat" }
        cwd = "repos"
        startup_timeout_s = 5
        tool_timeout_s = 2.5

        [servers.docs]
        url = "https://docs.example/mcp"
        headers = { Authorization = "Bearer x" }
        enabled = false
        instructions = false
        elicitation = false

        [policy]
        default = "deny"
        [[policy.rules]]
        server = "git"
        tool = "git_*"
        decision = "allow"
        "#,
    )
    .unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["docs", "git"]);
    let git = &config.servers[1];
    let c = stdio(git);
    assert_eq!((c.command.as_str(), c.args.len(), c.label.as_str()), ("uvx", 3, "git"));
    assert_eq!(c.env.get("GIT_PAGER").map(String::as_str), Some("cat"));
    assert_eq!(c.cwd.as_deref(), Some(Path::new("/home/u/.config/mcp-harness/repos")));
    assert_eq!((git.startup_timeout, git.tool_timeout), (Duration::from_secs(5), Duration::from_millis(2500)));
    assert!(git.enabled);
    let docs = &config.servers[0];
    assert!(!docs.enabled);
    assert!(matches!(&docs.target, Target::Remote(r) if r.url == "https://docs.example/mcp" && r.headers.len() == 1));
    assert_eq!(config.policy.default_decision(), policy::Decision::Deny);
    assert_eq!(config.policy.rule_count(), 1);
    assert!(!config.policy.allows_instructions("docs") && config.policy.allows_instructions("git"));
    assert!(!config.policy.allows_elicitation("docs") && config.policy.allows_elicitation("git"));
}

#[test]
fn remote_servers_take_a_token_variable_and_the_legacy_transport() {
    let config = parse(
        Path::new("/c/config.toml"),
        "[servers.a]\nurl = \"https://a.example/mcp\"\nbearer_token_env_var = \"A_TOKEN\"\n\
         [servers.b]\nurl = \"https://b.example/sse\"\ntype = \"sse\"\n\
         [servers.c]\ncommand = \"c\"\n",
    )
    .unwrap();
    assert_eq!(remote(&config, "a").options, RemoteOptions::default().bearer_token_env("A_TOKEN"));
    assert_eq!(remote(&config, "b").options, RemoteOptions::default().http_mode(HttpMode::LegacySse));
    assert!(config.server("c").unwrap().remote_target().is_none(), "stdio servers have no remote options");
    let json =
        parse(Path::new("/c/config.json"), r#"{"mcpServers": {"b": {"type": "sse", "url": "https://b.example/sse"}}}"#)
            .unwrap();
    assert_eq!(remote(&json, "b").options.http_mode, HttpMode::LegacySse);
    for (text, expected) in [
        ("[servers.s]\ncommand = \"s\"\nbearer_token_env_var = \"T\"\n", "only applies to remote"),
        ("[servers.r]\nurl = \"https://r\"\nbearer_token_env_var = \"\"\n", "must name an environment variable"),
    ] {
        let err = toml_err(text);
        assert!(err.contains(expected), "{err}");
    }
}

#[test]
fn http_servers_without_credentials_use_oauth_with_their_settings() {
    let config = parse(
        Path::new("/c/config.toml"),
        "[servers.plain]\nurl = \"https://p.example/mcp\"\n\
         [servers.token]\nurl = \"https://t.example/mcp\"\nbearer_token_env_var = \"T\"\n\
         [servers.header]\nurl = \"https://h.example/mcp\"\nheaders = { authorization = \"Bearer x\" }\n\
         [servers.socket]\nurl = \"wss://w.example/mcp\"\n\
         [servers.off]\nurl = \"https://o.example/mcp\"\noauth = { enabled = false }\n\
         [servers.machine]\nurl = \"https://m.example/mcp\"\n\
         [servers.machine.oauth]\nclient_id = \"m\"\ngrant = \"client_credentials\"\nprivate_key_file = \"k.pem\"\n\
         [servers.pre]\nurl = \"https://r.example/mcp\"\n\
         [servers.pre.oauth]\nclient_id = \"c\"\nclient_secret_env_var = \"S\"\n\
         client_metadata_url = \"https://me.example/client.json\"\nissuer = \"https://login.example\"\n\
         [servers.local]\ncommand = \"l\"\n",
    )
    .unwrap();
    let with_oauth: Vec<&str> = config
        .servers
        .iter()
        .filter(|s| s.remote_target().is_some_and(|r| r.oauth.is_some()))
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(with_oauth, ["machine", "plain", "pre"]);
    assert_eq!(oauth(&config, "plain"), &OAuthSettings::default());
    let machine = oauth(&config, "machine");
    assert_eq!(machine.grant, OAuthGrant::ClientCredentials);
    assert_eq!(machine.private_key_file.as_deref(), Some(Path::new("/c/k.pem")), "relative to the file");
    let pre = oauth(&config, "pre");
    assert_eq!(
        (pre.client_id.as_deref(), pre.client_secret_env_var.as_deref(), pre.client_metadata_url.as_deref()),
        (Some("c"), Some("S"), Some("https://me.example/client.json"))
    );
    assert_eq!(pre.issuer.as_deref(), Some("https://login.example"));
    for (text, expected) in [
        ("[servers.s]\ncommand = \"s\"\noauth = {}\n", "only applies to remote"),
        ("[servers.r]\nurl = \"https://r\"\nbearer_token_env_var = \"T\"\noauth = {}\n", "cannot be combined"),
        ("[servers.w]\nurl = \"ws://w\"\noauth = {}\n", "http:// and https:// servers only"),
        ("[servers.r]\nurl = \"https://r\"\noauth = { grant = \"implicit\" }\n", "must be \"authorization_code\""),
        ("[servers.r]\nurl = \"https://r\"\noauth = { grant = \"client_credentials\" }\n", "needs `oauth.client_id`"),
        (
            "[servers.r]\nurl = \"https://r\"\noauth = { grant = \"client_credentials\", client_id = \"c\" }\n",
            "needs `oauth.client_secret_env_var` or",
        ),
        ("[servers.r]\nurl = \"https://r\"\noauth = { private_key_file = \"k\" }\n", "only applies to"),
        ("[servers.r]\nurl = \"https://r\"\noauth = { client_metadata_url = \"http://x\" }\n", "https:// URL"),
        ("[servers.r]\nurl = \"https://r\"\noauth = { issuer = \"http://login.example\" }\n", "https:// URL"),
        ("[servers.r]\nurl = \"https://r\"\noauth = { client_secret = \"s\" }\n", "unknown field `client_secret`"),
    ] {
        let err = toml_err(text);
        assert!(err.contains(expected), "{text}: {err}");
    }
}

#[test]
fn defaults_apply_and_empty_files_are_fine() {
    let config = parse(Path::new("/x/config.toml"), "[servers.a]\ncommand = \"a\"\n").unwrap();
    let a = &config.servers[0];
    assert!(a.enabled && stdio(a).args.is_empty() && stdio(a).cwd.is_none());
    assert_eq!((a.startup_timeout, a.tool_timeout), (DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT));
    assert_eq!(config.policy.default_decision(), policy::Decision::Confirm);
    assert!(parse(Path::new("/x/config.toml"), "").unwrap().servers.is_empty());
}

#[test]
fn parses_claude_desktop_json_as_it_is() {
    let config = parse(
        Path::new("/x/claude_desktop_config.json"),
        r#"{
          "globalShortcut": "Ctrl+Space",
          "mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "env": {"A": "1"}},
            "remote": {"type": "http", "url": "https://r.example/mcp", "headers": {"X": "y"}},
            "typed": {"type": "stdio", "command": "x"}
          }
        }"#,
    )
    .unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["filesystem", "remote", "typed"]);
    assert_eq!(stdio(&config.servers[0]).args[2], "/tmp");
    assert!(matches!(config.servers[1].target, Target::Remote(_)));
}

#[test]
fn format_is_chosen_by_extension_then_content() {
    let host =
        |path: &str, text: &str| foreign::read(Path::new(path), text, foreign::ReadContext::default()).map(|r| r.host);
    assert!(matches!(host("a.json", "x = 1"), Err(ConfigError::Invalid { .. })), "a .json file is read as JSON");
    assert!(matches!(host("a.TOML", "{"), Err(ConfigError::Invalid { .. })), "a .TOML file is read as TOML");
    assert_eq!(host("config", "  \n{\"mcpServers\": {}}").unwrap(), Host::McpServers);
    assert_eq!(host("config", "[servers]").unwrap(), Host::Ours);
    assert!(parse(Path::new("/x/config"), r#"{"mcpServers": {"a": {"command": "a"}}}"#).is_ok());
}

#[test]
fn toml_error_messages() {
    let cases = [
        ("wrong args type", "[servers.git]\ncommand = \"git\"\nargs = \"--verbose\"\n"),
        ("wrong arg element", "[servers.git]\ncommand = \"git\"\nargs = [\"a\", 3]\n"),
        ("wrong env value", "[servers.git]\ncommand = \"git\"\nenv = { A = 1 }\n"),
        ("typo in server key", "[servers.git]\ncomand = \"git\"\n"),
        ("typo at top level", "[server.git]\ncommand = \"git\"\n"),
        ("both command and url", "[servers.git]\ncommand = \"git\"\nurl = \"https://x\"\n"),
        ("neither command nor url", "[servers.git]\nargs = []\n"),
        ("args on a remote server", "[servers.r]\nurl = \"https://x\"\nargs = [\"a\"]\n"),
        ("headers on a stdio server", "[servers.s]\ncommand = \"s\"\nheaders = { A = \"b\" }\n"),
        ("zero timeout", "[servers.s]\ncommand = \"s\"\nstartup_timeout_s = 0\n"),
        ("negative timeout", "[servers.s]\ncommand = \"s\"\ntool_timeout_s = -1.5\n"),
        ("string timeout", "[servers.s]\ncommand = \"s\"\ntool_timeout_s = \"10s\"\n"),
        ("enabled not a bool", "[servers.s]\ncommand = \"s\"\nenabled = \"yes\"\n"),
        ("server not a table", "servers.s = 3\n"),
        ("empty command", "[servers.s]\ncommand = \" \"\n"),
        ("empty server name", "[servers.\"\"]\ncommand = \"s\"\n"),
        ("control character in a server name", "[servers.\"a\\u0007b\"]\ncommand = \"s\"\n"),
        ("bad policy decision", "[policy]\ndefault = \"maybe\"\n"),
        ("typo in policy", "[policy]\ndefualt = \"allow\"\n"),
        ("bad rule pattern", "[[policy.rules]]\nserver = \"git\"\ntool = \"[a]\"\ndecision = \"allow\"\n"),
        ("missing rule decision", "[[policy.rules]]\nserver = \"git\"\ntool = \"a\"\n"),
        ("syntax error", "[servers.git\ncommand = \"git\"\n"),
    ];
    let report: String = cases.iter().map(|(name, text)| format!("{name}:\n  {}\n", toml_err(text))).collect();
    insta::assert_snapshot!(report);
}

#[test]
fn odd_server_names_are_fine_unless_empty_or_with_control_characters() {
    let config = parse(Path::new("/x/config.toml"), "[servers.\"a b.é\"]\ncommand = \"s\"\n").unwrap();
    assert_eq!(config.servers[0].name, "a b.é");
    // The refused ones are in toml_error_messages.
}

#[test]
fn json_error_messages() {
    let cases = [
        ("no servers", r#"{"tools": {}}"#),
        ("args not an array", r#"{"mcpServers": {"git": {"command": "git", "args": "x"}}}"#),
        ("entry not a table", r#"{"mcpServers": {"git": ["git"]}}"#),
        ("servers not a table", r#"{"mcpServers": []}"#),
        ("type mismatch", r#"{"mcpServers": {"git": {"type": "sse", "command": "git"}}}"#),
        ("both", r#"{"mcpServers": {"git": {"command": "git", "url": "https://x"}}}"#),
        ("syntax", "{\"mcpServers\": {\"git\": {\"command\": \"git\",}}}"),
        ("trailing garbage", r#"{"mcpServers": {}} x"#),
        ("bad policy", r#"{"mcpServers": {}, "policy": {"default": "sometimes"}}"#),
    ];
    let report: String = cases.iter().map(|(name, text)| format!("{name}:\n  {}\n", json_err(text))).collect();
    insta::assert_snapshot!(report);
}

/// A name with a bidirectional override reads differently from what it is; refused like
/// one with ESC, in both formats.
#[test]
fn server_names_that_could_drive_or_fool_a_terminal_are_refused() {
    for name in ["git\u{1b}[2J", "git\u{202e}txt", "gi\u{200b}t", "git\u{2066}", "git\u{9b}", "n\nx", "n\tx"] {
        let escaped = serde_json::to_string(name).unwrap();
        let json = json_err(&format!(r#"{{"mcpServers": {{{escaped}: {{"command": "git"}}}}}}"#));
        let toml = toml_err(&format!("[servers.{escaped}]\ncommand = \"git\"\n"));
        for message in [json, toml] {
            assert!(message.contains("a server name must be non-empty and free of control characters"), "{message}");
        }
    }
    assert!(parse(Path::new("/x/claude.json"), r#"{"mcpServers": {"gît-é": {"command": "git"}}}"#).is_ok());
}

/// An `env` name with `=` would set another variable (`PATH=/tmp/evil:/usr/bin` as a name
/// set PATH); an empty one or one with control characters is no name either.
#[test]
fn env_names_that_are_no_variables_names_are_refused() {
    for name in ["PATH=/tmp/evil:/usr/bin", "", "K\u{1b}", "K\u{0}"] {
        let escaped = serde_json::to_string(name).unwrap();
        let message = toml_err(&format!("[servers.s]\ncommand = \"s\"\nenv = {{ {escaped} = \"x\" }}\n"));
        assert!(message.contains("which is no variable's name"), "{message}");
    }
    assert!(parse(Path::new("/x/c.toml"), "[servers.s]\ncommand = \"s\"\nenv = { my_var_2 = \"x\" }\n").is_ok());
}

#[test]
fn the_example_from_the_issue_reads_as_promised() {
    let message = toml_err("[servers.git]\ncommand = \"git\"\nargs = \"--verbose\"\n");
    assert!(
        message.starts_with("config error in /x/config.toml: servers.git.args: ")
            && message.contains("expected an array of strings"),
        "{message}"
    );
}

#[test]
fn sandboxes_per_server_and_by_default() {
    let config = parse(
        Path::new("/c/config.toml"),
        r#"
        [sandbox]
        default = { network = false, processes = 64 }
        required = true

        [servers.plain]
        command = "p"
        [servers.std]
        command = "s"
        sandbox = "standard"
        sandbox_required = false
        [servers.off]
        command = "o"
        sandbox = "off"
        [servers.table]
        command = "t"
        sandbox = { read = ["/data", "rel"], write = ["/out"], memory_mib = 512 }
        [servers.remote]
        url = "https://r.example/mcp"
        "#,
    )
    .unwrap();
    let stdio: Vec<&str> = config.servers.iter().filter(|s| s.sandbox().is_some()).map(|s| s.name.as_str()).collect();
    assert_eq!(stdio, ["off", "plain", "std", "table"]);
    let plain = sandbox_of(&config, "plain");
    let sandbox = plain.sandbox.as_ref().unwrap();
    assert!(plain.required && !sandbox.network && sandbox.limits.processes == Some(64));
    assert_eq!(sandbox_of(&config, "std"), &SandboxSetting { sandbox: Some(Sandbox::standard()), required: false });
    assert_eq!(sandbox_of(&config, "off"), &SandboxSetting { sandbox: None, required: true });
    let table = sandbox_of(&config, "table").sandbox.as_ref().unwrap();
    assert_eq!(table.read, [PathBuf::from("/data"), PathBuf::from("/c/rel")], "relative to the file");
    assert_eq!(table.write, [PathBuf::from("/out")]);
    assert!(table.network, "a server's own table extends standard, not the default table");
    assert_eq!(table.limits.memory_mib, Some(512));
    assert_eq!(table.limits.open_files, Limits::default().open_files);
    assert_eq!(config.file.as_deref(), Some(Path::new("/c/config.toml")));

    let defaults = parse(Path::new("/c/config.json"), r#"{"mcpServers": {"a": {"command": "a"}}}"#).unwrap();
    assert_eq!(sandbox_of(&defaults, "a"), &SandboxSetting::default(), "standard by default, not required");

    for (text, expected) in [
        ("[servers.s]\ncommand = \"s\"\nsandbox = \"strict\"\n", "servers.s.sandbox: invalid value: string \"strict\""),
        ("[servers.s]\ncommand = \"s\"\nsandbox = { net = false }\n", "unknown field `net`"),
        (
            "[servers.s]\ncommand = \"s\"\nsandbox = { processes = 0 }\n",
            "servers.s.sandbox: `processes` must be a positive",
        ),
        ("[servers.r]\nurl = \"https://r\"\nsandbox = \"off\"\n", "servers.r: `sandbox` only applies to stdio"),
        ("[servers.r]\nurl = \"https://r\"\nsandbox_required = true\n", "only applies to stdio"),
        ("[sandbox]\ndefault = 3\n", "sandbox.default: invalid type: integer"),
        ("[sandbox]\nrequire = true\n", "unknown field `require`"),
    ] {
        let err = toml_err(text);
        assert!(err.contains(expected), "{text}: {err}");
    }
}

/// A `write` grant holding a protected path (here the configuration file itself) would shrink
/// to what is beside it: it is refused when the file is read, with the file, the key, both
/// paths and the entries to write instead. A `read` grant holding one is cut around it instead.
#[test]
fn a_write_grant_holding_a_protected_path_is_refused_when_the_configuration_is_read() {
    let root = tempfile::tempdir().unwrap();
    let x = root.path().join("x");
    for dir in ["cfg", "out", "logs"] {
        std::fs::create_dir_all(x.join(dir)).unwrap();
    }
    let file = x.join("cfg/config.toml");
    let home = root.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let context = Context { home: Some(home.clone()), ..Context::process() };
    let read = |text: &str| super::parse(&file, text, &context);

    let err = read(&format!("[servers.s]\ncommand = \"s\"\nsandbox = {{ write = [{x:?}] }}\n")).unwrap_err();
    let text = err.to_string();
    let expected_start = format!("config error in {}: servers.s.sandbox.write: ", file.display());
    assert!(text.starts_with(&expected_start), "{text}");
    assert!(
        text.contains(&format!("cannot give write access to {}: it holds {},", x.display(), file.display())),
        "{text}"
    );
    // `cfg` holds nothing but the protected file, so nothing of it is offered.
    let instead = format!("`write = [{:?}, {:?}]`", x.join("logs"), x.join("out"));
    assert!(text.contains(&instead), "what to write instead: {text}");
    let ConfigError::Invalid { key, .. } = err else { panic!("{err:?}") };
    assert_eq!(key.as_deref(), Some("servers.s.sandbox.write"));

    // Relative to the file, and the default table too.
    let err = read("[sandbox]\ndefault = { write = [\"..\"] }\n").unwrap_err().to_string();
    assert!(err.contains("sandbox.default.write: the sandbox cannot give write access to"), "{err}");
    assert!(err.contains(&x.display().to_string()), "{err}");

    // HOME as a whole, refused now rather than at the start.
    let err = read(&format!("[servers.s]\ncommand = \"s\"\nsandbox = {{ write = [{:?}] }}\n", root.path()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("servers.s.sandbox.write:") && err.contains("it holds your home directory"), "{err}");

    // Reading it is fine (the protected path is cut out); so is writing beside the protected one
    // or the protected one itself (named, so handed over).
    for sandbox in [
        format!("{{ read = [{x:?}] }}"),
        format!("{{ write = [{:?}, {:?}] }}", x.join("out"), x.join("logs")),
        format!("{{ write = [{:?}, {:?}] }}", x, file),
    ] {
        let config = read(&format!("[servers.s]\ncommand = \"s\"\nsandbox = {sandbox}\n"));
        assert!(config.is_ok(), "{sandbox}: {config:?}");
    }
}

#[test]
fn line_and_column_count_characters() {
    assert_eq!(line_column("ab\ncé\nx", 7), (3, 1));
    assert_eq!(line_column("ab\ncéd", 6), (2, 3));
    assert_eq!(line_column("abc", 99), (1, 4));
}

#[test]
fn workspace_configs_are_refused() {
    let workspace = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let inside = workspace.path().join("sub/config.toml");
    std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
    std::fs::write(&inside, "").unwrap();
    let outside = elsewhere.path().join("config.toml");
    std::fs::write(&outside, "").unwrap();

    let err = check_outside_workspace(&inside, workspace.path(), Origin::Default).unwrap_err();
    assert!(matches!(err, ConfigError::InWorkspace { .. }));
    let message = err.to_string();
    assert!(message.contains("--allow-workspace-config") && message.contains("an agent"), "{message}");
    assert!(check_outside_workspace(&outside, workspace.path(), Origin::Default).is_ok());

    // A relative path and a `..` detour resolve to the same place.
    let detour = workspace.path().join("sub/../sub/config.toml");
    assert!(check_outside_workspace(&detour, workspace.path(), Origin::Default).is_err());

    // A symlink from outside into the workspace is followed.
    #[cfg(unix)]
    {
        let link = elsewhere.path().join("link.toml");
        std::os::unix::fs::symlink(&inside, &link).unwrap();
        assert!(matches!(
            check_outside_workspace(&link, workspace.path(), Origin::Default),
            Err(ConfigError::InWorkspace { .. })
        ));
        // A link inside the workspace is refused even when it points outside: an agent could
        // point it anywhere.
        let link_in = workspace.path().join("link.toml");
        std::os::unix::fs::symlink(&outside, &link_in).unwrap();
        assert!(check_outside_workspace(&link_in, workspace.path(), Origin::Default).is_err());
        // A workspace reached through a symlink is still the workspace.
        let ws_link = elsewhere.path().join("ws");
        std::os::unix::fs::symlink(workspace.path(), &ws_link).unwrap();
        assert!(check_outside_workspace(&inside, &ws_link, Origin::Default).is_err());
    }

    let missing = elsewhere.path().join("nope.toml");
    assert!(matches!(
        check_outside_workspace(&missing, workspace.path(), Origin::Default),
        Err(ConfigError::NotFound { .. })
    ));
}

/// The section of docs/configuration.md under `heading` (up to the next heading of its level
/// or above).
fn doc_section(heading: &str) -> &'static str {
    let doc = CONFIGURATION;
    let at = doc.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("no section {heading:?} in the reference"));
    let level = heading.split(' ').next().unwrap_or("#");
    let rest = &doc[at + heading.len() + 2..];
    let end = rest
        .match_indices("\n#")
        .find(|(i, _)| rest[i + 1..].split(' ').next().is_some_and(|h| h.len() <= level.len()))
        .map_or(rest.len(), |(i, _)| i);
    &rest[..end]
}

#[test]
fn configuration_reference_lists_every_key() {
    // Every key each table of our TOML accepts, read from the parser itself.
    let tables: [(&str, &[&str]); 22] = [
        ("## Top level", keys::fields::<RawToml>()),
        ("## `[servers.NAME]`", keys::fields::<RawServer>()),
        ("### `[servers.NAME.oauth]`", keys::fields::<RawOAuth>()),
        ("## `[policy]`", keys::fields::<PolicyConfig>()),
        ("## `[policy]`", keys::fields::<policy::RuleConfig>()),
        ("## `[policy]`", keys::fields::<policy::ResourceRuleConfig>()),
        ("## `[sandbox]`", keys::fields::<RawSandboxDefaults>()),
        ("## `[sandbox]`", keys::fields::<RawSandboxTable>()),
        ("## `[runtime]`", keys::fields::<RawRuntime>()),
        ("## `[serve]`", keys::fields::<RawServe>()),
        ("### `[serve.auth]`", keys::fields::<mcp_gateway::settings::AuthSettings>()),
        ("### `[serve.auth]`", keys::fields::<mcp_gateway::settings::TokenSettings>()),
        ("### `[serve.auth.oauth]`", keys::fields::<mcp_gateway::settings::OAuthSettings>()),
        ("### `[serve.profiles.NAME]`", keys::fields::<mcp_gateway::settings::ProfileSettings>()),
        ("### `[serve.profiles.NAME]`", keys::fields::<mcp_gateway::settings::OverlaySettings>()),
        ("### `[serve.audit]`", keys::fields::<mcp_gateway::settings::AuditSettings>()),
        ("### `[serve.drain]`", keys::fields::<mcp_gateway::settings::DrainSettings>()),
        ("### `[[serve.limits]]`", keys::fields::<mcp_gateway::LimitRule>()),
        ("### `[serve.replicas]`", keys::fields::<mcp_gateway_store::ReplicaConfig>()),
        ("## Code mode", keys::fields::<super::raw::RawCodeLimits>()),
        ("## `[telemetry]`", keys::fields::<mcp_telemetry::config::TelemetrySettings>()),
        ("## `[telemetry]`", keys::fields::<mcp_telemetry::config::SignalSettings>()),
    ];
    let mut missing = Vec::new();
    for (heading, fields) in tables {
        assert!(!fields.is_empty(), "no keys read for {heading}");
        let section = doc_section(heading);
        for field in fields {
            // A row of the section's table starts with the key.
            if !section.contains(&format!("| `{field}` |")) {
                missing.push(format!("{heading}: `{field}`"));
            }
        }
    }
    // Every key of other hosts' entries that is read (or refused, or reported) by name.
    for (heading, known) in [
        ("### `mcpServers` entries (Claude Desktop, Claude Code, Cursor)", foreign::MCP_SERVERS_KEYS),
        ("### VS Code `servers` entries and `inputs`", foreign::VSCODE_KEYS),
        ("### Codex `[mcp_servers.NAME]`", foreign::CODEX_KEYS),
    ] {
        let section = doc_section(heading);
        for (key, _) in known {
            if !section.contains(&format!("`{key}`")) {
                missing.push(format!("{heading}: `{key}`"));
            }
        }
    }
    assert!(missing.is_empty(), "docs/configuration.md lacks: {missing:#?}");
    // The test can fail: a key that is not there is found missing.
    assert!(!doc_section("## `[runtime]`").contains("| `no_such_key` |"));
}

#[test]
fn tool_exposure_and_search_settings() {
    let config = parse(
        Path::new("/x/config.toml"),
        r#"
        tool_search = "on"
        tool_budget = 4096
        pool_budget = 32768
        max_loaded_tools = 10
        [servers.core]
        command = "core"
        always_load = true
        [servers.big]
        command = "big"
        tool_search = "off"
        tool_budget = 1000
        server_budget = 5000
        [servers.plain]
        command = "plain"
        "#,
    )
    .unwrap();
    let tools = &config.tools;
    assert_eq!(tools.tool_search, tool_pool::SearchMode::On);
    assert_eq!((tools.tool_budget, tools.pool_budget), (4096, 32768));
    assert_eq!((tools.native, tools.max_loaded), (false, Some(10)));
    let exposure = config.exposure();
    assert_eq!((exposure.tool_search, exposure.tool_budget, exposure.pool_budget), (tools.tool_search, 4096, 32768));
    assert_eq!(
        exposure.servers,
        BTreeMap::from([
            (
                "big".to_owned(),
                tool_pool::ServerExposure {
                    tool_budget: Some(1000),
                    server_budget: Some(5000),
                    tool_search: Some(tool_pool::SearchMode::Off),
                    always_load: false
                }
            ),
            ("core".to_owned(), tool_pool::ServerExposure { always_load: true, ..Default::default() }),
        ])
    );
    // Native search is a top-level key of our TOML.
    let native = parse(Path::new("/x/c.toml"), "tool_search = \"native\"\n").unwrap();
    assert!(native.tools.native);
    assert_eq!(native.tools.tool_search, tool_pool::SearchMode::On);
    // Nothing set: the defaults.
    assert_eq!(parse(Path::new("/x/c.toml"), "").unwrap().tools, ToolsSettings::default());
}

#[test]
fn tool_search_errors_name_the_key_and_the_choices() {
    assert_eq!(
        toml_err("tool_search = \"always\"\n"),
        "config error in /x/config.toml: tool_search: `tool_search` must be \"auto\", \"on\", \"off\" or \
         \"native\", not \"always\""
    );
    let native = toml_err("[servers.s]\ncommand = \"s\"\ntool_search = \"native\"\n");
    assert!(native.contains("servers.s.tool_search") && native.contains("not of one server"), "{native}");
    let zero = toml_err("max_loaded_tools = 0\n");
    assert!(zero.contains("must be at least 1"), "{zero}");
    let negative = toml_err("pool_budget = -1\n");
    assert!(negative.contains("pool_budget"), "{negative}");
}

#[test]
fn code_mode_is_off_by_default_and_set_globally_and_per_server() {
    let off = parse(Path::new("/x/c.toml"), "[servers.a]\ncommand = \"a\"\n").unwrap();
    assert!(!off.code_scope().any() && !off.code_scope().reaches("a"));
    assert_eq!(off.tools.code_limits, code_mode::Limits::default());

    let text = r#"
        code_mode = "on"
        [code_mode_limits]
        memory_mib = 16
        cpu_time_s = 0.5
        max_calls = 7
        concurrency = 2
        max_result_kib = 8
        max_log_kib = 1
        max_running = 3
        [servers.a]
        command = "a"
        [servers.b]
        command = "b"
        code_mode = "off"
    "#;
    let config = parse(Path::new("/x/c.toml"), text).unwrap();
    let scope = config.code_scope();
    assert!(scope.any() && scope.reaches("a") && !scope.reaches("b"), "{scope:?}");
    let limits = &config.tools.code_limits;
    assert_eq!(
        (limits.memory_bytes, limits.cpu_time, limits.max_calls, limits.concurrency),
        (16 << 20, std::time::Duration::from_millis(500), 7, 2)
    );
    assert_eq!((limits.max_result_bytes, limits.max_log_bytes, limits.max_running), (8 << 10, 1 << 10, 3));

    let one = parse(
        Path::new("/x/c.toml"),
        "[servers.a]\ncommand = \"a\"\ncode_mode = \"on\"\n[servers.b]\ncommand = \"b\"\n",
    )
    .unwrap();
    let scope = one.code_scope();
    assert!(scope.any() && scope.reaches("a") && !scope.reaches("b"), "{scope:?}");
}

#[test]
fn code_mode_errors_name_the_key_and_the_choices() {
    let global = toml_err("code_mode = \"yes\"\n");
    assert!(global.contains("code_mode") && global.contains("\"on\" or \"off\""), "{global}");
    let server = toml_err("[servers.s]\ncommand = \"s\"\ncode_mode = true\n");
    assert!(server.contains("servers.s.code_mode"), "{server}");
    let limit = toml_err("[code_mode_limits]\nmax_calls = 0\n");
    assert!(limit.contains("code_mode_limits") && limit.contains("max_calls"), "{limit}");
    let unknown = toml_err("[code_mode_limits]\ntimeout = 3\n");
    assert!(unknown.contains("code_mode_limits") && unknown.contains("timeout"), "{unknown}");
}

#[test]
fn telemetry_is_read_strictly_and_resolved_with_the_environment() {
    let none = parse(Path::new("/x/c.toml"), "[servers.a]\ncommand = \"a\"\n").unwrap();
    assert!(none.telemetry_config(&BTreeMap::new()).unwrap().exports_nothing(), "nothing configured, nothing exported");

    let text = r#"
        [telemetry]
        endpoint = "http://127.0.0.1:4317"
        protocol = "grpc"
        service_name = "agent"
        [telemetry.metrics]
        enabled = false
    "#;
    let config = parse(Path::new("/x/c.toml"), text).unwrap();
    let resolved = config.telemetry_config(&BTreeMap::new()).unwrap();
    let traces = resolved.traces.as_ref().unwrap();
    // Read as a URL, so it comes back with the root path.
    assert_eq!(traces.endpoint.trim_end_matches('/'), "http://127.0.0.1:4317");
    assert!(resolved.metrics.is_none(), "{resolved:?}");
    assert_eq!(resolved.service_name(), "agent");
    // A variable that is set wins over the table.
    let env: BTreeMap<String, String> =
        [("OTEL_SERVICE_NAME".to_owned(), "from-env".to_owned()), ("OTEL_SDK_DISABLED".to_owned(), "true".to_owned())]
            .into();
    let resolved = config.telemetry_config(&env).unwrap();
    assert_eq!(resolved.service_name(), "from-env");
    assert!(resolved.exports_nothing());

    let bad = toml_err("[telemetry]\nprotocol = \"udp\"\nendpoint = \"http://x\"\n");
    assert!(bad.contains("telemetry") && bad.contains("udp"), "{bad}");
    let unknown = toml_err("[telemetry]\nendpont = \"http://x\"\n");
    assert!(unknown.contains("telemetry") && unknown.contains("endpont"), "{unknown}");
}

#[test]
fn serve_metrics_may_have_an_address_of_their_own() {
    let on_front = parse(Path::new("/x/c.toml"), "[servers.a]\ncommand = \"a\"\n").unwrap();
    assert_eq!(on_front.serve.metrics_addr, None);
    assert!(!on_front.serve.metrics, "off unless asked for");
    let asked = parse(Path::new("/x/c.toml"), "[serve]\nmetrics = true\n").unwrap();
    assert!(asked.serve.metrics);
    assert_eq!(asked.serve.metrics_addr, None);
    let own = parse(Path::new("/x/c.toml"), "[serve]\nmetrics_addr = \"127.0.0.1:9464\"\n").unwrap();
    assert_eq!(own.serve.metrics_addr, Some(std::net::SocketAddr::from(([127, 0, 0, 1], 9464))));
    assert!(own.serve.metrics, "an address of their own asks for them");
    let both = toml_err("[serve]\nmetrics = false\nmetrics_addr = \"127.0.0.1:9464\"\n");
    assert!(both.contains("metrics") && both.contains("contradict"), "{both}");
    let bad = toml_err("[serve]\nmetrics_addr = \"localhost\"\n");
    assert!(bad.contains("metrics_addr") && bad.contains("address and port"), "{bad}");
}

#[test]
fn serve_session_limits_are_read_and_checked() {
    let defaults = parse(Path::new("/x/c.toml"), "[servers.a]\ncommand = \"a\"\n").unwrap();
    assert_eq!(defaults.serve.max_sessions, mcp_gateway::MAX_SESSIONS);
    assert_eq!(defaults.serve.max_sessions_per_caller, mcp_gateway::MAX_SESSIONS_PER_CALLER);
    assert_eq!(defaults.serve.session_idle, mcp_gateway::SESSION_IDLE);
    let set = parse(
        Path::new("/x/c.toml"),
        "[serve]\nmax_sessions = 500\nmax_sessions_per_caller = 20\nsession_idle_s = 600\n",
    )
    .unwrap();
    assert_eq!(
        (set.serve.max_sessions, set.serve.max_sessions_per_caller, set.serve.session_idle),
        (500, 20, Duration::from_secs(600))
    );
    let lower = parse(Path::new("/x/c.toml"), "[serve]\nmax_sessions = 50\n").unwrap();
    assert_eq!(lower.serve.max_sessions_per_caller, 50, "the share is never more than the table");
    for (text, key) in [
        ("[serve]\nmax_sessions = 0\n", "max_sessions"),
        ("[serve]\nmax_sessions_per_caller = 0\n", "max_sessions_per_caller"),
    ] {
        let zero = toml_err(text);
        assert!(zero.contains(key) && zero.contains("at least 1"), "{zero}");
    }
    let over = toml_err("[serve]\nmax_sessions = 10\nmax_sessions_per_caller = 11\n");
    assert!(over.contains("max_sessions_per_caller") && over.contains("not be more than"), "{over}");
    let idle = toml_err("[serve]\nsession_idle_s = 0\n");
    assert!(idle.contains("session_idle_s") && idle.contains("positive"), "{idle}");
}

/// A concurrency past what a semaphore holds panicked when the servers started; any past a few
/// thousand is refused with the key and the range.
#[test]
fn concurrency_is_bounded_both_ways() {
    for (key, value) in
        [("local_concurrency", "9223372036854775807"), ("remote_concurrency", "4097"), ("local_concurrency", "0")]
    {
        let e = toml_err(&format!("[runtime]\n{key} = {value}\n"));
        assert!(e.contains(&format!("`{key}` must be from 1 to 4096, not {value}")), "{e}");
    }
    let ok = parse(Path::new("/x/c.toml"), "[runtime]\nlocal_concurrency = 4096\nremote_concurrency = 1\n").unwrap();
    assert_eq!((ok.runtime.local_concurrency, ok.runtime.remote_concurrency), (4096, 1));
}
