//! Servers' prompts in `chat`: `/SERVER:PROMPT args` (or `/mcp__SERVER__PROMPT args`) fetches
//! a prompt and sends its messages as the next user turn, `/prompts` lists what can be typed,
//! and `/complete SERVER:PROMPT ARG [PREFIX]` asks the server for values of an argument
//! (`completion/complete`), there being no line editor for a Tab key.
//!
//! Arguments are `key=value` words (a value runs until the next word that starts with a key of
//! the prompt and `=`, so it may hold spaces), or, for a prompt with exactly one argument, the
//! bare text. Anything wrong (an unknown server or prompt, a missing required argument, an
//! unknown key) is one line saying what to type, and the model is not called.
//!
//! The user turn holds one text block per prompt message, rendered as for `mcp-harness prompt`
//! (terminal-safe text, embedded resources as their text, images and audio described, since the
//! agent's messages carry text only). A prompt whose messages are all the user's sends their
//! text as is; one with other roles (an assistant's message in a prompted conversation) marks
//! every block with its role, so the model still sees who said what inside the one turn.

use agent_loop::{Block, Message, Role};
use mcp_client::{ClientError, SetCallError};
use mcp_protocol::{CompleteReference, GetPromptResult, Prompt, PromptMessage};
use serde_json::{Map, Value, json};

use crate::output;
use mcp_host::Runtime;

/// At most this many completion values are shown (the specification caps an answer at 100).
const SHOWN_COMPLETIONS: usize = 20;

/// A prompt named on a chat line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PromptLine<'a> {
    /// The server, as typed.
    pub(crate) server: &'a str,
    /// The prompt, as typed.
    pub(crate) prompt: &'a str,
    /// The rest of the line: the arguments.
    pub(crate) rest: &'a str,
}

/// The prompt `line` names (`/SERVER:PROMPT rest` or `/mcp__SERVER__PROMPT rest`), if it has
/// that form; `servers` are the known names, to split `mcp__a__b__c` where a name holds `__`.
pub(crate) fn prompt_line<'a>(line: &'a str, servers: &[String]) -> Option<PromptLine<'a>> {
    let line = line.trim();
    let head = line.strip_prefix('/')?;
    let (word, rest) = head.split_once(char::is_whitespace).unwrap_or((head, ""));
    let rest = rest.trim();
    if let Some(tail) = word.strip_prefix("mcp__") {
        // The longest known server name followed by `__`, else the first `__`.
        let known = servers
            .iter()
            .filter(|s| tail.len() > s.len() + 2 && tail.starts_with(s.as_str()) && tail[s.len()..].starts_with("__"))
            .max_by_key(|s| s.len());
        let (server, prompt) = match known {
            Some(s) => (&tail[..s.len()], &tail[s.len() + 2..]),
            None => tail.split_once("__")?,
        };
        return (!server.is_empty() && !prompt.is_empty()).then_some(PromptLine { server, prompt, rest });
    }
    let (server, prompt) = word.split_once(':')?;
    (!server.is_empty() && !prompt.is_empty()).then_some(PromptLine { server, prompt, rest })
}

/// What to type for `prompt` of `server`: `/server:prompt key=VALUE [other=VALUE]`.
fn usage(server: &str, prompt: &Prompt) -> String {
    let mut out = format!("/{}:{}", output::one_line(server, 80), output::one_line(&prompt.name, 80));
    for a in prompt.arguments.iter().flatten() {
        let name = output::one_line(&a.name, 40);
        if a.required == Some(true) {
            out.push_str(&format!(" {name}=VALUE"));
        } else {
            out.push_str(&format!(" [{name}=VALUE]"));
        }
    }
    out
}

