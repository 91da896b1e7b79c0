//! The engine thread: one QuickJS runtime per script, driven until the script's promise
//! settles, its tool calls handed to the host over channels.
//!
//! The thread blocks only in one place, waiting for the host to settle a call; the CPU
//! limit's clock does not run there. Everything else it does is the script's work, and the
//! interrupt handler stops it when the run is cancelled, over its CPU time, or past its calls.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;

use mcp_safety::text;
use rquickjs::context::EvalOptions;
use rquickjs::context::intrinsic::{
    Date, Eval, Json, MapSet, Promise as PromiseIntrinsic, Proxy, RegExp, RegExpCompiler, TypedArrays, WeakRef,
};
use rquickjs::function::Opt;
use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Exception, Function, Object, Persistent, Promise, Runtime};
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;

use crate::clock::CpuClock;
use crate::limits::Limits;
use crate::outcome::{ScriptError, ScriptException, ScriptRun};
use crate::port::{CallError, CallErrorKind};

/// The prelude (see the file): hardens the context, builds `tools` and `console`.
const PRELUDE: &str = include_str!("prelude.js");
/// The script runs as the body of an async function; `return` gives its value. The opening
/// shares the script's first line, so line numbers are the script's own (columns of line 1
/// are shifted back by its length).
const OPEN: &str = "(async () => {";
const CLOSE: &str = "\n})()";
/// The file name the script's stack frames carry.
const SCRIPT_FILE: &str = "script.js";
/// How long a cleaned message may be (an exception, a tool's failure).
const MESSAGE_CAP: usize = 2000;

/// What the engine thread is given.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) script: String,
    pub(crate) manifest: Arc<str>,
    /// Which tools the script may call from its start (the rest wait behind search).
    pub(crate) reachable: Vec<bool>,
    /// Whether `tools.search` is offered.
    pub(crate) search: bool,
    pub(crate) limits: Limits,
    /// The script's frozen clock, in milliseconds since the epoch.
    pub(crate) started_at_ms: f64,
}

/// From the engine thread to the host.
#[derive(Debug)]
pub(crate) enum ToHost {
    /// A call of the script's, for the host to make.
    Request(Request),
    /// The run is over.
    Finished(Box<ScriptRun>),
}

/// A call of the script's (`id`, from 1, counted together).
#[derive(Debug)]
pub(crate) enum Request {
    /// The script called tool `index`.
    Call { id: u32, index: usize, arguments: Map<String, Value> },
    /// The script searched the tools (`tools.search`).
    Search { id: u32, query: String, limit: Option<usize> },
}

/// From the host to the engine thread: call `id` is over.
#[derive(Debug)]
pub(crate) struct Settled {
    pub(crate) id: u32,
    pub(crate) result: Result<Value, CallError>,
    /// The tools it made callable (a search's finds).
    pub(crate) unlock: Vec<usize>,
}

/// Why the interrupt handler stopped the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Cancelled,
    Cpu,
    Calls,
}

/// What the host functions and the interrupt handler share with the driver.
#[derive(Debug, Default)]
struct State {
    calls: Cell<u32>,
    in_flight: Cell<u32>,
    stop: Cell<Option<Stop>>,
    /// The script's promise settled: no more calls.
    finished: Cell<bool>,
    /// Which tools the script may call now: those given at its start and those its searches
    /// found.
    reachable: RefCell<Vec<bool>>,
    logs: RefCell<Logs>,
}

impl State {
    /// Whether the script is to stop: stopped already, or now over its CPU time `limit`.
    fn stopped_by_clock(&self, clock: &CpuClock, limit: std::time::Duration) -> bool {
        if self.stop.get().is_none() && clock.elapsed() > limit {
            self.stop.set(Some(Stop::Cpu));
        }
        self.stop.get().is_some()
    }
}

/// Captured console entries within the log limit.
#[derive(Debug, Default)]
struct Logs {
    lines: Vec<String>,
    bytes: usize,
    dropped: Option<(usize, usize)>,
}

