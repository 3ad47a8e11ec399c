//! The README and docs/ link only to files that exist: a moved module, page or
//! script fails here, in `make check`, instead of in a reader's browser.

use std::path::{Path, PathBuf};

fn markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read docs/") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            markdown(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

#[test]
fn every_relative_link_of_the_docs_names_a_file_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![root.join("README.md")];
    markdown(&root.join("docs"), &mut pages);
    let mut dead = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("read a page");
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
                dead.push(format!("{}: {target}", page.strip_prefix(&root).unwrap_or(page).display()));
            }
        }
    }
    assert!(pages.len() > 10, "the docs were not found: {} pages", pages.len());
    assert!(dead.is_empty(), "links to files that do not exist:\n{}", dead.join("\n"));
}
