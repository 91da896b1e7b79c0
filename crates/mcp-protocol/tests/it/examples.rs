//! The official examples of revision 2026-07-28: every example of a type this crate models decodes
//! and round-trips without loss (decode → encode → equal as JSON values).
//!
//! [`MODELLED`] maps each example folder to how it is decoded; [`SKIPPED`] lists the folders that
//! are deliberately not covered, with the reason. A folder in neither list, or a listed folder that
//! does not exist, fails the suite, so a renamed or new folder needs a decision.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use mcp_protocol::stateless::{DiscoverResult, InputRequest, InputRequiredResult, SubscriptionsListenRequestParams};
use mcp_protocol::to_raw;
use mcp_protocol::{
    CallToolRequestParams, CallToolResult, CancelledNotificationParams, ClientCapabilities, CompleteRequestParams,
    CompleteResult, ContentBlock, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ErrorObject, Extra, GetPromptRequestParams, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListRootsResult, ListToolsResult, LoggingMessageNotificationParams, Message,
    PaginatedRequestParams, ProgressNotificationParams, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceContents, ResourceUpdatedNotificationParams, Root, SamplingMessage, ServerCapabilities, Tool,
};
use pretty_assertions::assert_eq;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::support::{read_json, spec_dir};

/// Decode the text of one example and encode it again.
type RoundTrip = fn(&str) -> Result<Value, String>;

/// Example folder → how its files are decoded.
const MODELLED: &[(&str, RoundTrip)] = &[
    // Payload types.
    ("CallToolRequestParams", typed::<CallToolRequestParams>),
    ("CallToolResult", typed::<CallToolResult>),
    ("CancelledNotificationParams", typed::<CancelledNotificationParams>),
    ("CompleteRequestParams", typed::<CompleteRequestParams>),
    ("CompleteResult", typed::<CompleteResult>),
    ("ClientCapabilities", typed::<ClientCapabilities>),
    ("CreateMessageRequestParams", typed::<CreateMessageRequestParams>),
    ("CreateMessageResult", typed::<CreateMessageResult>),
    ("ElicitRequestFormParams", typed::<ElicitRequestParams>),
    ("ElicitRequestURLParams", typed::<ElicitRequestParams>),
    ("ElicitResult", typed::<ElicitResult>),
    ("GetPromptRequestParams", typed::<GetPromptRequestParams>),
    ("GetPromptResult", typed::<GetPromptResult>),
    ("ListPromptsResult", typed::<ListPromptsResult>),
    ("ListResourceTemplatesResult", typed::<ListResourceTemplatesResult>),
    ("ListResourcesResult", typed::<ListResourcesResult>),
    ("ListRootsResult", typed::<ListRootsResult>),
    ("ListToolsResult", typed::<ListToolsResult>),
    ("LoggingMessageNotificationParams", typed::<LoggingMessageNotificationParams>),
    ("PaginatedRequestParams", typed::<PaginatedRequestParams>),
    ("ProgressNotificationParams", typed::<ProgressNotificationParams>),
    ("ReadResourceResult", typed::<ReadResourceResult>),
    ("Resource", typed::<Resource>),
    ("ResourceUpdatedNotificationParams", typed::<ResourceUpdatedNotificationParams>),
    ("Root", typed::<Root>),
    ("SamplingMessage", typed::<SamplingMessage>),
    ("ServerCapabilities", typed::<ServerCapabilities>),
    ("Tool", typed::<Tool>),
    // Content blocks and resource contents.
    ("AudioContent", typed::<ContentBlock>),
    ("EmbeddedResource", typed::<ContentBlock>),
    ("ImageContent", typed::<ContentBlock>),
    ("ResourceLink", typed::<ContentBlock>),
    ("TextContent", typed::<ContentBlock>),
    ("BlobResourceContents", typed::<ResourceContents>),
    ("TextResourceContents", typed::<ResourceContents>),
    // Error objects (the `error` member of an error response).
    ("InternalError", typed::<ErrorObject>),
    ("InvalidParamsError", typed::<ErrorObject>),
    ("MethodNotFoundError", typed::<ErrorObject>),
    ("ParseError", typed::<ErrorObject>),
    // Whole JSON-RPC messages, with the payload decoded into its type.
    ("CallToolRequest", message::<CallToolRequestParams>),
    ("CallToolResultResponse", message::<CallToolResult>),
    ("CancelledNotification", message::<CancelledNotificationParams>),
    ("CompleteRequest", message::<CompleteRequestParams>),
    ("CompleteResultResponse", message::<CompleteResult>),
    ("GetPromptRequest", message::<GetPromptRequestParams>),
    ("GetPromptResultResponse", message::<GetPromptResult>),
    ("ListPromptsRequest", message::<PaginatedRequestParams>),
    ("ListPromptsResultResponse", message::<ListPromptsResult>),
    ("ListResourceTemplatesRequest", message::<PaginatedRequestParams>),
    ("ListResourceTemplatesResultResponse", message::<ListResourceTemplatesResult>),
    ("ListResourcesRequest", message::<PaginatedRequestParams>),
    ("ListResourcesResultResponse", message::<ListResourcesResult>),
    ("ListToolsRequest", message::<PaginatedRequestParams>),
    ("ListToolsResultResponse", message::<ListToolsResult>),
    ("LoggingMessageNotification", message::<LoggingMessageNotificationParams>),
    ("ProgressNotification", message::<ProgressNotificationParams>),
    ("ReadResourceRequest", message::<ReadResourceRequestParams>),
    ("ReadResourceResultResponse", message::<ReadResourceResult>),
    ("ResourceUpdatedNotification", message::<ResourceUpdatedNotificationParams>),
    // Whole messages whose payload the crate keeps raw (list_changed params only carry `_meta`)
    // or generic error responses.
    ("PromptListChangedNotification", message::<Extra>),
    ("ResourceListChangedNotification", message::<Extra>),
    ("ToolListChangedNotification", message::<Extra>),
    ("HeaderMismatchError", message::<Extra>),
    ("MissingRequiredClientCapabilityError", message::<Extra>),
    ("UnsupportedProtocolVersionError", message::<Extra>),
    // In 2026-07-28 server-to-client requests are `{method, params}` objects embedded in results
    // (no `jsonrpc`), so only the params go through our types.
    ("CreateMessageRequest", embedded::<CreateMessageRequestParams>),
    ("ElicitRequest", embedded::<ElicitRequestParams>),
    ("ListRootsRequest", embedded::<Extra>),
    // The stateless era.
    ("DiscoverRequest", message::<Extra>),
    ("DiscoverResult", typed::<DiscoverResult>),
    ("DiscoverResultResponse", message::<DiscoverResult>),
    ("InputRequests", typed::<BTreeMap<String, InputRequest>>),
    ("InputRequiredResult", typed::<InputRequiredResult>),
    ("InputResponses", typed::<serde_json::Map<String, Value>>),
    ("SubscriptionsAcknowledgedNotification", message::<Extra>),
    ("SubscriptionsListenRequest", message::<SubscriptionsListenRequestParams>),
    ("SubscriptionsListenResult", typed::<Extra>),
    ("SubscriptionsListenResultResponse", message::<Extra>),
];

