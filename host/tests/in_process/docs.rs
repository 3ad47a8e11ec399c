//! The README and docs/ link only to files that exist: a moved module, page or
//! script fails here, in `make check`, instead of in a reader's browser.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md and every page of docs/, each with its text.
fn pages() -> Vec<(PathBuf, String)> {
    let root = root();
    let mut pages = vec![root.join("README.md")];
    pages.extend(super::files_under(&root.join("docs"), "md"));
    assert!(pages.len() > 10, "the docs were not found: {} pages", pages.len());
    pages
        .into_iter()
        .map(|page| {
            let text = std::fs::read_to_string(&page).expect("read a page");
            (page, text)
        })
        .collect()
}

/// The inline code spans of `text` outside its fenced blocks (commands, code).
fn code_spans(text: &str) -> Vec<String> {
    let prose = text.split("```").step_by(2).collect::<Vec<_>>().join("\n");
    prose.split('`').skip(1).step_by(2).map(String::from).collect()
}

/// `page` as the failure messages name it: relative to the repository.
fn shown(page: &Path) -> String {
    let root = root();
    page.strip_prefix(&root).unwrap_or(page).display().to_string()
}

#[test]
fn every_relative_link_of_the_docs_names_a_file_that_exists() {
    let mut dead = Vec::new();
    for (page, text) in &pages() {
        // `[text](target)` or `[text](target#anchor)`; only relative targets.
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.contains(' ') {
                continue;
            }
            let dir = page.parent().expect("a page's directory");
            if !dir.join(target).exists() {
                dead.push(format!("{}: {target}", shown(page)));
            }
        }
    }
    assert!(dead.is_empty(), "links to files that do not exist:\n{}", dead.join("\n"));
}

/// The repository's top-level folders and files a docs path may start with (`target/`
/// and the caches are made by builds, not committed).
const TOP_LEVEL: &[&str] = &[
    "README.md",
    "Makefile",
    "Cargo.toml",
    "bench/",
    "charts/",
    "docs/",
    "go/",
    "hack/",
    "host/",
    "manifests/",
    "monitoring/",
    "node-sim/",
    "policy-fixtures/",
    "policy-sdk/",
    "test-support/",
    "typescript/",
    "wit/",
    "guest-",
];

/// What the tutorials make (`policy new widget`, `gadget`): paths in the reader's tree, not this one's.
const MADE_BY_TUTORIALS: &[&str] = &["widget", "gadget"];

#[test]
fn every_repository_path_the_docs_name_in_backticks_exists() {
    let root = root();
    let mut missing = Vec::new();
    let mut checked = 0;
    for (page, text) in &pages() {
        for span in code_spans(text) {
            // `host/src/x.rs:124`, `hack/test.sh --fast`: the path is the first word, without a line number.
            let word = span.split_whitespace().next().unwrap_or_default();
            let path = word.split(':').next().unwrap_or_default().trim_end_matches([',', '.']);
            let placeholder = path.contains(['<', '*', '{', '$'])
                || ["NAME", "..."].iter().chain(MADE_BY_TUTORIALS).any(|p| path.contains(p));
            if placeholder || !TOP_LEVEL.iter().any(|t| path.starts_with(t)) {
                continue;
            }
            checked += 1;
            if !root.join(path).exists() {
                missing.push(format!("{}: `{span}`", shown(page)));
            }
        }
    }
    assert!(checked > 50, "few repository paths were found in the docs: {checked}");
    assert!(missing.is_empty(), "the docs name paths that do not exist:\n{}", missing.join("\n"));
}

/// Whether `path` (`reconcile::status`, `in_wave`, `secrets::digest`) names a module of
/// the crate whose sources are `src`, or an item in one: its first segments a module
/// file, the rest, if any, a name that module's file (or the crate root) holds.
fn names_a_module(src: &Path, path: &str) -> bool {
    let segments: Vec<&str> = path.split("::").collect();
    let mut dir = src.to_path_buf();
    for (i, segment) in segments.iter().enumerate() {
        let (file, module) = (dir.join(format!("{segment}.rs")), dir.join(segment).join("mod.rs"));
        let found = [file, module].into_iter().find(|f| f.is_file());
        match found {
            Some(_) if i + 1 < segments.len() => dir = dir.join(segment),
            Some(_) => return true,
            // Not a module: an item (a function, a type, a constant) of the module before it.
            None => {
                let parent = if i == 0 { src.join("lib.rs") } else { dir.with_extension("rs") };
                let parent = if parent.is_file() { parent } else { dir.join("mod.rs") };
                let text = std::fs::read_to_string(parent).unwrap_or_default();
                return text.contains(segment);
            }
        }
    }
    true
}

#[test]
fn every_module_the_docs_name_exists() {
    let root = root();
    let src = root.join("host/src");
    let modules: Vec<String> = std::fs::read_dir(&src)
        .expect("host/src")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .map(|n| n.trim_end_matches(".rs").to_string())
        .filter(|n| !["main", "lib"].contains(&n.as_str()))
        .collect();
    // The operator's modules by their own names (`reconcile::status`), other crates by theirs.
    let crates = [("podset_host", root.join("host/src")), ("policy_sdk", root.join("policy-sdk/src"))];
    let (mut missing, mut checked) = (Vec::new(), 0);
    for (page, text) in &pages() {
        for span in code_spans(text) {
            let path = span.trim_start_matches("crate::").trim_end_matches("()");
            let rusty = path.contains("::") && path.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
            let (first, rest) = path.split_once("::").unwrap_or_default();
            let (src, path) = match crates.iter().find(|(name, _)| *name == first) {
                Some((_, dir)) => (dir, rest),
                None if modules.iter().any(|m| m == first) => (&src, path),
                None => continue,
            };
            if !rusty {
                continue;
            }
            checked += 1;
            if !names_a_module(src, path) {
                missing.push(format!("{}: `{span}`", shown(page)));
            }
        }
    }
    assert!(checked > 0, "no module paths were found in the docs");
    assert!(missing.is_empty(), "the docs name modules of host/src/ that do not exist:\n{}", missing.join("\n"));
}
