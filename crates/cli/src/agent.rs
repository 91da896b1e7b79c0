//! `run`, `chat` and `demo`: the agent loop wired to the configured servers, a model provider,
//! a terminal approver, a transcript, and human or JSON output.

use mcp_client::ServerState;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use agent_loop::{
    Agent, AgentConfig, AgentEvent, CallDecision, EventSink, LanguageModel, Message, ScriptedModel, StopReason,
    ToolSearch, Transcript, TranscriptError, load_messages,
};
use anyhow::{Context as _, bail};

use crate::{Outcome, chat_prompts, output};
use mcp_host::Runtime;
use mcp_host::config::{Config, ConfigPath, Origin};

/// Which language model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Provider {
    /// Anthropic's Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL).
    Anthropic,
    /// An OpenAI-compatible Chat Completions API (OPENAI_API_KEY, OPENAI_BASE_URL).
    Openai,
    /// Replays the turns of a script file (--script), offline.
    Scripted,
}

// Options shared by `run`, `chat` and `demo`. (Not a doc comment: with `defer`, clap would
// make it the about of those commands.)
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AgentArgs {
    /// The model provider [default: anthropic; scripted for `demo`].
    #[arg(long, value_enum)]
    pub(crate) provider: Option<Provider>,
    /// The provider's model name (a sensible default per provider).
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// The script for --provider scripted (JSON: {"turns": [{"text", "tool_calls"}]}).
    #[arg(long, value_name = "FILE")]
    pub(crate) script: Option<PathBuf>,
    /// Approve every call whose policy is `confirm` without asking (denied tools stay denied).
    #[arg(long)]
    pub(crate) yes: bool,
    /// Print events as JSON, one object a line.
    #[arg(long)]
    pub(crate) json: bool,
    /// Continue a saved session (its id, as printed when it started).
    #[arg(long, value_name = "SESSION")]
    pub(crate) resume: Option<String>,
    /// Model calls per task before stopping.
    #[arg(long, default_value_t = 20)]
    pub(crate) max_steps: usize,
}

fn default_model(provider: Provider) -> &'static str {
    match provider {
        Provider::Anthropic => "claude-sonnet-4-5",
        Provider::Openai => "gpt-4o-mini",
        Provider::Scripted => "script",
    }
}

/// Context window assumed per provider, in tokens, for the `auto` tool search threshold (a
/// tenth of it): Claude models have 200,000; 128,000 is the common size of the OpenAI-compatible
/// models in use; a script has no limit, so it gets the larger.
fn context_tokens(provider: Provider) -> usize {
    match provider {
        Provider::Anthropic | Provider::Scripted => 200_000,
        Provider::Openai => 128_000,
    }
}

/// The agent's exposure and search settings from the configuration, for `provider`.
fn search_settings(config: &Config, provider: Provider) -> anyhow::Result<(tool_pool::ExposureOptions, ToolSearch)> {
    let tools = &config.tools;
    let mut exposure = config.exposure();
    exposure.auto_threshold = tool_pool::auto_threshold_for_context(context_tokens(provider));
    let search = if tools.native {
        if provider != Provider::Anthropic {
            bail!(
                "`tool_search = \"native\"` in the configuration needs --provider anthropic (the Anthropic API runs \
                 the search); use \"auto\" or \"on\" for the host's own tool search with other providers"
            );
        }
        ToolSearch::Native
    } else {
        ToolSearch::Client
    };
    Ok((exposure, search))
}

