//! The typed method API: lists with their pagination and limits, resources, prompts,
//! completions and tool calls, each sent only when the server declared what it needs.

use mcp_protocol::{
    CallToolRequestParams, CallToolResult, CompleteArgument, CompleteContext, CompleteReference, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResult, Resource, ResourceTemplate, ServerCapabilities, Tool, methods,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{Client, ClientError, ListLimits, RequestOptions};

/// A server capability a request depends on.
#[derive(Debug, Clone, Copy)]
enum Capability {
    Tools,
    Resources,
    Prompts,
    Completions,
}

impl Capability {
    fn name(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Resources => "resources",
            Self::Prompts => "prompts",
            Self::Completions => "completions",
        }
    }
}

impl Client {
    /// `ping`.
    pub async fn ping(&self) -> Result<(), ClientError> {
        self.request_raw::<Value>(methods::PING, None, RequestOptions::default()).await.map(|_| ())
    }

    /// What the server declared it offers, once the session is open (`None` before).
    pub fn server_capabilities(&self) -> Option<ServerCapabilities> {
        self.inner.session().server().map(|s| s.capabilities.clone())
    }

    /// Whether the server declared `capability`. Before the session is open nothing is known,
    /// and the request is sent (the server's answer decides).
    fn offers(&self, capability: Capability) -> bool {
        let Some(declared) = self.server_capabilities() else { return true };
        match capability {
            Capability::Tools => declared.tools.is_some(),
            Capability::Resources => declared.resources.is_some(),
            Capability::Prompts => declared.prompts.is_some(),
            Capability::Completions => declared.completions.is_some(),
        }
    }

    /// Fails with [`ClientError::NotOffered`] when the server did not declare `capability`.
    fn require(&self, capability: Capability, method: &'static str) -> Result<(), ClientError> {
        if self.offers(capability) {
            Ok(())
        } else {
            Err(ClientError::NotOffered { method, capability: capability.name() })
        }
    }

    /// One page of a paginated list method.
    async fn page<R: DeserializeOwned>(&self, method: &'static str, cursor: Option<String>) -> Result<R, ClientError> {
        let params = PaginatedRequestParams { cursor, extra: Map::new() };
        self.request(method, Some(&params), RequestOptions::default()).await
    }

    /// Every item of a paginated list, following cursors within `limits`; none, without asking,
    /// when the server did not declare `capability` (a resources-only server has no tools, it
    /// does not fail `tools/list`).
    async fn list_all<R: DeserializeOwned, T>(
        &self,
        capability: Capability,
        method: &'static str,
        limits: ListLimits,
        split: impl Fn(R) -> (Vec<T>, Option<String>),
    ) -> Result<Vec<T>, ClientError> {
        if !self.offers(capability) {
            return Ok(Vec::new());
        }
        let mut items = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut cursor = None;
        let mut bytes = 0usize;
        for _ in 0..limits.max_pages {
            let params = PaginatedRequestParams { cursor: cursor.take(), extra: Map::new() };
            let raw = self.request_raw(method, Some(&params), RequestOptions::default()).await?;
            bytes = bytes.saturating_add(raw.get().len());
            if bytes > limits.max_bytes {
                return Err(ClientError::ListTooLarge { method, limit: limits.max_bytes });
            }
            let page: R = super::read_result(method, &raw)?;
            drop(raw);
            let (page, next) = split(page);
            if items.len() + page.len() > limits.max_items {
                return Err(ClientError::TooManyItems { method, limit: limits.max_items });
            }
            items.extend(page);
            match next {
                None => return Ok(items),
                Some(next) => {
                    if !seen.insert(next.clone()) {
                        return Err(ClientError::RepeatedCursor { method, cursor: next });
                    }
                    cursor = Some(next);
                }
            }
        }
        Err(ClientError::TooManyPages { method, limit: limits.max_pages })
    }

    /// One page of `tools/list`.
    pub async fn list_tools(&self, cursor: Option<String>) -> Result<ListToolsResult, ClientError> {
        self.page(methods::TOOLS_LIST, cursor).await
    }

    /// Every tool, following cursors within `limits`; none (nothing is sent) when the server
    /// did not declare the `tools` capability.
    pub async fn list_all_tools(&self, limits: ListLimits) -> Result<Vec<Tool>, ClientError> {
        self.list_all(Capability::Tools, methods::TOOLS_LIST, limits, |p: ListToolsResult| (p.tools, p.next_cursor))
            .await
    }

    /// One page of `resources/list`.
    pub async fn list_resources(&self, cursor: Option<String>) -> Result<ListResourcesResult, ClientError> {
        self.page(methods::RESOURCES_LIST, cursor).await
    }

