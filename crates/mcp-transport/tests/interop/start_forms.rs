//! The common ways a server is started, each confined under `standard` with no entry of the
//! user's, from a project folder and from the home directory of a fresh user (no caches, no
//! `~/.npm`, nothing): `npx`, `uvx`, `uv run` on a project, `pipx run`, `node dist/index.js` of a
//! throwaway project with its own `node_modules`, and `python server.py` importing a module
//! beside it. Every one connects and answers a call, and a key planted in that HOME stays
//! unreadable: a probe that node (`NODE_OPTIONS=--require`) and Python (`sitecustomize`) load
//! into every process of the server tries to read it and reports on stderr. The probe's own
//! folder is the one `read` entry (it holds nothing else).
//!
//! "From the home directory": the host's working directory is HOME and the server has no `cwd`
//! (a person running the CLI at `~`); the test runs itself again there, as a child process,
//! since a test cannot move its own process.
//!
//! These download from npm and PyPI (that is the point: a fresh user has no caches), so they
//! are interop tests. `uv`, `uvx` and `pipx` come from the peers' virtual environment.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_client::{Client, ClientOptions, RequestOptions};
use mcp_sandbox::Sandbox;
use mcp_sandbox::launcher::Launcher;
use mcp_transport::{StdioConfig, StdioSandbox, StdioTransport};
use serde_json::json;

use super::{args, peers_dir};

/// Set in the copy of a test that runs with the host in HOME.
const IN_HOME: &str = "MCP_TEST_HOST_IN_HOME";
/// What the probe marks its report with.
const PROBE: &str = "SECRET-PROBE";
/// How long a start may take: the first `npx` or `uvx` of a fresh user downloads.
const STARTUP: Duration = Duration::from_secs(240);
/// How long the copy of a test in HOME may take.
const CHILD_LIMIT: Duration = Duration::from_secs(600);

/// Where a form runs: a project folder as its working directory, or the host in HOME.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    Project,
    Home,
}

/// The world of one run: a fresh HOME with a planted key, throwaway projects and the probes.
struct World {
    _root: Option<tempfile::TempDir>,
    home: PathBuf,
    secret: PathBuf,
    probes: PathBuf,
    projects: PathBuf,
}

impl World {
    /// A fresh world; `home`: the one the parent made (the host runs in it).
    fn new(home: Option<PathBuf>) -> Self {
        let (root, base) = match home.as_ref().and_then(|h| h.parent()) {
            Some(base) => (None, base.to_path_buf()),
            None => {
                let root = tempfile::tempdir().unwrap();
                let base = root.path().to_path_buf();
                (Some(root), base)
            }
        };
        let home = base.join("home");
        let secret = home.join(".ssh/id_x");
        if !secret.exists() {
            std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
            std::fs::write(&secret, "-----BEGIN OPENSSH PRIVATE KEY----- planted").unwrap();
        }
        let probes = base.join("probes");
        std::fs::create_dir_all(probes.join("py")).unwrap();
        std::fs::write(probes.join("probe.cjs"), NODE_PROBE).unwrap();
        std::fs::write(probes.join("py/sitecustomize.py"), PYTHON_PROBE).unwrap();
        let projects = base.join("projects");
        std::fs::create_dir_all(&projects).unwrap();
        Self { _root: root, home, secret, probes, projects }
    }

    /// `config` confined under `standard` (plus the probes' folder), with HOME here, the probes
    /// loaded, and working in `dir` (`None`: the host's working directory, HOME).
    fn confine(&self, mut config: StdioConfig, dir: Option<&Path>) -> StdioConfig {
        let launcher = mcp_fixtures::launcher_binary().unwrap_or_else(|e| panic!("{e}"));
        let sandbox = Sandbox { read: vec![self.probes.clone()], ..Sandbox::standard() };
        config.sandbox =
            Some(Box::new(StdioSandbox { sandbox, launcher: Launcher::new(launcher, Vec::<String>::new()) }));
        config.cwd = dir.map(Path::to_path_buf);
        for name in mcp_fixtures::REGISTRY_VARIABLES {
            if let Ok(value) = std::env::var(name) {
                config.env.insert((*name).to_owned(), value);
            }
        }
        let probe = self.probes.join("probe.cjs");
        config.env.insert("HOME".into(), self.home.to_string_lossy().into_owned());
        config.env.insert("NODE_OPTIONS".into(), format!("--require={}", probe.display()));
        config.env.insert("PYTHONPATH".into(), self.probes.join("py").to_string_lossy().into_owned());
        config.env.insert("MCP_TEST_SECRET".into(), self.secret.to_string_lossy().into_owned());
        config.close_grace = Duration::from_secs(2);
        config
    }
}

const NODE_PROBE: &str = r#"const fs = require("fs");
try { fs.readFileSync(process.env.MCP_TEST_SECRET); process.stderr.write("SECRET-PROBE node " + process.pid + ": READ\n"); }
catch (e) { process.stderr.write("SECRET-PROBE node " + process.pid + ": " + e.code + "\n"); }
"#;

