//! Who approves `confirm` calls from the command line: a prompt on the terminal, `--yes`, or
//! nobody (then the call is refused, and the reason says so). Also the one way anything asks
//! on the terminal while commands run ([`on_terminal`]): approvals and servers' forms.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_loop::{ApprovalAnswer, ApprovalRequest, ApproveAll, Approver, RefuseAll};
use async_trait::async_trait;

use crate::output;

/// Longest rendering of the arguments in a prompt.
const PROMPT_ARGS_CHARS: usize = 500;

/// Asks on the terminal (stderr): yes or no, and for a session also "yes for the rest of it".
struct TerminalApprover {
    session: bool,
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let origin = match &request.server {
            Some(server) => format!("tool {:?} of server {server:?}", output::one_line(&request.tool, 100)),
            None => "a built-in tool".to_owned(),
        };
        // A script's call says so: the person approves what a script, not the model, asks.
        let asker = request.asked_by().map(|who| format!(", asked by {}", output::one_line(&who, 100)));
        let prompt = format!(
            "Run {} ({origin}{}) with {}? ({})",
            output::one_line(&request.name, 100),
            asker.unwrap_or_default(),
            output::one_line(&request.arguments.to_string(), PROMPT_ARGS_CHARS),
            request.rule
        );
        let session = self.session;
        let answer = on_terminal(move |term| {
            if session {
                dialoguer::Select::new()
                    .with_prompt(prompt)
                    .items(["no", "yes", "yes, and for the rest of this session"])
                    .default(0)
                    .interact_on_opt(term)
            } else {
                dialoguer::Confirm::new()
                    .with_prompt(prompt)
                    .default(false)
                    .interact_on_opt(term)
                    .map(|a| a.map(usize::from))
            }
        })
        .await;
        match answer {
            Ok(Ok(Some(1))) => ApprovalAnswer::Yes,
            Ok(Ok(Some(2))) => ApprovalAnswer::YesForSession,
            _ => ApprovalAnswer::No,
        }
    }
}

/// Nobody can be asked: the call is refused with what to do instead.
struct NoTerminal;

#[async_trait]
impl Approver for NoTerminal {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Unanswered("there is no terminal to ask on; rerun with --yes to approve this call".to_owned())
    }
}

/// Whether a person can be asked: stdin and stderr are a terminal.
pub(crate) fn can_ask() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The terminal's settings when the program started (stdin's, when it is one): a question cut
/// short by a signal leaves it raw (no echo, no line editing) with the cursor hidden, and the
/// exit puts both back ([`restore_terminal`]).
static STARTED_WITH: std::sync::Mutex<Option<nix::sys::termios::Termios>> = std::sync::Mutex::new(None);

/// Remembers the terminal's settings (see [`STARTED_WITH`]); nothing when stdin is none.
pub(crate) fn remember_terminal() {
    if std::io::stdin().is_terminal()
        && let Ok(settings) = nix::sys::termios::tcgetattr(std::io::stdin())
    {
        *mcp_safety::lock(&STARTED_WITH) = Some(settings);
    }
}

/// Puts the terminal back as it was at the start, cursor shown: for an exit that may have cut
/// a question short (a signal).
pub(crate) fn restore_terminal() {
    if let Some(settings) = mcp_safety::lock(&STARTED_WITH).as_ref() {
        let _ = nix::sys::termios::tcsetattr(std::io::stdin(), nix::sys::termios::SetArg::TCSANOW, settings);
    }
    if std::io::stderr().is_terminal() {
        let _ = dialoguer::console::Term::stderr().show_cursor();
    }
}

/// Held by whoever asks on the terminal: calls running together ask one after another.
static TERMINAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Set while `chat` waits for the next line: its reader has the terminal then.
static CHAT_READING: AtomicBool = AtomicBool::new(false);

/// Why nothing could be asked.
pub(crate) const NO_TERMINAL: &str = "there is no terminal to ask on";
/// Why nothing could be asked while `chat` waits for a line.
pub(crate) const CHAT_IS_READING: &str = "it came while no task was running (chat was waiting for your next line)";

/// Runs `ask` with the terminal (stderr) to itself, off the async workers: one question at a
/// time, and none while `chat` waits for a line. `Err` says why nobody could be asked.
pub(crate) async fn on_terminal<T: Send + 'static>(
    ask: impl FnOnce(&dialoguer::console::Term) -> T + Send + 'static,
) -> Result<T, &'static str> {
    if !can_ask() {
        return Err(NO_TERMINAL);
    }
    // The lock is taken inside the blocking task, so a caller that stops waiting (a cancelled
    // call) still keeps the next question from starting while this one reads keys.
    tokio::task::spawn_blocking(move || {
        let _alone = mcp_safety::lock(&TERMINAL);
        if CHAT_READING.load(Ordering::SeqCst) {
            return Err(CHAT_IS_READING);
        }
        let term = dialoguer::console::Term::stderr();
        let answer = crate::progress::hidden_while(|| ask(&term));
        // A question ended by Ctrl-C (a key in raw mode, no signal) leaves the cursor hidden.
        let _ = term.show_cursor();
        Ok(answer)
    })
    .await
    .unwrap_or(Err(NO_TERMINAL))
}

