//! `cargo xtask bench catalog`: not written yet.

use crate::Result;

pub(crate) fn run(_n: usize, _rounds: usize) -> Result {
    println!("no catalog benchmark yet");
    Ok(())
}
