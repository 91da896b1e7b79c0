//! Tool search: ranking, name matches, `select:`, what is never searchable, bounds.

use std::collections::BTreeSet;
use std::sync::Arc;

use mcp_protocol::Tool;
use policy::{Decision, Policy, PolicyConfig, RuleConfig};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};
use tool_pool::{
    BuiltinTool, ExposureOptions, MAX_LIMIT, ONE_LINE_CHARS, Options, Pool, SearchIndex, SearchMode, SearchQuery,
    ServerTools, assemble, expose,
};

fn tool(name: &str, description: &str, params: Value) -> Tool {
    let mut t = Tool::new(name, json!({"type": "object", "properties": params}));
    t.description = Some(description.to_owned());
    t
}

fn catalog() -> Vec<(&'static str, Vec<Tool>)> {
    vec![
        (
            "weather",
            vec![
                tool("get_current_weather", "Current conditions for a city.", json!({"city": {"type": "string"}})),
                tool("getForecast", "Daily forecast for the next days.", json!({"days": {"type": "integer"}})),
            ],
        ),
        (
            "github",
            vec![
                tool("create_issue", "Open a new issue in a repository.", json!({"repo": {}, "title": {}})),
                tool("list_pull_requests", "List pull requests of a repository.", json!({"repo": {}})),
                tool(
                    "delete_repository",
                    "Delete a repository. Irreversible.",
                    json!({"repo": {"description": "owner/name"}}),
                ),
            ],
        ),
        (
            "files",
            vec![
                tool("read_file", "Read a file's text.\nSecond line is not shown.", json!({"path": {}})),
                tool("search_files", "Find files whose names match a glob pattern.", json!({"pattern": {}})),
                tool("huge", "Over the per-tool budget.", json!({"x": {"description": "x".repeat(9_000)}})),
            ],
        ),
    ]
}

fn pool_with(servers: &[(&str, Vec<Tool>)], policy: &Policy) -> Pool {
    let builtins: Arc<[BuiltinTool]> = Arc::new([BuiltinTool {
        name: "shell".into(),
        description: "Run a command.".into(),
        input_schema: json!({"type": "object"}),
    }]);
    let listings: Vec<ServerTools> = servers.iter().map(|(s, t)| ServerTools::new(*s, t.clone())).collect();
    assemble(&builtins, &listings, policy, &Options::default(), 1).unwrap()
}

fn deny_delete() -> Policy {
    Policy::new(PolicyConfig {
        default: Decision::Confirm,
        rules: vec![RuleConfig::new("github", "delete_*", Decision::Deny)],
        ..Default::default()
    })
    .unwrap()
}

fn index(pool: &Pool) -> SearchIndex {
    let options = ExposureOptions { tool_search: SearchMode::On, ..Default::default() };
    SearchIndex::new(pool, &expose(pool, &options, &BTreeSet::new()))
}

fn names(index: &SearchIndex, query: &str) -> Vec<String> {
    index.search(query, Some(MAX_LIMIT)).hits.iter().map(|h| h.name.to_string()).collect()
}

#[test]
fn only_searchable_tools_are_indexed() {
    let pool = pool_with(&catalog(), &deny_delete());
    let index = index(&pool);
    // Not the built-in, not the denied tool, not the one over its budget.
    assert_eq!(index.len(), 6);
    assert!(names(&index, "delete repository").iter().all(|n| !n.contains("delete")));
    assert!(index.search("select:mcp__github__delete_repository,mcp__files__huge,shell", None).hits.is_empty());
}

#[test]
fn ranks_by_what_tools_say_about_themselves() {
    let index = index(&pool_with(&catalog(), &deny_delete()));
    assert_eq!(names(&index, "what's the weather like in Paris")[0], "mcp__weather__get_current_weather");
    // camelCase split, stemming: "forecasts" finds getForecast.
    assert_eq!(names(&index, "forecasts for the coming days")[0], "mcp__weather__getForecast");
    // A parameter's name counts.
    assert_eq!(names(&index, "glob pattern")[0], "mcp__files__search_files");
    // The server's name counts.
    assert_eq!(names(&index, "github issues")[0], "mcp__github__create_issue");
    // Nothing in common: nothing found.
    assert!(names(&index, "zzz qqq").is_empty());
    assert!(names(&index, "").is_empty());
    assert!(names(&index, "the of and").is_empty());
}