/// The model behind `--provider`.
/// How long a model provider's connection may take to open.
const PROVIDER_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn model(args: &AgentArgs, demo_script: Option<&str>) -> anyhow::Result<(Arc<dyn LanguageModel>, String, Provider)> {
    let default = if demo_script.is_some() { Provider::Scripted } else { Provider::Anthropic };
    let provider = args.provider.unwrap_or(default);
    let name = args.model.clone().unwrap_or_else(|| default_model(provider).to_owned());
    let model: Arc<dyn LanguageModel> = match provider {
        Provider::Scripted => match (&args.script, demo_script) {
            (Some(path), _) => Arc::new(ScriptedModel::from_file(path)?),
            (None, Some(script)) => Arc::new(ScriptedModel::from_json(script)?),
            (None, None) => bail!("--provider scripted needs --script FILE"),
        },
        // The process's HTTPS client, which remote servers share (certificates loaded once), with
        // the connect timeout of `llm_providers::default_client`; it follows no redirects.
        Provider::Anthropic => {
            let client = mcp_transport::shared_client(true, PROVIDER_CONNECT_TIMEOUT)?;
            Arc::new(llm_providers::AnthropicModel::from_env_using(&name, client)?)
        }
        Provider::Openai => {
            let client = mcp_transport::shared_client(true, PROVIDER_CONNECT_TIMEOUT)?;
            Arc::new(llm_providers::OpenAiModel::from_env_using(&name, client)?)
        }
    };
    Ok((model, name, provider))
}

/// Where sessions are kept: the user's data directory, never the workspace.
fn sessions_dir() -> anyhow::Result<PathBuf> {
    Ok(mcp_host::auth::data_dir()?.join("sessions"))
}

fn new_session_id() -> String {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    format!("{ms}-{}", std::process::id())
}

fn colors() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// Human output: streamed text, each call with its decision, each result's first line.
struct Human {
    color: bool,
    at_line_start: Mutex<bool>,
    progress: crate::progress::ProgressView,
}

impl Human {
    /// One line of `text` (cleaned by `output::painted`) in the SGR style `code`.
    fn line(&self, code: &str, text: &str) {
        let mut start = mcp_safety::lock(&self.at_line_start);
        let lead = if *start { "" } else { "\n" };
        let _ = output::stdout_painted(&format!("{lead}{}\n", output::painted(self.color, code, text)));
        *start = true;
    }
}

impl EventSink for Human {
    fn event(&self, event: &AgentEvent) {
        match event {
            AgentEvent::Text { text } => {
                let _ = output::stdout(&output::clean(text));
                let _ = std::io::stdout().flush();
                if let Ok(mut start) = self.at_line_start.lock() {
                    *start = text.ends_with('\n');
                }
            }
            AgentEvent::ToolCall { name, arguments, decision, reason, .. } => {
                let (mark, code) = match decision {
                    CallDecision::Allowed | CallDecision::Approved => ("→", "36"),
                    _ => ("✗", "31"),
                };
                // The name comes from the model: untrusted like a server's text.
                let name = output::one_line(name, 120);
                let args = output::one_line(&arguments.to_string(), 120);
                let reason = output::one_line(reason, 300);
                self.line(code, &format!("{mark} {name} {args}  [{reason}]"));
            }
            AgentEvent::Progress { id, name, progress, total, message } => {
                self.progress.update(id, name, *progress, *total, message.as_deref());
            }
            AgentEvent::PoolChanged { revision, joined, left } => {
                let names = |n: &[String]| n.iter().map(|s| output::one_line(s, 60)).collect::<Vec<_>>().join(", ");
                let mut parts = Vec::new();
                if !joined.is_empty() {
                    parts.push(format!("joined: {}", names(joined)));
                }
                if !left.is_empty() {
                    parts.push(format!("left: {}", names(left)));
                }
                self.line("2", &format!("servers {} (tool list revision {revision})", parts.join("; ")));
            }
            AgentEvent::ToolResult { id, content, is_error, .. } => {
                self.progress.finish(id);
                let first = output::first_line(content, 120);
                let more = content.lines().count().saturating_sub(1);
                let tail = if more > 0 { format!(" (+{more} lines)") } else { String::new() };
                let code = if *is_error { "31" } else { "2" };
                self.line(code, &format!("  ← {first}{tail}"));
            }
            AgentEvent::StepLimit { steps } => {
                self.line("33", &format!("stopped: the step limit ({steps}) was reached"));
            }
            AgentEvent::Finished { stop_reason, .. } => {
                // A turn that ended for another reason than finishing says so (a refusal's
                // text may be empty).
                let why = match stop_reason {
                    StopReason::EndTurn | StopReason::ToolUse | StopReason::StopSequence => None,
                    StopReason::MaxTokens => Some("the model ran out of output tokens".to_owned()),
                    StopReason::Refusal => Some("the model refused".to_owned()),
                    StopReason::Other(other) => Some(format!("the model stopped ({})", output::first_line(other, 80))),
                    _ => Some("the model stopped".to_owned()),
                };
                if let Some(why) = why {
                    self.line("33", &format!("stopped: {why}"));
                }
                self.line("0", "");
            }
            _ => {}
        }
    }
}

