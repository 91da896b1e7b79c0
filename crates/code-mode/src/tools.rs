//! The tools a script may call, and the JavaScript names it calls them by:
//! `tools.<server>.<tool>`, each part made a valid identifier.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

/// One tool a script may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptTool {
    name: String,
    server: String,
    tool: String,
    description: Option<String>,
    input_schema: Value,
    output_schema: Option<Value>,
    deferred: bool,
}

impl ScriptTool {
    /// Tool `tool` of server `server`, which the host calls `name` (the model-visible name its
    /// gate knows it by), taking arguments described by `input_schema`.
    pub fn new(
        name: impl Into<String>,
        server: impl Into<String>,
        tool: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            server: server.into(),
            tool: tool.into(),
            description: None,
            input_schema,
            output_schema: None,
            deferred: false,
        }
    }

    /// Waiting behind tool search (`deferred`): not in `tools`, nor declared, until the
    /// script's `tools.search` finds it (see [`ScriptTools::with_search`]).
    pub fn with_deferred(mut self, deferred: bool) -> Self {
        self.deferred = deferred;
        self
    }

    /// Whether it waits behind tool search.
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// With the tool's description (untrusted; cleaned and capped in the declarations).
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// With the JSON Schema of the tool's structured result.
    pub fn with_output_schema(mut self, output_schema: Value) -> Self {
        self.output_schema = Some(output_schema);
        self
    }

    /// The host's name of the tool (for its gate).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tool's raw name on its server.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The description.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The input schema.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The output schema.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }
}

/// One server's namespace in the `tools` object.
#[derive(Debug, Clone)]
pub(crate) struct Namespace {
    /// Its identifier (`tools.<ident>`).
    pub(crate) ident: String,
    /// The server's raw name.
    pub(crate) server: String,
    /// (identifier, index into the tools) of each tool, sorted by raw name.
    pub(crate) tools: Vec<(String, usize)>,
}

/// The tools of one script run, with their JavaScript names. Built once per tool listing and
/// shared by every run under it.
///
/// Deferred tools ([`ScriptTool::with_deferred`]) are named like the others (so a name does
/// not depend on which tools a search found) but start outside `tools`: with search offered
/// ([`ScriptTools::with_search`]) the script's `tools.search(query)` finds them and adds them.
#[derive(Debug, Clone)]
pub struct ScriptTools {
    tools: Vec<ScriptTool>,
    namespaces: Vec<Namespace>,
    /// What the engine's prelude builds the `tools` object from: the tools not deferred.
    manifest: Arc<str>,
    /// Whether the script may search (`tools.search`).
    search: bool,
}

impl ScriptTools {
    /// The tools, named. Servers and tools are ordered by their raw names; a second tool with
    /// the same (server, tool) as an earlier one is left out. Two raw names that become the
    /// same identifier are told apart by a suffix (`_2`, `_3`, …) in raw-name order, so the
    /// names do not depend on the order the tools came in.
    pub fn new(tools: impl IntoIterator<Item = ScriptTool>) -> Self {
        let mut tools: Vec<ScriptTool> = tools.into_iter().collect();
        tools.sort_by(|a, b| (&a.server, &a.tool).cmp(&(&b.server, &b.tool)));
        tools.dedup_by(|later, earlier| later.server == earlier.server && later.tool == earlier.tool);

        let mut namespaces: Vec<Namespace> = Vec::new();
        // `tools.search` is the search function, whether offered or not: no server takes it.
        let mut server_idents = Idents::default();
        server_idents.taken.insert(SEARCH.to_owned());
        let mut tool_idents = Idents::default();
        for (index, tool) in tools.iter().enumerate() {
            if namespaces.last().is_none_or(|ns| ns.server != tool.server) {
                namespaces.push(Namespace {
                    ident: server_idents.unique(identifier(&tool.server)),
                    server: tool.server.clone(),
                    tools: Vec::new(),
                });
                tool_idents = Idents::default();
            }
            if let Some(ns) = namespaces.last_mut() {
                ns.tools.push((tool_idents.unique(identifier(&tool.tool)), index));
            }
        }
        let manifest: Vec<Value> = namespaces
            .iter()
            .map(|ns| {
                let entries: Vec<Value> = ns
                    .tools
                    .iter()
                    .filter(|(_, index)| tools.get(*index).is_some_and(|t| !t.deferred))
                    .map(|(ident, index)| Value::from(vec![Value::from(ident.as_str()), Value::from(*index)]))
                    .collect();
                Value::from(vec![Value::from(ns.ident.as_str()), Value::from(entries)])
            })
            .collect();
        let manifest = Value::from(manifest).to_string().into();
        Self { tools, namespaces, manifest, search: false }
    }

