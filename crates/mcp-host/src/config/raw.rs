//! Our TOML as written: the serde shapes of every table (read strictly: an unknown key is an
//! error, a typo must not silently change what runs), and the small readers they share. Other
//! hosts' entries are mapped onto the same [`RawServer`] (`foreign`); what they mean is decided
//! in `validate`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use policy::PolicyConfig;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

/// Longest accepted timeout; longer ones are surely typos (and would overflow a deadline).
const MAX_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;

pub(crate) fn key_of(path: &serde_path_to_error::Path) -> Option<String> {
    let key = path.to_string();
    (key != ".").then_some(key)
}

/// serde_json appends " at line L column C"; the position is reported separately.
pub(crate) fn json_message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    text.strip_suffix(&suffix).map(str::to_owned).unwrap_or(text)
}

/// 1-based line and column (in characters) of byte `offset`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawToml {
    #[serde(default)]
    pub(crate) servers: BTreeMap<String, RawServer>,
    #[serde(default)]
    pub(crate) policy: PolicyConfig,
    #[serde(default)]
    pub(crate) sandbox: RawSandboxDefaults,
    #[serde(default)]
    pub(crate) runtime: RawRuntime,
    #[serde(default)]
    pub(crate) serve: RawServe,
    /// Tool exposure and search (see [`ToolsSettings`]).
    #[serde(default)]
    pub(crate) tool_search: Option<String>,
    /// Largest definition of one tool, in bytes.
    #[serde(default)]
    pub(crate) tool_budget: Option<usize>,
    /// Largest total of the definitions sent per step, in bytes.
    #[serde(default)]
    pub(crate) pool_budget: Option<usize>,
    /// Most tools loaded through search per session.
    #[serde(default)]
    pub(crate) max_loaded_tools: Option<usize>,
    /// Code mode (`"on"`, `"off"`): the built-in `run_code`, for servers that set none.
    #[serde(default)]
    pub(crate) code_mode: Option<String>,
    /// `[code_mode_limits]`: what one script may use.
    #[serde(default)]
    pub(crate) code_mode_limits: RawCodeLimits,
    /// `[telemetry]`: traces and metrics (mcp-telemetry's own settings type, read as it is).
    #[serde(default)]
    pub(crate) telemetry: mcp_telemetry::config::TelemetrySettings,
}

impl RawToml {
    /// The top-level tool exposure keys, taken out.
    pub(crate) fn take_tools(&mut self) -> RawTools {
        RawTools {
            tool_search: self.tool_search.take(),
            tool_budget: self.tool_budget.take(),
            pool_budget: self.pool_budget.take(),
            max_loaded_tools: self.max_loaded_tools.take(),
            code_mode: self.code_mode.take(),
            code_mode_limits: std::mem::take(&mut self.code_mode_limits),
        }
    }
}

/// Our TOML's top-level tool exposure keys as written.
#[derive(Debug, Default)]
pub(crate) struct RawTools {
    pub(crate) tool_search: Option<String>,
    pub(crate) tool_budget: Option<usize>,
    pub(crate) pool_budget: Option<usize>,
    pub(crate) max_loaded_tools: Option<usize>,
    pub(crate) code_mode: Option<String>,
    pub(crate) code_mode_limits: RawCodeLimits,
}

/// `[code_mode_limits]`.
#[derive(Deserialize, Default, Debug)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with `memory_mib`, `cpu_time_s`, `max_calls`, `concurrency`, `max_result_kib`, `max_log_kib` and `max_running`"
)]
pub(crate) struct RawCodeLimits {
    #[serde(default)]
    pub(crate) memory_mib: Option<usize>,
    #[serde(default)]
    pub(crate) cpu_time_s: Option<Seconds>,
    #[serde(default)]
    pub(crate) max_calls: Option<u32>,
    #[serde(default)]
    pub(crate) concurrency: Option<usize>,
    #[serde(default)]
    pub(crate) max_result_kib: Option<usize>,
    #[serde(default)]
    pub(crate) max_log_kib: Option<usize>,
    #[serde(default)]
    pub(crate) max_running: Option<usize>,
}

/// `[runtime]`.
#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with `local_concurrency`, `remote_concurrency`, `restart_limit` and `restart_window_s`"
)]
pub(crate) struct RawRuntime {
    #[serde(default)]
    pub(crate) local_concurrency: Option<usize>,
    #[serde(default)]
    pub(crate) remote_concurrency: Option<usize>,
    #[serde(default)]
    pub(crate) restart_limit: Option<u32>,
    #[serde(default)]
    pub(crate) restart_window_s: Option<Seconds>,
}

