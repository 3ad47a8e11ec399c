//! Signatures over policy modules: ECDSA P-256 with SHA-256, in cosign's key-based
//! formats, so that the keys, signatures and payloads are the ones platform teams
//! already handle.
//!
//! - Keys: the public key is a PEM `PUBLIC KEY` (SubjectPublicKeyInfo), as `cosign.pub`;
//!   the private key a PEM `PRIVATE KEY` (unencrypted PKCS#8), which `cosign
//!   import-key-pair` takes. cosign's own encrypted private keys (scrypt and
//!   secretbox) are not read: that needs crates we do not lock.
//! - A module in a registry is signed as cosign signs an image ([`Payload`]): the
//!   simple-signing payload names the manifest's digest, and the signature over the
//!   payload's bytes rides in a layer annotation of the `sha256-<hex>.sig` tag
//!   (`oci::cosign`).
//! - A module from a file or a ConfigMap has a detached signature beside it, as
//!   `cosign sign-blob` writes one: the base64 of the DER signature over the module's
//!   bytes, in `FILE.sig` or the ConfigMap key `KEY.sig`.
//!
//! Verified with `ring`, which the TLS stack already brings. Not supported: keyless
//! signing (Fulcio certificates, OIDC identities) and the transparency log (Rekor):
//! both need network services and the sigstore crate's ~200 dependencies; a key pair
//! needs neither.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The DER prefix of an uncompressed P-256 public key's SubjectPublicKeyInfo: the
/// algorithm (id-ecPublicKey, prime256v1) and the BIT STRING header; the 65-byte point
/// follows.
const SPKI_P256: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The `critical.type` of a cosign image signature payload.
pub const COSIGN_TYPE: &str = "cosign container image signature";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{source_name}: {message}")]
    Key { source_name: String, message: String },
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("no trusted public key: pass --trusted-key FILE (or a directory of *.pub files)")]
    NoTrustedKeys,
    #[error("not signed: {0}")]
    Unsigned(String),
    #[error("no trusted key verifies the signature ({tried} signature(s) tried against {keys} key(s): {names})")]
    Untrusted { tried: usize, keys: usize, names: String },
    #[error("the signature is for {signed}, but the module's manifest is {actual}")]
    DigestMismatch { signed: String, actual: String },
    #[error("the signature payload is not a cosign payload: {0}")]
    Payload(String),
}

impl Error {
    /// The condition reason a refused module is reported with.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Unsigned(_) => "Unsigned",
            Error::Untrusted { .. } => "UntrustedSignature",
            Error::DigestMismatch { .. } => "SignedDigestMismatch",
            Error::Payload(_) => "InvalidSignature",
            Error::Key { .. } | Error::Read { .. } | Error::NoTrustedKeys => "TrustedKeys",
        }
    }
}

/// A P-256 public key.
#[derive(Clone, Debug)]
pub struct PublicKey {
    /// The uncompressed point, 65 bytes.
    point: Vec<u8>,
    /// Where it came from, for messages.
    name: String,
}

impl PublicKey {
    /// Parses a PEM `PUBLIC KEY` holding an uncompressed P-256 key (what cosign and
    /// `openssl ec -pubout` write).
    pub fn from_pem(text: &str, name: &str) -> Result<Self, Error> {
        let bad = |message: String| Error::Key { source_name: name.to_string(), message };
        let pem = pem::parse(text).map_err(|e| bad(format!("not a PEM public key: {e}")))?;
        if pem.tag() != "PUBLIC KEY" {
            return Err(bad(format!("a PEM {:?}, not a PUBLIC KEY", pem.tag())));
        }
        let der = pem.contents();
        match der.strip_prefix(&SPKI_P256[..]) {
            Some(point) if point.len() == 65 && point[0] == 4 => {
                Ok(PublicKey { point: point.to_vec(), name: name.to_string() })
            }
            _ => Err(bad("not an uncompressed ECDSA P-256 key: only P-256 (cosign's default) is supported".into())),
        }
    }

