//! Compact, TypeScript-like declarations of the callable tools, generated from their JSON
//! Schemas, for the description of the tool that runs scripts. Pure.
//!
//! The declarations fit a byte budget by giving up detail in steps, the same for every tool
//! (so the model reads one style): full (descriptions, nested types), then short descriptions
//! and shallower types, then top-level parameters only, then bare signatures; whatever still
//! does not fit is left out and counted.

use std::fmt::Write as _;

use mcp_safety::text;
use serde_json::{Map, Value};

use crate::limits::Limits;
use crate::tools::{ScriptTool, ScriptTools};

/// The usual name of the tool that takes scripts.
pub const RUN_CODE: &str = "run_code";

/// The input schema of the tool that takes scripts: `{ "code": string }`.
pub fn run_code_input_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": "JavaScript: the body of an async function. Use await, and return the answer."
            }
        },
        "required": ["code"],
        "additionalProperties": false
    })
}

/// The description of the tool that takes scripts: what it is for, how a script is written,
/// its limits, and the declarations of `tools` in what is left of `budget` bytes.
pub fn run_code_description(tools: &ScriptTools, limits: &Limits, budget: usize) -> Declarations {
    let mut intro = String::from(
        "Run a JavaScript script that calls tools and returns only what matters. Prefer it when a task needs \
         several calls, or a large result filtered, joined or counted: intermediate results stay in the \
         script. The script is the body of an async function: `return` the answer (JSON). console.log output \
         comes back too. There is no file system, network, module loading or timers; Date.now() is fixed at \
         the start.\n",
    );
    let _ = writeln!(
        intro,
        "Limits: {} tool calls{}, {} s of CPU time, {} MiB of memory, {} KiB of returned JSON.",
        limits.max_calls,
        if tools.searchable() { " (searches included)" } else { "" },
        limits.cpu_time.as_secs_f64(),
        limits.memory_bytes >> 20,
        limits.max_result_bytes >> 10,
    );
    let mut declarations = tools.declarations(budget.saturating_sub(intro.len()));
    intro.push_str(&declarations.text);
    declarations.text = intro;
    declarations
}

/// Declarations within a budget, and what it cost to fit them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declarations {
    /// The declarations.
    pub text: String,
    /// The level of detail used: [`Detail::Full`] unless the budget forced less.
    pub detail: Detail,
    /// How many tools were left out (only at [`Detail::Signatures`]).
    pub omitted: usize,
}

/// How much of each tool the declarations show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Detail {
    /// Descriptions of tools and parameters, types four levels deep.
    Full,
    /// Short tool descriptions, no parameter descriptions, types two levels deep.
    Short,
    /// No descriptions, parameters' types one level deep, results `unknown`.
    Parameters,
    /// Signatures only (`args: object`).
    Signatures,
}

/// What each [`Detail`] shows.
struct Style {
    tool_description: usize,
    property_description: usize,
    input_depth: usize,
    output_depth: usize,
}

impl Detail {
    fn style(self) -> Style {
        match self {
            Detail::Full => Style { tool_description: 200, property_description: 80, input_depth: 4, output_depth: 3 },
            Detail::Short => Style { tool_description: 80, property_description: 0, input_depth: 2, output_depth: 1 },
            Detail::Parameters => {
                Style { tool_description: 0, property_description: 0, input_depth: 1, output_depth: 0 }
            }
            Detail::Signatures => {
                Style { tool_description: 0, property_description: 0, input_depth: 0, output_depth: 0 }
            }
        }
    }
}

/// What every declaration starts with: how calls work.
const HEADER: &str = "\
// Call as `await tools.<server>.<tool>(args)`; run calls at once with Promise.all.
// A call gives the tool's structured result when it has one, else its text.
// A failed call throws a ToolError (.kind, .message); catch it to go on.
";

/// What the declarations say of `tools.search` when it is offered.
const SEARCH_NOTE: &str = "\
// Not every tool is declared: `await tools.search(\"what you need\", limit?)` finds the best
// matching ones (or \"select:NAME,NAME\" by name) as { path, name, declaration, description },
// and each tool found is callable at its path for the rest of the script.
";

/// The declaration of `tools.search`.
const SEARCH_SIGNATURE: &str = "  function search(query: string, limit?: number): \
Promise<{ path: string; name: string; declaration: string; description: string }[]>;\n";

