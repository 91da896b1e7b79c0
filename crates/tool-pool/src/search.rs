//! Tool search: a ranked index over the tools the model may load, and the `select:` form.
//!
//! Ranking is BM25F (BM25 over several fields, each with its weight and length normalization)
//! over what a tool says about itself: its name split into words (snake_case, camelCase, dots,
//! dashes, digits), its server's name, its description, its parameters' names and their
//! descriptions; with stop words dropped and a light stemmer (`text.rs`). A query that names a
//! tool ranks it first: the model name as written, or the model or raw name compared without
//! case and separators (exact); next, tools whose name's words are exactly the query's words,
//! in any order and inflection (near-exact). A name of two words or more found as a phrase in a
//! longer query adds to its tool's score.
//!
//! Bounded: queries are cut to [`MAX_QUERY_CHARS`] characters and their [`MAX_QUERY_TERMS`]
//! rarest words; results to [`MAX_LIMIT`]; the text indexed per tool to [`MAX_FIELD_CHARS`] per
//! field and its first [`MAX_PARAMETERS`] parameters.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::description::mark;
use crate::dictionary::{Dictionary, Hasher, Lookup, Map, RECENT, STOP};
use crate::exposure::{Exposure, ExposureState};
use crate::pool::{Pool, PoolEntry};
use crate::text::{Packed, Split, compact_hash, is_stop_word, stem, words};

/// Longest query looked at, in characters; the rest is ignored.
pub const MAX_QUERY_CHARS: usize = 1_000;
/// Most distinct words of a query used for ranking (its rarest ones).
pub const MAX_QUERY_TERMS: usize = 64;
/// Results when the caller gives no limit.
pub const DEFAULT_LIMIT: usize = 5;
/// Most results of one search, and most names in one `select:`.
pub const MAX_LIMIT: usize = 25;
/// Longest text indexed from one field of one tool, in characters.
pub const MAX_FIELD_CHARS: usize = 4_000;
/// Most parameters (top-level properties of the input schema) indexed per tool.
pub const MAX_PARAMETERS: usize = 64;
/// Longest one-line description in a result, in characters.
pub const ONE_LINE_CHARS: usize = 200;
/// Prefix of a query that loads tools by exact name: `select:NAME[,NAME...]`.
pub const SELECT_PREFIX: &str = "select:";

/// The fields of a tool that are indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Name = 0,
    Server = 1,
    Description = 2,
    ParamNames = 3,
    ParamDescriptions = 4,
}

const FIELDS: usize = 5;

/// How text becomes terms and terms become scores.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ranking {
    split: Split,
    stem: bool,
    stop_words: bool,
    /// Where each source field's words go (`None`: not indexed). The plain baseline puts the
    /// name and the description in one field.
    fields: [Option<Field>; FIELDS],
    weights: [f32; FIELDS],
    /// Length normalization per field (BM25's `b`).
    b: [f32; FIELDS],
    k1: f32,
    /// Exact and near-exact name matches first.
    name_matches: bool,
}

impl Ranking {
    /// The project's ranking. Weights were tuned on the `dev` split of the evaluation set.
    pub(crate) fn tuned() -> Self {
        Self {
            split: Split::Identifiers,
            stem: true,
            stop_words: true,
            fields: [
                Some(Field::Name),
                Some(Field::Server),
                Some(Field::Description),
                Some(Field::ParamNames),
                Some(Field::ParamDescriptions),
            ],
            weights: [2.0, 1.0, 1.0, 1.0, 0.4],
            b: [0.5, 0.3, 0.6, 0.5, 0.6],
            k1: 1.2,
            name_matches: true,
        }
    }

    /// Textbook BM25 (k1 1.2, b 0.75) over one field made of the raw tool name and the
    /// description, split into runs of letters and digits, lowercased; no stemming, no stop
    /// words, no name matching. What the anchors' tool search does.
    fn plain() -> Self {
        Self {
            split: Split::Plain,
            stem: false,
            stop_words: false,
            fields: [Some(Field::Description), None, Some(Field::Description), None, None],
            weights: [0.0, 0.0, 1.0, 0.0, 0.0],
            b: [0.75; FIELDS],
            k1: 1.2,
            name_matches: false,
        }
    }

