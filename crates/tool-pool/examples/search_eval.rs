//! Recall of tool search on a labelled set, beside a plain BM25 baseline computed in the same run.
//!
//! Run with `cargo xtask search-eval`, or
//! `cargo run --release -p tool-pool --example search_eval [-- --data DIR] [--split dev|test|all]`.
//!
//! The set (`crates/tool-pool/data/search-eval`, see its README) has real tools (BFCL functions,
//! LiveMCPBench's MCP servers) and real labelled queries. Every tool goes into one pool through
//! the same assembly as in production (names, sanitized descriptions); both indexes cover all of
//! it. A query's recall@k is the share of its target tools found in the first k results (a target
//! listed under several servers counts once, found through any); the figures are means over
//! queries. The ranking was tuned on the `dev` split; `test` is held out.

use std::collections::{BTreeMap, HashMap};
use std::error::Error;

use policy::Policy;
use tool_pool::{Options, SearchIndex, ServerTools, assemble};

#[path = "support/dataset.rs"]
mod dataset;

const KS: [usize; 3] = [1, 5, 10];

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

fn main() -> Result<(), Box<dyn Error>> {
    let mut data = dataset::default_dir();
    let mut split = "all".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--data" => data = args.next().ok_or("--data needs a directory")?.into(),
            "--split" => split = args.next().ok_or("--split needs dev, test or all")?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
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
    let ours = SearchIndex::from_entries(pool.iter());
    let plain = SearchIndex::plain_bm25(pool.iter());

    // (split, source) -> (baseline, ours); "all" rows aggregate.
    let mut table: BTreeMap<(String, String), (Sums, Sums)> = BTreeMap::new();
    for q in queries.iter().filter(|q| split == "all" || q.split == split) {
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
        let (b, o) = (recall(&plain), recall(&ours));
        for key in [(q.split.clone(), q.source.clone()), (q.split.clone(), "all".into()), ("all".into(), "all".into())]
        {
            let row = table.entry(key).or_default();
            row.0.add(b);
            row.1.add(o);
        }
    }

    println!(
        "tool search evaluation: {} tools from {} servers in one pool, {} queries ({})",
        pool.len(),
        listings.len(),
        queries.iter().filter(|q| split == "all" || q.split == split).count(),
        data.display()
    );
    println!(
        "\n{:<6} {:<16} {:>7}  {:>23}  {:>23}  {:>20}",
        "split", "source", "queries", "plain BM25 R@1/5/10", "ours R@1/5/10", "difference (points)"
    );
    for ((split, source), (b, o)) in &table {
        let fmt = |s: &Sums| format!("{:5.1} {:5.1} {:5.1}", s.mean(0), s.mean(1), s.mean(2));
        let diff =
            format!("{:+5.1} {:+5.1} {:+5.1}", o.mean(0) - b.mean(0), o.mean(1) - b.mean(1), o.mean(2) - b.mean(2));
        println!("{split:<6} {source:<16} {:>7}  {:>23}  {:>23}  {:>20}", b.queries, fmt(b), fmt(o), diff);
    }
    if let Some((b, o)) = table.get(&("test".to_owned(), "all".to_owned())) {
        let gain = o.mean(1) - b.mean(1);
        println!(
            "\nheld-out test split: recall@5 {:.1} vs {:.1} (plain BM25), {gain:+.1} points (goal: +5)",
            o.mean(1),
            b.mean(1)
        );
    }
    Ok(())
}
