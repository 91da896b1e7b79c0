//! Deferred tools and the loop's search tool, with the scripted model.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_loop::{Agent, AgentConfig, SEARCH_TOOL, ToolSearch};
use mcp_protocol::Tool;
use policy::{Decision, Policy, PolicyConfig, RuleConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tool_pool::{ExposureOptions, SearchMode, ServerExposure};

use crate::fake::{Events, FakeSource, Recording, results, text_schema};

fn described(name: &str, description: &str) -> Tool {
    let mut t = Tool::new(name, text_schema());
    t.description = Some(description.to_owned());
    t
}

/// A calendar server (always loaded when asked) and a big server of unrelated tools.
fn servers() -> Arc<FakeSource> {
    FakeSource::with(&[
        ("calendar", vec![described("list_events", "List the events of a calendar day.")]),
        (
            "big",
            vec![
                described("get_forecast", "Weather forecast for a city: temperature and rain."),
                described("send_email", "Send an email message to a recipient."),
                described("convert_currency", "Convert an amount between currencies."),
                described("secret_dump", "Dump every secret of the vault."),
            ],
        ),
    ])
}

fn allow_all_but_secrets() -> Policy {
    Policy::new(PolicyConfig {
        default: Decision::Allow,
        rules: vec![RuleConfig::new("big", "secret_dump", Decision::Deny)],
        ..Default::default()
    })
    .unwrap()
}

fn search_on() -> AgentConfig {
    AgentConfig {
        model: "test".into(),
        exposure: ExposureOptions { tool_search: SearchMode::On, ..ExposureOptions::default() },
        ..AgentConfig::default()
    }
}

fn script(turns: Value) -> Arc<Recording> {
    Recording::new(json!({ "turns": turns }))
}

fn search(query: &str) -> Value {
    json!({"name": SEARCH_TOOL, "input": {"query": query}})
}

fn revisions(events: &Events) -> Vec<Value> {
    events.of("step").iter().map(|e| e["pool_revision"].clone()).collect()
}

#[tokio::test]
async fn search_then_load_then_call_in_the_next_step() {
    let source = servers();
    let model = script(json!([
        {"tool_calls": [search("weather forecast for Paris")]},
        {"tool_calls": [{"name": "mcp__big__get_forecast", "input": {"text": "Paris"}}]},
        {"text": "Rain."}
    ]));
    let agent = Agent::new(model.clone(), source.clone(), allow_all_but_secrets(), search_on());
    let events = Events::default();
    let mut conversation = Vec::new();
    let outcome = agent.run_turn(&mut conversation, "weather in Paris?", &events).await.unwrap();
    assert_eq!(outcome.final_text, "Rain.");
    // First step: only the search tool; nothing of the servers.
    assert_eq!(model.tool_names(0), vec![SEARCH_TOOL]);
    let results = results(&conversation);
    assert!(results[0].0.starts_with("Tools found"), "{results:?}");
    assert!(results[0].0.contains("- mcp__big__get_forecast (server big): Weather forecast"), "{results:?}");
    // The tools found are in the next step's pool, under a new revision.
    let second = model.tool_names(1);
    assert!(second.contains(&"mcp__big__get_forecast".to_owned()), "{second:?}");
    assert_eq!(second.last().map(String::as_str), Some(SEARCH_TOOL));
    assert_eq!(revisions(&events), vec![json!(1), json!(2), json!(2)]);
    assert_eq!(results[1], (r#"get_forecast got {"text":"Paris"}"#.to_owned(), false));
    let calls = source.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
}

#[tokio::test]
async fn select_loads_exact_names_and_reports_unknown_ones() {
    let source = servers();
    let model = script(json!([
        {"tool_calls": [search("select:mcp__big__send_email, mcp__big__nope")]},
        {"tool_calls": [{"name": "mcp__big__send_email", "input": {"text": "hi"}}]},
        {"text": "Sent."}
    ]));
    let agent = Agent::new(model.clone(), source.clone(), allow_all_but_secrets(), search_on());
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "mail", &Events::default()).await.unwrap();
    let results = results(&conversation);
    assert_eq!(
        results[0].0,
        "Tools found (callable from your next step on):\n- mcp__big__send_email (server big): Send an email message \
         to a recipient.\nNot found (no tool you may use has these exact names): mcp__big__nope"
    );
    assert_eq!(model.tool_names(1), vec!["mcp__big__send_email", SEARCH_TOOL]);
    assert_eq!(results[1], (r#"send_email got {"text":"hi"}"#.to_owned(), false));
}

#[tokio::test]
async fn a_call_to_an_unloaded_deferred_tool_is_refused_with_the_hint_to_search() {
    let source = servers();
    let model = script(json!([
        // Called before any search, and in the same answer as the search that finds it.
        {"tool_calls": [{"name": "mcp__big__convert_currency", "input": {"text": "10 EUR"}}]},
        {"tool_calls": [search("convert currency"), {"name": "mcp__big__convert_currency", "input": {"text": "1"}}]},
        {"text": "Gave up."}
    ]));
    let agent = Agent::new(model.clone(), source.clone(), allow_all_but_secrets(), search_on());
    let events = Events::default();
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "convert", &events).await.unwrap();
    let results = results(&conversation);
    let hint = "Error: mcp__big__convert_currency is not loaded yet: search for it first with the search_tools \
                tool (a query describing what you need, or select:mcp__big__convert_currency), then call it in \
                your next step; nothing was called";
    assert_eq!(results[0], (hint.to_owned(), true));
    assert!(results[1].0.contains("mcp__big__convert_currency"), "{results:?}");
    assert_eq!(results[2], (hint.to_owned(), true));
    assert!(source.calls.lock().unwrap().is_empty(), "nothing was sent to the server");
    let decisions: Vec<Value> = events.of("tool_call").iter().map(|e| e["decision"].clone()).collect();
    assert_eq!(decisions, vec![json!("rejected"), json!("allowed"), json!("rejected")]);
}

#[tokio::test]
async fn a_tool_loaded_before_its_server_changed_is_refused_like_any_stale_call() {
    let source = servers();
    let model = script(json!([
        {"tool_calls": [search("select:mcp__big__get_forecast")]},
        {"tool_calls": [{"name": "mcp__big__get_forecast", "input": {"text": "Oslo"}}]},
        {"tool_calls": [{"name": "mcp__big__get_forecast", "input": {"text": "Oslo"}}]},
        {"text": "done"}
    ]));
    // While the model "thinks" about its second answer, the big server's tools change.
    let changer = source.clone();
    *model.on_request.lock().unwrap() = Some(Box::new(move |n| {
        if n == 2 {
            changer.change("big", vec![described("get_forecast", "Weather forecast, new version.")]);
        }
    }));
    let agent = Agent::new(model.clone(), source.clone(), allow_all_but_secrets(), search_on());
    let events = Events::default();
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "weather", &events).await.unwrap();
    let results = results(&conversation);
    assert!(results[1].0.contains("changed after you were shown them"), "{results:?}");
    assert!(results[1].1);
    // The next step shows the changed server's tool, still loaded, and the call goes through.
    assert_eq!(results[2], (r#"get_forecast got {"text":"Oslo"}"#.to_owned(), false));
    assert_eq!(source.calls.lock().unwrap().len(), 1, "the stale call was never sent");
    assert_eq!(revisions(&events), vec![json!(1), json!(2), json!(3), json!(3)]);
    let third = &model.requests.lock().unwrap()[2];
    let forecast = third.tools.iter().find(|t| t.name == "mcp__big__get_forecast").unwrap();
    assert!(forecast.description.ends_with("Weather forecast, new version."), "{forecast:?}");
}

#[tokio::test]
async fn always_load_servers_are_never_deferred() {
    let source = servers();
    let model = script(
        json!([{"tool_calls": [{"name": "mcp__calendar__list_events", "input": {"text": "today"}}]}, {"text": "ok"}]),
    );
    let mut config = search_on();
    config.exposure.servers =
        BTreeMap::from([("calendar".to_owned(), ServerExposure { always_load: true, ..ServerExposure::default() })]);
    let agent = Agent::new(model.clone(), source.clone(), allow_all_but_secrets(), config);
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "today?", &Events::default()).await.unwrap();
    assert_eq!(model.tool_names(0), vec!["mcp__calendar__list_events", SEARCH_TOOL]);
    assert_eq!(results(&conversation)[0], (r#"list_events got {"text":"today"}"#.to_owned(), false));
    // A search finds it as already loaded, and loads nothing: no new revision.
    let model = script(json!([{"tool_calls": [search("calendar events of a day")]}, {"text": "ok"}]));
    let mut config = search_on();
    config.exposure.servers =
        BTreeMap::from([("calendar".to_owned(), ServerExposure { always_load: true, ..ServerExposure::default() })]);
    let agent = Agent::new(model.clone(), source, allow_all_but_secrets(), config);
    let events = Events::default();
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "today?", &events).await.unwrap();
    let found = &results(&conversation)[0].0;
    assert!(found.contains("- mcp__calendar__list_events (server calendar) (already loaded): "), "{found}");
    assert_eq!(revisions(&events), vec![json!(1), json!(1)]);
    assert_eq!(model.tool_names(1), vec!["mcp__calendar__list_events", SEARCH_TOOL]);
}

#[tokio::test]
async fn denied_tools_are_never_found() {
    let source = servers();
    let model = script(json!([
        {"tool_calls": [search("dump every secret of the vault"), search("select:mcp__big__secret_dump")]},
        {"text": "none"}
    ]));
    let agent = Agent::new(model.clone(), source, allow_all_but_secrets(), search_on());
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "secrets", &Events::default()).await.unwrap();
    let results = results(&conversation);
    assert!(!results[0].0.contains("secret_dump"), "{results:?}");
    assert_eq!(results[1].0, "Not found (no tool you may use has these exact names): mcp__big__secret_dump");
    assert!(!model.tool_names(1).iter().any(|n| n.contains("secret")));
}

#[tokio::test]
async fn bad_search_arguments_are_an_error_result() {
    let model = script(json!([{"tool_calls": [{"name": SEARCH_TOOL, "input": {"q": 1}}]}, {"text": "ok"}]));
    let agent = Agent::new(model, servers(), allow_all_but_secrets(), search_on());
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "x", &Events::default()).await.unwrap();
    let (text, is_error) = results(&conversation)[0].clone();
    assert!(is_error);
    assert!(text.starts_with("Error: the arguments for search_tools are not valid"), "{text}");
}

#[tokio::test]
async fn loaded_tools_are_bounded_per_session_least_recent_first_out() {
    let source = servers();
    let model = script(json!([
        {"tool_calls": [search("select:mcp__big__get_forecast")]},
        {"tool_calls": [search("select:mcp__big__send_email")]},
        {"tool_calls": [search("select:mcp__big__convert_currency")]},
        {"text": "ok"}
    ]));
    let config = AgentConfig { max_loaded: 2, ..search_on() };
    let agent = Agent::new(model.clone(), source, allow_all_but_secrets(), config);
    agent.run_turn(&mut Vec::new(), "x", &Events::default()).await.unwrap();
    // In pool order; the first one found was dropped.
    assert_eq!(model.tool_names(3), vec!["mcp__big__send_email", "mcp__big__convert_currency", SEARCH_TOOL]);
}

#[tokio::test]
async fn search_off_or_under_the_threshold_sends_every_tool_and_no_search_tool() {
    for mode in [SearchMode::Off, SearchMode::Auto] {
        let model = script(json!([{"text": "ok"}]));
        let config = AgentConfig {
            exposure: ExposureOptions { tool_search: mode, ..ExposureOptions::default() },
            ..AgentConfig::default()
        };
        let agent = Agent::new(model.clone(), servers(), allow_all_but_secrets(), config);
        agent.run_turn(&mut Vec::new(), "x", &Events::default()).await.unwrap();
        assert_eq!(
            model.tool_names(0),
            vec![
                "mcp__big__get_forecast",
                "mcp__big__send_email",
                "mcp__big__convert_currency",
                "mcp__calendar__list_events"
            ],
            "{mode:?}"
        );
    }
}

#[tokio::test]
async fn native_search_marks_deferred_tools_for_the_provider() {
    let source = servers();
    let model = script(json!([
        {"tool_calls": [{"name": "mcp__big__get_forecast", "input": {"text": "Rome"}}]},
        {"text": "ok"}
    ]));
    let mut config = search_on();
    config.tool_search = ToolSearch::Native;
    config.exposure.servers =
        BTreeMap::from([("calendar".to_owned(), ServerExposure { always_load: true, ..ServerExposure::default() })]);
    let agent = Agent::new(model.clone(), source.clone(), allow_all_but_secrets(), config);
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "x", &Events::default()).await.unwrap();
    let first = model.requests.lock().unwrap()[0].tools.clone();
    let marked: Vec<(&str, bool)> = first.iter().map(|t| (t.name.as_str(), t.defer_loading)).collect();
    assert_eq!(
        marked,
        vec![
            ("mcp__big__get_forecast", true),
            ("mcp__big__send_email", true),
            ("mcp__big__convert_currency", true),
            ("mcp__calendar__list_events", false)
        ]
    );
    // The provider found it for the model: the loop does not refuse it.
    assert_eq!(results(&conversation)[0], (r#"get_forecast got {"text":"Rome"}"#.to_owned(), false));
}

#[tokio::test]
async fn a_tool_over_its_budget_is_neither_shown_nor_callable() {
    let source = servers();
    let model = script(json!([
        {"tool_calls": [{"name": "mcp__big__send_email", "input": {"text": "hi"}}, search("send an email")]},
        {"text": "ok"}
    ]));
    let mut config = search_on();
    config.exposure.servers =
        BTreeMap::from([("big".to_owned(), ServerExposure { tool_budget: Some(100), ..ServerExposure::default() })]);
    let agent = Agent::new(model.clone(), source.clone(), allow_all_but_secrets(), config);
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "mail", &Events::default()).await.unwrap();
    let results = results(&conversation);
    assert!(results[0].1);
    assert!(
        results[0].0.starts_with("Error: mcp__big__send_email is not offered to you (its definition (")
            && results[0].0.contains("bytes) is over the per-tool budget (100 bytes)); nothing was called"),
        "{results:?}"
    );
    assert!(!results[1].0.contains("send_email"), "hidden tools are not searchable: {results:?}");
    assert!(source.calls.lock().unwrap().is_empty());
}

/// Keeps the name, decision and kind of refusal of every decision the hooks hear.
#[derive(Default)]
struct Decisions(std::sync::Mutex<Vec<(String, Value, &'static str)>>);

#[async_trait::async_trait]
impl agent_loop::Hooks for Decisions {
    fn decided(&self, call: &agent_loop::CallInfo, decision: &agent_loop::GateDecision<'_>) {
        let kind = serde_json::to_value(&decision.decision).unwrap();
        let refusal = match decision.refusal {
            Some(agent_loop::Refusal::NotLoaded { .. }) => "not loaded",
            Some(agent_loop::Refusal::NotExposed { .. }) => "not exposed",
            Some(_) => "other",
            None => "none",
        };
        self.0.lock().unwrap().push((call.name.clone(), kind, refusal));
    }
}

/// The loop's own refusals (a tool not loaded yet, a tool never offered) and its search tool
/// reach the hooks like the gate's decisions do.
#[tokio::test]
async fn hooks_hear_the_loops_own_decisions_too() {
    let source = servers();
    let model = script(json!([
        {"tool_calls": [
            {"name": "mcp__big__convert_currency", "input": {"text": "1"}},
            search("send an email"),
            {"name": "mcp__calendar__list_events", "input": {"text": "today"}},
        ]},
        {"text": "ok"}
    ]));
    let mut config = search_on();
    config.exposure.servers = BTreeMap::from([(
        "calendar".to_owned(),
        ServerExposure { tool_budget: Some(100), ..ServerExposure::default() },
    )]);
    let hooks = Arc::new(Decisions::default());
    let agent = Agent::new(model.clone(), source.clone(), allow_all_but_secrets(), config).with_hooks(hooks.clone());
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "mail", &Events::default()).await.unwrap();
    let heard = hooks.0.lock().unwrap().clone();
    assert_eq!(
        heard,
        vec![
            ("mcp__big__convert_currency".to_owned(), json!("rejected"), "not loaded"),
            (SEARCH_TOOL.to_owned(), json!("allowed"), "none"),
            ("mcp__calendar__list_events".to_owned(), json!("rejected"), "not exposed"),
        ]
    );
    assert!(source.calls.lock().unwrap().is_empty());
}
