//! The exposure stage: budgets, search modes, always-loaded servers, tools loaded in a session.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use mcp_protocol::Tool;
use policy::Policy;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};
use tool_pool::{
    BuiltinTool, ExposureOptions, ExposureReason, ExposureState, Options, Pool, SearchMode, ServerExposure,
    ServerTools, assemble, definition_size, expose,
};

/// A tool whose definition is about `bytes` long (its schema is padded: descriptions are capped).
fn sized(name: &str, bytes: usize) -> Tool {
    Tool::new(name, json!({"type": "object", "description": "d".repeat(bytes)}))
}

fn pool(servers: &[(&str, Vec<Tool>)]) -> Pool {
    let builtins: Arc<[BuiltinTool]> = Arc::new([BuiltinTool {
        name: "read_file".into(),
        description: "Read a file.".into(),
        input_schema: json!({"type": "object"}),
    }]);
    let listings: Vec<ServerTools> = servers.iter().map(|(s, t)| ServerTools::new(*s, t.clone())).collect();
    assemble(&builtins, &listings, &Policy::default(), &Options::default(), 3).unwrap()
}

fn states(exposure: &tool_pool::Exposure) -> Vec<(String, ExposureState)> {
    exposure.iter().map(|t| (t.name.to_string(), t.state)).collect()
}

#[test]
fn definition_size_counts_name_description_and_schema() {
    let p = pool(&[("s", vec![Tool::new("t", json!({"type": "object", "properties": {}}))])]);
    let e = p.get("mcp__s__t").unwrap();
    let expected = "mcp__s__t".len() + e.description().len() + r#"{"type":"object","properties":{}}"#.len();
    assert_eq!(definition_size(&e), expected);
}

#[test]
fn a_small_pool_is_loaded_whole() {
    let p = pool(&[("a", vec![sized("x", 100), sized("y", 100)])]);
    let x = expose(&p, &ExposureOptions::default(), &BTreeSet::new());
    assert_eq!(x.revision(), 3);
    assert!(x.iter().all(|t| t.state == ExposureState::Loaded));
    assert_eq!(x.get("read_file").unwrap().reason, ExposureReason::Builtin);
    assert!(matches!(x.get("mcp__a__x").unwrap().reason, ExposureReason::UnderThreshold { .. }));
    assert!(!x.search_active());
    assert!(x.diagnostics().is_empty());
    assert_eq!(x.loaded_bytes(), x.iter().map(|t| t.size).sum::<usize>());
}

#[test]
fn a_tool_over_its_budget_is_hidden_with_a_diagnostic() {
    let p = pool(&[("a", vec![sized("big", 9_000), sized("small", 10)]), ("b", vec![sized("mid", 3_000)])]);
    let mut options = ExposureOptions::default();
    options.servers.insert("b".into(), ServerExposure { tool_budget: Some(2_000), ..Default::default() });
    let x = expose(&p, &options, &BTreeSet::new());
    assert_eq!(
        states(&x),
        [
            ("read_file".into(), ExposureState::Loaded),
            ("mcp__a__big".into(), ExposureState::Hidden),
            ("mcp__a__small".into(), ExposureState::Loaded),
            ("mcp__b__mid".into(), ExposureState::Hidden),
        ]
    );
    let size = x.get("mcp__a__big").unwrap().size;
    assert_eq!(x.get("mcp__a__big").unwrap().reason, ExposureReason::OverToolBudget { size, budget: 8 * 1024 });
    let d = &x.diagnostics()[0];
    assert_eq!((d.server.as_str(), d.tool.as_str(), d.size), ("a", "big", size));
    assert_eq!(
        d.message,
        format!(
            "tool \"big\" of server \"a\" (mcp__a__big): its definition ({size} bytes) is over the per-tool budget \
             (8192 bytes); not shown to the model"
        )
    );
    assert!(matches!(x.diagnostics()[1].reason, ExposureReason::OverToolBudget { budget: 2_000, .. }));
}

