//! Profiles: named selections of servers and tools, each served at `/mcp/NAME` (or chosen by
//! the caller's token), each admitting its own callers and narrowing the host's policy with an
//! overlay of its own ([`Policy::narrowed`]: an overlay can make a decision stricter, never
//! looser).
//!
//! [`Profiled`] wraps any [`Backend`]: callers without a profile get the backend's own pool;
//! a profile's callers get a pool assembled from the backend's listing of the profile's
//! servers only, under the backend's current policy narrowed by the overlay. A tool the
//! overlay denies is not in that pool, so the profile's callers can neither list nor call it;
//! a server outside the selection is neither listed nor reachable for resources, prompts or
//! completions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use agent_loop::{Binding, BoundCall, BuiltinTool, Catalog, Hooks, Listing, SourceError, ToolSource};
use async_trait::async_trait;
use mcp_protocol::{CallToolResult, CompleteRequestParams, CompleteResult, GetPromptResult, ReadResourceResult};
use mcp_protocol::{Resource, ResourceTemplate};
use policy::{Decision, Policy};
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use crate::backend::{Backend, BackendError, BackendEvent, Caller, ContentListing, ExposureSettings, Upstream};
use crate::session::lock;
use crate::settings::is_profile_name;

/// A profile's name that cannot be one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} cannot name a profile: use 1 to 64 of the letters A-Z a-z, digits, `_` and `-`")]
pub struct BadProfileName(pub String);

/// One profile: who may use it, which servers it offers, and how it narrows policy.
#[derive(Debug, Clone)]
pub struct Profile {
    name: String,
    callers: Option<BTreeSet<String>>,
    servers: Option<BTreeSet<String>>,
    overlay: Option<Policy>,
}

impl Profile {
    /// A profile named `name` offering every server to every caller, under the host's policy
    /// as it is.
    pub fn new(name: &str) -> Result<Self, BadProfileName> {
        if !is_profile_name(name) {
            return Err(BadProfileName(name.to_owned()));
        }
        Ok(Self { name: name.to_owned(), callers: None, servers: None, overlay: None })
    }

    /// Only these principals may use it (a local caller, who has none, may not).
    pub fn callers<I: IntoIterator<Item = S>, S: Into<String>>(mut self, callers: I) -> Self {
        self.callers = Some(callers.into_iter().map(Into::into).collect());
        self
    }

    /// Only these servers' tools, resources and prompts are offered.
    pub fn servers<I: IntoIterator<Item = S>, S: Into<String>>(mut self, servers: I) -> Self {
        self.servers = Some(servers.into_iter().map(Into::into).collect());
        self
    }

    /// Narrows the host's policy with `overlay` (whose default should be `allow` when it means
    /// to tighten only some tools).
    pub fn overlay(mut self, overlay: Policy) -> Self {
        self.overlay = Some(overlay);
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `caller` may use it.
    pub fn admits(&self, caller: &Caller) -> bool {
        match &self.callers {
            None => true,
            Some(callers) => caller.principal.as_deref().is_some_and(|p| callers.contains(p)),
        }
    }

    /// Whether it offers `server`.
    pub fn offers(&self, server: &str) -> bool {
        self.servers.as_ref().is_none_or(|servers| servers.contains(server))
    }
}

/// The narrowed policy of one profile, for the host's policy it was made from.
struct Narrowed {
    base: Arc<Policy>,
    version: u64,
    policy: Arc<Policy>,
}

/// The backend's content listing, the narrowed policy's version, and the profile's part.
type ProfileContent = (Arc<ContentListing>, u64, Arc<ContentListing>);

/// One profile and what is kept for it.
struct Served {
    profile: Profile,
    catalog: Catalog,
    narrowed: Mutex<Option<Narrowed>>,
    /// The backend's content listing, the version of the narrowed policy, and this profile's
    /// part of that listing.
    content: Mutex<Option<ProfileContent>>,
}

impl Served {
    /// The host's `base` policy narrowed by the overlay, with a version that moves when `base`
    /// does (the catalog then assembles the pool again).
    fn narrow(&self, base: &Arc<Policy>) -> (u64, Arc<Policy>) {
        let mut narrowed = lock(&self.narrowed);
        if let Some(n) = narrowed.as_ref()
            && Arc::ptr_eq(&n.base, base)
        {
            return (n.version, Arc::clone(&n.policy));
        }
        let version = narrowed.as_ref().map_or(1, |n| n.version + 1);
        let policy = match &self.profile.overlay {
            Some(overlay) => {
                Arc::new(Policy::clone(base).narrowed(&format!("profile {:?}", self.profile.name), overlay.clone()))
            }
            None => Arc::clone(base),
        };
        *narrowed = Some(Narrowed { base: Arc::clone(base), version, policy: Arc::clone(&policy) });
        (version, policy)
    }
}

/// The backend's tools as one profile sees them: its servers only, under its policy.
struct View<'a> {
    inner: &'a dyn ToolSource,
    profile: &'a Profile,
    policy: (u64, Arc<Policy>),
}

