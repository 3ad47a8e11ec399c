//! Tests that need no cluster: the import layers, the docs' links, the sandbox on compiled policies,
//! the reconciler against an in-process API seam, and the policy's properties.

mod docs;
mod languages;
mod layers;
mod monitoring;
#[cfg(feature = "native-podset")]
mod policy_properties;
mod policy_sandbox;
mod reconcile_calls;
mod rollouts;
mod schemas;

use std::path::{Path, PathBuf};

/// Every file under `dir`, at any depth, whose extension is `ext`.
fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            out.extend(files_under(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    out
}
