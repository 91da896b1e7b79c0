//! Host policy: allow / confirm / deny per (server, tool). Pure: no I/O.
//!
//! A [`Policy`] is a list of rules, each a server pattern, a tool pattern and a [`Decision`],
//! plus a default decision for tools no rule matches (itself [`Decision::Confirm`] unless
//! configured).
//!
//! # Patterns
//!
//! Patterns are matched against the *raw* server name (as configured) and the *raw* tool name
//! (as the server sent it), case-sensitively. `*` matches any run of characters, `?` exactly one;
//! `[`, `]`, `{`, `}`, `\`, control characters and the empty pattern are refused.
//!
//! Built-in tools have no server. They are addressed only by the reserved server pattern
//! `@builtin` ([`BUILTIN_SERVER`]); a server glob, even `*`, never matches a built-in, so a rule
//! written for MCP servers cannot accidentally change what the host's own tools do.
//!
//! # Which rule wins
//!
//! Among the rules that match, the most specific wins. A rule's specificity is its server
//! pattern's specificity, then (only to break ties) its tool pattern's. A pattern's specificity is,
//! in turn: exact (no wildcard) beats any glob; then more literal characters; then more `?`; then
//! fewer `*`. `@builtin` counts as an exact server. If several equally specific rules match, the
//! strictest decision wins (deny > confirm > allow), so a tie never loosens anything; if they
//! also agree on the decision, the first one written is reported.
//!
//! # Untrusted claims
//!
//! What a server says about its tools (annotations such as `readOnlyHint`, or its description)
//! is handed to [`Policy::decide`] as [`ServerClaims`] so that callers pass everything they know,
//! but it is ignored by design: a server could claim anything, and the decision is the user's.
//!
//! # Example
//!
//! ```
//! use policy::{Decision, Policy, PolicyConfig, RuleConfig, ServerClaims};
//!
//! let config = PolicyConfig {
//!     default: Decision::Confirm,
//!     rules: vec![
//!         RuleConfig::new("git*", "*", Decision::Allow),
//!         RuleConfig::new("github", "delete_*", Decision::Deny),
//!         RuleConfig::new("@builtin", "read_file", Decision::Allow),
//!     ],
//!     ..PolicyConfig::default()
//! };
//! let policy = Policy::new(config)?;
//!
//! let v = policy.decide(Some("github"), "list_issues", &ServerClaims::default());
//! assert_eq!(v.decision, Decision::Allow);
//! assert_eq!(v.source.to_string(), r#"rule 0 (server "git*", tool "*")"#);
//!
//! // Server "github" is named exactly by rule 1, which beats the glob of rule 0.
//! let v = policy.decide(Some("github"), "delete_repo", &ServerClaims::default());
//! assert_eq!(v.decision, Decision::Deny);
//!
//! // A server claiming its tool is harmless changes nothing.
//! let claims = ServerClaims { read_only_hint: Some(true), ..ServerClaims::default() };
//! assert_eq!(policy.decide(Some("docs"), "search", &claims).decision, Decision::Confirm);
//! assert_eq!(policy.decide(Some("docs"), "search", &claims).source.to_string(), "default");
//!
//! // Built-ins are addressed with `@builtin` (server `None`).
//! assert_eq!(policy.decide(None, "read_file", &ServerClaims::default()).decision, Decision::Allow);
//! assert_eq!(policy.decide(None, "shell", &ServerClaims::default()).decision, Decision::Confirm);
//! # Ok::<(), policy::PolicyError>(())
//! ```
//!
//! # Resources
//!
//! Resource rules (`resources` in the configuration) name MCP resources by server pattern and
//! URI pattern (the same `*` / `?` patterns, matched against the whole URI as the server listed
//! it, or a template's URI template). They do not replace the decision of the host's tool that
//! reads or lists resources: [`Policy::decide_resource`] gives the winning resource rule, if
//! any, and the caller applies the stricter of the two. The most specific rule wins as for
//! tools (server pattern first, then the URI pattern; ties to the strictest). No matching rule
//! means no further restriction.
//!
//! ```
//! use policy::{Decision, Policy, PolicyConfig, ResourceRuleConfig};
//!
//! let mut config = PolicyConfig::default();
//! config.resources = vec![ResourceRuleConfig::new("docs", "file:///secret/*", Decision::Deny)];
//! let policy = Policy::new(config)?;
//! let v = policy.decide_resource("docs", "file:///secret/key").unwrap();
//! assert_eq!(v.decision, Decision::Deny);
//! assert_eq!(v.source.to_string(), r#"resource rule 0 (server "docs", uri "file:///secret/*")"#);
//! assert!(policy.decide_resource("docs", "file:///public/readme").is_none());
//! # Ok::<(), policy::PolicyError>(())
//! ```
//!
//! # Overlays
//!
//! [`Policy::narrowed`] puts an overlay over a policy (the gateway's profiles have one each):
//! every tool and resource is then decided by the stricter of the two, whatever the
//! specificity of either's rules, so an overlay can only make decisions stricter. A decision the
//! overlay made says so: `rule 0 (server "*", tool "write_*") of profile "ci"`.
//!
//! The configuration deserializes from TOML or JSON shaped like
//! `{ default = "confirm", rules = [{ server = "git*", tool = "*", decision = "allow" }] }`;
//! [`Policy`] itself deserializes through [`PolicyConfig`], validating the patterns.

