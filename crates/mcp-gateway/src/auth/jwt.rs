//! The gateway as an OAuth resource server: access tokens are JWTs, checked against the keys
//! the issuer publishes (its JWKS, fetched over HTTPS and cached).
//!
//! A token passes when, in order: its header names an asymmetric algorithm this gateway
//! accepts (never `none`, never an HMAC one: a JWKS is public) and no critical extension; the
//! issuer's key it names (`kid`; without one, the only key that fits) allows that algorithm
//! (the key's own `alg` when it has one, else its type and curve); the signature verifies;
//! `iss` is the issuer; `aud` names the resource being reached (the gateway's resource URI, a
//! profile's under it, or a configured extra audience); `exp` is in the future and `nbf` in
//! the past, both give or take the leeway; the token carries every scope required.
//!
//! Keys are fetched when first needed, again when the cached set is older than its maximum
//! age, and again when a token names a key the set does not have (the issuer rotated its
//! keys), at most once per minimum interval however many such tokens arrive: a flood of made-up
//! `kid`s costs the issuer nothing. A set that cannot be fetched leaves the one cached in use
//! for as long as one fetch may take past its age; after that tokens are refused with 503 until
//! a fetch succeeds (a key revoked meanwhile must not pass).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use mcp_safety::text;
use serde_json::{Map, Value};
use url::Url;

use super::metadata::{BadResource, ProtectedResource};
use super::{Unauthorized, UnauthorizedKind};
use crate::backend::Caller;
use crate::clock::Clock;
use crate::session::lock;

/// Largest JWKS document read.
const MAX_JWKS_BYTES: usize = 512 * 1024;
/// Most keys kept from one document.
const MAX_KEYS: usize = 100;
/// Longest principal kept from a token.
const MAX_PRINCIPAL_BYTES: usize = 1024;

/// Whether a subject is taken as the caller's name: not blank, no spaces at its ends (which
/// read as another name), no controls (a newline would end a line of the caller's key) and no
/// direction characters (which make it read as another); within [`MAX_PRINCIPAL_BYTES`].
fn plain_subject(subject: &str) -> bool {
    !subject.is_empty()
        && subject.len() <= MAX_PRINCIPAL_BYTES
        && subject.trim() == subject
        && !subject.chars().any(|c| c.is_control() || text::is_direction(c))
}

/// How the OAuth resource server checks tokens.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JwtOptions {
    /// The issuer (`iss` must equal it).
    pub issuer: String,
    /// Where its keys are published (`https`, or `http` on loopback only).
    pub jwks_url: Url,
    /// The gateway's resource URI (`https://gw.example.com/mcp`): the audience tokens must name,
    /// and the `resource` of its metadata. A profile's resource URI is this followed by
    /// `/NAME`.
    pub resource: String,
    /// Further audiences accepted everywhere.
    pub audiences: Vec<String>,
    /// The algorithms accepted (names as in JWS: `RS256`, `ES256`, `EdDSA`, ...); empty: every
    /// asymmetric one a key allows.
    pub algorithms: Vec<String>,
    /// Scopes every token must carry (`scope`, space-separated, or `scp`).
    pub scopes: Vec<String>,
    /// The claim naming the caller (`sub`).
    pub principal_claim: String,
    /// A claim naming the profile the caller is tied to, if tokens carry one.
    pub profile_claim: Option<String>,
    /// Clock skew tolerated on `exp` and `nbf`.
    pub leeway: Duration,
    /// How long a fetched key set is used before it is fetched again (for as long as one fetch
    /// may take after that, requests go on with it while the new one is fetched; later ones
    /// wait for it, and are refused with 503 while it cannot be fetched).
    pub jwks_max_age: Duration,
    /// The least time between two fetches (a token naming an unknown key fetches again only
    /// this long after the last fetch). At most `jwks_max_age`: an old set is always fetched
    /// again in time.
    pub jwks_min_interval: Duration,
    /// How long one fetch may take.
    pub fetch_timeout: Duration,
}

