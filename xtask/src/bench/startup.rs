//! `cargo xtask bench startup`: not written yet.

use crate::Result;

pub(crate) fn run(_n: usize, _rounds: usize) -> Result {
    println!("no startup benchmark yet");
    Ok(())
}
