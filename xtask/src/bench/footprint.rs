//! What one sequential stdio call touches, per client: instructions, and the distinct 4 KiB pages
//! of code and of data, counted by valgrind's lackey (every instruction fetch, load and store,
//! and every system call, in order). The same binaries give the same figures whatever else the
//! machine is doing.
//!
//! Why pages: a call on one CPU switches to the server and back, and a CPU without PCID (this
//! virtual machine's; `grep -w pcid /proc/cpuinfo`) empties its TLB at each switch between
//! processes, so every page a call touches costs a page walk again. Instructions alone do not
//! predict the time there.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Command;

use super::median;
use crate::Result;

/// Calls measured per client: enough for a stable median; lackey runs a program about a
/// hundred times slower and logs about half a megabyte a call.
const CALLS: usize = 300;
/// Warm-up calls before them, not counted: the first calls still touch code and memory for the
/// first time (lazy initialisation, the allocator growing); a few are enough, the rest is margin.
const WARMUP: usize = 20;

/// The medians over the measured calls.
pub(super) struct Footprint {
    /// Instructions the client executed per call.
    pub(super) instructions: f64,
    /// Distinct 4 KiB pages of code it executed.
    pub(super) code_pages: f64,
    /// Distinct 4 KiB pages of data it read or wrote.
    pub(super) data_pages: f64,
}

/// Whether valgrind can be run here.
pub(super) fn available() -> bool {
    Command::new("valgrind").arg("--version").output().is_ok_and(|out| out.status.success())
}

/// Whether this machine's CPUs tag TLB entries by process (PCID), so a switch keeps them.
pub(super) fn has_pcid() -> Option<bool> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let flags = info.lines().find(|l| l.starts_with("flags"))?;
    Some(flags.split_whitespace().any(|f| f == "pcid"))
}

/// Runs `client` (an example taking the bench arguments) under lackey against `server` and
/// measures its calls. A call runs from the client's wait for one answer to its wait for the
/// next: the first `read` or `epoll_wait` after each request's `write`, where the CPU goes to
/// the server.
pub(super) fn measure(client: &Path, server: &Path, work: &Path) -> Result<Footprint> {
    let log = work.join(format!("lackey-{}.log", client.file_name().and_then(|n| n.to_str()).unwrap_or("client")));
    let out = Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes", "--trace-syscalls=yes"])
        .arg(format!("--log-file={}", log.display()))
        .arg(client)
        .args(["-n", &CALLS.to_string(), "--warmup", &WARMUP.to_string(), "--"])
        .arg(server)
        .arg("echo")
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    if !out.status.success() {
        return Err(format!("{} under valgrind failed: {}", client.display(), String::from_utf8_lossy(&out.stderr)));
    }
    let windows = windows(&log);
    let _ = std::fs::remove_file(&log);
    let windows = windows?;
    // One window for `initialize`, one per call, then the client's end (one or two: the report's
    // write, and closing the server): a rule that stopped fitting the client would split or merge
    // calls silently.
    let expected = 1 + WARMUP + CALLS + 1..=1 + WARMUP + CALLS + 2;
    if !expected.contains(&windows.len()) {
        return Err(format!(
            "{}: lackey's log split into {} windows where {expected:?} were expected; the rule \
             that finds a call's wait no longer fits this client",
            client.display(),
            windows.len()
        ));
    }
    // Windows in which another thread ran (the request-deadline thread wakes every 10 ms, which
    // under lackey falls in every few calls) are left out: lackey does not say which thread
    // touched what.
    let measured: Vec<&Window> = windows[1 + WARMUP..1 + WARMUP + CALLS].iter().filter(|w| !w.other_thread).collect();
    if measured.len() < CALLS / 2 {
        return Err(format!(
            "{}: another thread ran in {} of {CALLS} calls, too many to leave out",
            client.display(),
            CALLS - measured.len()
        ));
    }
    let pick = |f: fn(&Window) -> usize| median(measured.iter().map(|w| f(w) as f64).collect());
    Ok(Footprint {
        instructions: pick(|w| w.instructions),
        code_pages: pick(|w| w.code_pages),
        data_pages: pick(|w| w.data_pages),
    })
}

/// What the client did between two waits for the server.
struct Window {
    /// Instructions executed.
    instructions: usize,
    /// Distinct code pages.
    code_pages: usize,
    /// Distinct data pages.
    data_pages: usize,
    /// Whether a thread (or process) other than the client's main thread made a system call in
    /// it: then some of the counts are that thread's.
    other_thread: bool,
}

/// Splits lackey's log at the client's waits for the server.
fn windows(log: &Path) -> Result<Vec<Window>> {
    let file = std::fs::File::open(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut windows = Vec::new();
    let (mut code, mut data, mut instructions) = (HashSet::new(), HashSet::new(), 0usize);
    let (mut wrote, mut other_thread) = (false, false);
    // `[pid,tid]` of the first system call: the client's main thread.
    let mut main_thread: Option<String> = None;
    // By bytes: a system call's logged arguments may hold a path that is not UTF-8.
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| format!("{}: {e}", log.display()))?;
        let line = String::from_utf8_lossy(&line);
        // `I  04022c0,3` (instruction), ` L 1ffefff8,8` / ` S` / ` M` (data),
        // `SYSCALL[pid,tid](n) sys_x ( .. )`.
        let page =
            |rest: &str| rest.split(',').next().and_then(|a| u64::from_str_radix(a.trim(), 16).ok()).map(|a| a >> 12);
        if let Some(rest) = line.strip_prefix("I ") {
            instructions += 1;
            code.extend(page(rest));
        } else if let Some(rest) = line.strip_prefix(" L ").or(line.strip_prefix(" S ")).or(line.strip_prefix(" M ")) {
            data.extend(page(rest));
        } else if let Some(rest) = line.strip_prefix("SYSCALL") {
            let thread = rest.split(']').next().unwrap_or_default();
            if main_thread.get_or_insert_with(|| thread.to_owned()) != thread {
                other_thread = true;
                continue;
            }
            // A system call that may block is logged when it starts (`sys_name ( args`) and again
            // when it returns (`... [async] --> result`): only the starts count.
            let Some(call) = rest.split_once(") ").map(|(_, call)| call) else { continue };
            if call.starts_with("sys_write ") {
                wrote = true;
            } else if wrote && (call.starts_with("sys_read ") || call.starts_with("sys_epoll_wait ")) {
                wrote = false;
                windows.push(Window { instructions, code_pages: code.len(), data_pages: data.len(), other_thread });
                (instructions, code, data, other_thread) = (0, HashSet::new(), HashSet::new(), false);
            }
        }
    }
    windows.push(Window { instructions, code_pages: code.len(), data_pages: data.len(), other_thread });
    Ok(windows)
}