/// How long a found tool's description is, in characters.
const FOUND_DESCRIPTION: usize = 200;

/// How many values of an `enum` are listed before the type is given instead.
const ENUM_VALUES: usize = 12;
/// How many members of a union are shown before the rest become `unknown`.
const UNION_MEMBERS: usize = 6;
/// How many references in a row are followed.
const MAX_HOPS: usize = 8;
/// How many properties of one object are shown; the rest are an index signature.
const PROPERTIES: usize = 24;

impl ScriptTools {
    /// The declarations of these tools in at most `budget` bytes (a budget too small even
    /// for the header gives the header alone).
    pub fn declarations(&self, budget: usize) -> Declarations {
        for detail in [Detail::Full, Detail::Short, Detail::Parameters, Detail::Signatures] {
            let text = self.render(detail, usize::MAX).0;
            if text.len() <= budget {
                return Declarations { text, detail, omitted: 0 };
            }
        }
        let (text, omitted) = self.render(Detail::Signatures, budget);
        Declarations { text, detail: Detail::Signatures, omitted }
    }

    /// What `tools.search` gives of tool number `index`: `{ path, name, declaration,
    /// description }`, the declaration a short signature (as [`Detail::Short`] writes it).
    pub(crate) fn found(&self, index: usize) -> Option<Value> {
        let tool = self.get(index)?;
        let (_, ident) = self.idents(index)?;
        let style = Detail::Short.style();
        let declaration =
            format!("function {ident}(args: {}): Promise<{}>;", arguments(tool, &style), result(tool, &style));
        Some(serde_json::json!({
            "path": self.path(index)?,
            "name": tool.name(),
            "declaration": declaration,
            "description": tool.description().map(|d| text::one_line(d, FOUND_DESCRIPTION)).unwrap_or_default(),
        }))
    }

    /// The declarations at `detail`, leaving out the tools past `budget` bytes.
    fn render(&self, detail: Detail, budget: usize) -> (String, usize) {
        let style = detail.style();
        let mut out = String::from(HEADER);
        if self.searchable() {
            let _ = write!(out, "{SEARCH_NOTE}");
            if self.deferred() > 0 {
                let _ = writeln!(out, "// {} more tools of the servers in reach wait behind search.", self.deferred());
            }
        }
        out.push_str("declare namespace tools {\n");
        if self.searchable() {
            out.push_str(SEARCH_SIGNATURE);
        }
        let closing = "}\n";
        let mut omitted = 0;
        for ns in self.namespaces() {
            let mut block = String::new();
            let _ = writeln!(block, "  namespace {} {{{}", ns.ident, raw_note("server", &ns.ident, &ns.server));
            let open_len = block.len();
            for (ident, index) in &ns.tools {
                let Some(tool) = self.get(*index).filter(|t| !t.is_deferred()) else { continue };
                let line = declaration(ident, tool, &style);
                if out.len() + block.len() + line.len() + "  }\n".len() + closing.len() + omission_len(omitted + 1)
                    > budget
                {
                    omitted += 1;
                    continue;
                }
                block.push_str(&line);
            }
            if block.len() > open_len {
                out.push_str(&block);
                out.push_str("  }\n");
            }
        }
        out.push_str(closing);
        if omitted > 0 {
            let _ = writeln!(out, "// {omitted} more tools left out (over the declarations' budget)");
        }
        (out, omitted)
    }
}

/// One tool's declaration at `style`: its doc comment (description, raw name) and signature.
fn declaration(ident: &str, tool: &ScriptTool, style: &Style) -> String {
    let mut line = String::new();
    let description = match style.tool_description {
        0 => String::new(),
        cap => tool.description().map(|d| comment_text(d, cap)).unwrap_or_default(),
    };
    let note = raw_note("tool", ident, tool.tool());
    if !description.is_empty() || !note.is_empty() {
        let note = note.trim_start_matches(" // ");
        let joined = match (description.is_empty(), note.is_empty()) {
            (false, false) => format!("{description} ({note})"),
            (false, true) => description,
            _ => note.to_owned(),
        };
        let _ = writeln!(line, "    /** {joined} */");
    }
    let _ = writeln!(line, "    function {ident}(args: {}): Promise<{}>;", arguments(tool, style), result(tool, style));
    line
}

