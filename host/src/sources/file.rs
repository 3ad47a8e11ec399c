//! Default policies from files, one per parent kind, and shadows from files
//! (`--shadow`, one per kind, deciding beside the live policies), reloaded when they change:
//! in-place writes, atomic renames (`mv new.wasm podset.wasm`), and ConfigMap volume
//! updates, where the kubelet swaps a `..data` symlink and the file's own name never
//! sees an event.
//!
//! A "file" may also be `oci://REFERENCE`, a module in a registry ([`super::image`]):
//! it is resolved again every `--registry-poll`, and a new digest swaps in as a changed
//! file does. With `--require-signatures`, a file's module loads only with a detached
//! signature beside it (`FILE.sig`) that a trusted key verifies.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::Sources;
use super::image::{self, Request};
use super::{admit, decides, swapped};
use crate::contract::declarations::kind_name;
use crate::crd::PolicyMode;
use crate::registry::Admitted;
use crate::sandbox::Digest;

/// Quiet time after the last change before reloading: a build writes the file in
/// several steps, and loading a half-written module would only produce an error.
/// A file renamed into place (`mv`, a ConfigMap's `..data`) is whole when it is seen
/// and is reloaded at once.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// What a file event in a watched directory says about the policy files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// A policy file (or the `..data` of a ConfigMap volume) was renamed into place:
    /// the rename is atomic, so the new file is whole.
    Replaced,
    /// Anything else touching a policy file: it may still be being written.
    Written,
}

/// The file names whose events concern the policies in `paths`: each file, its
/// detached signature, and a ConfigMap volume's `..data`.
fn concerned_names(paths: &[(PathBuf, PolicyMode)]) -> BTreeSet<std::ffi::OsString> {
    let mut names = BTreeSet::from([std::ffi::OsString::from("..data")]);
    for (p, _) in paths.iter().filter(|(p, _)| reference_of(p).is_none()) {
        for file in [p.clone(), signature_path(p)] {
            names.extend(file.file_name().map(|n| n.to_os_string()));
        }
    }
    names
}

/// What `ev` changes for the policy files named `names`; `None` when it does not
/// concern them (a build's temporary file, a read).
fn classify(ev: &notify::Event, names: &BTreeSet<std::ffi::OsString>) -> Option<Change> {
    use notify::event::{EventKind, ModifyKind, RenameMode};
    let concerns = |p: &PathBuf| p.file_name().is_some_and(|n| names.contains(n));
    if ev.kind.is_access() || !ev.paths.iter().any(concerns) {
        return None;
    }
    // Both carries [from, to]; To carries [to].
    let renamed_to = match ev.kind {
        EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both)) => ev.paths.last(),
        _ => None,
    };
    Some(if renamed_to.is_some_and(concerns) { Change::Replaced } else { Change::Written })
}

/// How often a policy whose kinds are not served yet (a CRD not installed) or whose
/// admission hit an API error is tried again.
pub const RETRY: Duration = Duration::from_secs(5);

/// Why a file's policy is not serving.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("loading {path}: {source}")]
    Load { path: PathBuf, source: crate::sandbox::Error },
    #[error("admitting {path}: {source}")]
    Access { path: PathBuf, source: crate::kubernetes::access::AccessError },
    #[error("{path} serves {kind}, which {other} already serves: one default policy per kind")]
    Duplicate { path: PathBuf, kind: String, other: PathBuf },
    #[error("{path} shadows {kind}, which {other} already shadows: one --shadow per kind")]
    DuplicateShadow { path: PathBuf, kind: String, other: PathBuf },
    #[error("pulling {reference}: {source}")]
    Image { reference: String, source: crate::oci::Error },
    #[error("{path}: {source}")]
    Signature { path: PathBuf, source: crate::signature::Error },
}

impl FileError {
    /// Worth trying again without the file changing.
    pub fn is_retryable(&self) -> bool {
        match self {
            FileError::Access { source, .. } => source.is_retryable(),
            FileError::Image { source, .. } => source.is_retryable(),
            _ => false,
        }
    }
}

