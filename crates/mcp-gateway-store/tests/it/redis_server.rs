//! A real `redis-server` for a test: on a free loopback port, in a temporary directory, with
//! nothing saved; killed when dropped. It can be stopped and started again on the same port.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server binary: `MCP_REDIS_SERVER` (what `cargo xtask test` sets, having found it), else
/// `redis-server` on `PATH`.
fn binary() -> PathBuf {
    std::env::var_os("MCP_REDIS_SERVER").map_or_else(|| PathBuf::from("redis-server"), PathBuf::from)
}

pub struct RedisServer {
    pub port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    child: Option<Child>,
}

impl RedisServer {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// With these further arguments (`--requirepass x`, say).
    pub fn start_with(extra: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let extra = extra.iter().map(|a| (*a).to_owned()).collect();
        let mut server = Self { port, dir: tempfile::tempdir().unwrap(), extra, child: None };
        server.restart();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills it (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops (`true`: SIGSTOP) or resumes (SIGCONT) it: a Redis that hangs without closing
    /// its connections.
    pub fn freeze(&self, stop: bool) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let signal = if stop { "-STOP" } else { "-CONT" };
        assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
    }

    /// Starts it (again) on its port, and waits until it accepts connections.
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new(binary())
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => panic!(
                    "redis-server not found: install Debian's redis-server (apt-get install -y redis-server) or set MCP_REDIS_SERVER"
                ),
                _ => panic!("redis-server did not start: {e}"),
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not listen on port {} within 10 s", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.freeze(false);
        }
        self.kill();
    }
}
