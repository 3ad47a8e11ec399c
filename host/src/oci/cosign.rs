//! cosign's key-based signatures on a registry artifact: for the manifest
//! `sha256:<hex>`, the tag `sha256-<hex>.sig` in the same repository holds an image
//! whose layers are simple-signing payloads
//! (`application/vnd.dev.cosign.simplesigning.v1+json`), each carrying its base64
//! ECDSA signature in the annotation `dev.cosignproject.cosign/signature`. Signing
//! again adds a layer, as cosign does.

use std::collections::BTreeMap;

use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciImageManifest};

use super::artifact::digest_of;
pub use super::pulled::Signature;
use super::{Error, Session};
use crate::signature::{self, Payload, PrivateKey, Trust, Verified};

pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// Largest payload read: cosign's are ~250 bytes.
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

/// `repository:sha256-<hex>.sig`, where cosign keeps the signatures of `digest`.
pub fn signature_tag(reference: &Reference, digest: &str) -> Reference {
    let tag = format!("{}.sig", digest.replace(':', "-"));
    Reference::with_tag(reference.registry().to_string(), reference.repository().to_string(), tag)
}

/// The signatures stored for the manifest `digest` (none when the tag is absent).
pub async fn fetch(session: &Session, reference: &Reference, digest: &str) -> Result<Vec<Signature>, Error> {
    let tag = signature_tag(reference, digest);
    let Some((manifest, manifest_digest)) = session.manifest_of_tag(&tag).await? else {
        return Ok(Vec::new());
    };
    let m: OciImageManifest = serde_json::from_slice(&manifest)
        .map_err(|e| Error::Artifact(format!("{}: not an image manifest: {e}", tag.whole())))?;
    let pinned = tag.clone_with_digest(manifest_digest);
    let mut out = Vec::new();
    for layer in m.layers.iter().filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE) {
        let Some(sig) = layer.annotations.as_ref().and_then(|a| a.get(SIGNATURE_ANNOTATION)) else { continue };
        let Ok(signature) = signature::decode_signature(sig.as_bytes()) else { continue };
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > MAX_PAYLOAD_BYTES {
            continue;
        }
        let payload = session.blob(&pinned, &layer.digest, size).await?;
        out.push(Signature { payload, signature });
    }
    Ok(out)
}