/// The registry reference of an `oci://` policy "path".
pub fn reference_of(path: &Path) -> Option<&str> {
    path.to_str().and_then(|s| s.strip_prefix("oci://"))
}

/// `FILE.sig`: where a module file's detached signature lives.
pub fn signature_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

/// The module's bytes, and what a registry gave with them.
async fn fetch(src: &Sources, path: &Path) -> Result<(Vec<u8>, Option<image::Fetched>), FileError> {
    if let Some(reference) = reference_of(path) {
        let request = Request { reference, resolved: None, credentials: &Default::default(), ca: &[] };
        let fetched = image::fetch(src, &request)
            .await
            .map_err(|source| FileError::Image { reference: reference.to_string(), source })?;
        let digest = &fetched.pulled.manifest_digest;
        match &fetched.from_cache {
            Some(e) if src.registry_down.lock().insert(reference.to_string()) => {
                warn!(reference, %digest, "{e}; the cached module serves");
            }
            Some(e) => tracing::debug!(reference, %digest, "{e}; the cached module serves"),
            None if src.registry_down.lock().remove(reference) => info!(reference, %digest, "registry reachable again"),
            None => {}
        }
        return Ok((fetched.pulled.module.clone(), Some(fetched)));
    }
    let bytes = tokio::fs::read(path).await.map_err(|source| FileError::Read { path: path.into(), source })?;
    if src.trust.required {
        let sig_path = signature_path(path);
        let sig = tokio::fs::read(&sig_path).await.ok();
        src.trust
            .verify_blob(&bytes, sig.as_deref(), &sig_path.display().to_string())
            .map_err(|source| FileError::Signature { path: path.into(), source })?;
    }
    Ok((bytes, None))
}

/// Loads `path` and serves it in `mode` unless it is what already serves. Returns
/// what it swapped in; the controllers catch up with [`swapped`].
pub async fn load(src: &Arc<Sources>, path: &Path, mode: PolicyMode) -> Result<Option<Arc<Admitted>>, FileError> {
    let started = Instant::now();
    let (bytes, fetched) = fetch(src, path).await?;
    let current = src.ctx.registry.file_policy(path);
    if current.as_ref().is_some_and(|a| *a.policy.digest() == Digest::of(&bytes)) {
        return Ok(None);
    }
    let policy =
        src.ctx.engine.load_async(bytes).await.map_err(|source| FileError::Load { path: path.into(), source })?;
    let reach = src.reaches.get(&policy.info().name).cloned().unwrap_or_default();
    let admitted = Arc::new(
        admit(&src.ctx, policy, &reach, None)
            .await
            .map_err(|source| FileError::Access { path: path.into(), source })?,
    );
    let kind = admitted.parent_kind();
    if let Some(other) = src.ctx.registry.file_serving(&kind, mode, path) {
        let (path, kind) = (path.into(), kind_name(&kind));
        return Err(match mode {
            PolicyMode::Enforce => FileError::Duplicate { path, kind, other },
            PolicyMode::Shadow => FileError::DuplicateShadow { path, kind, other },
        });
    }
    let old = src.ctx.registry.serve_file(path, admitted.clone(), mode);
    if let (Some(reference), Some(fetched)) = (reference_of(path), &fetched) {
        image::remember(src, reference, fetched);
    }
    src.ctx.metrics.policy_loaded(if fetched.is_some() { "registry" } else { "file" }, true);
    // A default policy's revisions are said here, in the log and the metrics: there is no
    // object of its own to keep them on.
    let revision = src.ctx.registry.file_revision(path);
    src.ctx.metrics.file_revision(&path.display().to_string(), revision);
    info!(
        policy = %admitted.policy.label(),
        kind = %kind_name(&kind),
        revision,
        digest = %admitted.policy.digest(),
        replaced = old.as_ref().map(|a| a.policy.label()).unwrap_or("none"),
        took = ?started.elapsed(),
        file = %path.display(),
        ?mode,
        "policy serving"
    );
    if mode == PolicyMode::Shadow {
        let (src, shadow) = (src.clone(), admitted.clone());
        tokio::spawn(async move { super::shadow_schemas(&src, &shadow).await });
    }
    Ok(Some(admitted))
}

