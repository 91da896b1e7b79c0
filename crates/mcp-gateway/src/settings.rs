//! The gateway's settings as a configuration file writes them, under `[serve]`:
//! `[serve.auth]` (static tokens, `[serve.auth.oauth]`), `[serve.profiles.NAME]`,
//! `[serve.audit]` and `[serve.drain]`. Serde types read strictly (unknown keys refused, so a
//! typo cannot silently drop a restriction), and what each becomes: an [`Authenticator`],
//! [`Profile`]s, an [`AuditLog`], [`DrainOptions`].
//!
//! ```
//! use mcp_gateway::settings::InboundSettings;
//! let settings: InboundSettings = toml::from_str(r#"
//!     [auth]
//!     tokens = [{ name = "ci-bot", sha256 = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881", profile = "ci" }]
//!
//!     [profiles.ci]
//!     callers = ["ci-bot"]
//!     servers = ["git"]
//!     policy = { rules = [{ server = "git", tool = "push", decision = "deny" }] }
//!
//!     [drain]
//!     delay_s = 2
//!     timeout_s = 20
//! "#).unwrap();
//! assert!(settings.auth.is_configured());
//! let profiles = settings.profiles().unwrap();
//! assert_eq!(profiles[0].name(), "ci");
//! ```
//!
//! A front with keys of its own in `[serve]` (the wt-serve `RawServe`) embeds the four types as
//! its fields `auth`, `profiles`, `audit` and `drain`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use policy::{Decision, Policy, PolicyConfig, PolicyError, ResourceRuleConfig, RuleConfig};
use serde::{Deserialize, Deserializer, Serialize};
use url::Url;

use crate::audit::{AuditArguments, AuditLog, AuditOptions};
use crate::auth::{Authenticator, BearerTokens, Inbound, JwtAuthenticator, JwtError, JwtOptions};
use crate::clock::Clock;
use crate::http::DrainOptions;
use crate::profile::Profile;

/// Whether `name` can name a profile (`/mcp/NAME`): 1 to 64 of `A-Z a-z 0-9 _ -`.
pub fn is_profile_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why settings could not become what they configure. Each names the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// A token's digest is not 64 hex digits.
    #[error(
        "serve.auth.tokens[{index}] (name {name:?}): sha256 must be the 64 hex digits of the token's SHA-256 \
         (for example `printf %s \"$TOKEN\" | sha256sum`), never the token itself"
    )]
    TokenDigest {
        /// Its position.
        index: usize,
        /// Its name.
        name: String,
    },
    /// A token's name or profile is empty or not a profile name.
    #[error("serve.auth.tokens[{index}]: {what}")]
    Token {
        /// Its position.
        index: usize,
        /// What is wrong.
        what: String,
    },
    /// `jwks_url` is not a URL.
    #[error("serve.auth.oauth.jwks_url {0}")]
    JwksUrl(String),
    /// `[serve.auth.oauth]` could not become a resource server.
    #[error("serve.auth.oauth: {0}")]
    OAuth(#[from] JwtError),
    /// A profile's name cannot be one.
    #[error("serve.profiles.{0}: a profile's name is 1 to 64 of the letters A-Z a-z, digits, `_` and `-`")]
    ProfileName(String),
    /// A profile's policy overlay does not compile.
    #[error("serve.profiles.{name}.policy: {source}")]
    ProfilePolicy {
        /// The profile.
        name: String,
        /// Why.
        source: PolicyError,
    },
    /// The audit log cannot be opened.
    #[error("serve.audit.path {path}: cannot be opened for appending: {source}")]
    Audit {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The most seconds any of these settings may be: a week. Past that a duration is no plan, and
/// far past it adding two (a drain's delay and timeout) overflowed.
const MAX_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// Seconds, written as an integer or a decimal (`2`, `0.5`), from 0 to a week.
fn seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let value = f64::deserialize(deserializer)?;
    Duration::try_from_secs_f64(value).ok().filter(|_| value <= MAX_SECONDS).ok_or_else(|| {
        serde::de::Error::custom(format!("{value} is not a number of seconds from 0 to {MAX_SECONDS} (a week)"))
    })
}

fn optional_seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
    seconds(deserializer).map(Some)
}