/// Example folders deliberately not covered, and why.
const SKIPPED: &[(&str, &str)] = &[
    ("ModelPreferences", "kept as raw JSON inside CreateMessageRequestParams"),
    ("ToolUseContent", "sampling-only content; SamplingMessage/CreateMessageResult keep content as raw JSON"),
    ("ToolResultContent", "sampling-only content; SamplingMessage/CreateMessageResult keep content as raw JSON"),
    ("BooleanSchema", "elicitation requestedSchema is kept as raw JSON"),
    ("NumberSchema", "elicitation requestedSchema is kept as raw JSON"),
    ("StringSchema", "elicitation requestedSchema is kept as raw JSON"),
    ("TitledMultiSelectEnumSchema", "elicitation requestedSchema is kept as raw JSON"),
    ("TitledSingleSelectEnumSchema", "elicitation requestedSchema is kept as raw JSON"),
    ("UntitledMultiSelectEnumSchema", "elicitation requestedSchema is kept as raw JSON"),
    ("UntitledSingleSelectEnumSchema", "elicitation requestedSchema is kept as raw JSON"),
];

fn examples_dir() -> PathBuf {
    spec_dir("2026-07-28").join("examples")
}

fn example_files(folder: &str) -> Vec<PathBuf> {
    let dir = examples_dir().join(folder);
    assert!(dir.is_dir(), "example folder {} does not exist (renamed upstream?)", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "example folder {} holds no .json file", dir.display());
    files
}