impl Logs {
    /// Keeps `line` (cleaned) while within `max` bytes; the entry that crosses it is cut, and
    /// every later one dropped and counted, so what is kept has no gaps.
    fn push(&mut self, level: &str, line: &str, max: usize) {
        let entry = match level {
            "log" => text::terminal_safe(line),
            level => text::terminal_safe(&format!("{level}: {line}")),
        };
        if let Some((entries, bytes)) = &mut self.dropped {
            *entries += 1;
            *bytes += entry.len();
            return;
        }
        let room = max.saturating_sub(self.bytes);
        if entry.len() <= room {
            self.bytes += entry.len();
            self.lines.push(entry);
            return;
        }
        let kept = text::prefix(&entry, room.saturating_sub(text::ELLIPSIS.len_utf8()));
        self.bytes = max;
        if kept.is_empty() {
            self.dropped = Some((1, entry.len()));
        } else {
            self.lines.push(format!("{kept}{}", text::ELLIPSIS));
            self.dropped = Some((0, entry.len() - kept.len()));
        }
    }
}

/// Runs `job` to its end on this thread and reports to the host.
pub(crate) fn run(
    job: Job,
    to_host: UnboundedSender<ToHost>,
    from_host: Receiver<Settled>,
    cancelled: Arc<AtomicBool>,
) {
    execute(&job, &to_host, &from_host, cancelled);
}

/// Runs the script and reports before its engine is torn down: freeing a large heap takes
/// time (and CPU time the host's watch would count) the answer need not wait for.
fn execute(job: &Job, to_host: &UnboundedSender<ToHost>, from_host: &Receiver<Settled>, cancelled: Arc<AtomicBool>) {
    let finish = |run: ScriptRun| {
        let _ = to_host.send(ToHost::Finished(Box::new(run)));
    };
    let runtime = match Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            return finish(ScriptRun::failed(ScriptError::Engine(format!("the runtime could not be made ({e})"))));
        }
    };
    runtime.set_memory_limit(job.limits.memory_bytes);
    runtime.set_max_stack_size(job.limits.stack_bytes);
    let state = Rc::new(State { reachable: RefCell::new(job.reachable.clone()), ..State::default() });
    let clock = Rc::new(CpuClock::start());
    runtime.set_interrupt_handler(Some(Box::new({
        let state = Rc::clone(&state);
        let clock = Rc::clone(&clock);
        let limit = job.limits.cpu_time;
        move || {
            if cancelled.load(Ordering::Relaxed) {
                state.stop.set(Some(Stop::Cancelled));
            }
            state.stopped_by_clock(&clock, limit)
        }
    })));
    // No Performance (a clock) and no module loader; Eval stays because evaluating anything
    // at all goes through it (the prelude removes the script's `eval`).
    let context = Context::builder()
        .with::<(Date, Eval, RegExpCompiler, RegExp, Json, Proxy, MapSet, TypedArrays, PromiseIntrinsic, WeakRef)>()
        .build(&runtime);
    let result = match &context {
        Ok(context) => {
            let driver = Driver { runtime: &runtime, context, job, state: &state, clock: &clock };
            driver.drive(to_host, from_host)
        }
        Err(e) => Err(memory_or(&job.limits, &runtime, format!("the context could not be made ({e})"))),
    };
    // A builtin the interrupt never stopped may have run the script far past its limit: what
    // it made is not rewarded.
    let result = match result {
        Ok(_) if clock.elapsed() > job.limits.cpu_time => Err(ScriptError::CpuLimit { limit: job.limits.cpu_time }),
        result => result,
    };
    let logs = state.logs.take();
    finish(ScriptRun {
        result,
        logs: logs.lines,
        logs_dropped: logs.dropped,
        calls: state.calls.get().min(job.limits.max_calls),
        cpu_time: clock.elapsed(),
    });
}

/// Drives one script. The runtime's own calls (running jobs, reading its memory use) are made
/// outside the context's lock, so what lives across them is kept as `Persistent`s.
struct Driver<'a> {
    runtime: &'a Runtime,
    context: &'a Context,
    job: &'a Job,
    state: &'a Rc<State>,
    clock: &'a Rc<CpuClock>,
}