fn seconds_out<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn optional_seconds_out<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// All of the gateway's inbound settings: `[serve.auth]`, `[serve.profiles.*]`,
/// `[serve.audit]`, `[serve.drain]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct InboundSettings {
    /// Inbound authentication.
    #[serde(default)]
    pub auth: AuthSettings,
    /// Profiles, by name.
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileSettings>,
    /// The audit log.
    #[serde(default)]
    pub audit: Option<AuditSettings>,
    /// How SIGTERM drains.
    #[serde(default)]
    pub drain: DrainSettings,
}

impl InboundSettings {
    /// The profiles, checked.
    pub fn profiles(&self) -> Result<Vec<Profile>, SettingsError> {
        self.profiles.iter().map(|(name, settings)| settings.profile(name)).collect()
    }
}

/// `[serve.auth]`: static bearer tokens and/or an OAuth resource server. Neither: no inbound
/// authentication (the HTTP front then listens on loopback only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AuthSettings {
    /// Static tokens, each known by its SHA-256 only.
    #[serde(default)]
    pub tokens: Vec<TokenSettings>,
    /// JWT access tokens from an OAuth authorization server.
    #[serde(default)]
    pub oauth: Option<OAuthSettings>,
}

/// One static bearer token, named by exactly one of its digest, an environment variable or a
/// file holding it: `{ name = "alice", sha256 = "…", profile = "ci" }`,
/// `{ name = "ci-bot", token_env = "GATEWAY_CI_TOKEN" }`, `{ name = "ops", token_file = "ops.token" }`.
/// The token itself is never in the configuration, and only its digest is kept once read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TokenSettings {
    /// The principal it authenticates (audit lines and profiles' `callers` name it).
    pub name: String,
    /// The SHA-256 of the token, 64 hex digits.
    #[serde(default)]
    pub sha256: Option<String>,
    /// The environment variable holding the token (read when the gateway starts).
    #[serde(default)]
    pub token_env: Option<String>,
    /// The file holding the token (read when the gateway starts; surrounding whitespace
    /// ignored).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// The profile it is tied to: it may use `/mcp/NAME` (and `/mcp`, served as NAME) only.
    #[serde(default)]
    pub profile: Option<String>,
}

/// Largest token file read: a token is a line, not a document.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

impl TokenSettings {
    /// The token from `token_env` or `token_file`; `Err` says what is wrong, never showing a
    /// value.
    fn value(&self) -> Result<String, String> {
        let value = if let Some(var) = &self.token_env {
            match std::env::var(var) {
                Ok(value) => value,
                Err(std::env::VarError::NotPresent) => return Err(format!("token_env: `{var}` is not set")),
                Err(std::env::VarError::NotUnicode(_)) => return Err(format!("token_env: `{var}` is not UTF-8")),
            }
        } else if let Some(path) = &self.token_file {
            read_token_file(path).map_err(|e| format!("token_file {}: {e}", path.display()))?
        } else {
            return Err("no token source".to_owned());
        };
        let value = value.trim();
        if value.is_empty() {
            return Err(match &self.token_env {
                Some(var) => format!("token_env: `{var}` is empty"),
                None => "token_file: the file is empty".to_owned(),
            });
        }
        Ok(value.to_owned())
    }
}

