//! What upstreams offer besides tools, as the gateway's clients see it: prompts named like tools
//! (`{server}__{prompt}`, by the pool's namer and collision rule), resources and templates under
//! their own URIs, and a URI (or template) two upstreams share offered under a gateway-made one
//! (`mcp-gateway://{server}/{their URI}`) for each, so nothing is ever routed to the wrong one.

use std::collections::{BTreeMap, HashMap};

use mcp_protocol::{Prompt, Resource, ResourceTemplate};
use tool_pool::{Naming, server_segment};

use crate::backend::ContentListing;

/// The scheme of URIs the gateway makes for resources two upstreams share.
pub const GATEWAY_SCHEME: &str = "mcp-gateway://";

/// The downstream view of a [`ContentListing`], with the routes back.
#[derive(Debug, Clone, Default)]
pub struct ContentView {
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
    /// Downstream URI -> (server, upstream URI).
    resource_routes: HashMap<String, (String, String)>,
    /// Downstream prompt name -> (server, upstream name).
    prompt_routes: HashMap<String, (String, String)>,
    /// Plain templates: (literal prefix before the first `{`, server), longest prefix first.
    template_prefixes: Vec<(String, String)>,
    /// Downstream template -> (server, upstream template).
    template_routes: HashMap<String, (String, String)>,
    /// Server segment -> server (the first in name order, as with tools).
    segments: BTreeMap<String, String>,
    /// Servers that declared completions.
    completions: Vec<String>,
}

/// The gateway-made URI of `uri` of `server`.
pub fn gateway_uri(server: &str, uri: &str) -> String {
    format!("{GATEWAY_SCHEME}{}/{uri}", server_segment(server))
}

impl ContentView {
    /// The view of `listing`, prompts named in `naming`'s form.
    pub fn new(listing: &ContentListing, naming: Naming) -> Self {
        let mut view = ContentView::default();
        for server in listing.servers.keys() {
            view.segments.entry(server_segment(server)).or_insert_with(|| server.clone());
        }
        // Which URIs and templates more than one upstream offers.
        let mut uri_count: HashMap<&str, usize> = HashMap::new();
        let mut template_count: HashMap<&str, usize> = HashMap::new();
        for content in listing.servers.values() {
            for r in &content.resources {
                *uri_count.entry(r.uri.as_str()).or_default() += 1;
            }
            for t in &content.templates {
                *template_count.entry(t.uri_template.as_str()).or_default() += 1;
            }
        }
        // Servers come in name order (a BTreeMap): the first claimant of a name keeps it.
        for (server, content) in &listing.servers {
            if content.completions {
                view.completions.push(server.clone());
            }
            for r in &content.resources {
                let outward = if uri_count.get(r.uri.as_str()).copied().unwrap_or(0) > 1 {
                    gateway_uri(server, &r.uri)
                } else {
                    r.uri.clone()
                };
                if view.resource_routes.contains_key(&outward) {
                    continue;
                }
                view.resource_routes.insert(outward.clone(), (server.clone(), r.uri.clone()));
                view.resources.push(Resource { uri: outward, ..r.clone() });
            }
            for t in &content.templates {
                let shared = template_count.get(t.uri_template.as_str()).copied().unwrap_or(0) > 1;
                let outward = if shared { gateway_uri(server, &t.uri_template) } else { t.uri_template.clone() };
                if view.template_routes.contains_key(&outward) {
                    continue;
                }
                if !shared {
                    let prefix = t.uri_template.split('{').next().unwrap_or_default().to_owned();
                    view.template_prefixes.push((prefix, server.clone()));
                }
                view.template_routes.insert(outward.clone(), (server.clone(), t.uri_template.clone()));
                view.templates.push(ResourceTemplate { uri_template: outward, ..t.clone() });
            }
            for p in &content.prompts {
                let Some(name) = naming.name(server, &p.name) else { continue };
                if view.prompt_routes.contains_key(&name) {
                    continue;
                }
                view.prompt_routes.insert(name.clone(), (server.clone(), p.name.clone()));
                view.prompts.push(Prompt { name, ..p.clone() });
            }
        }
        view.template_prefixes.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.1.cmp(&b.1)));
        view
    }

    /// The resources, under their downstream URIs.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// The resource templates, under their downstream templates.
    pub fn templates(&self) -> &[ResourceTemplate] {
        &self.templates
    }

    /// The prompts, under their downstream names.
    pub fn prompts(&self) -> &[Prompt] {
        &self.prompts
    }

    /// Where a downstream URI goes: (server, the upstream's URI). A listed resource by its
    /// URI; a gateway-made URI by its server part; otherwise the one plain template whose
    /// literal start it has (the longest such; two of one length are ambiguous: `None`).
    pub fn route_uri(&self, uri: &str) -> Option<(&str, String)> {
        if let Some((server, upstream)) = self.resource_routes.get(uri) {
            return Some((server, upstream.clone()));
        }
        if let Some(rest) = uri.strip_prefix(GATEWAY_SCHEME) {
            let (segment, upstream) = rest.split_once('/')?;
            let server = self.segments.get(segment)?;
            return Some((server, upstream.to_owned()));
        }
        let mut matching = self.template_prefixes.iter().filter(|(prefix, _)| uri.starts_with(prefix.as_str()));
        let (prefix, server) = matching.next()?;
        if matching.next().is_some_and(|(other, s)| other.len() == prefix.len() && s != server) {
            return None;
        }
        Some((server, uri.to_owned()))
    }

    /// The downstream URI of `uri` of `server` (a read result's contents are rewritten with it).
    /// One lookup: a read's contents may hold many items, and a listing many resources.
    pub fn outward_uri(&self, server: &str, uri: &str) -> String {
        let made = gateway_uri(server, uri);
        match self.resource_routes.get(&made) {
            Some((s, u)) if s == server && u == uri => made,
            _ => uri.to_owned(),
        }
    }

    /// Where a downstream prompt name goes: (server, the upstream's name).
    pub fn route_prompt(&self, name: &str) -> Option<(&str, &str)> {
        self.prompt_routes.get(name).map(|(s, n)| (s.as_str(), n.as_str()))
    }

    /// Where a downstream template goes: (server, the upstream's template).
    pub fn route_template(&self, template: &str) -> Option<(&str, &str)> {
        self.template_routes.get(template).map(|(s, t)| (s.as_str(), t.as_str()))
    }

    /// Whether `server` declared completions.
    pub fn completes(&self, server: &str) -> bool {
        self.completions.iter().any(|s| s == server)
    }
}

