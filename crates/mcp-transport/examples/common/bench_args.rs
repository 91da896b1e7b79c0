//! Shared command line of the stdio benchmarks (included by both examples).
//!
//! `[-n 2000] [--concurrency 1] [--tool echo] [--arg-name text] [--warmup 50] -- SERVER CMD...`

/// The parsed command line.
pub struct BenchArgs {
    /// Calls to measure.
    pub n: usize,
    /// Calls kept in flight.
    pub concurrency: usize,
    /// The tool to call.
    pub tool: String,
    /// The argument that carries the text.
    pub arg_name: String,
    /// Unmeasured calls first.
    pub warmup: usize,
    /// The server's command line.
    pub command: Vec<String>,
}

/// Parse the process arguments.
pub fn parse_args() -> Result<BenchArgs, String> {
    let mut args = std::env::args().skip(1);
    let mut out = BenchArgs {
        n: 2000,
        concurrency: 1,
        tool: "echo".into(),
        arg_name: "text".into(),
        warmup: 50,
        command: Vec::new(),
    };
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "-n" => out.n = value("-n")?.parse().map_err(|e| format!("-n: {e}"))?,
            "--concurrency" => {
                out.concurrency = value("--concurrency")?.parse().map_err(|e| format!("--concurrency: {e}"))?
            }
            "--tool" => out.tool = value("--tool")?,
            "--arg-name" => out.arg_name = value("--arg-name")?,
            "--warmup" => out.warmup = value("--warmup")?.parse().map_err(|e| format!("--warmup: {e}"))?,
            "--" => {
                out.command = args.by_ref().collect();
                break;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if out.command.is_empty() {
        return Err(
            "usage: [-n 2000] [--concurrency 1] [--tool echo] [--arg-name text] [--warmup 50] -- SERVER CMD...".into(),
        );
    }
    out.concurrency = out.concurrency.max(1);
    Ok(out)
}

/// Print the one JSON line of results.
pub fn report(client: &str, args: &BenchArgs, elapsed: std::time::Duration, mut latencies_ms: Vec<f64>) {
    latencies_ms.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| -> f64 {
        if latencies_ms.is_empty() {
            return 0.0;
        }
        let idx = ((latencies_ms.len() as f64 - 1.0) * p).round() as usize;
        latencies_ms[idx.min(latencies_ms.len() - 1)]
    };
    let mean = latencies_ms.iter().sum::<f64>() / latencies_ms.len().max(1) as f64;
    println!(
        "{{\"client\":\"{client}\",\"n\":{},\"concurrency\":{},\"calls_per_s\":{:.1},\"p50_ms\":{:.3},\"p90_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"mean_ms\":{:.3}}}",
        args.n,
        args.concurrency,
        args.n as f64 / elapsed.as_secs_f64(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0),
        mean
    );
}