    /// [`Ranking::plain`] over the text the tuned ranking indexes: the name split as
    /// identifiers, the server's name, the description, the parameters' names and their
    /// descriptions, all in one field. Between the two, it tells what the fields give from what
    /// the ranking (weights per field, stemming, stop words, name matches) gives.
    fn plain_fields() -> Self {
        Self { split: Split::Identifiers, fields: [Some(Field::Description); FIELDS], ..Self::plain() }
    }

    /// The term of `word`, `None` for a stop word.
    pub(crate) fn term<'w>(&self, word: &'w str) -> Option<Cow<'w, str>> {
        if self.stop_words && is_stop_word(word) {
            return None;
        }
        Some(if self.stem { stem(word) } else { Cow::Borrowed(word) })
    }
}

/// Score added to a tool whose name (of two words or more) is in the query as a phrase: about
/// what one more rare word in common adds.
const PHRASE_BONUS: f32 = 3.0;
/// Score added to a near-exact name match (the query is the name's words): more than any text
/// score, less than an exact match.
const NEAR_EXACT_BONUS: f32 = 1.0e3;
/// Score added to an exact name match: more than any text score can reach.
const EXACT_BONUS: f32 = 1.0e6;

/// Most tools memory is reserved for before building (more are indexed, growing as needed).
const MAX_RESERVED_TOOLS: usize = 100_000;
/// Distinct terms reserved per expected tool (the evaluation set's tools have 24 on average).
/// Only what is written is touched, so reserving more than needed costs little.
const RESERVED_TERMS_PER_TOOL: usize = 32;

/// Terms of a tool's name reserved per expected tool (the evaluation set's tools have 3 on
/// average).
const RESERVED_NAME_TERMS_PER_TOOL: usize = 4;

/// One searchable tool.
#[derive(Debug, Clone)]
struct Doc {
    name: Arc<str>,
    server: Option<Arc<str>>,
    /// Its description (sanitized, unmarked): which of `SearchIndex::texts` holds it, and its
    /// byte range there.
    text: u32,
    description: (usize, usize),
    /// Distinct terms of its name, for the near-exact match.
    name_terms: u16,
    /// Range of its name's terms, in order, in `SearchIndex::name_sequences`.
    name_sequence: (usize, usize),
}

/// A tool that has a term. Eight bytes, not twelve: postings are most of an index's memory,
/// and memory fresh from the system (a page fault per page) was a large part of building.
#[derive(Debug, Clone, Copy)]
struct Posting {
    /// The tool, with [`IN_NAME`] set when the term is in its name.
    doc_in_name: u32,
    /// BM25F's saturated term frequency, `tf (k1 + 1) / (tf + k1)`, with `tf` the weighted,
    /// length-normalized sum over fields.
    weight: f32,
}

/// The bit of [`Posting::doc_in_name`] that says the term is in the tool's name; tool numbers
/// stay below it.
const IN_NAME: u32 = 1 << 31;

impl Posting {
    fn doc(self) -> usize {
        (self.doc_in_name & !IN_NAME) as usize
    }

    fn in_name(self) -> bool {
        self.doc_in_name & IN_NAME != 0
    }
}

/// A found tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    /// Its model name, the name to call it by.
    pub name: Arc<str>,
    /// Its server, `None` for a built-in.
    pub server: Option<Arc<str>>,
    /// The first line of its (sanitized) description, at most [`ONE_LINE_CHARS`] characters.
    pub description: String,
    /// Its score; higher is better, comparable only within one search.
    pub score: f32,
}

