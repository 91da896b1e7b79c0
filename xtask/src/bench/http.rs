//! `cargo xtask bench http`: not written yet.

use crate::Result;

pub(crate) fn run(_n: usize, _rounds: usize) -> Result {
    println!("no http benchmark yet");
    Ok(())
}
