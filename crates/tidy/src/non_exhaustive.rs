//! Public types that callers match on or build but that will grow carry `#[non_exhaustive]`:
//!
//! - error enums (a `pub enum` whose name ends in `Error`);
//! - port enums: a `pub enum` named in the signature of a method of a `pub trait` of the same
//!   crate (a parameter, the return type, or inside `Result`, `Option`, `Vec`, `Box`,
//!   references, tuples, `impl Future<Output = ..>` and so on), or held, at any depth, by a field
//!   of a public struct or enum so named (agent-loop's `Block` reaches the model port inside a
//!   `ModelResponse`);
//! - connector configurations: a `pub struct` the crate implements a connector port for
//!   ([`CONNECTOR_PORTS`]: `impl Connector for HttpConfig`), which grows an option with every
//!   transport feature;
//! - the enums [`GROWING_ENUMS`] lists ([`growing_enums`]), which grow with each revision of the
//!   protocol.
//!
//! Types are matched by name within one crate (no name resolution): an enum of another crate
//! named in a trait is that crate's business, and two types of one crate with the same name
//! count as one.

use std::collections::{BTreeMap, BTreeSet};

use syn::visit::{self, Visit};
use syn::{Fields, FnArg, Item, ReturnType, TraitItem, Visibility};

use crate::modules::{self, Module};
use crate::{Crate, Rule, TidyError, Violation, line_of};

/// Deliberate exceptions: (crate, type, why it may stay exhaustive). An entry needs a reason a
/// reviewer can check, such as "a closed set fixed by the MCP specification".
pub const ALLOWED_EXHAUSTIVE: &[(&str, &str, &str)] = &[];

/// Traits whose implementors are configurations: a `pub struct` a crate implements one of these
/// for (by the trait's last path segment) must be `#[non_exhaustive]`, and so needs a
/// constructor (`new` or `Default`) for other crates.
pub const CONNECTOR_PORTS: &[&str] = &["Connector"];

/// Enums that grow with each revision of the protocol: (crate, enum, why). Nothing in their
/// shape says so, hence the list; [`growing_enums`] also reports an entry whose enum is gone.
pub const GROWING_ENUMS: &[(&str, &str, &str)] = &[
    ("mcp-protocol", "ServerRequest", "a revision adds requests a server may send"),
    ("mcp-protocol", "ServerNotification", "a revision adds notifications"),
    ("mcp-protocol", "ProtocolVersion", "every revision is a new variant"),
];

/// Every public error or port enum, and every connector configuration, of `krate`'s library
/// without `#[non_exhaustive]`.
pub fn non_exhaustive(krate: &Crate) -> Result<Vec<Violation>, TidyError> {
    let Some(lib) = &krate.lib else { return Ok(Vec::new()) };
    let modules = modules::load(lib)?;
    let in_ports = port_type_names(&modules);
    let configs = connector_configs(&modules);
    let mut violations = Vec::new();
    for module in &modules {
        for item in &module.items {
            let (ident, attrs, what) = match item {
                Item::Enum(e) if matches!(e.vis, Visibility::Public(_)) => (&e.ident, &e.attrs, "variant"),
                Item::Struct(s) if matches!(s.vis, Visibility::Public(_)) => (&s.ident, &s.attrs, "field"),
                _ => continue,
            };
            if has_non_exhaustive(attrs) {
                continue;
            }
            let name = ident.to_string();
            if ALLOWED_EXHAUSTIVE.iter().any(|(c, n, _)| *c == krate.name && *n == name) {
                continue;
            }
            let (why, also) = match (what, in_ports.get(&name)) {
                ("variant", _) if name.ends_with("Error") => ("an error enum".to_owned(), ""),
                ("variant", Some(None)) => ("a port enum (a public trait's method takes or returns it)".to_owned(), ""),
                ("variant", Some(Some(holder))) => {
                    (format!("a port enum (it reaches a public trait's method inside `{holder}`)"), "")
                }
                ("field", _) => match configs.get(&name) {
                    Some(port) => (
                        format!("a connector's configuration (the crate implements `{port}` for it)"),
                        " and keep a `new` or `Default` for other crates to start from",
                    ),
                    None => continue,
                },
                _ => continue,
            };
            violations.push(Violation {
                rule: Rule::NonExhaustive,
                file: module.file.clone(),
                line: line_of(ident.span()),
                message: format!(
                    "`{}::{name}` is {why} without #[non_exhaustive]: add it (a new {what} must not break callers){also}, \
                     or list it in tidy's ALLOWED_EXHAUSTIVE with the reason",
                    module.display_path()
                ),
            });
        }
    }
    Ok(violations)
}