    pub fn to_pem(&self) -> String {
        let mut der = SPKI_P256.to_vec();
        der.extend_from_slice(&self.point);
        pem::encode(&pem::Pem::new("PUBLIC KEY", der))
    }

    /// Whether `sig` (DER) is this key's signature over `message`.
    pub fn verifies(&self, message: &[u8], sig: &[u8]) -> bool {
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_ASN1, &self.point).verify(message, sig).is_ok()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A short, stable id: the first 8 bytes of the SubjectPublicKeyInfo's sha256.
    pub fn id(&self) -> String {
        let mut der = SPKI_P256.to_vec();
        der.extend_from_slice(&self.point);
        hex::encode(&Sha256::digest(&der)[..8])
    }
}

/// A P-256 signing key.
pub struct PrivateKey {
    pair: EcdsaKeyPair,
    pkcs8: Vec<u8>,
}

impl PrivateKey {
    pub fn generate() -> Result<Self, Error> {
        let rng = SystemRandom::new();
        let bad = |message: String| Error::Key { source_name: "new key".into(), message };
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|_| bad("the system's random source failed".into()))?;
        let pkcs8 = doc.as_ref().to_vec();
        let pair = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &pkcs8, &rng)
            .map_err(|e| bad(format!("{e}")))?;
        Ok(PrivateKey { pair, pkcs8 })
    }

    /// Parses a PEM `PRIVATE KEY` (PKCS#8, unencrypted, P-256).
    pub fn from_pem(text: &str, name: &str) -> Result<Self, Error> {
        let bad = |message: String| Error::Key { source_name: name.to_string(), message };
        let pem = pem::parse(text).map_err(|e| bad(format!("not a PEM private key: {e}")))?;
        match pem.tag() {
            "PRIVATE KEY" => {}
            "ENCRYPTED SIGSTORE PRIVATE KEY" | "ENCRYPTED COSIGN PRIVATE KEY" => {
                return Err(bad("cosign's encrypted key format is not supported: sign with `cosign sign --key` \
                     (our verification accepts its signatures), or make a key with `podset-host policy keygen` \
                     and give it to cosign with `cosign import-key-pair`"
                    .into()));
            }
            other => return Err(bad(format!("a PEM {other:?}; expected an unencrypted PKCS#8 PRIVATE KEY"))),
        }
        let pkcs8 = pem.into_contents();
        let pair = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &pkcs8, &SystemRandom::new())
            .map_err(|e| bad(format!("not an ECDSA P-256 key ({e})")))?;
        Ok(PrivateKey { pair, pkcs8 })
    }

    pub fn to_pem(&self) -> String {
        pem::encode(&pem::Pem::new("PRIVATE KEY", self.pkcs8.clone()))
    }

    pub fn public(&self) -> PublicKey {
        PublicKey { point: self.pair.public_key().as_ref().to_vec(), name: "the signing key".into() }
    }

    /// The DER signature over `message`.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, Error> {
        let sig = self
            .pair
            .sign(&SystemRandom::new(), message)
            .map_err(|_| Error::Key { source_name: "the signing key".into(), message: "signing failed".into() })?;
        Ok(sig.as_ref().to_vec())
    }
}