impl Driver<'_> {
    fn drive(
        &self,
        to_host: &UnboundedSender<ToHost>,
        from_host: &Receiver<Settled>,
    ) -> Result<Option<Value>, ScriptError> {
        let (settle, serialize, promise) = self.context.with(|ctx| {
            let started = self.start(&ctx, to_host).map_err(|e| self.failure(&ctx, e))?;
            let (settle, serialize, promise) = started;
            Ok::<_, ScriptError>((
                Persistent::save(&ctx, settle),
                Persistent::save(&ctx, serialize),
                Persistent::save(&ctx, promise),
            ))
        })?;
        loop {
            loop {
                match self.runtime.execute_pending_job() {
                    Ok(true) => {}
                    Ok(false) => break,
                    // A job ends in an exception only when it was interrupted or ran out of
                    // memory: anything the script throws rejects a promise instead.
                    Err(job) => return Err(job.0.with(|ctx| self.failure(&ctx, rquickjs::Error::Exception))),
                }
            }
            if let Some(stop) = self.state.stop.get() {
                return Err(self.stopped(stop));
            }
            let settled = self.context.with(|ctx| {
                let promise = promise.clone().restore(&ctx).map_err(|e| self.failure(&ctx, e))?;
                match promise.state() {
                    PromiseState::Pending => Ok(None),
                    PromiseState::Resolved => {
                        self.state.finished.set(true);
                        let value = match promise.result::<rquickjs::Value<'_>>() {
                            Some(Ok(value)) => value,
                            Some(Err(e)) => return Err(self.failure(&ctx, e)),
                            None => rquickjs::Value::new_undefined(ctx.clone()),
                        };
                        let serialize = serialize.clone().restore(&ctx).map_err(|e| self.failure(&ctx, e))?;
                        self.returned(&ctx, &serialize, value).map(Some)
                    }
                    PromiseState::Rejected => {
                        self.state.finished.set(true);
                        let value = match promise.result::<rquickjs::Value<'_>>() {
                            Some(Err(rquickjs::Error::Exception)) => ctx.catch(),
                            Some(Ok(value)) => value,
                            Some(Err(e)) => return Err(self.failure(&ctx, e)),
                            None => rquickjs::Value::new_undefined(ctx.clone()),
                        };
                        Err(self.thrown(&ctx, value))
                    }
                }
            })?;
            if let Some(value) = settled {
                return Ok(value);
            }
            if self.state.in_flight.get() == 0 {
                return Err(ScriptError::Stalled);
            }
            let Ok(answer) = self.clock.waiting(|| from_host.recv()) else {
                return Err(self.stopped(Stop::Cancelled));
            };
            self.context.with(|ctx| {
                let settled = settle.clone().restore(&ctx).and_then(|settle| self.settle(&ctx, &settle, answer));
                settled.map_err(|e| self.failure(&ctx, e))
            })?;
        }
    }

    /// Runs the prelude and evaluates the script: its hooks and the script's promise.
    fn start<'js>(
        &self,
        ctx: &Ctx<'js>,
        to_host: &UnboundedSender<ToHost>,
    ) -> rquickjs::Result<(Function<'js>, Function<'js>, Promise<'js>)> {
        let hooks = self.prelude(ctx, to_host)?;
        let settle: Function<'js> = hooks.get("settle")?;
        let serialize: Function<'js> = hooks.get("serialize")?;
        let source = format!("{OPEN}{}{CLOSE}", self.job.script);
        let promise: Promise<'js> = ctx.eval_with_options(source, options(SCRIPT_FILE))?;
        Ok((settle, serialize, promise))
    }

    /// Runs the prelude with the host functions; gives its hooks (`settle`, `serialize`).
    fn prelude<'js>(&self, ctx: &Ctx<'js>, to_host: &UnboundedSender<ToHost>) -> rquickjs::Result<Object<'js>> {
        let prelude: Function<'js> = ctx.eval_with_options(PRELUDE, options("prelude.js"))?;
        let host_call = Function::new(ctx.clone(), {
            let state = Rc::clone(self.state);
            let to_host = to_host.clone();
            let limits = self.job.limits.clone();
            move |ctx: Ctx<'js>, index: u32, args: Opt<rquickjs::Value<'js>>| {
                host_call(&ctx, &state, &to_host, &limits, index, args.0)
            }
        })?;
        let host_search = Function::new(ctx.clone(), {
            let state = Rc::clone(self.state);
            let to_host = to_host.clone();
            let limits = self.job.limits.clone();
            let offered = self.job.search;
            move |ctx: Ctx<'js>, query: Opt<rquickjs::Value<'js>>, limit: Opt<rquickjs::Value<'js>>| {
                host_search(&ctx, &state, &to_host, &limits, offered, query.0, limit.0)
            }
        })?;
        let host_log = Function::new(ctx.clone(), {
            let state = Rc::clone(self.state);
            let max = self.job.limits.max_log_bytes;
            move |level: String, line: String| state.logs.borrow_mut().push(&level, &line, max)
        })?;
        let manifest = ctx.json_parse(&*self.job.manifest)?;
        let log_limit = u32::try_from(self.job.limits.max_log_bytes.saturating_add(1)).unwrap_or(u32::MAX);
        // A dense array's element takes 16 bytes of the heap: a longer `length` describes no
        // array the script can hold (and at most 2^24, a native loop of a few seconds).
        let max_array_length = u32::try_from((self.job.limits.memory_bytes / 16).min(1 << 24)).unwrap_or(1 << 24);
        // The interrupt handler is asked every ten thousand instructions or so: a prelude loop
        // whose steps are long native calls asks the clock itself after each one.
        let over_time = Function::new(ctx.clone(), {
            let state = Rc::clone(self.state);
            let clock = Rc::clone(self.clock);
            let limit = self.job.limits.cpu_time;
            move || state.stopped_by_clock(&clock, limit)
        })?;
        let bounds = Object::new(ctx.clone())?;
        bounds.set("logLimit", log_limit)?;
        bounds.set("maxArrayLength", max_array_length)?;
        bounds.set("overTime", over_time)?;
        prelude.call((host_call, host_search, self.job.search, host_log, manifest, self.job.started_at_ms, bounds))
    }

    /// Hands the host's answer to call `id` to the script.
    fn settle<'js>(&self, ctx: &Ctx<'js>, settle: &Function<'js>, settled: Settled) -> rquickjs::Result<()> {
        self.state.in_flight.set(self.state.in_flight.get().saturating_sub(1));
        let Settled { id, result, unlock } = settled;
        {
            let mut reachable = self.state.reachable.borrow_mut();
            for index in unlock {
                if let Some(slot) = reachable.get_mut(index) {
                    *slot = true;
                }
            }
        }
        match result {
            Ok(value) => {
                let json = value.to_string();
                match ctx.json_parse(json.as_str()) {
                    Ok(value) => settle.call((id, true, value)),
                    Err(e) => {
                        if self.state.stop.get().is_some() {
                            return Err(e);
                        }
                        let _ = ctx.catch();
                        let message = format!(
                            "its result ({} bytes of JSON) does not fit in the script's memory ({} bytes)",
                            json.len(),
                            self.job.limits.memory_bytes
                        );
                        drop(json);
                        settle.call((id, false, failure(ctx, CallErrorKind::TooLarge, &message)?))
                    }
                }
            }
            Err(error) => {
                let message = text::one_line(&error.message, MESSAGE_CAP);
                settle.call((id, false, failure(ctx, error.kind, &message)?))
            }
        }
    }

    /// The script's value, as JSON within the result limit.
    fn returned<'js>(
        &self,
        ctx: &Ctx<'js>,
        serialize: &Function<'js>,
        value: rquickjs::Value<'js>,
    ) -> Result<Option<Value>, ScriptError> {
        let limit = self.job.limits.max_result_bytes;
        let serialized: rquickjs::Value<'js> = match serialize.call((value, limit)) {
            Ok(serialized) => serialized,
            Err(rquickjs::Error::Exception) if self.state.stop.get().is_none() => {
                let thrown = ctx.catch();
                if is_out_of_memory(&thrown) {
                    return Err(ScriptError::MemoryLimit { limit: self.job.limits.memory_bytes });
                }
                let why = self.thrown_text(ctx, thrown).message;
                return Err(match self.state.stop.get() {
                    Some(stop) => self.stopped(stop),
                    None => ScriptError::NotJson(why),
                });
            }
            Err(e) => return Err(self.failure(ctx, e)),
        };
        if serialized.is_undefined() {
            return Ok(None);
        }
        if let Some(over) = serialized.as_array() {
            let units: usize = over.get(0).unwrap_or(0);
            let beginning: String = over.get(1).unwrap_or_default();
            return Err(ScriptError::ResultTooLarge { bytes: units, limit, excerpt: excerpt(&beginning) });
        }
        let json: String = serialized.get().map_err(|e| self.failure(ctx, e))?;
        if json.len() > limit {
            return Err(ScriptError::ResultTooLarge { bytes: json.len(), limit, excerpt: excerpt(&json) });
        }
        serde_json::from_str(&json).map(Some).map_err(|e| ScriptError::NotJson(e.to_string()))
    }

    /// What an error of the engine means: the interrupt's reason, the memory limit, an
    /// exception the script threw, or the engine's own failure.
    fn failure(&self, ctx: &Ctx<'_>, error: rquickjs::Error) -> ScriptError {
        if let Some(stop) = self.state.stop.get() {
            return self.stopped(stop);
        }
        match error {
            rquickjs::Error::Exception => {
                let thrown = ctx.catch();
                self.thrown(ctx, thrown)
            }
            rquickjs::Error::Allocation => ScriptError::MemoryLimit { limit: self.job.limits.memory_bytes },
            other => ScriptError::Engine(text::one_line(&other.to_string(), MESSAGE_CAP)),
        }
    }

    fn stopped(&self, stop: Stop) -> ScriptError {
        match stop {
            Stop::Cpu => ScriptError::CpuLimit { limit: self.job.limits.cpu_time },
            Stop::Calls => ScriptError::CallLimit { limit: self.job.limits.max_calls },
            Stop::Cancelled => ScriptError::Engine("the run was cancelled".to_owned()),
        }
    }

    fn thrown<'js>(&self, ctx: &Ctx<'js>, value: rquickjs::Value<'js>) -> ScriptError {
        if is_out_of_memory(&value) {
            return ScriptError::MemoryLimit { limit: self.job.limits.memory_bytes };
        }
        let exception = self.thrown_text(ctx, value);
        // Reading the thrown value runs its getters: they may be what used the CPU time.
        match self.state.stop.get() {
            Some(stop) => self.stopped(stop),
            None => ScriptError::Exception(exception),
        }
    }

    /// A thrown value as text, with where it was thrown when it carries a stack.
    fn thrown_text<'js>(&self, ctx: &Ctx<'js>, value: rquickjs::Value<'js>) -> ScriptException {
        let (message, location) = match value.as_object() {
            Some(object) => {
                let name = string_property(object, "name");
                let message = string_property(object, "message");
                let location = string_property(object, "stack").as_deref().and_then(location);
                let message = match (name, message) {
                    (Some(name), Some(message)) if !message.is_empty() => format!("{name}: {message}"),
                    (Some(name), _) => name,
                    (None, Some(message)) => message,
                    (None, None) => match ctx.json_stringify(object.clone()) {
                        Ok(Some(json)) => json.to_string().unwrap_or_default(),
                        _ => "an object".to_owned(),
                    },
                };
                (message, location)
            }
            None => (coerce(ctx, value), None),
        };
        ScriptException {
            message: text::one_line(&message, MESSAGE_CAP),
            line: location.map(|(line, _)| line),
            column: location.map(|(_, column)| column),
        }
    }
}