#[async_trait]
impl ToolSource for View<'_> {
    async fn refresh(&self) -> Listing {
        let mut listing = self.inner.refresh().await;
        listing.servers.retain(|s| self.profile.offers(&s.server));
        listing.generations.retain(|server, _| self.profile.offers(server));
        listing.policy = Some(self.policy.clone());
        listing
    }

    fn generation(&self, server: &str) -> Option<u64> {
        self.inner.generation(server).filter(|_| self.profile.offers(server))
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        self.inner.call_bound(call).await
    }

    async fn resource_servers(&self) -> Vec<String> {
        let mut servers = self.inner.resource_servers().await;
        servers.retain(|s| self.profile.offers(s));
        servers
    }

    async fn resources(&self, server: &str) -> Result<(Vec<Resource>, Vec<ResourceTemplate>), SourceError> {
        self.inner.resources(server).await
    }

    fn instructions(&self) -> Vec<(String, String)> {
        let mut instructions = self.inner.instructions();
        instructions.retain(|(server, _)| self.profile.offers(server));
        instructions
    }
}

/// A [`Backend`] with profiles. Callers without a profile get the wrapped backend's own pool;
/// a profile's callers get a pool assembled from the backend's listing of the profile's
/// servers only, under the backend's current policy narrowed by the profile's overlay, so a
/// tool the overlay denies is neither listed nor callable there. A server outside the
/// selection is not reachable for resources, prompts or completions either.
///
/// Every [`Backend`] method is forwarded (with the profile's restrictions); a method added to
/// the port must be added here too, or profiles fall back to its default.
pub struct Profiled<B: ?Sized> {
    inner: Arc<B>,
    profiles: BTreeMap<String, Served>,
}

impl<B: ?Sized> std::fmt::Debug for Profiled<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiled").field("profiles", &self.profiles.keys().collect::<Vec<_>>()).finish_non_exhaustive()
    }
}

impl<B: Backend + ?Sized> Profiled<B> {
    /// `inner` with `profiles`, whose pools are assembled with `options` (the host's own pool
    /// options: the gateway's naming, the same caps). A later profile of the same name
    /// replaces an earlier one. The caller may keep its own `Arc` of `inner` (to close it).
    pub fn new(inner: Arc<B>, profiles: impl IntoIterator<Item = Profile>, options: tool_pool::Options) -> Self {
        let specs: Arc<[tool_pool::BuiltinTool]> = inner.builtins().iter().map(|b| b.spec()).collect::<Vec<_>>().into();
        let profiles = profiles
            .into_iter()
            .map(|profile| {
                // The catalog's own policy is never used: every listing carries the narrowed one.
                let catalog =
                    Catalog::new(Arc::clone(&specs), Policy::uniform(policy::Decision::Deny), options.clone());
                let name = profile.name.clone();
                (name, Served { profile, catalog, narrowed: Mutex::new(None), content: Mutex::new(None) })
            })
            .collect();
        Self { inner, profiles }
    }

