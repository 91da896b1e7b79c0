//! `cargo xtask bench http`: Streamable HTTP `tools/call` through the project's client beside a
//! raw pooled hyper keep-alive client making the same POSTs (the floor), both against the same
//! minimal server (`http_bench serve`, its own process), for JSON and SSE answers, one and 32
//! calls in flight; then the time to open a session (transport open + `initialize` +
//! `notifications/initialized`) of both. Rounds are interleaved and alternate who goes first.
//!
//! Both placements of the server and the client are measured (see [`Placement`]): on one CPU,
//! and on two.

use std::path::Path;
use std::process::Stdio;

use super::{Placement, Server, field, load, median};
use crate::{Result, cargo};

/// Calls kept in flight in the concurrent runs.
const IN_FLIGHT: [usize; 2] = [1, 32];
/// Sessions opened one after the other per round.
const OPENS: usize = 50;

struct Figure {
    placement: &'static str,
    client: &'static str,
    answers: &'static str,
    concurrency: usize,
    calls_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    new_connections: f64,
}

struct Open {
    placement: &'static str,
    client: &'static str,
    first_ms: f64,
    median_ms: f64,
}

pub(super) fn example(place: Placement, bench: &Path, args: &[&str]) -> Result<String> {
    let out = place.command(bench, false).args(args).output().map_err(|e| format!("http_bench: {e}"))?;
    if !out.status.success() {
        return Err(format!("http_bench {args:?} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

pub(crate) fn run(n: usize, rounds: usize) -> Result {
    crate::run(
        "build (release)",
        cargo().args(["build", "--release", "-p", "mcp-transport", "--example", "http_bench"]),
    )?;
    let bench = super::release_dir().join("examples").join("http_bench");
    let placements = Placement::available();
    if placements.is_empty() {
        return Err("taskset could not be run, and the figures depend on where the processes run".into());
    }
    let load_before = load();
    let (mut figures, mut opens) = (Vec::new(), Vec::new());
    for &place in &placements {
        let placement = place.label();
        let mut command = place.command(&bench, true);
        command.arg("serve").stdin(Stdio::piped()).stdout(Stdio::piped());
        let (server, base) = Server::started(command, "http_bench serve")?;
        for round in 1..=rounds {
            // Alternate who goes first, so warm caches or a busy neighbour favour neither.
            let order: [(&str, &'static str); 2] = if round % 2 == 1 {
                [("hyper", "hyper floor"), ("harness", "mcp-harness")]
            } else {
                [("harness", "mcp-harness"), ("hyper", "hyper floor")]
            };
            for answers in ["json", "sse"] {
                let url = format!("{base}/{answers}");
                for concurrency in IN_FLIGHT {
                    for (arg, client) in order {
                        let (n_arg, concurrency_arg) = (n.to_string(), concurrency.to_string());
                        let line = example(
                            place,
                            &bench,
                            &["calls", "--client", arg, "--url", &url, "-n", &n_arg, "--concurrency", &concurrency_arg],
                        )?;
                        println!("{placement}, round {round} {answers}: {line}");
                        figures.push(Figure {
                            placement,
                            client,
                            answers,
                            concurrency,
                            calls_per_s: field(&line, "calls_per_s").ok_or("no calls_per_s in output")?,
                            p50_ms: field(&line, "p50_ms").unwrap_or(0.0),
                            p99_ms: field(&line, "p99_ms").unwrap_or(0.0),
                            new_connections: field(&line, "new_connections").unwrap_or(0.0),
                        });
                    }
                }
            }
            for (arg, client) in order {
                let url = format!("{base}/json");
                let opens_arg = OPENS.to_string();
                let line = example(place, &bench, &["open", "--client", arg, "--url", &url, "-n", &opens_arg])?;
                println!("{placement}, round {round} open: {line}");
                opens.push(Open {
                    placement,
                    client,
                    first_ms: field(&line, "first_open_ms").unwrap_or(0.0),
                    median_ms: field(&line, "open_ms").ok_or("no open_ms in output")?,
                });
            }
        }
        drop(server);
    }
    let load_after = load();

    println!("\nload average (1, 5, 15 min): {load_before} before, {load_after} after");
    println!(
        "\n| placement | answers | in flight | client | calls/s (median of {rounds}) | p50 ms | p99 ms | new connections |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut all_met = true;
    let mut verdicts = Vec::new();
    for placement in placements.iter().map(|p| p.label()) {
        for answers in ["json", "sse"] {
            for concurrency in IN_FLIGHT {
                let pick = |client: &str, f: fn(&Figure) -> f64| {
                    median(
                        figures
                            .iter()
                            .filter(|x| {
                                x.placement == placement
                                    && x.client == client
                                    && x.answers == answers
                                    && x.concurrency == concurrency
                            })
                            .map(f)
                            .collect(),
                    )
                };
                for client in ["hyper floor", "mcp-harness"] {
                    println!(
                        "| {placement} | {answers} | {concurrency} | {client} | {:.0} | {:.3} | {:.3} | {:.0} |",
                        pick(client, |f| f.calls_per_s),
                        pick(client, |f| f.p50_ms),
                        pick(client, |f| f.p99_ms),
                        pick(client, |f| f.new_connections),
                    );
                }
                let ratio = pick("mcp-harness", |f| f.calls_per_s) / pick("hyper floor", |f| f.calls_per_s);
                let p50 = pick("mcp-harness", |f| f.p50_ms) / pick("hyper floor", |f| f.p50_ms);
                let met = ratio >= 0.9 && p50 <= 1.2;
                all_met &= met;
                verdicts.push(format!(
                    "{placement}, {answers}, {concurrency} in flight: calls/s ratio {ratio:.3} (goal >= 0.9), p50 ratio \
                     {p50:.3} (goal <= 1.2): {}",
                    if met { "met" } else { "MISSED" }
                ));
            }
        }
    }
    println!("\n| placement | session open | first in the process, ms | median of the next {}, ms |", OPENS - 1);
    println!("|---|---|---|---|");
    let mut open_verdicts = Vec::new();
    for placement in placements.iter().map(|p| p.label()) {
        let open = |client: &str, f: fn(&Open) -> f64| {
            median(opens.iter().filter(|o| o.placement == placement && o.client == client).map(f).collect())
        };
        for client in ["hyper floor", "mcp-harness"] {
            println!(
                "| {placement} | {client} | {:.3} | {:.3} |",
                open(client, |o| o.first_ms),
                open(client, |o| o.median_ms)
            );
        }
        // The goal is the steady open; the first in a process also pays the process's own first
        // connection and page faults, the floor's as much (both are shown above).
        let open_ms = open("mcp-harness", |o| o.median_ms);
        let open_met = open_ms < 1.5;
        all_met &= open_met;
        open_verdicts.push(format!(
            "{placement}, session open: {open_ms:.3} ms, {:.2}x the floor's (goal < 1.5 ms): {}",
            open_ms / open("hyper floor", |o| o.median_ms),
            if open_met { "met" } else { "MISSED" }
        ));
    }
    println!();
    for verdict in verdicts.into_iter().chain(open_verdicts) {
        println!("{verdict}");
    }
    println!("\nbench: {}", if all_met { "every goal met" } else { "goals missed" });
    Ok(())
}
