//! Compiled modules on disk, by digest, so that a restart does not compile again: a
//! 4 MB Go component takes 4–15 s to compile, a 1.7 MB TypeScript one 2–8 s (2 cores,
//! 2026-11-27), against milliseconds to load an artifact.
//!
//! An artifact is native code that wasmtime runs as it is (its `deserialize` is `unsafe`
//! for that reason), so the directory is trusted like the binary: it is created private
//! (0700), and one that another user owns or others may write is refused, not read.
//! The file's name holds the module's digest and a hash of the engine's configuration
//! and wasmtime's version; wasmtime checks both again when it loads one. An artifact it
//! refuses (another version, a torn file) is removed and the module compiled again.

use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tracing::warn;
use wasmtime::Engine;
use wasmtime::component::Component;

use super::digest::Digest;

/// A directory of compiled artifacts.
#[derive(Clone, Debug)]
pub struct ArtifactCache {
    dir: PathBuf,
}

impl ArtifactCache {
    /// Opens `dir`, creating it private; refuses one others could write.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = fs::metadata(dir)?;
            // SAFETY: geteuid has no preconditions and cannot fail.
            let me = unsafe { libc::geteuid() };
            if meta.uid() != me || meta.mode() & 0o022 != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is owned by uid {} with mode {:o}: compiled code is read only from a directory this user \
                         owns and no one else may write",
                        dir.display(),
                        meta.uid(),
                        meta.mode() & 0o7777
                    ),
                ));
            }
        }
        Ok(ArtifactCache { dir: dir.to_path_buf() })
    }

    fn path(&self, engine: &Engine, digest: &Digest) -> PathBuf {
        let mut compatibility = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut compatibility);
        let hex = digest.to_string();
        let hex = hex.trim_start_matches("sha256:");
        self.dir.join(format!("{hex}-{:016x}.cwasm", compatibility.finish()))
    }

    /// The compiled module of `digest`, if this cache holds one `engine` accepts.
    pub(super) fn get(&self, engine: &Engine, digest: &Digest) -> Option<Component> {
        let path = self.path(engine, digest);
        // Read, not mapped (`deserialize_file` maps it): a file changed in place under a
        // mapping would fault the operator (SIGBUS), and reading 10 MB costs milliseconds.
        let artifact = fs::read(&path).ok()?;
        // SAFETY: the file was written by `put` of this cache, in a directory only this
        // user may write (checked by `open`); wasmtime checks its version and the engine's
        // configuration before using it.
        match unsafe { Component::deserialize(engine, &artifact) } {
            Ok(component) => Some(component),
            Err(e) => {
                warn!(path = %path.display(), "compiled module refused, compiling again: {e:#}");
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Keeps `artifact`, the compiled module of `digest`. A cache that cannot be written
    /// costs only the next compile: said, not failed.
    pub(super) fn put(&self, engine: &Engine, digest: &Digest, artifact: &[u8]) {
        let path = self.path(engine, digest);
        // Written aside (a name of this process's own), then renamed: a reader never sees
        // half a file.
        let aside = path.with_extension(format!("{}.part", std::process::id()));
        let written = fs::File::create_new(&aside)
            .and_then(|mut file| file.write_all(artifact).and_then(|()| file.sync_all()))
            .and_then(|()| fs::rename(&aside, &path));
        if let Err(e) = written {
            let _ = fs::remove_file(&aside);
            warn!(path = %path.display(), "cannot keep the compiled module: {e}");
        }
    }
}