mod pattern;

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize, Serializer};
use thiserror::Error;

use pattern::ServerPattern;
pub use pattern::{BUILTIN_SERVER, Pattern, PatternError, Specificity};

/// What the host does when the model calls a tool.
///
/// Ordered by strictness: `Allow < Confirm < Deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run without asking.
    Allow,
    /// Ask the user first.
    Confirm,
    /// Never run; the tool is not even shown to the model.
    Deny,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Allow => "allow",
            Self::Confirm => "confirm",
            Self::Deny => "deny",
        })
    }
}

/// One rule as written in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Server pattern, or `@builtin` for built-in tools.
    pub server: String,
    /// Tool pattern.
    pub tool: String,
    /// What to do with matching tools.
    pub decision: Decision,
}

impl RuleConfig {
    /// A rule from its parts.
    pub fn new(server: impl Into<String>, tool: impl Into<String>, decision: Decision) -> Self {
        Self { server: server.into(), tool: tool.into(), decision }
    }
}

/// One resource rule as written in the configuration (see the crate docs, "Resources").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceRuleConfig {
    /// Server pattern (`@builtin` is refused: built-ins have no resources).
    pub server: String,
    /// URI pattern, matched against the whole URI.
    pub uri: String,
    /// What to do with matching resources: `deny` also hides them from listings.
    pub decision: Decision,
}

impl ResourceRuleConfig {
    /// A resource rule from its parts.
    pub fn new(server: impl Into<String>, uri: impl Into<String>, decision: Decision) -> Self {
        Self { server: server.into(), uri: uri.into(), decision }
    }
}

/// The policy configuration: `{ default = "confirm", rules = [...], resources = [...] }`.
///
/// Unknown fields are refused so that a typo cannot silently drop a rule's intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Decision when no rule matches; `confirm` when omitted.
    #[serde(default = "default_decision")]
    pub default: Decision,
    /// The rules, in any order (order only picks which of two identical rules is reported).
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// Rules over resources by server and URI pattern (see the crate docs, "Resources").
    #[serde(default)]
    pub resources: Vec<ResourceRuleConfig>,
}

fn default_decision() -> Decision {
    Decision::Confirm
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self { default: default_decision(), rules: Vec::new(), resources: Vec::new() }
    }
}

/// Which pattern of a rule was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatternField {
    /// The `server` pattern.
    Server,
    /// The `tool` pattern.
    Tool,
    /// The `uri` pattern of a resource rule.
    Uri,
}

impl fmt::Display for PatternField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Server => "server",
            Self::Tool => "tool",
            Self::Uri => "uri",
        })
    }
}

