//! The source tree's layers, checked, in both crates: every path to
//! another module of the crate in the library's code points to the same
//! layer or a lower one. The files are parsed (`syn`): test modules
//! (`#[cfg(test)]`, `#[cfg(all(test, …))]`, wherever they stand in the
//! file) are left out, and nothing else; `crate::`, `super::` and `self::`
//! paths are resolved against the module they are written in; paths in
//! macro calls are read from their tokens.
//!
//! This file is where the layer order is written; chronopool's `lib.rs`
//! and DESIGN.md point here. A layer may use any layer below it; cycles
//! stay inside a layer. So the task layer knows nothing of the pool that
//! runs its tasks (it sees it through `task::TaskContext`), and the timer
//! knows the pool only through `timer::driver::Workers`.

use std::fs;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// chronopool's layers, lowest first: each a list of top-level modules
/// (a file `src/<name>.rs` or a folder `src/<name>/`); `lib` is the root.
const CORE: &[(&str, &[&str])] = &[
    ("sync", &["sync"]),
    ("time", &["time"]),
    ("trigger", &["trigger"]),
    ("task", &["task"]),
    ("timer", &["timer"]),
    ("pool", &["pool"]),
    (
        "handles",
        &["handle", "future", "pending", "current", "busy"],
    ),
    (
        "api",
        &[
            "lib",
            "executor",
            "builder",
            "error",
            "task_builder",
            "bench_internals",
            "submission",
        ],
    ),
];

/// chronopool-durable's layers, lowest first.
const DURABLE: &[(&str, &[&str])] = &[
    ("base", &["time", "error", "owner"]),
    ("schedule", &["schedule"]),
    ("store", &["store"]),
    (
        "model",
        &["job", "completion", "config", "metrics", "spawn", "listing"],
    ),
    ("engine", &["engine"]),
    ("api", &["lib", "scheduler", "typed", "control"]),
];

/// The rank of the layer that holds top-level module `module`.
fn rank(layers: &[(&str, &[&str])], module: &str) -> Option<usize> {
    layers
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read a source folder") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The module path of a file under `src/` (`timer/driver/mod.rs` is
/// `timer::driver`, `lib.rs` the root).
fn module_of(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
        path.pop();
    }
    path
}

/// True for an attribute that makes its item exist only in tests:
/// `#[cfg(test)]`, or `#[cfg(all(…))]` with `test` among its terms.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if !attr.path().is_ident("cfg") {
            return false;
        }
        let Ok(meta) = attr.parse_args::<syn::Meta>() else {
            return false;
        };
        match &meta {
            syn::Meta::Path(path) => path.is_ident("test"),
            syn::Meta::List(list) if list.path.is_ident("all") => {
                let terms = list.parse_args_with(
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
                );
                terms.is_ok_and(|terms| terms.iter().any(|t| t.path().is_ident("test")))
            }
            _ => false,
        }
    })
}