#[test]
fn exact_and_near_exact_names_come_first() {
    let index = index(&pool_with(&catalog(), &deny_delete()));
    for query in ["mcp__files__read_file", "read_file", "READ-FILE", "readFile", "read file", "Read the files"] {
        assert_eq!(names(&index, query)[0], "mcp__files__read_file", "{query}");
    }
    let hits = index.search("mcp__weather__getForecast", Some(1)).hits;
    assert_eq!(hits[0].name.as_ref(), "mcp__weather__getForecast");
    assert_eq!(hits[0].server.as_deref(), Some("weather"));
}

#[test]
fn results_carry_a_one_line_sanitized_description() {
    let mut servers = catalog();
    servers.push(("evil", vec![tool("t", &format!("Bad\u{202E}txt {}\nmore", "word ".repeat(100)), json!({}))]));
    let index = index(&pool_with(&servers, &deny_delete()));
    let hit = &index.search("read_file", None).hits[0];
    assert_eq!(hit.description, "Read a file's text.");
    assert!(hit.score > 0.0);
    let hit = &index.search("select:mcp__evil__t", None).hits[0];
    assert!(hit.description.starts_with("Badtxt word word"));
    assert_eq!(hit.description.chars().count(), ONE_LINE_CHARS);
    assert!(hit.description.ends_with('…'));
}

#[test]
fn select_loads_exact_names_in_order() {
    let index = index(&pool_with(&catalog(), &deny_delete()));
    let r = index.search(
        " Select: mcp__files__read_file , nope\u{202E}x\ty,mcp__weather__getForecast,mcp__files__read_file,",
        None,
    );
    let found: Vec<&str> = r.hits.iter().map(|h| h.name.as_ref()).collect();
    assert_eq!(found, ["mcp__files__read_file", "mcp__weather__getForecast"]);
    assert_eq!(r.unknown, ["nopex y"]);
    assert_eq!(SearchQuery::parse("select:"), SearchQuery::Select(vec![]));
    assert_eq!(SearchQuery::parse("selected works"), SearchQuery::Text("selected works"));
    let many: String = (0..100).map(|i| format!("t{i},")).collect();
    match SearchQuery::parse(&format!("select:{many}")) {
        SearchQuery::Select(names) => assert_eq!(names.len(), MAX_LIMIT),
        other => panic!("{other:?}"),
    }
}

#[test]
fn limits_are_clamped() {
    let index = index(&pool_with(&catalog(), &deny_delete()));
    assert_eq!(index.search("repository files weather issue", None).hits.len(), 5);
    assert_eq!(index.search("repository files weather issue", Some(0)).hits.len(), 0);
    assert_eq!(index.search("repository files weather issue", Some(usize::MAX)).hits.len(), 6);
}

#[test]
fn the_plain_baseline_does_not_split_identifiers() {
    let pool = pool_with(&catalog(), &deny_delete());
    let plain = SearchIndex::plain_bm25(pool.iter().filter(|e| e.server().is_some()));
    let found: Vec<String> = plain.search("get", None).hits.iter().map(|h| h.name.to_string()).collect();
    assert_eq!(found, ["mcp__weather__get_current_weather"]);
    assert_eq!(plain.search("getforecast", None).hits[0].name.as_ref(), "mcp__weather__getForecast");
}

#[test]
fn the_baseline_with_the_same_fields_sees_servers_parameters_and_split_names() {
    let pool = pool_with(&catalog(), &deny_delete());
    let mcp = || pool.iter().filter(|e| e.server().is_some());
    let (plain, fields) = (SearchIndex::plain_bm25(mcp()), SearchIndex::plain_bm25_same_fields(mcp()));
    let found = |index: &SearchIndex, query: &str| -> Vec<String> {
        index.search(query, None).hits.iter().map(|h| h.name.to_string()).collect()
    };
    // A parameter's name, a server's name, a word inside a camelCase name: only with the fields.
    for (query, tool) in [
        ("title", "mcp__github__create_issue"),
        ("github", "mcp__github__create_issue"),
        ("get", "mcp__weather__getForecast"),
    ] {
        assert!(found(&fields, query).iter().any(|n| n == tool), "{query}: {:?}", found(&fields, query));
        assert!(!found(&plain, query).iter().any(|n| n == tool), "{query}: {:?}", found(&plain, query));
    }
    // Still plain: no stemming, so `forecasts` is not `forecast`.
    assert!(found(&fields, "forecasts").is_empty(), "{:?}", found(&fields, "forecasts"));
    assert!(!SearchIndex::from_entries(mcp()).search("forecasts", None).hits.is_empty());
}

