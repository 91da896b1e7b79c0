//! The runtime's publish cycle against real fixture servers: a server added, one changed, one
//! removed and a policy change, each published at once by one publisher; a file that no longer
//! parses keeps the running configuration and is reported once.

#![cfg(unix)]
// Helpers outside #[test] functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::{BoundCall, ToolSource};
use mcp_client::ServerState;
use mcp_fixtures::{EVENT_DEADLINE, wait_until};
use mcp_host::config::{self, ConfigPath, Origin};
use mcp_host::{HostEvent, Published, Reload, Runtime, RuntimeOptions};

struct Setup {
    _dir: tempfile::TempDir,
    path: PathBuf,
    fixture: String,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let fixture = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
        Self { _dir: dir, path, fixture }
    }

    /// Writes a configuration of these servers (name, fixture mode) and policy default, as an
    /// editor does: a new file renamed over the old one.
    fn write(&self, servers: &[(&str, &str)], default: &str) {
        let mut text = format!("[policy]\ndefault = \"{default}\"\n");
        for (name, mode) in servers {
            text.push_str(&format!(
                "[servers.{name}]\ncommand = {:?}\nargs = [{mode:?}]\nsandbox = \"off\"\n",
                self.fixture
            ));
        }
        self.write_text(&text);
    }

    fn write_text(&self, text: &str) {
        let temp = self.path.with_extension("new");
        std::fs::write(&temp, text).unwrap();
        std::fs::rename(&temp, &self.path).unwrap();
    }

    fn at(&self) -> ConfigPath {
        ConfigPath::new(Some(self.path.clone()), Origin::Flag, true)
    }

    /// The runtime over the file as it is, with its events recorded.
    async fn start(&self) -> (Runtime, Arc<Mutex<Vec<HostEvent>>>) {
        let config = config::load_at(&self.at(), None).unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut options = RuntimeOptions::default();
        let seen = Arc::clone(&events);
        options.ports.events = Arc::new(move |event: &HostEvent| seen.lock().unwrap().push(event.clone()));
        options.reload = Some(self.at());
        let runtime = Runtime::start(config, options);
        runtime.wait_first_attempts(EVENT_DEADLINE, &|_, _, _| {}).await;
        (runtime, events)
    }
}

