//! The audit log: one JSON line for every `tools/call` the gateway decides, and for every call
//! a client's script makes (code mode; `parent` names the client's call): when, who (the
//! caller's principal and profile, the session, the client), which tool, the decision and the
//! rule that made it, how long it took, how it ended, and a digest of its arguments (their
//! values only when configured).
//!
//! [`AuditSink`] is the **port** (a replica could send lines elsewhere); [`AuditLog`] writes a
//! file, created 0600, rotated by size.

use std::fmt;
use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_loop::{Admission, CallDecision, Refusal};
use mcp_protocol::{CallToolRequestParams, RequestId, RequestMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::backend::Caller;
use crate::gateway::{Era, Gateway, Reply, Scope};
use crate::session::{Outbound, lock};

/// What the audit log keeps of a call's arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum AuditArguments {
    /// A SHA-256 of their canonical JSON (keys sorted) only: the same arguments give the same
    /// digest, and nothing of their values is written.
    #[default]
    Digest,
    /// The digest and the values themselves (they may hold secrets: the log is 0600).
    Values,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditOutcome {
    /// It ran and the tool answered.
    Ok,
    /// It ran, or was refused, and the caller got an error result.
    ToolError,
    /// The caller got a JSON-RPC error (an unknown tool, a refused approval state).
    Error,
    /// It did not run yet: it waits for an approval asked of the person (`input_required`).
    Pending,
}

/// One audit line.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct AuditRecord {
    /// When the call was decided (RFC 3339, UTC, milliseconds).
    pub time: String,
    /// The authenticated principal, `None` for a local caller.
    pub caller: Option<String>,
    /// The profile it was served in.
    pub profile: Option<String>,
    /// A short digest of the session's id (never the id itself), for session clients.
    pub session: Option<String>,
    /// The client's name as it gave it (cleaned).
    pub client: String,
    /// The tool's name as the caller sent it (cleaned, capped).
    pub tool: String,
    /// The decision.
    pub decision: CallDecision,
    /// The rule, approval or refusal that made it.
    pub rule: String,
    /// From the request to its answer, in milliseconds.
    pub duration_ms: u64,
    /// How it ended.
    pub outcome: AuditOutcome,
    /// SHA-256 of the arguments' canonical JSON, hex.
    pub arguments_sha256: String,
    /// The arguments, when the log is configured to keep them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// For a call a script made (code mode's `run_code`), the id of the client's call that
    /// ran the script.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// Where audit lines go.
pub trait AuditSink: fmt::Debug + Send + Sync {
    /// Records one decided call. Must not block for long: it is on the call's path.
    fn record(&self, record: &AuditRecord);

    /// What to keep of arguments.
    fn arguments(&self) -> AuditArguments {
        AuditArguments::Digest
    }

    /// Whether this sink only counts decisions (telemetry's counter): it is then told each
    /// decision through [`AuditSink::count`], and no record is built (digests, times and
    /// texts that only a log line needs).
    fn counts_only(&self) -> bool {
        false
    }

    /// One decided call's decision, for a sink that [`AuditSink::counts_only`].
    fn count(&self, _decision: CallDecision) {}
}

/// Two sinks fed the same records: the audit log and, beside it, something that only counts
/// (telemetry). What is kept of arguments follows `primary`.
#[derive(Debug)]
pub struct AuditTee {
    primary: Arc<dyn AuditSink>,
    also: Arc<dyn AuditSink>,
}

impl AuditTee {
    /// Both sinks, or whichever of them is there.
    pub fn join(primary: Option<Arc<dyn AuditSink>>, also: Option<Arc<dyn AuditSink>>) -> Option<Arc<dyn AuditSink>> {
        match (primary, also) {
            (Some(primary), Some(also)) => Some(Arc::new(AuditTee { primary, also })),
            (one, other) => one.or(other),
        }
    }
}

impl AuditSink for AuditTee {
    fn record(&self, record: &AuditRecord) {
        self.primary.record(record);
        self.also.record(record);
    }

    fn arguments(&self) -> AuditArguments {
        self.primary.arguments()
    }

    fn counts_only(&self) -> bool {
        self.primary.counts_only() && self.also.counts_only()
    }

    fn count(&self, decision: CallDecision) {
        self.primary.count(decision.clone());
        self.also.count(decision);
    }
}

/// How an [`AuditLog`] writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AuditOptions {
    /// Rotate when the file would grow past this many bytes (`path` becomes `path.1`, ...).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// How many rotated files to keep (0: the full file is truncated instead).
    #[serde(default = "default_keep")]
    pub keep: u32,
    /// What to keep of arguments.
    #[serde(default)]
    pub arguments: AuditArguments,
}

