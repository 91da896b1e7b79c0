//! Links `mcp-harness` with the functions a start runs next to each other.
//!
//! A start touches code scattered over about 14 MB of text, and each 64 KiB window it touches
//! costs a page fault that maps the window (about 2.5 us each here, 104 windows for
//! `tools --json`). `startup.order` lists those functions (`cargo xtask startup-order` writes
//! it); LLD's `--symbol-ordering-file` lays them out first, so a start maps far fewer windows:
//! 104 -> 47 code page faults, and 4.2 -> 3.4 ms for `tools --json` with one stdio server
//! (interleaved starts of the binaries before and after).
//!
//! Only with the linker Rust uses on x86_64 Linux since 1.90 (its own LLD): another linker
//! may not know the option, so a configured linker or linker flags leave the layout as it is.
//! Names the file no longer matches are skipped; `cargo xtask bench startup` says how many
//! still match.

use std::path::Path;

/// Set to link without the order (what `cargo xtask startup-order` profiles first).
const NO_ORDER_ENV: &str = "MCP_HARNESS_NO_STARTUP_ORDER";

fn main() {
    println!("cargo:rerun-if-changed=startup.order");
    println!("cargo:rerun-if-env-changed={NO_ORDER_ENV}");
    if std::env::var_os(NO_ORDER_ENV).is_some() || !links_with_rust_lld() {
        return;
    }
    let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") else { return };
    let order = Path::new(&dir).join("startup.order");
    let Some(order) = order.to_str().filter(|path| !path.contains(',') && Path::new(path).is_file()) else {
        // `-Wl,` splits at commas.
        return;
    };
    println!("cargo:rustc-link-arg-bin=mcp-harness=-Wl,--symbol-ordering-file={order}");
    println!("cargo:rustc-link-arg-bin=mcp-harness=-Wl,--no-warn-symbol-ordering");
}

/// Whether the binary is linked by rustc's own LLD: the default for x86_64-unknown-linux-gnu
/// from Rust 1.90 (the workspace's `rust-version`), unless a linker or linker flags are set.
fn links_with_rust_lld() -> bool {
    let target = std::env::var("TARGET").unwrap_or_default();
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    target == "x86_64-unknown-linux-gnu"
        && std::env::var_os("RUSTC_LINKER").is_none()
        && !["linker", "fuse-ld", "link-self-contained"].iter().any(|flag| flags.contains(flag))
}
