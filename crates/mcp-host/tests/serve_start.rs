//! The gateway backend's start: every start publishes its first listing, so `/readyz` says
//! ready (a publisher that ran before the backend existed once found it gone and never
//! published: about one start in thirty of `serve --http` stayed "not ready").

#![cfg(unix)]
// Helpers outside #[test] functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use mcp_gateway::Backend;
use mcp_host::config::{self, ConfigPath, Origin};
use mcp_host::serve::{HostBackend, ServeOptions};

/// Starts in a row, on a runtime with idle workers (where the race was): enough to see a
/// one-in-thirty failure with certainty, few enough for a second.
const STARTS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_start_publishes_its_first_listing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    // No servers: the publisher's wait for first attempts ends at once, so it runs first.
    std::fs::write(&path, "[policy]\ndefault = \"allow\"\n").unwrap();
    let at = ConfigPath::new(Some(path), Origin::Flag, true);
    for start in 0..STARTS {
        let config = config::load_at(&at, None).unwrap();
        let backend = HostBackend::start(config, ServeOptions::default()).unwrap();
        let ready = mcp_fixtures::wait_until(Duration::from_secs(5), || backend.ready().is_ok()).await;
        assert!(ready, "start {start} never became ready: {:?}", backend.ready());
        backend.close().await;
    }
}
