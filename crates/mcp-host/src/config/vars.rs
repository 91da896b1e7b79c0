//! Variable references in configuration strings, as each host writes them, and their expansion.
//!
//! Every file is brought into one internal form when it is read ([`to_ours`]): our own syntax,
//! `${VAR}` and `${VAR:-default}` for the environment, `$${` for a literal `${`, plus `${input:ID}`
//! for a VS Code input. What a host resolves from its surroundings (`${userHome}`,
//! `${workspaceFolder}`) is resolved then; references to the environment and to inputs stay
//! references, so an import writes the reference and never a secret's value. [`expand`] resolves
//! the internal form when the configuration is used.

use std::path::Path;

/// Looks up an environment variable.
pub type Lookup<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// Answers a VS Code input by its id (an error says why it cannot be).
pub(crate) type AskInput<'a> = dyn Fn(&str) -> Result<String, String> + 'a;

/// Which references a file's strings may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    /// Ours: `${VAR}`, `${VAR:-default}`, and `$${` for a literal `${`.
    Ours,
    /// Claude Desktop and Claude Code: `${VAR}`, `${VAR:-default}`.
    Claude,
    /// Cursor: `${env:NAME}`, `${userHome}`, `${workspaceFolder}`, `${workspaceFolderBasename}`,
    /// `${pathSeparator}`, `${/}`.
    Cursor,
    /// VS Code: Cursor's forms and `${input:ID}`.
    VsCode,
    /// An `mcpServers` file of no known host: Claude's and Cursor's forms.
    Any,
    /// Codex: no references, every character is literal.
    Literal,
}

/// What a file's surroundings resolve to while it is read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Surroundings<'a> {
    /// The user's home directory.
    pub(crate) home: Option<&'a Path>,
    /// The folder a workspace file belongs to (VS Code's and Cursor's `${workspaceFolder}`).
    pub(crate) workspace_folder: Option<&'a Path>,
}

/// One piece of a string: text, or a reference (the text between `${` and `}`).
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Ref(&'a str),
}

/// Splits `text` into text and references. `escapes`: `$${` is a literal `${`. An unterminated
/// `${` is text.
fn pieces(text: &str, escapes: bool) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        if escapes && rest[..at].ends_with('$') {
            out.push(Piece::Text(&rest[..at - 1]));
            out.push(Piece::Text("${"));
            rest = &rest[at + 2..];
            continue;
        }
        let Some(len) = rest[at + 2..].find('}') else { break };
        if at > 0 {
            out.push(Piece::Text(&rest[..at]));
        }
        out.push(Piece::Ref(&rest[at + 2..at + 2 + len]));
        rest = &rest[at + 2 + len + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `VAR` or `VAR:-default`, as (name, default). A default holds no reference: `${A:-${B}}`
/// is not nested here (it read as `${A:-${B}` and a stray `}`), so it is refused.
fn shell_ref(body: &str) -> Option<(&str, Option<&str>)> {
    match body.split_once(":-") {
        Some((name, default)) if is_name(name) && !default.contains("${") => Some((name, Some(default))),
        None if is_name(body) => Some((body, None)),
        _ => None,
    }
}

/// A literal text in our syntax.
fn escape(text: &str) -> String {
    text.replace("${", "$${")
}

/// `text`, written with `syntax`, in the internal form (see the module docs).
pub(crate) fn to_ours(text: &str, syntax: Syntax, around: Surroundings<'_>) -> Result<String, String> {
    if syntax == Syntax::Literal {
        return Ok(escape(text));
    }
    let editor = matches!(syntax, Syntax::Cursor | Syntax::VsCode | Syntax::Any);
    let shell = matches!(syntax, Syntax::Ours | Syntax::Claude | Syntax::Any);
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text, syntax == Syntax::Ours) {
        let body = match piece {
            Piece::Text(t) => {
                out.push_str(&escape(t));
                continue;
            }
            Piece::Ref(body) => body,
        };
        let folder = || {
            around
                .workspace_folder
                .ok_or_else(|| format!("${{{body}}} needs a workspace folder, and this file belongs to none"))
        };
        // The editors' own names come first: in a file of no known host, `${userHome}` is the
        // editor's, not an environment variable of that name.
        let editor_name = matches!(body, "userHome" | "workspaceFolder" | "workspaceFolderBasename" | "pathSeparator");
        let resolved = match body {
            _ if shell && !(editor && editor_name) && shell_ref(body).is_some() => {
                out.push_str(&format!("${{{body}}}"));
                continue;
            }
            _ if editor && body.strip_prefix("env:").is_some_and(is_name) => {
                out.push_str(&format!("${{{}}}", &body[4..]));
                continue;
            }
            _ if syntax == Syntax::VsCode && body.strip_prefix("input:").is_some_and(|id| !id.is_empty()) => {
                out.push_str(&format!("${{{body}}}"));
                continue;
            }
            "userHome" if editor => around
                .home
                .map(|h| h.display().to_string())
                .ok_or_else(|| "${userHome}: no home directory is known".to_owned())?,
            "workspaceFolder" if editor => folder()?.display().to_string(),
            "workspaceFolderBasename" if editor => {
                folder()?.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
            }
            "pathSeparator" | "/" if editor => std::path::MAIN_SEPARATOR.to_string(),
            _ => return Err(format!("${{{body}}} is not a variable this file's format knows{}", hint(syntax))),
        };
        out.push_str(&escape(&resolved));
    }
    Ok(out)
}

