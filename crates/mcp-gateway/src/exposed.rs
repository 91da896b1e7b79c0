//! Budgets and tool search for downstream clients: the agent's exposure stage
//! ([`tool_pool::expose`]) applied to each client's view of the pool it is served.
//!
//! A client's `tools/list` holds the entries the stage loads for it (built-ins, `always_load`
//! servers' tools, the tools it selected, the rest while the budgets allow and search does not
//! defer them) and, when some tool waits behind search, `search_tools`
//! ([`agent_loop::SEARCH_TOOL`]). Its answers select the tools found for that client alone
//! ([`Selection`], an [`agent_loop::SearchState`] as the agent keeps one per session), which
//! are listed for it from then on. A call to a tool the client was not shown is refused as the
//! agent's loop refuses it: deferred, with a message telling it to search; hidden by a budget,
//! saying which.
//!
//! **Whose selection.** A session client (2025-03-26 .. 2025-11-25) has its own, which ends
//! with the session, and is told `notifications/tools/list_changed` (on its stream, else on
//! the search call's own) when a search changed it. A 2026-07-28 client has no session: its
//! selection is keyed by what identifies it across requests, the authenticated caller (with
//! its profile) and the `clientInfo.name` its envelope carries, as its approvals "yes for
//! this client" are; two unauthenticated clients of the same name share one, which on
//! loopback means the same person's. Such a client is sent no `list_changed` (its changes come
//! on `subscriptions/listen` streams, which are not tied to one client): the search answer
//! names the tools found, which its next `tools/list` lists and which it may call. Selections
//! live in this process (replicas behind a load balancer do not share them).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use agent_loop::{SearchState, StepSearch, ToolSpec};
use serde_json::Value;
use tool_pool::{Exposure, Pool, SearchIndex, expose};

use crate::backend::ExposureSettings;
use crate::owners::OwnerCounts;
use crate::session::lock;

/// Most selections of 2026-07-28 clients kept (the least recently used go first).
const MAX_STATELESS_SELECTIONS: usize = 4_096;
/// Most of them one authenticated principal's (its least recently used go first): one caller
/// naming a new client at each request pushes out only its own.
const MAX_STATELESS_PER_PRINCIPAL: usize = 512;
/// Most pools whose exposure and index are kept at once (the host's, and one per profile).
const MAX_POOLS: usize = 64;

/// The tools one client selected through search, and its exposure of the last pool it was
/// shown.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    state: Mutex<SelectionState>,
}

#[derive(Debug, Default)]
struct SelectionState {
    search: SearchState,
    /// The exposure of a pool under this selection, for the selection's version.
    cached: Option<(Weak<Pool>, u64, Arc<Exposure>)>,
}

impl Selection {
    /// A number that changes whenever the selected tools do (0: none selected yet).
    pub(crate) fn version(&self) -> u64 {
        lock(&self.state).search.loaded_version()
    }
}

/// What is kept per pool: its exposure when nothing is selected, and its search index (made at
/// its first search).
struct PoolView {
    pool: Weak<Pool>,
    plain: Arc<Exposure>,
    index: Option<Arc<SearchIndex>>,
}

/// 2026-07-28 clients' selections.
#[derive(Default)]
struct StatelessSelections {
    /// By key: the selection, and the principal it is of (`None`: a caller without one).
    selections: HashMap<String, (Arc<Selection>, Option<Arc<str>>)>,
    /// The keys, most recently used last.
    order: VecDeque<String>,
    /// How many selections each principal has.
    counts: OwnerCounts,
}

impl StatelessSelections {
    /// Lets go of the selection at `at` in `order`.
    fn evict(&mut self, at: usize) {
        let Some(key) = self.order.remove(at) else { return };
        if let Some((_, Some(owner))) = self.selections.remove(&key) {
            self.counts.remove(&owner);
        }
    }
}

/// The gateway's exposure stage (see the module docs).
pub(crate) struct Exposing {
    settings: ExposureSettings,
    /// The search tool as listed.
    spec: ToolSpec,
    pools: Mutex<Vec<PoolView>>,
    /// 2026-07-28 clients' selections, by key, most recently used last.
    stateless: Mutex<StatelessSelections>,
}

impl std::fmt::Debug for Exposing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exposing").field("settings", &self.settings).finish_non_exhaustive()
    }
}

/// What one search did.
pub(crate) struct Searched {
    /// The text the client reads.
    pub(crate) text: String,
    /// Whether the input was not valid.
    pub(crate) is_error: bool,
    /// Whether the client's selection changed (its listing did).
    pub(crate) changed: bool,
}

impl Exposing {
    pub(crate) fn new(settings: ExposureSettings) -> Self {
        Self {
            settings,
            spec: agent_loop::search_spec(),
            pools: Mutex::new(Vec::new()),
            stateless: Mutex::new(StatelessSelections::default()),
        }
    }

    /// The search tool's definition.
    pub(crate) fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The selection of the 2026-07-28 client `key` names, made when it has none; `owner` is
    /// the authenticated principal it is of (`None` without one), which keeps at most
    /// [`MAX_STATELESS_PER_PRINCIPAL`].
    pub(crate) fn stateless(&self, owner: Option<&str>, key: &str) -> Arc<Selection> {
        let mut guard = lock(&self.stateless);
        let kept = &mut *guard;
        if let Some((selection, _)) = kept.selections.get(key) {
            let selection = Arc::clone(selection);
            if let Some(at) = kept.order.iter().position(|k| k == key) {
                kept.order.remove(at);
            }
            kept.order.push_back(key.to_owned());
            return selection;
        }
        if let Some(owner) = owner
            && kept.counts.get(owner) >= MAX_STATELESS_PER_PRINCIPAL
        {
            let selections = &kept.selections;
            let own =
                kept.order.iter().position(|k| selections.get(k).is_some_and(|(_, o)| o.as_deref() == Some(owner)));
            if let Some(at) = own {
                kept.evict(at);
            }
        }
        while kept.selections.len() >= MAX_STATELESS_SELECTIONS && !kept.order.is_empty() {
            kept.evict(0);
        }
        let selection = Arc::new(Selection::default());
        let owner = owner.map(|owner| kept.counts.add(owner));
        kept.selections.insert(key.to_owned(), (Arc::clone(&selection), owner));
        kept.order.push_back(key.to_owned());
        selection
    }