    /// With `tools.search(query, limit)` offered: it asks the host's
    /// [`ToolCaller::search`](crate::ToolCaller::search) and adds the tools found to `tools`
    /// for the rest of the run. Without it, `tools.search` throws a `ToolError` saying that
    /// every tool the script may call is already in `tools`.
    pub fn with_search(mut self, search: bool) -> Self {
        self.search = search;
        self
    }

    /// Whether `tools.search` is offered.
    pub fn searchable(&self) -> bool {
        self.search
    }

    /// How many tools wait behind search.
    pub fn deferred(&self) -> usize {
        self.tools.iter().filter(|t| t.deferred).count()
    }

    /// The index of the tool the host calls `name`.
    pub fn by_name(&self, name: &str) -> Option<usize> {
        self.tools.iter().position(|t| t.name == name)
    }

    /// The identifiers (server, tool) of tool number `index`.
    pub(crate) fn idents(&self, index: usize) -> Option<(&str, &str)> {
        self.namespaces.iter().find_map(|ns| {
            ns.tools.iter().find(|(_, i)| *i == index).map(|(ident, _)| (ns.ident.as_str(), ident.as_str()))
        })
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools, in their order (by server, then tool, raw names).
    pub fn iter(&self) -> std::slice::Iter<'_, ScriptTool> {
        self.tools.iter()
    }

    /// Tool number `index`.
    pub fn get(&self, index: usize) -> Option<&ScriptTool> {
        self.tools.get(index)
    }

    /// How the script reaches tool number `index`: `tools.<server>.<tool>`.
    pub fn path(&self, index: usize) -> Option<String> {
        self.idents(index).map(|(server, tool)| format!("tools.{server}.{tool}"))
    }

    /// The index of the tool the script reaches as `tools.<server_ident>.<tool_ident>`.
    pub fn find(&self, server_ident: &str, tool_ident: &str) -> Option<usize> {
        let ns = self.namespaces.iter().find(|ns| ns.ident == server_ident)?;
        ns.tools.iter().find(|(ident, _)| ident == tool_ident).map(|(_, index)| *index)
    }

    pub(crate) fn namespaces(&self) -> &[Namespace] {
        &self.namespaces
    }

    pub(crate) fn manifest(&self) -> &Arc<str> {
        &self.manifest
    }
}

/// The name of the search function in `tools`.
pub(crate) const SEARCH: &str = "search";

/// Words a bare identifier must not be (reserved in some context, or a global the script
/// would shadow), and `__proto__`, which assigns a prototype in an object literal.
const RESERVED: &[&str] = &[
    "__proto__",
    "arguments",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "eval",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "undefined",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// `raw` as an ASCII JavaScript identifier: every character outside `[A-Za-z0-9_$]` becomes
/// `_`, a leading digit gets a `_` before it, and a reserved word a `_` after it. Empty
/// becomes `_`.
pub fn identifier(raw: &str) -> String {
    let mut ident: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '$' { c } else { '_' }).collect();
    if ident.is_empty() || ident.starts_with(|c: char| c.is_ascii_digit()) {
        ident.insert(0, '_');
    }
    if RESERVED.contains(&ident.as_str()) {
        ident.push('_');
    }
    ident
}

/// Identifiers taken in one namespace, and for each base the next suffix to try.
#[derive(Default)]
struct Idents {
    taken: BTreeSet<String>,
    /// Base identifier -> the suffix its next duplicate starts looking from: thousands of
    /// tools made alike (long names differing past what an identifier keeps) were each
    /// told apart by trying `_2`, `_3`, … from the start.
    next: std::collections::HashMap<String, u32>,
}

impl Idents {
    /// `ident`, or the first of `ident_2`, `ident_3`, … not taken yet; recorded as taken.
    fn unique(&mut self, ident: String) -> String {
        let mut candidate = ident.clone();
        let mut n = self.next.get(&ident).copied().unwrap_or(2);
        while self.taken.contains(&candidate) {
            candidate = format!("{ident}_{n}");
            n += 1;
        }
        self.next.insert(ident, n);
        self.taken.insert(candidate.clone());
        candidate
    }
}

#[cfg(test)]
mod tests;