/// Reloads until the watcher has seen the change and the file was read.
async fn next_reload(runtime: &Runtime) -> Reload {
    let deadline = tokio::time::Instant::now() + EVENT_DEADLINE;
    loop {
        match runtime.reload_if_changed().await {
            Reload::Clean => {}
            other => return other,
        }
        assert!(tokio::time::Instant::now() < deadline, "no reload within {EVENT_DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn next_publication(runtime: &Runtime) -> Published {
    match next_reload(runtime).await {
        Reload::Published(published) => published,
        other => panic!("not published: {other:?}"),
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

async fn connected(runtime: &Runtime, name: &str) -> bool {
    wait_until(EVENT_DEADLINE, || matches!(runtime.servers().state(name), Some(ServerState::Connected { .. }))).await
}

#[tokio::test]
async fn added_changed_removed_and_policy_are_published_at_once() {
    let setup = Setup::new();
    setup.write(&[("a", "echo"), ("gone", "echo")], "confirm");
    let (runtime, events) = setup.start().await;
    assert!(connected(&runtime, "a").await && connected(&runtime, "gone").await);
    let before = runtime.refresh().await;
    let (version, _) = before.policy.clone().unwrap();
    let generation_a = before.generations["a"];

    // One write: `b` joins, `a` changes, `gone` leaves, the policy changes.
    setup.write(&[("a", "paginate"), ("b", "echo")], "allow");
    let published = next_publication(&runtime).await;
    assert_eq!(
        (published.added.clone(), published.changed.clone(), published.removed.clone(), published.policy_changed),
        (names(&["b"]), names(&["a"]), names(&["gone"]), true)
    );
    assert_eq!(events.lock().unwrap().clone(), vec![HostEvent::Reloaded(published)]);
    assert!(runtime.servers().state("gone").is_none(), "a removed server is closed and forgotten");
    assert!(connected(&runtime, "b").await && connected(&runtime, "a").await);
    let listed =
        wait_until(EVENT_DEADLINE, || runtime.servers().generation("a").is_some_and(|g| g != generation_a)).await;
    assert!(listed, "the changed server is a new connection");
    let after = runtime.refresh().await;
    let (new_version, policy) = after.policy.clone().unwrap();
    assert!(new_version > version, "the policy moved to a new version");
    assert_eq!(policy.default_decision(), policy::Decision::Allow);
    let echoed =
        runtime.call_bound(BoundCall::new("b", "echo", serde_json::json!({"text": "hi"}).as_object().cloned()));
    assert_eq!(agent_loop::render(&echoed.await.unwrap()), "hi");

    // Written again unchanged: nothing to publish, nothing said.
    setup.write(&[("a", "paginate"), ("b", "echo")], "allow");
    assert!(next_publication(&runtime).await.is_empty());
    assert_eq!(events.lock().unwrap().len(), 1, "an unchanged file says nothing");
    runtime.close().await;
}

#[tokio::test]
async fn reading_the_file_is_no_edit_and_the_reload_does_not_trigger_itself() {
    let setup = Setup::new();
    setup.write(&[("a", "echo")], "allow");
    let (runtime, events) = setup.start().await;
    // Another process reading the file (a second `serve` on it, `cat`): opens, reads, closes.
    for _ in 0..3 {
        std::fs::read_to_string(&setup.path).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(matches!(runtime.reload_if_changed().await, Reload::Clean), "a read is no change");
    // An edit is one; the reload reads the file, and that read is no further change.
    setup.write(&[("a", "echo"), ("b", "echo")], "allow");
    assert_eq!(next_publication(&runtime).await.added, names(&["b"]));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..5 {
        assert!(matches!(runtime.reload_if_changed().await, Reload::Clean), "the reload's own read is no change");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(events.lock().unwrap().len(), 1, "one publication: {:?}", events.lock().unwrap());
    runtime.close().await;
}

/// A file written in place, in parts (truncated, then written, then closed), is read once its
/// writer closed it, never between the parts: half a file may parse as a smaller configuration
/// (here, one without the `[policy]` table that denies a tool).
#[tokio::test]
async fn a_file_written_in_place_is_read_once_its_writer_closed_it() {
    use std::io::Write as _;
    let setup = Setup::new();
    let servers = format!("[servers.a]\ncommand = {:?}\nargs = [\"echo\"]\nsandbox = \"off\"\n", setup.fixture);
    let whole = format!("{servers}[policy]\ndefault = \"deny\"\n");
    setup.write_text(&whole);
    let (runtime, events) = setup.start().await;
    let mut file = std::fs::OpenOptions::new().write(true).truncate(true).open(&setup.path).unwrap();
    file.write_all(servers.as_bytes()).unwrap();
    file.flush().unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(matches!(runtime.reload_if_changed().await, Reload::Clean), "read while being written");
    }
    file.write_all(b"[policy]\ndefault = \"allow\"\n").unwrap();
    drop(file);
    let published = next_publication(&runtime).await;
    assert!(published.policy_changed, "{published:?}");
    assert!(published.added.is_empty() && published.removed.is_empty(), "{published:?}");
    assert_eq!(events.lock().unwrap().len(), 1, "one publication: {:?}", events.lock().unwrap());
    runtime.close().await;
}

#[tokio::test]
async fn a_broken_file_keeps_the_running_configuration_and_is_reported_once() {
    let setup = Setup::new();
    setup.write(&[("a", "echo")], "allow");
    let (runtime, events) = setup.start().await;
    assert!(connected(&runtime, "a").await);
    for _ in 0..2 {
        setup.write_text("[servers.a\ncommand = \"oops\"\n");
        let Reload::Kept { error } = next_reload(&runtime).await else { panic!("a broken file is published") };
        assert!(error.contains("config.toml") && error.contains("invalid TOML"), "{error}");
    }
    let said = events.lock().unwrap().clone();
    assert!(matches!(said.as_slice(), [HostEvent::ReloadFailed { .. }]), "said once: {said:?}");
    assert!(matches!(runtime.servers().state("a"), Some(ServerState::Connected { .. })), "the old runtime stays");
    assert_eq!(runtime.config().servers.len(), 1);
    // Fixed again: published.
    setup.write(&[("a", "echo"), ("b", "echo")], "allow");
    assert_eq!(next_publication(&runtime).await.added, names(&["b"]));
    runtime.close().await;
}

#[tokio::test]
async fn one_publisher_at_a_time() {
    let setup = Setup::new();
    setup.write(&[("a", "echo")], "confirm");
    let (runtime, events) = setup.start().await;
    setup.write(&[("a", "echo"), ("b", "echo")], "confirm");
    // Many callers reload at once, again and again until the change is published: it is
    // published once, by one of them (an editor's write is several events for the watcher, so
    // later reloads may find the file again, unchanged).
    let deadline = tokio::time::Instant::now() + EVENT_DEADLINE;
    let mut publications = Vec::new();
    while publications.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never published");
        let all = futures_util::future::join_all((0..8).map(|_| runtime.reload_if_changed())).await;
        publications.extend(all.into_iter().filter_map(|r| match r {
            Reload::Published(p) if !p.is_empty() => Some(p),
            _ => None,
        }));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(publications.len(), 1, "{publications:?}");
    assert_eq!(publications[0].added, names(&["b"]));
    assert_eq!(events.lock().unwrap().len(), 1);
    let states = runtime.servers().states();
    assert_eq!(states.iter().filter(|(n, _)| n == "b").count(), 1, "added once: {states:?}");
    // Published directly, from a configuration in hand, the same way.
    let mut config = runtime.config();
    config.servers.retain(|s| s.name == "a");
    let published = runtime.publish(config).await;
    assert_eq!(published.removed, names(&["b"]));
    runtime.close().await;
}

impl Setup {
    /// The fixture's `echo` under `a`, and `more` (TOML of further servers) after it.
    fn write_with(&self, more: &str) {
        let text = format!(
            "[policy]\ndefault = \"allow\"\n[servers.a]\ncommand = {:?}\nargs = [\"echo\"]\nsandbox = \"off\"\n{more}",
            self.fixture
        );
        self.write_text(&text);
    }

    /// A server `name` that starts its first answer `delay_s` seconds late.
    fn late(&self, name: &str, delay_s: u32) -> String {
        format!(
            "[servers.{name}]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep {delay_s}; exec {} echo\"]\nsandbox = \"off\"\n",
            self.fixture
        )
    }
}

/// The listing after an edit waits for the local servers it added (up to their startup
/// timeout), as the first step does at the start: the next step offers them.
#[tokio::test]
async fn the_listing_after_an_edit_waits_for_the_servers_it_added() {
    let setup = Setup::new();
    setup.write_with("");
    let (runtime, events) = setup.start().await;
    assert!(connected(&runtime, "a").await);
    // `b` answers a second late: a listing that did not wait would lack it.
    setup.write_with(&setup.late("b", 1));
    assert_eq!(next_publication(&runtime).await.added, names(&["b"]));
    let listing = runtime.refresh().await;
    assert!(listing.servers.iter().any(|s| &*s.server == "b" && !s.tools.is_empty()), "b is offered: {listing:?}");
    assert_eq!(events.lock().unwrap().len(), 1, "the reload, and nothing else: {:?}", events.lock().unwrap());
    // The wait is made once: a later listing does not wait again.
    let again = runtime.refresh().await;
    assert!(again.servers.iter().any(|s| &*s.server == "b"));
    runtime.close().await;
}

/// A server still starting when the wait ends, or one that failed, is told; the listing goes on
/// without it.
#[tokio::test]
async fn an_added_server_not_ready_after_the_wait_is_told() {
    let setup = Setup::new();
    setup.write_with("");
    let config = config::load_at(&setup.at(), None).unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut options = RuntimeOptions::default();
    let seen = Arc::clone(&events);
    options.ports.events = Arc::new(move |event: &HostEvent| seen.lock().unwrap().push(event.clone()));
    options.reload = Some(setup.at());
    options.added_wait = Duration::from_millis(500);
    let runtime = Runtime::start(config, options);
    runtime.wait_first_attempts(EVENT_DEADLINE, &|_, _, _| {}).await;
    let gone = "[servers.gone]\ncommand = \"/nonexistent/mcp-server\"\nsandbox = \"off\"\n";
    setup.write_with(&format!("{}{gone}", setup.late("slow", 30)));
    assert_eq!(next_publication(&runtime).await.added, names(&["gone", "slow"]));
    let started = tokio::time::Instant::now();
    let listing = runtime.refresh().await;
    assert!(started.elapsed() < Duration::from_secs(10), "waited {:?}", started.elapsed());
    assert!(listing.servers.iter().all(|s| &*s.server == "a"), "{listing:?}");
    let said = events.lock().unwrap().clone();
    let not_ready: Vec<(&str, &ServerState)> = said
        .iter()
        .filter_map(|e| match e {
            HostEvent::NotReady { server, state } => Some((server.as_str(), state)),
            _ => None,
        })
        .collect();
    // The failed one is retried (its state says why and when).
    assert!(
        matches!(not_ready.as_slice(), [("gone", failed), ("slow", ServerState::Pending)]
            if matches!(failed, ServerState::Failed { .. } | ServerState::Reconnecting { .. })
                && failed.to_string().contains("/nonexistent/mcp-server")),
        "{said:?}"
    );
    runtime.close().await;
}

/// A server the file disables was never read through (its `${...}` left as written): enabling
/// it for the session is refused, so it never starts with settings nobody wrote; one disabled
/// for the session only comes back.
#[tokio::test]
async fn a_server_disabled_in_the_file_is_not_enabled_for_a_session() {
    use mcp_host::{ActionOutcome, ServerAction};
    let setup = Setup::new();
    setup.write_text(&format!(
        "[servers.off]\ncommand = {:?}\nargs = [\"echo\", \"${{HOME}}\"]\nsandbox = \"off\"\nenabled = false\n\
         [servers.on]\ncommand = {:?}\nargs = [\"echo\"]\nsandbox = \"off\"\n",
        setup.fixture, setup.fixture
    ));
    let (runtime, _events) = setup.start().await;
    assert_eq!(runtime.act("off", ServerAction::Enable), ActionOutcome::DisabledInFile);
    assert!(
        matches!(runtime.servers().state("off"), Some(ServerState::Disabled)),
        "{:?}",
        runtime.servers().state("off")
    );
    assert!(connected(&runtime, "on").await);
    assert_eq!(runtime.act("on", ServerAction::Disable), ActionOutcome::Done);
    assert_eq!(runtime.act("on", ServerAction::Enable), ActionOutcome::Done);
    assert!(connected(&runtime, "on").await);
    runtime.close().await;
}

/// A reload cut short while a removed server is closing (its client gone) leaves the set and
/// the configuration of one generation: the server put back afterwards is added again (it
/// was taken for unchanged, and stayed gone until a restart).
#[tokio::test]
async fn a_reload_cut_short_while_a_server_closes_leaves_one_generation() {
    let setup = Setup::new();
    let with = |servers: &[(&str, &str)]| {
        let mut text = String::new();
        for (name, args) in servers {
            text.push_str(&format!(
                "[servers.{name}]\ncommand = {:?}\nargs = {args}\nsandbox = \"off\"\n",
                setup.fixture
            ));
        }
        setup.write_text(&text);
        config::load_at(&setup.at(), None).unwrap()
    };
    // `slow` finishes its calls in flight before it exits, and its one call takes ten minutes:
    // closing it takes the close grace (seconds).
    let log = setup.path.with_file_name("received.jsonl");
    let slow_args =
        format!("[\"slow\", \"--delay-ms\", \"600000\", \"--linger\", \"--log\", {:?}]", log.display().to_string());
    let both = with(&[("keep", "[\"echo\"]"), ("slow", &slow_args)]);
    let runtime = Arc::new(Runtime::start(both.clone(), RuntimeOptions::default()));
    runtime.wait_first_attempts(EVENT_DEADLINE, &|_, _, _| {}).await;
    assert!(connected(&runtime, "slow").await);
    let busy = {
        let runtime = Arc::clone(&runtime);
        tokio::spawn(async move {
            let _ = runtime
                .call_bound(BoundCall::new("slow", "echo", serde_json::json!({"text": "x"}).as_object().cloned()))
                .await;
        })
    };
    let in_flight = || std::fs::read_to_string(&log).is_ok_and(|t| t.contains("tools/call"));
    assert!(wait_until(EVENT_DEADLINE, in_flight).await, "the call reached the server");
    let without = with(&[("keep", "[\"echo\"]")]);
    let cut = tokio::time::timeout(Duration::from_millis(300), runtime.publish(without)).await;
    assert!(cut.is_err(), "the close outlasts the cut");
    assert!(runtime.servers().state("slow").is_none());
    assert!(runtime.config().server("slow").is_none(), "the configuration moved with the set");
    let published = runtime.publish(both).await;
    assert_eq!(published.added, names(&["slow"]));
    assert!(connected(&runtime, "slow").await);
    busy.abort();
    let _ = busy.await;
    if let Ok(runtime) = Arc::try_unwrap(runtime) {
        runtime.close().await;
    }
}