/// Reads a token file, bounded (a path naming a large file by mistake is not read whole). A
/// file other users may read is refused, as the sealing key file is: the token is the secret
/// itself. So is anything but a regular file (a pipe would hold the start).
fn read_token_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let file = private_files::open_regular(path)?;
    let meta = file.metadata()?;
    if let Some(mode) = private_files::exposed_mode(&meta) {
        return Err(std::io::Error::other(format!(
            "other users may read or write it (mode {mode:03o}); make it private: chmod 600 {}",
            path.display()
        )));
    }
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(std::io::Error::other(format!("larger than {MAX_TOKEN_FILE_BYTES} bytes")));
    }
    Ok(text)
}

/// `[serve.auth.oauth]`: the gateway as an OAuth resource server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OAuthSettings {
    /// The issuer (`iss` must equal it; named in the protected resource metadata).
    pub issuer: String,
    /// Where its keys are published (https; plain http on loopback only).
    pub jwks_url: String,
    /// The gateway's resource URI as clients reach it (`https://gw.example.com/mcp`): the
    /// audience tokens must name; a profile's is this followed by `/NAME`.
    pub resource: String,
    /// Further audiences accepted.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// The JWS algorithms accepted (asymmetric ones only); empty: whatever the issuer's keys
    /// allow.
    #[serde(default)]
    pub algorithms: Vec<String>,
    /// Scopes every token must carry.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The claim naming the caller (default `sub`).
    #[serde(default)]
    pub principal_claim: Option<String>,
    /// A claim naming the profile a caller is tied to.
    #[serde(default)]
    pub profile_claim: Option<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds (default 30).
    #[serde(default, deserialize_with = "optional_seconds", serialize_with = "optional_seconds_out")]
    pub leeway_s: Option<Duration>,
    /// How long a fetched key set is used, in seconds (default 3600).
    #[serde(default, deserialize_with = "optional_seconds", serialize_with = "optional_seconds_out")]
    pub jwks_max_age_s: Option<Duration>,
    /// The least time between two fetches of the key set, in seconds (default 30).
    #[serde(default, deserialize_with = "optional_seconds", serialize_with = "optional_seconds_out")]
    pub jwks_min_interval_s: Option<Duration>,
}

impl OAuthSettings {
    /// The resource server's options.
    pub fn options(&self) -> Result<JwtOptions, SettingsError> {
        let jwks_url =
            Url::parse(&self.jwks_url).map_err(|e| SettingsError::JwksUrl(format!("{:?}: {e}", self.jwks_url)))?;
        let mut options = JwtOptions::new(self.issuer.clone(), jwks_url, self.resource.clone());
        options.audiences.clone_from(&self.audiences);
        options.algorithms.clone_from(&self.algorithms);
        options.scopes.clone_from(&self.scopes);
        if let Some(claim) = &self.principal_claim {
            options.principal_claim.clone_from(claim);
        }
        options.profile_claim.clone_from(&self.profile_claim);
        if let Some(leeway) = self.leeway_s {
            options.leeway = leeway;
        }
        if let Some(age) = self.jwks_max_age_s {
            options.jwks_max_age = age;
        }
        if let Some(interval) = self.jwks_min_interval_s {
            options.jwks_min_interval = interval;
        }
        Ok(options)
    }
}

impl AuthSettings {
    /// Whether any inbound authentication is configured.
    pub fn is_configured(&self) -> bool {
        !self.tokens.is_empty() || self.oauth.is_some()
    }