/// What a search found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SearchResults {
    /// Best first; for `select:`, in the order named.
    pub hits: Vec<SearchHit>,
    /// Names a `select:` asked for that are not searchable (sanitized, at most 64 characters
    /// each, since they are the model's text).
    pub unknown: Vec<String>,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchQuery<'a> {
    /// Words to rank tools by.
    Text(&'a str),
    /// `select:A,B`: these exact model names, at most [`MAX_LIMIT`] of them, without repeats.
    Select(Vec<&'a str>),
}

impl<'a> SearchQuery<'a> {
    /// Parses `query`: `select:` (any case, after leading spaces) then names separated by
    /// commas (spaces around them ignored), or else free text.
    pub fn parse(query: &'a str) -> Self {
        let trimmed = query.trim_start();
        let Some(head) = trimmed.get(..SELECT_PREFIX.len()) else { return Self::Text(query) };
        if !head.eq_ignore_ascii_case(SELECT_PREFIX) {
            return Self::Text(query);
        }
        let mut names: Vec<&str> = Vec::new();
        for name in trimmed[SELECT_PREFIX.len()..].split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if names.len() == MAX_LIMIT {
                break;
            }
            if !names.contains(&name) {
                names.push(name);
            }
        }
        Self::Select(names)
    }
}

/// A search index over some of a pool's entries. Immutable once built; built per pool revision.
#[derive(Debug, Clone)]
pub struct SearchIndex {
    ranking: Ranking,
    docs: Vec<Doc>,
    /// The description arenas of the pools indexed (one, unless entries came from several),
    /// shared rather than copied.
    texts: Vec<Arc<String>>,
    dictionary: Dictionary,
    /// Every term's postings, back to back, in document order within a term.
    postings: Vec<Posting>,
    /// Where each term's postings start in `postings`; one more entry than terms.
    offsets: Vec<usize>,
    idf: Vec<f32>,
    by_name: Map<Arc<str>, u32>,
    /// Every tool's name as a sequence of term ids, back to back.
    name_sequences: Vec<u32>,
    /// Hashes of compact model names and raw names (see [`compact_hash`]) with the tools that have
    /// them, sorted: one flat list rather than a map of strings to lists, which cost two
    /// allocations per tool to build. Keyed by a 64-bit hash with the index's random seed: a
    /// collision (one in 2^64 per pair, not aimed at by a server, which does not know the seed)
    /// would only add an exact-match bonus to a wrong tool.
    by_compact: Vec<(u64, u32)>,
}

impl SearchIndex {
    /// The index of what the model may search in `pool`: the MCP tools that `exposure` does not
    /// hide. Tools the policy denies are not in the pool, so never here; built-ins are always
    /// loaded, so not here either.
    pub fn new(pool: &Pool, exposure: &Exposure) -> Self {
        // An exposure lists a pool's entries in pool order: walked side by side, no lookups.
        // One computed for another pool (names differ) makes nothing searchable rather than
        // guess.
        let same_pool = exposure.revision() == pool.revision() && exposure.iter().len() == pool.len();
        let searchable = pool.iter().zip(exposure.iter()).filter(|(e, x)| {
            // The exposure shares the pool's names: equal pointers spare comparing the bytes.
            let same_name = Arc::ptr_eq(e.shared_name(), &x.name) || *e.name() == *x.name;
            same_pool && e.server().is_some() && same_name && x.state != ExposureState::Hidden
        });
        Self::build(Ranking::tuned(), searchable.map(|(e, _)| e), pool.len())
    }

