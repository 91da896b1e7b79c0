//! A server's elicitation requests (its `elicitation/create`, or an `input_required` round of
//! 2026-07-28) asked on the terminal: a form, field by field, each answer checked before it is
//! sent (`mcp_client::elicitation`), or a URL shown and opened only if the user says so.
//! Without a terminal, or when the policy says `elicitation = false` for the server, requests
//! are declined without asking and elicitation is not declared to the server.
//!
//! Every text the server chose (its message, titles, descriptions, option labels, the URL) is
//! cleaned before it is shown, and the form is bounded before anything is asked.

use std::sync::Arc;

use async_trait::async_trait;
use dialoguer::console::{Key, Term};
use mcp_client::elicitation::{Field, FieldKind, Form, LEAVE_OUT, TextFormat};
use mcp_client::{ServerRequestHandler, ServerRequests};
use mcp_protocol::{ClientCapabilities, ElicitAction, ElicitRequestParams, ElicitResult, ErrorObject, error_codes};
use serde_json::{Map, Value, json};

use crate::approve;
use crate::output;

/// Longest server message shown.
const MESSAGE_CHARS: usize = 2_000;
/// Longest line typed into a field.
const MAX_TYPED_CHARS: usize = 4_096;

/// How a server's requests are answered, and what is declared to it: asked on the terminal
/// when there is one and its settings allow it, else declined (the host's
/// [`mcp_host::Ports::requests`]).
pub(crate) fn requests_for(settings: &mcp_host::config::ServerSettings) -> ServerRequests {
    let server = settings.name.as_str();
    let declined = |reason: &'static str| ServerRequests {
        handler: Arc::new(Declining { server: server.to_owned(), reason, shown: Default::default() }),
        capabilities: ClientCapabilities::default(),
    };
    if !settings.elicitation {
        return declined("its configuration says `elicitation = false`");
    }
    if !approve::can_ask() {
        return declined(approve::NO_TERMINAL);
    }
    ServerRequests {
        handler: Arc::new(OnTerminal { server: server.to_owned() }),
        capabilities: ClientCapabilities { elicitation: Some(json!({"form": {}, "url": {}})), ..Default::default() },
    }
}

fn answer(action: ElicitAction, content: Option<Map<String, Value>>) -> ElicitResult {
    ElicitResult { action, content, extra: Default::default() }
}

/// `server "NAME"`, cleaned.
fn server_label(server: &str) -> String {
    format!("server {:?}", output::one_line(server, 80))
}

/// At most this many declines are reported per server; a server that keeps asking is declined
/// quietly after.
const DECLINES_SHOWN: usize = 5;

/// Declines every elicitation and says so on stderr (the first [`DECLINES_SHOWN`] times).
struct Declining {
    server: String,
    reason: &'static str,
    shown: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl ServerRequestHandler for Declining {
    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        match self.shown.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
            n if n < DECLINES_SHOWN => say_declined(&self.server, &params.message, self.reason),
            DECLINES_SHOWN => {
                let _ = output::stderr(&format!(
                    "{} keeps asking for input; its further requests are declined without a word\n",
                    server_label(&self.server)
                ));
            }
            _ => {}
        }
        Ok(answer(ElicitAction::Decline, None))
    }
}

fn say_declined(server: &str, message: &str, reason: &str) {
    let _ = output::stderr(&format!(
        "{} asked for input ({}); declined: {reason}\n",
        server_label(server),
        output::one_line(message, 200)
    ));
}

/// Asks on the terminal.
struct OnTerminal {
    server: String,
}

#[async_trait]
impl ServerRequestHandler for OnTerminal {
    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        let invalid = |message: String| ErrorObject::new(error_codes::INVALID_PARAMS, message);
        let server = self.server.clone();
        let message = params.message.clone();
        let asked = match params.mode.as_deref() {
            None | Some("form") => {
                let schema = params.requested_schema.as_ref().ok_or_else(|| invalid("no requestedSchema".into()))?;
                let form = Form::parse(schema).map_err(|e| invalid(e.to_string()))?;
                approve::on_terminal(move |term| ask_form(term, &server, &message, &form)).await
            }
            Some("url") => {
                let url = params.url.as_deref().ok_or_else(|| invalid("a URL elicitation without a url".into()))?;
                let url = checked_url(url).map_err(invalid)?;
                approve::on_terminal(move |term| ask_url(term, &server, &message, &url)).await
            }
            Some(other) => return Err(invalid(format!("unknown elicitation mode {:?}", output::one_line(other, 40)))),
        };
        match asked {
            Ok(result) => Ok(result),
            Err(reason) => {
                say_declined(&self.server, &params.message, reason);
                Ok(answer(ElicitAction::Decline, None))
            }
        }
    }
}

