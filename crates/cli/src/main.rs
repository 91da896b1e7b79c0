//! `mcp-harness`: the command-line agent.
//!
//! Exit codes: 0 success; 1 the called tool reported an error (`isError`); 2 usage,
//! configuration, connection or refusal errors (`servers`, `tools`, `resources` and `prompts`
//! report servers that failed to connect, and still exit 0); 130, 143, 129 ended by SIGINT, SIGTERM, SIGHUP (the
//! servers closed first).

mod agent;
mod approve;
mod auth;
mod call;
mod chat_prompts;
mod content;
mod demo_server;
mod elicit;
mod help;
mod host;
mod mcp;
mod output;
mod progress;
mod serve;
mod session;
mod signals;
mod telemetry;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use mcp_host::config::{self, ConfigPath};

use crate::output::OutputError;

const CONFIG_HELP: &str = "\
CONFIGURATION
  The configuration lives in your configuration directory, by default
  ~/.config/mcp-harness/config.toml (config.json if only that exists; $XDG_CONFIG_HOME is honoured).
  --config PATH or the environment variable MCP_HARNESS_CONFIG choose another file: our TOML, or another
  host's file as it is (Claude Desktop, Claude Code, Cursor, VS Code, Codex). A file inside the current
  directory is refused (an agent working here could edit it, and it decides which commands run) unless
  --allow-workspace-config is given; your configuration directory is trusted wherever you run.

  `mcp-harness mcp add|list|get|remove|enable|disable|import` manage the servers;
  `mcp-harness help config` prints every key of the file (docs/configuration.md).

EXIT CODES
  0    success
  1    the called tool reported an error (`call`)
  2    usage, configuration, connection or refusal errors (`servers`, `tools`, `resources` and
       `prompts` report servers that failed to connect and still exit 0)
  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM, 129 by SIGHUP; the servers were closed first";

/// The whole command line, for completions, the manual page and `help`.
pub(crate) fn command_line() -> clap::Command {
    Cli::command()
}

/// An MCP host: connects to the configured MCP servers and offers their tools.
#[derive(Debug, Parser)]
#[command(name = "mcp-harness", version, after_long_help = CONFIG_HELP, disable_help_subcommand = true)]
struct Cli {
    /// Configuration file: our TOML, or another host's file as it is (`help config`).
    #[arg(long, global = true, value_name = "PATH", env = config::CONFIG_ENV)]
    config: Option<PathBuf>,
    /// Accept a configuration file inside the current directory (only if you trust it: it decides
    /// which commands run).
    #[arg(long, global = true)]
    allow_workspace_config: bool,
    #[command(subcommand)]
    command: Command,
}