    /// The index of exactly `entries`, ranked like [`SearchIndex::new`].
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = PoolEntry<'a>>) -> Self {
        Self::build(Ranking::tuned(), entries, 0)
    }

    /// A plain BM25 index of `entries`, the baseline the evaluation compares with: one field
    /// made of the raw tool name and the description, split into runs of letters and digits
    /// and lowercased (so `get_weather` is two words and `getWeather` one), no stemming, no
    /// stop words, no name matching, k1 1.2 and b 0.75.
    pub fn plain_bm25<'a>(entries: impl IntoIterator<Item = PoolEntry<'a>>) -> Self {
        Self::build(Ranking::plain(), entries, 0)
    }

    /// The plain BM25 baseline given the same fields as the tuned ranking, a second baseline
    /// for the evaluation: one field made of the name split as identifiers (`getWeather_v2` is
    /// `get`, `weather`, `v`, `2`), the server's name, the description and the parameters'
    /// names and descriptions; otherwise as [`SearchIndex::plain_bm25`] (no stemming, no stop
    /// words, no name matching, k1 1.2 and b 0.75). Beside [`SearchIndex::plain_bm25`] it
    /// shows what the fields give; beside [`SearchIndex::from_entries`], what the ranking
    /// itself gives.
    pub fn plain_bm25_same_fields<'a>(entries: impl IntoIterator<Item = PoolEntry<'a>>) -> Self {
        Self::build(Ranking::plain_fields(), entries, 0)
    }

    /// Number of searchable tools.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether nothing is searchable.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The index of `entries`, of which there are about `expected` (a hint for reserving
    /// memory: growing the large lists by copying was a visible part of building).
    fn build<'a>(ranking: Ranking, entries: impl IntoIterator<Item = PoolEntry<'a>>, expected: usize) -> Self {
        let entries = entries.into_iter();
        let expected = expected.max(entries.size_hint().0).min(MAX_RESERVED_TOOLS);
        let mut index = Self {
            ranking,
            docs: Vec::with_capacity(expected),
            texts: Vec::new(),
            dictionary: Dictionary::with_capacity(expected),
            postings: Vec::new(),
            offsets: Vec::new(),
            idf: Vec::new(),
            by_name: Map::with_capacity_and_hasher(expected, Hasher::default()),
            name_sequences: Vec::with_capacity(expected * RESERVED_NAME_TERMS_PER_TOOL),
            by_compact: Vec::with_capacity(expected * 2),
        };
        // (term, frequencies per field), tool after tool, each tool's ending where `ends` says;
        // grouped by term at the end. One sequential list: a list per term, grown as tools come,
        // cost cache misses on every push.
        let mut found: Vec<(u32, PackedTf)> = Vec::with_capacity(expected * RESERVED_TERMS_PER_TOOL);
        // The frequencies too large to pack, in the order of their entries in `found`.
        let mut unpacked: Vec<[u16; FIELDS]> = Vec::new();
        let mut ends: Vec<usize> = Vec::with_capacity(expected);
        let mut lengths: Vec<[u32; FIELDS]> = Vec::with_capacity(expected);
        let mut counts = Counts::default();
        // The current server: its name, its mark, and its name's terms (found at its first tool,
        // where the words of every tool's text were interned before: term ids stay in the order
        // words are first seen).
        let mut current: Option<(Arc<str>, String)> = None;
        let mut server_terms: Option<Vec<u32>> = None;
        // Empty words never occur, so the all-zero key matches nothing.
        let mut recent = [((0u64, 0u64), STOP); RECENT];
        for entry in entries {
            let Ok(doc) = u32::try_from(index.docs.len()) else { break };
            let Ok(text) = u32::try_from(index.texts.len()) else { break };
            if doc & IN_NAME != 0 {
                break;
            }
            let name: Arc<str> = Arc::clone(entry.shared_name());
            match index.by_name.entry(Arc::clone(&name)) {
                std::collections::hash_map::Entry::Occupied(_) => continue,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(doc);
                }
            }
            // Entries come server by server: the server's name, mark and terms are made once.
            if let Some(server) = entry.server()
                && current.as_ref().is_none_or(|(name, _)| **name != *server)
            {
                current = Some((Arc::from(server), mark(server, None, 0)));
                server_terms = None;
            }
            let (server, mark) = match (entry.server(), &current) {
                (Some(_), Some((arc, mark))) => (Some(Arc::clone(arc)), mark.as_str()),
                _ => (None, ""),
            };
            let description = unmarked(&entry, mark);
            let sequence_start = index.name_sequences.len();
            let (dictionary, ranking) = (&mut index.dictionary, &index.ranking);
            if let Some(field) = ranking.fields[Field::Name as usize] {
                terms(dictionary, ranking, &mut recent, entry.tool(), |id| {
                    counts.count(id, field);
                    index.name_sequences.push(id);
                });
            }
            if let (Some(server), Some(field)) = (entry.server(), ranking.fields[Field::Server as usize]) {
                let ids = server_terms.get_or_insert_with(|| {
                    let mut ids = Vec::new();
                    terms(dictionary, ranking, &mut recent, server, |id| ids.push(id));
                    ids
                });
                for &id in ids.iter() {
                    counts.count(id, field);
                }
            }
            let mut add = |source: Field, text: &str| {
                if let Some(field) = ranking.fields[source as usize] {
                    terms(dictionary, ranking, &mut recent, text, |id| counts.count(id, field));
                }
            };
            add(Field::Description, description);
            // Parameters straight from the schema, without copying their text.
            let mut described = 0;
            for (name, property) in parameters(entry.input_schema()) {
                add(Field::ParamNames, name);
                if let Some(Value::String(d)) = field(property, "description")
                    && described < MAX_FIELD_CHARS
                {
                    add(Field::ParamDescriptions, d);
                    described += d.len();
                }
            }
            let mut name_terms = 0u16;
            for &term in &counts.touched {
                let t = term as usize;
                if counts.tf[t][Field::Name as usize] > 0 {
                    name_terms = name_terms.saturating_add(1);
                }
                found.push((term, PackedTf::new(counts.tf[t], &mut unpacked)));
                counts.tf[t] = [0; FIELDS];
            }
            ends.push(found.len());
            counts.touched.clear();
            lengths.push(std::mem::take(&mut counts.length));
            if index.ranking.name_matches {
                for name in [entry.name(), entry.tool()] {
                    index.by_compact.push((compact_hash(index.by_name.hasher(), name), doc));
                }
            }
            // The unmarked description is the end of the pool's: shared, not copied.
            let (arena, (_, end)) = entry.shared_description();
            let text = match index.texts.last() {
                Some(last) if Arc::ptr_eq(last, arena) => text.saturating_sub(1),
                _ => {
                    index.texts.push(Arc::clone(arena));
                    text
                }
            };
            index.docs.push(Doc {
                name,
                server,
                text,
                description: (end - description.len(), end),
                name_terms,
                name_sequence: (sequence_start, index.name_sequences.len()),
            });
        }

        // Pushed in tool order, so sorted by hash alone is sorted by (hash, tool).
        sort_by_hash(&mut index.by_compact);
        index.by_compact.dedup();
        let n = lengths.len().max(1) as f32;
        let mut average = [0f32; FIELDS];
        for l in &lengths {
            for f in 0..FIELDS {
                average[f] += l[f] as f32;
            }
        }
        average.iter_mut().for_each(|a| *a = (*a / n).max(1.0));
        // Counting sort by term, BM25F weights computed on the way.
        let terms = index.dictionary.stems.len();
        let mut offsets = vec![0usize; terms + 1];
        for &(term, _) in &found {
            offsets[term as usize + 1] += 1;
        }
        for t in 0..terms {
            offsets[t + 1] += offsets[t];
        }
        index.idf = offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as f32)
            .map(|df| (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
            .collect();
        let r = &index.ranking;
        // Each tool's length normalization per field, computed once rather than per term.
        let norms: Vec<[f32; FIELDS]> = lengths
            .iter()
            .map(|length| std::array::from_fn(|f| 1.0 - r.b[f] + r.b[f] * length[f] as f32 / average[f]))
            .collect();
        let mut next = offsets.clone();
        let mut postings = vec![Posting { doc_in_name: 0, weight: 0.0 }; found.len()];
        let (mut begin, mut unpacked) = (0, unpacked.into_iter());
        // Fewer than `IN_NAME` tools, so their numbers fit.
        for ((doc, &end), norm) in (0u32..).zip(&ends).zip(&norms) {
            for &(term, tf) in &found[begin..end] {
                let tf = tf.get(&mut unpacked);
                let mut t = 0f32;
                for f in 0..FIELDS {
                    if tf[f] > 0 {
                        t += r.weights[f] * f32::from(tf[f]) / norm[f];
                    }
                }
                let weight = t * (r.k1 + 1.0) / (t + r.k1);
                let in_name = if tf[Field::Name as usize] > 0 { IN_NAME } else { 0 };
                let slot = &mut next[term as usize];
                postings[*slot] = Posting { doc_in_name: doc | in_name, weight };
                *slot += 1;
            }
            begin = end;
        }
        index.postings = postings;
        index.offsets = offsets;
        index
    }

    /// Searches: `query` is free text or `select:NAME[,NAME...]` (see [`SearchQuery::parse`]);
    /// `limit` defaults to [`DEFAULT_LIMIT`] and is at most [`MAX_LIMIT`]. Best first; ties in
    /// pool order. Never fails: a query that matches nothing finds nothing.
    pub fn search(&self, query: &str, limit: Option<usize>) -> SearchResults {
        let limit = limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT);
        match SearchQuery::parse(query) {
            SearchQuery::Select(names) => self.select(&names),
            SearchQuery::Text(text) => {
                let hits = self.rank(text, limit).into_iter().map(|(doc, score)| self.hit(doc, score)).collect();
                SearchResults { hits, unknown: Vec::new() }
            }
        }
    }

    fn select(&self, names: &[&str]) -> SearchResults {
        let mut results = SearchResults::default();
        for name in names {
            match self.by_name.get(*name) {
                Some(&doc) => results.hits.push(self.hit(doc, 0.0)),
                // The model's text, echoed back: no control characters, one line.
                None => results.unknown.push(mcp_safety::text::one_line(name, 64)),
            }
        }
        results
    }

    /// The best `limit` documents for `text`, with their scores.
    fn rank(&self, text: &str, limit: usize) -> Vec<(u32, f32)> {
        if limit == 0 || self.docs.is_empty() {
            return Vec::new();
        }
        let text = cut(text, MAX_QUERY_CHARS);
        // In order, unknown words as `None`, for phrase matches of names.
        let mut sequence: Vec<Option<u32>> = Vec::new();
        words(text, self.ranking.split, |w| match self.dictionary.lookup(&self.ranking, w) {
            Lookup::Stop => {}
            Lookup::Unknown => sequence.push(None),
            Lookup::Term(id) => sequence.push(Some(id)),
        });
        let mut query: Vec<u32> = sequence.iter().flatten().copied().collect();
        query.sort_unstable();
        query.dedup();
        if query.len() > MAX_QUERY_TERMS {
            // The rarest words say the most; ties by term id, so the choice is deterministic.
            query.sort_by(|a, b| self.idf[*b as usize].total_cmp(&self.idf[*a as usize]).then(a.cmp(b)));
            query.truncate(MAX_QUERY_TERMS);
            query.sort_unstable();
        }

        let mut scores = vec![0f32; self.docs.len()];
        let mut name_hits = vec![0u16; if self.ranking.name_matches { self.docs.len() } else { 0 }];
        for &term in &query {
            let idf = self.idf[term as usize];
            let (start, end) = (self.offsets[term as usize], self.offsets[term as usize + 1]);
            for &p in &self.postings[start..end] {
                scores[p.doc()] += idf * p.weight;
                if p.in_name()
                    && let Some(h) = name_hits.get_mut(p.doc())
                {
                    *h += 1;
                }
            }
        }
        if self.ranking.name_matches {
            let whole_query_known = !sequence.is_empty() && sequence.iter().all(Option::is_some);
            for (doc, hits) in name_hits.iter().enumerate() {
                let d = &self.docs[doc];
                if d.name_terms == 0 || *hits != d.name_terms {
                    continue;
                }
                let name = &self.name_sequences[d.name_sequence.0..d.name_sequence.1];
                if whole_query_known && query.len() == usize::from(d.name_terms) {
                    // The query is the name's words and nothing else: near-exact.
                    scores[doc] += NEAR_EXACT_BONUS;
                } else if name.len() >= 2 && contains_phrase(&sequence, name) {
                    scores[doc] += PHRASE_BONUS;
                }
            }
            let hash = compact_hash(self.by_name.hasher(), text);
            let from = self.by_compact.partition_point(|&(h, _)| h < hash);
            for &(_, d) in self.by_compact[from..].iter().take_while(|&&(h, _)| h == hash) {
                scores[d as usize] += EXACT_BONUS;
            }
            // The model name itself, as written: first even among names that compare equal
            // without case and separators.
            if let Some(&d) = self.by_name.get(text.trim()) {
                scores[d as usize] += EXACT_BONUS;
            }
        }

        let mut ranked: Vec<(u32, f32)> =
            scores.into_iter().enumerate().filter(|(_, s)| *s > 0.0).map(|(d, s)| (d as u32, s)).collect();
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, order);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(order);
        ranked
    }

    fn hit(&self, doc: u32, score: f32) -> SearchHit {
        let d = &self.docs[doc as usize];
        let (start, end) = d.description;
        SearchHit {
            name: Arc::clone(&d.name),
            server: d.server.clone(),
            description: mcp_safety::text::first_line(
                self.texts.get(d.text as usize).and_then(|t| t.get(start..end)).unwrap_or_default(),
                ONE_LINE_CHARS,
            ),
            score,
        }
    }
}