/// `--json`: every event as one line.
struct Json;

impl EventSink for Json {
    fn event(&self, event: &AgentEvent) {
        if let Ok(line) = output::json(event, false) {
            let _ = output::stdout(&format!("{line}\n"));
        }
    }
}

struct Prepared {
    agent: Agent,
    runtime: Arc<Runtime>,
    conversation: Vec<Message>,
    events: Box<dyn EventSink>,
}

async fn prepare(
    config: Config,
    reload: Option<ConfigPath>,
    args: &AgentArgs,
    demo_script: Option<&str>,
) -> anyhow::Result<Prepared> {
    let (model, model_name, provider) = model(args, demo_script)?;
    let (exposure, tool_search) = search_settings(&config, provider)?;
    let max_loaded = config.tools.max_loaded.unwrap_or(agent_loop::DEFAULT_MAX_LOADED);
    let dir = sessions_dir()?;
    let (id, conversation) = match &args.resume {
        Some(id) => {
            // An id is a file name in the sessions directory, never a path.
            if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                bail!(
                    "cannot resume session {:?}: a session id is letters, digits, - and _",
                    output::one_line(id, 100)
                );
            }
            let path = dir.join(format!("{id}.jsonl"));
            // One sentence: the transcript error already names the file and the system's cause.
            let messages = load_messages(&path).map_err(|e| match e {
                TranscriptError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => anyhow::anyhow!(
                    "cannot resume session {}: there is no transcript {}; start a new session without --resume",
                    output::one_line(id, 100),
                    path.display()
                ),
                other => anyhow::anyhow!("cannot resume session {}: {other}", output::one_line(id, 100)),
            })?;
            (id.clone(), messages)
        }
        None => (new_session_id(), Vec::new()),
    };
    let path = dir.join(format!("{id}.jsonl"));
    let transcript = Transcript::open(&path)?;
    if !args.json {
        let _ = output::stderr(&format!("session {id} (transcript {})\n", path.display()));
    }
    let policy = config.policy.clone();
    // Code mode: offered when some server's tools are in a script's reach at the start.
    let code_limits = config.code_scope().any().then(|| config.tools.code_limits.clone());
    let tool_budget = exposure.tool_budget;
    let runtime = crate::host::start_runtime(config, reload).await;
    if let Some(signal) = crate::signals::received() {
        // Interrupted while the servers were starting.
        runtime.close().await;
        return Err(crate::signals::Interrupted(signal).into());
    }
    for (name, state) in runtime.servers().states() {
        if !matches!(state, ServerState::Connected { .. } | ServerState::Disabled) {
            let _ = output::stderr(&format!(
                "warning: server {} is {}\n",
                output::one_line(&format!("{name:?}"), 80),
                output::one_line(&state.to_string(), 500)
            ));
        }
    }
    if let Err(e) = crate::host::check_required(&runtime) {
        runtime.close().await;
        return Err(e);
    }
    let runtime = Arc::new(runtime);
    let session_dir = dir.join(&id);
    let agent_config = AgentConfig {
        model: model_name,
        max_steps: args.max_steps,
        session_dir: Some(session_dir.clone()),
        exposure,
        tool_search,
        max_loaded,
        ..AgentConfig::default()
    };
    // The resource tools, and the one that reads back results saved because they were too long.
    let mut builtins = agent_loop::resource_tools(runtime.clone(), Some(session_dir.clone()));
    builtins.push(agent_loop::saved_result_tool(session_dir, agent_loop::DEFAULT_SLICE_CHARS));
    if let Some(limits) = code_limits {
        // Which servers a script reaches follows the running configuration (reloads too).
        let running = Arc::clone(&runtime);
        let scope: mcp_host::ScopeSource = Arc::new(move || running.config().code_scope());
        // The declarations fill the tool's definition up to the budget of one tool, less the
        // room of its name and input schema.
        builtins.push(Arc::new(mcp_host::RunCode::new(limits, scope, tool_budget.saturating_sub(512))));
    }
    let mut agent = Agent::new(model, runtime.clone(), policy, agent_config)
        .with_builtins(builtins)
        .with_approver(crate::approve::for_session(args.yes))
        .with_transcript(transcript);
    // Spans of the task, the model calls and the tool calls, with each call's policy decision.
    if let Some(observer) = mcp_host::telemetry::agent_observer() {
        agent = agent.with_observer(observer);
    }
    if let Some(hooks) = mcp_host::telemetry::policy_hooks() {
        agent = agent.with_hooks(hooks);
    }
    let events: Box<dyn EventSink> = if args.json {
        Box::new(Json)
    } else {
        Box::new(Human {
            color: colors(),
            at_line_start: Mutex::new(true),
            progress: crate::progress::ProgressView::new(),
        })
    };
    Ok(Prepared { agent, runtime, conversation, events })
}