/// The argument object of `rest` for `prompt`, or the line saying what is wrong and what to
/// type.
pub(crate) fn parse_arguments(server: &str, prompt: &Prompt, rest: &str) -> Result<Map<String, Value>, String> {
    let declared: Vec<&str> = prompt.arguments.iter().flatten().map(|a| a.name.as_str()).collect();
    let usage = || usage(server, prompt);
    let mut bare: Vec<&str> = Vec::new();
    let mut pairs: Vec<(&str, Vec<&str>)> = Vec::new();
    for word in rest.split_whitespace() {
        match word.split_once('=') {
            Some((key, value)) if declared.contains(&key) => pairs.push((key, vec![value])),
            _ => match pairs.last_mut() {
                Some((_, words)) => words.push(word),
                None => bare.push(word),
            },
        }
    }
    let mut arguments = Map::new();
    if !bare.is_empty() {
        match declared.as_slice() {
            [only] if pairs.is_empty() => {
                arguments.insert((*only).to_owned(), json!(bare.join(" ")));
            }
            _ => {
                let first = bare.first().copied().unwrap_or_default();
                let what = match first.split_once('=') {
                    Some((key, _)) if !key.is_empty() => {
                        format!(
                            "prompt {} has no argument {}",
                            output::one_line(&prompt.name, 80),
                            output::one_line(key, 40)
                        )
                    }
                    _ if declared.is_empty() => {
                        format!("prompt {} takes no arguments", output::one_line(&prompt.name, 80))
                    }
                    _ => format!("{} is not KEY=VALUE", output::one_line(first, 40)),
                };
                return Err(format!("{what}; type {}\n", usage()));
            }
        }
    }
    for (key, words) in pairs {
        if arguments.insert(key.to_owned(), json!(words.join(" "))).is_some() {
            return Err(format!("argument {} is given twice; type {}\n", output::one_line(key, 40), usage()));
        }
    }
    let missing: Vec<String> = prompt
        .arguments
        .iter()
        .flatten()
        .filter(|a| a.required == Some(true) && !arguments.contains_key(&a.name))
        .map(|a| output::one_line(&a.name, 40))
        .collect();
    if !missing.is_empty() {
        let what = if missing.len() == 1 { "argument" } else { "arguments" };
        return Err(format!(
            "prompt {} needs the {what} {}; type {}\n",
            output::one_line(&prompt.name, 80),
            missing.join(", "),
            usage()
        ));
    }
    Ok(arguments)
}

/// One prompt message as text for the model (and the terminal: it is terminal-safe).
fn message_text(message: &PromptMessage) -> String {
    crate::output::clean(&agent_loop::content_text(&message.content))
}

/// The user turn made of a prompt's messages (see the module's documentation).
pub(crate) fn user_turn(result: &GetPromptResult) -> Message {
    let all_user = result.messages.iter().all(|m| m.role == "user");
    let content = result
        .messages
        .iter()
        .map(|m| {
            let text = message_text(m);
            if all_user {
                Block::text(text)
            } else {
                Block::text(format!("[{}]\n{text}", output::one_line(&m.role, 40)))
            }
        })
        .collect();
    Message { role: Role::User, content }
}

/// `error` (from the server set) as the end of a line.
fn failed(error: &SetCallError) -> String {
    output::one_line(&error.to_string(), 500)
}

/// The known server names, for the messages that list them.
fn server_names(runtime: &Runtime) -> String {
    let names: Vec<String> = runtime.servers().states().into_iter().map(|(n, _)| output::one_line(&n, 80)).collect();
    if names.is_empty() { "none is configured".to_owned() } else { names.join(", ") }
}

/// The prompt `line` names, looked up on its server: its definition, or the line to show.
async fn find_prompt(runtime: &Runtime, line: &PromptLine<'_>) -> Result<Prompt, String> {
    let servers = runtime.servers();
    if servers.state(line.server).is_none() {
        return Err(format!(
            "no server named {}; servers: {}. Type /SERVER:PROMPT (`/prompts` lists them)\n",
            output::one_line(line.server, 80),
            server_names(runtime)
        ));
    }
    let prompts =
        servers.prompts(line.server).await.map_err(|e| format!("cannot list the prompts: {}\n", failed(&e)))?;
    if let Some(prompt) = prompts.iter().find(|p| p.name == line.prompt) {
        return Ok(prompt.clone());
    }
    let shown = output::one_line(line.server, 80);
    if prompts.is_empty() {
        return Err(format!("server {shown} offers no prompts (`/prompts` lists every server's)\n"));
    }
    let names: Vec<String> = prompts.iter().map(|p| format!("/{shown}:{}", output::one_line(&p.name, 80))).collect();
    Err(format!("server {shown} has no prompt {}; it has {}\n", output::one_line(line.prompt, 80), names.join(", ")))
}

/// A prompt fetched for the next user turn.
pub(crate) struct Fetched {
    /// The user turn.
    pub(crate) message: Message,
    /// What is sent, for a person (terminal-safe).
    pub(crate) shown: String,
}