/// The item's attributes, for the kinds that can carry a test `cfg`.
fn attrs_of(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Collects the crate modules that library code names, resolved to the
/// top-level module (or `lib`, the root), with the module it is written
/// in (for `super::` and `self::`).
struct Names {
    /// The module the visitor is in (the file's, plus inline modules).
    module: Vec<String>,
    /// The root's re-exports: a name `lib.rs` brings in with `pub use`,
    /// and the top-level module it comes from (`crate::TaskId` is
    /// `task`'s, not the root's).
    reexports: Vec<(String, String)>,
    /// (top-level module named, the path as written)
    found: Vec<(String, String)>,
}

impl Names {
    /// Records a path given as its segments, if it names a module of the
    /// crate.
    fn path(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else {
            return;
        };
        let mut at: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "super" | "self" => self.module.clone(),
            _ => return,
        };
        let mut rest = &segments[1..];
        if first == "super" {
            at.pop();
        }
        while rest.first().is_some_and(|s| s == "super") {
            at.pop();
            rest = &rest[1..];
        }
        // The top-level module: the first left of where the path starts,
        // else the first it names (`*` and `self` at the root name it).
        let top = at
            .first()
            .cloned()
            .or_else(|| rest.first().filter(|s| *s != "*" && *s != "self").cloned())
            .unwrap_or_else(|| "lib".into());
        let top = match self.reexports.iter().find(|(name, _)| *name == top) {
            Some((_, from)) if at.is_empty() => from.clone(),
            _ => top,
        };
        self.found.push((top, segments.join("::")));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.path(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.path(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => {
                prefix.push("*".into());
                self.path(prefix);
                prefix.pop();
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if test_only(attrs_of(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs[..],
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        if !test_only(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        let attrs = match item {
            syn::TraitItem::Const(i) => &i.attrs[..],
            syn::TraitItem::Fn(i) => &i.attrs,
            syn::TraitItem::Type(i) => &i.attrs,
            syn::TraitItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        if !test_only(attrs) {
            syn::visit::visit_trait_item(self, item);
        }
    }

    /// `pub(crate)` and `pub(super)` say who may see an item, not what it
    /// uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        // An inline module: its paths are relative to it. (A `mod x;`
        // is its own file, read on its own.)
        if module.content.is_some() {
            self.module.push(module.ident.to_string());
            syn::visit::visit_item_mod(self, module);
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.path(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        // The tokens of a macro call are not parsed: `crate :: a :: b`
        // sequences in them are read as paths.
        let tokens: Vec<String> = mac.tokens.clone().into_iter().flat_map(flatten).collect();
        for (i, token) in tokens.iter().enumerate() {
            if matches!(token.as_str(), "crate" | "super" | "self") {
                let mut segments = vec![token.clone()];
                let mut j = i + 1;
                while tokens.get(j).is_some_and(|t| t == ":")
                    && tokens.get(j + 1).is_some_and(|t| t == ":")
                {
                    match tokens.get(j + 2) {
                        Some(next) if next.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                            segments.push(next.clone());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if segments.len() > 1 {
                    self.path(&segments);
                }
            }
        }
    }
}

/// The tokens of a stream, groups opened, as strings.
fn flatten(tree: proc_macro2::TokenTree) -> Vec<String> {
    match tree {
        proc_macro2::TokenTree::Group(group) => {
            group.stream().into_iter().flat_map(flatten).collect()
        }
        other => vec![other.to_string()],
    }
}

/// The names `lib.rs` re-exports with `pub use module::…::Name`, and the
/// module each comes from.
fn reexports(lib: &syn::File) -> Vec<(String, String)> {
    fn walk(tree: &syn::UseTree, from: Option<&str>, into: &mut Vec<(String, String)>) {
        match tree {
            syn::UseTree::Path(p) => {
                let ident = p.ident.to_string();
                walk(&p.tree, Some(from.unwrap_or(&ident)), into);
            }
            syn::UseTree::Name(n) => {
                if let Some(from) = from {
                    into.push((n.ident.to_string(), from.to_owned()));
                }
            }
            syn::UseTree::Rename(r) => {
                if let Some(from) = from {
                    into.push((r.rename.to_string(), from.to_owned()));
                }
            }
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| walk(t, from, into)),
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut found = Vec::new();
    for item in &lib.items {
        if let syn::Item::Use(u) = item {
            if matches!(u.vis, syn::Visibility::Public(_)) {
                walk(&u.tree, None, &mut found);
            }
        }
    }
    found
}

/// How many library files were read, and the upward paths in them, for the
/// crate whose sources are in `src`, with `layers` lowest first.
fn upward(src: &Path, layers: &[(&str, &[&str])]) -> (usize, Vec<String>) {
    let mut files = Vec::new();
    sources(src, &mut files);
    let lib = fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let reexports = reexports(&syn::parse_file(&lib).expect("parse lib.rs"));
    let parsed: Vec<(PathBuf, Vec<String>, syn::File)> = files
        .iter()
        .map(|file| {
            let relative = file.strip_prefix(src).expect("under src/").to_path_buf();
            let text = fs::read_to_string(file).expect("read a source file");
            let parsed =
                syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", relative.display()));
            (relative.clone(), module_of(&relative), parsed)
        })
        .collect();
    // A module declared test-only (`#[cfg(all(test, loom))] mod loom_model;`)
    // is tests, whatever files it spans: they are left out with it.
    let tests: Vec<Vec<String>> = parsed
        .iter()
        .flat_map(|(_, module, file)| {
            file.items.iter().filter_map(move |item| match item {
                syn::Item::Mod(m) if m.content.is_none() && test_only(&m.attrs) => {
                    let mut path = module.clone();
                    path.push(m.ident.to_string());
                    Some(path)
                }
                _ => None,
            })
        })
        .collect();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (relative, module, parsed) in parsed {
        if tests.iter().any(|t| module.starts_with(t)) {
            continue;
        }
        checked += 1;
        let relative = relative.as_path();
        let top = module.first().cloned().unwrap_or_else(|| "lib".into());
        let from = rank(layers, &top)
            .unwrap_or_else(|| panic!("{}: {top} is in no layer", relative.display()));
        let mut names = Names {
            module,
            reexports: reexports.clone(),
            found: Vec::new(),
        };
        for item in &parsed.items {
            names.visit_item(item);
        }
        for (to_module, written) in names.found {
            let Some(to) = rank(layers, &to_module) else {
                wrong.push(format!(
                    "{}: {written}: {to_module} is in no layer",
                    relative.display()
                ));
                continue;
            };
            if to > from {
                wrong.push(format!(
                    "{} ({}) uses {written} ({})",
                    relative.display(),
                    layers[from].0,
                    layers[to].0
                ));
            }
        }
    }
    (checked, wrong)
}

fn check(src: &Path, layers: &[(&str, &[&str])], at_least: usize) {
    let (files, wrong) = upward(src, layers);
    assert!(
        files >= at_least,
        "found {files} sources in {}",
        src.display()
    );
    assert!(
        wrong.is_empty(),
        "imports that point up:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_path_in_chronopool_points_to_the_same_layer_or_a_lower_one() {
    check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), CORE, 60);
}

#[test]
fn every_path_in_chronopool_durable_points_to_the_same_layer_or_a_lower_one() {
    check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("durable/src"),
        DURABLE,
        15,
    );
}

/// The guard sees what the text-based one missed: an upward path in a file
/// whose test module comes first, one through `super::`, one in a macro
/// call, and one in an inline module.
#[test]
fn the_guard_finds_upward_paths_wherever_they_stand() {
    let planted = [
        // A test module first, library code after it.
        "#[cfg(test)]\nmod tests { use crate::pool::Pool; }\nfn f() { let _ = crate::pool::x(); }",
        // Through `super::`, from `timer/driver/wall.rs`.
        "use super::super::super::pool::Pool;",
        // In a macro call.
        "fn f() { println!(\"{}\", crate::pool::x()); }",
        // In an inline module.
        "mod inner { fn f() { super::super::super::super::pool::x(); } }",
    ];
    for text in planted {
        let parsed = syn::parse_file(text).unwrap();
        let mut names = Names {
            module: vec!["timer".into(), "driver".into(), "wall".into()],
            reexports: Vec::new(),
            found: Vec::new(),
        };
        for item in &parsed.items {
            names.visit_item(item);
        }
        let tops: Vec<&str> = names.found.iter().map(|(top, _)| top.as_str()).collect();
        assert!(tops.contains(&"pool"), "{text}: found {tops:?}");
        assert!(rank(CORE, "pool") > rank(CORE, "timer"));
    }
    // And test modules are left out, wherever they stand.
    let parsed = syn::parse_file(
        "#[cfg(all(test, loom))]\nmod loom_model { use crate::pool::Pool; }\nfn f() {}",
    )
    .unwrap();
    let mut names = Names {
        module: vec!["timer".into()],
        reexports: Vec::new(),
        found: Vec::new(),
    };
    for item in &parsed.items {
        names.visit_item(item);
    }
    assert!(names.found.is_empty(), "{:?}", names.found);
}
