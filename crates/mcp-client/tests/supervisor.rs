//! The connection lifecycle of `ServerSet` against the real fixture server: restarts within and
//! beyond the limit, calls waiting for a restart, generations, a re-listing that fails halfway,
//! progress that keeps a long call alive, remote servers that drop and come back.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use mcp_client::{RestartPolicy, ServerSet, ServerSpec, ServerState, SetCallError, SetOptions};
use mcp_safety::Backoff;
use mcp_transport::{RemoteServer, StdioConfig};
use serde_json::json;

fn fixture(args: &[&str]) -> ServerSpec {
    let binary = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let mut spec = ServerSpec::new("fx", Arc::new(StdioConfig::new(binary, args.iter().copied())));
    spec.startup_timeout = Duration::from_secs(20);
    spec
}

fn options(max_restarts: u32) -> SetOptions {
    SetOptions {
        restarts: RestartPolicy {
            max_restarts,
            window: Duration::from_secs(60),
            backoff: Backoff {
                initial_delay: Duration::from_millis(20),
                max_delay: Duration::from_millis(100),
                max_attempts: u32::MAX,
            },
        },
        reconnect: Backoff {
            initial_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
            max_attempts: 50,
        },
        ..SetOptions::default()
    }
}

/// A state a test waits for: its name, for the failure message, and the test.
struct Awaited {
    what: &'static str,
    accept: fn(&ServerState) -> bool,
}

const CONNECTED: Awaited = Awaited { what: "connected", accept: connected };
const NOT_CONNECTED: Awaited = Awaited { what: "gone from connected", accept: |s| !connected(s) };
const FAILED: Awaited = Awaited { what: "failed", accept: |s| matches!(s, ServerState::Failed { .. }) };
const RECONNECTING: Awaited =
    Awaited { what: "reconnecting", accept: |s| matches!(s, ServerState::Reconnecting { .. }) };
const DISABLED: Awaited = Awaited { what: "disabled", accept: |s| matches!(s, ServerState::Disabled) };

/// Waits until `server` is in the `awaited` state, for at most [`mcp_fixtures::EVENT_DEADLINE`];
/// returns it, or fails naming the server, the state awaited and the one it was in.
async fn wait_for(set: &ServerSet, server: &str, awaited: Awaited) -> ServerState {
    let mut events = set.subscribe();
    let mut last = None;
    let wait = async {
        loop {
            let state = set.state(server).unwrap_or_else(|| panic!("no server {server:?} in the set"));
            if (awaited.accept)(&state) {
                return state;
            }
            last = Some(state.to_string());
            let _ = tokio::time::timeout(Duration::from_millis(200), events.recv()).await;
        }
    };
    match tokio::time::timeout(mcp_fixtures::EVENT_DEADLINE, wait).await {
        Ok(state) => state,
        Err(_) => panic!(
            "server {server:?} was not {} within {:?}; its state: {}",
            awaited.what,
            mcp_fixtures::EVENT_DEADLINE,
            last.as_deref().unwrap_or("never looked at")
        ),
    }
}

fn connected(s: &ServerState) -> bool {
    matches!(s, ServerState::Connected { .. })
}

fn args(value: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    value.as_object().cloned()
}

#[tokio::test]
async fn a_server_that_exits_is_restarted_as_a_new_generation_and_the_call_in_flight_names_the_cause() {
    let set = ServerSet::start(vec![fixture(&["echo", "--tag-pid"])], options(3));
    wait_for(&set, "fx", CONNECTED).await;
    let first = set.generation("fx").unwrap();
    let pid = set.call("fx", "whoami", None, Some(first), None).await.unwrap().joined_text();

    // The call in flight when it dies is not retried: it fails, naming the server and the cause.
    let err = set.call("fx", "crash", None, Some(first), None).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("\"fx\"") && text.contains("status 3"), "{text}");

    // It comes back on its own, listed afresh as a new generation.
    let came_back = mcp_fixtures::wait_until(mcp_fixtures::EVENT_DEADLINE, || {
        set.state("fx").is_some_and(|s| connected(&s)) && set.generation("fx").is_some_and(|g| g != first)
    });
    assert!(
        came_back.await,
        "fx did not come back connected as a new generation after its crash within {:?} (state {:?}, generation \
         {:?}, first {first})",
        mcp_fixtures::EVENT_DEADLINE,
        set.state("fx").map(|s| s.to_string()),
        set.generation("fx")
    );
    let second = set.generation("fx").unwrap();
    assert!(second > first);
    assert_eq!(set.restarts(), 1);
    // A call prepared against the old generation is refused, unsent.
    let err = set.call("fx", "whoami", None, Some(first), None).await.unwrap_err();
    assert!(matches!(err, SetCallError::Stale { .. }), "{err}");
    let again = set.call("fx", "whoami", None, Some(second), None).await.unwrap().joined_text();
    assert_ne!(pid, again, "a new process answers");
    set.close().await;
}

