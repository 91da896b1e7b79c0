//! `mcp-fixture-conformance [--http ADDR]`: the conformance-style MCP server of
//! `mcp_fixtures::conformance` on stdio, or over Streamable HTTP at `http://ADDR/mcp` (it prints
//! `listening on URL` first; port 0 picks a free one).
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::net::SocketAddr;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => mcp_fixtures::conformance::serve_stdio(tokio::io::stdin(), tokio::io::stdout()).await,
        [flag, addr] if flag == "--http" => match addr.parse::<SocketAddr>() {
            Ok(addr) => serve(addr).await,
            Err(e) => {
                eprintln!("mcp-fixture-conformance: --http {addr:?}: {e} (give an address such as 127.0.0.1:0)");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: mcp-fixture-conformance [--http ADDR]");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-fixture-conformance: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(addr: SocketAddr) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    mcp_fixtures::conformance::serve_http(listener).await
}