/// A configuration that cannot become a [`Policy`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A rule's pattern is invalid.
    #[error("rule {index}: invalid {field} pattern {pattern:?}: {reason}")]
    InvalidPattern {
        /// Index of the rule in `rules`, counting from 0.
        index: usize,
        /// Which of its patterns.
        field: PatternField,
        /// The pattern as written.
        pattern: String,
        /// Why it was refused.
        #[source]
        reason: PatternError,
    },
    /// A resource rule's pattern is invalid.
    #[error("resource rule {index}: invalid {field} pattern {pattern:?}: {reason}")]
    InvalidResourcePattern {
        /// Index of the rule in `resources`, counting from 0.
        index: usize,
        /// Which of its patterns.
        field: PatternField,
        /// The pattern as written.
        pattern: String,
        /// Why it was refused.
        #[source]
        reason: PatternError,
    },
}

/// What a server claims about one of its tools. Accepted and ignored: see the crate docs.
///
/// Mirrors MCP's `ToolAnnotations` without depending on the protocol crate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerClaims<'a> {
    /// `readOnlyHint`.
    pub read_only_hint: Option<bool>,
    /// `destructiveHint`.
    pub destructive_hint: Option<bool>,
    /// `idempotentHint`.
    pub idempotent_hint: Option<bool>,
    /// `openWorldHint`.
    pub open_world_hint: Option<bool>,
    /// The tool's description.
    pub description: Option<&'a str>,
}

/// The rule behind a decision, for `tools` output and approval prompts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuleRef {
    /// Index of the rule in the configuration's `rules`, counting from 0.
    pub index: usize,
    /// Its server pattern as written.
    pub server: Arc<str>,
    /// Its tool pattern as written.
    pub tool: Arc<str>,
}

/// The resource rule behind a decision.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceRuleRef {
    /// Index of the rule in the configuration's `resources`, counting from 0.
    pub index: usize,
    /// Its server pattern as written.
    pub server: Arc<str>,
    /// Its URI pattern as written.
    pub uri: Arc<str>,
}

/// Where a decision came from.
///
/// Displays (and serializes) as `rule 2 (server "git*", tool "*")`, `default`,
/// `enabled_tools of server "git" (not listed)`, `disabled_tools of server "git"`,
/// `resource rule 0 (server "docs", uri "file:///*")` or, for an overlay,
/// `rule 0 (server "git", tool "*") of profile "ci"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecisionSource {
    /// No rule matched.
    Default,
    /// This rule matched.
    Rule(RuleRef),
    /// The server's [`ToolFilter`] leaves the tool out (always a denial).
    Filter {
        /// The server whose filter it is.
        server: Arc<str>,
        /// Which of its lists decided.
        list: FilterList,
    },
    /// This resource rule matched.
    Resource(ResourceRuleRef),
    /// An overlay that narrows the policy (a gateway profile's) decided, by its own source.
    Overlay {
        /// Whose overlay (`profile "ci"`), as given to [`Policy::narrowed`].
        label: Arc<str>,
        /// The overlay's own rule, or its default.
        source: Box<DecisionSource>,
    },
}

/// Which list of a [`ToolFilter`] denied a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterList {
    /// `enabled` is set and does not name the tool.
    Enabled,
    /// `disabled` names the tool.
    Disabled,
}

impl fmt::Display for DecisionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::Rule(r) => write!(f, "rule {} (server {:?}, tool {:?})", r.index, r.server, r.tool),
            Self::Filter { server, list: FilterList::Enabled } => {
                write!(f, "enabled_tools of server {server:?} (not listed)")
            }
            Self::Filter { server, list: FilterList::Disabled } => write!(f, "disabled_tools of server {server:?}"),
            Self::Resource(r) => write!(f, "resource rule {} (server {:?}, uri {:?})", r.index, r.server, r.uri),
            Self::Overlay { label, source } => write!(f, "{source} of {label}"),
        }
    }
}

/// Which of one server's tools are offered at all: a configuration's `enabled_tools` and
/// `disabled_tools`. A tool it leaves out is denied before any rule is looked at, so no rule
/// can bring it back; a tool it keeps is decided by the rules as usual.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// When set, only these tools (exact names).
    pub enabled: Option<Vec<String>>,
    /// Never these tools (exact names), whatever `enabled` says.
    pub disabled: Vec<String>,
}

impl ToolFilter {
    /// The list that leaves `tool` out, if one does.
    fn excludes(&self, tool: &str) -> Option<FilterList> {
        if self.disabled.iter().any(|t| t == tool) {
            Some(FilterList::Disabled)
        } else if self.enabled.as_ref().is_some_and(|e| !e.iter().any(|t| t == tool)) {
            Some(FilterList::Enabled)
        } else {
            None
        }
    }
}

