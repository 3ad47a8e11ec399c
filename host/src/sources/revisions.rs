//! The modules of recent revisions on the operator's disk, so that a revision can be
//! brought back without its source: a ConfigMap key since overwritten with the next
//! module, a registry that is down, a tag that moved.
//!
//! ```text
//! DIR/<hex>.wasm   a module, named by its sha256
//! DIR/<hex>.json   how it was verified when it served: a detached signature, or the
//!                  artifact's manifest and cosign signatures; empty without signatures
//! ```
//!
//! A module read back is checked against its digest again (a corrupt file is
//! removed), and, when signatures are required, its evidence is verified again against
//! the keys trusted now. The store keeps the modules of the revisions that
//! ReconcilePolicies list (`status.revisions`, `run --revision-history` per policy);
//! [`Store::keep`] removes the others. It lives in `--policy-cache-dir`: it survives an
//! operator restart, and a new pod starts it again unless that directory is a volume
//! that outlives the pod.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::oci::cosign::{self, Signature};
use crate::sandbox::Digest;
use crate::signature::{self, Trust};

/// How a module was verified when it served, kept to verify it again.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    /// A detached signature over the module's bytes (a ConfigMap's `KEY.sig`), as
    /// `cosign sign-blob` writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detached: Option<String>,
    /// The artifact's manifest (its layer is the module) and the cosign signatures over
    /// the manifest's digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cosign: Option<CosignEvidence>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CosignEvidence {
    /// The manifest, as JSON text.
    pub manifest: String,
    /// `(payload, base64 signature)` pairs.
    pub signatures: Vec<(String, String)>,
}

/// Why a stored module cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the revision store at {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("module {digest} from the revision store: {source}")]
    Signature { digest: String, source: signature::Error },
    #[error("module {digest} from the revision store has no signature evidence, and signatures are required")]
    Unsigned { digest: String },
    #[error("module {digest} from the revision store: its manifest does not name it")]
    ManifestMismatch { digest: String },
}

/// A module read back from the store, verified.
pub struct Stored {
    pub module: Vec<u8>,
    /// The trusted key that verified it, when signatures are required.
    pub signed_by: Option<String>,
}

