//! `cargo xtask bench agent`: not written yet.

use crate::Result;

pub(crate) fn run(_n: usize, _rounds: usize) -> Result {
    println!("no agent benchmark yet");
    Ok(())
}