impl Serialize for DecisionSource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A decision and the rule that made it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Verdict {
    /// What to do.
    pub decision: Decision,
    /// Why.
    pub source: DecisionSource,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} by {}", self.decision, self.source)
    }
}

#[derive(Debug, Clone)]
struct Rule {
    server: ServerPattern,
    tool: Pattern,
    decision: Decision,
    source: RuleRef,
}

#[derive(Debug, Clone)]
struct ResourceRule {
    server: Pattern,
    uri: Pattern,
    decision: Decision,
    source: ResourceRuleRef,
}

/// A validated policy. `Policy::default()` confirms everything.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "PolicyConfig")]
pub struct Policy {
    default: Decision,
    /// Sorted so that the first match is the winner: most specific first, then strictest, then
    /// as written.
    rules: Vec<Rule>,
    /// Per server (exact name): the tools offered at all.
    filters: Vec<(Arc<str>, ToolFilter)>,
    /// Resource rules, in the same winning order as `rules`.
    resources: Vec<ResourceRule>,
    /// Servers (exact names) whose `instructions` are not given to the model.
    instructions_off: Vec<Arc<str>>,
    /// Servers (exact names) whose elicitation requests are declined without asking anyone.
    elicitation_off: Vec<Arc<str>>,
    /// Overlays that narrow this policy ([`Policy::narrowed`]), each with its label.
    overlays: Vec<(Arc<str>, Policy)>,
}

impl Default for Policy {
    fn default() -> Self {
        Self::uniform(default_decision())
    }
}

impl TryFrom<PolicyConfig> for Policy {
    type Error = PolicyError;

    fn try_from(config: PolicyConfig) -> Result<Self, Self::Error> {
        Self::new(config)
    }
}

impl Policy {
    /// Validates `config`; the first invalid pattern is reported with its rule index.
    pub fn new(config: PolicyConfig) -> Result<Self, PolicyError> {
        let invalid = |index, field, pattern: &str, reason| PolicyError::InvalidPattern {
            index,
            field,
            pattern: pattern.to_owned(),
            reason,
        };
        let mut rules = Vec::with_capacity(config.rules.len());
        for (index, rc) in config.rules.into_iter().enumerate() {
            let server =
                ServerPattern::new(&rc.server).map_err(|e| invalid(index, PatternField::Server, &rc.server, e))?;
            let tool = Pattern::new(&rc.tool).map_err(|e| invalid(index, PatternField::Tool, &rc.tool, e))?;
            let source = RuleRef { index, server: rc.server.into(), tool: rc.tool.into() };
            rules.push(Rule { server, tool, decision: rc.decision, source });
        }
        // Sorting once makes `decide` a first-match scan.
        rules.sort_by_key(|r| winning_order(r.server.specificity(), r.tool.specificity(), r.decision, r.source.index));
        let mut resources = Vec::with_capacity(config.resources.len());
        for (index, rc) in config.resources.into_iter().enumerate() {
            let invalid = |field, pattern: &str, reason| PolicyError::InvalidResourcePattern {
                index,
                field,
                pattern: pattern.to_owned(),
                reason,
            };
            // Built-ins have no resources, and `@` stays reserved.
            let server =
                if rc.server.starts_with('@') { Err(PatternError::ReservedPrefix) } else { Pattern::new(&rc.server) }
                    .map_err(|e| invalid(PatternField::Server, &rc.server, e))?;
            let uri = Pattern::new(&rc.uri).map_err(|e| invalid(PatternField::Uri, &rc.uri, e))?;
            let source = ResourceRuleRef { index, server: rc.server.into(), uri: rc.uri.into() };
            resources.push(ResourceRule { server, uri, decision: rc.decision, source });
        }
        resources
            .sort_by_key(|r| winning_order(r.server.specificity(), r.uri.specificity(), r.decision, r.source.index));
        Ok(Self {
            default: config.default,
            rules,
            filters: Vec::new(),
            resources,
            instructions_off: Vec::new(),
            elicitation_off: Vec::new(),
            overlays: Vec::new(),
        })
    }

