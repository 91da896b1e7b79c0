//! `mcp-fixture-http-server [--port P] [--json] [--stateless] [--legacy] [--no-get]
//! [--drop-answer] [--expire-after N] [--token T] [--oauth] [--oauth-expires-in N]`: the HTTP
//! fixture server (see `mcp_fixtures::http`) as a process, for trying the CLI against a remote
//! server by hand.
//!
//! `--oauth` makes the same origin an OAuth 2.1 authorization server (metadata, dynamic client
//! registration, an authorization endpoint that approves at once, PKCE, refresh tokens; see
//! `mcp_fixtures::oauth`) and `/mcp` a protected resource that needs its access tokens, e.g. for
//! `mcp-harness login NAME`. `--oauth-expires-in N` (implies `--oauth`) makes access tokens
//! expire after N seconds (default 3600).
#![allow(clippy::print_stderr, clippy::print_stdout)]

use mcp_fixtures::http::{HttpOptions, start};
use mcp_fixtures::oauth::OAuthOptions;

fn parse() -> Result<(HttpOptions, u16), String> {
    let mut o = HttpOptions { retry_ms: 100, ..HttpOptions::default() };
    let mut port = 0;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--port" => port = value("--port")?.parse().map_err(|_| "--port needs a number")?,
            "--json" => o.json = true,
            "--stateless" => o.stateless = true,
            "--legacy" => o.legacy = true,
            "--no-get" => o.no_get = true,
            "--drop-answer" => o.drop_answer = true,
            "--expire-after" => {
                o.expire_after = Some(value("--expire-after")?.parse().map_err(|_| "--expire-after needs a number")?)
            }
            "--token" => o.token = Some(value("--token")?),
            "--oauth" => {
                o.oauth.get_or_insert_with(OAuthOptions::new);
            }
            "--oauth-expires-in" => {
                let n = value("--oauth-expires-in")?.parse().map_err(|_| "--oauth-expires-in needs a number")?;
                o.oauth.get_or_insert_with(OAuthOptions::new).expires_in_s = n;
            }
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    Ok((o, port))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let (options, port) = match parse() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("mcp-fixture-http-server: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match start(options, port).await {
        Ok(server) => {
            println!("listening on {}", server.url());
            // Serve until killed.
            std::future::pending::<()>().await;
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcp-fixture-http-server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