fn default_max_bytes() -> u64 {
    64 * 1024 * 1024
}

fn default_keep() -> u32 {
    5
}

impl Default for AuditOptions {
    fn default() -> Self {
        Self { max_bytes: default_max_bytes(), keep: default_keep(), arguments: AuditArguments::Digest }
    }
}

impl AuditOptions {
    /// Rotation at `max_bytes`, keeping `keep` old files, with `arguments` kept as said.
    pub fn new(max_bytes: u64, keep: u32, arguments: AuditArguments) -> Self {
        Self { max_bytes, keep, arguments }
    }
}

struct Open {
    file: File,
    size: u64,
}

/// The audit log as a file of JSON lines, 0600, rotated by size.
pub struct AuditLog {
    path: PathBuf,
    options: AuditOptions,
    open: Mutex<Option<Open>>,
}

impl fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditLog").field("path", &self.path).field("options", &self.options).finish()
    }
}

impl AuditLog {
    /// Opens (creating it 0600, its directories 0700) the log at `path`: fails now, at start,
    /// rather than at the first call, when it cannot be written.
    pub fn open(path: impl Into<PathBuf>, options: AuditOptions) -> io::Result<Self> {
        let path = path.into();
        let file = private_files::open_append(&path)?;
        let size = file.metadata()?.len();
        Ok(Self { path, options, open: Mutex::new(Some(Open { file, size })) })
    }

