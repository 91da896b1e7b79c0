//! Public enums that callers match on but that will grow carry `#[non_exhaustive]`: error enums
//! (a `pub enum` whose name ends in `Error`) and port enums (a `pub enum` named in the signature
//! of a method of a `pub trait` of the same crate: a parameter, the return type, or inside
//! `Result`, `Option`, `Vec`, `Box`, references, tuples, `impl Future<Output = ..>` and so on).
//!
//! Enums are matched by name within one crate (no name resolution): an enum of another crate
//! named in a trait is that crate's business, and two enums of one crate with the same name
//! count as one.

use std::collections::BTreeSet;

use syn::visit::{self, Visit};
use syn::{FnArg, Item, ReturnType, TraitItem, Visibility};

use crate::modules::{self, Module};
use crate::{Crate, Rule, TidyError, Violation, line_of};

/// Deliberate exceptions: (crate, enum, why it may stay exhaustive). None today; an entry needs
/// a reason a reviewer can check, such as "a closed set fixed by the MCP specification".
pub const ALLOWED_EXHAUSTIVE: &[(&str, &str, &str)] = &[];

/// Every public error or port enum of `krate`'s library without `#[non_exhaustive]`.
pub fn non_exhaustive(krate: &Crate) -> Result<Vec<Violation>, TidyError> {
    let Some(lib) = &krate.lib else { return Ok(Vec::new()) };
    let modules = modules::load(lib)?;
    let in_ports = port_type_names(&modules);
    let mut violations = Vec::new();
    for module in &modules {
        for item in &module.items {
            let Item::Enum(e) = item else { continue };
            if !matches!(e.vis, Visibility::Public(_)) || e.attrs.iter().any(|a| a.path().is_ident("non_exhaustive")) {
                continue;
            }
            let name = e.ident.to_string();
            if ALLOWED_EXHAUSTIVE.iter().any(|(c, n, _)| *c == krate.name && *n == name) {
                continue;
            }
            let why = if name.ends_with("Error") {
                "an error enum"
            } else if in_ports.contains(&name) {
                "a port enum (a public trait's method takes or returns it)"
            } else {
                continue;
            };
            violations.push(Violation {
                rule: Rule::NonExhaustive,
                file: module.file.clone(),
                line: line_of(e.ident.span()),
                message: format!(
                    "`{}::{name}` is {why} without #[non_exhaustive]: add it (a new variant must not break callers), \
                     or list the enum in tidy's ALLOWED_EXHAUSTIVE with the reason",
                    module.display_path()
                ),
            });
        }
    }
    Ok(violations)
}

/// Every name in a type path of a `pub trait`'s method signatures (parameters and return type).
fn port_type_names(modules: &[Module]) -> BTreeSet<String> {
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