/// `[serve]`: how `mcp-harness serve` (the gateway) presents itself and whom its HTTP front
/// admits. (Its sub-tables, inbound authentication, profiles, the audit log, the drain, rate
/// limits and replicas, are the gateway's own settings types, read here as they are.)
#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with `name`, `version`, `instructions`, `allowed_hosts`, `allowed_origins`, \
                 `startup_wait_s`, `approval_wait_s`, `approval_ttl_s`, `metrics`, `metrics_addr`, `max_sessions`, \
                 `max_sessions_per_caller`, `session_idle_s`, `auth`, `profiles`, `audit`, `drain`, `limits`, `replicas` \
                 and `code_mode`"
)]
pub(crate) struct RawServe {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) version: Option<String>,
    #[serde(default)]
    pub(crate) instructions: Option<String>,
    #[serde(default, deserialize_with = "string_list")]
    pub(crate) allowed_hosts: Option<Vec<String>>,
    #[serde(default, deserialize_with = "string_list")]
    pub(crate) allowed_origins: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) startup_wait_s: Option<Seconds>,
    #[serde(default)]
    pub(crate) approval_wait_s: Option<Seconds>,
    #[serde(default)]
    pub(crate) approval_ttl_s: Option<Seconds>,
    /// Whether `serve --http` keeps metrics for `GET /metrics`.
    #[serde(default)]
    pub(crate) metrics: Option<bool>,
    /// `GET /metrics` on an address of its own (`host:port`).
    #[serde(default)]
    pub(crate) metrics_addr: Option<String>,
    /// Most sessions `serve --http` holds at once.
    #[serde(default)]
    pub(crate) max_sessions: Option<usize>,
    /// Most sessions of one caller at once.
    #[serde(default)]
    pub(crate) max_sessions_per_caller: Option<usize>,
    /// How long an unused session is kept.
    #[serde(default)]
    pub(crate) session_idle_s: Option<Seconds>,
    /// `[serve.auth]`: inbound authentication of `serve --http`.
    #[serde(default)]
    pub(crate) auth: mcp_gateway::settings::AuthSettings,
    /// `[serve.profiles.NAME]`.
    #[serde(default)]
    pub(crate) profiles: BTreeMap<String, mcp_gateway::settings::ProfileSettings>,
    /// `[serve.audit]`.
    #[serde(default)]
    pub(crate) audit: Option<mcp_gateway::settings::AuditSettings>,
    /// `[serve.drain]`.
    #[serde(default)]
    pub(crate) drain: mcp_gateway::settings::DrainSettings,
    /// `[[serve.limits]]`.
    #[serde(default)]
    pub(crate) limits: Vec<mcp_gateway::LimitRule>,
    /// `[serve.replicas]`.
    #[serde(default)]
    pub(crate) replicas: Option<mcp_gateway_store::ReplicaConfig>,
    /// Code mode for downstream hosts (`"on"`, `"off"`): `run_code` in the gateway's list.
    #[serde(default)]
    pub(crate) code_mode: Option<String>,
}

/// `[sandbox]`: the default of every stdio server's `sandbox` and `sandbox_required`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, expecting = "a table with `default` and `required`")]
pub(crate) struct RawSandboxDefaults {
    #[serde(default)]
    pub(crate) default: Option<RawSandbox>,
    #[serde(default)]
    pub(crate) required: Option<bool>,
}