/// `chat` waits for its next line while this lives: nothing else asks on the terminal then.
pub(crate) struct ChatReading(());

impl ChatReading {
    /// Marks the terminal as `chat`'s, once a question still on it is answered (one whose call
    /// stopped waiting: the turn is over, the question is not).
    pub(crate) async fn start() -> Self {
        let _ = tokio::task::spawn_blocking(|| {
            let _alone = mcp_safety::lock(&TERMINAL);
            CHAT_READING.store(true, Ordering::SeqCst);
        })
        .await;
        CHAT_READING.store(true, Ordering::SeqCst);
        Self(())
    }
}

impl Drop for ChatReading {
    fn drop(&mut self) {
        CHAT_READING.store(false, Ordering::SeqCst);
    }
}

/// For `run`, `chat` and `demo`: `--yes`, the terminal, or (nobody to ask) a refusal the model
/// is told about.
pub(crate) fn for_session(yes: bool) -> Arc<dyn Approver> {
    if yes {
        Arc::new(ApproveAll)
    } else if can_ask() {
        Arc::new(TerminalApprover { session: true })
    } else {
        Arc::new(RefuseAll)
    }
}

/// For `call`: `--yes`, the terminal, or an error that says to rerun with `--yes`.
pub(crate) fn for_one_call(yes: bool) -> Arc<dyn Approver> {
    if yes {
        Arc::new(ApproveAll)
    } else if can_ask() {
        Arc::new(TerminalApprover { session: false })
    } else {
        Arc::new(NoTerminal)
    }
}

/// Asks for a VS Code input on the terminal (what is typed stays hidden for a password); without
/// a terminal, the error names the input.
pub(crate) fn ask_input(input: &mcp_host::config::Input) -> Result<String, String> {
    let what = if input.description.is_empty() {
        format!("input {:?}", input.id)
    } else {
        format!("input {:?} ({})", input.id, output::one_line(&input.description, 200))
    };
    if !can_ask() {
        return Err(format!(
            "needs {what}, and there is no terminal to ask on; run it on a terminal, or bring the servers over with \
             `mcp-harness mcp import --from vscode` and set the variable it names instead"
        ));
    }
    let term = dialoguer::console::Term::stderr();
    // The id and the default come from a configuration file: made safe before the terminal.
    let prompt = if input.description.is_empty() {
        output::one_line(&input.id, 100)
    } else {
        output::one_line(&input.description, 200)
    };
    let failed = |e: dialoguer::Error| format!("asking for {what}: {e}");
    match input.kind.as_str() {
        "promptString" if input.password => {
            dialoguer::Password::new().with_prompt(prompt).allow_empty_password(true).interact_on(&term).map_err(failed)
        }
        "promptString" => {
            // The default is shown cleaned, and given for an empty answer here rather than by
            // dialoguer, which would echo it as written.
            let prompt = match &input.default {
                Some(default) => format!("{prompt} [{}]", output::one_line(default, 200)),
                None => prompt,
            };
            let answer = dialoguer::Input::<String>::new()
                .with_prompt(prompt)
                .allow_empty(true)
                .interact_text_on(&term)
                .map_err(failed)?;
            Ok(match &input.default {
                Some(default) if answer.is_empty() => default.clone(),
                _ => answer,
            })
        }
        "pickString" if !input.options.is_empty() => {
            let default = input.default.as_ref().and_then(|d| input.options.iter().position(|o| o == d)).unwrap_or(0);
            let options: Vec<String> = input.options.iter().map(|o| output::one_line(o, 200)).collect();
            let chosen = dialoguer::Select::new()
                .with_prompt(prompt)
                .items(&options)
                .default(default)
                .interact_on(&term)
                .map_err(failed)?;
            input.options.get(chosen).cloned().ok_or_else(|| format!("{what}: nothing was chosen"))
        }
        other => Err(format!("{what} is of type {other:?}, which mcp-harness cannot ask for")),
    }
}

/// Asks a yes/no question on the terminal (no by default); `None` when there is none.
pub(crate) fn confirm(question: &str) -> Option<bool> {
    if !can_ask() {
        return None;
    }
    let term = dialoguer::console::Term::stderr();
    dialoguer::Confirm::new().with_prompt(question).default(false).interact_on_opt(&term).ok().flatten()
}
