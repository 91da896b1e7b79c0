//! tidy's checks against fixture crates that break one rule each (`fixtures`), and against this
//! workspace (`workspace`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixtures;
mod workspace;
