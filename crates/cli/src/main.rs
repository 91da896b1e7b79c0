//! `mcp-harness`: the command-line agent.
//!
//! Exit codes: 0 success; 1 the called tool reported an error (`isError`); 2 usage,
//! configuration, connection or refusal errors (`servers` and `tools` report servers that
//! failed to connect, and still exit 0).

mod agent;
mod approve;
mod auth;
mod call;
mod config;
mod demo_server;
mod output;
mod progress;
mod runtime;
mod sandbox;
mod session;
mod tools;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::output::{OutputError, emit};

const CONFIG_HELP: &str = "\
CONFIGURATION
  The configuration lives in your configuration directory, by default
  ~/.config/mcp-harness/config.toml (config.json if only that exists; $XDG_CONFIG_HOME is honoured).
  --config PATH or the environment variable MCP_HARNESS_CONFIG choose another file. A file inside
  the current directory is refused (an agent working here could edit it, and it decides which
  commands run) unless --allow-workspace-config is given.

  TOML:
    [servers.git]
    command = \"uvx\"                  # a stdio server; or url = \"https://...\" (+ headers) for a remote one
    args = [\"mcp-server-git\"]
    env = { GIT_PAGER = \"cat\" }
    cwd = \"/path/to/repo\"            # relative paths are relative to the configuration file
    enabled = true
    startup_timeout_s = 30           # spawn + initialize + tools/list
    tool_timeout_s = 60
    sandbox = { write = [\"/path/to/repo\"], network = false }  # standard, extended; or \"off\"
    sandbox_required = true          # never run it unconfined (a kernel without Landlock)

    [sandbox]                        # the default for every stdio server
    default = \"standard\"           # read the system, write the cwd and a private temp; no secrets
    required = false

    [policy]
    default = \"confirm\"              # allow | confirm | deny
    [[policy.rules]]
    server = \"git\"                   # glob with * and ?; \"@builtin\" for built-in tools
    tool = \"git_status\"
    decision = \"allow\"

    [servers.docs]                   # a remote server: Streamable HTTP (falling back to the
    url = \"https://docs.example/mcp\" # 2024-11-05 HTTP+SSE transport), or ws:// / wss://
    headers = { X-Team = \"core\" }
    bearer_token_env_var = \"DOCS_TOKEN\" # sent as Authorization: Bearer $DOCS_TOKEN
    type = \"sse\"                     # optional: only the 2024-11-05 HTTP+SSE transport

    [servers.tracker]                # a server protected with OAuth: `mcp-harness login tracker`
    url = \"https://tracker.example/mcp\"
    [servers.tracker.oauth]          # optional; every http(s) server without credentials uses OAuth
    client_id = \"my-client\"          # pre-registered client (else a metadata document or registration)
    client_secret_env_var = \"TRACKER_SECRET\"
    client_metadata_url = \"https://example.com/client.json\"  # client ID metadata document
    issuer = \"https://login.example.com\"  # send credentials to this authorization server only
    grant = \"client_credentials\"     # machine clients (default: authorization_code, a browser login)
    private_key_file = \"key.pem\"     # private_key_jwt (ES256) for client_credentials
    enabled = false                  # no OAuth for this server

  Claude Desktop's JSON ({\"mcpServers\": {\"name\": {\"command\", \"args\", \"env\"} or {\"url\"}}}) is
  read as it is.

EXIT CODES
  0 success, 1 the tool reported an error, 2 usage, configuration, connection or refusal errors.
  `servers` and `tools` report servers that failed to connect and still exit 0.";

/// An MCP host: connects to the configured MCP servers and offers their tools.
#[derive(Debug, Parser)]
#[command(name = "mcp-harness", version, after_long_help = CONFIG_HELP)]
struct Cli {
    /// Configuration file (TOML, or Claude Desktop style JSON).
    #[arg(long, global = true, value_name = "PATH", env = config::CONFIG_ENV)]
    config: Option<PathBuf>,
    /// Accept a configuration file inside the current directory (only if you trust it: it decides
    /// which commands run).
    #[arg(long, global = true)]
    allow_workspace_config: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Connect to every enabled server and report how each one fared.
    Servers {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the tools offered to the model, with the policy's decision for each.
    Tools {
        /// Print the pool as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool by its model-visible name (as `tools` lists it).
    Call {
        /// The tool's name, for example mcp__git__git_status.
        name: String,
        /// The arguments, a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// Approve a tool whose policy is `confirm` without asking.
        #[arg(long)]
        yes: bool,
        /// Print the raw CallToolResult as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one task with the agent until it is done.
    Run {
        /// What to do.
        task: String,
        #[command(flatten)]
        agent: agent::AgentArgs,
    },
    /// Talk with the agent, one task per line (`/exit` or end of input to stop).
    Chat {
        #[command(flatten)]
        agent: agent::AgentArgs,
    },
    /// Log in to a remote server with OAuth (opens a browser; the tokens are kept in your data
    /// directory).
    Login {
        /// The server's name in the configuration.
        server: String,
        /// Only print the URL; do not try to open a browser.
        #[arg(long)]
        no_browser: bool,
    },
    /// Forget the OAuth tokens kept for a server.
    Logout {
        /// The server's name in the configuration.
        server: String,
    },
    /// The offline demo: our notes server and a scripted model (no configuration, no API key).
    /// With --provider anthropic|openai and a key, a real model does the same task.
    Demo {
        #[command(flatten)]
        agent: agent::AgentArgs,
    },
    /// The demo's notes server over stdio (`demo` runs it).
    #[command(hide = true)]
    DemoServer,
}

/// The process's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    ToolError,
}

fn main() -> ExitCode {
    sandbox::launch_if_asked();
    let cli = Cli::parse();
    if let Command::DemoServer = cli.command {
        // Synchronous and silent: its stdout is the protocol.
        demo_server::serve();
        return ExitCode::SUCCESS;
    }
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&anyhow::anyhow!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(run(cli));
    // Children are closed by the commands; don't wait on stray blocking tasks (a prompt).
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::ToolError) => ExitCode::from(1),
        Err(e) if e.downcast_ref::<OutputError>().is_some_and(OutputError::is_broken_pipe) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// `demo` and `demo-server` return before the configuration is read.
fn unreachable_demo() -> anyhow::Result<Outcome> {
    Err(anyhow::anyhow!("internal error: demo reached the configured commands"))
}

fn fail(error: &anyhow::Error) -> ExitCode {
    let _ = emit(&mut std::io::stderr(), &format!("error: {error:#}\n"));
    ExitCode::from(2)
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

async fn run(cli: Cli) -> anyhow::Result<Outcome> {
    if let Command::Demo { agent } = &cli.command {
        return agent::demo_command(agent).await;
    }
    let config = session::load_config(cli.config.as_deref(), cli.allow_workspace_config)?;
    match cli.command {
        Command::Demo { .. } | Command::DemoServer => unreachable_demo(),
        Command::Run { task, agent } => agent::run_command(config, cli.allow_workspace_config, &task, &agent).await,
        Command::Chat { agent } => agent::chat_command(config, cli.allow_workspace_config, &agent).await,
        Command::Servers { json } => session::servers_command(config, json).await,
        Command::Tools { json } => tools::tools_command(config, json).await,
        Command::Call { name, args, yes, json } => call::call_command(config, &name, &args, yes, json).await,
        Command::Login { server, no_browser } => auth::login_command(config, &server, !no_browser).await,
        Command::Logout { server } => auth::logout_command(config, &server).await,
    }
}