fn typed<T: DeserializeOwned + Serialize>(text: &str) -> Result<Value, String> {
    let value: T = serde_json::from_str(text).map_err(|e| format!("decode: {e}"))?;
    serde_json::to_value(&value).map_err(|e| format!("encode: {e}"))
}

/// Re-encode a raw payload through `T`.
fn through<T: DeserializeOwned + Serialize>(
    raw: &serde_json::value::RawValue,
) -> Result<Box<serde_json::value::RawValue>, String> {
    let value: T = serde_json::from_str(raw.get()).map_err(|e| format!("decode payload: {e}"))?;
    to_raw(&value).map_err(|e| format!("encode payload: {e}"))
}

fn message<T: DeserializeOwned + Serialize>(text: &str) -> Result<Value, String> {
    let message = Message::decode(text.as_bytes()).map_err(|e| format!("decode message: {e}"))?;
    let message = match message {
        Message::Request(mut r) => {
            r.params = r.params.as_deref().map(through::<T>).transpose()?;
            Message::Request(r)
        }
        Message::Notification(mut n) => {
            n.params = n.params.as_deref().map(through::<T>).transpose()?;
            Message::Notification(n)
        }
        Message::Response(mut r) => {
            r.result = through::<T>(&r.result)?;
            Message::Response(r)
        }
        Message::Error(e) => Message::Error(e),
    };
    serde_json::from_str(&message.encode()).map_err(|e| format!("the encoding is not JSON: {e}"))
}

#[derive(Serialize, Deserialize)]
struct Embedded<T> {
    method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<T>,
    #[serde(flatten)]
    extra: Extra,
}

fn embedded<T: DeserializeOwned + Serialize>(text: &str) -> Result<Value, String> {
    typed::<Embedded<T>>(text)
}

#[test]
fn every_modelled_example_round_trips_without_loss() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (folder, round_trip) in MODELLED {
        for path in example_files(folder) {
            let text = std::fs::read_to_string(&path).unwrap();
            let original = read_json(&path);
            checked += 1;
            match round_trip(&text) {
                Ok(encoded) if encoded == original => {}
                Ok(encoded) => failures.push(format!(
                    "{folder}/{}: lossy round trip\n  original: {original}\n  encoded:  {encoded}",
                    path.file_name().unwrap().to_string_lossy()
                )),
                Err(e) => failures.push(format!("{folder}/{}: {e}", path.file_name().unwrap().to_string_lossy())),
            }
        }
    }
    assert!(failures.is_empty(), "{} of {checked} examples failed:\n{}", failures.len(), failures.join("\n"));
    assert!(checked >= 100, "only {checked} examples checked");
}

#[test]
fn every_example_folder_is_listed_as_modelled_or_skipped() {
    let modelled: BTreeSet<&str> = MODELLED.iter().map(|(f, _)| *f).collect();
    let skipped: BTreeSet<&str> = SKIPPED.iter().map(|(f, _)| *f).collect();
    assert_eq!(modelled.len(), MODELLED.len(), "a folder is listed twice in MODELLED");
    assert_eq!(skipped.len(), SKIPPED.len(), "a folder is listed twice in SKIPPED");
    assert!(modelled.is_disjoint(&skipped), "a folder is both modelled and skipped");
    for folder in skipped.iter() {
        example_files(folder);
    }
    let on_disk: BTreeSet<String> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let unlisted: Vec<&String> =
        on_disk.iter().filter(|f| !modelled.contains(f.as_str()) && !skipped.contains(f.as_str())).collect();
    assert!(unlisted.is_empty(), "example folders in neither MODELLED nor SKIPPED: {unlisted:?}");
}

/// Every example that is a JSON-RPC message (skipped ones included) passes the envelope decoder
/// and is re-encoded without loss.
#[test]
fn every_jsonrpc_example_decodes_as_a_message() {
    let mut count = 0;
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let folder = entry.unwrap().path();
        for path in example_files(&folder.file_name().unwrap().to_string_lossy()) {
            let original = read_json(&path);
            if original.get("jsonrpc").is_none() {
                continue;
            }
            count += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            let decoded = Message::decode(text.as_bytes()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let encoded = decoded.encode();
            assert!(!encoded.contains('\n'), "{}: the encoding spans lines: {encoded}", path.display());
            let reencoded: Value = serde_json::from_str(&encoded).unwrap();
            assert_eq!(reencoded, original, "{}", path.display());
        }
    }
    assert!(count >= 30, "only {count} JSON-RPC examples found");
}
