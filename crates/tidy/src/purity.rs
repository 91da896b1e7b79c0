//! Pure crates do no I/O: no runtime, sockets, processes, files, clocks, threads or
//! environment. Checked twice: by the dependency graph ([`pure_dependencies`]) and by the
//! parsed source ([`pure_sources`]).
//!
//! The source check reads the library's modules (not its tests, examples or build script) and
//! looks at every path it can see: `use` trees of any shape (groups over several lines, renames,
//! globs, nested groups, a leading `::`), paths in expressions, types, patterns and attributes,
//! and paths inside macro invocations (tokens of the form `a::b::c`, and `a::{..}` groups). Names
//! brought in by `use` or `extern crate std as x` are followed, so `use std::io as x;
//! x::stdout()` is seen. `std`, `core` and `alloc` count as one root.
//!
//! What it cannot see: paths a macro assembles from pieces (`$root::fs` with `$root` given by
//! the caller), files pulled in with `include!`, methods that do I/O on values of allowed types
//! (`Path::exists`, `Path::canonicalize`), `HashMap`'s random seed, and names that reach the
//! same items through another crate's re-export (the dependency check covers crates).
//!
//! Allowed on purpose: `std::time::Duration` (a value, not a clock), the address types of
//! `std::net` (`IpAddr`, `SocketAddr`, ...: values, not sockets), and `std::io` except the
//! process's standard streams and terminal queries: `Write`, `Read`, `BufRead`, `Cursor`,
//! `Error` and the like move bytes between values the caller hands in (`mcp-protocol` writes
//! numbers into a `Vec<u8>` through `std::io::Write`), whereas `stdin`/`stdout`/`stderr` and
//! `IsTerminal` reach the process's own handles.

use std::collections::{BTreeSet, HashMap};

/// Items of `std::net` that are plain values (addresses), allowed in pure crates.
const NET_VALUE_ITEMS: &[&str] =
    &["IpAddr", "Ipv4Addr", "Ipv6Addr", "SocketAddr", "SocketAddrV4", "SocketAddrV6", "AddrParseError"];
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Item, Token, UseTree};

use crate::cargo::normal_tree;
use crate::modules::{self, Module, is_test_only, item_attrs};
use crate::{Crate, Rule, TidyError, Violation, line_of};

/// The crates that must stay free of I/O; the one list of them.
pub const PURE_CRATES: &[&str] = &["mcp-safety", "mcp-protocol", "tool-pool", "policy"];

/// Crates that do I/O or bring a runtime: none may be in a pure crate's normal dependency tree.
pub const IO_CRATES: &[&str] = &[
    "tokio",
    "tokio-util",
    "mio",
    "reqwest",
    "hyper",
    "hyper-util",
    "h2",
    "async-std",
    "smol",
    "async-io",
    "socket2",
    "ureq",
    "curl",
    "isahc",
    "nix",
    "rustix",
    "tungstenite",
    "tokio-tungstenite",
    "axum",
    "tower",
    "notify",
    "walkdir",
    "tempfile",
    "dirs",
    "directories",
];

/// `std::io` items that reach the process's own handles.
const IO_PROCESS_ITEMS: &[&str] =
    &["stdin", "stdout", "stderr", "Stdin", "Stdout", "Stderr", "StdinLock", "StdoutLock", "StderrLock", "IsTerminal"];

/// The I/O crates in the normal dependency tree of `krate` (host platform), each reported at the
/// line of `krate`'s manifest that declares the dependency it comes through.
pub fn pure_dependencies(krate: &Crate) -> Result<Vec<Violation>, TidyError> {
    let found = banned_in_tree(krate, IO_CRATES)?;
    Ok(found
        .into_iter()
        .map(|(name, chain, line)| Violation {
            rule: Rule::PureDependency,
            file: krate.manifest.clone(),
            line,
            message: format!(
                "{} depends on `{name}`, an I/O or runtime crate ({chain}): a pure crate does no I/O; move the code \
                 that needs it to an adapter crate behind a port, or make it a dev-dependency if only tests use it",
                krate.name,
            ),
        })
        .collect())
}