/// Longest URL shown to be opened: a longer one could hide where it goes past the screen.
const MAX_URL_CHARS: usize = 2_000;

/// A URL that may be shown and opened: `http` or `https`, at most [`MAX_URL_CHARS`] long, with
/// nothing in it that a terminal would not show as it is (which could hide where it leads).
fn checked_url(raw: &str) -> Result<url::Url, String> {
    let chars = raw.chars().count();
    if chars > MAX_URL_CHARS {
        return Err(format!("the URL has {chars} characters; at most {MAX_URL_CHARS} are shown"));
    }
    let shown = output::one_line(raw, MAX_URL_CHARS);
    if shown != raw {
        return Err("the URL has characters that would not be shown as they are".to_owned());
    }
    let url = url::Url::parse(raw).map_err(|e| format!("the URL does not parse: {e}"))?;
    if !matches!(url.scheme(), "https" | "http") || url.host_str().is_none() {
        return Err(format!("only http and https URLs are opened, not {:?}", output::one_line(url.scheme(), 20)));
    }
    Ok(url)
}

/// What one prompt read.
#[derive(Debug, PartialEq, Eq)]
enum Typed {
    /// A line (Enter).
    Line(String),
    /// Esc.
    Decline,
    /// Ctrl-D, Ctrl-C, or the terminal went away.
    Cancel,
}

/// Reads one line on the terminal, key by key (so Esc and Ctrl-D work wherever the user is).
fn read_typed(term: &Term, prompt: &str) -> Typed {
    if term.write_str(&output::clean(prompt)).is_err() || term.flush().is_err() {
        return Typed::Cancel;
    }
    let mut line = String::new();
    let typed = loop {
        match term.read_key_raw() {
            Ok(Key::Enter) => break Typed::Line(std::mem::take(&mut line)),
            Ok(Key::Escape) => break Typed::Decline,
            Ok(Key::CtrlC | Key::Char('\u{4}')) | Err(_) => break Typed::Cancel,
            Ok(Key::Backspace) => {
                if let Some(c) = line.pop()
                    && !mcp_safety::text::is_stripped(c)
                {
                    let width = dialoguer::console::measure_text_width(c.encode_utf8(&mut [0; 4]));
                    let _ = term.clear_chars(width);
                }
            }
            Ok(Key::Char(c)) if !c.is_control() && line.chars().count() < MAX_TYPED_CHARS => {
                line.push(c);
                if !mcp_safety::text::is_stripped(c) {
                    let _ = term.write_str(c.encode_utf8(&mut [0; 4]));
                }
            }
            Ok(_) => {}
        }
        let _ = term.flush();
    };
    let _ = term.write_line("");
    typed
}

fn say(term: &Term, text: &str) {
    let _ = term.write_str(&output::clean(text));
}

fn quoted(value: &Value) -> String {
    match value {
        Value::Bool(yes) => if *yes { "yes" } else { "no" }.to_owned(),
        Value::String(s) => output::one_line(s, 200),
        Value::Array(items) => items.iter().map(quoted).collect::<Vec<_>>().join(", "),
        other => output::one_line(&other.to_string(), 200),
    }
}