/// The host function behind every tool: counts the call, checks and copies its arguments,
/// and hands it to the host. Gives the call's id, or a failure `{kind, message}` for the
/// prelude to reject with.
fn host_call<'js>(
    ctx: &Ctx<'js>,
    state: &State,
    to_host: &UnboundedSender<ToHost>,
    limits: &Limits,
    index: u32,
    args: Option<rquickjs::Value<'js>>,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    let id = next_call(ctx, state, limits)?;
    let index = usize::try_from(index).unwrap_or(usize::MAX);
    // A tool behind search is callable only once a search of this script found it.
    if !state.reachable.borrow().get(index).copied().unwrap_or(false) {
        return Err(Exception::throw_type(ctx, "no such tool"));
    }
    let arguments = match args {
        None => Map::new(),
        Some(args) if args.is_undefined() || args.is_null() => Map::new(),
        Some(args) if !args.is_object() || args.is_array() || args.is_function() => {
            let message = "the arguments must be an object, like { path: \"notes.txt\" }";
            return Ok(failure(ctx, CallErrorKind::BadArguments, message)?.into_value());
        }
        Some(args) => {
            let json = match ctx.json_stringify(args)? {
                Some(json) => json.to_string()?,
                None => "{}".to_owned(),
            };
            if json.len() > limits.max_argument_bytes {
                let message = format!(
                    "the arguments are {} bytes of JSON, over the limit of {}; nothing was sent",
                    json.len(),
                    limits.max_argument_bytes
                );
                return Ok(failure(ctx, CallErrorKind::TooLarge, &message)?.into_value());
            }
            match serde_json::from_str(&json) {
                Ok(arguments) => arguments,
                Err(e) => {
                    let message = format!("the arguments are not a JSON object ({e})");
                    return Ok(failure(ctx, CallErrorKind::BadArguments, &message)?.into_value());
                }
            }
        }
    };
    dispatch(ctx, state, to_host, Request::Call { id, index, arguments }, id)
}