/// The type of a tool's arguments at `style`.
fn arguments(tool: &ScriptTool, style: &Style) -> String {
    match style.input_depth {
        0 => "object".to_owned(),
        depth => Types::new(tool.input_schema(), style, depth).of(tool.input_schema(), 0),
    }
}

/// The type of a tool's result at `style`.
fn result(tool: &ScriptTool, style: &Style) -> String {
    match (style.output_depth, tool.output_schema()) {
        (0, _) | (_, None) => "unknown".to_owned(),
        (depth, Some(schema)) => Types::new(schema, style, depth).of(schema, 0),
    }
}

/// The length of the line that says how many tools were left out.
fn omission_len(omitted: usize) -> usize {
    format!("// {omitted} more tools left out (over the declarations' budget)\n").len()
}

/// ` // server "raw name"` when the identifier is not the raw name, so the model can tell
/// which is which; empty otherwise.
fn raw_note(what: &str, ident: &str, raw: &str) -> String {
    if ident == raw { String::new() } else { format!(" // {what} {}", quoted(raw, 80)) }
}

/// Untrusted text as a JSON string literal: cleaned, capped, quoted.
fn quoted(raw: &str, cap: usize) -> String {
    Value::from(text::one_line(raw, cap)).to_string()
}

/// Untrusted text fit for a `/** */` comment: one cleaned, capped line that cannot close it.
fn comment_text(raw: &str, cap: usize) -> String {
    text::one_line(&raw.replace("*/", "* /"), cap)
}

/// Turns one schema document into types; `$ref`s resolve within `root`.
struct Types<'a> {
    root: &'a Value,
    property_description: usize,
    depth: usize,
    /// Schema nodes still to be read for this declaration: references through `anyOf` can
    /// fan out (each level doubling the work), and a declaration is made at every step.
    budget: std::cell::Cell<usize>,
}

/// The most schema nodes read for one declaration; past them a type is `unknown`.
const NODE_BUDGET: usize = 4096;

impl<'a> Types<'a> {
    fn new(root: &'a Value, style: &Style, depth: usize) -> Self {
        Self {
            root,
            property_description: style.property_description,
            depth,
            budget: std::cell::Cell::new(NODE_BUDGET),
        }
    }

    /// The type of `schema`, `level` objects deep.
    fn of(&self, schema: &Value, level: usize) -> String {
        self.at(schema, level, 0)
    }

