//! The default policy from a file, reloaded when it changes: in-place writes, atomic
//! renames (`mv new.wasm podset.wasm`), and ConfigMap volume updates, where the kubelet
//! swaps a `..data` symlink and the file's own name never sees an event.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::requeue_matching;
use crate::crd::PodSet;
use crate::policy::Digest;
use crate::reconcile::Context;

/// Quiet time after the last change before reloading: a build writes the file in
/// several steps, and loading a half-written module would only produce an error.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

pub async fn watch(
    path: PathBuf,
    ctx: Arc<Context>,
    requeue: UnboundedSender<ObjectRef<PodSet>>,
    stop: CancellationToken,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Watch the directory, not the file: an atomic rename replaces the file's inode,
    // and a ConfigMap volume changes only its `..data` symlink. Any change in the
    // directory triggers a read; an unchanged digest makes it a no-op.
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let mut watcher = match notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.is_ok_and(|ev| !ev.kind.is_access()) {
            let _ = tx.send(());
        }
    }) {
        Ok(w) => w,
        Err(e) => {
            error!("cannot watch policy file {}: {e}; hot reload is off", path.display());
            return;
        }
    };
    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
        error!("cannot watch {}: {e}; hot reload is off", dir.display());
        return;
    }
    info!(file = %path.display(), "watching the default policy for changes");
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            got = rx.recv() => if got.is_none() { return },
        }
        // Debounce: wait until the file has been quiet for DEBOUNCE.
        loop {
            tokio::select! {
                _ = tokio::time::sleep(DEBOUNCE) => break,
                got = rx.recv() => if got.is_none() { return },
            }
        }
        reload(&path, &ctx, &requeue).await;
    }
}

async fn reload(path: &Path, ctx: &Context, requeue: &UnboundedSender<ObjectRef<PodSet>>) {
    let started = Instant::now();
    let bytes = match tokio::fs::read(path).await {
        Ok(b) => b,
        // Mid-rename or deleted: the next event brings it back; keep serving.
        Err(e) => {
            warn!(file = %path.display(), "policy file unreadable ({e}); still serving the loaded policy");
            return;
        }
    };
    let Context { engine, policies, metrics, .. } = ctx;
    let current = policies.default_policy();
    if current.as_ref().is_some_and(|p| *p.digest() == Digest::of(&bytes)) {
        return;
    }
    match engine.load_async(bytes).await {
        Ok(policy) => {
            metrics.policy_loaded("file", true);
            let old = policies.set_default(policy.clone());
            let n = requeue_matching(ctx, requeue, |ps| ps.spec.policy_ref.is_none());
            info!(
                policy = %policy.label(),
                replaced = old.as_ref().map(|p| p.label()).unwrap_or("none"),
                podsets = n,
                took = ?started.elapsed(),
                "default policy swapped"
            );
        }
        Err(e) => {
            metrics.policy_loaded("file", false);
            error!(
                file = %path.display(),
                still_serving = current.as_ref().map(|p| p.label()).unwrap_or("none"),
                reason = e.reason(),
                "policy update rejected: {e}"
            );
        }
    }
}
