//! What the tests of real clients through `mcp-harness serve` share (serve_peers.rs for the
//! TypeScript and Python SDKs, serve_rmcp.rs for rmcp): the configuration they are served,
//! `serve` started as a host starts it, and the files that change that configuration while a
//! client is connected.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// Two fixture upstreams; `fx`'s `add` asks first, `two`'s `crash` is denied.
pub struct Setup {
    pub config: PathBuf,
    pub work: TempDir,
    pub data: TempDir,
    _dir: TempDir,
}

pub fn setup() -> Setup {
    let fx = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text = r#"
[servers.fx]
command = "$FX"
args = ["echo"]

[servers.two]
command = "$FX"
args = ["echo"]

[policy]
default = "allow"

[[policy.rules]]
server = "fx"
tool = "add"
decision = "confirm"

[[policy.rules]]
server = "two"
tool = "crash"
decision = "deny"
"#;
    std::fs::write(&config, text.replace("$FX", &fx)).unwrap();
    Setup { config, work: tempfile::tempdir().unwrap(), data: tempfile::tempdir().unwrap(), _dir: dir }
}

impl Setup {
    /// `mcp-harness --config FILE serve ARGS`, as a host's configuration starts it.
    pub fn serve_args(&self, args: &[&str]) -> Vec<String> {
        let mut all = vec![
            env!("CARGO_BIN_EXE_mcp-harness").to_owned(),
            "--config".to_owned(),
            self.config.display().to_string(),
            "serve".to_owned(),
        ];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        all
    }

    /// `serve --http 127.0.0.1:0`, running; its URL.
    pub fn serve_http(&self) -> (KillOnDrop, String) {
        let mut serve = Command::new(env!("CARGO_BIN_EXE_mcp-harness"));
        let serve_args = self.serve_args(&["--http", "127.0.0.1:0"]);
        serve
            .args(&serve_args[1..])
            .current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            .env("RUST_LOG", "error")
            .env("MCP_HARNESS_DATA_DIR", self.data.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = KillOnDrop(serve.spawn().unwrap());
        let stderr = child.0.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let url = rx.recv_timeout(Duration::from_secs(30)).expect("serve --http did not say where it listens");
        (child, url)
    }

    /// Writes `next.toml` (the same servers and `more`, with `more__echo`) and `prev.toml` (the
    /// servers as they are) beside the configuration; renamed over it in turn, they add a
    /// server while a client is connected and remove it again.
    pub fn changes(&self) -> (PathBuf, PathBuf) {
        let next = self.config.with_file_name("next.toml");
        let prev = self.config.with_file_name("prev.toml");
        let fx = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
        let added = format!("\n[servers.more]\ncommand = \"{fx}\"\nargs = [\"echo\"]\n");
        let text = std::fs::read_to_string(&self.config).unwrap();
        std::fs::write(&next, text.clone() + &added).unwrap();
        std::fs::write(&prev, text).unwrap();
        (next, prev)
    }
}

/// A child process killed and reaped when dropped.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
