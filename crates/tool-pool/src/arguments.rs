//! Checking a call's arguments against the tool's input schema, before the call goes out.
//!
//! Pure: schemas are compiled by `jsonschema` without default features, so a `$ref` to a URL or
//! a file is never fetched (it fails to compile instead). Schemas come from servers and are
//! untrusted: one that does not compile is reported as an [`ArgumentProblem`], never a panic,
//! and `pattern`s use the linear-time `regex` engine so a hostile pattern cannot hang the host.
//!
//! The draft comes from the schema's `$schema`; without one, 2020-12 (the MCP default).

use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use jsonschema::{PatternOptions, Validator};
use serde::Serialize;
use serde_json::Value;

use crate::pool::Pool;

/// At most this many problems are reported for one call; the rest add nothing for the model.
pub const MAX_PROBLEMS: usize = 20;
/// Messages quote the offending value, which can be huge; they are cut to this many characters.
const MAX_MESSAGE_CHARS: usize = 300;

/// What kind of problem an [`ArgumentProblem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgumentProblemKind {
    /// The arguments violate the schema.
    Invalid,
    /// The tool's schema itself cannot be used (the server's fault, not the caller's).
    BadSchema,
}

/// One reason the arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArgumentProblem {
    /// JSON pointer into the arguments (`""` is the arguments object itself), or into the
    /// schema for [`ArgumentProblemKind::BadSchema`].
    pub pointer: String,
    /// What is wrong, for humans and the model.
    pub message: String,
    /// Whose fault it is.
    pub kind: ArgumentProblemKind,
}

impl fmt::Display for ArgumentProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() { "(top level)" } else { &self.pointer };
        match self.kind {
            ArgumentProblemKind::Invalid => write!(f, "{at}: {}", self.message),
            ArgumentProblemKind::BadSchema => {
                write!(f, "the tool's input schema is unusable at {at}: {}", self.message)
            }
        }
    }
}

fn cut(text: String) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => text,
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

fn bad_schema(pointer: String, message: String) -> ArgumentProblem {
    ArgumentProblem { pointer, message: cut(message), kind: ArgumentProblemKind::BadSchema }
}

/// A tool's input schema, compiled once and checked many times.
#[derive(Debug)]
pub struct CompiledSchema(Result<Validator, ArgumentProblem>);

impl CompiledSchema {
    /// Compiles `schema`; a schema that does not compile is kept as the problem every check
    /// reports.
    pub fn new(schema: &Value) -> Self {
        if let Some(pointer) = costly_in_place(schema) {
            return Self(Err(bad_schema(
                pointer,
                format!(
                    "it applies more than {MAX_IN_PLACE} schemas to one value through $ref, allOf, anyOf, oneOf, \
                     not and if (each use of a shared definition counts), which could take minutes to check"
                ),
            )));
        }
        let built = catch_unwind(AssertUnwindSafe(|| {
            jsonschema::options().with_pattern_options(PatternOptions::regex()).build(schema)
        }));
        Self(match built {
            Ok(Ok(validator)) => Ok(validator),
            Ok(Err(e)) => Err(bad_schema(e.schema_path().to_string(), e.to_string())),
            // Belt and braces: the validator library must not take the host down on a hostile schema.
            Err(_) => Err(bad_schema(String::new(), "the schema crashed the validator".to_owned())),
        })
    }

    /// Checks `args`: they must be a JSON object valid against the schema.
    pub fn check(&self, args: &Value) -> Result<(), Vec<ArgumentProblem>> {
        self.0.as_ref().map_err(|p| vec![p.clone()])?;
        if !args.is_object() {
            return Err(vec![ArgumentProblem {
                pointer: String::new(),
                message: "the arguments must be a JSON object".to_owned(),
                kind: ArgumentProblemKind::Invalid,
            }]);
        }
        self.check_value(args)
    }

