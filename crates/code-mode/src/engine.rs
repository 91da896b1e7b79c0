//! The host side of a run: starts the engine thread, makes the script's calls through the
//! [`ToolCaller`] within the concurrency limit, and hands their results back.
//!
//! Each run has a thread of its own (not a tokio blocking task): a script may compute for its
//! whole CPU limit, which must not hold a thread of a pool shared with the host's file and
//! process work, and the thread's stack is sized for the engine's stack limit. Starting a
//! thread costs tens of microseconds, small beside the engine's own start.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::FutureExt as _;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use serde_json::Value;

use crate::clock::ThreadWatch;
use crate::limits::Limits;
use crate::outcome::{ScriptError, ScriptRun};
use crate::port::{CallError, CallErrorKind, ScriptCallContext, ToolCaller};
use crate::tools::ScriptTools;
use crate::watch;
use crate::worker::{self, Job, Request, Settled, ToHost};

/// Room on the engine thread's stack beyond the engine's own limit, for the Rust frames
/// around it.
const STACK_HEADROOM: usize = 2 << 20;

/// CPU time past its limit after which the host answers for a script its engine has not
/// stopped: the engine polls its interrupt between instructions, not inside some builtins
/// (a quadratic string search ran 20 s past a 0.2 s limit), so the host watches the thread's
/// clock too. Far above what an interrupt takes to act, so it only answers for a stuck one.
const STUCK_GRACE: Duration = Duration::from_secs(1);