/// Reloads `path` and lets the controllers catch up, or reports a refusal; the last
/// good policy keeps serving. A refusal already reported is not logged again.
async fn reload(src: &Arc<Sources>, path: &Path, mode: PolicyMode) -> Result<(), FileError> {
    match load(src, path, mode).await {
        Ok(Some(admitted)) => {
            let started = Instant::now();
            // A new shadow decides beside every live decision of its kind from now on:
            // re-queue them all so that it is tried at once, not at their next change.
            let shadow = mode == PolicyMode::Shadow;
            let n = swapped(src, &admitted.parent_kind(), |p| shadow || decides(&src.ctx, &admitted, p)).await;

            info!(policy = %admitted.policy.label(), requeued = n, took = ?started.elapsed(), "policy swapped in");
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) => {
            src.ctx.metrics.policy_loaded("file", false);
            let said = src.ctx.registry.file_error(path).is_some_and(|old| old == e.to_string());
            src.ctx.registry.refuse_file(path, e.to_string());
            let serving = src.ctx.registry.file_policy(path);
            let still = serving.as_ref().map(|a| a.policy.label()).unwrap_or("nothing");
            if said {
                return Err(e);
            }
            if e.is_retryable() {
                warn!(file = %path.display(), still_serving = still, "policy not admitted yet: {e}; retrying every {RETRY:?}");
            } else {
                error!(file = %path.display(), still_serving = still, "policy update rejected: {e}");
            }
            Err(e)
        }
    }
}