/// The modules of recent revisions, by digest.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store under `dir`, made (0700) if it does not exist.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        let io = |source| Error::Io { path: dir.to_path_buf(), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        }
        Ok(Store { dir: dir.to_path_buf() })
    }

    fn paths(&self, digest: &Digest) -> (PathBuf, PathBuf) {
        let hex = digest.hex();
        (self.dir.join(format!("{hex}.wasm")), self.dir.join(format!("{hex}.json")))
    }

    /// Keeps `module` and how it was verified (a no-op when it is there).
    pub fn put(&self, module: &[u8], evidence: &Evidence) -> Result<Digest, Error> {
        let digest = Digest::of(module);
        let (wasm, json) = self.paths(&digest);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        if !wasm.exists() {
            write_atomically(&wasm, module).map_err(io(&wasm))?;
        }
        let text = serde_json::to_vec_pretty(evidence).unwrap_or_default();
        if std::fs::read(&json).ok().as_deref() != Some(text.as_slice()) {
            write_atomically(&json, &text).map_err(io(&json))?;
        }
        Ok(digest)
    }

    /// The module `digest`, if it is here and intact, verified again when `trust`
    /// requires signatures; with the key that verified it.
    pub fn get(&self, digest: &Digest, trust: &Trust) -> Result<Option<Stored>, Error> {
        let (wasm, json) = self.paths(digest);
        let Ok(module) = std::fs::read(&wasm) else { return Ok(None) };
        if Digest::of(&module) != *digest {
            tracing::warn!(path = %wasm.display(), "a stored revision is corrupt; removing it");
            let _ = std::fs::remove_file(&wasm);
            return Ok(None);
        }
        if !trust.required {
            return Ok(Some(Stored { module, signed_by: None }));
        }
        let evidence: Evidence = std::fs::read(&json)
            .ok()
            .and_then(|t| serde_json::from_slice(&t).ok())
            .ok_or_else(|| Error::Unsigned { digest: digest.to_string() })?;
        let key = verify(digest, &module, &evidence, trust)?;
        Ok(Some(Stored { module, signed_by: Some(key) }))
    }

    /// Removes every module but those of `digests`.
    pub fn keep(&self, digests: &HashSet<Digest>) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let kept: HashSet<String> = digests.iter().map(Digest::hex).collect();
        for entry in entries.flatten() {
            let path = entry.path();
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let ours = path.extension().is_some_and(|e| e == "wasm" || e == "json") && stem.len() == 64;
            if ours && !kept.contains(stem) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

fn verify(digest: &Digest, module: &[u8], evidence: &Evidence, trust: &Trust) -> Result<String, Error> {
    let failed = |source| Error::Signature { digest: digest.to_string(), source };
    if let Some(sig) = &evidence.detached {
        return trust
            .verify_blob(module, Some(sig.as_bytes()), "(kept in the revision store)")
            .map(|v| v.key)
            .map_err(failed);
    }
    let Some(c) = &evidence.cosign else { return Err(Error::Unsigned { digest: digest.to_string() }) };
    // The manifest must name this module as its layer, and a trusted key must have
    // signed the manifest's digest.
    let names_module = serde_json::from_str::<serde_json::Value>(&c.manifest)
        .ok()
        .and_then(|m| m["layers"].as_array().cloned())
        .is_some_and(|layers| layers.iter().any(|l| l["digest"].as_str() == Some(&digest.to_string())));
    if !names_module {
        return Err(Error::ManifestMismatch { digest: digest.to_string() });
    }
    let manifest_digest = Digest::of(c.manifest.as_bytes()).to_string();
    let signatures: Vec<Signature> = c
        .signatures
        .iter()
        .filter_map(|(payload, sig)| {
            Some(Signature {
                payload: payload.as_bytes().to_vec(),
                signature: signature::decode_signature(sig.as_bytes()).ok()?,
            })
        })
        .collect();
    cosign::verify(trust, &manifest_digest, &signatures).map(|v| v.key).map_err(failed)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::PrivateKey;

    fn trust_with(dir: &Path, key: &PrivateKey) -> Trust {
        let public = dir.join("trusted.pub");
        std::fs::write(&public, key.public().to_pem()).expect("write the key");
        Trust { keys: vec![public], required: true }
    }

    #[test]
    fn a_stored_module_reads_back_verified_and_a_corrupt_one_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("revisions")).expect("store");
        let key = PrivateKey::generate().expect("key");
        let module = b"\0asm a module".to_vec();
        let sig = signature::encode_signature(&key.sign(&module).expect("sign"));
        let digest = store.put(&module, &Evidence { detached: Some(sig), cosign: None }).expect("put");
        let trust = trust_with(dir.path(), &key);
        let back = store.get(&digest, &trust).expect("verified").expect("present");
        assert_eq!(back.module, module);
        assert!(back.signed_by.is_some_and(|k| k.contains("trusted.pub")));
        // Another key does not verify it.
        let other = trust_with(&dir.path().join(".."), &PrivateKey::generate().expect("key"));
        assert!(matches!(store.get(&digest, &other), Err(Error::Signature { .. })));
        // Without signatures required, no evidence is needed.
        let plain = store.put(b"\0asm unsigned", &Evidence::default()).expect("put");
        assert!(store.get(&plain, &Trust::default()).expect("read").is_some());
        assert!(matches!(store.get(&plain, &trust), Err(Error::Unsigned { .. })));
        // A file changed on disk is not served.
        std::fs::write(dir.path().join("revisions").join(format!("{}.wasm", digest.hex())), b"tampered").expect("w");
        assert!(store.get(&digest, &trust).expect("read").is_none());
    }

    #[test]
    fn keep_removes_every_other_module() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("store");
        let a = store.put(b"a", &Evidence::default()).expect("put");
        let b = store.put(b"b", &Evidence::default()).expect("put");
        store.keep(&HashSet::from([a]));
        assert!(store.get(&a, &Trust::default()).expect("read").is_some());
        assert!(store.get(&b, &Trust::default()).expect("read").is_none());
    }
}