    /// The backend it wraps.
    pub fn inner(&self) -> &Arc<B> {
        &self.inner
    }

    /// The profile `caller` is served in, if any (`Err` when it names one that does not exist
    /// or does not admit it).
    fn served(&self, caller: &Caller) -> Result<Option<&Served>, BackendError> {
        let Some(name) = caller.profile.as_deref() else { return Ok(None) };
        let served = self.profiles.get(name).ok_or_else(|| BackendError::Forbidden(format!("no profile {name:?}")))?;
        if !served.profile.admits(caller) {
            return Err(BackendError::Forbidden(format!("this caller may not use profile {name:?}")));
        }
        Ok(Some(served))
    }

    /// Refuses `server` when `caller`'s profile does not offer it.
    fn offered(&self, caller: &Caller, server: &str) -> Result<(), BackendError> {
        match self.served(caller)? {
            Some(served) if !served.profile.offers(server) => Err(BackendError::NoSuchServer(server.to_owned())),
            _ => Ok(()),
        }
    }

    /// The profile's narrowed policy now, with its version, when its overlay has resource
    /// rules (else the backend's own handling of resources stands).
    async fn resource_policy(
        &self,
        served: &Served,
        caller: &Caller,
    ) -> Result<Option<(u64, Arc<Policy>)>, BackendError> {
        if !served.profile.overlay.as_ref().is_some_and(Policy::has_resource_rules) {
            return Ok(None);
        }
        let base = self.inner.binding(&Self::unprofiled(caller)).await?;
        Ok(Some(served.narrow(base.policy())))
    }

    /// Refuses `uri` of `server` when `caller`'s profile does not offer the server or its
    /// overlay denies the resource (answered as a resource that is not there, as a denied tool
    /// is answered as an unknown one) or puts it at `confirm` (refused, as the host's own
    /// `confirm` is: the gateway asks about tool calls only).
    async fn offered_resource(&self, caller: &Caller, server: &str, uri: &str) -> Result<(), BackendError> {
        self.offered(caller, server)?;
        if let Some(served) = self.served(caller)?
            && let Some((_, policy)) = self.resource_policy(served, caller).await?
        {
            crate::backend::resource_allowed(server, uri, policy.decide_resource(server, uri).as_ref())?;
        }
        Ok(())
    }

    /// The caller as the wrapped backend sees it: without the profile, which it does not know.
    fn unprofiled(caller: &Caller) -> Caller {
        Caller { principal: caller.principal.clone(), profile: None }
    }
}

#[async_trait]
impl<B: Backend + ?Sized> Backend for Profiled<B> {
    async fn binding(&self, caller: &Caller) -> Result<Arc<Binding>, BackendError> {
        let Some(served) = self.served(caller)? else { return self.inner.binding(caller).await };
        let base = self.inner.binding(&Self::unprofiled(caller)).await?;
        let policy = served.narrow(base.policy());
        let view = View { inner: self.inner.tools(), profile: &served.profile, policy };
        served.catalog.bind(&view).await.map_err(|e| BackendError::Upstream(e.to_string()))
    }

    fn tools(&self) -> &dyn ToolSource {
        self.inner.tools()
    }

    fn tools_for(&self, asker: Arc<dyn crate::backend::CallAsker>) -> Option<Arc<dyn ToolSource>> {
        self.inner.tools_for(asker)
    }

    fn builtins(&self) -> Vec<Arc<dyn BuiltinTool>> {
        self.inner.builtins()
    }

    fn hooks(&self) -> Arc<dyn Hooks> {
        self.inner.hooks()
    }

    fn exposure(&self) -> Option<ExposureSettings> {
        self.inner.exposure()
    }