/// The crates of `banned` in the normal dependency tree of `krate` (host platform): each one's
/// name, the chain it comes through (`a -> b -> c`) and the line of `krate`'s manifest that
/// declares the first link, once per (crate, first link).
pub(crate) fn banned_in_tree(krate: &Crate, banned: &[&str]) -> Result<Vec<(String, String, usize)>, TidyError> {
    let tree = normal_tree(&krate.manifest, &krate.name)?;
    let manifest_text = std::fs::read_to_string(&krate.manifest)
        .map_err(|source| TidyError::Read { path: krate.manifest.clone(), source })?;
    let mut chain: Vec<&str> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for line in &tree {
        chain.truncate(line.depth);
        chain.push(&line.name);
        if line.depth == 0 || !banned.contains(&line.name.as_str()) {
            continue;
        }
        let direct = chain.get(1).copied().unwrap_or(&line.name);
        if !seen.insert((line.name.clone(), direct.to_owned())) {
            continue;
        }
        found.push((line.name.clone(), chain.join(" -> "), dependency_line(&manifest_text, direct)));
    }
    Ok(found)
}

/// The manifest line that declares dependency `name` (1 when it cannot be found, e.g. when it
/// comes from a workspace member's manifest elsewhere).
fn dependency_line(manifest: &str, name: &str) -> usize {
    let declares = |line: &str| {
        let line = line.trim();
        let key = line.split(['=', '.', ' ']).next().unwrap_or_default().trim_matches('"');
        key == name
            || line.ends_with(&format!("dependencies.{name}]"))
            || line.contains(&format!("package = \"{name}\""))
    };
    let mut in_dependencies = false;
    for (n, line) in manifest.lines().enumerate() {
        let trimmed = line.split('#').next().unwrap_or_default().trim();
        if trimmed.starts_with('[') {
            in_dependencies = trimmed.ends_with("dependencies]") && !trimmed.contains("dev-dependencies");
            if trimmed.contains("dependencies.") && !trimmed.contains("dev-dependencies") && declares(trimmed) {
                return n + 1;
            }
            continue;
        }
        if in_dependencies && declares(trimmed) {
            return n + 1;
        }
    }
    1
}

/// Every place the library of `krate` names an I/O part of the standard library.
pub fn pure_sources(krate: &Crate) -> Result<Vec<Violation>, TidyError> {
    let Some(lib) = &krate.lib else { return Ok(Vec::new()) };
    let mut found = BTreeSet::new();
    for module in modules::load(lib)? {
        check_module(&module, Scope::Crate, &mut found);
    }
    Ok(found
        .into_iter()
        .map(|(file, line, message)| Violation { rule: Rule::PureSource, file, line, message })
        .collect())
}

/// The pure modules of crates that also do I/O elsewhere: (crate, modules by path from the crate
/// root, each with its child modules). The one list of them.
///
/// mcp-auth: parsing `WWW-Authenticate`, the order of metadata URLs, resource identifiers, PKCE
/// and scope choice decide things; `flow`, `grants`, `authorizer` and `user_agent` make the
/// requests, `store` writes files and `clock` reads the clocks.
pub const PURE_MODULES: &[(&str, &[&str])] =
    &[("mcp-auth", &["www_authenticate", "discovery", "resource", "pkce", "scope"])];

/// Every place the listed modules of `krate` (see [`PURE_MODULES`]) do I/O: name an I/O part of
/// the standard library, as [`pure_sources`] sees it, or an I/O crate of [`IO_CRATES`] (the
/// dependency tree cannot tell modules apart). A listed module that does not exist is reported
/// too, so the list cannot go stale.
pub fn pure_modules(krate: &Crate, listed: &[&str]) -> Result<Vec<Violation>, TidyError> {
    let Some(lib) = &krate.lib else { return Ok(Vec::new()) };
    let modules = modules::load(lib)?;
    let mut found = BTreeSet::new();
    for name in listed {
        let wanted: Vec<&str> = name.split("::").collect();
        let mut any = false;
        for module in modules.iter().filter(|m| m.path.len() >= wanted.len() && m.path[..wanted.len()] == wanted[..]) {
            any = true;
            check_module(module, Scope::Module, &mut found);
        }
        if !any {
            found.insert((
                lib.clone(),
                1,
                format!("{} has no module `{name}`, which tidy's PURE_MODULES lists: correct the list", krate.name),
            ));
        }
    }
    Ok(found
        .into_iter()
        .map(|(file, line, message)| Violation { rule: Rule::PureSource, file, line, message })
        .collect())
}

