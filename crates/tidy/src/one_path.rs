//! One public path per item: a module that is public (every module from the root down to it is
//! `pub`) and also `pub use`s something from a public child module (named, renamed or glob)
//! makes it public twice, as `crate::m::Item` and `crate::Item`. The project's fix: private
//! modules with explicit `pub use` at the crate root, or public modules without re-exports.
//!
//! Paths of `pub use` are followed through the crate's own modules (`self::`, `crate::`,
//! `super::` and child module names); a re-export of another crate's item is not this rule's
//! concern. Items are recognised by name in the module that declares or re-exports them;
//! macros (`#[macro_export]`) are not considered.

use syn::{Item, UseTree, Visibility};

use crate::modules::{self, Module};
use crate::{Crate, Rule, TidyError, Violation, line_of};

/// Every item of `krate`'s library that a `pub use` makes public a second time.
pub fn one_path(krate: &Crate) -> Result<Vec<Violation>, TidyError> {
    let Some(lib) = &krate.lib else { return Ok(Vec::new()) };
    let modules = modules::load(lib)?;
    let mut violations = Vec::new();
    for (index, module) in modules.iter().enumerate() {
        if !module.public {
            continue;
        }
        for item in &module.items {
            let Item::Use(u) = item else { continue };
            if !matches!(u.vis, Visibility::Public(_)) || u.leading_colon.is_some() {
                continue;
            }
            let mut leaves = Vec::new();
            use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
            for leaf in leaves {
                if leaf.rename.as_deref() == Some("_") {
                    // `pub use m::Trait as _` brings a trait's methods into scope; it names nothing.
                    continue;
                }
                let Some(message) = duplicate(&modules, index, &leaf) else { continue };
                violations.push(Violation { rule: Rule::OnePath, file: module.file.clone(), line: leaf.line, message });
            }
        }
    }
    Ok(violations)
}

struct Leaf {
    /// The path as written, `self` leaves already folded into their parent.
    segments: Vec<String>,
    rename: Option<String>,
    glob: bool,
    line: usize,
}

fn use_leaves(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<Leaf>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => {
            let mut segments = prefix.clone();
            if n.ident != "self" {
                segments.push(n.ident.to_string());
            }
            out.push(Leaf { segments, rename: None, glob: false, line: line_of(n.ident.span()) });
        }
        UseTree::Rename(r) => {
            let mut segments = prefix.clone();
            if r.ident != "self" {
                segments.push(r.ident.to_string());
            }
            out.push(Leaf { segments, rename: Some(r.rename.to_string()), glob: false, line: line_of(r.ident.span()) });
        }
        UseTree::Glob(g) => {
            out.push(Leaf { segments: prefix.clone(), rename: None, glob: true, line: line_of(g.star_token.span) });
        }
        UseTree::Group(g) => {
            for tree in &g.items {
                use_leaves(tree, prefix, out);
            }
        }
    }
}

/// The message when the item `leaf` re-exports from module `from` is already public elsewhere.
fn duplicate(modules: &[Module], from: usize, leaf: &Leaf) -> Option<String> {
    let mut segments = leaf.segments.iter().map(String::as_str).peekable();
    // Where the path starts.
    let mut at = match *segments.peek()? {
        "crate" => {
            segments.next();
            0
        }
        "self" => {
            segments.next();
            from
        }
        "super" => {
            let mut at = from;
            while segments.peek() == Some(&"super") {
                segments.next();
                at = modules[at].parent?;
            }
            at
        }
        // Anything else must be a child module of `from` to be this crate's (else: another crate).
        first if modules[from].child(first).is_some() => from,
        _ => return None,
    };
    let names: Vec<&str> = segments.collect();
    let (last, through) =
        if leaf.glob { (None, &names[..]) } else { names.split_last().map(|(l, t)| (Some(*l), t))? };
    // Every module on the way must be public, else the item has no second public path.
    for name in through {
        let (child, is_pub) = modules[at].child(name)?;
        if !is_pub || !modules[child].public {
            return None;
        }
        at = child;
    }
    let target = &modules[at];
    if at == from || !target.public {
        return None;
    }
    // The project's fix: private modules with explicit `pub use` at the root, or public modules
    // without re-exports.
    let advice = format!("make `{}` a private `mod`, or drop this `pub use`", target.display_path());
    let here = modules[from].display_path();
    match last {
        None => {
            let items = public_names(target);
            if items.is_empty() {
                return None;
            }
            Some(format!(
                "`pub use {}::*` makes {} public a second time (also under `{here}`): {advice}",
                target.display_path(),
                items.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            ))
        }
        Some(name) => {
            if !public_names(target).iter().any(|n| n == name) {
                return None;
            }
            let as_name = leaf.rename.as_deref().unwrap_or(name);
            Some(format!("`{}::{name}` is also public as `{here}::{as_name}`: {advice}", target.display_path()))
        }
    }
}

/// Names a module makes public: its `pub` items and `pub use` leaves (globs aside).
fn public_names(module: &Module) -> Vec<String> {
    let mut names = Vec::new();
    for item in &module.items {
        let (vis, ident) = match item {
            Item::Const(i) => (&i.vis, &i.ident),
            Item::Enum(i) => (&i.vis, &i.ident),
            Item::Fn(i) => (&i.vis, &i.sig.ident),
            Item::Mod(i) => (&i.vis, &i.ident),
            Item::Static(i) => (&i.vis, &i.ident),
            Item::Struct(i) => (&i.vis, &i.ident),
            Item::Trait(i) => (&i.vis, &i.ident),
            Item::TraitAlias(i) => (&i.vis, &i.ident),
            Item::Type(i) => (&i.vis, &i.ident),
            Item::Union(i) => (&i.vis, &i.ident),
            Item::Use(u) => {
                if matches!(u.vis, Visibility::Public(_)) {
                    let mut leaves = Vec::new();
                    use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                    for leaf in leaves.into_iter().filter(|l| !l.glob) {
                        if let Some(name) = leaf.rename.or_else(|| leaf.segments.last().cloned()) {
                            names.push(name);
                        }
                    }
                }
                continue;
            }
            _ => continue,
        };
        if matches!(vis, Visibility::Public(_)) {
            names.push(ident.to_string());
        }
    }
    names
}
