//! What one sequential stdio call touches, per client: instructions, and the distinct 4 KiB pages
//! of code and of data, counted by valgrind's lackey (every instruction fetch, load and store,
//! and every system call, in order). Deterministic: the same binaries give the same figures
//! whatever else the machine is doing.
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

/// Calls measured per client (lackey runs a program about a hundred times slower, and logs
/// about half a megabyte a call).
const CALLS: usize = 300;
/// Warm-up calls before them (the first touch of everything; not counted).
const WARMUP: usize = 20;
/// Calls left out at each end of the measured ones (the client's start and end).
const EDGE: usize = 40;

/// The medians over the measured calls.
pub(super) struct Footprint {
    pub(super) instructions: f64,
    pub(super) code_pages: f64,
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
    let calls = calls(&log);
    let _ = std::fs::remove_file(&log);
    let calls = calls?;
    let measured = calls.get(WARMUP + EDGE..calls.len().saturating_sub(EDGE)).unwrap_or_default();
    if measured.is_empty() {
        return Err(format!("{}: only {} calls found in lackey's log", client.display(), calls.len()));
    }
    let pick = |f: fn(&Call) -> usize| median(measured.iter().map(|c| f(c) as f64).collect());
    Ok(Footprint {
        instructions: pick(|c| c.instructions),
        code_pages: pick(|c| c.code_pages),
        data_pages: pick(|c| c.data_pages),
    })
}

/// One call's counts.
struct Call {
    instructions: usize,
    code_pages: usize,
    data_pages: usize,
}

/// Splits lackey's log into calls.
fn calls(log: &Path) -> Result<Vec<Call>> {
    let file = std::fs::File::open(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut calls = Vec::new();
    let (mut code, mut data, mut instructions) = (HashSet::new(), HashSet::new(), 0usize);
    let mut wrote = false;
    // By bytes: a system call's logged arguments may hold a path that is not UTF-8.
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| format!("{}: {e}", log.display()))?;
        let line = String::from_utf8_lossy(&line);
        // `I  04022c0,3` (instruction), ` L 1ffefff8,8` / ` S` / ` M` (data), `SYSCALL[..](n) sys_x ( .. )`.
        let page =
            |rest: &str| rest.split(',').next().and_then(|a| u64::from_str_radix(a.trim(), 16).ok()).map(|a| a >> 12);
        if let Some(rest) = line.strip_prefix("I ") {
            instructions += 1;
            code.extend(page(rest));
        } else if let Some(rest) = line.strip_prefix(" L ").or(line.strip_prefix(" S ")).or(line.strip_prefix(" M ")) {
            data.extend(page(rest));
        } else if line.starts_with("SYSCALL") {
            // Each system call is logged when it starts (`sys_name ( args`) and, when it blocks,
            // again when it returns (`... [async] --> result`): only the starts count.
            let Some(call) = line.split_once(") ").map(|(_, rest)| rest) else { continue };
            if call.starts_with("sys_write ") {
                wrote = true;
            } else if wrote && (call.starts_with("sys_read ") || call.starts_with("sys_epoll_wait ")) {
                wrote = false;
                calls.push(Call { instructions, code_pages: code.len(), data_pages: data.len() });
                (instructions, code, data) = (0, HashSet::new(), HashSet::new());
            }
        }
    }
    Ok(calls)
}
