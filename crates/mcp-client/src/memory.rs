//! An in-memory transport for tests and examples: the other end is a pair of channels a test
//! drives. It is the port's test double, so it lives beside the port rather than with the
//! adapters in `mcp-transport`.

use async_trait::async_trait;
use mcp_protocol::Outgoing;
use tokio::sync::mpsc;

use crate::transport::{Inbound, Transport, TransportError, TransportSink, TransportStream};

/// The client's end of an in-memory transport.
#[derive(Debug)]
pub struct MemoryTransport {
    to_server: mpsc::UnboundedSender<String>,
    from_server: mpsc::UnboundedReceiver<String>,
}

/// The test's end: what the client sent, and a way to answer.
#[derive(Debug)]
pub struct MemoryPeer {
    /// Messages the client sent, in order.
    pub incoming: mpsc::UnboundedReceiver<String>,
    /// Send a message to the client. Dropping it closes the client's stream.
    pub outgoing: mpsc::UnboundedSender<String>,
}

/// A connected pair.
pub fn memory_pair() -> (MemoryTransport, MemoryPeer) {
    let (to_server, incoming) = mpsc::unbounded_channel();
    let (outgoing, from_server) = mpsc::unbounded_channel();
    (MemoryTransport { to_server, from_server }, MemoryPeer { incoming, outgoing })
}

struct MemorySink(Option<mpsc::UnboundedSender<String>>);
struct MemoryStream(mpsc::UnboundedReceiver<String>);

#[async_trait]
impl TransportSink for MemorySink {
    async fn send(&mut self, messages: &[Outgoing]) -> Result<(), TransportError> {
        let sender = self.0.as_ref().ok_or_else(|| TransportError::Closed("closed by the client".into()))?;
        for m in messages {
            sender.send(m.text().to_owned()).map_err(|_| TransportError::Closed("the peer went away".into()))?;
        }
        Ok(())
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.0 = None;
        Ok(())
    }
}

#[async_trait]
impl TransportStream for MemoryStream {
    async fn recv(&mut self) -> Result<Option<Inbound>, TransportError> {
        Ok(self.0.recv().await.map(Inbound::Message))
    }
}

impl Transport for MemoryTransport {
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>) {
        (Box::new(MemorySink(Some(self.to_server))), Box::new(MemoryStream(self.from_server)))
    }
}
