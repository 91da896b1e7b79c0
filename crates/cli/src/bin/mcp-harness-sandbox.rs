//! `mcp-harness-sandbox`: the sandbox launcher that `mcp-harness` starts confined servers with.
//! A small program of its own because starting one costs less than starting the whole host
//! (which can also serve, under a hidden argument, when this one is missing).

fn main() {
    mcp_sandbox::launcher::run(&[], std::env::args_os().skip(1).collect())
}