/// How a field is asked: `Label (what it takes) [default]: `, its description and options on
/// the lines before.
fn field_prompt(field: &Field) -> (String, String) {
    let mut before = String::new();
    if let Some(description) = field.description.as_deref().filter(|d| !d.trim().is_empty()) {
        before.push_str(&format!("    {}\n", output::one_line(description, 300)));
    }
    let options_of = |options: &[mcp_client::elicitation::Choice]| {
        options
            .iter()
            .enumerate()
            .map(|(i, o)| {
                format!("      {}) {}\n", i + 1, output::one_line(o.label.as_deref().unwrap_or(&o.value), 120))
            })
            .collect::<String>()
    };
    let what = match &field.kind {
        FieldKind::Text { format, min_length, max_length } => {
            let mut what = match format {
                Some(TextFormat::Email) => "an email address".to_owned(),
                Some(TextFormat::Uri) => "a URI".to_owned(),
                Some(TextFormat::Date) => "a date, YYYY-MM-DD".to_owned(),
                Some(TextFormat::DateTime) => "a date and time, YYYY-MM-DDTHH:MM:SSZ".to_owned(),
                Some(_) | None => "text".to_owned(),
            };
            match (min_length, max_length) {
                (Some(min), Some(max)) => what.push_str(&format!(", {min} to {max} characters")),
                (Some(min), None) => what.push_str(&format!(", at least {min} characters")),
                (None, Some(max)) => what.push_str(&format!(", at most {max} characters")),
                (None, None) => {}
            }
            what
        }
        FieldKind::Number { integer, minimum, maximum } => {
            let mut what = if *integer { "a whole number".to_owned() } else { "a number".to_owned() };
            match (minimum, maximum) {
                (Some(min), Some(max)) => what.push_str(&format!(", {min} to {max}")),
                (Some(min), None) => what.push_str(&format!(", at least {min}")),
                (None, Some(max)) => what.push_str(&format!(", at most {max}")),
                (None, None) => {}
            }
            what
        }
        FieldKind::Boolean => "yes or no".to_owned(),
        FieldKind::Choice { options } => {
            before.push_str(&options_of(options));
            "one: its number or name".to_owned()
        }
        FieldKind::Choices { options, min_items, max_items } => {
            before.push_str(&options_of(options));
            let mut what = "any: numbers or names, comma-separated".to_owned();
            match (min_items, max_items) {
                (Some(min), Some(max)) => what.push_str(&format!("; {min} to {max}")),
                (Some(min), None) => what.push_str(&format!("; at least {min}")),
                (None, Some(max)) => what.push_str(&format!("; at most {max}")),
                (None, None) => {}
            }
            what
        }
        _ => "a value".to_owned(),
    };
    let required = if field.required { ", required" } else { "" };
    let default = field.default.as_ref().map(|d| format!(" [{}]", choice_names(field, d))).unwrap_or_default();
    (before, format!("  {} ({what}{required}){default}: ", output::one_line(field.label(), 120)))
}

/// A value as the user sees it: an option's label rather than its value.
fn choice_names(field: &Field, value: &Value) -> String {
    let options = match &field.kind {
        FieldKind::Choice { options } | FieldKind::Choices { options, .. } => options.as_slice(),
        _ => return quoted(value),
    };
    let name = |v: &Value| {
        options
            .iter()
            .find(|o| Some(o.value.as_str()) == v.as_str())
            .map(|o| output::one_line(o.label.as_deref().unwrap_or(&o.value), 120))
            .unwrap_or_else(|| quoted(v))
    };
    match value {
        Value::Array(items) => items.iter().map(name).collect::<Vec<_>>().join(", "),
        one => name(one),
    }
}

/// The form on the terminal: accept, decline or cancel first; then each field until its
/// answer fits; then the values, and whether to send them.
fn ask_form(term: &Term, server: &str, message: &str, form: &Form) -> ElicitResult {
    say(
        term,
        &format!(
            "\n{} asks for input:\n  {}\n",
            server_label(server),
            output::cut(&output::clean(message), MESSAGE_CHARS).replace('\n', "\n  ")
        ),
    );
    let labels: Vec<String> = form.fields.iter().map(|f| output::one_line(f.label(), 60)).collect();
    say(term, &format!("  fields: {}\n", if labels.is_empty() { "none".to_owned() } else { labels.join(", ") }));
    match read_typed(term, "Answer it? accept / decline / cancel [decline]: ") {
        Typed::Line(line) if matches!(line.trim().to_ascii_lowercase().as_str(), "a" | "accept" | "y" | "yes") => {}
        Typed::Line(line) if matches!(line.trim().to_ascii_lowercase().as_str(), "c" | "cancel") => {
            return answer(ElicitAction::Cancel, None);
        }
        Typed::Cancel => return answer(ElicitAction::Cancel, None),
        Typed::Line(_) | Typed::Decline => return answer(ElicitAction::Decline, None),
    }
    say(
        term,
        &format!(
            "  (Enter keeps the [default]; {LEAVE_OUT} leaves an optional field empty; Esc declines; Ctrl-D cancels)\n"
        ),
    );
    let mut content = Map::new();
    for field in &form.fields {
        let (before, prompt) = field_prompt(field);
        say(term, &before);
        loop {
            match read_typed(term, &prompt) {
                Typed::Line(line) => match field.read(&line) {
                    Ok(Some(value)) => {
                        content.insert(field.name.clone(), value);
                        break;
                    }
                    Ok(None) => break,
                    Err(wrong) => say(term, &format!("    ✗ {}; try again\n", output::one_line(&wrong, 300))),
                },
                Typed::Decline => return answer(ElicitAction::Decline, None),
                Typed::Cancel => return answer(ElicitAction::Cancel, None),
            }
        }
    }
    let summary: Vec<String> = form
        .fields
        .iter()
        .filter_map(|f| {
            Some(format!("{} = {}", output::one_line(f.label(), 60), choice_names(f, content.get(&f.name)?)))
        })
        .collect();
    say(term, &format!("  to send: {}\n", if summary.is_empty() { "nothing".to_owned() } else { summary.join("; ") }));
    match read_typed(term, &format!("Send this to {}? yes / no [yes]: ", server_label(server))) {
        Typed::Line(line) if matches!(line.trim().to_ascii_lowercase().as_str(), "" | "y" | "yes") => {
            answer(ElicitAction::Accept, Some(content))
        }
        Typed::Cancel => answer(ElicitAction::Cancel, None),
        Typed::Line(_) | Typed::Decline => answer(ElicitAction::Decline, None),
    }
}

