//! Context across processes: W3C `traceparent`, `tracestate` and `baggage` written into a
//! request's `params._meta` and read back from it (the MCP conventions' rule, SEP-414: the keys
//! unprefixed) or from HTTP headers, so `run` -> `serve` -> an upstream is one trace.
//!
//! Pure functions over `serde_json` values and header maps, on the maintained propagators
//! (`opentelemetry_sdk`'s `TraceContextPropagator` and `BaggagePropagator`): the parsing and
//! validation of untrusted values is theirs, not ours. A value that is not a string, or longer
//! than [`MAX_VALUE_LEN`], is ignored before they see it.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapCompositePropagator, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// The keys written into `params._meta` (and the header names).
pub const TRACEPARENT: &str = "traceparent";
/// The `tracestate` key.
pub const TRACESTATE: &str = "tracestate";
/// The `baggage` key.
pub const BAGGAGE: &str = "baggage";
/// Longest value read (W3C baggage's limit; `traceparent` is 55 characters).
pub const MAX_VALUE_LEN: usize = 8192;

fn propagator() -> &'static TextMapCompositePropagator {
    static P: OnceLock<TextMapCompositePropagator> = OnceLock::new();
    P.get_or_init(|| {
        TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ])
    })
}

struct MetaInjector<'a>(&'a mut Map<String, Value>);

impl Injector for MetaInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), Value::String(value));
    }
}

struct MetaExtractor<'a>(&'a Map<String, Value>);

impl Extractor for MetaExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key)?.as_str().filter(|v| v.len() <= MAX_VALUE_LEN)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// Writes `cx`'s trace context (and baggage, if any) into `params._meta`: `params` becomes an
/// object if it was `null`, `_meta` is created or added to (other keys kept; ours replaced).
/// Nothing is written when `cx` has no valid span context and no baggage, and nothing when
/// `params` is neither an object nor `null` (MCP params are objects).
pub fn inject_meta(cx: &Context, params: &mut Value) {
    if !cx.span().span_context().is_valid() && !has_baggage(cx) {
        return;
    }
    if params.is_null() {
        *params = Value::Object(Map::new());
    }
    let Value::Object(obj) = params else { return };
    let meta = obj.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        // A `_meta` that is not an object is the caller's mistake; it is left as it is.
        return;
    }
    if let Value::Object(meta) = meta {
        propagator().inject_context(cx, &mut MetaInjector(meta));
    }
}

pub(crate) fn has_baggage(cx: &Context) -> bool {
    use opentelemetry::baggage::BaggageExt;
    !cx.baggage().is_empty()
}

/// The context a request's `params._meta` carries (a remote parent and baggage), or an empty
/// context when it carries none or a malformed one.
pub fn extract_meta(params: Option<&Value>) -> Context {
    match params.and_then(|p| p.get("_meta")).and_then(Value::as_object) {
        Some(meta) => propagator().extract(&MetaExtractor(meta)),
        None => Context::new(),
    }
}

/// The `traceparent` a request's `params._meta` carries, as written (for fixtures and tests).
pub fn meta_traceparent(params: Option<&Value>) -> Option<&str> {
    params?.get("_meta")?.get(TRACEPARENT)?.as_str()
}

struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) =
            (http::header::HeaderName::from_bytes(key.as_bytes()), http::HeaderValue::from_str(&value))
        {
            self.0.insert(name, value);
        }
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key)?.to_str().ok().filter(|v| v.len() <= MAX_VALUE_LEN)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Writes `cx`'s trace context and baggage as HTTP headers.
pub fn inject_headers(cx: &Context, headers: &mut http::HeaderMap) {
    propagator().inject_context(cx, &mut HeaderInjector(headers));
}

/// The context HTTP headers carry. The MCP conventions make `params._meta`'s context the
/// server span's parent; this one, the transport's, is what the span links to.
pub fn extract_headers(headers: &http::HeaderMap) -> Context {
    propagator().extract(&HeaderExtractor(headers))
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    use serde_json::json;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn remote() -> Context {
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::from_key_value([("rojo", "00f067aa0ba902b7")]).unwrap(),
        );
        Context::new().with_remote_span_context(sc)
    }

    #[test]
    fn injects_into_meta_creating_it_and_keeping_other_keys() {
        let mut params = json!({"name": "echo", "_meta": {"progressToken": 7}});
        inject_meta(&remote(), &mut params);
        assert_eq!(params["_meta"]["traceparent"], TP);
        assert_eq!(params["_meta"]["tracestate"], "rojo=00f067aa0ba902b7");
        assert_eq!(params["_meta"]["progressToken"], 7);
        assert_eq!(params["name"], "echo");

        let mut none = Value::Null;
        inject_meta(&remote(), &mut none);
        assert_eq!(none["_meta"]["traceparent"], TP);
    }

    #[test]
    fn nothing_is_written_without_a_span_context() {
        let mut params = json!({"name": "echo"});
        inject_meta(&Context::new(), &mut params);
        assert_eq!(params, json!({"name": "echo"}));
        let mut null = Value::Null;
        inject_meta(&Context::new(), &mut null);
        assert!(null.is_null());
    }

    #[test]
    fn round_trips_through_meta_and_headers() {
        let mut params = json!({});
        inject_meta(&remote(), &mut params);
        let back = extract_meta(Some(&params));
        let sc = back.span().span_context().clone();
        assert!(sc.is_valid() && sc.is_remote() && sc.is_sampled());
        assert_eq!(sc.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert_eq!(sc.trace_state().get("rojo"), Some("00f067aa0ba902b7"));
        assert_eq!(meta_traceparent(Some(&params)), Some(TP));

        let mut headers = http::HeaderMap::new();
        inject_headers(&remote(), &mut headers);
        assert_eq!(headers["traceparent"], TP);
        let back = extract_headers(&headers);
        assert_eq!(back.span().span_context().trace_id(), remote().span().span_context().trace_id());
    }

    #[test]
    fn baggage_travels_too() {
        use opentelemetry::KeyValue;
        use opentelemetry::baggage::BaggageExt;
        let cx = remote().with_baggage([KeyValue::new("user", "alice")]);
        let mut params = json!({});
        inject_meta(&cx, &mut params);
        assert_eq!(params["_meta"]["baggage"], "user=alice");
        let back = extract_meta(Some(&params));
        assert_eq!(back.baggage().get("user").map(|v| v.to_string()), Some("alice".to_owned()));
    }

    #[test]
    fn malformed_or_hostile_meta_gives_no_parent() {
        let cases = [
            json!({"_meta": {"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}),
            json!({"_meta": {"traceparent": "garbage"}}),
            json!({"_meta": {"traceparent": 7}}),
            json!({"_meta": {"traceparent": format!("{TP}{}", " ".repeat(MAX_VALUE_LEN))}}),
            json!({"_meta": "not an object"}),
            json!({"name": "no meta"}),
            json!([1, 2]),
        ];
        for params in cases {
            let cx = extract_meta(Some(&params));
            assert!(!cx.span().span_context().is_valid(), "{params}");
        }
        assert!(!extract_meta(None).span().span_context().is_valid());
    }

    #[test]
    fn a_meta_that_is_not_an_object_is_left_alone() {
        let mut params = json!({"_meta": 3});
        inject_meta(&remote(), &mut params);
        assert_eq!(params, json!({"_meta": 3}));
    }
}