#[tokio::test]
async fn beyond_the_limit_a_server_is_failed_until_asked_again() {
    let set = ServerSet::start(vec![fixture(&["echo"])], options(2));
    for _ in 0..3 {
        wait_for(&set, "fx", CONNECTED).await;
        let _ = set.call("fx", "crash", None, None, None).await;
        wait_for(&set, "fx", NOT_CONNECTED).await;
    }
    let state = wait_for(&set, "fx", FAILED).await;
    assert!(state.to_string().contains("restarted 2 times"), "{state}");
    let listing = set.refresh().await;
    assert!(listing.iter().all(|l| l.name != "fx"), "a failed server offers no tools");
    let err = set.call("fx", "echo", args(json!({"text": "x"})), None, None).await.unwrap_err();
    assert!(matches!(err, SetCallError::Unavailable { .. }), "{err}");

    assert!(set.reconnect("fx"));
    wait_for(&set, "fx", CONNECTED).await;
    let text = set.call("fx", "echo", args(json!({"text": "back"})), None, None).await.unwrap().joined_text();
    assert_eq!(text, "back");
    set.close().await;
}

#[tokio::test]
async fn a_call_to_a_server_coming_back_waits_for_it() {
    let set = ServerSet::start(vec![fixture(&["echo"])], options(3));
    wait_for(&set, "fx", CONNECTED).await;
    let _ = set.call("fx", "crash", None, None, None).await;
    // Unbound (as `mcp-harness call` after its own binding): it waits for the restart.
    let text = set.call("fx", "echo", args(json!({"text": "waited"})), None, None).await.unwrap().joined_text();
    assert_eq!(text, "waited");
    set.close().await;
}

