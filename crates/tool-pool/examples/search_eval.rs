//! Recall of tool search on a labelled set, beside two BM25 baselines computed in the same run.
//!
//! Run with `cargo xtask search-eval [--split dev|test|all]`, or
//! `cargo run --release -p tool-pool --example search_eval [-- --data DIR] [--split dev|test|all]`.
//!
//! The set (`crates/tool-pool/data/search-eval`, see its README) has real tools (BFCL functions,
//! LiveMCPBench's MCP servers) and real labelled queries. Every tool goes into one pool through
//! the same assembly as in production (names, sanitized descriptions); every index covers all of
//! it. A query's recall@k is the share of its target tools found in the first k results (a target
//! listed under several servers counts once, found through any); the figures are means over
//! queries.
//!
//! Three rankings side by side: plain BM25 over the raw name and the description; plain BM25
//! given the same fields as ours (the server's name, the parameters, names split as
//! identifiers); ours. The first difference is what the fields give, the second what the
//! ranking itself gives.
//!
//! The ranking is tuned on the `dev` split, the default here; the held-out `test` split is
//! printed only when asked for (`--split test` or `all`), with a row for its queries none of
//! whose targets answer a `dev` query. What was tuned on which split: `TUNING.md` beside the data.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::error::Error;

use policy::Policy;
use tool_pool::{Options, SearchIndex, ServerTools, assemble};

#[path = "support/dataset.rs"]
mod dataset;

const KS: [usize; 3] = [1, 5, 10];

/// The rankings compared, in the order printed.
const RANKINGS: [&str; 3] = ["plain BM25", "BM25, our fields", "ours"];

/// Sums of recall@1, @5, @10 over some queries.
#[derive(Default, Clone, Copy)]
struct Sums {
    queries: usize,
    recall: [f64; 3],
}

impl Sums {
    fn add(&mut self, recall: [f64; 3]) {
        self.queries += 1;
        for (s, r) in self.recall.iter_mut().zip(recall) {
            *s += r;
        }
    }

    fn mean(&self, k: usize) -> f64 {
        100.0 * self.recall[k] / self.queries.max(1) as f64
    }
}

/// `R@1 R@5 R@10` of `s`.
fn triple(s: &Sums) -> String {
    format!("{:5.1} {:5.1} {:5.1}", s.mean(0), s.mean(1), s.mean(2))
}

/// `R@1 R@5 R@10` of `to` minus `from`, in points.
fn gain(from: &Sums, to: &Sums) -> String {
    format!("{:+5.1} {:+5.1} {:+5.1}", to.mean(0) - from.mean(0), to.mean(1) - from.mean(1), to.mean(2) - from.mean(2))
}

/// The row of test queries none of whose targets answers a dev query: the tools are shared by
/// both splits (they are kept apart by query), so this is the part of `test` about tools the
/// tuning never saw asked for.
const UNSEEN: &str = "unseen tools";