    /// Where it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn rotated(&self, n: u32) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// Moves `path` to `path.1` (and so on, dropping the oldest), or truncates it when no old
    /// files are kept; opens a fresh file.
    fn rotate(&self) -> io::Result<Open> {
        if self.options.keep == 0 {
            let file = private_files::open_append(&self.path)?;
            file.set_len(0)?;
            return Ok(Open { file, size: 0 });
        }
        for n in (1..self.options.keep).rev() {
            let from = self.rotated(n);
            if from.exists() {
                std::fs::rename(&from, self.rotated(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.rotated(1))?;
        Ok(Open { file: private_files::open_append(&self.path)?, size: 0 })
    }

    fn write(&self, line: &[u8]) -> io::Result<()> {
        let mut open = lock(&self.open);
        let len = line.len() as u64;
        let full = open.as_ref().is_none_or(|o| o.size > 0 && o.size + len > self.options.max_bytes);
        if full {
            // Closed first: a file is never renamed while this writer holds it.
            *open = None;
            *open = Some(self.rotate()?);
        }
        let Some(current) = open.as_mut() else { return Ok(()) };
        current.file.write_all(line)?;
        current.size += len;
        Ok(())
    }
}

impl AuditSink for AuditLog {
    fn record(&self, record: &AuditRecord) {
        let mut line = match serde_json::to_vec(record) {
            Ok(line) => line,
            Err(_) => return,
        };
        line.push(b'\n');
        if let Err(e) = self.write(&line) {
            // The call goes on; the operator learns that its audit trail has a gap.
            tracing::error!(path = %self.path.display(), "an audit line could not be written: {e}");
        }
    }

    fn arguments(&self) -> AuditArguments {
        self.options.arguments
    }
}

/// The SHA-256 of `arguments`' canonical JSON, hex (the digest approval states bind).
pub(crate) fn arguments_digest(arguments: &Value) -> String {
    crate::seal::digest_json(arguments)
}

/// A short digest of a session id (12 hex digits): lines of one session go together, and the
/// id, which lets a caller reach the session, is not written.
pub(crate) fn session_tag(id: &str) -> String {
    let mut tag = crate::seal::digest_json(&Value::String(id.to_owned()));
    tag.truncate(12);
    tag
}

/// `unix_ms` as RFC 3339 in UTC (`2026-12-05T12:00:00.000Z`).
pub(crate) fn rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        unix_ms % 1000
    )
}

/// How a call was decided, filled in by the gateway as it decides.
#[derive(Debug, Default)]
struct Decided(Mutex<Option<(CallDecision, String)>>);

tokio::task_local! {
    /// The decision of the call being audited, if it is.
    static DECIDED: Arc<Decided>;
}

/// Notes how the gate admitted the call being audited (nothing when none is).
pub(crate) fn decided(admission: &Admission) {
    note(|| (admission.decision(), admission.reason()));
}

/// Notes how a call the gateway answers itself (`search_tools`) was decided.
pub(crate) fn noted(decision: CallDecision, reason: String) {
    note(|| (decision, reason));
}

/// Keeps the decision of the call being audited; `decision` (text made for the audit line) is
/// not made when no call is audited.
fn note(decision: impl FnOnce() -> (CallDecision, String)) {
    let _ = DECIDED.try_with(|decided| *lock(&decided.0) = Some(decision()));
}

/// What a call's answer says of how it ended.
fn outcome(reply: &Reply) -> AuditOutcome {
    #[derive(Deserialize)]
    struct Flag {
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
    }
    match reply {
        Reply::Result(json) => match serde_json::from_str::<Flag>(json) {
            Ok(Flag { is_error: Some(true) }) => AuditOutcome::ToolError,
            _ => AuditOutcome::Ok,
        },
        Reply::Typed(_) => AuditOutcome::Pending,
        _ => AuditOutcome::Error,
    }
}

impl Gateway {
    /// `tools/call`, with its audit line when an audit sink is configured.
    pub(crate) async fn audited_call(
        &self,
        scope: &Scope,
        id: &RequestId,
        call: CallToolRequestParams,
        meta: &RequestMeta,
        out: &Outbound,
    ) -> Reply {
        let Some(sink) = self.options().audit.clone() else {
            return self.call_tool(scope, id, call, meta, out).await;
        };
        let call_name = call.name.clone();
        if sink.counts_only() {
            let decided = Arc::new(Decided::default());
            let reply = DECIDED.scope(Arc::clone(&decided), self.call_tool(scope, id, call, meta, out)).await;
            let noted = lock(&decided.0).take();
            let decision = match noted {
                Some((decision, _)) => decision,
                None => self.undecided(&scope.caller, &call_name, &reply).await.0,
            };
            sink.count(decision);
            return reply;
        }
        let started = self.now_ms();
        let tool = mcp_safety::text::one_line(&call.name, 200);
        let arguments = Value::Object(call.arguments.clone().unwrap_or_default());
        let decided = Arc::new(Decided::default());
        let reply = DECIDED.scope(Arc::clone(&decided), self.call_tool(scope, id, call, meta, out)).await;
        let noted = lock(&decided.0).take();
        let (decision, rule) = match noted {
            Some(noted) => noted,
            None => self.undecided(&scope.caller, &call_name, &reply).await,
        };
        let session = match &scope.era {
            Era::Session(session) => session.id.as_deref().map(session_tag),
            Era::Stateless(_) => None,
        };
        let record = AuditRecord {
            time: rfc3339(started),
            caller: scope.caller.principal.as_deref().map(str::to_owned),
            profile: scope.caller.profile.as_deref().map(str::to_owned),
            session,
            client: mcp_safety::text::one_line(scope.client_name(), 200),
            tool,
            decision,
            rule: mcp_safety::text::one_line(&rule, 1000),
            duration_ms: self.now_ms().saturating_sub(started),
            outcome: outcome(&reply),
            arguments_sha256: arguments_digest(&arguments),
            arguments: (sink.arguments() == AuditArguments::Values).then_some(arguments),
            parent: None,
        };
        sink.record(&record);
        reply
    }