#[test]
fn an_exposure_of_another_pool_makes_nothing_searchable() {
    let pool = pool_with(&catalog(), &deny_delete());
    let other = pool_with(&catalog()[..1], &deny_delete());
    let exposure = expose(&other, &ExposureOptions::default(), &BTreeSet::new());
    assert!(SearchIndex::new(&pool, &exposure).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Properties

/// Servers with their tools' names, from small alphabets so that names repeat and collide.
fn servers() -> impl Strategy<Value = Vec<(String, Vec<String>)>> {
    proptest::collection::btree_map("[a-c]{1,2}", proptest::collection::vec("[a-zA-Z_.]{1,12}", 1..5), 1..5)
        .prop_map(|m| m.into_iter().collect())
}

fn pool_of(servers: &[(String, Vec<String>)], policy: &Policy) -> Pool {
    let listings: Vec<(&str, Vec<Tool>)> = servers
        .iter()
        .map(|(s, ts)| {
            (s.as_str(), ts.iter().map(|t| tool(t, &format!("Does {t} things."), json!({"q": {}}))).collect())
        })
        .collect();
    pool_with(&listings, policy)
}

proptest! {
    #[test]
    fn never_panics_on_any_query(query in any::<String>(), limit in any::<Option<usize>>()) {
        let index = index(&pool_with(&catalog(), &deny_delete()));
        let r = index.search(&query, limit);
        prop_assert!(r.hits.len() <= MAX_LIMIT);
        let long = query.repeat(50);
        let _ = index.search(&long, limit);
        let _ = index.search(&format!("select:{long}"), limit);
    }

    #[test]
    fn a_model_name_as_query_ranks_its_tool_first(tools in servers(), pick in any::<prop::sample::Index>()) {
        let pool = pool_of(&tools, &Policy::default());
        let index = index(&pool);
        let entries: Vec<_> = pool.iter().filter(|e| e.server().is_some()).collect();
        let target = entries[pick.index(entries.len())].name();
        let found = names(&index, target);
        prop_assert_eq!(found.first().map(String::as_str), Some(target));
    }

    #[test]
    fn denied_tools_never_appear(tools in servers(), query in "[a-zA-Z_. ]{0,20}") {
        let policy = Policy::new(PolicyConfig {
            default: Decision::Allow,
            rules: vec![RuleConfig::new("a*", "*", Decision::Deny)],
            ..Default::default()
        })
        .unwrap();
        let index = index(&pool_of(&tools, &policy));
        let denied: Vec<String> = tools
            .iter()
            .filter(|(s, _)| s.starts_with('a'))
            .flat_map(|(s, ts)| ts.iter().filter_map(|t| tool_pool::model_name(s, t)))
            .collect();
        for q in [query.clone(), format!("select:{}", denied.join(","))] {
            for hit in index.search(&q, Some(MAX_LIMIT)).hits {
                prop_assert!(hit.server.as_deref().is_some_and(|s| !s.starts_with('a')), "{:?}", hit);
            }
        }
    }

    #[test]
    fn results_are_deterministic_and_independent_of_server_order(
        (tools, shuffled) in servers().prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
        query in "[a-zA-Z_. ]{0,20}",
    ) {
        let (p, q) = (pool_of(&tools, &Policy::default()), pool_of(&shuffled, &Policy::default()));
        let (a, b) = (index(&p), index(&q));
        let first = a.search(&query, Some(MAX_LIMIT));
        prop_assert_eq!(&first, &a.search(&query, Some(MAX_LIMIT)));
        prop_assert_eq!(&first, &b.search(&query, Some(MAX_LIMIT)));
        // Best first.
        prop_assert!(first.hits.windows(2).all(|w| w[0].score >= w[1].score));
    }
}
