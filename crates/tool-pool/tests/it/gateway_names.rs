//! The gateway's form of names (`{server}__{tool}`, `Naming::Gateway`) and the transparent one:
//! valid, unique, in no other server's namespace, and stable when servers come and go.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcp_protocol::Tool;
use policy::{Decision, Policy, PolicyConfig, RuleConfig};
use proptest::prelude::*;
use serde_json::json;
use tool_pool::{
    BuiltinTool, DiagnosticKind, MAX_NAME_LEN, Naming, Options, Pool, ServerTools, assemble, is_valid_model_name,
    normalize, server_segment,
};

fn gateway() -> Options {
    Options { naming: Naming::Gateway, ..Options::default() }
}

fn listings(servers: &BTreeMap<String, Vec<String>>) -> Vec<ServerTools> {
    servers
        .iter()
        .map(|(s, ts)| {
            let tools: Vec<Tool> = ts.iter().map(|t| Tool::new(t.as_str(), json!({"type": "object"}))).collect();
            ServerTools::new(s.as_str(), tools)
        })
        .collect()
}

fn pool(servers: &BTreeMap<String, Vec<String>>, options: &Options) -> Pool {
    let none: Arc<[BuiltinTool]> = Arc::new([]);
    assemble(&none, &listings(servers), &Policy::default(), options, 1).unwrap()
}

/// (name, server, raw tool) of every entry.
fn names(pool: &Pool) -> Vec<(String, String, String)> {
    pool.iter().map(|e| (e.name().to_owned(), e.server().unwrap_or("").to_owned(), e.tool().to_owned())).collect()
}

/// Names rich in characters that normalize to `_`, long ones and arbitrary Unicode.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![4 => "[a_.é/ -]{1,6}", 1 => "[a-z_.]{45,80}", 1 => any::<String>()]
}

fn servers() -> impl Strategy<Value = BTreeMap<String, Vec<String>>> {
    proptest::collection::btree_map(name(), proptest::collection::vec(name(), 1..5), 1..6)
}

#[test]
fn examples() {
    let servers = BTreeMap::from([
        ("files".to_owned(), vec!["write_file".to_owned(), "read file".to_owned()]),
        ("gh".to_owned(), vec!["repo__read".to_owned()]),
        ("gh__repo".to_owned(), vec!["read".to_owned()]),
    ]);
    let got: Vec<String> = names(&pool(&servers, &gateway())).into_iter().map(|(n, ..)| n).collect();
    assert_eq!(got, ["files__write_file", "files__read_file", "gh__repo__read", "gh_repo__read"]);
    let pool = pool(&servers, &gateway());
    assert_eq!(pool.naming(), Naming::Gateway);
    let entry = pool.get("files__read_file").unwrap();
    assert_eq!((entry.server(), entry.tool()), (Some("files"), "read file"));
}

#[test]
fn denied_tools_are_not_named_and_hidden_ones_can_be_named_again() {
    let servers = BTreeMap::from([("files".to_owned(), vec!["write_file".to_owned(), "rm".to_owned()])]);
    let policy = Policy::new(PolicyConfig {
        default: Decision::Allow,
        rules: vec![RuleConfig::new("files", "rm", Decision::Deny)],
        ..PolicyConfig::default()
    })
    .unwrap();
    let none: Arc<[BuiltinTool]> = Arc::new([]);
    let pool = assemble(&none, &listings(&servers), &policy, &gateway(), 1).unwrap();
    assert!(pool.get("files__rm").is_none());
    let hidden = &pool.hidden()[0];
    assert_eq!(pool.naming().name(hidden.server.as_deref().unwrap(), &hidden.tool).as_deref(), Some("files__rm"));
}

#[test]
fn transparent_names_are_the_tools_own() {
    let servers = BTreeMap::from([(
        "only".to_owned(),
        vec!["test_simple_text".to_owned(), "get weather.v2".to_owned(), "x".repeat(100)],
    )]);
    let pool = pool(&servers, &Options { naming: Naming::Transparent, ..Options::default() });
    let got: Vec<String> = names(&pool).into_iter().map(|(n, ..)| n).collect();
    assert_eq!(got, ["test_simple_text".to_owned(), "get weather.v2".to_owned(), "x".repeat(100)]);
}

proptest! {
    #[test]
    fn gateway_names_are_valid_unique_and_in_their_own_namespace(servers in servers()) {
        let pool = pool(&servers, &gateway());
        let mut seen = std::collections::HashSet::new();
        for e in &pool {
            let name = e.name();
            prop_assert!(is_valid_model_name(name), "{name:?}");
            prop_assert!(name.len() <= MAX_NAME_LEN);
            prop_assert!(seen.insert(name.to_owned()), "{name} twice");
            prop_assert!(!name.starts_with("mcp__") || server_segment(e.server().unwrap()).starts_with("mcp"));
            let own = server_segment(e.server().unwrap());
            // (A server with an empty name has no tools in the pool, hence no namespace.)
            for other in servers.keys().filter(|s| !s.is_empty()) {
                let theirs = server_segment(other);
                if theirs != own {
                    prop_assert!(!name.starts_with(&format!("{theirs}__")), "{name} of {:?} is in {other:?}'s namespace", e.server());
                }
            }
            // Short enough for both forms, the gateway's name is the agent's without its prefix.
            let whole = format!("{own}__{}", normalize(e.tool()));
            if whole.len() + "mcp__".len() <= MAX_NAME_LEN {
                prop_assert_eq!(name, whole.as_str());
                prop_assert_eq!(tool_pool::model_name(e.server().unwrap(), e.tool()), Some(format!("mcp__{whole}")));
            }
        }
        // A name is only ever fought over by servers whose names normalize alike.
        for d in pool.diagnostics().iter().filter(|d| d.kind == DiagnosticKind::NameCollision) {
            let loser = d.server.as_deref().unwrap();
            let name = Naming::Gateway.name(loser, d.tool.as_deref().unwrap()).unwrap();
            let winner = pool.get(&name).and_then(|e| e.server()).unwrap();
            prop_assert_eq!(server_segment(winner), server_segment(loser), "{}", d.message);
        }
    }

    /// Adding a server, or removing one, changes no other server's names, unless the two
    /// servers' names normalize alike (then the one that sorts first keeps a shared name).
    #[test]
    fn names_are_stable_when_a_server_comes_or_goes(mut servers in servers(), extra in name(), tools in proptest::collection::vec(name(), 1..5)) {
        prop_assume!(!servers.contains_key(&extra));
        let before = pool(&servers, &gateway());
        servers.insert(extra.clone(), tools);
        let after = pool(&servers, &gateway());
        let segment = server_segment(&extra);
        let kept = |p: &Pool| -> Vec<(String, String, String)> {
            names(p).into_iter().filter(|(_, s, _)| *s != extra && server_segment(s) != segment).collect()
        };
        prop_assert_eq!(kept(&before), kept(&after));
        // And back: removing it gives the first pool again.
        servers.remove(&extra);
        prop_assert_eq!(names(&pool(&servers, &gateway())), names(&before));
    }
}