/// What a purity check covers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// A whole pure crate: its dependencies are checked apart, so only the standard library is
    /// looked at here.
    Crate,
    /// One pure module of a crate that has I/O dependencies: naming one of them counts too.
    Module,
}

fn check_module(module: &Module, scope: Scope, found: &mut BTreeSet<(PathBuf, usize, String)>) {
    let mut aliases = Aliases::default();
    for item in &module.items {
        aliases.visit_item(item);
    }
    aliases.resolve();
    let mut checker = Checker { file: &module.file, aliases: &aliases.map, scope, found };
    for item in &module.items {
        checker.visit_item(item);
    }
}

/// A `use` leaf: the path it names, the name it binds, whether it is a glob.
struct Leaf {
    segments: Vec<String>,
    binds: Option<String>,
    glob: bool,
    line: usize,
}

fn leaves(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<Leaf>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => {
            let (segments, binds) = if n.ident == "self" {
                (prefix.clone(), prefix.last().cloned())
            } else {
                let mut s = prefix.clone();
                s.push(n.ident.to_string());
                (s, Some(n.ident.to_string()))
            };
            out.push(Leaf { segments, binds, glob: false, line: line_of(n.ident.span()) });
        }
        UseTree::Rename(r) => {
            let mut segments = prefix.clone();
            if r.ident != "self" {
                segments.push(r.ident.to_string());
            }
            let binds = (r.rename != "_").then(|| r.rename.to_string());
            out.push(Leaf { segments, binds, glob: false, line: line_of(r.ident.span()) });
        }
        UseTree::Glob(g) => {
            out.push(Leaf { segments: prefix.clone(), binds: None, glob: true, line: line_of(g.star_token.span) });
        }
        UseTree::Group(g) => {
            for tree in &g.items {
                leaves(tree, prefix, out);
            }
        }
    }
}

fn use_leaves(item: &syn::ItemUse) -> Vec<Leaf> {
    let mut out = Vec::new();
    leaves(&item.tree, &mut Vec::new(), &mut out);
    out
}

/// Names a module binds with `use` (anywhere in it, function bodies included) and
/// `extern crate .. as`, mapped to the paths they stand for.
#[derive(Default)]
struct Aliases {
    map: HashMap<String, Vec<String>>,
}