#[tokio::test]
async fn a_listing_that_fails_halfway_keeps_the_old_generation_and_says_why() {
    let set = ServerSet::start(vec![fixture(&["paginate", "--fail-relist"])], options(3));
    wait_for(&set, "fx", CONNECTED).await;
    let before = set.refresh().await;
    let generation = before[0].generation;
    let count = before[0].tools.len();
    // A tool is added and list_changed announced; listing it again fails at page 2.
    set.call("fx", "add_tool", args(json!({"name": "late"})), None, None).await.unwrap();
    let deadline = tokio::time::Instant::now() + mcp_fixtures::EVENT_DEADLINE;
    while set.last_error("fx").is_none() && tokio::time::Instant::now() < deadline {
        let after = set.refresh().await;
        assert_eq!((after[0].generation, after[0].tools.len()), (generation, count), "never half a listing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let why = set.last_error("fx").expect("the failure is reported");
    assert!(why.contains("listing failed on purpose"), "{why}");
    assert_eq!(set.generation("fx"), Some(generation));
    set.close().await;
}

/// A re-listing that publishes a new generation is an event of its own: watchers (telemetry's
/// publication span events, the gateway's publisher) hear of it, and never as a new start.
#[tokio::test]
async fn a_relisting_that_changes_the_tools_is_told_as_a_relisting() {
    let set = ServerSet::start(vec![fixture(&["echo"])], options(3));
    wait_for(&set, "fx", CONNECTED).await;
    let generation = set.refresh().await[0].generation;
    let mut events = set.subscribe();
    set.call("fx", "add_tool", args(json!({"name": "late"})), None, None).await.unwrap();
    let announced = mcp_fixtures::wait_until(mcp_fixtures::EVENT_DEADLINE, || set.generation("fx") == Some(u64::MAX));
    assert!(announced.await, "the announcement never arrived");
    let relisted = set.refresh().await[0].generation;
    assert_ne!(relisted, generation);
    let event = tokio::time::timeout(mcp_fixtures::EVENT_DEADLINE, events.recv()).await.expect("told").unwrap();
    assert_eq!((event.server.as_str(), event.generation, event.relisted), ("fx", Some(relisted), true));
    assert!(connected(&event.state), "{:?}", event.state);
    // An announcement that changes nothing is no publication.
    set.call("fx", "add_tool", args(json!({"name": "late"})), None, None).await.unwrap();
    let announced = mcp_fixtures::wait_until(mcp_fixtures::EVENT_DEADLINE, || set.generation("fx") == Some(u64::MAX));
    assert!(announced.await, "the second announcement never arrived");
    assert_eq!(set.refresh().await[0].generation, relisted);
    assert!(events.try_recv().is_err(), "nothing published, nothing told");
    set.close().await;
}

#[tokio::test]
async fn a_change_announced_with_an_identical_listing_keeps_the_generation() {
    let set = ServerSet::start(vec![fixture(&["echo"])], options(3));
    wait_for(&set, "fx", CONNECTED).await;
    let generation = set.refresh().await[0].generation;
    // Registering a tool that exists announces list_changed and changes nothing.
    set.call("fx", "add_tool", args(json!({"name": "echo"})), None, None).await.unwrap();
    let announced = mcp_fixtures::wait_until(mcp_fixtures::EVENT_DEADLINE, || set.generation("fx") == Some(u64::MAX));
    assert!(announced.await, "the announcement never arrived");
    assert_eq!(set.settled_generation("fx").await, Some(generation), "a call prepared before is not refused");
    let answer = set.call("fx", "echo", args(json!({"text": "hi"})), Some(generation), None).await;
    assert!(answer.is_ok(), "the call to the unchanged generation went through: {answer:?}");
    set.close().await;
}

#[tokio::test]
async fn progress_restarts_the_tool_timeout_up_to_the_maximum_tool_time() {
    // The fixture reports progress every tenth of the work: every 500 ms here, against a 2 s
    // timeout, so a loaded machine has 1.5 s of slack per report (a 400 ms timeout against
    // 200 ms reports had 200 ms).
    let mut spec = fixture(&["echo"]);
    spec.tool_timeout = Duration::from_secs(2);
    spec.max_tool_time = Duration::from_secs(60);
    let set = ServerSet::start(vec![spec], options(3));
    wait_for(&set, "fx", CONNECTED).await;
    // 5 s of work reporting progress: two and a half times the timeout, and it finishes.
    let (tx, mut rx) = tokio::sync::mpsc::channel(mcp_client::PROGRESS_BACKLOG);
    let result = set.call("fx", "sleep", args(json!({"ms": 5000})), None, Some(tx)).await.unwrap();
    assert_eq!(result.joined_text(), "slept 5000 ms");
    let mut reports = 0;
    while rx.try_recv().is_ok() {
        reports += 1;
    }
    assert!(reports >= 9, "{reports} progress reports");
    // Without progress the timeout holds.
    let err = set.call("fx", "sleep", args(json!({"ms": 5000})), None, None).await.unwrap_err();
    assert!(err.to_string().contains("no answer within 2s"), "{err}");
    set.close().await;

    // The maximum bounds the total however much progress comes: the call neither finishes (5 s
    // of work) nor fails at the 2 s timeout (progress restarts it), but at the 3 s maximum. A
    // lower bound on the time only: a loaded machine makes it later, never earlier.
    let mut spec = fixture(&["echo"]);
    spec.tool_timeout = Duration::from_secs(2);
    spec.max_tool_time = Duration::from_secs(3);
    let set = ServerSet::start(vec![spec], options(3));
    wait_for(&set, "fx", CONNECTED).await;
    let (tx, _rx) = tokio::sync::mpsc::channel(mcp_client::PROGRESS_BACKLOG);
    let started = tokio::time::Instant::now();
    let err = set.call("fx", "sleep", args(json!({"ms": 5000})), None, Some(tx)).await.unwrap_err();
    assert!(err.to_string().contains("no answer within"), "{err}");
    assert!(started.elapsed() >= Duration::from_secs(3), "progress carried it past the timeout to the maximum");
    set.close().await;
}

#[tokio::test]
async fn a_remote_server_that_drops_is_reconnected_with_backoff_as_a_new_generation() {
    use mcp_fixtures::http::{HttpOptions, start};
    let server = start(HttpOptions::default(), 0).await.unwrap();
    let url = server.url();
    let port = url.rsplit(':').next().and_then(|p| p.split('/').next()).and_then(|p| p.parse::<u16>().ok()).unwrap();
    let mut remote = RemoteServer::new(url.clone());
    remote.reconnect =
        Backoff { initial_delay: Duration::from_millis(20), max_delay: Duration::from_millis(50), max_attempts: 2 };
    let mut spec = ServerSpec::new("remote", Arc::new(remote));
    spec.startup_timeout = Duration::from_secs(5);
    let set = ServerSet::start(vec![spec], options(3));
    wait_for(&set, "remote", CONNECTED).await;
    let first = set.generation("remote").unwrap();

    drop(server);
    // The next call finds nobody; the connection ends and the set tries again, with backoff.
    let _ = set.call("remote", "echo", args(json!({"text": "x"})), None, None).await;
    let state = wait_for(&set, "remote", RECONNECTING).await;
    assert!(matches!(state, ServerState::Reconnecting { attempt: 1.., .. }), "{state}");

    let _again = start(HttpOptions::default(), port).await.unwrap();
    wait_for(&set, "remote", CONNECTED).await;
    let second = set.generation("remote").unwrap();
    assert!(second > first, "listed afresh: {first} then {second}");
    let text = set.call("remote", "echo", args(json!({"text": "back"})), Some(second), None).await.unwrap();
    assert_eq!(text.joined_text(), "back");
    set.close().await;
}

#[tokio::test]
async fn servers_can_be_disabled_enabled_added_replaced_and_removed_while_running() {
    let set = ServerSet::start(vec![fixture(&["echo"])], options(3));
    wait_for(&set, "fx", CONNECTED).await;
    assert!(set.set_enabled("fx", false));
    wait_for(&set, "fx", DISABLED).await;
    assert!(set.refresh().await.is_empty(), "a disabled server offers no tools");
    assert!(set.set_enabled("fx", true));
    wait_for(&set, "fx", CONNECTED).await;

    let mut other = fixture(&["echo", "--extra-tools", "2"]);
    other.name = "two".into();
    set.add(other);
    wait_for(&set, "two", CONNECTED).await;
    let tools = |name: &str, listing: &[mcp_client::ServerListing]| {
        listing.iter().find(|l| l.name == name).map(|l| l.tools.len())
    };
    let listing = set.refresh().await;
    let base = tools("fx", &listing).unwrap();
    assert_eq!(tools("two", &listing), Some(base + 2));

    let mut changed = fixture(&["echo", "--extra-tools", "5"]);
    changed.name = "two".into();
    assert!(set.replace(changed));
    let deadline = tokio::time::Instant::now() + mcp_fixtures::EVENT_DEADLINE;
    while tools("two", &set.refresh().await) != Some(base + 5) {
        assert!(tokio::time::Instant::now() < deadline, "the replaced server never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(set.remove("two").await);
    assert!(set.state("two").is_none());
    set.close().await;
}

/// A `content --mutable` fixture named `name`.
fn content_server(name: &str) -> ServerSpec {
    let mut spec = fixture(&["content", "--mutable"]);
    spec.name = name.to_owned();
    spec
}

/// How many requests of `method` `server` has received (its `counters` tool).
async fn count(set: &ServerSet, server: &str, method: &str) -> u64 {
    let text = set.call(server, "counters", None, None, None).await.unwrap().joined_text();
    let counts: serde_json::Value = serde_json::from_str(&text).unwrap();
    counts.get(method).and_then(serde_json::Value::as_u64).unwrap_or(0)
}

/// Asks `check` again (bounded) until it holds; whether it did.
async fn eventually(mut check: impl AsyncFnMut() -> bool) -> bool {
    let wait = async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(mcp_fixtures::EVENT_DEADLINE, wait).await.is_ok()
}

#[tokio::test]
async fn resources_and_prompts_are_listed_at_connect_and_relisted_only_for_their_own_change_on_that_server() {
    let set = ServerSet::start(vec![content_server("a"), content_server("b")], options(3));
    wait_for(&set, "a", CONNECTED).await;
    wait_for(&set, "b", CONNECTED).await;
    // The catalogs are listed beside the connection: wait for that listing, then count.
    let lists = ["tools/list", "resources/list", "resources/templates/list", "prompts/list"];
    for server in ["a", "b"] {
        let listed = eventually(async || count(&set, server, "prompts/list").await == 1);
        assert!(listed.await, "{server} listed its prompts at connect");
        for method in lists {
            assert_eq!(count(&set, server, method).await, 1, "{server} listed {method} once at connect");
        }
    }

    // Asking for the catalogs lists nothing again.
    let catalog = set.resource_catalog("a").await.unwrap();
    assert_eq!(catalog.resources.len(), 4);
    assert_eq!(catalog.templates.len(), 1);
    assert_eq!(set.prompts("a").await.unwrap().len(), 3);
    assert_eq!(count(&set, "a", "resources/list").await, 1);
    assert_eq!(count(&set, "a", "prompts/list").await, 1);

    // A resource change re-lists a's resources (and templates), nothing else, nowhere else.
    set.call("a", "add_resource", args(json!({"name": "fresh"})), None, None).await.unwrap();
    let seen = eventually(async || {
        let catalog = set.resource_catalog("a").await.unwrap();
        catalog.resources.iter().any(|r| r.uri == "fixture://added/fresh")
    });
    assert!(seen.await, "the added resource was never listed");
    assert_eq!(count(&set, "a", "resources/list").await, 2);
    assert_eq!(count(&set, "a", "resources/templates/list").await, 2);
    assert_eq!(count(&set, "a", "prompts/list").await, 1, "a resource change does not re-list prompts");
    let generation = set.refresh().await.iter().find(|l| l.name == "a").unwrap().generation;
    assert_eq!(count(&set, "a", "tools/list").await, 1, "a resource change does not re-list tools");
    assert_eq!(count(&set, "b", "resources/list").await, 1, "another server's change does not re-list b");
    assert_eq!(set.resource_catalog("b").await.unwrap().resources.len(), 4);

    // A prompt change re-lists a's prompts only.
    set.call("a", "add_prompt", args(json!({"name": "fresh"})), None, None).await.unwrap();
    let seen = eventually(async || set.prompts("a").await.unwrap().iter().any(|p| p.name == "fresh"));
    assert!(seen.await, "the added prompt was never listed");
    assert_eq!(count(&set, "a", "prompts/list").await, 2);
    assert_eq!(count(&set, "a", "resources/list").await, 2, "a prompt change does not re-list resources");
    assert_eq!(set.refresh().await.iter().find(|l| l.name == "a").unwrap().generation, generation);
    assert_eq!(count(&set, "b", "prompts/list").await, 1);

    // A tools change re-lists tools only.
    set.call("a", "add_tool", args(json!({"name": "late"})), None, None).await.unwrap();
    let seen = eventually(async || {
        set.refresh().await.iter().any(|l| l.name == "a" && l.tools.iter().any(|t| t.name == "late"))
    });
    assert!(seen.await, "the added tool was never listed");
    set.resource_catalog("a").await.unwrap();
    set.prompts("a").await.unwrap();
    assert_eq!(count(&set, "a", "tools/list").await, 2);
    assert_eq!(count(&set, "a", "resources/list").await, 2, "a tools change does not re-list resources");
    assert_eq!(count(&set, "a", "prompts/list").await, 2, "a tools change does not re-list prompts");
    set.close().await;
}

#[tokio::test]
async fn a_server_without_resources_or_prompts_has_empty_catalogs_unasked() {
    let set = ServerSet::start(vec![fixture(&["echo"])], options(3));
    wait_for(&set, "fx", CONNECTED).await;
    let catalog = set.resource_catalog("fx").await.unwrap();
    assert!(catalog.resources.is_empty() && catalog.templates.is_empty());
    assert!(set.prompts("fx").await.unwrap().is_empty());
    assert!(matches!(set.prompts("nope").await, Err(SetCallError::UnknownServer { .. })));
    set.close().await;
}
