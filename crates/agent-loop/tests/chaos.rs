//! Chaos: twenty supervised fixture servers while a model keeps calling them and a killer sends
//! SIGKILL to random server processes. Run by `cargo xtask test` (it is `#[ignore]`d in the plain
//! workspace run because it takes about 30 s) with its figures printed:
//! `cargo test -p agent-loop --test chaos -- --ignored --nocapture`.
//!
//! Its first line is the seed of its random choices (which server each call goes to, which
//! process is killed); `CHAOS_SEED=N` replays those choices (the timing of a run still varies).
//!
//! What must hold: every call gets exactly one result; a call that succeeded was answered by the
//! very process whose tool description the model was shown (no call reaches a generation the model
//! did not see); a server already `failed` before a step is not offered in it; when the session is
//! closed no server process is left.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_loop::{
    Agent, AgentConfig, AgentEvent, Block, EventSink, LanguageModel, ModelError, ModelRequest, ModelResponse,
    StopReason, TextStream, Usage,
};
use async_trait::async_trait;
use mcp_client::{ServerSet, ServerSpec, ServerState, SetOptions};
use mcp_transport::StdioConfig;
use policy::{Decision, Policy, PolicyConfig};

/// How long the model keeps calling.
const DURATION: Duration = Duration::from_secs(30);
const SERVERS: usize = 20;
/// Calls per model step.
const CALLS_PER_STEP: usize = 4;
/// Mean time between kills.
const KILL_EVERY: Duration = Duration::from_millis(600);

/// The environment variable that gives the seed of a run to replay.
const SEED_VARIABLE: &str = "CHAOS_SEED";

/// How long the turn may take beyond [`DURATION`] before the test calls it hung.
const TURN_SLACK: Duration = Duration::from_secs(90);

/// The seed: [`SEED_VARIABLE`]'s when set, else from the clock. Odd, as the generator needs.
fn seed() -> u64 {
    let seed = match std::env::var(SEED_VARIABLE) {
        Ok(text) => text.trim().parse::<u64>().unwrap_or_else(|e| panic!("{SEED_VARIABLE}={text:?}: {e}")),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
    };
    seed | 1
}

/// A small deterministic generator (the seed is printed first, so a failing run can be replayed).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// The pids of live processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| c.split(|b| *b == 0).any(|arg| arg == marker.as_bytes()))
                .unwrap_or(false)
        })
        .filter(|pid| {
            // A zombie has exited already; its parent just has not reaped it yet.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
                .unwrap_or(false)
        })
        .collect()
}

/// What the model was shown for one call: the server and the pid in the tool's description.
#[derive(Default)]
struct Ledger {
    shown: HashMap<String, (String, u32)>,
    steps: usize,
    failed_before: BTreeSet<String>,
    ghost_offers: Vec<String>,
}

struct ChaosModel {
    set: Arc<ServerSet>,
    started: Instant,
    rng: Mutex<Rng>,
    ledger: Mutex<Ledger>,
}

fn pid_in(description: &str) -> Option<u32> {
    let at = description.rfind("[pid ")? + 5;
    description[at..].split(']').next()?.parse().ok()
}

#[async_trait]
impl LanguageModel for ChaosModel {
    fn name(&self) -> &str {
        "chaos"
    }