/// Fetches the prompt `line` names with its arguments, or says (one line) what to type.
pub(crate) async fn fetch(runtime: &Runtime, line: &PromptLine<'_>) -> Result<Fetched, String> {
    let prompt = find_prompt(runtime, line).await?;
    let arguments = parse_arguments(line.server, &prompt, line.rest)?;
    let arguments = (!arguments.is_empty()).then_some(arguments);
    let result = runtime
        .servers()
        .get_prompt(line.server, &prompt.name, arguments)
        .await
        .map_err(|e| format!("getting the prompt failed: {}\n", failed(&e)))?;
    if result.messages.is_empty() {
        return Err(format!(
            "prompt {} of server {} has no messages; nothing was sent\n",
            output::one_line(&prompt.name, 80),
            output::one_line(line.server, 80)
        ));
    }
    let message = user_turn(&result);
    let chars = message.text().chars().count();
    if chars > MAX_PROMPT_CHARS {
        // Sent, it would stay in the conversation (and its transcript) and fail every turn.
        return Err(format!(
            "prompt {} of server {} is {chars} characters, more than the {MAX_PROMPT_CHARS} a turn takes; nothing \
             was sent\n",
            output::one_line(&prompt.name, 80),
            output::one_line(line.server, 80)
        ));
    }
    Ok(Fetched { message, shown: crate::content::prompt_text(&result) })
}

/// The most characters a prompt may bring into a turn.
const MAX_PROMPT_CHARS: usize = 200_000;

/// `/prompts`: every connected server's prompts as they are typed.
pub(crate) async fn list(runtime: &Runtime) -> String {
    let mut out = String::new();
    for server in runtime.servers().connected() {
        match runtime.servers().prompts(&server).await {
            Ok(prompts) => {
                for p in prompts {
                    let description = p.description.as_deref().or(p.title.as_deref()).unwrap_or("");
                    out.push_str(&format!("{}  {}\n", usage(&server, &p), output::one_line(description, 60)));
                }
            }
            Err(e) => out.push_str(&format!(
                "(the prompts of {} could not be listed: {})\n",
                output::one_line(&server, 80),
                failed(&e)
            )),
        }
    }
    if out.is_empty() {
        out.push_str("no prompts are offered\n");
    }
    out
}