#[test]
fn past_the_auto_threshold_tools_are_deferred_except_always_loaded_and_session_loaded_ones() {
    let p = pool(&[
        ("docs", vec![sized("search", 400), sized("fetch", 400)]),
        ("git", vec![sized("status", 400), sized("log", 400)]),
        ("core", vec![sized("ping", 400)]),
    ]);
    let mut options = ExposureOptions { auto_threshold: 1_000, ..Default::default() };
    options.servers.insert("core".into(), ServerExposure { always_load: true, ..Default::default() });
    let loaded = BTreeSet::from(["mcp__git__log".to_owned(), "mcp__gone__tool".to_owned()]);
    let x = expose(&p, &options, &loaded);
    assert_eq!(
        states(&x),
        [
            ("read_file".into(), ExposureState::Loaded),
            ("mcp__core__ping".into(), ExposureState::Loaded),
            ("mcp__docs__search".into(), ExposureState::Deferred),
            ("mcp__docs__fetch".into(), ExposureState::Deferred),
            ("mcp__git__status".into(), ExposureState::Deferred),
            ("mcp__git__log".into(), ExposureState::Loaded),
        ]
    );
    assert_eq!(x.get("mcp__core__ping").unwrap().reason, ExposureReason::AlwaysLoad);
    assert_eq!(x.get("mcp__git__log").unwrap().reason, ExposureReason::LoadedInSession);
    let total = x.iter().map(|t| t.size).sum::<usize>();
    assert_eq!(x.get("mcp__docs__fetch").unwrap().reason, ExposureReason::OverThreshold { total, threshold: 1_000 });
    assert!(x.search_active());
    // Deferring is not a budget problem.
    assert!(x.diagnostics().is_empty());
    assert_eq!(
        x.get("mcp__docs__search").unwrap().reason.to_string(),
        format!("all definitions ({total} bytes) exceed the tool search threshold (1000 bytes)")
    );
}

#[test]
fn search_modes_per_server_override_the_global_one() {
    let p = pool(&[("on", vec![sized("a", 10)]), ("off", vec![sized("b", 10)]), ("auto", vec![sized("c", 10)])]);
    let mut options = ExposureOptions { tool_search: SearchMode::On, ..Default::default() };
    options.servers.insert("off".into(), ServerExposure { tool_search: Some(SearchMode::Off), ..Default::default() });
    options.servers.insert("auto".into(), ServerExposure { tool_search: Some(SearchMode::Auto), ..Default::default() });
    let x = expose(&p, &options, &BTreeSet::new());
    assert_eq!(x.state("mcp__on__a"), Some(ExposureState::Deferred));
    assert_eq!(x.get("mcp__on__a").unwrap().reason, ExposureReason::SearchOn);
    assert_eq!(x.state("mcp__off__b"), Some(ExposureState::Loaded));
    assert_eq!(x.get("mcp__off__b").unwrap().reason, ExposureReason::SearchOff);
    assert_eq!(x.state("mcp__auto__c"), Some(ExposureState::Loaded));
    assert_eq!(x.state("nope"), None);
}

#[test]
fn past_the_pool_budget_tools_are_deferred_or_with_search_off_hidden() {
    let tools = || vec![sized("one", 300), sized("two", 300), sized("three", 300)];
    let p = pool(&[("s", tools())]);
    let budget = definition_size(&p.get("read_file").unwrap()) + 2 * definition_size(&p.get("mcp__s__one").unwrap());
    for (mode, pushed_out) in [(SearchMode::Off, ExposureState::Hidden), (SearchMode::Auto, ExposureState::Deferred)] {
        let options = ExposureOptions { pool_budget: budget, tool_search: mode, ..Default::default() };
        let x = expose(&p, &options, &BTreeSet::new());
        assert_eq!(x.state("mcp__s__one"), Some(ExposureState::Loaded));
        assert_eq!(x.state("mcp__s__two"), Some(ExposureState::Loaded));
        assert_eq!(x.state("mcp__s__three"), Some(pushed_out), "{mode:?}");
        assert!(x.loaded_bytes() <= budget);
        assert_eq!(x.diagnostics().len(), 1);
        assert_eq!(x.diagnostics()[0].tool, "three");
        assert!(matches!(x.diagnostics()[0].reason, ExposureReason::OverPoolBudget { .. }));
        assert_eq!(x.search_active(), pushed_out == ExposureState::Deferred);
    }
}

#[test]
fn a_server_budget_limits_that_server_only() {
    let p = pool(&[("a", vec![sized("x", 300), sized("y", 300)]), ("b", vec![sized("z", 300)])]);
    let mut options = ExposureOptions::default();
    let one = definition_size(&p.get("mcp__a__x").unwrap());
    options.servers.insert("a".into(), ServerExposure { server_budget: Some(one), ..Default::default() });
    let x = expose(&p, &options, &BTreeSet::new());
    assert_eq!(x.state("mcp__a__x"), Some(ExposureState::Loaded));
    assert_eq!(x.state("mcp__a__y"), Some(ExposureState::Deferred));
    assert!(matches!(x.get("mcp__a__y").unwrap().reason, ExposureReason::OverServerBudget { used, .. } if used == one));
    assert_eq!(x.state("mcp__b__z"), Some(ExposureState::Loaded));
}