impl Aliases {
    /// Follows aliases of aliases (`use std::io; use io::Write;`) a few levels deep.
    fn resolve(&mut self) {
        for _ in 0..4 {
            let snapshot = self.map.clone();
            for (name, target) in self.map.iter_mut() {
                if let Some(first) = target.first()
                    && first != name
                    && let Some(expansion) = snapshot.get(first)
                {
                    let mut expanded = expansion.clone();
                    expanded.extend(target.iter().skip(1).cloned());
                    *target = expanded;
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Aliases {
    fn visit_item(&mut self, item: &'ast Item) {
        // A child module has its own entry and its own scope.
        if !matches!(item, Item::Mod(_)) && !is_test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        for leaf in use_leaves(item) {
            if let Some(name) = leaf.binds.as_deref().and_then(|name| leaf_name(&leaf.segments, name)) {
                self.map.insert(name, leaf.segments);
            }
        }
    }

    fn visit_item_extern_crate(&mut self, item: &'ast syn::ItemExternCrate) {
        if let Some((_, rename)) = &item.rename {
            self.map.insert(rename.to_string(), vec![item.ident.to_string()]);
        }
    }
}

/// The bound name, unless binding it would only map a name to itself (`use serde;`).
fn leaf_name(segments: &[String], name: &str) -> Option<String> {
    (segments.len() > 1 || segments.first().is_some_and(|s| s != name)).then(|| name.to_owned())
}

/// Why a path (already expanded through aliases) names an I/O crate of [`IO_CRATES`], if it
/// does (`tokio_tungstenite` for `tokio-tungstenite`).
fn io_crate_reason(segments: &[String]) -> Option<&'static str> {
    let root = segments.first()?;
    IO_CRATES.iter().any(|c| c.replace('-', "_") == *root).then_some("an I/O or runtime crate")
}

/// Why a path (already expanded through aliases) names I/O, if it does.
fn io_reason(segments: &[String], glob: bool, macro_call: bool) -> Option<&'static str> {
    let root = segments.first()?;
    if !matches!(root.as_str(), "std" | "core" | "alloc") {
        return None;
    }
    let Some(module) = segments.get(1) else {
        return glob.then_some("a glob import of the whole standard library (it brings in `fs`, `env`, ...)");
    };
    let item = segments.get(2);
    match module.as_str() {
        // `env!` and `option_env!` read the build's environment at compile time.
        "env" | "option_env" if macro_call && segments.len() == 2 => None,
        "fs" => Some("the file system"),
        "net" => match item {
            // Addresses are values: parsing or classifying one reaches nothing.
            Some(name) if NET_VALUE_ITEMS.contains(&name.as_str()) => None,
            None if glob => Some("a glob import of `net` (it brings in sockets)"),
            _ => Some("the network"),
        },
        "process" => Some("processes"),
        "thread" => Some("threads"),
        "env" => Some("the environment"),
        "os" => Some("operating-system handles"),
        "time" => match item {
            Some(name) if name == "Duration" => None,
            Some(_) => Some("a clock"),
            None if glob => Some("a glob import of `time` (it brings in `Instant` and `SystemTime`, clocks)"),
            None => None,
        },
        "io" => match item {
            Some(name) if IO_PROCESS_ITEMS.contains(&name.as_str()) => Some("the process's standard streams"),
            None if glob => Some("a glob import of `io` (it brings in `stdin`, `stdout` and `stderr`)"),
            _ => None,
        },
        _ => None,
    }
}

struct Checker<'a> {
    file: &'a Path,
    aliases: &'a HashMap<String, Vec<String>>,
    scope: Scope,
    found: &'a mut BTreeSet<(PathBuf, usize, String)>,
}

impl Checker<'_> {
    /// Why a path names I/O in this scope.
    fn reason(&self, segments: &[String], glob: bool, macro_call: bool) -> Option<&'static str> {
        io_reason(segments, glob, macro_call)
            .or_else(|| if self.scope == Scope::Module { io_crate_reason(segments) } else { None })
    }

    /// Checks a path as written; `absolute` for a leading `::`.
    fn check(&mut self, written: &[String], absolute: bool, glob: bool, macro_call: bool, line: usize) {
        let Some(first) = written.first() else { return };
        let expanded = match self.aliases.get(first) {
            Some(target) if !absolute => {
                // The `use` that made the alias is reported on its own line.
                if self.reason(target, false, false).is_some() {
                    return;
                }
                target.iter().chain(&written[1..]).cloned().collect::<Vec<_>>()
            }
            _ => written.to_vec(),
        };
        let Some(reason) = self.reason(&expanded, glob, macro_call) else { return };
        let mut shown = written.join("::");
        if glob {
            shown.push_str("::*");
        }
        let expansion =
            if expanded != written { format!(" (that is `{}`)", expanded.join("::")) } else { String::new() };
        self.found.insert((
            self.file.to_owned(),
            line,
            format!(
                "names `{shown}`{expansion}, which reaches {reason}: a pure {} does no I/O; take the value \
                 (or a port trait) from the caller instead",
                if self.scope == Scope::Module { "module" } else { "crate" }
            ),
        ));
    }