/// Runs scripts under [`Limits`].
#[derive(Debug, Clone)]
pub struct Engine {
    limits: Limits,
    threads: Arc<AtomicUsize>,
    /// Turns to run ([`Limits::max_running`]), shared by the clones.
    running: Arc<tokio::sync::Semaphore>,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

/// A call on its way, giving back its id, how it ended and the tools it made callable (a
/// search's finds).
type CallFuture<'a> = Pin<Box<dyn Future<Output = (u32, Result<Value, CallError>, Vec<usize>)> + Send + 'a>>;

/// What a search gives the prelude, `{found, add}`: what the script's `await` gives (each
/// tool's descriptor, best first) and the tools to add (`[server ident, tool ident, index]`);
/// and the indices of the tools found. Names the script's tools do not hold are left out.
fn found(tools: &ScriptTools, names: &[String]) -> (Value, Vec<usize>) {
    let mut indices: Vec<usize> = Vec::new();
    for index in names.iter().filter_map(|name| tools.by_name(name)) {
        if !indices.contains(&index) {
            indices.push(index);
        }
    }
    let found: Vec<Value> = indices.iter().filter_map(|i| tools.found(*i)).collect();
    let add: Vec<Value> = indices
        .iter()
        .filter_map(|i| tools.idents(*i).map(|(server, tool)| serde_json::json!([server, tool, i])))
        .collect();
    (serde_json::json!({ "found": found, "add": add }), indices)
}

impl Engine {
    /// An engine whose scripts run under `limits`.
    pub fn new(limits: Limits) -> Self {
        let running =
            Arc::new(tokio::sync::Semaphore::new(limits.max_running.clamp(1, tokio::sync::Semaphore::MAX_PERMITS)));
        Self { limits, threads: Arc::new(AtomicUsize::new(0)), running }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How many engine threads of this engine (and its clones) are alive: a run's thread ends
    /// soon after the run ends or is dropped.
    pub fn threads(&self) -> usize {
        self.threads.load(Ordering::SeqCst)
    }

    /// Runs `script` (the body of an async function: `return` gives its value) with `tools`
    /// reachable as `tools.<server>.<tool>`, each call made through `caller` with the
    /// context of `script_id`.
    ///
    /// Waits its turn when [`Limits::max_running`] scripts of this engine run already.
    /// Never blocks the calling thread: the engine runs on a thread of its own. Dropping the
    /// future stops the script (at its next instruction) and drops its calls in flight.
    /// Calls the script started and did not await are dropped when it returns.
    ///
    /// A script stuck in one of the engine's builtins (which the engine does not interrupt)
    /// is answered with [`ScriptError::CpuLimit`] once its thread has used a second of CPU
    /// time past the limit (on Linux, where the host can read that thread's clock; the run's
    /// `cpu_time` is then the thread's, the engine's start included); its log is lost, and its thread runs on to the builtin's end, stops there, and keeps its
    /// turn until then, so stuck scripts never take more than [`Limits::max_running`] CPUs.
    pub async fn run(&self, script: &str, tools: &ScriptTools, caller: &dyn ToolCaller, script_id: &str) -> ScriptRun {
        let limits = &self.limits;
        if script.len() > limits.max_script_bytes {
            return ScriptRun::failed(ScriptError::ScriptTooLarge {
                bytes: script.len(),
                limit: limits.max_script_bytes,
            });
        }
        // Its turn among the engine's runs: held until the run ends (dropping the run while it
        // waits gives the turn up).
        let Ok(turn) = Arc::clone(&self.running).acquire_owned().await else {
            return ScriptRun::failed(ScriptError::Engine("the engine was shut down".to_owned()));
        };
        let started_at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_millis() as f64);
        let job = Job {
            script: script.to_owned(),
            manifest: Arc::clone(tools.manifest()),
            reachable: tools.iter().map(|t| !t.is_deferred()).collect(),
            search: tools.searchable(),
            limits: limits.clone(),
            started_at_ms,
        };
        let (to_host, mut from_engine) = tokio::sync::mpsc::unbounded_channel();
        let (to_engine, from_host) = std::sync::mpsc::channel::<Settled>();
        let cancelled = Arc::new(AtomicBool::new(false));
        // Dropping the run (or returning) stops the script at its next instruction; the
        // closed channel ends a thread waiting for a call.
        let _cancel = CancelOnDrop(Arc::clone(&cancelled));
        let counted = ThreadCount::enter(&self.threads);
        let (watch_to_host, watch_from_engine) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("code-mode".to_owned())
            .stack_size(limits.stack_bytes.saturating_add(STACK_HEADROOM))
            .spawn(move || {
                // The turn is the thread's: a run dropped, or answered for while its thread
                // is stuck, gives it up only when the thread is done.
                let _turn = turn;
                let _counted = counted;
                let _ = watch_to_host.send(ThreadWatch::current());
                worker::run(job, to_host, from_host, cancelled);
            });
        if let Err(e) = spawned {
            return ScriptRun::failed(ScriptError::Engine(format!("its thread could not start ({e})")));
        }
        // The host's watch (see `watch`), for as long as this run lasts. A limit too far off
        // to reach (`Duration::MAX`) is not watched.
        let stuck_at = limits.cpu_time.checked_add(STUCK_GRACE);
        let thread = watch_from_engine.await.ok().flatten();
        let (watching, mut stuck) = match thread.zip(stuck_at).and_then(|(t, at)| watch::watch(t, at)) {
            Some((watch, stuck)) => (Some(watch), stuck),
            None => (None, tokio::sync::oneshot::channel().1),
        };
        let mut watched = watching.is_some();

        let script_id: Arc<str> = script_id.into();
        let mut in_flight: FuturesUnordered<CallFuture<'_>> = FuturesUnordered::new();
        let mut waiting: VecDeque<Request> = VecDeque::new();
        let start = |request: Request| -> CallFuture<'_> {
            match request {
                Request::Call { id, index, arguments } => {
                    let context = ScriptCallContext::new(Arc::clone(&script_id), id);
                    Box::pin(async move {
                        let Some(tool) = tools.get(index) else {
                            return (id, Err(CallError::new(CallErrorKind::Refused, "no such tool")), Vec::new());
                        };
                        let called = AssertUnwindSafe(caller.call(tool, arguments, &context)).catch_unwind().await;
                        let result = called.unwrap_or_else(|_| {
                            Err(CallError::new(
                                CallErrorKind::Failed,
                                "the call failed (the host's tool caller panicked)",
                            ))
                        });
                        (id, result, Vec::new())
                    })
                }
                Request::Search { id, query, limit } => {
                    let context = ScriptCallContext::new(Arc::clone(&script_id), id);
                    Box::pin(async move {
                        let searched = AssertUnwindSafe(caller.search(&query, limit, &context)).catch_unwind().await;
                        match searched {
                            Ok(Ok(names)) => {
                                let (value, found) = found(tools, &names);
                                (id, Ok(value), found)
                            }
                            Ok(Err(error)) => (id, Err(error), Vec::new()),
                            Err(_) => {
                                let why = "the search failed (the host's tool caller panicked)";
                                (id, Err(CallError::new(CallErrorKind::Failed, why)), Vec::new())
                            }
                        }
                    })
                }
            }
        };
        loop {
            tokio::select! {
                // In this order: a report that came with the watch's word wins.
                biased;
                Some((id, result, unlock)) = in_flight.next(), if !in_flight.is_empty() => {
                    // The engine may have ended meanwhile; its report is on its way.
                    let _ = to_engine.send(Settled { id, result, unlock });
                    if let Some(next) = waiting.pop_front() {
                        in_flight.push(start(next));
                    }
                }
                message = from_engine.recv() => match message {
                    Some(ToHost::Request(request)) => {
                        if in_flight.len() < limits.concurrency.max(1) {
                            in_flight.push(start(request));
                        } else {
                            waiting.push_back(request);
                        }
                    }
                    Some(ToHost::Finished(run)) => return *run,
                    None => {
                        return ScriptRun::failed(ScriptError::Engine(
                            "its thread ended without a report".to_owned(),
                        ));
                    }
                },
                told = &mut stuck, if watched => match told {
                    Ok(used) => {
                        let error = ScriptError::CpuLimit { limit: limits.cpu_time };
                        return ScriptRun { cpu_time: used, ..ScriptRun::failed(error) };
                    }
                    // Its clock could no longer be read.
                    Err(_) => watched = false,
                },
            }
        }
    }
}

/// Sets the flag when dropped.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One engine thread counted while it lives.
struct ThreadCount(Arc<AtomicUsize>);

impl ThreadCount {
    fn enter(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(count))
    }
}

impl Drop for ThreadCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