/// cosign's simple-signing payload for an image signature. Field order is Go's
/// marshalling of cosign's types, so that the bytes match what cosign writes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Payload {
    pub critical: Critical,
    pub optional: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Critical {
    pub identity: Identity,
    pub image: Image,
    #[serde(rename = "type")]
    pub type_: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Identity {
    #[serde(rename = "docker-reference")]
    pub docker_reference: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Image {
    #[serde(rename = "docker-manifest-digest")]
    pub docker_manifest_digest: String,
}

impl Payload {
    /// The payload for the manifest `digest` in `repository` (`registry/path`).
    pub fn new(repository: &str, digest: &str) -> Self {
        Payload {
            critical: Critical {
                identity: Identity { docker_reference: repository.to_string() },
                image: Image { docker_manifest_digest: digest.to_string() },
                type_: COSIGN_TYPE.to_string(),
            },
            optional: None,
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        // A struct of strings: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, Error> {
        let p: Payload = serde_json::from_slice(bytes).map_err(|e| Error::Payload(e.to_string()))?;
        if p.critical.type_ != COSIGN_TYPE {
            return Err(Error::Payload(format!("critical.type is {:?}, not {COSIGN_TYPE:?}", p.critical.type_)));
        }
        Ok(p)
    }
}

/// Which public keys signatures must verify with, and whether they must.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    /// Files holding one PEM public key each, or directories whose `*.pub` files do:
    /// read at every verification, so that a Secret mounted as a volume is picked up
    /// when it is rotated.
    pub keys: Vec<PathBuf>,
    /// Refuse a module without a signature that one of the keys verifies.
    pub required: bool,
}

/// What a verification found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The key that verified it: its file and id.
    pub key: String,
}

impl Trust {
    /// The trusted keys, read now.
    pub fn public_keys(&self) -> Result<Vec<PublicKey>, Error> {
        let mut out = Vec::new();
        for path in &self.keys {
            let read = |p: &Path| std::fs::read_to_string(p).map_err(|source| Error::Read { path: p.into(), source });
            if path.is_dir() {
                let entries = std::fs::read_dir(path).map_err(|source| Error::Read { path: path.clone(), source })?;
                let mut files: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "pub") && p.is_file())
                    .collect();
                files.sort();
                for f in files {
                    out.push(PublicKey::from_pem(&read(&f)?, &f.display().to_string())?);
                }
            } else {
                out.push(PublicKey::from_pem(&read(path)?, &path.display().to_string())?);
            }
        }
        if out.is_empty() {
            return Err(Error::NoTrustedKeys);
        }
        Ok(out)
    }

    /// Checks `signatures` (DER, each over `message`) against the trusted keys.
    pub fn verify(&self, message: &[u8], signatures: &[Vec<u8>]) -> Result<Verified, Error> {
        let keys = self.public_keys()?;
        for sig in signatures {
            if let Some(k) = keys.iter().find(|k| k.verifies(message, sig)) {
                return Ok(Verified { key: format!("{} ({})", k.name(), k.id()) });
            }
        }
        let names = keys.iter().map(|k| k.id()).collect::<Vec<_>>().join(", ");
        Err(Error::Untrusted { tried: signatures.len(), keys: keys.len(), names })
    }

    /// Checks a detached signature (`cosign sign-blob`'s base64 text) over a module's
    /// bytes. `None`: there is no signature.
    pub fn verify_blob(&self, module: &[u8], detached: Option<&[u8]>, beside: &str) -> Result<Verified, Error> {
        let Some(text) = detached else {
            return Err(Error::Unsigned(format!("no detached signature {beside}")));
        };
        let sig = decode_signature(text).map_err(|e| Error::Payload(format!("{beside}: {e}")))?;
        self.verify(module, &[sig])
    }
}

/// A base64 signature, as cosign writes it (surrounding whitespace ignored).
pub fn decode_signature(text: &[u8]) -> Result<Vec<u8>, String> {
    let text = String::from_utf8_lossy(text);
    base64::engine::general_purpose::STANDARD.decode(text.trim()).map_err(|e| format!("not base64: {e}"))
}