/// `"standard"`, `"off"`, or a table that extends standard.
pub(crate) enum RawSandbox {
    Standard,
    Off,
    Table(RawSandboxTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSandboxTable {
    #[serde(default, deserialize_with = "string_list")]
    pub(crate) read: Option<Vec<String>>,
    #[serde(default, deserialize_with = "string_list")]
    pub(crate) write: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) network: Option<bool>,
    #[serde(default)]
    pub(crate) memory_mib: Option<u64>,
    #[serde(default)]
    pub(crate) processes: Option<u64>,
    #[serde(default)]
    pub(crate) open_files: Option<u64>,
    #[serde(default)]
    pub(crate) cpu_seconds: Option<u64>,
}

impl<'de> Deserialize<'de> for RawSandbox {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawSandbox;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"standard\", \"off\", or a table with read, write, network, memory_mib, processes, open_files, cpu_seconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawSandbox, E> {
                match v {
                    "standard" => Ok(RawSandbox::Standard),
                    "off" => Ok(RawSandbox::Off),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawSandbox, A::Error> {
                RawSandboxTable::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawSandbox::Table)
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// One server's entry as written (our keys; other hosts' entries are mapped onto it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of server settings")]
pub struct RawServer {
    #[serde(default)]
    pub(crate) command: Option<String>,
    #[serde(default, deserialize_with = "string_list")]
    pub(crate) args: Option<Vec<String>>,
    #[serde(default, deserialize_with = "string_map")]
    pub(crate) env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub(crate) cwd: Option<PathBuf>,
    #[serde(default)]
    pub(crate) url: Option<String>,
    #[serde(default, deserialize_with = "string_map")]
    pub(crate) headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub(crate) enabled: Option<bool>,
    #[serde(default)]
    pub(crate) startup_timeout_s: Option<Seconds>,
    #[serde(default)]
    pub(crate) tool_timeout_s: Option<Seconds>,
    /// Claude's transport type (`stdio`, `sse`, `http`); checked against command/url.
    #[serde(default, rename = "type")]
    pub(crate) kind: Option<String>,
    /// The environment variable holding a bearer token for a remote server (the token itself
    /// never belongs in a configuration file).
    #[serde(default)]
    pub(crate) bearer_token_env_var: Option<String>,
    /// OAuth settings of a remote server.
    #[serde(default)]
    pub(crate) oauth: Option<RawOAuth>,
    /// A stdio server's confinement.
    #[serde(default)]
    pub(crate) sandbox: Option<RawSandbox>,
    /// Refuse to start a stdio server unconfined.
    #[serde(default)]
    pub(crate) sandbox_required: Option<bool>,
    /// The longest a tool call may run while it reports progress.
    #[serde(default)]
    pub(crate) max_tool_time_s: Option<Seconds>,
    /// Variables passed on from mcp-harness's own environment, when set (Codex's `env_vars`).
    #[serde(default, deserialize_with = "string_list")]
    pub(crate) env_vars: Option<Vec<String>>,
    /// A file of `NAME=value` lines added to `env` (VS Code's and Cursor's `envFile`).
    #[serde(default)]
    pub(crate) env_file: Option<String>,
    /// Only these tools are offered (exact names).
    #[serde(default, deserialize_with = "string_list")]
    pub(crate) enabled_tools: Option<Vec<String>>,
    /// These tools are never offered (exact names).
    #[serde(default, deserialize_with = "string_list")]
    pub(crate) disabled_tools: Option<Vec<String>>,
    /// `run` and `chat` do not start without it (Codex's `required` too).
    #[serde(default)]
    pub(crate) required: Option<bool>,
    /// Whether the server's `instructions` reach the model's system prompt (default yes).
    #[serde(default)]
    pub(crate) instructions: Option<bool>,
    /// Whether the server may ask the user for input (elicitation) on a terminal (default yes).
    #[serde(default)]
    pub(crate) elicitation: Option<bool>,
    /// Its tools' search mode (`auto`, `on`, `off`).
    #[serde(default)]
    pub(crate) tool_search: Option<String>,
    /// Its tools are always sent, never deferred.
    #[serde(default)]
    pub(crate) always_load: Option<bool>,
    /// Largest definition of one of its tools, in bytes.
    #[serde(default)]
    pub(crate) tool_budget: Option<usize>,
    /// Largest total of its loaded definitions, in bytes.
    #[serde(default)]
    pub(crate) server_budget: Option<usize>,
    /// Whether scripts of code mode reach its tools (`"on"`, `"off"`).
    #[serde(default)]
    pub(crate) code_mode: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of OAuth settings")]
pub(crate) struct RawOAuth {
    #[serde(default)]
    pub(crate) enabled: Option<bool>,
    #[serde(default)]
    pub(crate) client_id: Option<String>,
    #[serde(default)]
    pub(crate) client_secret_env_var: Option<String>,
    #[serde(default)]
    pub(crate) client_metadata_url: Option<String>,
    #[serde(default)]
    pub(crate) grant: Option<String>,
    #[serde(default)]
    pub(crate) private_key_file: Option<PathBuf>,
    #[serde(default)]
    pub(crate) issuer: Option<String>,
}

/// A positive number of seconds, integer or fractional.
#[derive(Debug)]
pub(crate) struct Seconds(pub(crate) Duration);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a positive number of seconds (at most {MAX_TIMEOUT_S})")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
                if v > 0.0 && v <= MAX_TIMEOUT_S {
                    Duration::try_from_secs_f64(v)
                        .map(Seconds)
                        .map_err(|_| E::invalid_value(de::Unexpected::Float(v), &self))
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
                if v > 0 && (v as f64) <= MAX_TIMEOUT_S {
                    Ok(Seconds(Duration::from_secs(v.unsigned_abs())))
                } else {
                    Err(E::invalid_value(de::Unexpected::Signed(v), &self))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
                if v > 0 && (v as f64) <= MAX_TIMEOUT_S {
                    Ok(Seconds(Duration::from_secs(v)))
                } else {
                    Err(E::invalid_value(de::Unexpected::Unsigned(v), &self))
                }
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// Strict list of strings, with a message that says so (serde's default says "a sequence").
fn string_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<String>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of strings")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<StringItem>()? {
                out.push(item.0);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_seq(V).map(Some)
}

/// Strict table of string values.
fn string_map<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of strings")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((k, v)) = map.next_entry::<String, StringItem>()? {
                out.insert(k, v.0);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(V).map(Some)
}

/// A string element whose error says "a string" (not the serde default of the same words,
/// but kept explicit so numbers are never silently converted).
struct StringItem(String);

impl<'de> Deserialize<'de> for StringItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(StringItem)
    }
}