    async fn complete(&self, request: &ModelRequest, _stream: &dyn TextStream) -> Result<ModelResponse, ModelError> {
        let (response, all_down) = self.plan(request);
        if all_down {
            // Every server is down at the moment: wait a little before the next look.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(response)
    }
}

impl ChaosModel {
    /// The next response, and whether no server was offered.
    fn plan(&self, request: &ModelRequest) -> (ModelResponse, bool) {
        let mut ledger = self.ledger.lock().unwrap();
        ledger.steps += 1;
        let step = ledger.steps;
        // `failed` is sticky: a server seen failed at the previous step must not be offered now.
        for tool in &request.tools {
            let server = tool.name.split("__").nth(1).unwrap_or_default().to_owned();
            if ledger.failed_before.contains(&server) {
                ledger.ghost_offers.push(format!("step {step}: {}", tool.name));
            }
        }
        ledger.failed_before = self
            .set
            .states()
            .into_iter()
            .filter(|(_, s)| matches!(s, ServerState::Failed { .. }))
            .map(|(name, _)| name)
            .collect();
        if self.started.elapsed() >= DURATION {
            let done = ModelResponse {
                content: vec![Block::text("done")],
                stop_reason: StopReason::EndTurn,
                usage: Usage::default(),
            };
            return (done, false);
        }
        let whoami: Vec<_> = request.tools.iter().filter(|t| t.name.ends_with("__whoami")).collect();
        let mut content = Vec::new();
        if whoami.is_empty() {
            // An unknown tool: refused with a result, which keeps the turn going.
            let wait = ModelResponse {
                content: vec![Block::ToolUse {
                    id: format!("wait-{step}"),
                    name: "mcp__none__whoami".into(),
                    input: serde_json::json!({}),
                }],
                stop_reason: StopReason::ToolUse,
                usage: Usage::default(),
            };
            return (wait, true);
        }
        for i in 0..CALLS_PER_STEP {
            let tool = whoami[self.rng.lock().unwrap().below(whoami.len())];
            let id = format!("call-{step}-{i}");
            let server = tool.name.split("__").nth(1).unwrap_or_default().to_owned();
            let pid = pid_in(&tool.description).expect("every fixture tool says its pid");
            ledger.shown.insert(id.clone(), (server, pid));
            content.push(Block::ToolUse { id, name: tool.name.clone(), input: serde_json::json!({}) });
        }
        (ModelResponse { content, stop_reason: StopReason::ToolUse, usage: Usage::default() }, false)
    }
}

struct Quiet;

impl EventSink for Quiet {
    fn event(&self, _event: &AgentEvent) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "takes 30 s; cargo xtask test runs it with --ignored --nocapture and prints its figures"]
async fn twenty_servers_killed_at_random_while_the_agent_calls_them() {
    let seed = seed();
    // First, so that whatever happens next can be replayed.
    println!("chaos: seed {seed} (replay: {SEED_VARIABLE}={seed})");
    let binary = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}"));
    let marker = format!("chaos-{}-{seed}", std::process::id());
    let specs: Vec<ServerSpec> = (0..SERVERS)
        .map(|i| {
            let config =
                StdioConfig::new(binary.display().to_string(), ["echo", "--tag-pid", "--marker", marker.as_str()]);
            let mut spec = ServerSpec::new(format!("s{i:02}"), Arc::new(config));
            spec.startup_timeout = Duration::from_secs(30);
            spec
        })
        .collect();
    let set = Arc::new(ServerSet::start(specs, SetOptions { local_concurrency: SERVERS, ..SetOptions::default() }));
    set.settled(Duration::from_secs(60)).await;
    let started = Instant::now();
    let model = Arc::new(ChaosModel {
        set: set.clone(),
        started,
        rng: Mutex::new(Rng(seed)),
        ledger: Mutex::new(Ledger::default()),
    });
    let killer_marker = marker.clone();
    let kills = tokio::spawn(async move {
        let mut rng = Rng(seed.rotate_left(17) | 1);
        let mut kills = 0u64;
        while started.elapsed() < DURATION {
            let jitter = rng.below(KILL_EVERY.as_millis() as usize) as u64;
            tokio::time::sleep(KILL_EVERY / 2 + Duration::from_millis(jitter)).await;
            let pids = processes_with(&killer_marker);
            if pids.is_empty() {
                continue;
            }
            let pid = pids[rng.below(pids.len())];
            let status = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            if status.is_ok_and(|s| s.success()) {
                kills += 1;
            }
        }
        kills
    });
    let policy = Policy::new(PolicyConfig { default: Decision::Allow, rules: vec![], ..Default::default() }).unwrap();
    let config = AgentConfig { max_steps: 100_000, ..AgentConfig::default() };
    let agent = Agent::new(model.clone(), set.clone(), policy, config);
    let mut conversation = Vec::new();
    let turn = tokio::time::timeout(DURATION + TURN_SLACK, agent.run_turn(&mut conversation, "call them", &Quiet));
    let outcome = turn
        .await
        .unwrap_or_else(|_| panic!("the turn did not end within {:?} of its start", DURATION + TURN_SLACK))
        .expect("the loop never crashes");
    let kills = kills.await.unwrap();
    assert_eq!(outcome.final_text, "done");

    // Every call gets exactly one result.
    let mut uses = BTreeSet::new();
    let mut results: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    for block in conversation.iter().flat_map(|m| m.content.iter()) {
        match block {
            Block::ToolUse { id, .. } => assert!(uses.insert(id.clone()), "call id {id} used twice"),
            Block::ToolResult { tool_use_id, content, is_error } => {
                results.entry(tool_use_id.clone()).or_default().push((content.clone(), *is_error))
            }
            _ => {}
        }
    }
    let answered: BTreeSet<String> = results.keys().cloned().collect();
    assert_eq!(uses, answered, "every call has a result and every result a call");
    assert!(results.values().all(|r| r.len() == 1), "exactly one result per call");

    // A call that went through was answered by the process the model was shown.
    let ledger = std::mem::take(&mut *model.ledger.lock().unwrap());
    let (mut ok, mut stale, mut failed) = (0u64, 0u64, 0u64);
    for (id, answers) in &results {
        let (content, is_error) = &answers[0];
        let Some((server, shown_pid)) = ledger.shown.get(id) else { continue };
        if *is_error {
            if content.contains("changed") {
                stale += 1;
            } else {
                failed += 1;
            }
            continue;
        }
        ok += 1;
        assert_eq!(content, &format!("pid {shown_pid}"), "call {id} to {server} reached another process than shown");
    }
    assert!(ledger.ghost_offers.is_empty(), "tools of failed servers were offered: {:?}", ledger.ghost_offers);
    let calls = ledger.shown.len();
    let steps = ledger.steps;
    let restarts = set.restarts();
    let failed_servers = set.states().into_iter().filter(|(_, s)| matches!(s, ServerState::Failed { .. })).count();

    drop(agent);
    drop(model);
    let set = Arc::try_unwrap(set).unwrap_or_else(|_| panic!("the set is still shared"));
    tokio::time::timeout(mcp_fixtures::EVENT_DEADLINE, set.close())
        .await
        .unwrap_or_else(|_| panic!("closing the set took longer than {:?}", mcp_fixtures::EVENT_DEADLINE));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut left = processes_with(&marker);
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = processes_with(&marker);
    }
    assert!(left.is_empty(), "server processes left behind: {left:?}");
    println!(
        "chaos (seed {seed}): {SERVERS} servers, {:.1} s, {steps} steps, {calls} calls: {ok} answered by the process \
         shown, {stale} refused as stale, {failed} failed with a cause; {kills} kills, {restarts} restarts, \
         {failed_servers} servers failed at the end; 0 leftover processes",
        started.elapsed().as_secs_f64()
    );
    assert!(ok > 0 && kills > 0, "the run exercised nothing");
}