#[cfg(test)]
mod tests {
    use mcp_protocol::Resource;

    use super::*;
    use crate::backend::ServerContent;

    fn resource(uri: &str) -> Resource {
        serde_json::from_value(serde_json::json!({"uri": uri, "name": uri})).unwrap_or_else(|_| unreachable!())
    }

    fn template(t: &str) -> ResourceTemplate {
        serde_json::from_value(serde_json::json!({"uriTemplate": t, "name": t})).unwrap_or_else(|_| unreachable!())
    }

    fn prompt(name: &str) -> Prompt {
        serde_json::from_value(serde_json::json!({"name": name})).unwrap_or_else(|_| unreachable!())
    }

    fn listing() -> ContentListing {
        let a = ServerContent {
            resources: vec![resource("file:///shared"), resource("a://only")],
            templates: vec![template("logs://{name}"), template("a://items/{id}")],
            prompts: vec![prompt("greet")],
            completions: true,
        };
        let b = ServerContent {
            resources: vec![resource("file:///shared")],
            templates: vec![template("logs://{name}"), template("a://{anything}")],
            prompts: vec![prompt("greet"), prompt("bye now")],
            completions: false,
        };
        ContentListing { servers: BTreeMap::from([("a".into(), a), ("b".into(), b)]) }
    }

    #[test]
    fn shared_uris_get_gateway_uris_and_route_back() {
        let view = ContentView::new(&listing(), Naming::Gateway);
        let uris: Vec<&str> = view.resources().iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["mcp-gateway://a/file:///shared", "a://only", "mcp-gateway://b/file:///shared"]);
        assert_eq!(view.route_uri("mcp-gateway://b/file:///shared"), Some(("b", "file:///shared".to_owned())));
        assert_eq!(view.route_uri("a://only"), Some(("a", "a://only".to_owned())));
        assert_eq!(view.route_uri("file:///shared"), None, "never guessed");
        assert_eq!(view.outward_uri("a", "file:///shared"), "mcp-gateway://a/file:///shared");
        assert_eq!(view.outward_uri("a", "a://only"), "a://only");
        // Templates: a shared one per server; plain ones route by their literal start, longest first.
        let templates: Vec<&str> = view.templates().iter().map(|t| t.uri_template.as_str()).collect();
        assert_eq!(
            templates,
            ["mcp-gateway://a/logs://{name}", "a://items/{id}", "mcp-gateway://b/logs://{name}", "a://{anything}"]
        );
        assert_eq!(view.route_uri("a://items/7"), Some(("a", "a://items/7".to_owned())));
        assert_eq!(view.route_uri("a://other"), Some(("b", "a://other".to_owned())));
        assert_eq!(view.route_uri("mcp-gateway://b/logs://x"), Some(("b", "logs://x".to_owned())));
        assert_eq!(view.route_template("a://{anything}"), Some(("b", "a://{anything}")));
        assert_eq!(view.route_uri("mcp-gateway://zz/x"), None);
    }

    #[test]
    fn prompts_are_named_like_tools() {
        let view = ContentView::new(&listing(), Naming::Gateway);
        let names: Vec<&str> = view.prompts().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a__greet", "b__greet", "b__bye_now"]);
        assert_eq!(view.route_prompt("b__bye_now"), Some(("b", "bye now")));
        assert!(view.completes("a") && !view.completes("b"));
        let transparent = ContentView::new(&listing(), Naming::Transparent);
        let names: Vec<&str> = transparent.prompts().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["greet", "bye now"], "the first server keeps a shared name");
    }
}