    fn instructions(&self, caller: &Caller) -> Vec<(String, String)> {
        let mut instructions = self.inner.instructions(&Self::unprofiled(caller));
        match self.served(caller) {
            Ok(None) => {}
            Ok(Some(served)) => instructions.retain(|(server, _)| served.profile.offers(server)),
            Err(_) => instructions.clear(),
        }
        instructions
    }

    async fn content(&self, caller: &Caller) -> Result<Arc<ContentListing>, BackendError> {
        let Some(served) = self.served(caller)? else { return self.inner.content(caller).await };
        let all = self.inner.content(&Self::unprofiled(caller)).await?;
        let policy = self.resource_policy(served, caller).await?;
        let version = policy.as_ref().map_or(0, |(version, _)| *version);
        let mut cached = lock(&served.content);
        if let Some((from, at, mine)) = cached.as_ref()
            && Arc::ptr_eq(from, &all)
            && *at == version
        {
            return Ok(Arc::clone(mine));
        }
        let denied = |server: &str, uri: &str| {
            policy
                .as_ref()
                .and_then(|(_, p)| p.decide_resource(server, uri))
                .is_some_and(|v| v.decision == Decision::Deny)
        };
        let mut mine = ContentListing::default();
        for (server, content) in &all.servers {
            if served.profile.offers(server) {
                let mut content = content.clone();
                content.resources.retain(|r| !denied(server, &r.uri));
                content.templates.retain(|t| !denied(server, &t.uri_template));
                mine.servers.insert(server.clone(), content);
            }
        }
        let mine = Arc::new(mine);
        *cached = Some((all, version, Arc::clone(&mine)));
        Ok(mine)
    }

    async fn read_resource(
        &self,
        caller: &Caller,
        server: &str,
        uri: &str,
        max_bytes: usize,
    ) -> Result<ReadResourceResult, BackendError> {
        self.offered_resource(caller, server, uri).await?;
        self.inner.read_resource(&Self::unprofiled(caller), server, uri, max_bytes).await
    }

    async fn get_prompt(
        &self,
        caller: &Caller,
        server: &str,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<GetPromptResult, BackendError> {
        self.offered(caller, server)?;
        self.inner.get_prompt(&Self::unprofiled(caller), server, name, arguments).await
    }

    async fn complete(
        &self,
        caller: &Caller,
        server: &str,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, BackendError> {
        self.offered(caller, server)?;
        self.inner.complete(&Self::unprofiled(caller), server, params).await
    }

    fn mirrored(&self, caller: &Caller) -> Option<Upstream> {
        let upstream = self.inner.mirrored(&Self::unprofiled(caller))?;
        self.offered(caller, &upstream.server).ok().map(|()| upstream)
    }

    async fn subscribe(&self, caller: &Caller, server: &str, uri: &str) -> Result<(), BackendError> {
        self.offered_resource(caller, server, uri).await?;
        self.inner.subscribe(&Self::unprofiled(caller), server, uri).await
    }

    async fn may_subscribe(&self, caller: &Caller, server: &str, uri: &str) -> Result<(), BackendError> {
        self.offered_resource(caller, server, uri).await?;
        self.inner.may_subscribe(&Self::unprofiled(caller), server, uri).await
    }

    fn offers(&self, caller: &Caller, server: &str) -> bool {
        self.offered(caller, server).is_ok() && self.inner.offers(&Self::unprofiled(caller), server)
    }

    async fn unsubscribe(&self, caller: &Caller, server: &str, uri: &str) -> Result<(), BackendError> {
        // Never refused: what was subscribed is always let go.
        self.inner.unsubscribe(&Self::unprofiled(caller), server, uri).await
    }

    fn has_profile(&self, name: &str) -> bool {
        self.profiles.contains_key(name)
    }

    fn admits(&self, caller: &Caller) -> bool {
        self.served(caller).is_ok()
    }

    fn ready(&self) -> Result<(), String> {
        self.inner.ready()
    }

    fn events(&self) -> broadcast::Receiver<BackendEvent> {
        self.inner.events()
    }
}
