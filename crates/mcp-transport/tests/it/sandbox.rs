//! Confined stdio servers: the fixture server in `snoop` mode, started through the sandbox
//! launcher under `standard`, tries what a hostile server would; each attempt is denied and
//! the server reports the error it got.

use std::path::{Path, PathBuf};

use mcp_client::{Client, ClientOptions, RequestOptions, TransportError};
use mcp_sandbox::Sandbox;
use mcp_sandbox::launcher::Launcher;
use mcp_transport::{StdioConfig, StdioSandbox, StdioTransport};
use serde_json::json;

use crate::{args, fixture};

/// A test HOME with planted secrets, a working directory and a host data directory outside it.
struct Place {
    _root: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
    data: PathBuf,
}

impl Place {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let work = home.join("work");
        let data = root.path().join("host-data");
        for (path, text) in [
            (home.join(".ssh/id_ed25519"), "-----BEGIN OPENSSH PRIVATE KEY-----"),
            (home.join(".config/mcp-harness/config.toml"), "[servers.x]\ncommand = \"x\"\n"),
            (home.join(".local/share/mcp-harness/oauth/oauth-tokens.json"), "{\"token\": \"secret\"}"),
            (data.join("oauth/oauth-tokens.json"), "{\"token\": \"secret\"}"),
            (home.join("notes.txt"), "not a secret"),
            (work.join("input.txt"), "work input"),
        ] {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Self { _root: root, home, work, data }
    }

    /// The snoop fixture under `sandbox`, with HOME here, working in `work`, and the host's data
    /// directory protected as the CLI protects its own.
    fn config(&self, mut sandbox: Sandbox) -> StdioConfig {
        let mut config = fixture("snoop", &[]);
        config.env.insert("HOME".into(), self.home.to_string_lossy().into_owned());
        config.cwd = Some(self.work.clone());
        sandbox.protect.push(self.data.clone());
        let launcher = mcp_fixtures::launcher_binary().unwrap_or_else(|e| panic!("{e}"));
        config.sandbox =
            Some(Box::new(StdioSandbox { sandbox, launcher: Launcher::new(launcher, Vec::<String>::new()) }));
        config
    }
}

async fn start(config: StdioConfig) -> Client {
    let transport = StdioTransport::spawn(config).expect("spawn the launcher");
    Client::connect(transport, ClientOptions::default()).await.expect("handshake with the confined fixture")
}

/// The tool's text and whether it is an error result.
async fn call(client: &Client, tool: &str, arguments: serde_json::Value) -> (String, bool) {
    let result = client.call_tool(tool, args(arguments), RequestOptions::default()).await.unwrap();
    (result.joined_text(), result.is_error())
}

async fn read(client: &Client, path: &Path) -> (String, bool) {
    call(client, "read_file", json!({"path": path})).await
}

fn assert_denied((text, is_error): (String, bool), what: &str) {
    assert!(is_error && text.contains("Permission denied"), "{what}: expected a denial, got {text:?}");
}

fn assert_allowed((text, is_error): (String, bool), what: &str) {
    assert!(!is_error, "{what}: expected success, got {text:?}");
}