impl JwtOptions {
    /// Options for tokens of `issuer`, whose keys are at `jwks_url`, for the gateway at
    /// `resource`; the rest default (30 s leeway, keys kept an hour, fetched at most every 30 s).
    pub fn new(issuer: impl Into<String>, jwks_url: Url, resource: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            jwks_url,
            resource: resource.into(),
            audiences: Vec::new(),
            algorithms: Vec::new(),
            scopes: Vec::new(),
            principal_claim: "sub".to_owned(),
            profile_claim: None,
            leeway: Duration::from_secs(30),
            jwks_max_age: Duration::from_secs(3600),
            jwks_min_interval: Duration::from_secs(30),
            fetch_timeout: Duration::from_secs(10),
        }
    }
}

/// Why an OAuth resource server could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwtError {
    /// The resource URI is not one.
    #[error(transparent)]
    Resource(#[from] BadResource),
    /// The JWKS URL is plain `http` to another host than loopback.
    #[error("the JWKS URL {0} is not https: keys must come over https (plain http only on loopback)")]
    InsecureJwks(String),
    /// An algorithm that is unknown, symmetric or `none`.
    #[error(
        "algorithm {0:?} is not accepted: name asymmetric JWS algorithms (RS256, RS384, RS512, PS256, PS384, \
         PS512, ES256, ES384, EdDSA); `none` and HMAC ones never are"
    )]
    Algorithm(String),
    /// The HTTP client could not be made.
    #[error("the HTTP client for the JWKS could not be made: {0}")]
    Client(String),
}

/// One usable key of the issuer's set.
#[derive(Clone)]
struct Key {
    kid: Option<String>,
    /// The key's own `alg`, if it says.
    alg: Option<Algorithm>,
    family: AlgorithmFamily,
    curve: Option<EllipticCurve>,
    key: DecodingKey,
}

impl Key {
    fn from_jwk(jwk: &Jwk) -> Option<Key> {
        // Keys for encryption are not for checking signatures.
        if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
            return None;
        }
        let (family, curve) = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => (AlgorithmFamily::Rsa, None),
            AlgorithmParameters::EllipticCurve(p) => (AlgorithmFamily::Ec, Some(p.curve.clone())),
            AlgorithmParameters::OctetKeyPair(p) => (AlgorithmFamily::Ed, Some(p.curve.clone())),
            // A symmetric key in a public set would let anyone who read it sign tokens.
            _ => return None,
        };
        let alg = match jwk.common.key_algorithm {
            None => None,
            Some(alg) => Some(Algorithm::try_from(alg).ok()?),
        };
        let key = DecodingKey::from_jwk(jwk).ok()?;
        Some(Key { kid: jwk.common.key_id.clone(), alg, family, curve, key })
    }

    /// Whether this key may check a signature made with `alg`.
    fn allows(&self, alg: Algorithm) -> bool {
        if self.alg.is_some_and(|own| own != alg) || self.family != alg.family() {
            return false;
        }
        match (alg, &self.curve) {
            (Algorithm::ES256, Some(curve)) => *curve == EllipticCurve::P256,
            (Algorithm::ES384, Some(curve)) => *curve == EllipticCurve::P384,
            (Algorithm::EdDSA, Some(curve)) => *curve == EllipticCurve::Ed25519,
            (_, None) => self.family == AlgorithmFamily::Rsa,
            _ => false,
        }
    }
}

/// The cached key set.
#[derive(Default)]
struct Cached {
    keys: Arc<[Key]>,
    /// When the set in use was fetched.
    fetched_ms: Option<u64>,
    /// When a fetch was last tried.
    tried_ms: Option<u64>,
    /// How many fetches have ended, well or not.
    ended: u64,
    /// Why the last fetch failed, if it did.
    failure: Option<String>,
    /// How many fetches were tried.
    fetches: u64,
}