/// The host function behind `tools.search(query, limit)`: counted as a call, its arguments
/// checked, handed to the host. Gives the call's id, or a failure `{kind, message}`.
fn host_search<'js>(
    ctx: &Ctx<'js>,
    state: &State,
    to_host: &UnboundedSender<ToHost>,
    limits: &Limits,
    offered: bool,
    query: Option<rquickjs::Value<'js>>,
    limit: Option<rquickjs::Value<'js>>,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    if !offered {
        return Ok(failure(ctx, CallErrorKind::Refused, NO_SEARCH)?.into_value());
    }
    let id = next_call(ctx, state, limits)?;
    let Some(query) = query.and_then(|q| q.as_string().and_then(|q| q.to_string().ok())) else {
        let message = "the query must be a string, like tools.search(\"create a calendar event\")";
        return Ok(failure(ctx, CallErrorKind::BadArguments, message)?.into_value());
    };
    if query.len() > limits.max_argument_bytes {
        let message = format!("the query is {} bytes, over the limit of {}", query.len(), limits.max_argument_bytes);
        return Ok(failure(ctx, CallErrorKind::TooLarge, &message)?.into_value());
    }
    let limit = match limit {
        None => None,
        Some(limit) if limit.is_undefined() || limit.is_null() => None,
        Some(limit) => match limit.as_number() {
            Some(n) if n.is_finite() && n >= 1.0 => Some(n as usize),
            _ => {
                let message = "the limit must be a number of 1 or more, like tools.search(\"query\", 3)";
                return Ok(failure(ctx, CallErrorKind::BadArguments, message)?.into_value());
            }
        },
    };
    dispatch(ctx, state, to_host, Request::Search { id, query, limit }, id)
}