/// Calls `each` with the term id of every word of `text` (at most [`MAX_FIELD_CHARS`] characters
/// of it) that is not a stop word, interning new words.
fn terms(
    dictionary: &mut Dictionary,
    ranking: &Ranking,
    recent: &mut [(Packed, u32); RECENT],
    text: &str,
    mut each: impl FnMut(u32),
) {
    words(cut(text, MAX_FIELD_CHARS), ranking.split, |w| {
        let id = dictionary.intern(ranking, w, recent);
        if id != STOP {
            each(id);
        }
    });
}

/// The terms of the tool being indexed: frequencies by term id and field, accumulated in place
/// rather than sorted (sorting was a visible part of building), the terms it has, and its
/// fields' lengths in words.
#[derive(Default)]
struct Counts {
    tf: Vec<[u16; FIELDS]>,
    touched: Vec<u32>,
    length: [u32; FIELDS],
}

impl Counts {
    /// One more occurrence of term `id` in `field`.
    #[inline]
    fn count(&mut self, id: u32, field: Field) {
        let t = id as usize;
        if self.tf.len() <= t {
            self.tf.resize(t + 1, [0; FIELDS]);
        }
        if let Some(tf) = self.tf.get_mut(t) {
            if *tf == [0; FIELDS] {
                self.touched.push(id);
            }
            tf[field as usize] = tf[field as usize].saturating_add(1);
        }
        self.length[field as usize] += 1;
    }
}

