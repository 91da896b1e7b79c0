//! What the model reads of a tool result: every content type mapped to text, failures marked
//! `Error:`, and results over a budget saved to a file and replaced by an excerpt.

use std::path::{Path, PathBuf};

use mcp_protocol::{CallToolResult, ContentBlock};

/// Text for the model from a tool's result: each block as [`content_text`] gives it, one per
/// line. `isError` results start with `Error:`.
pub fn render(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result.content.iter().map(content_text).collect();
    // Structured content is what the tool meant when it sent nothing else.
    if let Some(structured) = &result.structured_content
        && parts.iter().all(|p| p.trim().is_empty())
    {
        parts = vec![structured.to_string()];
    }
    let text = parts.join("\n");
    if result.is_error() { error_text(&text) } else { text }
}

/// One content block as text, the one form for the model and for a person (`mcp-harness call`,
/// prompts): text as it is, every other kind summarized on one line (its type, size, URI or
/// name) with what the server chose for those made one line. The caller makes the whole safe
/// for where it goes (a terminal cleans it when it prints).
pub fn content_text(block: &ContentBlock) -> String {
    let field = |text: &str, max: usize| mcp_safety::text::one_line(text, max);
    match block {
        ContentBlock::Text { text, .. } => text.clone(),
        ContentBlock::Image { mime_type, data, .. } => {
            format!("[image {}, {} bytes base64, not shown]", field(mime_type, 80), data.len())
        }
        ContentBlock::Audio { mime_type, data, .. } => {
            format!("[audio {}, {} bytes base64, not shown]", field(mime_type, 80), data.len())
        }
        ContentBlock::ResourceLink { uri, name, description, .. } => match description {
            Some(d) => format!("[resource link {} <{}>: {}]", field(name, 100), field(uri, 300), field(d, 300)),
            None => format!("[resource link {} <{}>]", field(name, 100), field(uri, 300)),
        },
        ContentBlock::Resource { resource, .. } => match (&resource.text, &resource.blob) {
            (Some(text), _) => format!("[resource <{}>]\n{text}", field(&resource.uri, 300)),
            (None, Some(blob)) => format!(
                "[resource <{}>: {}, {} bytes base64, not shown]",
                field(&resource.uri, 300),
                resource.mime_type.as_deref().map_or_else(|| "binary".to_owned(), |m| field(m, 80)),
                blob.len()
            ),
            (None, None) => format!("[resource <{}>, empty]", field(&resource.uri, 300)),
        },
        ContentBlock::Other(fields) => {
            let kind = fields.get("type").and_then(|t| t.as_str()).unwrap_or("unknown");
            format!("[content of type {}, not shown]", field(kind, 80))
        }
    }
}

/// `Error: …`, the form every failure reaches the model in.
pub fn error_text(message: &str) -> String {
    if message.starts_with("Error:") { message.to_owned() } else { format!("Error: {message}") }
}

/// Keep `text` within `budget` characters: a longer one is written to `dir/<id>.txt` (or
/// `<id>-2.txt` and on, never over another; 0600, in
/// directories created 0700) and replaced by its beginning, the file's path and the tool that
/// reads it back in slices ([`crate::READ_SAVED_TOOL`]). Without a directory it is cut.
pub fn fit_budget(text: String, budget: usize, dir: Option<&Path>, id: &str) -> String {
    let total = text.chars().count();
    if total <= budget {
        return text;
    }
    let excerpt_len = budget.saturating_sub(200).max(budget / 2);
    let excerpt: String = text.chars().take(excerpt_len).collect();
    let rest = total - excerpt_len;
    let saved = dir.and_then(|dir| save(dir, id, &text).ok());
    match saved {
        Some(path) => format!(
            "{excerpt}\n… [{rest} more characters; the whole result ({total} characters) is saved in {}; read it in \
             slices with {}]",
            path.display(),
            crate::READ_SAVED_TOOL
        ),
        None => format!("{excerpt}\n… [{rest} more characters cut]"),
    }
}

/// Saved privately (0600 in 0700, like the transcript): a result can hold anything the tool
/// could read.
/// Never over another: ids repeat (a provider numbering calls `call_0` at every step, two ids
/// made alike by the cleaning), and an earlier result's message still names its file.
fn save(dir: &Path, id: &str, text: &str) -> std::io::Result<PathBuf> {
    use std::io::Write as _;
    // The id comes from the model: keep only characters safe in a file name.
    let safe: String =
        id.chars().take(100).map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    let stem = if safe.is_empty() { "result" } else { &safe };
    for n in 1..=MAX_SAVED_NAMES {
        let name = if n == 1 { format!("{stem}.txt") } else { format!("{stem}-{n}.txt") };
        let path = dir.join(name);
        match private_files::create_new(&path) {
            Ok(mut file) => {
                let written = file.write_all(text.as_bytes()).and_then(|()| file.sync_all());
                if let Err(e) = written {
                    let _ = std::fs::remove_file(&path);
                    return Err(e);
                }
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!("{MAX_SAVED_NAMES} results of this id are saved already")))
}

/// Results of one id saved before one is cut instead.
const MAX_SAVED_NAMES: usize = 1000;