/// The URL on the terminal, with where it leads; opened only on yes.
fn ask_url(term: &Term, server: &str, message: &str, url: &url::Url) -> ElicitResult {
    say(
        term,
        &format!(
            "\n{} asks you to open a URL:\n  {}\n  {url}\n  (it leads to {})\n",
            server_label(server),
            output::cut(&output::clean(message), MESSAGE_CHARS).replace('\n', "\n  "),
            url.host_str().unwrap_or("?")
        ),
    );
    match read_typed(term, "Open it in your browser? yes / no / cancel [no]: ") {
        Typed::Line(line) if matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes") => {
            if mcp_auth::open_in_browser(url) {
                say(term, "  opened in your browser\n");
            } else {
                say(term, "  no browser could be started; open the URL above yourself\n");
            }
            answer(ElicitAction::Accept, None)
        }
        Typed::Line(line) if matches!(line.trim().to_ascii_lowercase().as_str(), "c" | "cancel") => {
            answer(ElicitAction::Cancel, None)
        }
        Typed::Cancel => answer(ElicitAction::Cancel, None),
        Typed::Line(_) | Typed::Decline => answer(ElicitAction::Decline, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the host cannot show is answered with an error before anything is asked.
    #[tokio::test]
    async fn forms_that_cannot_be_shown_are_refused_before_asking() {
        let asker = OnTerminal { server: "fx".to_owned() };
        let params = |value: Value| serde_json::from_value::<ElicitRequestParams>(value).unwrap();
        let many: Map<String, Value> = (0..40).map(|i| (format!("f{i}"), json!({"type": "boolean"}))).collect();
        for (bad, says) in [
            (json!({"message": "m"}), "no requestedSchema"),
            (json!({"message": "m", "requestedSchema": {"type": "object", "properties": many}}), "40 fields"),
            (
                json!({"message": "m", "requestedSchema": {"type": "object", "properties": {"o": {"type": "object"}}}}),
                "\"o\"",
            ),
            (json!({"message": "m", "mode": "url"}), "without a url"),
            (json!({"message": "m", "mode": "url", "url": "javascript:alert(1)"}), "only http and https"),
            (json!({"message": "m", "mode": "telepathy"}), "unknown elicitation mode"),
        ] {
            let error = asker.elicit(params(bad)).await.unwrap_err();
            assert_eq!(error.code, error_codes::INVALID_PARAMS);
            assert!(error.message.contains(says), "{says:?} in {:?}", error.message);
        }
    }

    #[test]
    fn urls_that_could_mislead_are_refused() {
        assert!(checked_url("https://example.com/a?b=c").is_ok());
        assert!(checked_url("http://127.0.0.1:8080/x").is_ok());
        assert!(checked_url("javascript:alert(1)").is_err());
        assert!(checked_url("file:///etc/passwd").is_err());
        assert!(checked_url("https://example.com/\u{202e}gpj.exe").is_err());
        assert!(checked_url("https://exa\u{1b}]8;;mple.com").is_err());
        assert!(checked_url("not a url").is_err());
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        assert_eq!(
            checked_url(&long).map(|_| ()),
            Err("the URL has 2020 characters; at most 2000 are shown".to_owned())
        );
    }

    #[test]
    fn prompts_say_what_a_field_takes() {
        let form = Form::parse(&json!({"type": "object", "required": ["age"], "properties": {
            "age": {"type": "integer", "title": "Age\u{1b}[2J", "minimum": 0, "maximum": 150, "default": 30},
            "color": {"type": "string", "description": "Pick\none", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}], "default": "g"},
            "ok": {"type": "boolean", "default": true}
        }}))
        .unwrap();
        let (before, prompt) = field_prompt(&form.fields[0]);
        assert_eq!((before.as_str(), prompt.as_str()), ("", "  Age[2J (a whole number, 0 to 150, required) [30]: "));
        let (before, prompt) = field_prompt(&form.fields[1]);
        assert_eq!(before, "    Pick one\n      1) Red\n      2) Green\n");
        assert_eq!(prompt, "  color (one: its number or name) [Green]: ");
        assert_eq!(field_prompt(&form.fields[2]).1, "  ok (yes or no) [yes]: ");
    }
}
