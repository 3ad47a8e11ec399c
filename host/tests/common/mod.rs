//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// Where `hack/policy.sh --fixtures` put the compiled policies. The tests need the
/// real .wasm: missing files fail the test with instructions, never skip it.
pub fn policy_dir() -> PathBuf {
    let dir = std::env::var_os("PODSET_POLICY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/policy"));
    assert!(
        dir.join("podset.wasm").is_file() && dir.join("fixtures").is_dir(),
        "compiled policies not found in {}: run `make fixtures` (or `make test`)",
        dir.display()
    );
    dir
}

pub fn read_policy(name: &str) -> Vec<u8> {
    let path = policy_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}
