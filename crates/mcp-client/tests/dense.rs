//! A server that packs a message with values (`[[0]],[[0]],...`: 16 MiB read as 1.8 GB of
//! values) has it refused before anything is built from it, and the session goes on.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use mcp_client::{Client, ClientError, ClientOptions, ListLimits, memory_pair};
use serde_json::{Value, json};

/// `{"tools":[...]}` of `[[0]]`s, about `bytes` long (4 MiB: estimated at ~480 MiB read).
fn dense_page(bytes: usize) -> String {
    let mut page = String::from(r#"{"tools":[{"name":"t","inputSchema":{"type":"object","x":["#);
    while page.len() < bytes {
        page.push_str("[[0]],");
    }
    page.push_str("0]}}]}");
    page
}

/// Plays a server: answers the handshake, pings, and `tools/list` with the dense page; every
/// message the client sends is forwarded to `seen`.
async fn server() -> (Client, tokio::sync::mpsc::UnboundedReceiver<Value>, tokio::sync::mpsc::UnboundedSender<String>) {
    let (transport, mut peer) = memory_pair();
    let (seen_tx, seen) = tokio::sync::mpsc::unbounded_channel();
    let to_client = peer.outgoing.clone();
    tokio::spawn(async move {
        while let Some(line) = peer.incoming.recv().await {
            let message: Value = serde_json::from_str(&line).unwrap();
            let id = message["id"].clone();
            let answer = match message["method"].as_str() {
                Some("initialize") => Some(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":{},"capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"dense","version":"1"}}}}}}"#,
                    message["params"]["protocolVersion"]
                )),
                Some("ping") => Some(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)),
                Some("tools/list") => {
                    Some(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#, dense_page(4 << 20)))
                }
                Some(_) if !id.is_null() => Some(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"Method not found"}}}}"#
                )),
                _ => None,
            };
            let _ = seen_tx.send(message);
            if let Some(answer) = answer {
                let _ = peer.outgoing.send(answer);
            }
        }
    });
    let client = Client::connect(transport, ClientOptions::default()).await.expect("handshake");
    (client, seen, to_client)
}

#[tokio::test]
async fn a_dense_answer_is_refused_naming_its_density_and_the_session_goes_on() {
    let (client, _seen, _to_client) = server().await;
    let err = client.list_tools(None).await.unwrap_err();
    assert!(matches!(&err, ClientError::TooDense { method, .. } if method == "tools/list"), "{err:?}");
    let said = err.to_string();
    assert!(said.contains("tools/list") && said.contains("JSON values") && said.contains("once read"), "{said}");
    let err = client.list_all_tools(ListLimits::default()).await.unwrap_err();
    assert!(matches!(&err, ClientError::TooDense { .. }), "{err:?}");
    client.ping().await.unwrap();
}

#[tokio::test]
async fn a_dense_request_of_the_servers_is_answered_with_an_error() {
    let (client, mut seen, to_client) = server().await;
    let request =
        format!(r#"{{"jsonrpc":"2.0","id":"s1","method":"ping","params":{{"x":[{}]}}}}"#, dense_page(4 << 20));
    to_client.send(request).unwrap();
    let answer = loop {
        let message = seen.recv().await.unwrap();
        if message["id"] == "s1" {
            break message;
        }
    };
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    let said = answer["error"]["message"].as_str().unwrap();
    assert!(said.contains("ping refused") && said.contains("JSON values"), "{said}");
    client.ping().await.unwrap();
}

/// A server's request with an id over 1 KiB is not answered (each answer echoes the id and
/// answers queue by the thousand), and an unknown method is named cut in the error.
#[tokio::test]
async fn a_servers_request_with_a_huge_id_is_not_answered() {
    let (client, mut seen, to_client) = server().await;
    let huge = "i".repeat(2000);
    to_client.send(format!(r#"{{"jsonrpc":"2.0","id":"{huge}","method":"ping"}}"#)).unwrap();
    to_client
        .send(format!(r#"{{"jsonrpc":"2.0","id":"{huge}","method":"sampling/createMessage","params":1}}"#))
        .unwrap();
    let long_method = "m".repeat(5000);
    to_client.send(format!(r#"{{"jsonrpc":"2.0","id":"s2","method":"{long_method}"}}"#)).unwrap();
    let answer = loop {
        let message = seen.recv().await.unwrap();
        assert_ne!(message["id"].as_str().map(str::len), Some(2000), "answered: {message}");
        if message["id"] == "s2" {
            break message;
        }
    };
    let said = answer["error"]["message"].as_str().unwrap();
    assert!(said.starts_with("Method not found: mmm") && said.len() < 300, "{}", said.len());
    client.ping().await.unwrap();
}
