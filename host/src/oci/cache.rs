//! Pulled policies on disk, by digest, so that a registry that is down costs nothing
//! to what already serves, and a restarted operator loads what it last verified.
//!
//! ```text
//! DIR/blobs/sha256/<hex>             modules, manifests, signature payloads
//! DIR/refs/<sha256 of the ref>.json  {"reference", "manifest", "signatures": [...]}
//! ```
//!
//! A reference is remembered only after its module was verified and loaded. Every
//! read is checked against its digest again (a corrupt file is removed), and the
//! signatures are kept so that they are verified again, against the keys trusted then,
//! when the cache serves.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::artifact::{self, digest_of};
use super::pulled::{Pulled, Signature};
use super::{Error, Reference};
use crate::signature;

#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct Remembered {
    reference: String,
    manifest: String,
    #[serde(default)]
    signatures: Vec<Signed>,
}

#[derive(Serialize, Deserialize)]
struct Signed {
    payload: String,
    signature: String,
}

impl Cache {
    /// The cache under `dir`, made if it does not exist.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        for sub in ["blobs/sha256", "refs"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(|source| Error::Cache { path, source })?;
        }
        Ok(Cache { dir: dir.to_path_buf() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| self.dir.join("blobs/sha256").join(hex))
    }

    /// The blob `digest`, if it is here and intact.
    pub fn blob(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.blob_path(digest)?;
        let bytes = std::fs::read(&path).ok()?;
        if digest_of(&bytes) != digest {
            tracing::warn!(path = %path.display(), "cached blob is corrupt; removing it");
            let _ = std::fs::remove_file(&path);
            return None;
        }
        Some(bytes)
    }

    /// Stores `bytes` under their digest (written whole, then renamed into place).
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String, Error> {
        let digest = digest_of(bytes);
        let path = self.blob_path(&digest).unwrap_or_else(|| self.dir.join("blobs/sha256/invalid"));
        if !path.exists() {
            write_atomically(&path, bytes)?;
        }
        Ok(digest)
    }

    fn ref_path(&self, reference: &str) -> PathBuf {
        self.dir.join("refs").join(format!("{}.json", &digest_of(reference.as_bytes())[7..]))
    }

    /// Remembers that `reference` resolved to what `pulled` holds, with its signatures.
    pub fn remember(&self, reference: &str, pulled: &Pulled, signatures: &[Signature]) -> Result<(), Error> {
        self.put_blob(&pulled.manifest)?;
        self.put_blob(&pulled.module)?;
        let mut signed = Vec::new();
        for s in signatures {
            signed.push(Signed {
                payload: self.put_blob(&s.payload)?,
                signature: signature::encode_signature(&s.signature),
            });
        }
        let record = Remembered {
            reference: reference.to_string(),
            manifest: pulled.manifest_digest.clone(),
            signatures: signed,
        };
        let json = serde_json::to_vec_pretty(&record).unwrap_or_default();
        write_atomically(&self.ref_path(reference), &json)
    }

    /// What `reference` last resolved to, read back and checked: the manifest and
    /// module digests, the manifest as an artifact of at most `cap` bytes. `None` when
    /// nothing (intact) is remembered.
    pub fn recall(&self, reference: &str, cap: usize) -> Option<(Pulled, Vec<Signature>)> {
        let text = std::fs::read(self.ref_path(reference)).ok()?;
        let record: Remembered = serde_json::from_slice(&text).ok()?;
        if record.reference != reference {
            return None;
        }
        let manifest = self.blob(&record.manifest)?;
        let layer = artifact::check(&manifest, cap).ok()?;
        let module = self.blob(&layer.digest)?;
        let parsed: Reference = super::parse_reference(reference).ok()?;
        let signatures = record
            .signatures
            .iter()
            .filter_map(|s| {
                Some(Signature {
                    payload: self.blob(&s.payload)?,
                    signature: signature::decode_signature(s.signature.as_bytes()).ok()?,
                })
            })
            .collect();
        let pulled = Pulled {
            reference: parsed.clone_with_digest(record.manifest.clone()),
            manifest_digest: record.manifest,
            manifest,
            layer,
            module,
            module_cached: true,
        };
        Some((pulled, signatures))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let err = |source| Error::Cache { path: path.to_path_buf(), source };
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn pulled(reference: &str, module: &[u8]) -> Pulled {
        let built = artifact::build(module.to_vec(), &[], &[], BTreeMap::new());
        let layer = artifact::check(&built.manifest, 1 << 20).expect("valid");
        let r: Reference = reference.parse().expect("ref");
        Pulled {
            reference: r.clone_with_digest(built.manifest_digest.clone()),
            manifest_digest: built.manifest_digest,
            manifest: built.manifest,
            layer,
            module: module.to_vec(),
            module_cached: false,
        }
    }

    #[test]
    fn remembers_a_reference_with_its_signatures_and_survives_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = Cache::open(dir.path()).expect("open");
        let p = pulled("127.0.0.1:5000/p/podset:v1", b"module one");
        let sig = Signature { payload: b"payload".to_vec(), signature: vec![1, 2, 3] };
        cache.remember("127.0.0.1:5000/p/podset:v1", &p, std::slice::from_ref(&sig)).expect("remember");
        let again = Cache::open(dir.path()).expect("reopen");
        let (back, sigs) = again.recall("127.0.0.1:5000/p/podset:v1", 1 << 20).expect("recalled");
        assert_eq!(back.module, b"module one");
        assert_eq!(back.manifest_digest, p.manifest_digest);
        assert_eq!(sigs, vec![sig]);
        assert!(again.recall("127.0.0.1:5000/p/podset:v2", 1 << 20).is_none());
        // Over a smaller cap, what is cached is not served either.
        assert!(again.recall("127.0.0.1:5000/p/podset:v1", 4).is_none());
    }

    #[test]
    fn a_corrupt_blob_is_not_served_and_is_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = Cache::open(dir.path()).expect("open");
        let p = pulled("r.example/p:v1", b"module");
        cache.remember("r.example/p:v1", &p, &[]).expect("remember");
        let path = cache.blob_path(&p.layer.digest).expect("path");
        std::fs::write(&path, b"modulE").expect("corrupt it");
        assert!(cache.recall("r.example/p:v1", 1 << 20).is_none());
        assert!(!path.exists());
        assert!(cache.blob("sha256:../../etc/passwd").is_none());
    }
}