/// The id the script's next call (or search) gets, unless the script has ended or used up
/// its calls; both count against `max_calls` alike.
fn next_call(ctx: &Ctx<'_>, state: &State, limits: &Limits) -> rquickjs::Result<u32> {
    if state.finished.get() {
        return Err(Exception::throw_message(ctx, "tool calls cannot be made after the script has ended"));
    }
    let id = state.calls.get() + 1;
    if id > limits.max_calls {
        state.stop.set(Some(Stop::Calls));
        return Err(Exception::throw_internal(ctx, "too many tool calls"));
    }
    Ok(id)
}

/// Hands `request` (call `id`, from [`next_call`]) to the host and counts it in flight; gives
/// the id the prelude waits on.
fn dispatch<'js>(
    ctx: &Ctx<'js>,
    state: &State,
    to_host: &UnboundedSender<ToHost>,
    request: Request,
    id: u32,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    if to_host.send(ToHost::Request(request)).is_err() {
        state.stop.set(Some(Stop::Cancelled));
        return Err(Exception::throw_internal(ctx, "the run was cancelled"));
    }
    state.calls.set(id);
    state.in_flight.set(state.in_flight.get() + 1);
    Ok(rquickjs::Value::new_int(ctx.clone(), i32::try_from(id).unwrap_or(i32::MAX)))
}