async fn finish(prepared: Prepared) {
    let Prepared { agent, runtime, .. } = prepared;
    drop(agent);
    if let Ok(runtime) = Arc::try_unwrap(runtime) {
        runtime.close().await;
    }
}

/// One task; a signal (SIGINT, SIGTERM, SIGHUP) stops it (pending calls are cancelled) and
/// is returned as the error, after which the caller closes the servers.
async fn one_turn(prepared: &mut Prepared, task: Message) -> anyhow::Result<()> {
    let Prepared { agent, conversation, events, .. } = prepared;
    match crate::signals::interruptible(agent.run_turn_with(conversation, task, events.as_ref())).await {
        Ok(outcome) => outcome.map(drop).map_err(anyhow::Error::from),
        Err(interrupted) => {
            let _ = output::stderr("\ninterrupted: pending tool calls were cancelled\n");
            Err(interrupted.into())
        }
    }
}

/// Where the configuration is read again when it changes: the file it was read from.
fn reload_from(config: &Config, at: &ConfigPath) -> Option<ConfigPath> {
    Some(ConfigPath::new(config.file.clone(), Origin::Flag, at.allow_workspace))
}

/// `mcp-harness run TASK`.
pub(crate) async fn run_command(
    config: Config,
    at: &ConfigPath,
    task: &str,
    args: &AgentArgs,
) -> anyhow::Result<Outcome> {
    let reload = reload_from(&config, at);
    let mut prepared = prepare(config, reload, args, None).await?;
    let result = one_turn(&mut prepared, Message::user(task)).await;
    finish(prepared).await;
    result.map(|()| Outcome::Success)
}

