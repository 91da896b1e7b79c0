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
    ///
    /// The port is picked free, then let go before `redis-server` takes it, so another test
    /// may take it first: then ours exits, and it is tried again on another port.
    pub fn start_with(extra: &[&str]) -> Self {
        let extra: Vec<String> = extra.iter().map(|a| (*a).to_owned()).collect();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let mut server = Self { port, dir: tempfile::tempdir().unwrap(), extra: extra.clone(), child: None };
            if server.try_start() {
                return server;
            }
        }
        panic!("redis-server did not start on any of five free ports");
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

    /// Starts it (again) on its port, and waits until it answers there.
    pub fn restart(&mut self) {
        assert!(self.try_start(), "redis-server could not take port {} again", self.port);
    }

    /// Starts it on its port; `false` when it exited (the port was taken). Ready means the
    /// process answering on the port is ours: a connection alone could reach another test's.
    fn try_start(&mut self) -> bool {
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
        let pid = child.id();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(child) = self.child.as_mut()
                && child.try_wait().ok().flatten().is_some()
            {
                self.child = None;
                return false;
            }
            let password = self.extra.iter().position(|a| a == "--requirepass").and_then(|i| self.extra.get(i + 1));
            if answering_pid(self.port, password.map(String::as_str)) == Some(pid) {
                return true;
            }
            assert!(Instant::now() < deadline, "redis-server did not answer on port {} within 10 s", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The `process_id` of the Redis answering on `port`, if one answers, authenticating first
/// with `password` when the server wants one.
fn answering_pid(port: u16, password: Option<&str>) -> Option<u32> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    let auth = password.map(|p| format!("AUTH {p}\r\n")).unwrap_or_default();
    stream.write_all(format!("{auth}INFO server\r\n").as_bytes()).ok()?;
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        text.extend_from_slice(&buf[..n]);
        let seen = String::from_utf8_lossy(&text);
        if seen.contains("-NOAUTH") || seen.contains("-WRONGPASS") || seen.contains("-LOADING") {
            return None;
        }
        if let Some(at) = seen.find("process_id:")
            && let Some(line) = seen[at + "process_id:".len()..].split_once("\r\n")
        {
            return line.0.trim().parse().ok();
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