    /// Checks any JSON value against the schema (a tool's `structuredContent` against its
    /// output schema); unlike [`check`](Self::check) it does not require an object.
    pub fn check_value(&self, value: &Value) -> Result<(), Vec<ArgumentProblem>> {
        let validator = self.0.as_ref().map_err(|p| vec![p.clone()])?;
        let problems = catch_unwind(AssertUnwindSafe(|| {
            validator
                .iter_errors(value)
                .take(MAX_PROBLEMS)
                .map(|e| ArgumentProblem {
                    pointer: e.instance_path().to_string(),
                    message: cut(e.to_string()),
                    kind: ArgumentProblemKind::Invalid,
                })
                .collect::<Vec<_>>()
        }))
        .unwrap_or_else(|_| vec![bad_schema(String::new(), "the schema crashed the validator".to_owned())]);
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }
}

/// The most schemas one schema may apply to a single value (see [`costly_in_place`]).
const MAX_IN_PLACE: u64 = 10_000;

/// Keywords whose schemas apply to the same value as the schema holding them.
const IN_PLACE_LISTS: [&str; 3] = ["allOf", "anyOf", "oneOf"];
const IN_PLACE_ONE: [&str; 4] = ["not", "if", "then", "else"];

/// Where in `schema` a subschema applies more than [`MAX_IN_PLACE`] schemas to one value, if
/// anywhere: counted through `$ref`s (each use of a definition again) and the combinators.
/// A validator checks them all at that value, so a chain of definitions each used twice
/// doubles the work per level (a 1 KB schema of 20 levels took seconds per check, 30 hours).
fn costly_in_place(schema: &Value) -> Option<String> {
    struct Cost<'a> {
        root: &'a Value,
        /// In-place cost of each reference target met, and targets being counted (a cycle
        /// counts once: the validator stops at a reference it is already in).
        memo: HashMap<String, u64>,
        open: Vec<String>,
    }
    impl Cost<'_> {
        fn of(&mut self, node: &Value) -> u64 {
            let Value::Object(map) = node else { return 1 };
            let mut cost: u64 = 1;
            for key in IN_PLACE_LISTS {
                if let Some(Value::Array(members)) = map.get(key) {
                    for member in members {
                        cost = cost.saturating_add(self.of(member));
                        if cost > MAX_IN_PLACE {
                            return cost;
                        }
                    }
                }
            }
            for key in IN_PLACE_ONE {
                if let Some(member) = map.get(key) {
                    cost = cost.saturating_add(self.of(member));
                }
            }
            for key in ["$ref", "$dynamicRef", "$recursiveRef"] {
                if let Some(target) = map.get(key).and_then(Value::as_str) {
                    cost = cost.saturating_add(self.reference(target));
                }
            }
            cost
        }

        fn reference(&mut self, target: &str) -> u64 {
            if let Some(&known) = self.memo.get(target) {
                return known;
            }
            if self.open.iter().any(|t| t == target) {
                return 1;
            }
            let resolved = match target.strip_prefix('#') {
                Some("") => Some(self.root),
                Some(pointer) => self.root.pointer(pointer),
                None => None,
            };
            let Some(resolved) = resolved else { return 1 };
            self.open.push(target.to_owned());
            let cost = self.of(resolved);
            self.open.pop();
            self.memo.insert(target.to_owned(), cost);
            cost
        }
    }
    let mut cost = Cost { root: schema, memo: HashMap::new(), open: Vec::new() };
    // Every subschema is a place a value may meet (one walk over the text; references are
    // memoized).
    let mut stack: Vec<(String, &Value)> = vec![(String::new(), schema)];
    while let Some((pointer, node)) = stack.pop() {
        if cost.of(node) > MAX_IN_PLACE {
            return Some(pointer);
        }
        match node {
            Value::Object(map) => {
                for (key, value) in map {
                    if value.is_object() || value.is_array() {
                        stack.push((format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1")), value));
                    }
                }
            }
            Value::Array(items) => {
                for (i, value) in items.iter().enumerate() {
                    if value.is_object() || value.is_array() {
                        stack.push((format!("{pointer}/{i}"), value));
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// Checks `args` against `schema` (compiling it each time; see [`ArgumentChecker`] to reuse
/// compiled schemas).
pub fn check_arguments(schema: &Value, args: &Value) -> Result<(), Vec<ArgumentProblem>> {
    CompiledSchema::new(schema).check(args)
}

/// Why [`ArgumentChecker::check`] refused a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckError {
    /// The pool has no tool of that name.
    UnknownTool,
    /// The arguments were refused.
    Problems(Vec<ArgumentProblem>),
}

/// Compiled schemas of the tools calls go to, compiled on first use: the input schemas calls
/// are checked against, and the output schemas results are.
///
/// Entries are keyed by model name and used only for the very schema they were compiled from
/// (compared at each use): pools of different catalogs (a gateway's profiles) may give one name
/// and one revision number to different tools, and a tool may change its schema. At most
/// [`MAX_CACHED`] schemas of each kind are kept.
#[derive(Debug, Default)]
pub struct ArgumentChecker {
    cache: Mutex<Cache>,
}

/// How many compiled schemas of each kind (input, output) an [`ArgumentChecker`] keeps; past
/// that it starts again (a long session's tools come and go).
pub const MAX_CACHED: usize = 4096;

/// The compiled schemas by model name, each beside the schema it was compiled from.
#[derive(Debug, Default)]
struct Cache {
    inputs: HashMap<Arc<str>, (Value, Arc<CompiledSchema>)>,
    outputs: HashMap<Arc<str>, (Value, Arc<CompiledSchema>)>,
}

impl ArgumentChecker {
    /// An empty checker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks `args` for the pool's tool `name`.
    pub fn check(&self, pool: &Pool, name: &str, args: &Value) -> Result<(), CheckError> {
        let entry = pool.get(name).ok_or(CheckError::UnknownTool)?;
        self.compiled(name, false, entry.input_schema()).check(args).map_err(CheckError::Problems)
    }

    /// Checks `value` (a result's `structuredContent`) against `schema`, the output schema of
    /// tool `name`: compiled once, as input schemas are, rather than at every call.
    pub fn check_output(&self, name: &str, schema: &Value, value: &Value) -> Result<(), Vec<ArgumentProblem>> {
        self.compiled(name, true, schema).check_value(value)
    }

    /// The compiled input (or output) schema of `name`, compiled from `schema` unless the
    /// cached one was compiled from an equal schema.
    fn compiled(&self, name: &str, output: bool, schema: &Value) -> Arc<CompiledSchema> {
        let lock = || self.cache.lock().unwrap_or_else(|p| p.into_inner());
        {
            // A poisoned lock only means another check panicked; the cache is still consistent.
            let cache = lock();
            let map = if output { &cache.outputs } else { &cache.inputs };
            if let Some((compiled_from, compiled)) = map.get(name)
                && compiled_from == schema
            {
                return Arc::clone(compiled);
            }
        }
        // Compiled without the lock: a large schema does not hold up every other check.
        let compiled = Arc::new(CompiledSchema::new(schema));
        let mut cache = lock();
        let map = if output { &mut cache.outputs } else { &mut cache.inputs };
        if map.len() >= MAX_CACHED {
            map.clear();
        }
        map.insert(Arc::from(name), (schema.clone(), Arc::clone(&compiled)));
        compiled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn echo_schema() -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }

    #[test]
    fn valid_arguments_pass() {
        assert_eq!(check_arguments(&echo_schema(), &json!({"text": "hi"})), Ok(()));
    }

    #[test]
    fn missing_required_property_is_named_at_the_top_level() {
        let problems = check_arguments(&echo_schema(), &json!({})).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].pointer, "");
        assert_eq!(problems[0].kind, ArgumentProblemKind::Invalid);
        assert!(problems[0].message.contains("\"text\" is a required property"), "{}", problems[0].message);
        assert!(problems[0].to_string().starts_with("(top level): "));
    }

    #[test]
    fn wrong_type_is_named_with_its_pointer() {
        let schema =
            json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "number"}}}}});
        let problems = check_arguments(&schema, &json!({"a": {"b": "x"}})).unwrap_err();
        assert_eq!(problems[0].pointer, "/a/b");
        assert!(problems[0].to_string().starts_with("/a/b: "), "{}", problems[0]);
    }

    #[test]
    fn every_violation_is_listed() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b", "c"]});
        let problems = check_arguments(&schema, &json!({"a": "x", "b": "y"})).unwrap_err();
        let mut pointers: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
        pointers.sort_unstable();
        assert_eq!(pointers, ["", "/a", "/b"]);
    }

    #[test]
    fn arguments_must_be_an_object() {
        let problems = check_arguments(&json!({"type": "object"}), &json!([1])).unwrap_err();
        assert_eq!(problems[0].message, "the arguments must be a JSON object");
        // Even a schema that would accept anything.
        assert!(check_arguments(&json!({}), &json!("text")).is_err());
    }

    #[test]
    fn draft_is_taken_from_dollar_schema() {
        // Draft 4's boolean exclusiveMaximum is an error in 2020-12, where it must be a number.
        let draft4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
            "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": true}}});
        assert!(check_arguments(&draft4, &json!({"n": 4})).is_ok());
        assert!(check_arguments(&draft4, &json!({"n": 5})).is_err());
        // Without $schema, 2020-12: prefixItems is understood.
        let modern = json!({"type": "object", "properties": {"t": {"prefixItems": [{"type": "string"}]}}});
        assert!(check_arguments(&modern, &json!({"t": [1]})).is_err());
    }

    #[test]
    fn schemas_that_do_not_compile_are_problems_not_panics() {
        for schema in [
            json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}}),
            json!({"type": "object", "properties": {"a": {"pattern": "(unclosed"}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.invalid/schema.json"}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "#/no/such/place"}}}),
            json!({"$schema": "https://example.invalid/custom-meta", "type": "object"}),
            json!({"type": "object", "minProperties": -1}),
        ] {
            let problems = check_arguments(&schema, &json!({"a": "x"})).unwrap_err();
            assert_eq!(problems[0].kind, ArgumentProblemKind::BadSchema, "{schema}");
            assert!(problems[0].to_string().starts_with("the tool's input schema is unusable"), "{}", problems[0]);
        }
    }

    /// Definitions each used twice through a combinator, 30 levels deep: a 2 KB schema whose
    /// checking doubled per level (seconds at 20, hours at 30) is refused as unusable; a
    /// shared definition used a few times, and a recursive one, still work.
    #[test]
    fn a_schema_fanning_out_through_references_is_unusable() {
        for key in ["anyOf", "allOf", "oneOf"] {
            let mut defs = serde_json::Map::new();
            for i in 0..30 {
                let next = format!("#/$defs/a{}", i + 1);
                defs.insert(format!("a{i}"), json!({key: [{"$ref": next}, {"$ref": next}]}));
            }
            defs.insert("a30".to_owned(), json!({"type": "string"}));
            let schema = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs});
            let started = std::time::Instant::now();
            let problems = check_arguments(&schema, &json!({"x": 5})).unwrap_err();
            assert_eq!(problems[0].kind, ArgumentProblemKind::BadSchema, "{key}: {problems:?}");
            assert!(problems[0].message.contains("more than 10000 schemas"), "{}", problems[0].message);
            assert!(started.elapsed() < std::time::Duration::from_secs(5), "{key}");
        }
        let shared = json!({"type": "object", "$defs": {"id": {"type": "string", "minLength": 1}},
            "properties": {"a": {"$ref": "#/$defs/id"}, "b": {"anyOf": [{"$ref": "#/$defs/id"}, {"type": "null"}]}}});
        assert!(check_arguments(&shared, &json!({"a": "x", "b": null})).is_ok());
        let tree = json!({"type": "object", "$defs": {"node": {"type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "properties": {"root": {"$ref": "#/$defs/node"}}});
        assert!(check_arguments(&tree, &json!({"root": {"children": [{"children": []}]}})).is_ok());
        let cycle = json!({"type": "object", "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}},
            "properties": {"x": {"$ref": "#/$defs/a"}}});
        let _ = check_arguments(&cycle, &json!({"x": "s"}));
    }

    #[test]
    fn backtracking_patterns_are_linear() {
        let schema = json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}});
        let input = format!("{}!", "a".repeat(10_000));
        let started = std::time::Instant::now();
        assert!(check_arguments(&schema, &json!({"s": input})).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn long_messages_are_cut() {
        let schema = json!({"type": "object", "properties": {"s": {"type": "number"}}});
        let problems = check_arguments(&schema, &json!({"s": "x".repeat(100_000)})).unwrap_err();
        assert!(problems[0].message.chars().count() <= MAX_MESSAGE_CHARS + 1);
    }

    #[test]
    fn any_value_can_be_checked() {
        let schema = json!({"type": "object", "properties": {"t": {"type": "number"}}, "required": ["t"]});
        let compiled = CompiledSchema::new(&schema);
        assert_eq!(compiled.check_value(&json!({"t": 1.5})), Ok(()));
        let problems = compiled.check_value(&json!({"t": "hot"})).unwrap_err();
        assert_eq!(problems[0].pointer, "/t");
        assert!(compiled.check_value(&json!([1])).is_err());
        assert_eq!(CompiledSchema::new(&json!({"type": "array"})).check_value(&json!([1])), Ok(()));
    }

    /// A pool of revision `revision` holding one built-in tool, `t`, of input schema `schema`.
    fn one_tool_pool(schema: Value, revision: u64) -> crate::Pool {
        use crate::{BuiltinTool, Options, assemble};
        use policy::{Decision, Policy};
        let builtins: Arc<[BuiltinTool]> =
            Arc::new([BuiltinTool { name: "t".into(), description: String::new(), input_schema: schema }]);
        assemble(&builtins, &[], &Policy::uniform(Decision::Allow), &Options::default(), revision).unwrap()
    }

    #[test]
    fn checker_reuses_and_refreshes_by_revision() {
        let checker = ArgumentChecker::new();
        let pool1 = one_tool_pool(echo_schema(), 1);
        assert!(matches!(checker.check(&pool1, "t", &json!({})), Err(CheckError::Problems(_))));
        assert_eq!(checker.check(&pool1, "t", &json!({"text": "x"})), Ok(()));
        assert_eq!(checker.check(&pool1, "nope", &json!({})), Err(CheckError::UnknownTool));
        let pool2 = one_tool_pool(json!({"type": "object"}), 2);
        assert_eq!(checker.check(&pool2, "t", &json!({})), Ok(()));
    }

    /// Output schemas are cached beside the input schemas, under their own key, and a cached
    /// schema serves only the schema it was compiled from: two pools (a gateway's profiles) may
    /// give one name to different tools, and a tool may change its schema.
    #[test]
    fn a_compiled_schema_serves_only_the_schema_it_was_compiled_from() {
        let checker = ArgumentChecker::new();
        let number = json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]});
        assert_eq!(checker.check_output("t", &number, &json!({"n": 1})), Ok(()));
        assert!(checker.check_output("t", &number, &json!({"n": "one"})).is_err());
        // Another tool under the same name (another pool's), or a changed schema: its own.
        assert_eq!(checker.check_output("t", &json!({}), &json!({"n": "one"})), Ok(()));
        assert!(checker.check_output("t", &number, &json!({"n": "one"})).is_err());
        // The input cache is apart: an input schema of "t" does not stand in for its output's.
        let input = json!({"type": "object", "required": ["text"]});
        assert!(checker.compiled("t", false, &input).check(&json!({"n": 1})).is_err());
        assert_eq!(checker.check_output("t", &number, &json!({"n": 2})), Ok(()));
    }

    /// The same name in two pools of the same revision (a gateway's host pool and a profile's)
    /// may be two different tools: each call is checked against its own pool's schema.
    #[test]
    fn pools_sharing_a_revision_number_keep_their_own_schemas() {
        let checker = ArgumentChecker::new();
        let strict = one_tool_pool(echo_schema(), 1);
        let loose = one_tool_pool(json!({"type": "object"}), 1);
        for _ in 0..2 {
            assert!(matches!(checker.check(&strict, "t", &json!({})), Err(CheckError::Problems(_))));
            assert_eq!(checker.check(&loose, "t", &json!({})), Ok(()));
        }
    }

    /// The cache is bounded: past [`MAX_CACHED`] names it starts again, and checks go on.
    #[test]
    fn the_cache_keeps_at_most_max_cached_schemas() {
        let checker = ArgumentChecker::new();
        let schema = json!({"type": "object"});
        for i in 0..=MAX_CACHED {
            assert_eq!(checker.check_output(&format!("t{i}"), &schema, &json!({})), Ok(()));
        }
        let cache = checker.cache.lock().unwrap_or_else(|p| p.into_inner());
        assert!(cache.outputs.len() <= MAX_CACHED, "{}", cache.outputs.len());
    }
}
