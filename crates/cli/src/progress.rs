//! A tool's progress on the terminal while it runs: a bar with the server's message when the
//! server gives a total, a spinner otherwise; nothing when stderr is not a terminal (scripts
//! read `--json` events instead), and nothing while a question is asked on the terminal.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::output;

/// Every progress bar of the process draws through this, so a question on the terminal can
/// take them off it ([`hidden_while`]).
static BARS: LazyLock<MultiProgress> = LazyLock::new(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));

/// Runs `ask` with every progress bar off the terminal (a question is asked there: a bar
/// redrawing would overwrite it); they come back, below, afterwards.
pub(crate) fn hidden_while<T>(ask: impl FnOnce() -> T) -> T {
    let _ = BARS.clear();
    BARS.set_draw_target(ProgressDrawTarget::hidden());
    let answer = ask();
    BARS.set_draw_target(ProgressDrawTarget::stderr());
    answer
}

/// Progress bars by call, on stderr.
pub(crate) struct ProgressView {
    enabled: bool,
    bars: Mutex<BTreeMap<String, ProgressBar>>,
}

impl ProgressView {
    /// Shows bars only when stderr is a terminal.
    pub(crate) fn new() -> Self {
        Self { enabled: std::io::stderr().is_terminal(), bars: Mutex::new(BTreeMap::new()) }
    }

    /// The call `id` (shown as `name`) reported `progress` of `total`, with `message` (server text,
    /// cleaned here).
    pub(crate) fn update(&self, id: &str, name: &str, progress: f64, total: Option<f64>, message: Option<&str>) {
        if !self.enabled {
            return;
        }
        let mut bars = mcp_safety::lock(&self.bars);
        let bar = bars.entry(id.to_owned()).or_insert_with(|| {
            let bar = BARS.add(ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()));
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let label = output::one_line(name, 60);
        let message = message.map(|m| output::one_line(m, 80)).unwrap_or_default();
        match total.filter(|t| t.is_finite() && *t > 0.0) {
            Some(total) => {
                bar.set_style(
                    ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                // Whole units for the bar; the server's numbers may be fractional.
                bar.set_length(as_units(total));
                bar.set_position(as_units(progress.min(total)));
            }
            None => bar.set_style(ProgressStyle::default_spinner()),
        }
        bar.set_prefix(label);
        bar.set_message(message);
    }

    /// The call `id` ended: its bar goes away.
    pub(crate) fn finish(&self, id: &str) {
        let bar = mcp_safety::lock(&self.bars).remove(id);
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
    }
}

fn as_units(value: f64) -> u64 {
    if value.is_finite() && value > 0.0 {
        // Bounded above so the cast cannot saturate in surprising ways.
        value.min(1e15).round() as u64
    } else {
        0
    }
}