    /// A policy with no rules that decides `decision` for everything.
    pub fn uniform(decision: Decision) -> Self {
        Self {
            default: decision,
            rules: Vec::new(),
            filters: Vec::new(),
            resources: Vec::new(),
            instructions_off: Vec::new(),
            elicitation_off: Vec::new(),
            overlays: Vec::new(),
        }
    }

    /// This policy narrowed by `overlay` (a gateway profile's policy, labelled `label`, say
    /// `profile "ci"`): every tool and resource is decided by the stricter of the two, so an
    /// overlay can make decisions stricter and never looser. Where the overlay is stricter, its
    /// source is reported as [`DecisionSource::Overlay`]; at equal strictness this policy's own
    /// source is. This policy's hooks (tool filters, instructions, elicitation) stay; the
    /// overlay's are ignored. An overlay that should only tighten some tools has the default
    /// `allow`.
    #[must_use]
    pub fn narrowed(mut self, label: &str, overlay: Policy) -> Self {
        self.overlays.push((label.into(), overlay));
        self
    }

    /// `verdict`, or an overlay's where one is stricter.
    fn narrow(&self, verdict: Verdict, decide: impl Fn(&Policy) -> Verdict) -> Verdict {
        self.overlays.iter().fold(verdict, |verdict, (label, overlay)| stricter(verdict, label, decide(overlay)))
    }

    /// This policy with server `server`'s (exact name) `instructions` kept from the model.
    #[must_use]
    pub fn without_instructions(mut self, server: &str) -> Self {
        if self.allows_instructions(server) {
            self.instructions_off.push(server.into());
        }
        self
    }

    /// Whether server `server`'s `instructions` may be given to the model (yes, unless
    /// [`Policy::without_instructions`] said otherwise).
    pub fn allows_instructions(&self, server: &str) -> bool {
        !self.instructions_off.iter().any(|s| &**s == server)
    }

    /// This policy with server `server`'s (exact name) elicitation requests declined without
    /// asking anyone (and elicitation not declared to it).
    #[must_use]
    pub fn without_elicitation(mut self, server: &str) -> Self {
        if self.allows_elicitation(server) {
            self.elicitation_off.push(server.into());
        }
        self
    }

    /// Whether server `server` may ask the user for input (elicitation): yes, unless
    /// [`Policy::without_elicitation`] said otherwise.
    pub fn allows_elicitation(&self, server: &str) -> bool {
        !self.elicitation_off.iter().any(|s| &**s == server)
    }

    /// The resource rule that decides resource `uri` of `server`, if one matches (see the
    /// crate docs, "Resources": the caller applies the stricter of this and its tool's
    /// decision). `uri` may be a template's URI template.
    pub fn decide_resource(&self, server: &str, uri: &str) -> Option<Verdict> {
        let own = self
            .resources
            .iter()
            .find(|r| r.server.matches(server) && r.uri.matches(uri))
            .map(|rule| Verdict { decision: rule.decision, source: DecisionSource::Resource(rule.source.clone()) });
        self.overlays.iter().fold(own, |verdict, (label, overlay)| {
            match (verdict, overlay.decide_resource(server, uri)) {
                (Some(verdict), Some(theirs)) => Some(stricter(verdict, label, theirs)),
                (None, Some(theirs)) => {
                    Some(Verdict { decision: theirs.decision, source: overlaid(label, theirs.source) })
                }
                (verdict, None) => verdict,
            }
        })
    }

    /// Whether any resource rule is configured (an overlay's included).
    pub fn has_resource_rules(&self) -> bool {
        !self.resources.is_empty() || self.overlays.iter().any(|(_, o)| o.has_resource_rules())
    }

    /// This policy with `filter` applied to the tools of server `server` (its exact name),
    /// replacing an earlier filter of that server.
    #[must_use]
    pub fn with_tool_filter(mut self, server: &str, filter: ToolFilter) -> Self {
        self.filters.retain(|(s, _)| &**s != server);
        self.filters.push((server.into(), filter));
        self
    }

    fn filter_of(&self, server: Option<&str>) -> Option<(&Arc<str>, &ToolFilter)> {
        let server = server?;
        self.filters.iter().find(|(s, _)| &**s == server).map(|(s, f)| (s, f))
    }

