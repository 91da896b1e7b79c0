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
//!
//! With that linker it also packs the relative relocations (see `pack_relative_relocations`).

use std::path::Path;

/// Set to link without the order (what `cargo xtask startup-order` profiles first).
const NO_ORDER_ENV: &str = "MCP_HARNESS_NO_STARTUP_ORDER";

fn main() {
    println!("cargo:rerun-if-changed=startup.order");
    println!("cargo:rerun-if-env-changed={NO_ORDER_ENV}");
    if !links_with_rust_lld() {
        return;
    }
    pack_relative_relocations();
    if std::env::var_os(NO_ORDER_ENV).is_some() {
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

/// Packs the binary's relative relocations (DT_RELR) where the C library runs such binaries
/// (glibc 2.36 and later: it defines `GLIBC_ABI_DT_RELR`, which the binary then requires).
///
/// A position-independent executable has one relocation per pointer in its data (33,000 here):
/// 24 bytes each as RELA entries, read at every start, about 0.8 MB of the file; packed, 9 KB.
/// Measured with `serve --http` and ten idle upstreams (dist build, after 200 calls): peak
/// resident set 22.5 -> 20.0 MB. Position independence (ASLR) stays.
fn pack_relative_relocations() {
    const LIBCS: [&str; 4] = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib64/libc.so.6",
    ];
    let Some(libc) = LIBCS.iter().find(|path| Path::new(path).is_file()) else { return };
    println!("cargo:rerun-if-changed={libc}");
    let Ok(bytes) = std::fs::read(libc) else { return };
    let needle = b"GLIBC_ABI_DT_RELR";
    if bytes.windows(needle.len()).any(|window| window == needle) {
        println!("cargo:rustc-link-arg-bin=mcp-harness=-Wl,-z,pack-relative-relocs");
    }
}
