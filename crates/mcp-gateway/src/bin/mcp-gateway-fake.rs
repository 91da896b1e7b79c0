//! The gateway over fake upstreams ([`mcp_gateway::fake::FakeBackend`]): what the gateway's own
//! tests run as a real process (`stdio`, or `http ADDR` which prints `listening on URL`).
//!
//! Upstreams: `files` (`read_file` allowed, `write_file` asks, `rm` denied) and `echo` (`echo`,
//! `slow`, `progress`, allowed).

use std::sync::Arc;

use mcp_gateway::fake::FakeBackend;
use mcp_gateway::{Gateway, GatewayOptions, HttpOptions, HttpServer, StdioOptions, serve_stdio};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gateway = match Gateway::new(Arc::new(FakeBackend::standard()), GatewayOptions::default()) {
        Ok(gateway) => gateway,
        Err(e) => {
            eprintln!("mcp-gateway-fake: {e}");
            std::process::exit(1);
        }
    };
    match args.first().map(String::as_str) {
        Some("stdio") | None => {
            let (input, output, _modes) = mcp_gateway::process_stdio();
            if let Err(e) = serve_stdio(gateway, input, output, StdioOptions::default()).await {
                eprintln!("mcp-gateway-fake: {e}");
                std::process::exit(1);
            }
        }
        Some("http") => {
            let addr = args.get(1).and_then(|a| a.parse().ok()).unwrap_or_else(|| HttpOptions::default().addr);
            match HttpServer::bind(gateway, HttpOptions { addr, ..HttpOptions::default() }).await {
                Ok(server) => {
                    println!("listening on http://{}/mcp", server.local_addr());
                    server.run(std::future::pending()).await;
                }
                Err(e) => {
                    eprintln!("mcp-gateway-fake: {e}");
                    std::process::exit(2);
                }
            }
        }
        Some(other) => {
            eprintln!("mcp-gateway-fake: unknown mode {other:?} (stdio, or http ADDR)");
            std::process::exit(2);
        }
    }
}