/// `/complete SERVER:PROMPT ARG [PREFIX] [KEY=VALUE ...]`: the server's suggestions for
/// argument ARG of the prompt, given PREFIX typed so far; `KEY=VALUE` words naming other
/// arguments of the prompt are sent as the context.
pub(crate) async fn complete(runtime: &Runtime, line: &str) -> String {
    const USAGE: &str = "usage: /complete SERVER:PROMPT ARGUMENT [PREFIX] [OTHER=VALUE ...]\n";
    let mut words = line.split_whitespace().skip(1);
    let (Some(target), Some(argument)) = (words.next(), words.next()) else { return USAGE.to_owned() };
    let target = format!("/{target}");
    let Some(named) = prompt_line(&target, &runtime.servers().states().into_iter().map(|(n, _)| n).collect::<Vec<_>>())
    else {
        return USAGE.to_owned();
    };
    let prompt = match find_prompt(runtime, &named).await {
        Ok(prompt) => prompt,
        Err(line) => return line,
    };
    if !prompt.arguments.iter().flatten().any(|a| a.name == argument) {
        return format!(
            "prompt {} has no argument {}; type {}\n",
            output::one_line(&prompt.name, 80),
            output::one_line(argument, 40),
            usage(named.server, &prompt)
        );
    }
    let mut prefix = Vec::new();
    let mut context = Map::new();
    for word in words {
        match word.split_once('=') {
            Some((key, value)) if key != argument && prompt.arguments.iter().flatten().any(|a| a.name == key) => {
                context.insert(key.to_owned(), json!(value));
            }
            _ => prefix.push(word),
        }
    }
    let prefix = prefix.join(" ");
    let reference = CompleteReference::prompt(prompt.name.clone());
    let context = (!context.is_empty()).then_some(context);
    match runtime.servers().complete(named.server, reference, argument, &prefix, context).await {
        Ok(result) => {
            let values = &result.completion.values;
            if values.is_empty() {
                return format!("no completions of {} starting with {prefix:?}\n", output::one_line(argument, 40));
            }
            let shown: Vec<String> = values.iter().take(SHOWN_COMPLETIONS).map(|v| output::one_line(v, 80)).collect();
            let total = result.completion.total.map_or(values.len() as u64, |t| t.max(values.len() as u64));
            let more = if total > shown.len() as u64 || result.completion.has_more == Some(true) {
                format!(" (of {total}{})", if result.completion.has_more == Some(true) { " and more" } else { "" })
            } else {
                String::new()
            };
            format!("{}{more}\n", shown.join("\n"))
        }
        Err(SetCallError::Call { error: ClientError::NotOffered { .. }, .. }) => format!(
            "server {} does not offer argument completion; type the value in full\n",
            output::one_line(named.server, 80)
        ),
        Err(e) => format!("completion failed: {}\n", failed(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn greet() -> Prompt {
        serde_json::from_value(json!({"name": "greet", "arguments": [
            {"name": "name", "required": true}, {"name": "style"}]}))
        .unwrap()
    }

    fn one(name: &str) -> Prompt {
        serde_json::from_value(json!({"name": name, "arguments": [{"name": "code", "required": true}]})).unwrap()
    }

    #[test]
    fn prompt_lines_in_both_spellings() {
        let servers = vec!["fx".to_owned(), "my__srv".to_owned()];
        let p = |server, prompt, rest| Some(PromptLine { server, prompt, rest });
        assert_eq!(prompt_line("/fx:greet name=Ada", &servers), p("fx", "greet", "name=Ada"));
        assert_eq!(prompt_line("/mcp__fx__greet  Ada ", &servers), p("fx", "greet", "Ada"));
        assert_eq!(prompt_line("/mcp__my__srv__x__y", &servers), p("my__srv", "x__y", ""));
        assert_eq!(prompt_line("/mcp__other__p", &servers), p("other", "p", ""));
        assert_eq!(prompt_line("/mcp", &servers), None);
        assert_eq!(prompt_line("/exit", &servers), None);
        assert_eq!(prompt_line("/fx:", &servers), None);
        assert_eq!(prompt_line("fx:greet", &servers), None);
    }

    #[test]
    fn arguments_are_pairs_or_one_bare_value() {
        let args = parse_arguments("fx", &greet(), "name=Ada Lovelace style=very formal").unwrap();
        assert_eq!(Value::Object(args), json!({"name": "Ada Lovelace", "style": "very formal"}));
        let args = parse_arguments("fx", &one("review"), "fn main() {} // a=b").unwrap();
        assert_eq!(Value::Object(args), json!({"code": "fn main() {} // a=b"}));
        let args = parse_arguments("fx", &one("review"), "code=x=1").unwrap();
        assert_eq!(Value::Object(args), json!({"code": "x=1"}));
    }

    #[test]
    fn wrong_arguments_say_what_to_type() {
        let err = parse_arguments("fx", &greet(), "style=formal").unwrap_err();
        assert!(err.contains("needs the argument name; type /fx:greet name=VALUE [style=VALUE]"), "{err}");
        let err = parse_arguments("fx", &greet(), "Ada").unwrap_err();
        assert!(err.contains("Ada is not KEY=VALUE; type /fx:greet"), "{err}");
        let err = parse_arguments("fx", &greet(), "nmae=Ada").unwrap_err();
        assert!(err.contains("has no argument nmae"), "{err}");
        let err = parse_arguments("fx", &greet(), "name=A name=B").unwrap_err();
        assert!(err.contains("given twice"), "{err}");
        let none: Prompt = serde_json::from_value(json!({"name": "hostile"})).unwrap();
        assert!(parse_arguments("fx", &none, "").unwrap().is_empty());
        let err = parse_arguments("fx", &none, "x").unwrap_err();
        assert!(err.contains("takes no arguments"), "{err}");
    }

    #[test]
    fn a_prompt_becomes_one_user_turn() {
        let result: GetPromptResult = serde_json::from_value(json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "Hi\u{1b}[2J"}},
            {"role": "user", "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "f://a", "text": "body"}}}]}))
        .unwrap();
        let turn = user_turn(&result);
        assert_eq!(turn.role, Role::User);
        let texts: Vec<String> = turn
            .content
            .iter()
            .map(|b| match b {
                Block::Text { text } => text.clone(),
                _ => String::new(),
            })
            .collect();
        // The escape character is removed (what follows it is plain text).
        assert_eq!(texts, ["Hi[2J", "[image image/png, 4 bytes base64, not shown]", "[resource <f://a>]\nbody"]);
        let mixed: GetPromptResult = serde_json::from_value(json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "Q"}},
            {"role": "assistant", "content": {"type": "text", "text": "A"}}]}))
        .unwrap();
        assert_eq!(user_turn(&mixed).content, vec![Block::text("[user]\nQ"), Block::text("[assistant]\nA")]);
    }
}