/// Watches `paths` (each served in its mode) until `stop`, reloading each after
/// changes, and retrying those whose admission can still succeed.
pub async fn watch(
    src: Arc<Sources>,
    paths: Vec<(PathBuf, PolicyMode)>,
    pending: BTreeSet<PathBuf>,
    stop: CancellationToken,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Watch the directories, not the files: an atomic rename replaces the file's
    // inode, and a ConfigMap volume changes only its `..data` symlink. Any change in a
    // directory rereads its policy files; an unchanged digest makes that a no-op.
    let dirs: BTreeSet<PathBuf> = paths
        .iter()
        .filter(|(p, _)| reference_of(p).is_none())
        .map(|(p, _)| p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf())
        .collect();
    let names = concerned_names(&paths);
    let mut watcher = match notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Some(change) = res.ok().and_then(|ev| classify(&ev, &names)) {
            let _ = tx.send(change);
        }
    }) {
        Ok(w) => w,
        Err(e) => {
            error!("cannot watch the policy files: {e}; hot reload is off");
            return;
        }
    };
    for dir in &dirs {
        if let Err(e) = watcher.watch(dir, RecursiveMode::NonRecursive) {
            error!("cannot watch {}: {e}; hot reload is off for its policies", dir.display());
        }
    }
    info!(files = ?paths, "watching the policy files for changes");
    let mut retry: BTreeSet<PathBuf> = pending;
    let registered: Vec<(PathBuf, PolicyMode)> =
        paths.iter().filter(|(p, _)| reference_of(p).is_some()).cloned().collect();
    let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + src.registry_poll, src.registry_poll);
    loop {
        let tick = tokio::time::sleep(RETRY);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = poll.tick(), if !registered.is_empty() => {
                // A tag that moved swaps its new module in, as a changed file does.
                for (p, mode) in &registered {
                    if let Err(e) = reload(&src, p, *mode).await && e.is_retryable() {
                        retry.insert(p.clone());
                    }
                }
            }
            got = rx.recv() => {
                let Some(first) = got else { return };
                // A file renamed into place is whole: reload at once (what else arrived
                // with it is read in the same pass). Written files, and a module whose
                // signature must come with it (two files, renamed one after the other),
                // wait until the files have been quiet for DEBOUNCE.
                let mut at_once = first == Change::Replaced && !src.trust.required;
                while let Ok(change) = rx.try_recv() {
                    at_once &= change == Change::Replaced;
                }
                if !at_once {
                    loop {
                        tokio::select! {
                            _ = tokio::time::sleep(DEBOUNCE) => break,
                            got = rx.recv() => if got.is_none() { return },
                        }
                    }
                }
                retry.clear();
                for (p, mode) in &paths {
                    if let Err(e) = reload(&src, p, *mode).await && e.is_retryable() {
                        retry.insert(p.clone());
                    }
                }
            }
            _ = tick, if !retry.is_empty() => {
                let again: Vec<PathBuf> = retry.iter().cloned().collect();
                for p in again {
                    let mode = paths.iter().find(|(q, _)| *q == p).map_or(PolicyMode::Enforce, |(_, m)| *m);
                    match reload(&src, &p, mode).await {
                        Err(e) if e.is_retryable() => {}
                        _ => { retry.remove(&p); }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, EventKind, ModifyKind, RenameMode};

    fn event(kind: EventKind, paths: &[&str]) -> notify::Event {
        paths.iter().fold(notify::Event::new(kind), |ev, p| ev.add_path(PathBuf::from(p)))
    }

    fn names() -> BTreeSet<std::ffi::OsString> {
        concerned_names(&[
            (PathBuf::from("/p/podset.wasm"), PolicyMode::Enforce),
            (PathBuf::from("oci://registry.test/podset:v1"), PolicyMode::Enforce),
        ])
    }

    #[test]
    fn a_policy_file_renamed_into_place_is_whole() {
        let renamed = ModifyKind::Name(RenameMode::Both);
        let ev = event(EventKind::Modify(renamed), &["/p/podset.tmp", "/p/podset.wasm"]);
        assert_eq!(classify(&ev, &names()), Some(Change::Replaced));
        let ev = event(EventKind::Modify(ModifyKind::Name(RenameMode::To)), &["/p/podset.wasm"]);
        assert_eq!(classify(&ev, &names()), Some(Change::Replaced));
        // A ConfigMap volume swaps its `..data` symlink.
        let ev = event(EventKind::Modify(renamed), &["/p/..data_tmp", "/p/..data"]);
        assert_eq!(classify(&ev, &names()), Some(Change::Replaced));
    }

    #[test]
    fn a_policy_file_written_in_place_or_renamed_away_may_be_incomplete() {
        let written = EventKind::Modify(ModifyKind::Data(DataChange::Any));
        assert_eq!(classify(&event(written, &["/p/podset.wasm"]), &names()), Some(Change::Written));
        assert_eq!(classify(&event(written, &["/p/podset.wasm.sig"]), &names()), Some(Change::Written));
        let created = EventKind::Create(CreateKind::File);
        assert_eq!(classify(&event(created, &["/p/podset.wasm"]), &names()), Some(Change::Written));
        let away = EventKind::Modify(ModifyKind::Name(RenameMode::Both));
        assert_eq!(classify(&event(away, &["/p/podset.wasm", "/p/podset.old"]), &names()), Some(Change::Written));
    }

    #[test]
    fn other_files_and_reads_do_not_concern_the_policies() {
        let written = EventKind::Modify(ModifyKind::Data(DataChange::Any));
        // A build's temporary file, before it is renamed into place.
        assert_eq!(classify(&event(written, &["/p/podset.tmp"]), &names()), None);
        let read = EventKind::Access(notify::event::AccessKind::Read);
        assert_eq!(classify(&event(read, &["/p/podset.wasm"]), &names()), None);
        // A registry reference has no file name to watch.
        assert_eq!(classify(&event(written, &["/p/podset:v1"]), &names()), None);
    }
}