const PYTHON_PROBE: &str = r#"import os, sys
_secret = os.environ.get("MCP_TEST_SECRET")
if _secret:
    try:
        open(_secret).read()
        sys.stderr.write("SECRET-PROBE python %d: READ\n" % os.getpid())
    except OSError as e:
        sys.stderr.write("SECRET-PROBE python %d: %s\n" % (os.getpid(), "EACCES" if e.errno == 13 else e.errno))
"#;

/// Runs the form: connects within [`STARTUP`], calls `tool`, checks its answer, and checks that
/// the probe ran in the server and was refused the key.
async fn run(label: &str, config: StdioConfig, tool: &str, arguments: serde_json::Value, expect: &str) {
    let transport = StdioTransport::spawn(config).unwrap_or_else(|e| panic!("{label}: {e}"));
    let stderr = transport.stderr_tail();
    let working_dir = transport.working_dir().map(ToString::to_string);
    let options = ClientOptions { startup_timeout: STARTUP, request_timeout: STARTUP, ..ClientOptions::default() };
    let started = Instant::now();
    let client = match Client::connect(transport, options).await {
        Ok(client) => client,
        Err(e) => panic!("{label}: the handshake failed: {e}\nits stderr:\n{}", stderr.lines().join("\n")),
    };
    eprintln!(
        "{label}: connected in {:.1} s; working directory: {}",
        started.elapsed().as_secs_f64(),
        working_dir.unwrap_or_default()
    );
    let result = client.call_tool(tool, args(arguments), RequestOptions::default()).await.unwrap();
    assert!(!result.is_error() && result.joined_text().contains(expect), "{label}: {}", result.joined_text());
    client.close().await.unwrap();
    let reports: Vec<String> = stderr.lines().into_iter().filter(|l| l.contains(PROBE)).collect();
    assert!(!reports.is_empty(), "{label}: the probe did not run in the server: {:?}", stderr.lines());
    assert!(reports.iter().all(|r| r.ends_with(": EACCES")), "{label}: the key was readable: {reports:?}");
}

/// Runs `body` from a project folder here, and from HOME in a copy of this test started there.
/// In the copy, runs `body` from HOME only.
async fn from_both<F, Fut>(test: &str, body: F)
where
    F: Fn(World, From) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if std::env::var_os(IN_HOME).is_some() {
        let home = std::env::current_dir().unwrap();
        body(World::new(Some(home)), From::Home).await;
        return;
    }
    body(World::new(None), From::Project).await;
    // The host in a fresh HOME: a copy of this test, started there. Its output goes to a file
    // (its own `test result` line must not count as another test's), shown when it fails.
    let world = World::new(None);
    std::fs::create_dir_all(&world.home).unwrap();
    let log_path = world.projects.join("copy-in-home.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(IN_HOME, "1")
        .current_dir(&world.home)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + CHILD_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let output = std::fs::read_to_string(&log_path).unwrap_or_default().replace("test result:", "(in HOME) result:");
    match status {
        Some(status) if status.success() => {
            for line in output.lines().filter(|l| l.contains("connected in")) {
                eprintln!("{line}");
            }
        }
        Some(status) => panic!("{test} from HOME failed ({status}):\n{output}"),
        None => panic!("{test} from HOME ran past {CHILD_LIMIT:?}:\n{output}"),
    }
}

fn tool(name: &str) -> PathBuf {
    let path = peers_dir().join("py/bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: `cargo xtask peers` installs it when xtask/peers/requirements.txt pins uv and pipx",
        path.display()
    );
    path
}

/// A throwaway project folder (a `package.json` and nothing else): where a person works.
fn project_folder(world: &World, name: &str) -> PathBuf {
    let dir = world.projects.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("package.json"), "{\"private\": true}\n").unwrap();
    dir
}

