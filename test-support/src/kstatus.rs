//! What GitOps tools read of an object's health, computed by the tool they use:
//! `sigs.k8s.io/cli-utils`' `status.Compute` (Flux, kpt), built once from the Go
//! module proxy by `hack/go-tool.sh kstatus` (`PODSET_KSTATUS` names a build to use instead).

use std::io::Write;
use std::process::{Command, Stdio};

/// A kstatus verdict: `InProgress`, `Current`, `Failed`, `Terminating`, …, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: String,
    pub message: String,
}

/// kstatus of `object` (its JSON as the API server returns it).
pub fn of_json(object: &str) -> Verdict {
    let helper = crate::go_tools::go_tool("kstatus", "PODSET_KSTATUS");
    let mut child = Command::new(&helper)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", helper.display()));
    child.stdin.take().expect("stdin").write_all(object.as_bytes()).expect("writing to kstatus");
    let out = child.wait_with_output().expect("kstatus ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "kstatus: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("kstatus said {stdout:?}: {e}"));
    Verdict {
        status: v["status"].as_str().unwrap_or_default().to_string(),
        message: v["message"].as_str().unwrap_or_default().to_string(),
    }
}

/// kstatus of `object`, a kube object as the API server returned it.
pub fn of<K: serde::Serialize>(object: &K) -> Verdict {
    of_json(&serde_json::to_string(object).expect("a kube object serializes"))
}

/// Waits until `get` returns an object that kstatus reads as `status`; returns what it said.
pub async fn reads<K, F, Fut>(what: &str, status: &str, timeout: std::time::Duration, mut get: F) -> Verdict
where
    K: serde::Serialize,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<K>>,
{
    let last = std::sync::Mutex::new(None);
    let found = crate::poll::within(timeout, || {
        let (fetched, last) = (get(), &last);
        async move {
            let v = of(&fetched.await?);
            let hit = (v.status == status).then(|| v.clone());
            *last.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
            hit
        }
    })
    .await;
    let last = last.into_inner().unwrap_or_else(|e| e.into_inner());
    found.unwrap_or_else(|| panic!("{what} did not read {status} in {timeout:?}; last: {last:?}"))
}