/// A tool's frequencies of one term per field, in 32 bits rather than 80: the list of them is
/// the largest of a build, and memory fresh from the system (a page fault per page) was a large
/// part of building. Frequencies too large for their bits (rare: a word repeated dozens of times
/// in one field) are kept aside, in order, and this holds [`PackedTf::UNPACKED`].
#[derive(Debug, Clone, Copy)]
struct PackedTf(u32);

impl PackedTf {
    /// Bits per field, in [`Field`] order; 32 in all.
    const BITS: [u32; FIELDS] = [5, 4, 8, 6, 9];
    /// The mark of frequencies kept aside (never a packed value: those are kept aside too).
    const UNPACKED: u32 = u32::MAX;

    /// `tf` packed, or kept aside in `unpacked` when it does not fit.
    #[inline]
    fn new(tf: [u16; FIELDS], unpacked: &mut Vec<[u16; FIELDS]>) -> Self {
        let (mut packed, mut over, mut shift) = (0u32, 0u32, 0);
        // Without a branch per field: this runs for every term of every tool.
        for (f, bits) in Self::BITS.into_iter().enumerate() {
            let value = u32::from(tf[f]);
            over |= value >> bits;
            packed |= value << shift;
            shift += bits;
        }
        if over != 0 || packed == Self::UNPACKED {
            unpacked.push(tf);
            return Self(Self::UNPACKED);
        }
        Self(packed)
    }