#[tokio::test]
async fn npx_everything_from_a_project_and_from_a_fresh_home() {
    from_both("start_forms::npx_everything_from_a_project_and_from_a_fresh_home", |world, from| async move {
        let cwd = (from == From::Project).then(|| project_folder(&world, "work"));
        let config = StdioConfig::new("npx", ["-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"]);
        run("npx", world.confine(config, cwd.as_deref()), "echo", json!({"message": "hi"}), "Echo: hi").await;
        // The cache a fresh user lacked was made, for the user alone.
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(world.home.join(".npm")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    })
    .await;
}

#[tokio::test]
async fn uvx_time_from_a_project_and_from_a_fresh_home() {
    from_both("start_forms::uvx_time_from_a_project_and_from_a_fresh_home", |world, from| async move {
        let cwd = (from == From::Project).then(|| project_folder(&world, "work"));
        let uvx = tool("uvx");
        let config = StdioConfig::new(uvx.to_string_lossy(), ["mcp-server-time@2026.10.19", "--local-timezone", "UTC"]);
        run("uvx", world.confine(config, cwd.as_deref()), "get_current_time", json!({"timezone": "UTC"}), "UTC").await;
    })
    .await;
}

#[tokio::test]
async fn pipx_run_time_from_a_project_and_from_a_fresh_home() {
    from_both("start_forms::pipx_run_time_from_a_project_and_from_a_fresh_home", |world, from| async move {
        let cwd = (from == From::Project).then(|| project_folder(&world, "work"));
        let pipx = tool("pipx");
        let config = StdioConfig::new(
            pipx.to_string_lossy(),
            ["run", "--spec", "mcp-server-time==2026.10.19", "mcp-server-time", "--local-timezone", "UTC"],
        );
        run("pipx run", world.confine(config, cwd.as_deref()), "get_current_time", json!({"timezone": "UTC"}), "UTC")
            .await;
    })
    .await;
}

/// The MCP quickstart's form: `uv --directory PROJECT run server.py`, the project declaring its
/// dependencies and its server importing a module beside it.
#[tokio::test]
async fn uv_run_on_a_project_from_the_project_and_from_a_fresh_home() {
    from_both("start_forms::uv_run_on_a_project_from_the_project_and_from_a_fresh_home", |world, from| async move {
        let project = world.projects.join("weather");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            project.join("pyproject.toml"),
            "[project]\nname = \"weather\"\nversion = \"0.1.0\"\nrequires-python = \">=3.10\"\n\
             dependencies = [\"mcp==2.3.0\"]\n",
        )
        .unwrap();
        std::fs::write(project.join("server.py"), PYTHON_SERVER).unwrap();
        std::fs::write(project.join("helper.py"), PYTHON_HELPER).unwrap();
        let uv = tool("uv");
        let dir = project.to_string_lossy().into_owned();
        let config = StdioConfig::new(uv.to_string_lossy(), ["--directory", dir.as_str(), "run", "server.py"]);
        let cwd = (from == From::Project).then_some(project.as_path());
        run("uv run", world.confine(config, cwd), "shout", json!({"text": "hi"}), "HI!").await;
    })
    .await;
}

/// `node dist/index.js` of a project with its own `node_modules` (the SDK and zod, copied from
/// the peers), as a locally built server is started from a Claude Desktop entry.
#[tokio::test]
async fn node_script_of_a_project_with_its_node_modules_from_the_project_and_from_a_fresh_home() {
    from_both(
        "start_forms::node_script_of_a_project_with_its_node_modules_from_the_project_and_from_a_fresh_home",
        |world, from| async move {
            let app = world.projects.join("app");
            std::fs::create_dir_all(app.join("dist")).unwrap();
            std::fs::write(app.join("package.json"), "{\"name\": \"app\", \"private\": true, \"type\": \"module\"}\n")
                .unwrap();
            std::fs::write(app.join("dist/index.js"), NODE_SERVER).unwrap();
            copy_tree(&peers_dir().join("node/node_modules"), &app.join("node_modules"));
            let script = app.join("dist/index.js").to_string_lossy().into_owned();
            let config = StdioConfig::new("node", [script]);
            let cwd = (from == From::Project).then_some(app.as_path());
            run("node dist/index.js", world.confine(config, cwd), "shout", json!({"text": "hi"}), "HI!").await;
        },
    )
    .await;
}

/// `python server.py` where `server.py` imports `helper.py` beside it (a loose folder, no
/// project file), with the peers' Python, which has the SDK.
#[tokio::test]
async fn python_script_importing_a_sibling_module_from_a_project_and_from_a_fresh_home() {
    from_both(
        "start_forms::python_script_importing_a_sibling_module_from_a_project_and_from_a_fresh_home",
        |world, from| async move {
            let folder = world.projects.join("loose");
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("server.py"), PYTHON_SERVER).unwrap();
            std::fs::write(folder.join("helper.py"), PYTHON_HELPER).unwrap();
            let python = peers_dir().join("py/bin/python");
            let script = folder.join("server.py").to_string_lossy().into_owned();
            let config = StdioConfig::new(python.to_string_lossy(), [script]);
            let cwd = (from == From::Project).then(|| project_folder(&world, "work"));
            run("python server.py", world.confine(config, cwd.as_deref()), "shout", json!({"text": "hi"}), "HI!").await;
        },
    )
    .await;
}

const PYTHON_SERVER: &str = r#"from mcp.server.mcpserver import MCPServer

import helper

mcp = MCPServer("weather")


@mcp.tool()
def shout(text: str) -> str:
    """Shout the text."""
    return helper.shout(text)


if __name__ == "__main__":
    mcp.run()
"#;

const PYTHON_HELPER: &str = "def shout(text: str) -> str:\n    return text.upper() + \"!\"\n";

const NODE_SERVER: &str = r#"import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "app", version: "0.1.0" });
server.tool("shout", { text: z.string() }, async ({ text }) => ({
  content: [{ type: "text", text: text.toUpperCase() + "!" }],
}));
await server.connect(new StdioServerTransport());
"#;

/// Copies a tree (hard links where the filesystem allows), links as links.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&source, &target);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source).unwrap(), &target).unwrap();
        } else if std::fs::hard_link(&source, &target).is_err() {
            std::fs::copy(&source, &target).unwrap();
        }
    }
}
