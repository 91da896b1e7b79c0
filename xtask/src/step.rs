//! Running one step's command within a time limit, so no step can hang a run.
//!
//! The command runs in a process group of its own, with its standard input from `/dev/null`
//! (a group that is not the terminal's would be stopped reading it). A guard process in that
//! group kills the whole group (`kill -KILL -- -PGID`) when the pipe xtask holds open to it
//! closes: when the step ends (what it left running goes too), when it runs past its limit, and
//! when xtask itself dies (Ctrl-C reaches only the terminal's group, which the step is not in).
//! std has no way to signal a process group, hence `sh` and `kill`.

use std::fmt;
use std::io::{BufRead, BufReader, PipeWriter, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a step's output may still arrive after its command ended, from a process that left
/// the step's group (the group itself is killed at once).
const OUTPUT_GRACE: Duration = Duration::from_secs(5);

/// How often a step that prints nothing is looked at.
const POLL: Duration = Duration::from_millis(50);

/// The guard: waits for its standard input to close, then kills its process group ($1).
const GUARD: &str = r#"read -r _; exec kill -KILL -- "-$1""#;

/// Multiplies every step's limit: `XTASK_STEP_LIMIT_SCALE=2` on a machine twice as slow.
pub(crate) const SCALE_VARIABLE: &str = "XTASK_STEP_LIMIT_SCALE";

/// `limit` scaled by [`SCALE_VARIABLE`] (when that is a positive number).
pub(crate) fn scaled(limit: Duration) -> Duration {
    let scale = std::env::var(SCALE_VARIABLE).ok().and_then(|s| s.trim().parse::<f64>().ok());
    match scale {
        Some(s) if s > 0.0 => Duration::try_from_secs_f64(limit.as_secs_f64() * s).unwrap_or(Duration::MAX),
        _ => limit,
    }
}

/// A time limit as a person reads it: `90 s`, `20 min`.
pub(crate) fn show(limit: Duration) -> String {
    let secs = limit.as_secs();
    if secs >= 120 && secs.is_multiple_of(60) { format!("{} min", secs / 60) } else { format!("{secs} s") }
}

/// Why a step did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StepError {
    /// The command could not be started.
    Start(String),
    /// It exited unsuccessfully.
    Failed(String),
    /// It ran past its limit and its process group was killed.
    TimedOut(Duration),
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::Start(e) => write!(f, "could not start: {e}"),
            StepError::Failed(status) => write!(f, "failed ({status})"),
            StepError::TimedOut(limit) => write!(f, "ran past its time limit of {}", show(*limit)),
        }
    }
}

/// How a command run by [`within`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    Exited(ExitStatus),
    /// Killed at its limit.
    TimedOut,
}

/// Runs a step: prints what runs and how it ended, as every step of xtask does.
pub(crate) fn run(step: &str, limit: Duration, cmd: &mut Command) -> Result<(), StepError> {
    let limit = scaled(limit);
    println!("\n==> {step}: {cmd:?} (time limit {})", show(limit));
    let started = Instant::now();
    let ended = within(cmd, limit, None).map_err(|e| StepError::Start(e.to_string()))?;
    let took = started.elapsed().as_secs_f64();
    match ended {
        Ended::Exited(status) => {
            println!("<== {step}: {status} in {took:.1}s");
            if status.success() { Ok(()) } else { Err(StepError::Failed(status.to_string())) }
        }
        Ended::TimedOut => {
            println!("<== {step}: ran past its time limit of {} and was stopped after {took:.1}s", show(limit));
            Err(StepError::TimedOut(limit))
        }
    }
}

/// What takes a step's output, line by line.
pub(crate) type OnLine<'a> = dyn FnMut(&[u8]) + 'a;

