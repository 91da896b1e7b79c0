//! A remote server by URL: WebSocket for `ws://` and `wss://`, HTTP for anything else.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use mcp_client::{Authorizer, Connector, Opened, TransportError};
use mcp_safety::Backoff;

use crate::http::{HttpConfig, HttpMode};
use crate::ws::WebSocketConfig;

/// Settings of a remote server beyond its URL and headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteOptions {
    /// The name of an environment variable holding a bearer token, sent as
    /// `Authorization: Bearer ...` (the token never appears in configuration).
    pub bearer_token_env: Option<String>,
    /// Which HTTP transport (`LegacySse` for a server configured as `type = "sse"`).
    pub http_mode: HttpMode,
}

impl RemoteOptions {
    /// Options with a bearer token read from environment variable `var`.
    pub fn bearer_token_env(mut self, var: impl Into<String>) -> Self {
        self.bearer_token_env = Some(var.into());
        self
    }

    /// Options with the given HTTP transport.
    pub fn http_mode(mut self, mode: HttpMode) -> Self {
        self.http_mode = mode;
        self
    }
}

/// A remote server: Streamable HTTP (falling back to the 2024-11-05 HTTP+SSE transport on a
/// 4xx), or WebSocket for `ws://` and `wss://` URLs.
#[derive(Clone)]
#[non_exhaustive]
pub struct RemoteServer {
    /// Its endpoint.
    pub url: String,
    /// HTTP headers to send (often credentials).
    pub headers: BTreeMap<String, String>,
    /// Token variable and HTTP mode.
    pub options: RemoteOptions,
    /// Supplies credentials to an HTTP server (OAuth); WebSocket servers get none.
    pub authorizer: Option<Arc<dyn Authorizer>>,
    /// How connections are retried.
    pub reconnect: Backoff,
}

impl fmt::Debug for RemoteServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values are often tokens: never print them.
        f.debug_struct("RemoteServer")
            .field("url", &mcp_safety::redact::url(&self.url))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("options", &self.options)
            .field("authorizer", &self.authorizer.is_some())
            .finish_non_exhaustive()
    }
}

impl RemoteServer {
    /// The server at `url`, with no headers and default options.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: BTreeMap::new(),
            options: RemoteOptions::default(),
            authorizer: None,
            reconnect: Backoff::default(),
        }
    }

    /// Whether it is reached over WebSocket.
    pub fn is_websocket(&self) -> bool {
        self.url.starts_with("ws://") || self.url.starts_with("wss://")
    }
}

#[async_trait]
impl Connector for RemoteServer {
    async fn open(&self, name: &str) -> Result<Opened, TransportError> {
        if self.is_websocket() {
            let mut config = WebSocketConfig::new(self.url.clone());
            config.headers = self.headers.clone();
            config.reconnect = self.reconnect;
            config.bearer_token_env = self.options.bearer_token_env.clone();
            config.open(name).await
        } else {
            let mut config = HttpConfig::new(self.url.clone());
            config.headers = self.headers.clone();
            config.reconnect = self.reconnect;
            config.bearer_token_env = self.options.bearer_token_env.clone();
            config.mode = self.options.http_mode;
            config.auth = self.authorizer.clone();
            config.open(name).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_headers_are_not_printed() {
        let mut server = RemoteServer::new("https://x.invalid");
        server.headers.insert("Authorization".to_owned(), "Bearer secret".to_owned());
        let shown = format!("{server:?}");
        assert!(shown.contains("Authorization") && !shown.contains("secret"), "{shown}");
    }
}