fn hint(syntax: Syntax) -> &'static str {
    match syntax {
        Syntax::Ours => " (write ${NAME} or ${NAME:-default} for an environment variable, $${ for a literal ${)",
        Syntax::Claude => " (${NAME} or ${NAME:-default})",
        _ => "",
    }
}

/// Resolves the internal form: `env` looks up environment variables, `input` asks for a VS Code
/// input by its id (`None` where the file has no inputs).
pub(crate) fn expand(text: &str, env: &Lookup<'_>, input: Option<&AskInput<'_>>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text, true) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Ref(body) => {
                if let (Some(id), Some(input)) = (body.strip_prefix("input:"), input) {
                    out.push_str(&input(id)?);
                    continue;
                }
                match shell_ref(body) {
                    Some((name, default)) => match (env(name), default) {
                        (Some(value), _) => out.push_str(&value),
                        (None, Some(default)) => out.push_str(default),
                        (None, None) => {
                            return Err(format!(
                                "environment variable `{name}` is not set (set it, or write ${{{name}:-default}} \
                                 for a default)"
                            ));
                        }
                    },
                    None => return Err(format!("${{{body}}} is not a variable reference{}", hint(Syntax::Ours))),
                }
            }
        }
    }
    Ok(out)
}

/// The environment variables `text` (internal form) refers to.
pub(crate) fn references(text: &str) -> Vec<String> {
    pieces(text, true)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Ref(body) => shell_ref(body).map(|(name, _)| name.to_owned()),
            Piece::Text(_) => None,
        })
        .collect()
}

/// The ids of the VS Code inputs `text` (internal form) refers to.
pub(crate) fn inputs(text: &str) -> Vec<String> {
    pieces(text, true)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Ref(body) => body.strip_prefix("input:").map(str::to_owned),
            Piece::Text(_) => None,
        })
        .collect()
}

/// The environment variable an import writes in place of VS Code input `id`: `api-key` becomes
/// `API_KEY`.
pub(crate) fn input_variable(id: &str) -> String {
    let mut name: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    name
}