/// Runs `cmd` in a process group of its own for at most `limit`, then kills the group.
///
/// With `on_line`, its standard output and error go through one pipe (in the order written)
/// and each line, without its line break, is handed over as it arrives (a line longer than 1
/// MiB in pieces); otherwise they are what `cmd` says (inherited by default).
pub(crate) fn within(
    cmd: &mut Command,
    limit: Duration,
    mut on_line: Option<&mut OnLine<'_>>,
) -> std::io::Result<Ended> {
    let deadline = Instant::now() + limit;
    let lines = match on_line {
        Some(_) => {
            let (reader, writer) = std::io::pipe()?;
            cmd.stdout(writer.try_clone()?).stderr(writer);
            Some(reader)
        }
        None => None,
    };
    cmd.stdin(Stdio::null()).process_group(0);
    let spawned = cmd.spawn();
    // The command holds our copies of the pipe's write end: close them, or the reads below
    // would never end.
    cmd.stdout(Stdio::inherit()).stderr(Stdio::inherit());
    let mut child = spawned?;
    let mut guard = Some(Guard::start(&child));
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    if let Some(reader) = lines {
        std::thread::spawn(move || {
            let mut reader = BufReader::new(reader);
            loop {
                let mut line = Vec::new();
                match reader.by_ref().take(1 << 20).read_until(b'\n', &mut line) {
                    Ok(0) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        });
    } else {
        drop(tx);
    }
    let mut ended = None;
    let mut output_until = None;
    loop {
        if ended.is_none() {
            if let Some(status) = child.try_wait()? {
                ended = Some(Ended::Exited(status));
            } else if Instant::now() >= deadline {
                ended = Some(Ended::TimedOut);
            }
            if ended.is_some()
                && let Some(guard) = guard.take()
            {
                // The group goes now: what the step left behind, or all of it at the limit.
                guard.finish();
                output_until = Some(Instant::now() + OUTPUT_GRACE);
            }
        }
        if output_until.is_some_and(|until| Instant::now() >= until) {
            println!("(output of a process that left the step's process group is no longer read)");
            break;
        }
        match rx.recv_timeout(POLL) {
            Ok(mut line) => {
                if let Some(on_line) = on_line.as_mut() {
                    while line.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
                        line.pop();
                    }
                    on_line(&line);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) if ended.is_some() => break,
            // All output read; wait for the exit (or the limit) without busy looping.
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(POLL),
        }
    }
    let ended = ended.unwrap_or(Ended::TimedOut);
    if ended == Ended::TimedOut {
        // Killed with its group: reap it.
        let _ = child.wait();
    }
    Ok(ended)
}

/// A server a step runs in the background while it runs its clients: in a process group of its
/// own, killed with everything it started when dropped, and (through its guard) when xtask dies.
/// Its standard input is a pipe held open until then (a server may read its end as "stop").
pub(crate) struct Background {
    child: Child,
    guard: Option<Guard>,
}

impl Background {
    /// Starts `cmd` (its output is what `cmd` says).
    pub(crate) fn start(cmd: &mut Command) -> std::io::Result<Background> {
        let child = cmd.stdin(Stdio::piped()).process_group(0).spawn()?;
        let guard = Some(Guard::start(&child));
        Ok(Background { child, guard })
    }

    /// How it ended, when it has.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        drop(self.guard.take());
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The process in the step's group that kills the group when its pipe closes.
struct Guard {
    /// Dropped (closed) to kill the group.
    pipe: Option<PipeWriter>,
    process: Option<Child>,
    /// The step's group, for the fallback when the guard could not start.
    group: u32,
}

impl Guard {
    fn start(step: &Child) -> Guard {
        let group = step.id();
        let started = std::io::pipe().and_then(|(reader, writer)| {
            let process = Command::new("sh")
                .args(["-c", GUARD, "xtask-step-guard", &group.to_string()])
                .process_group(i32::try_from(group).unwrap_or(0))
                .stdin(reader)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            Ok((writer, process))
        });
        match started {
            Ok((pipe, process)) => Guard { pipe: Some(pipe), process: Some(process), group },
            Err(e) => {
                println!("(no guard for the step's process group: {e}; it is killed only at its end)");
                Guard { pipe: None, process: None, group }
            }
        }
    }

    /// Kills the step's process group and waits until that is done.
    fn finish(self) {
        drop(self);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        drop(self.pipe.take());
        match self.process.take() {
            Some(mut guard) => {
                let _ = guard.wait();
            }
            None => {
                let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.group)]).status();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Whether process `pid` still exists (a zombie counts as gone).
    fn alive(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit(") ").next().is_some_and(|rest| !rest.starts_with('Z')))
    }

    #[test]
    fn a_step_past_its_limit_is_stopped_with_everything_it_started() {
        let dir = std::env::temp_dir().join(format!("xtask-step-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("grandchild");
        // A grandchild in the background, and the step itself hanging.
        let script = format!("sleep 300 & echo $! > {}; echo started; sleep 300", pid_file.display());
        let mut lines = Vec::new();
        let mut on_line = |line: &[u8]| lines.push(String::from_utf8_lossy(line).into_owned());
        let started = Instant::now();
        let ended = within(Command::new("sh").args(["-c", &script]), Duration::from_secs(3), Some(&mut on_line));
        assert_eq!(ended.unwrap(), Ended::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(20), "stopped at the limit: {:?}", started.elapsed());
        assert_eq!(lines, ["started"]);
        let grandchild = std::fs::read_to_string(&pid_file).unwrap();
        let gone = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            !alive(grandchild.trim())
        });
        assert!(gone, "the step's background process {} was killed with its group", grandchild.trim());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_step_within_its_limit_reports_its_exit_and_all_its_output() {
        let mut lines = Vec::new();
        let mut on_line = |line: &[u8]| lines.push(String::from_utf8_lossy(line).into_owned());
        let ended = within(
            Command::new("sh").args(["-c", "echo one; echo two >&2; exit 3"]),
            Duration::from_secs(60),
            Some(&mut on_line),
        )
        .unwrap();
        assert!(matches!(ended, Ended::Exited(s) if s.code() == Some(3)), "{ended:?}");
        assert_eq!(lines, ["one", "two"]);
    }

    #[test]
    fn the_error_names_the_limit() {
        let err = run("hang", Duration::from_secs(1), Command::new("sleep").arg("300")).unwrap_err();
        assert_eq!(err, StepError::TimedOut(scaled(Duration::from_secs(1))));
        assert_eq!(StepError::TimedOut(Duration::from_secs(1)).to_string(), "ran past its time limit of 1 s");
        assert_eq!(show(Duration::from_secs(1200)), "20 min");
        assert_eq!(show(Duration::from_secs(90)), "90 s");
    }
}
