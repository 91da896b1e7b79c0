//! A transport written outside the workspace, driven through the multi-server layer.
//!
//! MCP over a plain TCP socket, newline-delimited JSON both ways: about forty lines implement
//! the `Transport` port and the `Connector` that opens one, and `connect_all` then treats the
//! server like any stdio or HTTP server (startup timeout, tool listing, calls, close). To be
//! self-contained the example also runs a tiny echo server on a loopback port.
//!
//! Run it: `cargo run -p mcp-client --example tcp_transport`.

use std::sync::Arc;

use async_trait::async_trait;
use mcp_client::{
    ConnectOptions, Connector, Inbound, Opened, ServerSpec, Transport, TransportError, TransportSink, TransportStream,
    close_all, connect_all,
};
use mcp_protocol::Outgoing;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// The port: a connected socket, split into a writer and a reader of lines.
struct TcpTransport(TcpStream);

struct TcpSink(OwnedWriteHalf);
struct TcpLines(Lines<BufReader<OwnedReadHalf>>);

impl Transport for TcpTransport {
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>) {
        let (read, write) = self.0.into_split();
        (Box::new(TcpSink(write)), Box::new(TcpLines(BufReader::new(read).lines())))
    }
}

fn io(context: &str) -> impl FnOnce(std::io::Error) -> TransportError + '_ {
    move |source| TransportError::Io { context: context.to_owned(), source }
}

#[async_trait]
impl TransportSink for TcpSink {
    async fn send(&mut self, messages: &[Outgoing]) -> Result<(), TransportError> {
        for message in messages {
            self.0.write_all(message.text().as_bytes()).await.map_err(io("writing to the socket"))?;
            self.0.write_all(b"\n").await.map_err(io("writing to the socket"))?;
        }
        self.0.flush().await.map_err(io("writing to the socket"))
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.0.shutdown().await.map_err(io("closing the socket"))
    }
}

#[async_trait]
impl TransportStream for TcpLines {
    async fn recv(&mut self) -> Result<Option<Inbound>, TransportError> {
        // A real transport would bound the line length; see mcp-transport's stdio adapter.
        let line = self.0.next_line().await.map_err(io("reading from the socket"))?;
        Ok(line.map(Inbound::Message))
    }
}

/// The connector: how the multi-server layer opens (and would reopen) the transport.
#[derive(Debug)]
struct TcpServer(std::net::SocketAddr);

#[async_trait]
impl Connector for TcpServer {
    async fn open(&self, _name: &str) -> Result<Opened, TransportError> {
        let stream = TcpStream::connect(self.0).await.map_err(io("connecting"))?;
        Ok(Opened::new(TcpTransport(stream)))
    }
}

/// A minimal MCP server on a socket: one tool, `echo`.
async fn serve(stream: TcpStream) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Some(line) = lines.next_line().await? {
        let Ok(request) = serde_json::from_str::<Value>(&line) else { continue };
        let result = match request["method"].as_str() {
            Some("initialize") => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                         "serverInfo": {"name": "tcp-echo", "version": "1"}}),
            Some("tools/list") => json!({"tools": [{"name": "echo", "description": "Echo the text back.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}),
            Some("tools/call") => json!({"content": [{"type": "text",
                "text": request["params"]["arguments"]["text"].clone()}]}),
            Some(_) if request.get("id").is_some() => {
                let error = json!({"jsonrpc": "2.0", "id": request["id"],
                    "error": {"code": -32601, "message": "Method not found"}});
                write.write_all(format!("{error}\n").as_bytes()).await?;
                continue;
            }
            _ => continue, // notifications
        };
        let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        write.write_all(format!("{reply}\n").as_bytes()).await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });

    let spec = ServerSpec::new("tcp", Arc::new(TcpServer(address)));
    let connections = connect_all(vec![spec], &ConnectOptions::default()).await;
    let server = &connections[0];
    println!("{}: {} ({} tools)", server.name(), server.state(), server.tools().len());
    if !server.is_connected() {
        return Err(format!("the TCP server did not connect: {}", server.state()).into());
    }
    let arguments = json!({"text": "hello over TCP"}).as_object().cloned();
    let result = server.call_tool("echo", arguments).await?;
    println!("echo -> {}", result.joined_text());
    assert_eq!(result.joined_text(), "hello over TCP");
    close_all(connections).await;
    Ok(())
}