    /// The pool's view kept for `pool`, made when there is none; `f` reads it.
    fn with_pool<T>(&self, pool: &Arc<Pool>, f: impl FnOnce(&mut PoolView) -> T) -> T {
        let mut pools = lock(&self.pools);
        pools.retain(|p| p.pool.strong_count() > 0);
        let at = match pools.iter().position(|p| std::ptr::eq(p.pool.as_ptr(), Arc::as_ptr(pool))) {
            Some(at) => at,
            None => {
                if pools.len() >= MAX_POOLS {
                    pools.remove(0);
                }
                let plain = Arc::new(expose(pool, &self.settings.options, &Default::default()));
                pools.push(PoolView { pool: Arc::downgrade(pool), plain, index: None });
                pools.len() - 1
            }
        };
        f(&mut pools[at])
    }

    /// What `selection` (none: nothing selected) is shown of `pool`.
    pub(crate) fn exposure(&self, pool: &Arc<Pool>, selection: Option<&Selection>) -> Arc<Exposure> {
        let Some(selection) = selection else { return self.with_pool(pool, |p| Arc::clone(&p.plain)) };
        let mut state = lock(&selection.state);
        let version = state.search.loaded_version();
        if version == 0 {
            drop(state);
            return self.with_pool(pool, |p| Arc::clone(&p.plain));
        }
        if let Some((seen, at, exposure)) = &state.cached
            && *at == version
            && std::ptr::eq(seen.as_ptr(), Arc::as_ptr(pool))
            && seen.strong_count() > 0
        {
            return Arc::clone(exposure);
        }
        let exposure = Arc::new(expose(pool, &self.settings.options, &state.search.loaded()));
        state.cached = Some((Arc::downgrade(pool), version, Arc::clone(&exposure)));
        exposure
    }

    /// The search index of `pool`. Built once per pool, with nothing selected: a selection only
    /// ever hides more (its tools take budget first), and a search keeps only what the client's
    /// exposure still offers.
    fn index(&self, pool: &Arc<Pool>) -> Arc<SearchIndex> {
        self.with_pool(pool, |p| Arc::clone(p.index.get_or_insert_with(|| Arc::new(SearchIndex::new(pool, &p.plain)))))
    }

    /// The search a built-in's script makes (code mode's `tools.search`) over what `exposure`
    /// shows a client of `pool`: `None` when nothing waits behind search. It finds what the
    /// client's `search_tools` would, and selects nothing for the client.
    pub(crate) fn step_search(&self, pool: &Arc<Pool>, exposure: &Arc<Exposure>) -> Option<StepSearch> {
        exposure.search_active().then(|| StepSearch::new(Arc::clone(exposure), self.index(pool)))
    }

    /// One call of `search_tools` by the client of `selection`, over `pool` as it is shown
    /// `exposure`: the tools found are selected for it.
    pub(crate) fn search(
        &self,
        pool: &Arc<Pool>,
        exposure: &Exposure,
        selection: &Selection,
        input: &Value,
    ) -> Searched {
        let index = self.index(pool);
        let mut state = lock(&selection.state);
        let before = state.search.loaded_version();
        let (text, is_error) = state.search.run(&index, exposure, input, self.settings.max_loaded);
        let changed = state.search.loaded_version() != before;
        Searched { text, is_error, changed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One principal naming a new client at every request pushes out only its own selections
    /// (4,096 such requests emptied everyone's); callers without a principal share the whole.
    #[test]
    fn one_principal_pushes_out_only_its_own_selections() {
        let exposing = Exposing::new(ExposureSettings::new(tool_pool::ExposureOptions::default()));
        let others = exposing.stateless(Some("p:other"), "client:p:other\nvs");
        let local = exposing.stateless(None, "client:local\ncli");
        let first = exposing.stateless(Some("p:greedy"), "client:p:greedy\n0");
        for n in 1..MAX_STATELESS_SELECTIONS {
            exposing.stateless(Some("p:greedy"), &format!("client:p:greedy\n{n}"));
        }
        assert!(Arc::ptr_eq(&others, &exposing.stateless(Some("p:other"), "client:p:other\nvs")), "kept");
        assert!(Arc::ptr_eq(&local, &exposing.stateless(None, "client:local\ncli")), "kept");
        let last = format!("client:p:greedy\n{}", MAX_STATELESS_SELECTIONS - 1);
        let kept = exposing.stateless(Some("p:greedy"), &last);
        assert!(Arc::ptr_eq(&kept, &exposing.stateless(Some("p:greedy"), &last)), "its newest is kept");
        assert!(!Arc::ptr_eq(&first, &exposing.stateless(Some("p:greedy"), "client:p:greedy\n0")), "its oldest went");
        let kept = lock(&exposing.stateless);
        assert_eq!(kept.counts.get("p:greedy"), MAX_STATELESS_PER_PRINCIPAL);
        assert_eq!(kept.selections.len(), MAX_STATELESS_PER_PRINCIPAL + 2);
        assert_eq!(kept.order.len(), kept.selections.len());
    }
}