    /// The static tokens, checked (`None` when there are none).
    pub fn bearer_tokens(&self) -> Result<Option<BearerTokens>, SettingsError> {
        if self.tokens.is_empty() {
            return Ok(None);
        }
        let mut tokens = BearerTokens::new();
        for (index, token) in self.tokens.iter().enumerate() {
            if token.name.trim().is_empty() {
                return Err(SettingsError::Token { index, what: "name must not be empty".to_owned() });
            }
            tokens = match (&token.sha256, &token.token_env, &token.token_file) {
                (Some(digest), None, None) => tokens
                    .digest(digest, &token.name)
                    .ok_or_else(|| SettingsError::TokenDigest { index, name: token.name.clone() })?,
                (None, Some(_), None) | (None, None, Some(_)) => {
                    let value = token.value().map_err(|what| SettingsError::Token {
                        index,
                        what: format!("(name {:?}) {what}", token.name),
                    })?;
                    tokens.token(&value, &token.name)
                }
                _ => {
                    return Err(SettingsError::Token {
                        index,
                        what: format!(
                            "(name {:?}) needs exactly one of `sha256`, `token_env` and `token_file`",
                            token.name
                        ),
                    });
                }
            };
            if let Some(profile) = &token.profile {
                if !is_profile_name(profile) {
                    return Err(SettingsError::Token {
                        index,
                        what: format!("profile {profile:?} cannot name a profile"),
                    });
                }
                tokens = tokens.in_profile(profile);
            }
        }
        Ok(Some(tokens))
    }

    /// The authenticator these settings make (`None` when none is configured), time from
    /// `clock`. The issuer's keys are fetched when the first token arrives.
    pub fn authenticator(&self, clock: Arc<dyn Clock>) -> Result<Option<Arc<dyn Authenticator>>, SettingsError> {
        if !self.is_configured() {
            return Ok(None);
        }
        let tokens = self.bearer_tokens()?;
        let oauth = match &self.oauth {
            Some(oauth) => Some(JwtAuthenticator::new(oauth.options()?, clock)?),
            None => None,
        };
        Ok(Some(Arc::new(Inbound::new(tokens, oauth))))
    }
}

/// `[serve.profiles.NAME]`: who may use the profile, which servers it offers, and its policy
/// overlay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ProfileSettings {
    /// The principals admitted (token names, JWT subjects); omitted: every caller that reaches
    /// `/mcp/NAME`.
    #[serde(default)]
    pub callers: Option<Vec<String>>,
    /// The servers offered; omitted: all of them.
    #[serde(default)]
    pub servers: Option<Vec<String>>,
    /// The overlay: it can make decisions stricter, never looser.
    #[serde(default)]
    pub policy: Option<OverlaySettings>,
}

/// A profile's policy overlay, written like `[policy]` but with `allow` as its default (an
/// overlay that names only what it tightens leaves the rest to the host's policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OverlaySettings {
    /// Decision where no rule of the overlay matches (default `allow`: the host's decides).
    #[serde(default = "allow")]
    pub default: Decision,
    /// Rules by server and tool pattern.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// Rules over resources.
    #[serde(default)]
    pub resources: Vec<ResourceRuleConfig>,
}

fn allow() -> Decision {
    Decision::Allow
}

impl Default for OverlaySettings {
    fn default() -> Self {
        Self { default: Decision::Allow, rules: Vec::new(), resources: Vec::new() }
    }
}

impl ProfileSettings {
    /// The profile named `name`.
    pub fn profile(&self, name: &str) -> Result<Profile, SettingsError> {
        let mut profile = Profile::new(name).map_err(|_| SettingsError::ProfileName(name.to_owned()))?;
        if let Some(callers) = &self.callers {
            profile = profile.callers(callers.iter().cloned());
        }
        if let Some(servers) = &self.servers {
            profile = profile.servers(servers.iter().cloned());
        }
        if let Some(overlay) = &self.policy {
            let config = PolicyConfig {
                default: overlay.default,
                rules: overlay.rules.clone(),
                resources: overlay.resources.clone(),
            };
            let policy =
                Policy::new(config).map_err(|source| SettingsError::ProfilePolicy { name: name.to_owned(), source })?;
            profile = profile.overlay(policy);
        }
        Ok(profile)
    }
}

/// `[serve.audit]`: the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AuditSettings {
    /// The file (created 0600).
    pub path: PathBuf,
    /// Rotate past this many bytes (default 64 MiB).
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Rotated files kept (default 5).
    #[serde(default)]
    pub keep: Option<u32>,
    /// `"digest"` (default) or `"values"`: whether arguments' values are written.
    #[serde(default)]
    pub arguments: AuditArguments,
}