#[test]
fn budgets_go_to_always_loaded_then_session_loaded_tools_first() {
    let p = pool(&[("a", vec![sized("x", 300)]), ("b", vec![sized("y", 300)]), ("c", vec![sized("z", 300)])]);
    let one = definition_size(&p.get("mcp__a__x").unwrap());
    let builtin = definition_size(&p.get("read_file").unwrap());
    let mut options =
        ExposureOptions { pool_budget: builtin + 2 * one, tool_search: SearchMode::Off, ..Default::default() };
    options.servers.insert("c".into(), ServerExposure { always_load: true, ..Default::default() });
    // `b`'s tool is in the session, but with search off nothing is deferred: plain pool order
    // after the always-loaded server.
    let x = expose(&p, &options, &BTreeSet::from(["mcp__b__y".to_owned()]));
    assert_eq!(x.state("mcp__c__z"), Some(ExposureState::Loaded));
    assert_eq!(x.state("mcp__a__x"), Some(ExposureState::Loaded));
    assert_eq!(x.state("mcp__b__y"), Some(ExposureState::Hidden));
    // With search on, the session's tool comes before the others.
    options.tool_search = SearchMode::On;
    let x = expose(&p, &options, &BTreeSet::from(["mcp__b__y".to_owned()]));
    assert_eq!(x.state("mcp__c__z"), Some(ExposureState::Loaded));
    assert_eq!(x.state("mcp__b__y"), Some(ExposureState::Loaded));
    assert_eq!(x.state("mcp__a__x"), Some(ExposureState::Deferred));
}

#[test]
fn serializes_states_and_reasons() {
    let p = pool(&[("a", vec![sized("x", 9_000)])]);
    let x = expose(&p, &ExposureOptions::default(), &BTreeSet::new());
    let v = serde_json::to_value(&x).unwrap();
    assert_eq!(v["tools"][1]["state"], "hidden");
    assert_eq!(v["tools"][1]["reason"]["kind"], "over_tool_budget");
    assert_eq!(v["diagnostics"][0]["tool"], "x");
    assert_eq!(serde_json::from_value::<SearchMode>(json!("off")).unwrap(), SearchMode::Off);
}

fn servers_strategy() -> impl Strategy<Value = BTreeMap<String, Vec<(String, usize)>>> {
    proptest::collection::btree_map("[a-d]{1,2}", proptest::collection::vec(("[a-e]{1,3}", 0usize..4_000), 0..6), 0..5)
}

fn build(servers: &[(String, Vec<(String, usize)>)]) -> Pool {
    let listings: Vec<(&str, Vec<Tool>)> =
        servers.iter().map(|(s, t)| (s.as_str(), t.iter().map(|(n, b)| sized(n, *b)).collect())).collect();
    pool(&listings)
}

proptest! {
    #[test]
    fn exposure_is_independent_of_server_order_and_within_budgets(
        (servers, shuffled) in servers_strategy().prop_flat_map(|m| {
            let v: Vec<(String, Vec<(String, usize)>)> = m.into_iter().collect();
            (Just(v.clone()), Just(v).prop_shuffle())
        }),
        pool_budget in 0usize..20_000,
        threshold in 0usize..20_000,
        mode in prop_oneof![Just(SearchMode::Auto), Just(SearchMode::On), Just(SearchMode::Off)],
        loaded in proptest::collection::btree_set("mcp__[a-d]{1,2}__[a-e]{1,3}", 0..4),
    ) {
        let options = ExposureOptions {
            tool_budget: 3_000,
            pool_budget,
            tool_search: mode,
            auto_threshold: threshold,
            servers: BTreeMap::from([("a".to_owned(), ServerExposure { always_load: true, ..Default::default() })]),
        };
        let (p, q) = (build(&servers), build(&shuffled));
        let (x, y) = (expose(&p, &options, &loaded), expose(&q, &options, &loaded));
        prop_assert_eq!(serde_json::to_value(&x).unwrap(), serde_json::to_value(&y).unwrap());
        let builtins: usize = x.iter().filter(|t| t.reason == ExposureReason::Builtin).map(|t| t.size).sum();
        prop_assert!(x.loaded_bytes() <= pool_budget.max(builtins));
        for t in x.iter() {
            prop_assert!(t.state != ExposureState::Loaded || t.size <= 3_000 || t.reason == ExposureReason::Builtin);
            if mode == SearchMode::Off {
                prop_assert!(t.state != ExposureState::Deferred);
            }
            let pushed_out = matches!(
                t.reason,
                ExposureReason::OverToolBudget { .. } | ExposureReason::OverPoolBudget { .. } | ExposureReason::OverServerBudget { .. }
            );
            prop_assert_eq!(pushed_out, x.diagnostics().iter().any(|d| d.name == t.name));
        }
        let _: Value = serde_json::to_value(&x).unwrap();
    }
}