/// Whether one of `signatures` is a trusted key's over a payload naming `digest`.
/// A trusted signature over another digest (a signature copied from another
/// artifact, or a manifest swapped under its tag) is told apart from no trusted
/// signature at all.
pub fn verify(trust: &Trust, digest: &str, signatures: &[Signature]) -> Result<Verified, signature::Error> {
    if signatures.is_empty() {
        return Err(signature::Error::Unsigned(format!("no cosign signature (tag {}.sig)", digest.replace(':', "-"))));
    }
    let keys = trust.public_keys()?;
    let mut signed_other = None;
    for s in signatures {
        let Some(key) = keys.iter().find(|k| k.verifies(&s.payload, &s.signature)) else { continue };
        let payload = Payload::parse(&s.payload)?;
        let signed = payload.critical.image.docker_manifest_digest;
        if signed == digest {
            return Ok(Verified { key: format!("{} ({})", key.name(), key.id()) });
        }
        signed_other = Some(signed);
    }
    match signed_other {
        Some(signed) => Err(signature::Error::DigestMismatch { signed, actual: digest.to_string() }),
        None => Err(signature::Error::Untrusted {
            tried: signatures.len(),
            keys: keys.len(),
            names: keys.iter().map(|k| k.id()).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// Signs what `reference` names now with `key`: pushes the payload and appends its
/// layer to the signature tag. Returns the signed manifest digest and the tag.
pub async fn sign(session: &Session, reference: &Reference, key: &PrivateKey) -> Result<(String, Reference), Error> {
    let digest = session.resolve(reference).await?;
    let repository = format!("{}/{}", reference.registry(), reference.repository());
    let payload = Payload::new(&repository, &digest).to_bytes();
    let sig = key.sign(&payload)?;
    let tag = signature_tag(reference, &digest);
    let mut layers: Vec<OciDescriptor> = match session.manifest_of_tag(&tag).await? {
        Some((bytes, _)) => serde_json::from_slice::<OciImageManifest>(&bytes)
            .map(|m| m.layers)
            .map_err(|e| Error::Artifact(format!("{}: not an image manifest: {e}", tag.whole())))?,
        None => Vec::new(),
    };
    let payload_digest = session.push_blob(&tag, payload.clone()).await?;
    let annotation = signature::encode_signature(&sig);
    layers.retain(|l| {
        l.digest != payload_digest
            || l.annotations.as_ref().and_then(|a| a.get(SIGNATURE_ANNOTATION)) != Some(&annotation)
    });
    layers.push(OciDescriptor {
        media_type: PAYLOAD_MEDIA_TYPE.to_string(),
        digest: payload_digest,
        size: payload.len() as i64,
        annotations: Some(BTreeMap::from([(SIGNATURE_ANNOTATION.to_string(), annotation)])),
        ..Default::default()
    });
    // cosign's config for a signature image: the payloads as the rootfs' layers.
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "", "config": {}, "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}], "os": "",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .unwrap_or_default();
    let config_descriptor = OciDescriptor {
        media_type: oci_client::manifest::IMAGE_CONFIG_MEDIA_TYPE.to_string(),
        digest: digest_of(&config),
        size: config.len() as i64,
        ..Default::default()
    };
    session.push_blob(&tag, config).await?;
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(oci_client::manifest::OCI_IMAGE_MEDIA_TYPE.to_string()),
        config: config_descriptor,
        layers,
        ..Default::default()
    };
    let bytes = serde_json::to_vec(&manifest).unwrap_or_default();
    session.push_manifest(&tag, bytes, oci_client::manifest::OCI_IMAGE_MEDIA_TYPE).await?;
    Ok((digest, tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(key: &PrivateKey, digest: &str) -> Signature {
        let payload = Payload::new("r/p", digest).to_bytes();
        Signature { signature: key.sign(&payload).expect("sign"), payload }
    }

    fn trust_in(dir: &std::path::Path, key: &PrivateKey) -> Trust {
        let path = dir.join("k.pub");
        std::fs::write(&path, key.public().to_pem()).expect("write key");
        Trust { keys: vec![path], required: true }
    }

    #[test]
    fn unsigned_untrusted_and_replayed_signatures_are_told_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (ours, theirs) = (PrivateKey::generate().expect("key"), PrivateKey::generate().expect("key"));
        let trust = trust_in(dir.path(), &ours);
        let d = format!("sha256:{}", "1".repeat(64));
        let other = format!("sha256:{}", "2".repeat(64));
        assert!(matches!(verify(&trust, &d, &[]), Err(signature::Error::Unsigned(_))));
        assert!(matches!(verify(&trust, &d, &[signed(&theirs, &d)]), Err(signature::Error::Untrusted { .. })));
        assert!(matches!(verify(&trust, &d, &[signed(&ours, &other)]), Err(signature::Error::DigestMismatch { .. })));
        let ok = verify(&trust, &d, &[signed(&theirs, &d), signed(&ours, &d)]).expect("one trusted signature suffices");
        assert!(ok.key.contains("k.pub"));
        let mut tampered = signed(&ours, &d);
        tampered.payload[10] ^= 1;
        assert!(verify(&trust, &d, &[tampered]).is_err());
    }

    #[test]
    fn the_signature_tag_is_cosigns() {
        let r: Reference = "127.0.0.1:5000/policies/podset:v1".parse().expect("ref");
        let t = signature_tag(&r, &format!("sha256:{}", "ab".repeat(32)));
        assert_eq!(t.whole(), format!("127.0.0.1:5000/policies/podset:sha256-{}.sig", "ab".repeat(32)));
    }
}
