//! Confined stdio servers: the fixture server in `snoop` mode, started through the sandbox
//! launcher under `standard`, tries what a hostile server would; each attempt is denied and
//! the server reports the error it got. As root (the usual case here) the launcher takes its
//! root path (a PID namespace bounds the processes); the fixture's `as-nobody` mode runs it as
//! another user, with user namespaces and without them.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_client::{Client, ClientOptions, RequestOptions, TransportError};
use mcp_sandbox::launcher::Launcher;
use mcp_sandbox::{Sandbox, WorkingDir};
use mcp_transport::{StdioConfig, StdioSandbox, StdioTransport};
use serde_json::json;

use crate::{args, fixture};

/// A test HOME with planted secrets, a working directory and a host data directory outside it.
struct Place {
    _root: tempfile::TempDir,
    root: PathBuf,
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
        let path = root.path().to_path_buf();
        Self { _root: root, root: path, home, work, data }
    }

    /// The place, readable by every user (the secrets too, so that only the sandbox keeps
    /// them from another user's server).
    fn readable_by_all(self) -> Self {
        for dir in [&self.root, &self.home, &self.home.join(".ssh"), &self.data] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        self
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

    /// [`Place::config`] with the launcher run as nobody, with or without user namespaces.
    /// The binaries are copied into the place first: nobody may not reach the build directory
    /// (a clone under `/root` or in a 0700 temporary folder).
    fn config_as_nobody(&self, sandbox: Sandbox, user_namespaces: bool) -> StdioConfig {
        let mut config = self.config(sandbox);
        let fixture = self.executable_by_all(&mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")));
        let launcher = self.executable_by_all(&mcp_fixtures::launcher_binary().unwrap_or_else(|e| panic!("{e}")));
        config.command = fixture.to_string_lossy().into_owned();
        let mut args = vec!["as-nobody".to_owned()];
        if !user_namespaces {
            args.push("--no-userns".to_owned());
        }
        args.extend(["--".to_owned(), launcher.to_string_lossy().into_owned()]);
        if let Some(sandbox) = config.sandbox.as_mut() {
            sandbox.launcher = Launcher::new(fixture, args);
        }
        config
    }

    /// A copy of `binary` in the place's `bin` folder, which every user may enter and run from.
    fn executable_by_all(&self, binary: &Path) -> PathBuf {
        let bin = self.root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let copy = bin.join(binary.file_name().unwrap());
        std::fs::copy(binary, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        copy
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

/// A grant whose path a server could have turned into a link (its working folder here; a
/// file on its command line, `node_modules`) is not led by the link onto protected ground: a
/// working folder linked to HOME gave the server HOME, secrets aside (~/.bashrc writable).
#[tokio::test]
async fn a_link_where_a_grant_comes_from_does_not_lead_it_onto_protected_ground() {
    let place = Place::new();
    let linked = place.work.join("linked");
    std::os::unix::fs::symlink(&place.home, &linked).unwrap();
    let mut config = place.config(Sandbox::standard());
    config.cwd = Some(linked);
    let client = start(config).await;
    assert_denied(read(&client, &place.home.join("notes.txt")).await, "HOME, through a linked working folder");
    assert_denied(read(&client, &place.home.join(".ssh/id_ed25519")).await, "~/.ssh, through a linked working folder");
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

/// What the host listens on: TCP, UDP and an abstract UNIX socket, all on this machine.
struct Listeners {
    tcp: std::net::TcpListener,
    udp: std::net::UdpSocket,
    unix: std::os::unix::net::UnixListener,
    unix_name: String,
}

impl Listeners {
    fn new() -> Self {
        use std::os::linux::net::SocketAddrExt as _;
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let unix_name = format!("mcp-sandbox-test-{}-{:x}", std::process::id(), rand_suffix());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&unix_name).unwrap();
        let unix = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        unix.set_nonblocking(true).unwrap();
        Self { tcp, udp, unix, unix_name }
    }

    fn ports(&self) -> (u16, u16) {
        (self.tcp.local_addr().unwrap().port(), self.udp.local_addr().unwrap().port())
    }

    /// Each way out fails for the server, and nothing arrives here.
    async fn assert_unreachable(&self, client: &Client, what: &str) {
        let (tcp, udp) = self.ports();
        let (text, is_error) = call(client, "connect", json!({"port": tcp})).await;
        assert!(is_error && (text.contains("unreachable") || text.contains("denied")), "{what}: TCP: {text}");
        let (text, is_error) = call(client, "udp_send", json!({"port": udp})).await;
        assert!(is_error && text.contains("unreachable"), "{what}: UDP: {text}");
        let (text, is_error) = call(client, "unix_connect", json!({"path": format!("@{}", self.unix_name)})).await;
        assert!(is_error && (text.contains("refused") || text.contains("not permitted")), "{what}: UNIX: {text}");
        // Had anything been sent, it would be here by now (the calls answered after sending).
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(self.tcp.accept().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock), "{what}: TCP arrived");
        assert!(self.udp.recv(&mut [0; 16]).is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock), "{what}: UDP");
        assert!(self.unix.accept().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock), "{what}: UNIX arrived");
    }

    /// Each way out works for `client`: the test can tell the difference.
    async fn assert_reachable(&self, client: &Client, what: &str) {
        let (tcp, udp) = self.ports();
        let (text, is_error) = call(client, "connect", json!({"port": tcp})).await;
        assert!(!is_error, "{what}: TCP: {text}");
        let (text, is_error) = call(client, "udp_send", json!({"port": udp})).await;
        assert!(!is_error, "{what}: UDP: {text}");
        let (text, is_error) = call(client, "unix_connect", json!({"path": format!("@{}", self.unix_name)})).await;
        assert!(!is_error, "{what}: UNIX: {text}");
        let arrived =
            |check: &mut dyn FnMut() -> bool| mcp_fixtures::wait_until_blocking(Duration::from_secs(5), check);
        assert!(arrived(&mut || self.tcp.accept().is_ok()), "{what}: the TCP connection arrived");
        assert!(arrived(&mut || self.udp.recv(&mut [0; 16]).is_ok()), "{what}: the datagram arrived");
        assert!(arrived(&mut || self.unix.accept().is_ok()), "{what}: the UNIX connection arrived");
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

#[tokio::test]
async fn network_off_reaches_nothing_not_even_loopback_over_tcp_udp_or_a_unix_socket() {
    let listeners = Listeners::new();
    let place = Place::new();
    let client = start(place.config(Sandbox { network: false, ..Sandbox::standard() })).await;
    listeners.assert_unreachable(&client, "network off").await;
    client.close().await.unwrap();

    // Unconfined, the same calls arrive: the test can tell the difference.
    let client = crate::connect("snoop", &[]).await;
    listeners.assert_reachable(&client, "unconfined").await;
    client.close().await.unwrap();

    // With the network on, TCP and UDP arrive (abstract UNIX sockets outside the sandbox stay
    // out of reach where Landlock scopes them, kernel 6.12 on).
    let client = start(place.config(Sandbox::standard())).await;
    let (tcp, udp) = listeners.ports();
    assert!(!call(&client, "connect", json!({"port": tcp})).await.1);
    assert!(!call(&client, "udp_send", json!({"port": udp})).await.1);
    assert!(mcp_fixtures::wait_until_blocking(Duration::from_secs(5), || listeners.tcp.accept().is_ok()));
    assert!(mcp_fixtures::wait_until_blocking(Duration::from_secs(5), || listeners.udp.recv(&mut [0; 16]).is_ok()));
    client.close().await.unwrap();
}

/// The fork bomb at `standard`'s limit (1,024 processes and threads): it stops there with the
/// kernel's "try again" (EAGAIN); the server is still there and the host can still start
/// processes. Bounded: were the limit not applied, 2,000 idle processes would not hurt.
async fn fork_bomb_stops_at_the_standard_limit(client: &Client, what: &str) {
    assert_eq!(Sandbox::standard().limits.processes, Some(1024));
    let (text, is_error) = call(client, "fork_bomb", json!({"max": 2000})).await;
    assert!(!is_error, "{what}: {text}");
    let spawned: usize = text.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap();
    assert!(text.contains("then: Resource temporarily unavailable (os error 11)"), "{what}: the process limit: {text}");
    assert!((900..1024).contains(&spawned), "{what}: stopped at the limit: {text}");
    assert_eq!(call(client, "echo", json!({"text": "alive"})).await, ("alive".to_owned(), false), "{what}");
}

#[tokio::test]
async fn a_fork_bomb_stops_at_the_process_limit_and_the_host_goes_on() {
    let place = Place::new();
    let client = start(place.config(Sandbox::standard())).await;
    fork_bomb_stops_at_the_standard_limit(&client, "standard").await;
    // The host can still start processes.
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

    // A configured working directory that holds HOME is refused: the server could rewrite
    // HOME's files (without `cwd`, the server gets a private one instead: below).
    let mut config = place.config(Sandbox::standard());
    config.cwd = Some(place.home.clone());
    let err = StdioTransport::spawn(config).unwrap_err().to_string();
    assert!(err.contains("home directory") && err.contains("`cwd`"), "{err}");
}

#[tokio::test]
async fn a_server_started_from_home_works_in_a_private_folder_and_says_why() {
    let place = Place::new();
    // The host runs in the server's HOME (its own working directory), and `cwd` is not set.
    let host_cwd = std::env::current_dir().unwrap();
    let mut config = place.config(Sandbox::standard());
    config.cwd = None;
    config.env.insert("HOME".into(), host_cwd.to_string_lossy().into_owned());
    let preview = config.confined_working_dir().unwrap().unwrap();
    let transport = StdioTransport::spawn(config).unwrap();
    let working_dir = transport.working_dir().cloned().unwrap();
    assert_eq!(preview, working_dir, "the listing says what the start does");
    let WorkingDir::Private { requested, .. } = &working_dir else { panic!("{working_dir:?}") };
    assert_eq!(requested, &host_cwd);
    let shown = working_dir.to_string();
    assert!(shown.starts_with("private") && shown.contains("is your home directory"), "{shown}");

    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    let (cwd, _) = call(&client, "cwd", json!({})).await;
    let (temp, _) = call(&client, "env", json!({"name": "TMPDIR"})).await;
    assert_eq!(PathBuf::from(&cwd), Path::new(&temp).join("work"), "a folder of its own");
    assert_allowed(call(&client, "write_file", json!({"path": "note.txt", "text": "x"})).await, "its own folder");
    let escape = host_cwd.join(".mcp-sandbox-escape-test");
    assert_denied(call(&client, "write_file", json!({"path": escape, "text": "x"})).await, "the host's folder");
    assert!(!escape.exists());
    client.close().await.unwrap();
    assert!(!Path::new(&cwd).exists(), "removed when it stops");
}

#[tokio::test]
async fn a_confined_server_that_closes_its_stdout_is_seen_at_once_as_an_unconfined_one_is() {
    let place = Place::new();
    for (what, config) in [("unconfined", fixture("snoop", &[])), ("confined", place.config(Sandbox::standard()))] {
        let client = start(config).await;
        assert_eq!(call(&client, "close_stdout", json!({})).await, ("closing stdout".to_owned(), false), "{what}");
        let asked = Instant::now();
        let echo = client.call_tool("echo", args(json!({"text": "x"})), RequestOptions::default());
        // Bounded well below the call's own timeout: a regression fails here, not in a minute.
        let err = tokio::time::timeout(Duration::from_secs(5), echo).await.expect("not seen in 5 s").unwrap_err();
        assert!(asked.elapsed() < Duration::from_secs(1), "{what}: seen after {:?}: {err}", asked.elapsed());
        assert!(err.to_string().contains("closed its stdout"), "{what}: {err}");
        eprintln!("{what}: the closed stdout was seen {:?} after the call", asked.elapsed());
        client.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_write_grant_holding_a_protected_folder_is_refused_naming_both_and_what_to_write_instead() {
    let place = Place::new();
    let x = place.root.join("srv-x");
    for dir in ["cfg", "data", "logs"] {
        std::fs::create_dir_all(x.join(dir)).unwrap();
    }
    let sandbox = Sandbox { write: vec![x.clone()], protect: vec![x.join("cfg")], ..Sandbox::standard() };
    let err = StdioTransport::spawn(place.config(sandbox)).unwrap_err().to_string();
    let listed = format!("`write = [\"{}\", \"{}\"]`", x.join("data").display(), x.join("logs").display());
    assert!(err.contains(&format!("{}:", x.display())) && err.contains(&x.join("cfg").display().to_string()), "{err}");
    assert!(err.contains(&listed), "{err}");
}

/// `sh -c SCRIPT` in the standard sandbox, and the reason its start failed.
async fn confined_sh_failure(place: &Place, script: &str) -> String {
    let mut config = place.config(Sandbox::standard());
    config.command = "sh".into();
    config.args = vec!["-c".into(), script.into()];
    let transport = StdioTransport::spawn(config).unwrap();
    match Client::connect(transport, ClientOptions::default()).await {
        Ok(_) => panic!("{script}: started"),
        Err(e) => e.to_string(),
    }
}

/// As root, a confined server cannot leave a setuid or setgid file, or a file capability,
/// behind (its root is the real one: such a file in a folder others reach would be theirs to
/// use); copying with modes still works (ACLs are "not supported" rather than refused).
#[tokio::test]
async fn as_root_a_confined_server_makes_no_setuid_or_setgid_file() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the filter is for root's servers, and this test does not run as root");
        return;
    }
    let place = Place::new();
    let script = r#"
        touch plain && chmod 755 plain && echo "chmod plain: ok" >&2
        cp -p plain copied && install -m 644 plain installed && echo "cp -p, install: ok" >&2
        chmod 4755 plain 2>/dev/null && echo "chmod u+s: done" >&2
        chmod 2755 plain 2>/dev/null && echo "chmod g+s: done" >&2
        python3 -c 'import os; os.close(os.open("made", os.O_CREAT | os.O_WRONLY, 0o4755))' 2>/dev/null \
            && echo "created: $(stat -c %a made)" >&2
        python3 -c 'import os; os.setxattr("plain", "user.x", b"1")' 2>/dev/null && echo "xattr: done" >&2
        echo "mode $(stat -c %a plain)" >&2; exit 1"#;
    let err = confined_sh_failure(&place, script).await;
    assert!(err.contains("chmod plain: ok") && err.contains("cp -p, install: ok") && err.contains("mode 755"), "{err}");
    for refused in ["chmod u+s: done", "chmod g+s: done", "created: 4", "xattr: done"] {
        assert!(!err.contains(refused), "{refused}: {err}");
    }
}

#[tokio::test]
async fn a_confined_servers_failure_says_it_ran_confined_and_what_would_let_it_run() {
    let place = Place::new();
    // A real denial: a file of HOME's, which the sandbox does not grant (a file in HOME:
    // the file itself, never HOME).
    let err = confined_sh_failure(&place, "cat \"$HOME/notes.txt\"").await;
    let notes = place.home.join("notes.txt");
    assert!(err.contains("Permission denied") && err.contains("ran in the sandbox"), "{err}");
    assert!(
        err.contains(&format!("`read = [\"{}\"]`", notes.display())) && err.contains("`sandbox = \"off\"`"),
        "{err}"
    );
    // A secret: named as one.
    let err = confined_sh_failure(&place, "cat \"$HOME/.ssh/id_ed25519\"").await;
    assert!(err.contains(&format!("keeps {} from servers", place.home.join(".ssh").display())), "{err}");
    // A module not found (Python's words).
    let err = confined_sh_failure(&place, "echo \"ModuleNotFoundError: No module named 'helper'\" >&2; exit 1").await;
    assert!(err.contains("could not find the module helper") && err.contains("`read` entry"), "{err}");
    // Nothing to go on: still says that it ran confined, and what to try.
    let err = confined_sh_failure(&place, "exit 3").await;
    assert!(err.contains("status 3") && err.contains(mcp_sandbox::CONFINED_START_FAILED), "{err}");

    // A server that writes a line like the launcher's: its text is cleaned like any other.
    let err =
        confined_sh_failure(&place, r"printf '\000mcp-sandbox-launch: forged \033]52;c;eA==\007 done\n'; sleep 5")
            .await;
    assert!(
        err.contains("forged") && err.contains("done") && !err.contains('\u{1b}') && !err.contains('\u{7}'),
        "{err:?}"
    );

    // Unconfined, no word of a sandbox.
    let mut config = StdioConfig::new("sh", ["-c", "echo 'cat: /x: Permission denied' >&2; exit 1"]);
    config.close_grace = Duration::from_millis(200);
    let err = Client::connect(StdioTransport::spawn(config).unwrap(), ClientOptions::default()).await.unwrap_err();
    assert!(!err.to_string().contains("sandbox"), "{err}");
}

#[tokio::test]
async fn as_another_user_with_user_namespaces_the_sandbox_holds_and_bounds_processes() {
    let place = Place::new().readable_by_all();
    let listeners = Listeners::new();
    let client = start(place.config_as_nobody(Sandbox { network: false, ..Sandbox::standard() }, true)).await;
    assert_runs_as_nobody(&client).await;
    assert_denied(read(&client, &place.home.join(".ssh/id_ed25519")).await, "~/.ssh (readable by all)");
    assert_denied(read(&client, &place.home.join("notes.txt")).await, "other files in HOME");
    assert_eq!(read(&client, &place.work.join("input.txt")).await, ("work input".to_owned(), false));
    assert_allowed(call(&client, "write_file", json!({"path": place.work.join("out"), "text": "x"})).await, "work");
    listeners.assert_unreachable(&client, "nobody, network off").await;
    fork_bomb_stops_at_the_standard_limit(&client, "nobody").await;
    client.close().await.unwrap();
}

/// Without user namespaces (disabled, or refused by a security module), another user's server
/// is confined by Landlock alone: files and TCP as ever; no process limit, and UDP and
/// abstract sockets pass with the network off (the README says so).
#[tokio::test]
async fn as_another_user_without_user_namespaces_landlock_still_keeps_files_and_tcp() {
    let place = Place::new().readable_by_all();
    let listeners = Listeners::new();
    let client = start(place.config_as_nobody(Sandbox { network: false, ..Sandbox::standard() }, false)).await;
    assert_runs_as_nobody(&client).await;
    assert_denied(read(&client, &place.home.join(".ssh/id_ed25519")).await, "~/.ssh (readable by all)");
    assert_denied(read(&client, &place.data.join("oauth/oauth-tokens.json")).await, "the host's data directory");
    assert_eq!(read(&client, &place.work.join("input.txt")).await, ("work input".to_owned(), false));
    assert_denied(call(&client, "write_file", json!({"path": place.home.join(".bashrc"), "text": "x"})).await, "HOME");
    let (tcp, _) = listeners.ports();
    assert_denied(call(&client, "connect", json!({"port": tcp})).await, "TCP with the network off");
    assert!(listeners.tcp.accept().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock));
    // What the README says passes does: this is the path without a network namespace.
    let (_, udp) = listeners.ports();
    assert_allowed(call(&client, "udp_send", json!({"port": udp})).await, "UDP without user namespaces");
    // Abstract UNIX sockets outside the sandbox: Landlock's scope (kernel 6.12 on) keeps them.
    if mcp_sandbox::landlock_abi().is_some_and(|abi| abi >= 6) {
        let (text, is_error) =
            call(&client, "unix_connect", json!({"path": format!("@{}", listeners.unix_name)})).await;
        assert!(is_error && text.contains("not permitted"), "abstract UNIX socket: {text}");
    }
    client.close().await.unwrap();
}

/// The server runs as nobody when the tests run as root (else as the tests' own user).
async fn assert_runs_as_nobody(client: &Client) {
    let uid = |status: &str| {
        let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or_default();
        line.split_whitespace().nth(1).unwrap_or_default().to_owned()
    };
    let ours = uid(&std::fs::read_to_string("/proc/self/status").unwrap());
    let (status, _) = read(client, Path::new("/proc/self/status")).await;
    assert_eq!(uid(&status), if ours == "0" { "65534" } else { ours.as_str() }, "{status}");
}