/// `mcp-harness chat`: tasks read line by line, with the conversation kept between them.
pub(crate) async fn chat_command(config: Config, at: &ConfigPath, args: &AgentArgs) -> anyhow::Result<Outcome> {
    let reload = reload_from(&config, at);
    let mut prepared = prepare(config, reload, args, None).await?;
    let interactive = std::io::stdin().is_terminal();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(tokio::io::stdin()));
    let result = loop {
        // After a question still on the terminal, so the prompt is not drawn into it.
        let reading = crate::approve::ChatReading::start().await;
        if interactive {
            let _ = output::stderr("> ");
        }
        let line = match crate::signals::interruptible(lines.next_line()).await {
            Ok(line) => line,
            Err(interrupted) => break Err(interrupted.into()),
        };
        drop(reading);
        match line {
            Ok(Some(line)) if line.trim().is_empty() => continue,
            Ok(Some(line)) if matches!(line.trim(), "/exit" | "/quit") => break Ok(()),
            Ok(Some(line)) if line.trim() == "/mcp" || line.trim().starts_with("/mcp ") => {
                let text = crate::host::mcp_command(&prepared.runtime, line.trim()).await;
                let _ = output::stdout(&text);
            }
            Ok(Some(line)) if line.trim() == "/prompts" => {
                let _ = output::stdout(&chat_prompts::list(&prepared.runtime).await);
            }
            Ok(Some(line)) if line.trim() == "/complete" || line.trim().starts_with("/complete ") => {
                let _ = output::stdout(&chat_prompts::complete(&prepared.runtime, line.trim()).await);
            }
            Ok(Some(line)) if prompt_named(&prepared.runtime, &line).is_some() => {
                let Some(named) = prompt_named(&prepared.runtime, &line) else { continue };
                let fetched = match crate::signals::interruptible(chat_prompts::fetch(&prepared.runtime, &named)).await
                {
                    Ok(fetched) => fetched,
                    Err(interrupted) => break Err(interrupted.into()),
                };
                let fetched = match fetched {
                    Ok(fetched) => fetched,
                    Err(what_to_type) => {
                        // Nothing is sent: the user retypes the line.
                        let _ = output::stdout(&what_to_type);
                        continue;
                    }
                };
                if !args.json {
                    // What is sent, then a blank line before the model's answer.
                    let _ = output::stdout(&format!("{}\n\n", fetched.shown.trim_end()));
                }
                match one_turn(&mut prepared, fetched.message).await {
                    Ok(()) => {}
                    Err(e) if e.is::<crate::signals::Interrupted>() => break Err(e),
                    Err(e) => crate::say_error(&e),
                }
            }
            Ok(Some(line)) => match one_turn(&mut prepared, Message::user(line.trim())).await {
                Ok(()) => {}
                Err(e) if e.is::<crate::signals::Interrupted>() => break Err(e),
                // A failed turn (the model unreachable) does not end the chat.
                Err(e) => crate::say_error(&e),
            },
            Ok(None) => break Ok(()),
            Err(e) => break Err(anyhow::anyhow!("reading your input: {e}")),
        }
    };
    finish(prepared).await;
    result.map(|()| Outcome::Success)
}

/// The configured servers' names.
fn server_names(runtime: &Runtime) -> Vec<String> {
    runtime.servers().states().into_iter().map(|(name, _)| name).collect()
}

/// Whether `line` is `/SERVER:PROMPT ...` or `/mcp__SERVER__PROMPT ...` (a line that only looks
/// like one, naming no known server, is still taken as one: the user is told the servers).
fn prompt_named<'a>(runtime: &Runtime, line: &'a str) -> Option<chat_prompts::PromptLine<'a>> {
    chat_prompts::prompt_line(line, &server_names(runtime))
}

/// The demo's task.
pub(crate) const DEMO_TASK: &str = "Summarize my \"ideas\" note and save the summary as a new note.";

/// `mcp-harness demo`: our notes server, the scripted model (or a real one with --provider),
/// one call allowed by policy, one that asks, and an answer. No configuration file is read.
pub(crate) async fn demo_command(args: &AgentArgs) -> anyhow::Result<Outcome> {
    let this = std::env::current_exe().context("cannot locate this program to run the demo's notes server")?;
    let config = demo_config(&this);
    if !args.json {
        let _ = output::stderr(&format!("demo task: {DEMO_TASK}\n"));
    }
    let mut prepared = prepare(config, None, args, Some(include_str!("demo/script.json"))).await?;
    let result = one_turn(&mut prepared, Message::user(DEMO_TASK)).await;
    finish(prepared).await;
    result.map(|()| Outcome::Success)
}

/// The offline demo's setup, built in code (no file to trust): the notes server (`harness`,
/// this program, as `demo-server`), reading allowed, writing left to the default (confirm). The
/// notes server is this very program and runs unconfined, as it always has.
fn demo_config(harness: &std::path::Path) -> Config {
    let mut stdio = mcp_transport::StdioConfig::new(harness.to_string_lossy().into_owned(), ["demo-server"]);
    stdio.label = "notes".to_owned();
    let mut notes = mcp_host::config::ServerSettings::stdio("notes", stdio);
    if let mcp_host::config::Target::Stdio { sandbox, .. } = &mut notes.target {
        *sandbox = mcp_host::config::SandboxSetting::off();
    }
    let rules = ["list_notes", "read_note"]
        .into_iter()
        .map(|tool| policy::RuleConfig::new("notes", tool, policy::Decision::Allow))
        .collect();
    let policy =
        policy::Policy::new(policy::PolicyConfig { default: policy::Decision::Confirm, rules, ..Default::default() })
            .unwrap_or_default();
    Config::new(vec![notes], policy)
}
