//! `mcp-sandbox-launch [--read PATH] [--write PATH] [--network off] [--processes N] ... -- PROGRAM ARGS`:
//! the sandbox launcher on its own, for hosts that do not embed it (and for tests).

fn main() {
    mcp_sandbox::launcher::run(&[], std::env::args_os().skip(1).collect())
}