/// Every enum of `krate` that `listed` (entries of [`GROWING_ENUMS`] form: crate, enum, why)
/// names for this crate and that lacks `#[non_exhaustive]`, and every such entry whose enum the
/// crate does not have.
pub fn growing_enums(krate: &Crate, listed: &[(&str, &str, &str)]) -> Result<Vec<Violation>, TidyError> {
    let Some(lib) = &krate.lib else { return Ok(Vec::new()) };
    let wanted: Vec<(&str, &str)> =
        listed.iter().filter(|(c, _, _)| *c == krate.name).map(|(_, name, why)| (*name, *why)).collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let modules = modules::load(lib)?;
    let mut violations = Vec::new();
    for (name, why) in wanted {
        let found = modules.iter().find_map(|module| {
            module.items.iter().find_map(|item| match item {
                Item::Enum(e) if e.ident == name => Some((module, e)),
                _ => None,
            })
        });
        match found {
            Some((_, e)) if has_non_exhaustive(&e.attrs) => {}
            Some((module, e)) => violations.push(Violation {
                rule: Rule::NonExhaustive,
                file: module.file.clone(),
                line: line_of(e.ident.span()),
                message: format!(
                    "`{}::{name}` grows with the protocol ({why}) but lacks #[non_exhaustive]: add it (a new \
                     revision must not break callers)",
                    module.display_path()
                ),
            }),
            None => violations.push(Violation {
                rule: Rule::NonExhaustive,
                file: lib.clone(),
                line: 1,
                message: format!(
                    "{} has no enum `{name}`, which tidy's GROWING_ENUMS lists: correct the list",
                    krate.name
                ),
            }),
        }
    }
    Ok(violations)
}

fn has_non_exhaustive(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("non_exhaustive"))
}

/// The public structs the crate implements a [`CONNECTOR_PORTS`] trait for, with the trait.
fn connector_configs(modules: &[Module]) -> BTreeMap<String, String> {
    let mut configs = BTreeMap::new();
    for module in modules {
        for item in &module.items {
            let Item::Impl(imp) = item else { continue };
            let Some((_, trait_path, _)) = &imp.trait_ else { continue };
            let Some(port) = trait_path.segments.last().map(|s| s.ident.to_string()) else { continue };
            if !CONNECTOR_PORTS.contains(&port.as_str()) {
                continue;
            }
            if let syn::Type::Path(ty) = &*imp.self_ty
                && let Some(name) = ty.path.segments.last()
            {
                configs.insert(name.ident.to_string(), port);
            }
        }
    }
    configs
}

/// Every name in a type path of a `pub trait`'s method signatures (parameters and return type),
/// then, to a fixed point, every name in the field types of a public struct or enum so named:
/// each with the type that holds it (`None` for the signatures themselves).
fn port_type_names(modules: &[Module]) -> BTreeMap<String, Option<String>> {
    let mut reached: BTreeMap<String, Option<String>> =
        signature_names(modules).into_iter().map(|name| (name, None)).collect();
    let holders = field_names(modules);
    let mut next: Vec<String> = reached.keys().cloned().collect();
    while let Some(holder) = next.pop() {
        for name in holders.get(&holder).into_iter().flatten() {
            if !reached.contains_key(name) {
                reached.insert(name.clone(), Some(holder.clone()));
                next.push(name.clone());
            }
        }
    }
    reached
}

/// The names in the field types of each public struct and enum (every variant's fields).
fn field_names(modules: &[Module]) -> BTreeMap<String, BTreeSet<String>> {
    let mut holders = BTreeMap::new();
    for module in modules {
        for item in &module.items {
            let (name, fields): (String, Vec<&Fields>) = match item {
                Item::Struct(s) if matches!(s.vis, Visibility::Public(_)) => (s.ident.to_string(), vec![&s.fields]),
                Item::Enum(e) if matches!(e.vis, Visibility::Public(_)) => {
                    (e.ident.to_string(), e.variants.iter().map(|v| &v.fields).collect())
                }
                _ => continue,
            };
            let mut names = Names::default();
            for field in fields.into_iter().flatten() {
                // A private field is the holder's business: callers cannot match on it.
                if matches!(field.vis, Visibility::Public(_)) || matches!(item, Item::Enum(_)) {
                    names.visit_type(&field.ty);
                }
            }
            holders.entry(name).or_insert_with(BTreeSet::new).extend(names.0);
        }
    }
    holders
}

/// Every name in a type path of a `pub trait`'s method signatures (parameters and return type).
fn signature_names(modules: &[Module]) -> BTreeSet<String> {
    let mut names = Names::default();
    for module in modules {
        for item in &module.items {
            let Item::Trait(t) = item else { continue };
            if !matches!(t.vis, Visibility::Public(_)) {
                continue;
            }
            for trait_item in &t.items {
                let TraitItem::Fn(f) = trait_item else { continue };
                for input in &f.sig.inputs {
                    if let FnArg::Typed(typed) = input {
                        names.visit_type(&typed.ty);
                    }
                }
                if let ReturnType::Type(_, ty) = &f.sig.output {
                    names.visit_type(ty);
                }
            }
        }
    }
    names.0
}

#[derive(Default)]
struct Names(BTreeSet<String>);

impl<'ast> Visit<'ast> for Names {
    fn visit_path_segment(&mut self, segment: &'ast syn::PathSegment) {
        self.0.insert(segment.ident.to_string());
        visit::visit_path_segment(self, segment);
    }
}
