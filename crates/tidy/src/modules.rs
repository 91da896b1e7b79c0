//! A library's module tree, parsed: from `lib.rs` through every `mod` declaration (inline or in
//! its own file, `#[path]` included), the way the compiler finds the files.
//!
//! Items under `#[cfg(test)]` (or `#[cfg(all(test, ..))]`) are left out: they are not part of
//! the library. Other `cfg`s are kept, whatever the platform or features. A file brought in by
//! `include!` is not seen.

use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::{Attribute, Item, Meta, Token, Visibility};

use crate::{TidyError, line_of};

/// One module of a library.
pub(crate) struct Module {
    /// Names from the crate root (empty for the root).
    pub(crate) path: Vec<String>,
    /// The file its items are in.
    pub(crate) file: PathBuf,
    /// Its items, without `#[cfg(test)]` ones (child modules' items are in their own entries).
    pub(crate) items: Vec<Item>,
    /// Whether every module from the root down to this one is `pub`, so its public items are
    /// public under this module's path.
    pub(crate) public: bool,
    /// Index of the parent module (`None` for the root).
    pub(crate) parent: Option<usize>,
    /// Child modules: name, index, and whether the declaration is `pub`.
    pub(crate) children: Vec<(String, usize, bool)>,
}

impl Module {
    /// `crate::a::b` for messages.
    pub(crate) fn display_path(&self) -> String {
        std::iter::once("crate").chain(self.path.iter().map(String::as_str)).collect::<Vec<_>>().join("::")
    }

    /// The child module called `name`: its index and whether it is declared `pub`.
    pub(crate) fn child(&self, name: &str) -> Option<(usize, bool)> {
        self.children.iter().find(|(n, _, _)| n == name).map(|&(_, index, public)| (index, public))
    }
}

/// Reads and parses one file.
pub(crate) fn parse_file(path: &Path) -> Result<syn::File, TidyError> {
    let text = std::fs::read_to_string(path).map_err(|source| TidyError::Read { path: path.to_owned(), source })?;
    syn::parse_file(&text).map_err(|e| TidyError::Parse {
        file: path.to_owned(),
        line: line_of(e.span()),
        message: e.to_string(),
    })
}

/// Every module of the library whose root is `lib`, the root first.
pub(crate) fn load(lib: &Path) -> Result<Vec<Module>, TidyError> {
    let file = parse_file(lib)?;
    let dir = lib.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut modules = Vec::new();
    let place = Place { file: lib.to_owned(), children_dir: dir.clone(), path_attr_dir: dir };
    add(&mut modules, Vec::new(), place, file.items, true, None)?;
    Ok(modules)
}

/// Where a module's items live and where its `mod name;` declarations look for files.
struct Place {
    file: PathBuf,
    /// `name.rs` / `name/mod.rs` of child modules are looked for here.
    children_dir: PathBuf,
    /// `#[path = ".."]` of child modules is relative to this.
    path_attr_dir: PathBuf,
}

fn add(
    modules: &mut Vec<Module>,
    path: Vec<String>,
    place: Place,
    items: Vec<Item>,
    public: bool,
    parent: Option<usize>,
) -> Result<usize, TidyError> {
    let index = modules.len();
    let items: Vec<Item> = items.into_iter().filter(|item| !is_test_only(item_attrs(item))).collect();
    modules.push(Module {
        path: path.clone(),
        file: place.file.clone(),
        items: Vec::new(),
        public,
        parent,
        children: Vec::new(),
    });
    let mut children = Vec::new();
    for item in &items {
        let Item::Mod(m) = item else { continue };
        let name = m.ident.to_string();
        let is_pub = matches!(m.vis, Visibility::Public(_));
        let mut child_path = path.clone();
        child_path.push(name.clone());
        let (child_place, child_items) = match &m.content {
            Some((_, inner)) => {
                // An inline module's files live in a directory named after it, and so do the
                // targets of its `#[path]` attributes.
                let dir = place.children_dir.join(&name);
                (Place { file: place.file.clone(), children_dir: dir.clone(), path_attr_dir: dir }, inner.clone())
            }
            None => {
                let file = module_file(&place, m)?;
                let parsed = parse_file(&file)?;
                // `name.rs` and `name/mod.rs` both keep their children in `name/`; a file given
                // by `#[path]` is treated like a `mod.rs`.
                let children_dir = if path_attr(&m.attrs).is_some() {
                    file.parent().unwrap_or(Path::new(".")).to_path_buf()
                } else {
                    place.children_dir.join(&name)
                };
                let path_attr_dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
                (Place { file, children_dir, path_attr_dir }, parsed.items)
            }
        };
        let child = add(modules, child_path, child_place, child_items, public && is_pub, Some(index))?;
        children.push((name, child, is_pub));
    }
    modules[index].items = items;
    modules[index].children = children;
    Ok(index)
}

fn module_file(place: &Place, m: &syn::ItemMod) -> Result<PathBuf, TidyError> {
    let name = m.ident.to_string();
    let candidates = match path_attr(&m.attrs) {
        Some(p) => vec![place.path_attr_dir.join(p)],
        None => vec![place.children_dir.join(format!("{name}.rs")), place.children_dir.join(&name).join("mod.rs")],
    };
    match candidates.iter().find(|c| c.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(TidyError::ModuleFile {
            file: place.file.clone(),
            line: line_of(m.ident.span()),
            name,
            looked_for: candidates.iter().map(|c| c.display().to_string()).collect(),
        }),
    }
}

/// The value of a `#[path = "..."]` attribute.
fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Whether the attributes compile the item only for tests: `#[cfg(test)]`, or `#[cfg(all(..))]`
/// with `test` among its conditions.
pub(crate) fn is_test_only(attrs: &[Attribute]) -> bool {
    fn test_only(meta: &Meta) -> bool {
        match meta {
            Meta::Path(p) => p.is_ident("test"),
            Meta::List(list) if list.path.is_ident("all") => list
                .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                .is_ok_and(|conditions| conditions.iter().any(test_only)),
            _ => false,
        }
    }
    attrs.iter().any(|attr| attr.path().is_ident("cfg") && attr.parse_args::<Meta>().is_ok_and(|m| test_only(&m)))
}

/// The attributes of any item.
pub(crate) fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}