impl AuditSettings {
    /// Opens the log.
    pub fn open(&self) -> Result<AuditLog, SettingsError> {
        let defaults = AuditOptions::default();
        let options = AuditOptions::new(
            self.max_bytes.unwrap_or(defaults.max_bytes),
            self.keep.unwrap_or(defaults.keep),
            self.arguments,
        );
        AuditLog::open(&self.path, options).map_err(|source| SettingsError::Audit { path: self.path.clone(), source })
    }
}

/// `[serve.drain]`: what SIGTERM does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DrainSettings {
    /// Seconds new requests are still served after `/readyz` turned "not ready" (default 5).
    #[serde(default = "default_delay", deserialize_with = "seconds", serialize_with = "seconds_out")]
    pub delay_s: Duration,
    /// Seconds calls in flight may take to finish (default 30).
    #[serde(default = "default_timeout", deserialize_with = "seconds", serialize_with = "seconds_out")]
    pub timeout_s: Duration,
}

fn default_delay() -> Duration {
    DrainOptions::default().delay
}

fn default_timeout() -> Duration {
    DrainOptions::default().timeout
}

impl Default for DrainSettings {
    fn default() -> Self {
        Self { delay_s: default_delay(), timeout_s: default_timeout() }
    }
}

impl DrainSettings {
    /// The drain's options.
    pub fn options(&self) -> DrainOptions {
        DrainOptions::new(self.delay_s, self.timeout_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Caller;

    fn read(text: &str) -> Result<InboundSettings, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn settings_are_read_strictly_and_checked() {
        let empty = read("").unwrap_or_default();
        assert!(!empty.auth.is_configured());
        assert_eq!(empty.drain.options(), DrainOptions::default());
        assert!(empty.auth.authenticator(Arc::new(crate::clock::SystemClock)).map(|a| a.is_none()).unwrap_or(false));

        let typo = read("[auth]\ntoken = []").unwrap_err();
        assert!(typo.contains("unknown field `token`"), "{typo}");
        let negative = read("[drain]\ntimeout_s = -1").unwrap_err();
        assert!(negative.contains("not a number of seconds"), "{negative}");
        let huge = read("[drain]\ndelay_s = 1e19\ntimeout_s = 1e19").unwrap_err();
        assert!(huge.contains("from 0 to 604800"), "{huge}");
        let week = read("[drain]\ndelay_s = 604800\ntimeout_s = 604800").unwrap_or_default();
        assert_eq!(week.drain.delay_s, Duration::from_secs(604_800));
        let half = read("[drain]\ndelay_s = 0.5").unwrap_or_default();
        assert_eq!(half.drain.delay_s, Duration::from_millis(500));

        let plain_token = read("[auth]\ntokens = [{ name = \"a\", sha256 = \"let-me-in\" }]").unwrap_or_default();
        let refused = plain_token.auth.bearer_tokens().map(|_| ()).unwrap_err().to_string();
        assert!(refused.contains("serve.auth.tokens[0]") && !refused.contains("let-me-in"), "{refused}");

        let digest = BearerTokens::digest_of("s3cret");
        let good = read(&format!("[auth]\ntokens = [{{ name = \"bot\", sha256 = \"{digest}\", profile = \"ci\" }}]"))
            .unwrap_or_default();
        assert!(good.auth.bearer_tokens().map(|t| t.is_some_and(|t| !t.is_empty())).unwrap_or(false));

        let oauth = read(
            "[auth.oauth]\nissuer = \"https://idp\"\njwks_url = \"http://idp.example.com/jwks\"\nresource = \"https://gw/mcp\"",
        )
        .unwrap_or_default();
        let refused = oauth.auth.authenticator(Arc::new(crate::clock::SystemClock)).map(|_| ()).unwrap_err();
        assert!(refused.to_string().starts_with("serve.auth.oauth: the JWKS URL"), "{refused}");
    }

    #[test]
    fn tokens_come_from_a_digest_a_file_or_a_variable_never_shown() {
        let dir = std::env::temp_dir().join(format!("mcp-gateway-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        let file = dir.join("bot.token");
        std::fs::write(&file, "file-s3cret\n").unwrap_or_default();
        let settings =
            read(&format!("[auth]\ntokens = [{{ name = \"bot\", token_file = {:?} }}]", file.display().to_string()))
                .unwrap_or_default();
        // Readable by others: refused, saying how to fix it.
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap_or_default();
            let said = settings.auth.bearer_tokens().map(|_| ()).unwrap_err().to_string();
            assert!(said.contains("mode 644") && said.contains("chmod 600") && !said.contains("s3cret"), "{said}");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap_or_default();
        }
        assert!(settings.auth.bearer_tokens().map(|t| t.is_some_and(|t| !t.is_empty())).unwrap_or(false));
        let not_a_file =
            read(&format!("[auth]\ntokens = [{{ name = \"bot\", token_file = {:?} }}]", dir.display().to_string()))
                .unwrap_or_default();
        let said = not_a_file.auth.bearer_tokens().map(|_| ()).unwrap_err().to_string();
        assert!(said.contains("not a regular file"), "{said}");

        let missing =
            read("[auth]\ntokens = [{ name = \"bot\", token_file = \"/nonexistent/bot.token\" }]").unwrap_or_default();
        let said = missing.auth.bearer_tokens().map(|_| ()).unwrap_err().to_string();
        assert!(said.contains("serve.auth.tokens[0]") && said.contains("/nonexistent/bot.token"), "{said}");

        let unset = read("[auth]\ntokens = [{ name = \"bot\", token_env = \"MCP_GATEWAY_TEST_UNSET_TOKEN\" }]")
            .unwrap_or_default();
        let said = unset.auth.bearer_tokens().map(|_| ()).unwrap_err().to_string();
        assert!(said.contains("`MCP_GATEWAY_TEST_UNSET_TOKEN` is not set"), "{said}");

        let both = read(&format!(
            "[auth]\ntokens = [{{ name = \"bot\", sha256 = \"{}\", token_env = \"X\" }}]",
            BearerTokens::digest_of("x")
        ))
        .unwrap_or_default();
        let said = both.auth.bearer_tokens().map(|_| ()).unwrap_err().to_string();
        assert!(said.contains("exactly one of `sha256`, `token_env` and `token_file`"), "{said}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn profiles_become_profiles() {
        let settings = read(
            r#"
            [profiles.ci]
            callers = ["bot"]
            servers = ["git"]
            policy = { rules = [{ server = "git", tool = "push", decision = "deny" }] }
            [profiles.open]
            "#,
        )
        .unwrap_or_default();
        let profiles = settings.profiles().unwrap_or_default();
        assert_eq!(profiles.len(), 2);
        let ci = &profiles[0];
        assert!(ci.admits(&Caller::principal("bot")) && !ci.admits(&Caller::principal("eve")));
        assert!(!ci.admits(&Caller::local()), "a local caller has no principal to admit");
        assert!(ci.offers("git") && !ci.offers("files"));
        assert!(profiles[1].admits(&Caller::local()) && profiles[1].offers("files"));

        let bad = read("[profiles.\"a b\"]").unwrap_or_default();
        assert!(matches!(bad.profiles(), Err(SettingsError::ProfileName(_))));
        let bad_rule =
            read("[profiles.x]\npolicy = { rules = [{ server = \"\", tool = \"*\", decision = \"deny\" }] }")
                .unwrap_or_default();
        let said = bad_rule.profiles().map(|_| ()).unwrap_err().to_string();
        assert!(said.starts_with("serve.profiles.x.policy: "), "{said}");
    }
}