    /// The decision when no rule matches.
    pub fn default_decision(&self) -> Decision {
        self.default
    }

    /// Number of rules.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Decides a call of `tool` on `server` (`None` for a built-in tool).
    ///
    /// `claims` is deliberately ignored (see the crate docs); it is taken so that call sites
    /// hand over what the server said and tests can show it makes no difference.
    pub fn decide(&self, server: Option<&str>, tool: &str, claims: &ServerClaims<'_>) -> Verdict {
        let _ignored_by_design = claims;
        if let Some(verdict) = filtered(self.filter_of(server), tool) {
            return verdict;
        }
        let rule = self.rules.iter().find(|r| r.server.matches(server) && r.tool.matches(tool));
        self.narrow(self.verdict(rule), |overlay| overlay.decide(server, tool, claims))
    }

    /// The rules that can apply to `server` (`None` for built-ins), for deciding many of its
    /// tools without matching the server pattern of every rule for each of them.
    pub fn for_server(&self, server: Option<&str>) -> ServerRules<'_> {
        ServerRules {
            policy: self,
            rules: self.rules.iter().filter(|r| r.server.matches(server)).collect(),
            filter: self.filter_of(server),
            overlays: self.overlays.iter().map(|(label, o)| (label, o.for_server(server))).collect(),
        }
    }

    fn verdict(&self, rule: Option<&Rule>) -> Verdict {
        match rule {
            None => Verdict { decision: self.default, source: DecisionSource::Default },
            Some(r) => Verdict { decision: r.decision, source: DecisionSource::Rule(r.source.clone()) },
        }
    }
}

/// `verdict`, or the overlay `label`'s verdict `theirs` when it is stricter.
fn stricter(verdict: Verdict, label: &Arc<str>, theirs: Verdict) -> Verdict {
    if theirs.decision > verdict.decision {
        Verdict { decision: theirs.decision, source: overlaid(label, theirs.source) }
    } else {
        verdict
    }
}

fn overlaid(label: &Arc<str>, source: DecisionSource) -> DecisionSource {
    DecisionSource::Overlay { label: Arc::clone(label), source: Box::new(source) }
}

/// The sort key that puts the winning rule first: the most specific server pattern, then the
/// most specific other pattern, then the strictest decision, then the first written.
fn winning_order(
    server: Specificity,
    other: Specificity,
    decision: Decision,
    index: usize,
) -> (std::cmp::Reverse<(Specificity, Specificity, Decision)>, usize) {
    (std::cmp::Reverse((server, other, decision)), index)
}

/// A [`Policy`] narrowed to one server: [`ServerRules::decide`] equals [`Policy::decide`] for
/// that server.
#[derive(Debug, Clone)]
pub struct ServerRules<'a> {
    policy: &'a Policy,
    /// Still in the policy's winning order.
    rules: Vec<&'a Rule>,
    filter: Option<(&'a Arc<str>, &'a ToolFilter)>,
    /// The overlays' rules for the same server.
    overlays: Vec<(&'a Arc<str>, ServerRules<'a>)>,
}

/// The denial of `tool` by a server's filter, if it leaves the tool out.
fn filtered(filter: Option<(&Arc<str>, &ToolFilter)>, tool: &str) -> Option<Verdict> {
    let (server, filter) = filter?;
    let list = filter.excludes(tool)?;
    Some(Verdict { decision: Decision::Deny, source: DecisionSource::Filter { server: Arc::clone(server), list } })
}

impl ServerRules<'_> {
    /// Decides a call of `tool` on this server; `claims` is ignored like in [`Policy::decide`].
    pub fn decide(&self, tool: &str, claims: &ServerClaims<'_>) -> Verdict {
        let _ignored_by_design = claims;
        if let Some(verdict) = filtered(self.filter, tool) {
            return verdict;
        }
        let rule = self.rules.iter().copied().find(|r| r.tool.matches(tool));
        let verdict = self.policy.verdict(rule);
        self.overlays
            .iter()
            .fold(verdict, |verdict, (label, overlay)| stricter(verdict, label, overlay.decide(tool, claims)))
    }
}

#[cfg(test)]
mod tests;
