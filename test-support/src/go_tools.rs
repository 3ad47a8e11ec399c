//! The Go tools the tests run, built once from the Go module proxy and cached by
//! `hack/go-tool.sh` (kstatus, helm, peers); an environment variable may name a build to use
//! instead (`make test` sets them once the build is done).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use crate::cluster::workspace;

/// The path of `tool` (`kstatus`, `helm`; for `peers`, the directory of its binaries):
/// `$var` when set, else what `hack/go-tool.sh` finds or builds (seconds to minutes the
/// first time on a machine), asked once per test process.
pub fn go_tool(tool: &str, var: &str) -> PathBuf {
    static FOUND: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    let found = found.get_or_insert_with(HashMap::new);
    found.entry(tool.to_string()).or_insert_with(|| locate(tool, var)).clone()
}

fn locate(tool: &str, var: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(var) {
        return PathBuf::from(path);
    }
    let out = Command::new(workspace().join("hack/go-tool.sh"))
        .arg(tool)
        .stderr(Stdio::inherit())
        .output()
        .expect("hack/go-tool.sh runs");
    assert!(out.status.success(), "hack/go-tool.sh {tool} failed to build it");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}
