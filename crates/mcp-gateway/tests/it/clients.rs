//! The project's own client (`mcp-client` over `mcp-transport`'s Streamable HTTP) against the
//! gateway: both eras connect, list, call and answer an approval through their elicitation
//! handler (in the stateless era the client retries the `input_required` call itself).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use mcp_client::{Client, ClientOptions, Era, ListLimits, RequestOptions, ServerRequestHandler};
use mcp_protocol::{ClientCapabilities, ElicitAction, ElicitRequestParams, ElicitResult, ErrorObject, ProtocolVersion};
use mcp_transport::{HttpConfig, HttpTransport};
use serde_json::{Map, json};

use crate::*;

/// Says yes to every approval form, counting them.
#[derive(Default)]
struct SaysYes(AtomicUsize);

#[async_trait]
impl ServerRequestHandler for SaysYes {
    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        assert!(params.message.starts_with("Allow files__write_file"), "{}", params.message);
        self.0.fetch_add(1, Ordering::SeqCst);
        let content = Map::from_iter([("decision".to_owned(), json!("yes"))]);
        Ok(ElicitResult { action: ElicitAction::Accept, content: Some(content), extra: Map::new() })
    }
}

async fn client(url: String, era: Era, offered: ProtocolVersion, handler: Arc<SaysYes>) -> Client {
    let transport = HttpTransport::new(HttpConfig::new(url)).unwrap();
    let options = ClientOptions {
        era,
        offered_version: offered,
        capabilities: ClientCapabilities { elicitation: Some(json!({})), ..ClientCapabilities::default() },
        handler,
        startup_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    };
    Client::connect(transport, options).await.unwrap()
}

#[tokio::test]
async fn the_projects_client_uses_the_gateway_in_both_eras() {
    let gw = start().await;
    for (era, offered, expected) in [
        (Era::Auto, ProtocolVersion::LATEST, ProtocolVersion::V2026_07_28),
        (Era::Initialize, ProtocolVersion::V2025_06_18, ProtocolVersion::V2025_06_18),
        (Era::Initialize, ProtocolVersion::V2025_11_25, ProtocolVersion::V2025_11_25),
    ] {
        let asked = Arc::new(SaysYes::default());
        let client = client(gw.url(), era, offered, Arc::clone(&asked)).await;
        assert_eq!(client.protocol_version(), Some(expected));
        let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
        assert_eq!(tools.len(), 5, "{expected}");
        let args = json!({"path": format!("{expected}.txt")}).as_object().cloned();
        let result = client.call_tool("files__write_file", args, RequestOptions::default()).await.unwrap();
        assert!(!result.is_error(), "{expected}: {}", result.joined_text());
        assert!(result.joined_text().contains(&format!("{expected}.txt")));
        assert_eq!(asked.0.load(Ordering::SeqCst), 1, "{expected}: asked once");
        client.close().await.unwrap();
    }
    assert_eq!(gw.backend.calls().len(), 3);
}