/// `text` (internal form) with every `${input:ID}` replaced by `${VAR}` (see [`input_variable`]).
pub(crate) fn inputs_to_variables(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text, true) {
        match piece {
            Piece::Text(t) => out.push_str(&escape(t)),
            Piece::Ref(body) => match body.strip_prefix("input:") {
                Some(id) => out.push_str(&format!("${{{}}}", input_variable(id))),
                None => out.push_str(&format!("${{{body}}}")),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn ours(text: &str) -> Result<String, String> {
        expand(&to_ours(text, Syntax::Ours, Surroundings::default())?, &env, None)
    }

    #[test]
    fn our_syntax_expands_the_environment_with_defaults_and_escapes() {
        assert_eq!(ours("Bearer ${TOKEN}").unwrap(), "Bearer t0k");
        assert_eq!(ours("${MISSING:-fallback}/x").unwrap(), "fallback/x");
        assert_eq!(ours("${EMPTY:-fallback}").unwrap(), "", "set but empty is set");
        assert_eq!(ours("${MISSING:-}").unwrap(), "");
        assert_eq!(ours("$${TOKEN} and $5 and ${").unwrap(), "${TOKEN} and $5 and ${");
        assert_eq!(ours("a$$${TOKEN}").unwrap(), "a$${TOKEN}");
        let err = ours("${MISSING}").unwrap_err();
        assert!(err.contains("`MISSING` is not set") && err.contains("${MISSING:-default}"), "{err}");
        assert!(ours("${not a name}").unwrap_err().contains("$${"));
        assert!(ours("${env:TOKEN}").is_err(), "editor forms are not ours");
        // Nested references are not ours either (they left a stray brace).
        assert!(ours("${MISSING:-${TOKEN}}").unwrap_err().contains("is not a variable"));
        assert!(ours("${TOKEN:-${MISSING}}").is_err());
    }

    #[test]
    fn each_host_syntax_becomes_ours() {
        let home = Path::new("/home/u");
        let folder = Path::new("/work/proj");
        let around = Surroundings { home: Some(home), workspace_folder: Some(folder) };
        let cases = [
            (Syntax::Claude, "${A}-${B:-x}", "${A}-${B:-x}"),
            (Syntax::Cursor, "${env:A} ${userHome}/${workspaceFolderBasename}${/}x", "${A} /home/u/proj/x"),
            (Syntax::VsCode, "${input:api-key} ${workspaceFolder}", "${input:api-key} /work/proj"),
            (Syntax::Any, "${A} ${env:B} ${userHome}", "${A} ${B} /home/u"),
            (Syntax::Literal, "echo ${HOME} $x", "echo $${HOME} $x"),
        ];
        for (syntax, text, expected) in cases {
            assert_eq!(to_ours(text, syntax, around).unwrap(), expected, "{syntax:?}");
        }
        assert!(to_ours("${env:A}", Syntax::Claude, around).is_err());
        assert!(to_ours("${input:x}", Syntax::Cursor, around).is_err());
        assert!(to_ours("${config:editor.x}", Syntax::VsCode, around).is_err());
        let err = to_ours("${workspaceFolder}", Syntax::Cursor, Surroundings::default()).unwrap_err();
        assert!(err.contains("workspace folder"), "{err}");
        // A resolved path that itself holds `${` stays literal.
        let odd = Surroundings { home: Some(Path::new("/h/${X}")), workspace_folder: None };
        assert_eq!(expand(&to_ours("${userHome}", Syntax::Cursor, odd).unwrap(), &env, None).unwrap(), "/h/${X}");
    }

    #[test]
    fn inputs_are_asked_and_become_variables_on_import() {
        let text = to_ours("key=${input:api-key}", Syntax::VsCode, Surroundings::default()).unwrap();
        assert_eq!(inputs(&text), ["api-key"]);
        let ask = |id: &str| if id == "api-key" { Ok("s3cret".to_owned()) } else { Err(format!("no {id}")) };
        assert_eq!(expand(&text, &env, Some(&ask)).unwrap(), "key=s3cret");
        assert_eq!(inputs_to_variables(&text), "key=${API_KEY}");
        assert_eq!(input_variable("1st.key"), "_1ST_KEY");
        assert_eq!(references("${A} ${B:-x} $${C} ${input:d}"), ["A", "B"]);
    }
}