    /// Paths inside a macro's tokens: `a::b::c` runs, and `a::{..}` groups read as `use` trees.
    fn scan(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            let absolute = is_path_sep(&trees, i);
            let start = if absolute { i + 2 } else { i };
            let Some(TokenTree::Ident(first)) = trees.get(start) else {
                if let TokenTree::Group(g) = &trees[i] {
                    self.scan(g.stream());
                }
                i += 1;
                continue;
            };
            let line = line_of(first.span());
            let mut segments = vec![first.to_string()];
            let mut j = start + 1;
            while is_path_sep(&trees, j)
                && let Some(TokenTree::Ident(next)) = trees.get(j + 2)
            {
                segments.push(next.to_string());
                j += 3;
            }
            if is_path_sep(&trees, j)
                && let Some(TokenTree::Group(group)) = trees.get(j + 2)
                && group.delimiter() == Delimiter::Brace
            {
                // `std::{fs, io}` inside a macro: read the group as `use` trees when it parses.
                match syn::parse::Parser::parse2(Punctuated::<UseTree, Token![,]>::parse_terminated, group.stream()) {
                    Ok(trees) => {
                        for tree in &trees {
                            let mut out = Vec::new();
                            leaves(tree, &mut segments.clone(), &mut out);
                            for leaf in out {
                                self.check(&leaf.segments, absolute, leaf.glob, false, leaf.line);
                            }
                        }
                    }
                    Err(_) => self.scan(group.stream()),
                }
                i = j + 3;
                continue;
            }
            let macro_call = matches!(trees.get(j), Some(TokenTree::Punct(p)) if p.as_char() == '!');
            if segments.len() > 1 || absolute || self.aliases.contains_key(&segments[0]) {
                self.check(&segments, absolute, false, macro_call, line);
            }
            i = j;
        }
    }
}

/// Whether tokens `i` and `i + 1` are `::`.
fn is_path_sep(trees: &[TokenTree], i: usize) -> bool {
    matches!(
        (trees.get(i), trees.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

fn path_segments(path: &syn::Path) -> Vec<String> {
    path.segments.iter().map(|s| s.ident.to_string()).collect()
}

impl<'ast> Visit<'ast> for Checker<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if !matches!(item, Item::Mod(_)) && !is_test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let absolute = item.leading_colon.is_some();
        for leaf in use_leaves(item) {
            self.check(&leaf.segments, absolute, leaf.glob, false, leaf.line);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if let Some(first) = path.segments.first() {
            self.check(&path_segments(path), path.leading_colon.is_some(), false, false, line_of(first.ident.span()));
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if let Some(first) = mac.path.segments.first() {
            let line = line_of(first.ident.span());
            self.check(&path_segments(&mac.path), mac.path.leading_colon.is_some(), false, true, line);
        }
        self.scan(mac.tokens.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(path: &str) -> Vec<String> {
        path.split("::").map(str::to_owned).collect()
    }

    #[test]
    fn reasons() {
        for (path, glob, io) in [
            ("std::fs", false, true),
            ("core::net::Ipv4Addr", false, false),
            ("std::net::TcpStream", false, true),
            ("std::net", false, true),
            ("std::net", true, true),
            ("std::time::Duration", false, false),
            ("std::time::Instant", false, true),
            ("std::time", false, false),
            ("std::time", true, true),
            ("std::io::Write", false, false),
            ("std::io::stdout", false, true),
            ("std::io", true, true),
            ("std::io::prelude", true, false),
            ("std", true, true),
            ("std::collections", true, false),
            ("serde::fs", false, false),
        ] {
            assert_eq!(io_reason(&segs(path), glob, false).is_some(), io, "{path} glob={glob}");
        }
        assert!(io_reason(&segs("std::env"), false, true).is_none(), "env! is compile time");
    }

    #[test]
    fn manifest_lines() {
        let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nserde.workspace = true\nmiddle = { path = \"m\" }\n\
                        [dev-dependencies]\ntokio = \"1\"\n[dependencies.other]\nversion = \"1\"\n";
        assert_eq!(dependency_line(manifest, "middle"), 6);
        assert_eq!(dependency_line(manifest, "serde"), 5);
        assert_eq!(dependency_line(manifest, "tokio"), 1);
        assert_eq!(dependency_line(manifest, "other"), 9);
    }
}
