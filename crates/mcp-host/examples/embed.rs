//! Embedding the host: a program of its own reads a configuration file, starts the living
//! runtime over it (supervised servers, the file watched), and calls a tool through the same
//! gate the command-line agent uses. The server is the workspace's fixture server (build it
//! with `cargo build -p mcp-fixtures`; `cargo xtask test` does and runs this example).
//!
//! Run it: `cargo run -p mcp-host --example embed`.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use agent_loop::{Admission, CallGate, CallRequest, Catalog, Ran, render};
use mcp_host::config::{self, ConfigPath, Origin};
use mcp_host::{HostEvent, Runtime, RuntimeOptions};
use serde_json::json;

fn main() -> Result<(), Box<dyn Error>> {
    // Confined stdio servers are started through a launcher; without `mcp-harness-sandbox`
    // beside this program, the program itself is the launcher, so this comes first, while the
    // process has one thread.
    mcp_host::sandbox::launch_if_asked();
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(embed())
}

async fn embed() -> Result<(), Box<dyn Error>> {
    // The configuration, as a user would write it (any supported format would do).
    let fixture = mcp_fixtures::server_binary()?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("config.toml");
    let text = format!(
        "[servers.fixture]\ncommand = {:?}\nargs = [\"echo\"]\n\n[policy]\ndefault = \"allow\"\n",
        fixture.display().to_string()
    );
    std::fs::write(&path, text)?;

    // Read under the workspace rule, and reloaded when the file changes.
    let at = ConfigPath::new(Some(path), Origin::Flag, false);
    let config = config::load_at(&at, None)?;
    let mut options = RuntimeOptions::default();
    options.reload = Some(at);
    options.ports.events = Arc::new(|event: &HostEvent| eprintln!("host: {event:?}"));
    let runtime = Arc::new(Runtime::start(config, options));
    runtime.wait_first_attempts(Duration::from_secs(30), &|pending, _, _| eprintln!("waiting for {pending:?}")).await;
    runtime.check_required()?;

    // One call, checked as the agent loop checks its own: the name shown, the arguments against
    // the schema, the policy.
    let catalog = Catalog::new(Arc::new([]), (*runtime.policy().1).clone(), tool_pool::Options::default());
    let binding = catalog.bind(runtime.as_ref()).await?;
    let gate = CallGate::default();
    let arguments = json!({"text": "hello from an embedder"});
    let request = CallRequest { id: "1", name: "mcp__fixture__echo", arguments: &arguments };
    let job = match gate.admit(&binding, runtime.as_ref(), request).await {
        Admission::Run { job, .. } => job,
        Admission::Refused(refusal) => return Err(refusal.into()),
        other => return Err(format!("not admitted: {other:?}").into()),
    };
    let result = match gate.run(runtime.as_ref(), job, None).await {
        Ran::Mcp(Ok(result)) => result,
        Ran::Mcp(Err(error)) => return Err(error.into()),
        other => return Err(format!("not run: {other:?}").into()),
    };
    let text = render(&result);
    assert_eq!(text, "hello from an embedder", "the fixture echoes its text");
    println!("{text}");

    if let Ok(runtime) = Arc::try_unwrap(runtime) {
        runtime.close().await;
    }
    Ok(())
}