    /// The frequencies, taking them from `unpacked` (the list [`PackedTf::new`] kept aside, read
    /// in the same order) when they were not packed.
    #[inline]
    fn get(self, unpacked: &mut impl Iterator<Item = [u16; FIELDS]>) -> [u16; FIELDS] {
        if self.0 == Self::UNPACKED {
            return unpacked.next().unwrap_or_default();
        }
        let mut tf = [0u16; FIELDS];
        let mut shift = 0;
        for (f, bits) in Self::BITS.into_iter().enumerate() {
            tf[f] = ((self.0 >> shift) & ((1 << bits) - 1)) as u16;
            shift += bits;
        }
        tf
    }
}

/// Sorts `list` by hash, keeping the order of entries with equal hashes: a stable radix sort, a
/// byte at a time (comparison sorting was a visible part of building).
fn sort_by_hash(list: &mut Vec<(u64, u32)>) {
    let mut counts = [[0usize; 256]; 8];
    for &(hash, _) in list.iter() {
        for (byte, count) in counts.iter_mut().enumerate() {
            count[(hash >> (8 * byte)) as usize & 0xff] += 1;
        }
    }
    let mut sorted = vec![(0u64, 0u32); list.len()];
    for (byte, count) in counts.iter_mut().enumerate() {
        // Every hash has the same byte here (or there are none): nothing to reorder.
        if count.contains(&list.len()) {
            continue;
        }
        let mut sum = 0;
        for n in count.iter_mut() {
            (*n, sum) = (sum, sum + *n);
        }
        for &entry in list.iter() {
            let slot = &mut count[(entry.0 >> (8 * byte)) as usize & 0xff];
            if let Some(place) = sorted.get_mut(*slot) {
                *place = entry;
            }
            *slot += 1;
        }
        std::mem::swap(list, &mut sorted);
    }
}