    /// How a call the gate never saw was decided, from its answer: a name not in the caller's
    /// pool (denied, by the rule that hid it, or unknown), or a refusal before the gate (no
    /// pool yet, a session's stale listing) whose text says why.
    async fn undecided(&self, caller: &Caller, name: &str, reply: &Reply) -> (CallDecision, String) {
        if let Reply::Error(_) = reply
            && let Ok(binding) = self.backend().binding(caller).await
            && binding.pool().get(name).is_none()
        {
            return match binding.missing(self.backend().tools(), name) {
                Refusal::UnknownTool { .. } => (CallDecision::Rejected, "unknown tool".to_owned()),
                refusal => (refusal.decision(), refusal.reason()),
            };
        }
        let text = match reply {
            Reply::Result(json) => serde_json::from_str::<Value>(json)
                .ok()
                .and_then(|v| v["content"][0]["text"].as_str().map(str::to_owned))
                .unwrap_or_default(),
            Reply::Error(error) => error.message.clone(),
            _ => String::new(),
        };
        (CallDecision::Rejected, text)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A sink that only counts (as telemetry's is), or one that keeps records.
    #[derive(Debug, Default)]
    struct Counter {
        records: Mutex<Vec<CallDecision>>,
        counted: Mutex<Vec<CallDecision>>,
        only: bool,
    }

    impl AuditSink for Counter {
        fn record(&self, record: &AuditRecord) {
            lock(&self.records).push(record.decision.clone());
        }

        fn counts_only(&self) -> bool {
            self.only
        }

        fn count(&self, decision: CallDecision) {
            lock(&self.counted).push(decision);
        }
    }

    #[test]
    fn a_tee_counts_only_when_both_sides_do() {
        let counting = || Arc::new(Counter { only: true, ..Counter::default() });
        let (a, b) = (counting(), counting());
        let tee = AuditTee::join(Some(a.clone()), Some(b.clone())).unwrap();
        assert!(tee.counts_only());
        tee.count(CallDecision::Allowed);
        assert_eq!(*lock(&a.counted), [CallDecision::Allowed]);
        assert_eq!(*lock(&b.counted), [CallDecision::Allowed]);

        // With a log on one side, every record is built and both sides get it.
        let log = Arc::new(Counter::default());
        let tee = AuditTee::join(Some(log.clone()), Some(a.clone())).unwrap();
        assert!(!tee.counts_only());
        tee.record(&record("fs__read"));
        assert_eq!(*lock(&log.records), [CallDecision::Allowed]);
        assert_eq!(*lock(&a.records), [CallDecision::Allowed]);
    }

    fn record(tool: &str) -> AuditRecord {
        AuditRecord {
            time: rfc3339(0),
            caller: Some("alice".into()),
            profile: None,
            session: None,
            client: "test".into(),
            tool: tool.into(),
            decision: CallDecision::Allowed,
            rule: "the policy's default".into(),
            duration_ms: 1,
            outcome: AuditOutcome::Ok,
            arguments_sha256: arguments_digest(&json!({})),
            arguments: None,
            parent: None,
        }
    }

    #[test]
    fn times_and_digests() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_800_000_000_123), "2027-01-15T08:00:00.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            arguments_digest(&json!({"a": 1, "b": [{"y": 2, "x": 1}]})),
            arguments_digest(&json!({"b": [{"x": 1, "y": 2}], "a": 1}))
        );
        assert_ne!(arguments_digest(&json!({"a": 1})), arguments_digest(&json!({"a": 2})));
        assert_eq!(session_tag("abc").len(), 12);
    }

    #[test]
    fn the_log_is_private_and_rotates_by_size() {
        let dir = tempfile::tempdir().unwrap_or_else(|_| unreachable!());
        let path = dir.path().join("audit").join("calls.jsonl");
        let one = serde_json::to_vec(&record("a__b")).unwrap_or_default().len() as u64 + 1;
        let log = AuditLog::open(&path, AuditOptions::new(one * 2, 2, AuditArguments::Digest))
            .unwrap_or_else(|e| panic!("{e}"));
        for n in 0..7 {
            log.record(&record(&format!("t{n}")));
        }
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let current = read(&path);
        assert_eq!(current.lines().count(), 1, "{current}");
        assert!(current.contains("\"tool\":\"t6\""));
        assert!(read(&log.rotated(1)).contains("\"tool\":\"t5\""));
        assert!(read(&log.rotated(2)).contains("\"tool\":\"t3\""));
        assert!(!log.rotated(3).exists(), "only two old files are kept");
        let line: Value = serde_json::from_str(current.trim()).unwrap_or_default();
        assert_eq!(line["decision"], "allowed");
        assert!(line.get("arguments").is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777).unwrap_or_default();
            assert_eq!(mode, 0o600);
        }
    }
}
