//! The host's modules stand on floors, and imports only point down:
//!
//! ```text
//! main → operator, author, reference → config → sources → reconcile → registry, scenario
//!      → kubernetes, sandbox, oci → contract, signature → crd, metrics, conditions, heap
//! ```
//!
//! This test reads every file under `host/src` with `syn`, resolves each path that
//! starts with `crate::`, `super::`, `self::` or a child module to the file that
//! defines what it names (following `pub use` re-exports), and fails on an import
//! that runs up or sideways, on a circle between files, and on a module with no floor.
//! Test modules count too: a unit test that reaches up is an import that runs up.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use syn::visit::Visit;

/// Top-level modules, highest floor first; a module may import only from floors
/// below its own (or from itself).
const FLOORS: &[&[&str]] = &[
    &["operator", "author", "reference"],
    &["config"],
    &["sources"],
    &["reconcile"],
    &["registry", "scenario"],
    &["kubernetes", "sandbox", "oci"],
    &["contract", "signature"],
    &["crd", "metrics", "conditions", "heap"],
];

type Module = Vec<String>;

fn floor(module: &Module) -> Option<usize> {
    let top = module.first()?;
    FLOORS.iter().position(|floor| floor.contains(&top.as_str()))
}

fn name(module: &Module) -> String {
    if module.is_empty() { "crate".to_string() } else { module.join("::") }
}

/// One source file: the module it is, what it defines and re-exports, what it names.
#[derive(Default)]
struct File {
    /// Names a `pub use` binds here, to the absolute path it names (empty: another
    /// crate's).
    reexports: HashMap<String, Vec<String>>,
    /// Every path this file names, made absolute.
    references: Vec<Vec<String>>,
}

struct Tree {
    files: BTreeMap<Module, File>,
}

impl Tree {
    fn read(src: &Path) -> Tree {
        let paths = super::files_under(src, "rs");
        let modules: BTreeSet<Module> = paths.iter().filter_map(|p| module_of(src, p)).collect();
        let mut files = BTreeMap::new();
        for path in &paths {
            let Some(module) = module_of(src, path) else { continue };
            let text = std::fs::read_to_string(path).expect("read a source file");
            let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut reader =
                Reader { modules: &modules, module: module.clone(), inline: Vec::new(), file: File::default() };
            for item in &ast.items {
                if let syn::Item::Use(u) = item
                    && !matches!(u.vis, syn::Visibility::Inherited)
                {
                    let mut bound = Vec::new();
                    flatten(&u.tree, Vec::new(), &mut bound);
                    for (prefix, alias) in bound {
                        // Another crate's item, re-exported, names no file here.
                        let target = reader.absolute(&prefix).unwrap_or_default();
                        if let Some(alias) = alias {
                            reader.file.reexports.insert(alias, target);
                        }
                    }
                }
            }
            reader.visit_file(&ast);
            files.insert(module, reader.file);
        }
        Tree { files }
    }

    /// The file that defines what `path` names.
    fn resolve(&self, path: &[String], depth: usize) -> Module {
        let mut module: Module = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            let mut child = module.clone();
            child.push(segment.clone());
            if self.files.contains_key(&child) {
                module = child;
                continue;
            }
            if depth < 8
                && let Some(target) = self.files.get(&module).and_then(|f| f.reexports.get(segment))
            {
                let mut rest = target.clone();
                rest.extend(path[i + 1..].iter().cloned());
                return self.resolve(&rest, depth + 1);
            }
            return module;
        }
        module
    }

    /// File → files it imports from.
    fn edges(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (module, file) in &self.files {
            for reference in &file.references {
                let to = self.resolve(reference, 0);
                if &to != module && !to.is_empty() {
                    edges.entry(module.clone()).or_default().insert(to);
                }
            }
        }
        edges
    }
}

/// `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` is the crate; `main.rs` is the binary
/// on top of everything, so it is not read.
fn module_of(src: &Path, path: &Path) -> Option<Module> {
    let rel = path.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    match (parts.is_empty(), stem) {
        (true, "main") => None,
        (true, "lib") => Some(Vec::new()),
        (_, "mod") => Some(parts),
        _ => {
            parts.push(stem.to_string());
            Some(parts)
        }
    }
}

/// The paths a use tree names, each with the name it binds (`None` for a glob).
fn flatten(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut prefix = prefix;
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                let alias = prefix.last().cloned();
                out.push((prefix, alias));
            } else {
                let mut path = prefix;
                path.push(name.clone());
                out.push((path, Some(name)));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix, None)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten(t, prefix.clone(), out);
            }
        }
    }
}

struct Reader<'a> {
    modules: &'a BTreeSet<Module>,
    module: Module,
    /// Inline modules (`mod tests { … }`) entered in this file.
    inline: Vec<String>,
    file: File,
}

impl Reader<'_> {
    /// `path` made absolute, when it names something of this crate.
    fn absolute(&self, path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut inline = self.inline.len();
        let mut base = self.module.clone();
        let mut rest = path;
        match first.as_str() {
            "crate" => return Some(path[1..].to_vec()),
            "self" => rest = &path[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    if inline > 0 {
                        inline -= 1;
                    } else {
                        base.pop()?;
                    }
                    rest = &rest[1..];
                }
            }
            _ => {
                // A child module named without `self::` (only from the file's own level).
                let mut child = base.clone();
                child.push(first.clone());
                if inline > 0 || !self.modules.contains(&child) {
                    return None;
                }
            }
        }
        let mut abs = base;
        abs.extend(rest.iter().cloned());
        Some(abs)
    }

    fn reference(&mut self, path: &[String]) {
        if let Some(abs) = self.absolute(path) {
            self.file.references.push(abs);
        }
    }
}

impl<'ast> Visit<'ast> for Reader<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.inline.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.inline.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        flatten(&u.tree, Vec::new(), &mut paths);
        for (path, _) in paths {
            self.reference(&path);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.reference(&segments);
        }
        syn::visit::visit_path(self, p);
    }
}

/// Files that import each other, directly or round a loop (Tarjan's components).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: HashMap<&'a Module, usize>,
        low: HashMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn imports_point_down_and_make_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let tree = Tree::read(&src);
    let edges = tree.edges();

    let mut problems = String::new();
    for module in tree.files.keys().filter(|m| !m.is_empty()) {
        if floor(module).is_none() {
            writeln!(problems, "{} stands on no floor: add its top module to FLOORS", name(module)).unwrap();
        }
    }
    let mut arrows = 0;
    for (from, tos) in &edges {
        for to in tos {
            if from.is_empty() || from.first() == to.first() {
                continue;
            }
            arrows += 1;
            if let (Some(a), Some(b)) = (floor(from), floor(to))
                && b <= a
            {
                let how = if a == b { "sideways" } else { "up" };
                writeln!(problems, "{} imports {} ({how})", name(from), name(to)).unwrap();
            }
        }
    }
    let circles = circles(&edges);
    for c in &circles {
        let names: Vec<String> = c.iter().map(name).collect();
        writeln!(problems, "circle: {}", names.join(" ↔ ")).unwrap();
    }
    println!(
        "{} files on {} floors, {arrows} imports between top modules, {} circles",
        tree.files.len(),
        FLOORS.len() + 1,
        circles.len()
    );
    assert!(problems.is_empty(), "the layers do not point one way:\n{problems}");
}
