//! What one script may use. Every limit is enforced by the engine, not asked of the script.

use std::time::Duration;

/// The limits of one script run. [`Limits::default`] is what a host should start from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The engine's heap (the runtime's memory limit): every object, string and compiled
    /// function of the script, and the tool results it holds. Over it, the run stops with
    /// [`ScriptError::MemoryLimit`](crate::ScriptError::MemoryLimit).
    pub memory_bytes: usize,
    /// The engine's native stack for the script's calls (deep recursion throws a
    /// `RangeError` the script may catch).
    pub stack_bytes: usize,
    /// CPU time of the script itself: time spent waiting for tools does not count. Over it, the
    /// run stops with [`ScriptError::CpuLimit`](crate::ScriptError::CpuLimit), also when a
    /// builtin the engine cannot interrupt took it there (answered at most a second past it).
    pub cpu_time: Duration,
    /// Tool calls one script may make. The next one stops the run with
    /// [`ScriptError::CallLimit`](crate::ScriptError::CallLimit).
    pub max_calls: u32,
    /// Tool calls running at once; the script's further calls wait their turn (in the order
    /// they were made).
    pub concurrency: usize,
    /// The script's source, in bytes.
    pub max_script_bytes: usize,
    /// The JSON of one call's arguments, in bytes; a larger call fails in the script (a
    /// `ToolError` of kind `too_large`) and is not sent.
    pub max_argument_bytes: usize,
    /// The JSON of the script's return value, in bytes. Over it, the run fails with
    /// [`ScriptError::ResultTooLarge`](crate::ScriptError::ResultTooLarge) and an excerpt.
    /// Below it, the whole value comes back: fitting it into the model's budget (saving it,
    /// returning an excerpt) is the caller's part.
    pub max_result_bytes: usize,
    /// Captured `console` output, in bytes. Lines past it are dropped and counted
    /// ([`ScriptRun::logs_dropped`](crate::ScriptRun::logs_dropped)); the run goes on.
    pub max_log_bytes: usize,
    /// Scripts of one engine (and its clones) running at once, each with a thread and a heap
    /// of its own; a further run waits its turn. A gateway serves many clients from one engine.
    pub max_running: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            stack_bytes: 1 << 20,
            cpu_time: Duration::from_secs(10),
            max_calls: 100,
            concurrency: 8,
            max_script_bytes: 256 << 10,
            max_argument_bytes: 1 << 20,
            max_result_bytes: 1 << 20,
            max_log_bytes: 64 << 10,
            max_running: 4,
        }
    }
}
