//! The README and docs/ link only to files that exist: a moved module, page or
//! script fails here, in `make check`, instead of in a reader's browser.

use std::path::Path;

#[test]
fn every_relative_link_of_the_docs_names_a_file_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![root.join("README.md")];
    pages.extend(super::files_under(&root.join("docs"), "md"));
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