    /// [`Types::of`], `hops` references followed to get here.
    fn at(&self, schema: &Value, level: usize, hops: usize) -> String {
        let Some(left) = self.budget.get().checked_sub(1) else { return "unknown".to_owned() };
        self.budget.set(left);
        let Value::Object(schema) = schema else {
            return if schema == &Value::Bool(false) { "never".to_owned() } else { "unknown".to_owned() };
        };
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            // Recursive schemas stop at the depth (objects and arrays go one level down);
            // references to references, at a few hops.
            return match self.resolve(target) {
                Some(resolved) if hops < MAX_HOPS => self.at(resolved, level, hops + 1),
                _ => "unknown".to_owned(),
            };
        }
        if let Some(value) = schema.get("const") {
            return literal(value).unwrap_or_else(|| "unknown".to_owned());
        }
        if let Some(Value::Array(values)) = schema.get("enum") {
            let literals: Option<Vec<String>> = values.iter().map(literal).collect();
            if let Some(literals) = literals.filter(|l| !l.is_empty() && l.len() <= ENUM_VALUES) {
                return literals.join(" | ");
            }
        }
        // Members keep the count of references followed to get here: a reference cycle
        // through a union (`a = anyOf [a]`) recursed until the stack overflowed.
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(members)) = schema.get(key) {
                return self.union(members.iter().map(|m| self.at(m, level, hops)));
            }
        }
        if let Some(Value::Array(members)) = schema.get("allOf") {
            let parts: Vec<String> =
                members.iter().map(|m| self.at(m, level, hops)).filter(|t| t != "unknown").collect();
            return match parts.len() {
                0 => "unknown".to_owned(),
                1 => parts.into_iter().collect(),
                _ => parts.iter().map(|p| parenthesized(p)).collect::<Vec<_>>().join(" & "),
            };
        }
        match schema.get("type") {
            Some(Value::String(name)) => self.typed(name, schema, level),
            Some(Value::Array(names)) => {
                self.union(names.iter().filter_map(Value::as_str).map(|name| self.typed(name, schema, level)))
            }
            _ if schema.contains_key("properties") => self.typed("object", schema, level),
            _ if schema.contains_key("items") => self.typed("array", schema, level),
            _ => "unknown".to_owned(),
        }
    }

    /// The type of `schema` read as JSON type `name`.
    fn typed(&self, name: &str, schema: &Map<String, Value>, level: usize) -> String {
        match name {
            "string" => "string".to_owned(),
            "number" | "integer" => "number".to_owned(),
            "boolean" => "boolean".to_owned(),
            "null" => "null".to_owned(),
            "array" => {
                let item = match schema.get("items") {
                    Some(items) if level < self.depth => self.of(items, level + 1),
                    _ => "unknown".to_owned(),
                };
                format!("{}[]", parenthesized(&item))
            }
            "object" => self.object(schema, level),
            _ => "unknown".to_owned(),
        }
    }

    fn object(&self, schema: &Map<String, Value>, level: usize) -> String {
        let properties = schema.get("properties").and_then(Value::as_object);
        let extra = schema.get("additionalProperties");
        if level >= self.depth {
            return "object".to_owned();
        }
        let required: Vec<&str> =
            schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let mut fields = Vec::new();
        for (key, property) in properties.into_iter().flatten().take(PROPERTIES) {
            let mut field = String::new();
            if self.property_description > 0
                && let Some(description) = property.get("description").and_then(Value::as_str)
            {
                let description = comment_text(description, self.property_description);
                if !description.is_empty() {
                    let _ = write!(field, "/** {description} */ ");
                }
            }
            let optional = if required.contains(&key.as_str()) { "" } else { "?" };
            let _ = write!(field, "{}{optional}: {}", property_key(key), self.of(property, level + 1));
            fields.push(field);
        }
        let more = properties.is_some_and(|p| p.len() > PROPERTIES);
        match extra {
            Some(Value::Bool(false)) if !more => {}
            Some(schema @ Value::Object(_)) if !more => {
                fields.push(format!("[key: string]: {}", self.of(schema, level + 1)));
            }
            _ if fields.is_empty() || more => fields.push("[key: string]: unknown".to_owned()),
            _ => {}
        }
        format!("{{ {} }}", fields.join("; "))
    }

    fn union(&self, members: impl Iterator<Item = String>) -> String {
        let mut seen: Vec<String> = Vec::new();
        for member in members {
            if member == "unknown" || seen.len() > UNION_MEMBERS {
                return "unknown".to_owned();
            }
            if !seen.contains(&member) {
                seen.push(member);
            }
        }
        if seen.is_empty() || seen.iter().any(|m| m == "unknown") || seen.len() > UNION_MEMBERS {
            return "unknown".to_owned();
        }
        seen.join(" | ")
    }

    /// A local reference (`#/$defs/Name`, `#/definitions/Name`, any JSON pointer) in the root.
    fn resolve(&self, target: &str) -> Option<&'a Value> {
        let pointer = target.strip_prefix('#')?;
        self.root.pointer(pointer)
    }
}

/// A JSON value as a TypeScript literal type, for primitives.
fn literal(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(quoted(s, 60)),
        Value::Number(_) | Value::Bool(_) | Value::Null => Some(value.to_string()),
        _ => None,
    }
}

/// A property key, quoted unless it is a plain identifier.
fn property_key(key: &str) -> String {
    let plain = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if plain { key.to_owned() } else { quoted(key, 60) }
}

/// A type fit to stand before `[]` or beside `&`: unions and intersections in parentheses.
fn parenthesized(ty: &str) -> String {
    let top_level = ty.contains(" | ") || ty.contains(" & ");
    // Only when the operator is outside braces: `{ a: x | y }[]` needs none.
    let mut depth = 0i32;
    let mut outside = false;
    if top_level {
        let bytes = ty.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            match b {
                b'{' | b'(' | b'[' => depth += 1,
                b'}' | b')' | b']' => depth -= 1,
                b'|' | b'&' if depth == 0 && i > 0 && bytes[i - 1] == b' ' => outside = true,
                _ => {}
            }
        }
    }
    if outside { format!("({ty})") } else { ty.to_owned() }
}

#[cfg(test)]
mod tests;