/// Whether `phrase` occurs in `sequence` as consecutive terms.
fn contains_phrase(sequence: &[Option<u32>], phrase: &[u32]) -> bool {
    sequence.windows(phrase.len()).any(|w| w.iter().zip(phrase).all(|(a, b)| *a == Some(*b)))
}

/// The entry's description without its server's `[from MCP server "…"]` mark, `mark` (still
/// sanitized).
fn unmarked<'a>(entry: &PoolEntry<'a>, mark: &str) -> &'a str {
    let description = entry.description();
    match entry.server() {
        Some(_) => description.strip_prefix(mark).map_or(description, str::trim_start),
        None => description,
    }
}

/// The first [`MAX_PARAMETERS`] top-level properties of `schema`, by name.
fn parameters(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    // Schemas have a handful of keys: a scan beats hashing (serde_json's maps hash with SipHash).
    let properties = match field(schema, "properties") {
        Some(Value::Object(properties)) => Some(properties.iter().take(MAX_PARAMETERS)),
        _ => None,
    };
    properties.into_iter().flatten()
}

/// The value of `key` in `value`, if that is an object.
fn field<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    value.as_object()?.iter().find_map(|(k, v)| (k == key).then_some(v))
}

/// At most `max` characters of `text`.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Every list of frequencies comes back as it went in, packed or kept aside, in order,
        /// including those at and past each field's bits and the one that packs to the mark.
        #[test]
        fn packed_frequencies_come_back_exactly(
            tfs in prop::collection::vec(
                prop::array::uniform5(prop_oneof![0u16..4, 28u16..36, 250u16..260, 500u16..520, Just(u16::MAX)]),
                0..64,
            )
        ) {
            let mut aside = Vec::new();
            let packed: Vec<PackedTf> = tfs.iter().map(|&tf| PackedTf::new(tf, &mut aside)).collect();
            let mut aside = aside.into_iter();
            let back: Vec<[u16; FIELDS]> = packed.iter().map(|p| p.get(&mut aside)).collect();
            prop_assert_eq!(back, tfs);
            prop_assert!(aside.next().is_none());
        }
    }

    #[test]
    fn frequencies_at_every_fields_largest_value_pack_to_the_mark_and_are_kept_aside() {
        let largest: [u16; FIELDS] = PackedTf::BITS.map(|bits| (1u16 << bits) - 1);
        let mut aside = Vec::new();
        let packed = PackedTf::new(largest, &mut aside);
        assert_eq!(packed.0, PackedTf::UNPACKED);
        assert_eq!(aside, [largest]);
        assert_eq!(PackedTf::BITS.iter().sum::<u32>(), 32);
    }
}