fn main() -> Result<(), Box<dyn Error>> {
    let mut data = dataset::default_dir();
    let mut split = "dev".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--data" => data = args.next().ok_or("--data needs a directory")?.into(),
            "--split" => split = args.next().ok_or("--split needs dev, test or all")?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if !matches!(split.as_str(), "dev" | "test" | "all") {
        return Err(format!("--split {split:?}: dev, test or all").into());
    }
    let servers = dataset::tools(&data)?;
    let queries = dataset::queries(&data)?;

    let listings: Vec<ServerTools> = servers.into_iter().map(|(s, t)| ServerTools::new(s, t)).collect();
    let pool = assemble(&Vec::new().into(), &listings, &Policy::default(), &Options::default(), 1)?;
    if let Some(d) = pool.diagnostics().first() {
        return Err(
            format!("the set does not assemble cleanly ({} problems), first: {d}", pool.diagnostics().len()).into()
        );
    }
    let model_name: HashMap<(String, String), String> = pool
        .iter()
        .filter_map(|e| Some(((e.server()?.to_owned(), e.tool().to_owned()), e.name().to_owned())))
        .collect();
    let indexes = [
        SearchIndex::plain_bm25(pool.iter()),
        SearchIndex::plain_bm25_same_fields(pool.iter()),
        SearchIndex::from_entries(pool.iter()),
    ];
    let dev_targets: HashSet<&(String, String)> =
        queries.iter().filter(|q| q.split == "dev").flat_map(|q| q.targets.iter().flatten()).collect();

    // (split, source) -> sums per ranking; "all" rows aggregate.
    let mut table: BTreeMap<(String, String), [Sums; 3]> = BTreeMap::new();
    let shown: Vec<_> = queries.iter().filter(|q| split == "all" || q.split == split).collect();
    for q in &shown {
        let targets: Vec<Vec<&str>> = q
            .targets
            .iter()
            .map(|alternatives| {
                alternatives
                    .iter()
                    .filter_map(|(s, t)| model_name.get(&(s.clone(), t.clone())))
                    .map(String::as_str)
                    .collect()
            })
            .collect();
        if targets.iter().any(Vec::is_empty) {
            return Err(format!("query {}: a target is not in the pool", q.id).into());
        }
        let recall = |index: &SearchIndex| {
            let found: Vec<String> = index.search(&q.query, Some(10)).hits.iter().map(|h| h.name.to_string()).collect();
            KS.map(|k| {
                let top = &found[..k.min(found.len())];
                let hits = targets.iter().filter(|alts| alts.iter().any(|a| top.iter().any(|f| f == a))).count();
                hits as f64 / targets.len() as f64
            })
        };
        let recalls = indexes.each_ref().map(recall);
        let mut keys = vec![(q.split.clone(), q.source.clone()), (q.split.clone(), "all".into())];
        if split == "all" {
            keys.push(("all".into(), "all".into()));
        }
        if q.split == "test" && !q.targets.iter().flatten().any(|t| dev_targets.contains(t)) {
            keys.push((q.split.clone(), UNSEEN.into()));
        }
        for key in keys {
            let row = table.entry(key).or_default();
            for (sums, r) in row.iter_mut().zip(recalls) {
                sums.add(r);
            }
        }
    }

    println!(
        "tool search evaluation: {} tools from {} servers in one pool, {} queries of the {split} split{} ({})",
        pool.len(),
        listings.len(),
        shown.len(),
        if split == "all" { "s" } else { "" },
        data.display()
    );
    let w = 17;
    println!(
        "\n{:<5} {:<16} {:>7}  {:>w$}  {:>w$}  {:>w$}  {:>w$}  {:>w$}",
        "split", "source", "queries", RANKINGS[0], RANKINGS[1], RANKINGS[2], "the fields give", "the ranking gives"
    );
    for ((split, source), [plain, fields, ours]) in &table {
        println!(
            "{split:<5} {source:<16} {:>7}  {:>w$}  {:>w$}  {:>w$}  {:>w$}  {:>w$}",
            plain.queries,
            triple(plain),
            triple(fields),
            triple(ours),
            gain(plain, fields),
            gain(fields, ours)
        );
    }
    println!("(recall@1, @5, @10 in percent; gains in points)");
    for name in ["dev", "test"] {
        let Some([plain, fields, ours]) = table.get(&(name.to_owned(), "all".to_owned())) else { continue };
        let what = if name == "test" { "held-out test split" } else { "dev split (tuned on)" };
        println!(
            "\n{what}: recall@5 {:.1} (ours) vs {:.1} (plain BM25), {:+.1} points (goal: +5): {:+.1} from the fields, \
             {:+.1} from the ranking",
            ours.mean(1),
            plain.mean(1),
            ours.mean(1) - plain.mean(1),
            fields.mean(1) - plain.mean(1),
            ours.mean(1) - fields.mean(1)
        );
    }
    if split == "dev" {
        println!(
            "\nThe held-out test split is not shown: `--split test` shows it, once the tuning is done (a split looked \
             at while tuning is a second dev split; TUNING.md records what was tuned on which)."
        );
    }
    Ok(())
}