    /// Every resource, following cursors within `limits`; none (nothing is sent) when the
    /// server did not declare the `resources` capability.
    pub async fn list_all_resources(&self, limits: ListLimits) -> Result<Vec<Resource>, ClientError> {
        let split = |p: ListResourcesResult| (p.resources, p.next_cursor);
        self.list_all(Capability::Resources, methods::RESOURCES_LIST, limits, split).await
    }

    /// One page of `resources/templates/list`.
    pub async fn list_resource_templates(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourceTemplatesResult, ClientError> {
        self.page(methods::RESOURCE_TEMPLATES_LIST, cursor).await
    }

    /// Every resource template, following cursors within `limits`; none (nothing is sent) when
    /// the server did not declare the `resources` capability.
    pub async fn list_all_resource_templates(&self, limits: ListLimits) -> Result<Vec<ResourceTemplate>, ClientError> {
        let split = |p: ListResourceTemplatesResult| (p.resource_templates, p.next_cursor);
        self.list_all(Capability::Resources, methods::RESOURCE_TEMPLATES_LIST, limits, split).await
    }

    /// `resources/read` of `uri`. An answer larger than `max_bytes` as JSON on the wire (text,
    /// and blobs in base64) is dropped with [`ClientError::TooLarge`] before it is decoded;
    /// [`DEFAULT_MAX_RESOURCE_BYTES`](crate::DEFAULT_MAX_RESOURCE_BYTES) is a sensible cap. Fails with
    /// [`ClientError::NotOffered`] when the server did not declare `resources`.
    pub async fn read_resource(&self, uri: &str, max_bytes: usize) -> Result<ReadResourceResult, ClientError> {
        let method = methods::RESOURCES_READ;
        self.require(Capability::Resources, method)?;
        let params = ReadResourceRequestParams { uri: uri.to_owned(), extra: Map::new() };
        let raw = self.request_raw(method, Some(&params), RequestOptions::default()).await?;
        let size = raw.get().len();
        if size > max_bytes {
            return Err(ClientError::TooLarge { method, size, limit: max_bytes });
        }
        super::read_result(method, &raw)
    }

    /// One page of `prompts/list`.
    pub async fn list_prompts(&self, cursor: Option<String>) -> Result<ListPromptsResult, ClientError> {
        self.page(methods::PROMPTS_LIST, cursor).await
    }

    /// Every prompt, following cursors within `limits`; none (nothing is sent) when the server
    /// did not declare the `prompts` capability.
    pub async fn list_all_prompts(&self, limits: ListLimits) -> Result<Vec<Prompt>, ClientError> {
        let split = |p: ListPromptsResult| (p.prompts, p.next_cursor);
        self.list_all(Capability::Prompts, methods::PROMPTS_LIST, limits, split).await
    }

    /// `prompts/get` of prompt `name` with its arguments (string values, as the specification
    /// has them). Fails with [`ClientError::NotOffered`] when the server did not declare
    /// `prompts`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<GetPromptResult, ClientError> {
        self.require(Capability::Prompts, methods::PROMPTS_GET)?;
        let params = GetPromptRequestParams { name: name.to_owned(), arguments, extra: Map::new() };
        self.request(methods::PROMPTS_GET, Some(&params), RequestOptions::default()).await
    }

    /// `completion/complete`: suggested values of argument `argument` of `reference`, given
    /// `value` typed so far and the `context` of arguments already given (sent only to servers
    /// of 2025-06-18 and later, which know it). Fails with [`ClientError::NotOffered`] when a
    /// server of 2025-03-26 or later did not declare `completions` (2024-11-05 had no such
    /// capability: such a server is asked, and its answer decides).
    pub async fn complete(
        &self,
        reference: CompleteReference,
        argument: &str,
        value: &str,
        context: Option<Map<String, Value>>,
    ) -> Result<CompleteResult, ClientError> {
        if self.protocol_version().is_none_or(|v| v >= ProtocolVersion::V2025_03_26) {
            self.require(Capability::Completions, methods::COMPLETION_COMPLETE)?;
        }
        let knows_context = self.protocol_version().is_none_or(|v| v >= ProtocolVersion::V2025_06_18);
        let context = context
            .filter(|arguments| knows_context && !arguments.is_empty())
            .map(|arguments| CompleteContext { arguments: Some(arguments), extra: Map::new() });
        let params = CompleteRequestParams {
            reference,
            argument: CompleteArgument { name: argument.to_owned(), value: value.to_owned(), extra: Map::new() },
            context,
            extra: Map::new(),
        };
        self.request(methods::COMPLETION_COMPLETE, Some(&params), RequestOptions::default()).await
    }

    /// `tools/call` under the tool's raw name.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        options: RequestOptions,
    ) -> Result<CallToolResult, ClientError> {
        let params = CallToolRequestParams { name: name.to_owned(), arguments, meta: None, extra: Map::new() };
        self.request(methods::TOOLS_CALL, Some(&params), options).await
    }
}