pub fn encode_signature(sig: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_pem_and_verify_what_they_sign() {
        let key = PrivateKey::generate().expect("key");
        let again = PrivateKey::from_pem(&key.to_pem(), "k").expect("private PEM parses");
        let public = PublicKey::from_pem(&key.public().to_pem(), "k.pub").expect("public PEM parses");
        let sig = again.sign(b"module bytes").expect("sign");
        assert!(public.verifies(b"module bytes", &sig));
        assert!(!public.verifies(b"other bytes", &sig));
        let other = PrivateKey::generate().expect("key").public();
        assert!(!other.verifies(b"module bytes", &sig));
        assert_eq!(public.id(), key.public().id());
    }

    #[test]
    fn openssl_keys_are_read_and_cosign_encrypted_ones_refused_with_a_reason() {
        // `openssl ecparam -name prime256v1 -genkey | openssl pkcs8 -topk8 -nocrypt` and `openssl ec -pubout`.
        let private = "-----BEGIN PRIVATE KEY-----\n\
            MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgbW/W/3J9/LGy6JXz\n\
            mLiDVMBY1EP8S4ocE6Bepgz93YChRANCAASpzJqJVROJqsoHjPhIdYFHzpgWcQ/i\n\
            j6uhXYJyWpCTfrgbV+yVDojx3W1GLm7Syub33mjdugdbORpSx3ciq4rc\n\
            -----END PRIVATE KEY-----\n";
        let key = PrivateKey::from_pem(private, "openssl.key").expect("PKCS#8 from openssl");
        let sig = key.sign(b"x").expect("sign");
        assert!(PublicKey::from_pem(&key.public().to_pem(), "p").expect("public").verifies(b"x", &sig));
        let cosign = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\neyJrZGYiOnt9fQ==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
        let err = PrivateKey::from_pem(cosign, "cosign.key").err().expect("refused").to_string();
        assert!(err.contains("import-key-pair"), "{err}");
        let ed25519 = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAR+Z9p+EbqxQ9ovK85HKwOyv5H05fgLG/AeF75AR610A=\n-----END PUBLIC KEY-----\n";
        let err = PublicKey::from_pem(ed25519, "ed25519.pub").expect_err("refused").to_string();
        assert!(err.contains("P-256"), "{err}");
    }

    #[test]
    fn the_payload_is_cosigns_byte_for_byte() {
        let p = Payload::new("127.0.0.1:5000/policies/podset", "sha256:abc");
        assert_eq!(
            String::from_utf8(p.to_bytes()).expect("utf-8"),
            r#"{"critical":{"identity":{"docker-reference":"127.0.0.1:5000/policies/podset"},"image":{"docker-manifest-digest":"sha256:abc"},"type":"cosign container image signature"},"optional":null}"#
        );
        assert_eq!(Payload::parse(&p.to_bytes()).expect("parses"), p);
        let wrong = br#"{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"d"},"type":"other"},"optional":null}"#;
        assert!(matches!(Payload::parse(wrong), Err(Error::Payload(_))));
    }

    #[test]
    fn trust_reads_key_files_and_directories_and_names_what_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (PrivateKey::generate().expect("a"), PrivateKey::generate().expect("b"));
        std::fs::write(dir.path().join("a.pub"), a.public().to_pem()).expect("write");
        std::fs::write(dir.path().join("notes.txt"), "not a key").expect("write");
        let trust = Trust { keys: vec![dir.path().into()], required: true };
        let sig = a.sign(b"m").expect("sign");
        let ok = trust.verify_blob(b"m", Some(encode_signature(&sig).as_bytes()), "m.sig").expect("verifies");
        assert!(ok.key.contains("a.pub"), "{ok:?}");
        let by_b = encode_signature(&b.sign(b"m").expect("sign"));
        assert!(matches!(trust.verify_blob(b"m", Some(by_b.as_bytes()), "m.sig"), Err(Error::Untrusted { .. })));
        assert!(matches!(trust.verify_blob(b"m", None, "m.sig"), Err(Error::Unsigned(_))));
        // The key rotated in place (a Secret volume's update) is read at the next check.
        std::fs::write(dir.path().join("a.pub"), b.public().to_pem()).expect("rotate");
        assert!(trust.verify_blob(b"m", Some(by_b.as_bytes()), "m.sig").is_ok());
        let none = Trust { keys: vec![], required: true };
        assert!(matches!(none.public_keys(), Err(Error::NoTrustedKeys)));
    }
}