// `defer`: a subcommand's arguments are built only when it is the one run (or for help, the
// manual and completions, which build the whole tree): a start builds one, not all fifteen.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Command {
    /// Connect to every enabled server and report how each one fared.
    Servers {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the tools offered to the model, with the policy's decision and the exposure of each.
    Tools {
        /// Print the pool as JSON.
        #[arg(long)]
        json: bool,
        /// Rank the tools tool search can find for QUERY, with scores; `-` reads one query per
        /// line from stdin and prints one JSON line per query.
        #[arg(long, value_name = "QUERY")]
        search: Option<String>,
        /// Most results per query with --search (default 5, at most 25).
        #[arg(long, value_name = "N", requires = "search")]
        limit: Option<usize>,
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
    /// List the resources and resource templates the servers offer.
    Resources {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read one resource of a server (text is printed; blobs are summarized, --json has them).
    Read {
        /// The server's name in the configuration.
        server: String,
        /// The resource's URI, as `resources` lists it (or filled in from a template).
        uri: String,
        /// Approve a resource whose policy is `confirm` without asking.
        #[arg(long)]
        yes: bool,
        /// Print the raw ReadResourceResult as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the prompts the servers offer, with their arguments (`name?` is optional).
    Prompts {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Get one prompt of a server with its arguments and print its messages.
    Prompt {
        /// The server's name in the configuration.
        server: String,
        /// The prompt's name, as `prompts` lists it.
        name: String,
        /// An argument, KEY=VALUE (repeat for more).
        #[arg(long = "arg", value_name = "KEY=VALUE")]
        args: Vec<String>,
        /// Print the raw GetPromptResult as JSON.
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
    /// Talk with the agent, one task per line (`/exit` or end of input to stop; `/mcp` for the
    /// servers, `/prompts`, `/SERVER:PROMPT key=value ...` to send a server's prompt, `/complete
    /// SERVER:PROMPT ARG [PREFIX]` for argument values).
    Chat {
        #[command(flatten)]
        agent: agent::AgentArgs,
    },
    /// Offer every configured server's tools, under this configuration's policy, to another
    /// host as one MCP server: over stdio (a host's configuration says `"command":
    /// "mcp-harness", "args": ["serve"]`), or Streamable HTTP at /mcp with --http.
    Serve {
        #[command(flatten)]
        args: serve::ServeArgs,
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
    /// Manage the configured servers, or bring them over from another host.
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; `mcp-harness man | man -l -`).
    Man,
    /// Print help: of a command (`help mcp add`), or `help config` for every configuration key.
    Help {
        /// A command, or `config`.
        topic: Vec<String>,
    },
    /// The demo's notes server over stdio (`demo` runs it).
    #[command(hide = true)]
    DemoServer,
}

impl Command {
    /// Whether the command connects, asks the servers once and exits (no agent, no person to
    /// wait for but an approval, which runs on a blocking thread).
    fn is_one_shot(&self) -> bool {
        matches!(
            self,
            Self::Servers { .. }
                | Self::Tools { .. }
                | Self::Call { .. }
                | Self::Resources { .. }
                | Self::Read { .. }
                | Self::Prompts { .. }
                | Self::Prompt { .. }
        )
    }
}

/// The process's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    ToolError,
}

fn main() -> ExitCode {
    mcp_host::sandbox::launch_if_asked();
    let mut matches = Cli::command().get_matches();
    // Before the values are taken out of the matches (taking them spares a copy of them all).
    let origin = config_origin(&matches);
    let cli = match Cli::from_arg_matches_mut(&mut matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let at = ConfigPath::new(cli.config.clone(), origin, cli.allow_workspace_config);
    let synchronous = match &cli.command {
        // Synchronous and silent: its stdout is the protocol.
        Command::DemoServer => {
            demo_server::serve();
            Some(Ok(Outcome::Success))
        }
        Command::Help { topic } => Some(help::help(topic)),
        Command::Completions { shell } => Some(help::completions(*shell)),
        Command::Man => Some(help::man()),
        _ => None,
    };
    if let Some(result) = synchronous {
        return ExitCode::from(status(result));
    }
    init_logging();
    approve::remember_terminal();
    let mut builder = if cli.command.is_one_shot() {
        // Connect, ask, print, close: one thread drives it all. A multi-threaded runtime would
        // start a worker per core first and hand every answer from one thread to another.
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return ExitCode::from(fail(&anyhow::anyhow!("cannot start the async runtime: {e}"))),
    };
    let result = runtime.block_on(async {
        signals::install().map_err(|e| anyhow::anyhow!("cannot listen for signals: {e}"))?;
        tokio::select! {
            result = run(cli, at) => result,
            // Commands close their servers when a signal comes; one that takes too long is
            // dropped, which kills its servers' process groups.
            signal = async {
                let signal = signals::wait().await;
                match signals::drain_limit() {
                    // A draining command (`serve --http`) gets its drain's time; a second
                    // signal ends it at once.
                    Some(limit) => {
                        tokio::select! {
                            () = signals::second() => {}
                            () = tokio::time::sleep(limit + signals::WIND_DOWN) => {}
                        }
                    }
                    None => tokio::time::sleep(signals::WIND_DOWN).await,
                }
                signal
            } => Err(signals::Interrupted(signal).into()),
        }
    });
    // Children are closed by the commands; don't wait on stray blocking tasks (a prompt).
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // The last spans (the task's, the calls') end with the command: exported now, bounded.
    telemetry::shutdown();
    if let Some(signal) = signals::received() {
        // A question the signal cut short left the terminal raw, its cursor hidden.
        approve::restore_terminal();
        if signals::drained() && result.is_ok() {
            // Asked to stop and stopped as asked: in-flight calls were answered, servers closed.
            let _ = output::stderr(&format!("{} received: drained and stopped\n", signal.name()));
            return ExitCode::SUCCESS;
        }
        // Whatever the command made of it, a script must tell an interrupted task from a
        // finished one.
        let _ = output::stderr(&format!("{}\n", signals::Interrupted(signal)));
        return ExitCode::from(signal.exit_status());
    }
    ExitCode::from(status(result))
}

/// Where `--config`'s value came from: the flag, its environment variable, or neither.
fn config_origin(matches: &clap::ArgMatches) -> config::Origin {
    // A global argument is recorded where it was given: look down the chain of subcommands.
    let mut current = Some(matches);
    while let Some(m) = current {
        match m.value_source("config") {
            Some(clap::parser::ValueSource::CommandLine) => return config::Origin::Flag,
            Some(clap::parser::ValueSource::EnvVariable) => return config::Origin::Env,
            _ => current = m.subcommand().map(|(_, sub)| sub),
        }
    }
    config::Origin::Default
}

/// The exit status of a command's outcome (reporting an error on stderr).
fn status(result: anyhow::Result<Outcome>) -> u8 {
    match result {
        Ok(Outcome::Success) => 0,
        Ok(Outcome::ToolError) => 1,
        Err(e) if e.downcast_ref::<OutputError>().is_some_and(OutputError::is_broken_pipe) => 0,
        Err(e) => fail(&e),
    }
}

/// `demo`, `mcp` and the synchronous commands return before the configuration is read.
fn unreachable_demo() -> anyhow::Result<Outcome> {
    Err(anyhow::anyhow!("internal error: a command that reads no configuration reached the configured commands"))
}

/// The most of an error's text printed: it may carry a server's message, megabytes long.
const MAX_ERROR_CHARS: usize = 8_000;

fn fail(error: &anyhow::Error) -> u8 {
    say_error(error);
    2
}

/// Prints `error` on stderr, cut to [`MAX_ERROR_CHARS`].
pub(crate) fn say_error(error: &anyhow::Error) {
    let text = mcp_safety::text::cut(&format!("{error:#}"), MAX_ERROR_CHARS);
    let _ = output::stderr(&format!("error: {text}\n"));
}

fn init_logging() {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let logs = tracing_subscriber::fmt::layer()
        // Log lines quote servers: they are cleaned like all output, so no colours of our own.
        .with_writer(|| output::LogWriter)
        .with_ansi(false)
        .with_target(false);
    // The OpenTelemetry crates' own diagnostics (every failed export) are dropped: telemetry
    // says what was lost once, itself.
    let not_sdk = tracing_subscriber::filter::filter_fn(|m| !mcp_telemetry::is_sdk_diagnostic(m.target()));
    // RUST_LOG's directives, or warnings and errors as a plain level: an `EnvFilter` sets up
    // its directives and per-span state first, code a start otherwise never runs.
    match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => {
            let _ = tracing_subscriber::registry().with(logs.with_filter(filter).with_filter(not_sdk)).try_init();
        }
        Err(_) => {
            let level = tracing_subscriber::filter::LevelFilter::WARN;
            let _ = tracing_subscriber::registry().with(logs.with_filter(level).with_filter(not_sdk)).try_init();
        }
    }
}

async fn run(cli: Cli, at: ConfigPath) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Demo { agent } => return agent::demo_command(&agent).await,
        Command::Mcp { command } => return mcp::mcp_command(command, &at),
        _ => {}
    }
    let config = host::load_config(&at)?;
    match &cli.command {
        Command::Run { .. } | Command::Chat { .. } => {
            telemetry::start(&config, false).await?;
        }
        // `/metrics` of `serve --http`, when `[serve] metrics` asks for it: kept for a scrape.
        Command::Serve { args } => {
            telemetry::start(&config, args.http.is_some() && config.serve.metrics).await?;
        }
        _ => {}
    }
    match cli.command {
        Command::Demo { .. }
        | Command::DemoServer
        | Command::Mcp { .. }
        | Command::Help { .. }
        | Command::Completions { .. }
        | Command::Man => unreachable_demo(),
        Command::Run { task, agent } => agent::run_command(config, &at, &task, &agent).await,
        Command::Chat { agent } => agent::chat_command(config, &at, &agent).await,
        Command::Servers { json } => session::servers_command(config, json).await,
        Command::Tools { json, search, limit } => {
            tools::tools_command(config, tools::ToolsArgs { json, search, limit }).await
        }
        Command::Call { name, args, yes, json } => call::call_command(config, &name, &args, yes, json).await,
        Command::Resources { json } => content::resources_command(config, json).await,
        Command::Read { server, uri, yes, json } => content::read_command(config, &server, &uri, yes, json).await,
        Command::Prompts { json } => content::prompts_command(config, json).await,
        Command::Prompt { server, name, args, json } => {
            content::prompt_command(config, &server, &name, &args, json).await
        }
        Command::Serve { args } => serve::serve_command(config, &at, &args).await,
        Command::Login { server, no_browser } => auth::login_command(config, &server, !no_browser).await,
        Command::Logout { server } => auth::logout_command(config, &server).await,
    }
}