#[tokio::test]
async fn standard_keeps_keys_tokens_and_the_hosts_configuration_from_the_server() {
    let place = Place::new();
    let client = start(place.config(Sandbox::standard())).await;
    assert_denied(read(&client, &place.home.join(".ssh/id_ed25519")).await, "~/.ssh/id_ed25519");
    assert_denied(read(&client, &place.home.join(".config/mcp-harness/config.toml")).await, "the host's configuration");
    let tokens = place.home.join(".local/share/mcp-harness/oauth/oauth-tokens.json");
    assert_denied(read(&client, &tokens).await, "the host's token store in HOME");
    assert_denied(read(&client, &place.data.join("oauth/oauth-tokens.json")).await, "the host's data directory");
    assert_denied(read(&client, &place.home.join("notes.txt")).await, "other files in HOME");
    // What the server needs is there.
    assert_eq!(read(&client, &place.work.join("input.txt")).await, ("work input".to_owned(), false));
    let (passwd, is_error) = read(&client, Path::new("/etc/passwd")).await;
    assert!(!is_error && passwd.contains("root"), "the system is readable: {passwd}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_wider_read_grant_still_leaves_the_secrets_out_unless_they_are_listed() {
    let place = Place::new();
    let sandbox = Sandbox { read: vec![place.home.clone()], ..Sandbox::standard() };
    let client = start(place.config(sandbox)).await;
    assert_eq!(read(&client, &place.home.join("notes.txt")).await, ("not a secret".to_owned(), false));
    assert_denied(read(&client, &place.home.join(".ssh/id_ed25519")).await, "~/.ssh inside a granted HOME");
    assert_denied(read(&client, &place.data.join("oauth/oauth-tokens.json")).await, "the host's data directory");
    client.close().await.unwrap();

    // Listed by name, a protected path is granted: that is the only way in.
    let sandbox = Sandbox { read: vec![place.home.join(".ssh")], ..Sandbox::standard() };
    let client = start(place.config(sandbox)).await;
    let (key, is_error) = read(&client, &place.home.join(".ssh/id_ed25519")).await;
    assert!(!is_error && key.contains("PRIVATE KEY"), "{key}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn writes_go_only_to_the_working_directory_the_private_temp_and_write_paths() {
    let place = Place::new();
    let extra = tempfile::tempdir().unwrap();
    let sandbox = Sandbox { write: vec![extra.path().to_path_buf()], ..Sandbox::standard() };
    let client = start(place.config(sandbox)).await;
    let write = |path: PathBuf| {
        let client = &client;
        async move { call(client, "write_file", json!({"path": path, "text": "x"})).await }
    };
    assert_allowed(write(place.work.join("out.txt")).await, "the working directory");
    assert_allowed(write(extra.path().join("out.txt")).await, "a write path");
    let (temp, _) = call(&client, "env", json!({"name": "TMPDIR"})).await;
    assert!(temp.contains("mcp-sandbox-"), "a private temporary directory: {temp}");
    assert_allowed(write(PathBuf::from(&temp).join("scratch")).await, "the private temporary directory");
    assert_denied(write(place.home.join(".bashrc")).await, "HOME");
    assert_denied(write(place.home.join(".ssh/authorized_keys")).await, "~/.ssh");
    assert_denied(write(std::env::temp_dir().join("mcp-sandbox-escape")).await, "the shared /tmp");
    assert_denied(write(PathBuf::from("/etc/mcp-sandbox-escape")).await, "a read-only system directory");
    assert!(!place.home.join(".bashrc").exists() && !Path::new("/etc/mcp-sandbox-escape").exists());
    client.close().await.unwrap();
    assert!(!Path::new(&temp).exists(), "the private temporary directory is removed on close");
}

#[tokio::test]
async fn network_off_reaches_nothing_not_even_loopback() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let place = Place::new();

    let client = start(place.config(Sandbox { network: false, ..Sandbox::standard() })).await;
    let (text, is_error) = call(&client, "connect", json!({"port": port})).await;
    assert!(is_error, "the connection was refused: {text}");
    assert!(text.contains("unreachable") || text.contains("denied"), "the server saw why: {text}");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the listener must see no connection, got {other:?}"),
    }
    client.close().await.unwrap();

    // The same call with the network on does arrive: the test can tell the difference.
    let client = start(place.config(Sandbox::standard())).await;
    let (text, is_error) = call(&client, "connect", json!({"port": port})).await;
    assert!(!is_error, "{text}");
    listener.set_nonblocking(false).unwrap();
    assert!(listener.accept().is_ok(), "the listener saw the permitted connection");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_fork_bomb_stops_at_the_process_limit_and_the_host_goes_on() {
    let place = Place::new();
    let mut sandbox = Sandbox::standard();
    sandbox.limits.processes = Some(350);
    let client = start(place.config(sandbox)).await;
    // Bounded: were the limit not applied, 1,000 idle processes would still not hurt the machine.
    let (text, is_error) = call(&client, "fork_bomb", json!({"max": 1000})).await;
    assert!(!is_error, "{text}");
    let spawned: usize = text.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap();
    assert!(text.contains("then:") && (10..=350).contains(&spawned), "stopped at the limit: {text}");
    // The confined server is still there, and the host can still start processes.
    assert_eq!(call(&client, "echo", json!({"text": "alive"})).await, ("alive".to_owned(), false));
    let other = crate::connect("echo", &[]).await;
    assert_eq!(
        other.call_tool("echo", args(json!({"text": "host"})), RequestOptions::default()).await.unwrap().joined_text(),
        "host"
    );
    other.close().await.unwrap();
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_sandbox_that_cannot_be_set_up_is_the_servers_start_failure_with_the_cause() {
    let place = Place::new();
    let sandbox = Sandbox { read: vec![PathBuf::from("/nonexistent/mcp-sandbox-path")], ..Sandbox::standard() };
    let transport = StdioTransport::spawn(place.config(sandbox)).expect("the launcher starts");
    let err = Client::connect(transport, ClientOptions::default()).await.unwrap_err().to_string();
    assert!(
        err.contains("could not start")
            && err.contains("/nonexistent/mcp-sandbox-path")
            && err.contains("No such file"),
        "{err}"
    );

    // A program that is not there fails at once, as it does unconfined.
    let mut config = place.config(Sandbox::standard());
    config.command = "mcp-no-such-server".into();
    match StdioTransport::spawn(config) {
        Err(TransportError::Spawn { source, .. }) => assert_eq!(source.kind(), std::io::ErrorKind::NotFound),
        other => panic!("expected a spawn error, got {other:?}"),
    }

    // A working directory that holds HOME is refused: the server could rewrite HOME's files.
    let mut config = place.config(Sandbox::standard());
    config.cwd = Some(place.home.clone());
    let err = StdioTransport::spawn(config).unwrap_err().to_string();
    assert!(err.contains("home directory") && err.contains("`cwd`"), "{err}");
}