/// Why `tools.search` is refused where the host offers no search.
const NO_SEARCH: &str = "tool search is off here: every tool this script may call is already in `tools` (see the \
                         declarations)";

/// A failure as the prelude takes it: `{kind, message}`.
fn failure<'js>(ctx: &Ctx<'js>, kind: CallErrorKind, message: &str) -> rquickjs::Result<Object<'js>> {
    let object = Object::new(ctx.clone())?;
    object.set("kind", kind.as_str())?;
    object.set("message", message)?;
    Ok(object)
}

fn options(file: &str) -> EvalOptions {
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = false;
    options.filename = Some(file.to_owned());
    options
}

/// The engine reports an allocation it could not make as `InternalError: out of memory`, or,
/// when even that error could not be made, as a thrown `null`.
fn is_out_of_memory(value: &rquickjs::Value<'_>) -> bool {
    if value.is_null() {
        return true;
    }
    value.as_object().is_some_and(|object| {
        string_property(object, "name").as_deref() == Some("InternalError")
            && string_property(object, "message").as_deref() == Some("out of memory")
    })
}

/// An error of the engine outside the script: the memory limit when the runtime is at it.
fn memory_or(limits: &Limits, runtime: &Runtime, message: String) -> ScriptError {
    let used = usize::try_from(runtime.memory_usage().malloc_size).unwrap_or(usize::MAX);
    if used.saturating_add(64 << 10) >= limits.memory_bytes {
        ScriptError::MemoryLimit { limit: limits.memory_bytes }
    } else {
        ScriptError::Engine(text::one_line(&message, MESSAGE_CAP))
    }
}

/// A property read as text (a getter may run; the interrupt handler still bounds it).
fn string_property(object: &Object<'_>, key: &str) -> Option<String> {
    match object.get::<_, rquickjs::Value<'_>>(key) {
        Ok(value) if value.is_string() => value.get::<String>().ok(),
        _ => None,
    }
}

/// Any value as text, as `String(value)` would give it.
fn coerce<'js>(ctx: &Ctx<'js>, value: rquickjs::Value<'js>) -> String {
    match value.get::<rquickjs::convert::Coerced<String>>() {
        Ok(text) => text.0,
        Err(_) => {
            let _ = ctx.catch();
            "a value that cannot be shown".to_owned()
        }
    }
}

/// The beginning of oversize JSON, cleaned.
fn excerpt(json: &str) -> String {
    text::one_line(json, 200)
}

/// The script's (line, column) in a stack trace: its first frame in the script's file
/// (`    at f (script.js:3:7)` or `    at script.js:3:7`).
pub(crate) fn location(stack: &str) -> Option<(u32, u32)> {
    stack.lines().find_map(|frame| {
        let frame = frame.trim().strip_prefix("at ")?;
        let place = match frame.strip_suffix(')') {
            Some(inner) => inner.rsplit_once('(')?.1,
            None => frame,
        };
        let (rest, column) = place.rsplit_once(':')?;
        let (file, line) = rest.rsplit_once(':')?;
        if file != SCRIPT_FILE {
            return None;
        }
        let line: u32 = line.parse().ok()?;
        let mut column: u32 = column.parse().ok()?;
        if line == 1 {
            column = column.saturating_sub(u32::try_from(OPEN.len()).unwrap_or(0)).max(1);
        }
        Some((line, column))
    })
}
