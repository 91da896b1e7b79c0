//! A span exporter that keeps what it is handed, for assertions on names and attributes.

use std::sync::{Arc, Mutex};

use mcp_telemetry::Telemetry;
use opentelemetry::Value;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};

#[derive(Debug, Clone, Default)]
pub(crate) struct Memory(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Memory {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

impl Memory {
    pub(crate) fn spans(&self) -> Vec<SpanData> {
        self.0.lock().unwrap().clone()
    }

    pub(crate) fn named(&self, name: &str) -> SpanData {
        let spans = self.spans();
        spans.iter().find(|s| s.name == name).cloned().unwrap_or_else(|| {
            let names: Vec<_> = spans.iter().map(|s| s.name.to_string()).collect();
            panic!("no span {name:?}; spans: {names:?}")
        })
    }
}

/// Telemetry whose spans are exported, synchronously, into a [`Memory`].
pub(crate) fn telemetry(capture_tool_content: bool) -> (Telemetry, Memory) {
    let memory = Memory::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(memory.clone()).build();
    (Telemetry::from_providers(Some(provider), None, capture_tool_content), memory)
}

/// A span's attribute as text.
pub(crate) fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| match &kv.value {
        Value::String(s) => s.to_string(),
        other => other.to_string(),
    })
}