/// The issuer's keys, fetched and cached.
struct Jwks {
    url: Url,
    http: reqwest::Client,
    max_age_ms: u64,
    min_interval_ms: u64,
    fetch_timeout_ms: u64,
    cached: Mutex<Cached>,
    /// Held while fetching: concurrent requests for a fetch wait for the one under way.
    fetching: tokio::sync::Mutex<()>,
    /// Set while a refresh of a set that is old (not missing) runs behind the requests.
    refreshing_behind: std::sync::atomic::AtomicBool,
}

/// What a key lookup found.
enum Lookup {
    Found(Key),
    /// No key by that `kid` (or, without one, no single key that fits).
    Unknown(String),
    /// A key that cannot check this algorithm.
    Unfit(String),
}

fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl Jwks {
    /// The set in use, when it was fetched, and how many fetches had ended then.
    fn snapshot(&self) -> (Arc<[Key]>, Option<u64>, u64) {
        let cached = lock(&self.cached);
        (Arc::clone(&cached.keys), cached.fetched_ms, cached.ended)
    }

    fn lookup(keys: &[Key], kid: Option<&str>, alg: Algorithm) -> Lookup {
        match kid {
            Some(kid) => match keys.iter().find(|k| k.kid.as_deref() == Some(kid)) {
                Some(key) if key.allows(alg) => Lookup::Found(key.clone()),
                Some(_) => Lookup::Unfit(format!("the issuer's key {kid:?} is not for {alg:?} signatures")),
                None => Lookup::Unknown(format!("the token's key {kid:?} is not one the issuer publishes")),
            },
            None => {
                let mut fitting = keys.iter().filter(|k| k.allows(alg));
                match (fitting.next(), fitting.next()) {
                    (Some(key), None) => Lookup::Found(key.clone()),
                    (None, _) => Lookup::Unknown(format!("the issuer publishes no key for {alg:?} signatures")),
                    (Some(_), Some(_)) => Lookup::Unfit(
                        "the token names no key (kid) and the issuer publishes several that could fit".to_owned(),
                    ),
                }
            }
        }
    }

    /// Fetches the set again unless one was tried less than the minimum interval ago, or one
    /// ended after the caller looked (`seen`: the count of ended fetches it saw; a fetch under
    /// way then, which the caller waited for, counts). `true` when the set in use changed or
    /// may have. On a task of its own where there is a runtime: a fetch whose request was
    /// dropped (its client went away) ends all the same, for the requests waiting behind it,
    /// which would otherwise find it tried and not fetch again for the minimum interval.
    async fn refresh(self: &Arc<Self>, now_ms: u64, seen: u64) -> bool {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let jwks = Arc::clone(self);
                runtime.spawn(async move { jwks.refresh_here(now_ms, seen).await }).await.unwrap_or(false)
            }
            Err(_) => self.refresh_here(now_ms, seen).await,
        }
    }

    /// [`Jwks::refresh`] on the caller's task.
    async fn refresh_here(&self, now_ms: u64, seen: u64) -> bool {
        let _one_at_a_time = self.fetching.lock().await;
        {
            let mut cached = lock(&self.cached);
            if cached.ended != seen {
                // A fetch ended since the caller looked (one it waited for, say): it stands.
                return true;
            }
            if let Some(tried) = cached.tried_ms
                && now_ms.saturating_sub(tried) < self.min_interval_ms
            {
                return false;
            }
            cached.tried_ms = Some(now_ms);
            cached.fetches += 1;
        }
        let fetched = self.fetch().await;
        let mut cached = lock(&self.cached);
        cached.ended += 1;
        match fetched {
            Ok(keys) => {
                cached.keys = keys.into();
                cached.fetched_ms = Some(now_ms);
                cached.failure = None;
            }
            Err(why) => {
                tracing::warn!(url = %self.url, "the issuer's keys could not be fetched: {why}");
                cached.failure = Some(why);
            }
        }
        true
    }

    async fn fetch(&self) -> Result<Vec<Key>, String> {
        let mut response = self
            .http
            .get(self.url.clone())
            .header(http::header::ACCEPT, "application/jwk-set+json, application/json")
            .send()
            .await
            .map_err(|e| format!("the request failed: {}", mcp_safety::text::one_line(&e.to_string(), 300)))?;
        if !response.status().is_success() {
            return Err(format!("the issuer answered {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("reading the answer failed: {e}"))? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(format!("the key set is larger than {MAX_JWKS_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        parse_jwks(&body)
    }
}

/// The usable keys of a JWKS document (keys this gateway cannot use are skipped).
fn parse_jwks(body: &[u8]) -> Result<Vec<Key>, String> {
    #[derive(serde::Deserialize)]
    struct Set {
        keys: Vec<Value>,
    }
    let set: Set = serde_json::from_slice(body).map_err(|e| format!("the key set is not a JWKS document: {e}"))?;
    Ok(set
        .keys
        .into_iter()
        .filter_map(|value| serde_json::from_value::<Jwk>(value).ok())
        .filter_map(|jwk| Key::from_jwk(&jwk))
        .take(MAX_KEYS)
        .collect())
}

/// The OAuth resource server: JWT access tokens checked against the issuer's JWKS.
pub struct JwtAuthenticator {
    options: JwtOptions,
    algorithms: Vec<Algorithm>,
    resource: ProtectedResource,
    clock: Arc<dyn Clock>,
    jwks: Arc<Jwks>,
}

impl fmt::Debug for JwtAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtAuthenticator")
            .field("issuer", &self.options.issuer)
            .field("resource", &self.options.resource)
            .finish_non_exhaustive()
    }
}

fn invalid(reason: impl Into<String>) -> Unauthorized {
    Unauthorized::new(UnauthorizedKind::InvalidToken, reason)
}

/// A URI in the form audiences are compared in (canonical when it is an http(s) URL).
fn audience_form(aud: &str) -> String {
    Url::parse(aud)
        .ok()
        .and_then(|url| mcp_auth::resource::canonical_resource(&url).ok())
        .unwrap_or_else(|| aud.to_owned())
}

/// A claim that is a string or a list of strings, as its strings.
fn strings(value: Option<&Value>) -> Vec<&str> {
    match value {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

impl JwtAuthenticator {
    /// Checks `options` (the resource URI, an https JWKS URL, the algorithms); keys are fetched
    /// when first needed. Time comes from `clock`.
    pub fn new(options: JwtOptions, clock: Arc<dyn Clock>) -> Result<Self, JwtError> {
        // jsonwebtoken panics on its first use when it cannot tell which crypto backend to use
        // (both of its features enabled somewhere in a build): name ours. An error means one
        // was installed already, which is as good.
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
        if !mcp_auth::flow::is_secure_endpoint(&options.jwks_url) {
            return Err(JwtError::InsecureJwks(options.jwks_url.to_string()));
        }
        let algorithms = options
            .algorithms
            .iter()
            .map(|name| match name.parse::<Algorithm>() {
                Ok(alg) if alg.family() != AlgorithmFamily::Hmac => Ok(alg),
                _ => Err(JwtError::Algorithm(name.clone())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let resource = ProtectedResource::new(&options.resource, vec![options.issuer.clone()], options.scopes.clone())?;
        let http = reqwest::Client::builder()
            // A key set comes from where it was configured, never from where a redirect points.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(options.fetch_timeout)
            .build()
            .map_err(|e| JwtError::Client(e.to_string()))?;
        let jwks = Jwks {
            url: options.jwks_url.clone(),
            http,
            max_age_ms: ms(options.jwks_max_age),
            // Never longer than the age: a set growing old must be fetched again before it is
            // too old to use, or a healthy issuer's tokens would be refused.
            min_interval_ms: ms(options.jwks_min_interval).min(ms(options.jwks_max_age)),
            fetch_timeout_ms: ms(options.fetch_timeout),
            cached: Mutex::new(Cached::default()),
            fetching: tokio::sync::Mutex::new(()),
            refreshing_behind: std::sync::atomic::AtomicBool::new(false),
        };
        Ok(Self { options, algorithms, resource, clock, jwks: Arc::new(jwks) })
    }

    /// The protected resource (for its metadata and challenges).
    pub fn resource(&self) -> &ProtectedResource {
        &self.resource
    }

    /// How many times the key set was fetched (or tried).
    pub fn jwks_fetches(&self) -> u64 {
        lock(&self.jwks.cached).fetches
    }

    /// The key `kid` names for `alg`, fetching the set when it is missing, old, or lacks it.
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<Key, Unauthorized> {
        let now = self.clock.unix_ms();
        let (keys, fetched, seen) = self.jwks.snapshot();
        let age = fetched.map(|at| now.saturating_sub(at));
        let keys = match age {
            Some(age) if age < self.jwks.max_age_ms => keys,
            // Just old: requests go on with the set in hand while it is fetched again behind
            // them, so a slow issuer delays no one, for as long as one fetch may take.
            Some(age) if age < self.jwks.max_age_ms.saturating_add(self.jwks.fetch_timeout_ms) => {
                self.refresh_behind(now, seen);
                keys
            }
            // Never fetched, or older than that (an idle gateway's, or one a failed fetch left):
            // a key the issuer revoked meanwhile must not pass, so this request waits for the set,
            // and is refused while there is none young enough (the fetch failed, or failed
            // moments ago).
            _ => {
                self.jwks.refresh(now, seen).await;
                let (keys, fetched, _) = self.jwks.snapshot();
                let usable = self.jwks.max_age_ms.saturating_add(self.jwks.fetch_timeout_ms);
                if fetched.is_some_and(|at| now.saturating_sub(at) >= usable) {
                    return Err(self.unavailable());
                }
                keys
            }
        };
        let why = match Jwks::lookup(&keys, kid, alg) {
            Lookup::Found(key) => return Ok(key),
            Lookup::Unfit(why) => return Err(invalid(why)),
            Lookup::Unknown(why) => why,
        };
        // A key the set does not have: the issuer may have rotated. Fetch again, rate-limited.
        if self.jwks.refresh(now, seen).await {
            let keys = self.jwks.snapshot().0;
            match Jwks::lookup(&keys, kid, alg) {
                Lookup::Found(key) => return Ok(key),
                Lookup::Unfit(why) | Lookup::Unknown(why) => return Err(self.no_key(why, &keys)),
            }
        }
        Err(self.no_key(why, &keys))
    }

    /// Fetches the set again on a task of its own, one at a time (when there is a runtime to
    /// run it on; without one the next request with an unknown key fetches).
    fn refresh_behind(&self, now: u64, seen: u64) {
        use std::sync::atomic::Ordering;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if self.jwks.refreshing_behind.swap(true, Ordering::AcqRel) {
            return;
        }
        let jwks = Arc::clone(&self.jwks);
        runtime.spawn(async move {
            jwks.refresh_here(now, seen).await;
            jwks.refreshing_behind.store(false, Ordering::Release);
        });
    }

    /// The refusal when no key fits: 503 when there are no keys at all because fetching failed.
    fn no_key(&self, why: String, keys: &[Key]) -> Unauthorized {
        if keys.is_empty() && lock(&self.jwks.cached).failure.is_some() {
            return self.unavailable();
        }
        invalid(why)
    }

    /// The refusal (503) when the keys in hand cannot be used and none could be fetched now.
    fn unavailable(&self) -> Unauthorized {
        let why = match lock(&self.jwks.cached).failure.clone() {
            Some(failure) => format!("the issuer's keys could not be fetched ({failure})"),
            None => "the issuer's keys are out of date and cannot be fetched again yet".to_owned(),
        };
        Unauthorized::new(
            UnauthorizedKind::Unavailable,
            format!("tokens cannot be checked now: {why}; try again later"),
        )
    }

    /// Checks `token` for the endpoint of `profile` (`None`: the gateway's own).
    pub(crate) async fn check(&self, token: &str, profile: Option<&str>) -> Result<Caller, Unauthorized> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            invalid("the token is not a JWT this gateway accepts (its algorithm must be an asymmetric one; none and HMAC never are)")
        })?;
        let alg = header.alg;
        if alg.family() == AlgorithmFamily::Hmac || (!self.algorithms.is_empty() && !self.algorithms.contains(&alg)) {
            return Err(invalid(format!("the token is signed with {alg:?}, which this gateway does not accept")));
        }
        if header.crit.is_some() {
            return Err(invalid("the token has critical header extensions this gateway does not understand"));
        }
        let key = self.key(header.kid.as_deref(), alg).await?;
        let mut validation = Validation::new(alg);
        // Every claim is checked below, against this gateway's clock, with messages that say
        // which one failed.
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let claims = match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
            Ok(data) => data.claims,
            Err(e) => {
                return Err(invalid(match e.kind() {
                    jsonwebtoken::errors::ErrorKind::InvalidSignature => {
                        "the token's signature does not verify with the issuer's key".to_owned()
                    }
                    _ => "the token is not a well-formed JWT".to_owned(),
                }));
            }
        };
        self.check_claims(&claims, profile)
    }

    fn check_claims(&self, claims: &Map<String, Value>, profile: Option<&str>) -> Result<Caller, Unauthorized> {
        let o = &self.options;
        if claims.get("iss").and_then(Value::as_str) != Some(o.issuer.as_str()) {
            return Err(invalid(format!("the token was not issued by {}", o.issuer)));
        }
        let accepted: Vec<String> = [self.resource.resource(profile), self.resource.resource(None)]
            .into_iter()
            .chain(o.audiences.iter().map(|a| audience_form(a)))
            .collect();
        let audiences = strings(claims.get("aud"));
        if !audiences.iter().any(|aud| accepted.contains(&audience_form(aud))) {
            return Err(invalid(format!("the token is not for this resource ({})", self.resource.resource(profile))));
        }
        let now = self.clock.unix_ms() as f64 / 1000.0;
        let leeway = o.leeway.as_secs_f64();
        let Some(exp) = claims.get("exp").and_then(Value::as_f64) else {
            return Err(invalid("the token has no expiry (exp)"));
        };
        if now > exp + leeway {
            return Err(invalid("the token expired"));
        }
        if let Some(nbf) = claims.get("nbf") {
            match nbf.as_f64() {
                Some(nbf) if now + leeway >= nbf => {}
                Some(_) => return Err(invalid("the token is not valid yet (nbf)")),
                None => return Err(invalid("the token's nbf is not a number")),
            }
        }
        if !o.scopes.is_empty() {
            let mut held: Vec<&str> =
                claims.get("scope").and_then(Value::as_str).map_or_else(Vec::new, |s| s.split(' ').collect());
            held.extend(strings(claims.get("scp")));
            let missing: Vec<&str> = o.scopes.iter().map(String::as_str).filter(|s| !held.contains(s)).collect();
            if !missing.is_empty() {
                return Err(Unauthorized::new(
                    UnauthorizedKind::InsufficientScope { scope: o.scopes.join(" ") },
                    format!("the token lacks the scope(s) {}", missing.join(" ")),
                ));
            }
        }
        // Taken as written or not at all: a subject made plain (spaces trimmed, invisible
        // characters dropped, cut) could become another caller's name, with its profiles,
        // approvals and limits. Where it is shown, it is cleaned there.
        let principal = match claims.get(&o.principal_claim).and_then(Value::as_str) {
            Some(p) if plain_subject(p) => p.to_owned(),
            Some(p) if !p.trim().is_empty() => {
                return Err(invalid(format!(
                    "the token's {} claim is not a usable name (at most {MAX_PRINCIPAL_BYTES} bytes, without \
                     control or direction characters or spaces at its ends)",
                    o.principal_claim
                )));
            }
            _ => return Err(invalid(format!("the token has no {} claim naming its subject", o.principal_claim))),
        };
        let mut caller = Caller::principal(principal);
        if let Some(claim) = &o.profile_claim
            && let Some(value) = claims.get(claim)
        {
            match value.as_str() {
                Some(name) if crate::settings::is_profile_name(name) => caller.profile = Some(Arc::from(name)),
                _ => return Err(invalid(format!("the token's {claim} claim does not name a profile"))),
            }
        }
        Ok(caller)
    }
}

#[async_trait::async_trait]
impl super::Authenticator for JwtAuthenticator {
    async fn authenticate(&self, request: &super::AuthRequest<'_>) -> Result<Caller, Unauthorized> {
        let token = super::bearer_token(request.headers)?.ok_or_else(super::missing)?;
        self.check(token, request.profile).await
    }

    fn protected_resource(&self) -> Option<&ProtectedResource> {
        Some(&self.resource)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The keys kept of one document: their `kid` and `alg`.
    fn keys_of(body: &str) -> BTreeMap<Option<String>, Option<Algorithm>> {
        parse_jwks(body.as_bytes()).unwrap_or_default().into_iter().map(|k| (k.kid, k.alg)).collect()
    }

    #[test]
    fn only_signature_keys_of_asymmetric_types_are_kept() {
        let body = r#"{"keys": [
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "EC", "kid": "ec", "crv": "P-256", "alg": "ES256",
             "x": "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4", "y": "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"},
            {"kty": "EC", "kid": "enc", "use": "enc", "crv": "P-256",
             "x": "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4", "y": "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"},
            {"kty": "RSA", "kid": "rsa", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUz", "e": "AQAB"},
            {"kty": "weird"},
            "not even an object"
        ]}"#;
        let keys = keys_of(body);
        assert_eq!(keys.len(), 2, "{keys:?}");
        assert_eq!(keys.get(&Some("ec".to_owned())), Some(&Some(Algorithm::ES256)));
        assert_eq!(keys.get(&Some("rsa".to_owned())), Some(&None));
        assert!(parse_jwks(b"[]").is_err());
    }

    #[test]
    fn a_key_allows_its_own_algorithm_and_curve_only() {
        let keys = parse_jwks(
            br#"{"keys": [{"kty": "EC", "kid": "ec", "crv": "P-256",
            "x": "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4", "y": "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}]}"#,
        )
        .unwrap_or_default();
        let ec = &keys[0];
        assert!(ec.allows(Algorithm::ES256));
        assert!(!ec.allows(Algorithm::ES384), "another curve");
        assert!(!ec.allows(Algorithm::RS256));
        assert!(!ec.allows(Algorithm::HS256));
        assert!(matches!(Jwks::lookup(&keys, None, Algorithm::ES256), Lookup::Found(_)));
        assert!(matches!(Jwks::lookup(&keys, Some("ec"), Algorithm::RS256), Lookup::Unfit(_)));
        assert!(matches!(Jwks::lookup(&keys, Some("other"), Algorithm::ES256), Lookup::Unknown(_)));
    }

    #[test]
    fn options_are_checked() {
        let clock: Arc<dyn Clock> = Arc::new(crate::clock::SystemClock);
        let url = |u: &str| Url::parse(u).unwrap_or_else(|_| unreachable!());
        let options = |jwks: &str| JwtOptions::new("https://idp", url(jwks), "https://gw/mcp");
        assert!(JwtAuthenticator::new(options("https://idp/jwks"), Arc::clone(&clock)).is_ok());
        assert!(JwtAuthenticator::new(options("http://127.0.0.1:9/jwks"), Arc::clone(&clock)).is_ok());
        let refused = JwtAuthenticator::new(options("http://idp.example.com/jwks"), Arc::clone(&clock)).unwrap_err();
        assert!(matches!(refused, JwtError::InsecureJwks(_)), "{refused}");
        for alg in ["HS256", "none", "XYZ"] {
            let mut o = options("https://idp/jwks");
            o.algorithms = vec![alg.to_owned()];
            assert!(matches!(JwtAuthenticator::new(o, Arc::clone(&clock)), Err(JwtError::Algorithm(_))), "{alg}");
        }
        let mut o = options("https://idp/jwks");
        o.resource = "not a uri".into();
        assert!(matches!(JwtAuthenticator::new(o, clock), Err(JwtError::Resource(_))));
    }
}
